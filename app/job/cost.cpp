#include "app/job/cost.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "app/job/checkpoint_interval.h"
#include "common/errors.h"
#include "common/number_text.h"
#include "common/printf_text.h"

namespace tp {
namespace {

using nlohmann::json;
namespace po = boost::program_options;

constexpr double kSecondsPerHour = 3600;
constexpr double kSecondsPerDay = 86400;
constexpr double kSecondsPerMonth = 30 * kSecondsPerDay;  // the month of cost.storage_gb_month
constexpr double kBytesPerGb = 1e9;

std::string plain(double value) {
  return readable_number(value, 6);
}

// Bounds far above any real price, low enough that no product of rates, hours, nodes and bytes
// can overflow: every money figure stays finite (a JSON null means "not priced", never "too big").
constexpr double kMaxRate = 1e6;              // per node-hour, GPU-hour, GB-month or GB moved
constexpr double kMaxOverheadFraction = 100;  // +10,000%
constexpr double kMaxFailuresPerNodeDay = 1e4;

double rate_option(const po::variables_map& vm, const char* name, double most = kMaxRate) {
  const double value = vm[name].as<double>();
  if (!std::isfinite(value) || value < 0 || value > most)
    throw UsageError(std::string(name) + "=" + exact_number(value) +
                     " must be a number from 0 to " + exact_number(most) + " (0: not priced)");
  return value;
}

// The figures are finite by the bounds above; a figure that is not would be written as null and
// read as "not priced", so it is refused here rather than written.
void check_finite(const json& value, const std::string& where) {
  if (value.is_number_float() && !std::isfinite(value.get<double>()))
    throw RuntimeError("cost: " + where + " is not a finite number");
  if (value.is_object())
    for (auto it = value.begin(); it != value.end(); ++it)
      check_finite(*it, where + "/" + it.key());
  if (value.is_array())
    for (size_t i = 0; i < value.size(); ++i)
      check_finite(value[i], where + "/" + std::to_string(i));
}

// A part of the cost: empty when its rate is 0, so that "not priced" never reads as "free".
using Part = std::optional<double>;

Part sum(std::initializer_list<Part> parts) {
  Part total;
  for (const Part& p : parts)
    if (p) total = total.value_or(0) + *p;
  return total;
}

Part times(const Part& part, double factor) {
  return part ? Part(*part * factor) : Part();
}

json money(const Part& part) {
  return part ? json(*part) : json(nullptr);
}

// The rates turned into prices per unit of what the run measured.
struct Pricing {
  std::string compute_basis;  // "node_hour" or "gpu_hour"; empty when compute is not priced
  int compute_units = 0;      // nodes or GPUs
  Part compute_per_s;         // rate x units / 3600
  Part storage_per_gb_s;      // storage_gb_month / (30 x 86400)
  Part data_per_gb;
  double overhead_fraction = 0;
};

Pricing pricing_of(const CostRates& r, const CostInputs& in) {
  Pricing p;
  if (r.node_hour > 0) {
    p.compute_basis = "node_hour";
    p.compute_units = in.nodes;
    p.compute_per_s = r.node_hour * in.nodes / kSecondsPerHour;
  } else if (r.gpu_hour > 0 && in.gpus > 0) {
    p.compute_basis = "gpu_hour";
    p.compute_units = in.gpus;
    p.compute_per_s = r.gpu_hour * in.gpus / kSecondsPerHour;
  }
  if (r.storage_gb_month > 0) p.storage_per_gb_s = r.storage_gb_month / kSecondsPerMonth;
  if (r.data_gb > 0) p.data_per_gb = r.data_gb;
  p.overhead_fraction = r.overhead_fraction;
  return p;
}

// The overhead part on top of `base`: none when cost.overhead_fraction is 0.
Part overhead_on(const Pricing& p, const Part& base) {
  return p.overhead_fraction > 0 ? times(base, p.overhead_fraction) : Part();
}

// What the rates say about themselves: which parts are not priced, and why.
void explain_rates(const CostRates& r, const CostInputs& in, json& unpriced, json& notes) {
  const bool no_gpus = r.node_hour <= 0 && r.gpu_hour > 0 && in.gpus <= 0;
  const struct {
    const char* part;
    bool unpriced;
    const char* why;
  } parts[] = {
      {"compute", no_gpus, "cost.gpu_hour is set but the job ran on no GPU (give cost.node_hour)"},
      {"compute", r.node_hour <= 0 && r.gpu_hour <= 0,
       "cost.node_hour and cost.gpu_hour are 0 (not priced)"},
      {"storage", r.storage_gb_month <= 0, "cost.storage_gb_month is 0 (not priced)"},
      {"data", r.data_gb <= 0, "cost.data_gb is 0 (not priced)"},
      {"overhead", r.overhead_fraction <= 0, "cost.overhead_fraction is 0 (none added)"}};
  for (const auto& part : parts) {
    if (!part.unpriced) continue;
    unpriced.push_back(part.part);
    notes.push_back(std::string(part.part) + ": " + part.why);
  }
}

json inputs_json(const CostRates& r, const CostInputs& in) {
  return {{"rates",
           {{"node_hour", r.node_hour},
            {"gpu_hour", r.gpu_hour},
            {"storage_gb_month", r.storage_gb_month},
            {"data_gb", r.data_gb},
            {"overhead_fraction", r.overhead_fraction},
            {"failures_per_node_day", r.failures_per_node_day}}},
          {"nodes", in.nodes},
          {"gpus", in.gpus},
          {"wall_s", in.wall_s},
          {"training_wall_s", in.training_wall_s},
          {"steps_completed", in.steps_completed},
          {"tokens", in.tokens},
          {"checkpoint_bytes_kept", in.checkpoint_bytes_kept},
          {"bytes_read", in.bytes_read},
          {"step_s", in.step_s},
          {"checkpoint_stall_s", in.ckpt_stall_s},
          {"time_to_durable_s", in.time_to_durable_s},
          {"checkpoint_every", in.checkpoint_every},
          {"rto_s", in.rto_s ? json(*in.rto_s) : json(nullptr)},
          {"rpo_steps", in.rpo_steps ? json(*in.rpo_steps) : json(nullptr)}};
}

// One stage's cost over `wall_s`:
//   compute  = rate x units x wall_s / 3600
//   storage  = storage_gb_month x (checkpoint_bytes_kept / 1e9) x wall_s / (30 x 86400)
//   data     = data_gb x bytes_read / 1e9 (the training stage reads the dataset and any restore, so
//              it is charged every byte read too)
//   overhead = overhead_fraction x (compute + storage + data)
// Per 1,000 steps: total / steps_completed x 1000; per million tokens: total / tokens x 1e6.
json stage_json(const Pricing& p, const CostInputs& in, double wall_s) {
  const Part compute = times(p.compute_per_s, wall_s);
  const Part storage = times(p.storage_per_gb_s, in.checkpoint_bytes_kept / kBytesPerGb * wall_s);
  const Part data = times(p.data_per_gb, in.bytes_read / kBytesPerGb);
  const Part base = sum({compute, storage, data});
  const Part overhead = overhead_on(p, base);
  const Part total = sum({base, overhead});
  json per_steps = nullptr, per_tokens = nullptr;
  if (total && in.steps_completed > 0) per_steps = *total / double(in.steps_completed) * 1000;
  if (total && in.tokens > 0) per_tokens = *total / in.tokens * 1e6;
  return {{"wall_s", wall_s},
          {"compute", money(compute)},
          {"storage", money(storage)},
          {"data", money(data)},
          {"overhead", money(overhead)},
          {"total", money(total)},
          {"per_1000_steps", per_steps},
          {"per_million_tokens", per_tokens}};
}

// Seconds of the job priced at its compute rate, plus overhead: a loss, a failure, a day's
// expected failures.
Part compute_seconds(const Pricing& p, double seconds) {
  return times(p.compute_per_s, seconds * (1 + p.overhead_fraction));
}

// Each goodput loss category's share of the job's cost, largest first.
json losses_json(const Pricing& p, const CostInputs& in, const Part& job_total) {
  auto losses = in.losses;
  std::stable_sort(losses.begin(), losses.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  json out = json::array();
  for (const auto& [category, seconds] : losses) {
    const Part cost = compute_seconds(p, seconds);
    json entry = {{"category", category},
                  {"seconds", seconds},
                  {"share_of_wall", in.wall_s > 0 ? json(seconds / in.wall_s) : json(nullptr)},
                  {"cost", money(cost)},
                  {"per_1000_steps", nullptr},
                  {"share_of_cost", nullptr}};
    if (cost && in.steps_completed > 0)
      entry["per_1000_steps"] = *cost / double(in.steps_completed) * 1000;
    if (cost && job_total && *job_total > 0) entry["share_of_cost"] = *cost / *job_total;
    out.push_back(entry);
  }
  return out;
}

// Each failure of a drill: its redone work and recovery at the compute rate, plus an equal share
// of the storage of the checkpoints kept over the job (what made recovery possible; shared so
// that the failures' total counts it once), plus overhead.
json failures_json(const Pricing& p, const CostInputs& in, json& total_out) {
  json out = json::array();
  Part total;
  const double gb_s_each = in.checkpoint_bytes_kept / kBytesPerGb * in.wall_s /
                           double(std::max<size_t>(in.failures.size(), 1));
  for (const FailureCost& f : in.failures) {
    const Part work = times(p.compute_per_s, f.redone_s + f.recovery_s);
    const Part storage = times(p.storage_per_gb_s, gb_s_each);
    const Part base = sum({work, storage});
    const Part overhead = overhead_on(p, base);
    const Part cost = sum({base, overhead});
    total = sum({total, cost});
    out.push_back({{"redone_s", f.redone_s},
                   {"recovery_s", f.recovery_s},
                   {"work", money(work)},
                   {"checkpoint_storage", money(storage)},
                   {"overhead", money(overhead)},
                   {"total", money(cost)}});
  }
  total_out = money(total);
  return out;
}

json interval_json(long long steps, double seconds, double lost_fraction, const Pricing& p) {
  // A day of the job loses lost_fraction of itself to checkpoint stalls and redone work.
  return {{"steps", steps},
          {"seconds", seconds},
          {"lost_fraction", lost_fraction},
          {"cost_per_day", money(compute_seconds(p, lost_fraction * kSecondsPerDay))}};
}

// At cost.failures_per_node_day x nodes failures a day (MTBF 86400 / that), what they cost:
//   failures a day x (expected redone seconds + RTO) x compute rate per second x (1 + overhead)
// where a failure redoes half the interval the run used plus the time to durable. Beside it, the
// interval that minimises checkpoint stall plus expected redone work, and the run's own.
json projection_json(const CostRates& r, const Pricing& p, const CostInputs& in, json& notes) {
  const double per_day = r.failures_per_node_day * in.nodes;
  if (per_day <= 0) {
    notes.push_back("projection: cost.failures_per_node_day is 0 (none made)");
    return nullptr;
  }
  if (in.step_s <= 0) {
    notes.push_back("projection: no step time measured (none made)");
    return nullptr;
  }
  const double step_s = in.training_step_s > 0 ? in.training_step_s : in.step_s;
  const IntervalInputs ii{in.ckpt_stall_s, in.time_to_durable_s, kSecondsPerDay / per_day, step_s};
  json out = {{"failures_per_day", per_day}, {"mtbf_s", ii.mtbf_s}};
  double redone_s = in.training_wall_s / 2;  // without checkpoints a failure starts over
  std::string redone_basis = "half the training stage (no checkpoints)";
  out["used"] = nullptr;
  if (in.checkpoint_every > 0) {
    const double used_s = double(in.checkpoint_every) * step_s;
    redone_s = used_s / 2 + in.time_to_durable_s;
    redone_basis = "half the interval used plus the time to durable";
    out["used"] = interval_json(in.checkpoint_every, used_s, lost_fraction_at(ii, used_s), p);
  }
  const IntervalChoice best = optimal_checkpoint_interval(ii);
  out["optimal"] = best.steps > 0 ? interval_json(best.steps, best.seconds, best.lost_fraction, p)
                                  : json(nullptr);
  if (best.steps == 0) notes.push_back("projection: no optimal interval (no checkpoint stall)");
  out["redone_s_per_failure"] = redone_s;
  out["rto_s"] = in.rto_s ? json(*in.rto_s) : json(nullptr);
  out["measured_rpo_s"] = in.rpo_steps ? json(*in.rpo_steps * in.step_s) : json(nullptr);
  out["rests_on"] =
      in.rto_s ? "expected redone work (" + redone_basis + ") and the drill's RTO"
               : "expected redone work alone (" + redone_basis + "): no drill measured an RTO";
  out["failure_cost_per_day"] =
      money(compute_seconds(p, per_day * (redone_s + in.rto_s.value_or(0))));
  return out;
}

// A figure for the summary: three significant digits, whole numbers from 1,000 up (never
// "1.8e+04").
std::string figure(double value) {
  return readable_number(value);
}

std::string amount(const json& value) {
  return value.is_number() ? figure(value.get<double>()) : "not priced";
}

std::string per_work(const json& stage) {
  const json& steps = stage.at("per_1000_steps");
  const json& tokens = stage.at("per_million_tokens");
  std::string out = steps.is_number() ? amount(steps) + " per 1,000 steps" : "no step completed";
  if (tokens.is_number()) out += ", " + amount(tokens) + " per million tokens";
  return out;
}

// "node_hour 3.2 x 2 nodes", or why compute is not priced.
std::string compute_basis(const json& cost) {
  const json& rate = cost.at("compute_rate");
  if (rate.at("basis").is_null()) return "compute not priced";
  const std::string basis = rate.at("basis").get<std::string>();
  const int units = rate.at("units").get<int>();
  const double each = cost.at("inputs").at("rates").at(basis).get<double>();
  const char* unit = basis == "node_hour" ? "node" : "GPU";
  return printf_text("%s %s x %d %s%s", basis.c_str(), readable_number(each, 6).c_str(), units,
                     unit, units == 1 ? "" : "s");
}

std::string projection_line(const json& proj) {
  std::string out = printf_text("  projection at %s failures a day (MTBF %s s): failures cost ",
                                readable_number(proj.at("failures_per_day").get<double>()).c_str(),
                                figure(proj.at("mtbf_s").get<double>()).c_str());
  out += proj.at("failure_cost_per_day").is_number()
             ? amount(proj.at("failure_cost_per_day")) + " a day"
             : "not priced";
  if (proj.at("rto_s").is_null()) out += " (redone work alone: no RTO measured)";
  const json& best = proj.at("optimal");
  const json& used = proj.at("used");
  if (best.is_object())
    out += printf_text(
        "; checkpoint every %lld steps (%s s of training) to lose %s to "
        "checkpoints and redone work",
        best.at("steps").get<long long>(), figure(best.at("seconds").get<double>()).c_str(),
        readable_percent(best.at("lost_fraction").get<double>()).c_str());
  if (used.is_object())
    out += printf_text("; the run's %lld steps (%s s) lose %s", used.at("steps").get<long long>(),
                       figure(used.at("seconds").get<double>()).c_str(),
                       readable_percent(used.at("lost_fraction").get<double>()).c_str());
  return out;
}

}  // namespace

bool CostRates::priced() const {
  return node_hour > 0 || gpu_hour > 0 || storage_gb_month > 0 || data_gb > 0;
}

CostRates cost_rates_from(const po::variables_map& vm) {
  CostRates r;
  r.node_hour = rate_option(vm, "cost.node_hour");
  r.gpu_hour = rate_option(vm, "cost.gpu_hour");
  r.storage_gb_month = rate_option(vm, "cost.storage_gb_month");
  r.data_gb = rate_option(vm, "cost.data_gb");
  r.overhead_fraction = rate_option(vm, "cost.overhead_fraction", kMaxOverheadFraction);
  r.failures_per_node_day = rate_option(vm, "cost.failures_per_node_day", kMaxFailuresPerNodeDay);
  if (r.node_hour > 0 && r.gpu_hour > 0)
    throw UsageError("cost.node_hour=" + plain(r.node_hour) + " and cost.gpu_hour=" +
                     plain(r.gpu_hour) + " are both set: give one or the other");
  r.currency = vm["cost.currency"].as<std::string>();
  const bool printable = std::all_of(r.currency.begin(), r.currency.end(),
                                     [](unsigned char c) { return c >= 0x20 && c != 0x7f; });
  if (r.currency.empty() || r.currency.size() > 16 || !printable)
    throw UsageError("cost.currency='" + r.currency +
                     "' must be 1 to 16 printable characters (e.g. USD)");
  return r;
}

json cost_json(const CostRates& rates, const CostInputs& in) {
  const Pricing p = pricing_of(rates, in);
  json unpriced = json::array(), notes = json::array();
  explain_rates(rates, in, unpriced, notes);
  if (in.steps_completed <= 0) notes.push_back("per_1000_steps: no step completed");
  if (in.tokens <= 0) notes.push_back("per_million_tokens: no token counted");
  if (p.data_per_gb)
    notes.push_back("training: its data part counts every byte read (the stage reads them)");
  if (p.storage_per_gb_s && !in.failures.empty())
    notes.push_back("failures: each carries an equal share of the job's checkpoint storage");
  json cost = {{"priced", p.compute_per_s || p.storage_per_gb_s || p.data_per_gb},
               {"currency", rates.currency},
               {"inputs", inputs_json(rates, in)},
               {"compute_rate",
                {{"basis", p.compute_basis.empty() ? json(nullptr) : json(p.compute_basis)},
                 {"units", p.compute_units},
                 {"per_hour", money(times(p.compute_per_s, kSecondsPerHour))}}}};
  cost["job"] = stage_json(p, in, in.wall_s);
  cost["training"] = stage_json(p, in, in.training_wall_s);
  const json& job_total = cost["job"]["total"];
  cost["losses"] =
      losses_json(p, in, job_total.is_number() ? Part(job_total.get<double>()) : Part());
  json failures_total;
  cost["failures"] = failures_json(p, in, failures_total);
  cost["failures_total"] = failures_total;
  cost["projection"] = projection_json(rates, p, in, notes);
  cost["unpriced"] = unpriced;
  cost["notes"] = notes;
  check_finite(cost, "cost");
  return cost;
}

std::vector<std::string> cost_lines(const json& cost) {
  std::vector<std::string> lines;
  const std::string currency = cost.at("currency").get<std::string>();
  if (!cost.at("priced").get<bool>()) {
    lines.push_back(
        "cost: not priced (set cost.node_hour or cost.gpu_hour, cost.storage_gb_month, "
        "cost.data_gb)");
  } else {
    const json& job = cost.at("job");
    lines.push_back("cost (" + currency + ", " + compute_basis(cost) + "): " + per_work(job) +
                    "; job " + amount(job.at("total")));
    const json& training = cost.at("training");
    lines.push_back("  training stage: " + per_work(training) + "; stage " +
                    amount(training.at("total")));
    for (const json& loss : cost.at("losses")) {
      if (!loss.at("cost").is_number()) continue;
      lines.push_back("  lost to " + loss.at("category").get<std::string>() + ": " +
                      amount(loss.at("cost")) + " (" + figure(loss.at("seconds").get<double>()) +
                      " s)");
    }
    const size_t failures = cost.at("failures").size();
    if (failures > 0)
      lines.push_back(printf_text("  drill: %zu failure%s cost %s", failures,
                                  failures == 1 ? "" : "s",
                                  amount(cost.at("failures_total")).c_str()));
  }
  // A rate that was given but prices nothing (cost.gpu_hour on a run without a GPU) is said
  // here, not only in cost.notes.
  for (const json& note : cost.value("notes", json::array()))
    if (note.is_string() && note.get<std::string>().find(" is set but ") != std::string::npos)
      lines.push_back("  not priced: " + note.get<std::string>());
  if (cost.at("projection").is_object()) lines.push_back(projection_line(cost.at("projection")));
  return lines;
}

}  // namespace tp
