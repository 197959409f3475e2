#include "app/accept/accept_config.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "app/cli/option_values.h"
#include "common/errors.h"
#include "common/number_text.h"

namespace tp {
namespace {

namespace po = boost::program_options;

struct ThresholdOption {
  const char* name;  // after "gate."
  Direction direction;
  const char* stage;
  const char* metric;
};

// Every threshold of the [gate] section, the stage that measures it, and what it is.
const ThresholdOption kThresholdOptions[] = {
    {"min_busbw_gbps", Direction::at_least, "sweep", "in-place bus bandwidth per operation"},
    {"min_pair_gbps", Direction::at_least, "pairwise", "bandwidth of every pair of nodes"},
    {"max_step_cv", Direction::at_most, "train", "coefficient of variation of the step time"},
    {"min_au", Direction::at_least, "train", "accelerator utilisation"},
    {"min_straggler_score", Direction::at_least, "train", "every rank's straggler score"},
    {"max_comm_exposed_fraction", Direction::at_most, "train",
     "exposed communication over the step time"},
    {"min_ckpt_write_gbps", Direction::at_least, "train", "checkpoint write bandwidth"},
    {"max_ckpt_stall_fraction", Direction::at_most, "train", "checkpoint stall fraction"},
    {"min_goodput", Direction::at_least, "train", "goodput"},
    {"min_restore_gbps", Direction::at_least, "restore", "cold-restore bandwidth"},
    {"max_restore_s", Direction::at_most, "restore", "cold-restore time"},
    {"max_rto_s", Direction::at_most, "drill", "recovery time of a failure"},
    {"max_rpo_steps", Direction::at_most, "drill", "steps lost to a failure"},
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

std::vector<std::string> stages_from(const std::string& text) {
  const std::vector<std::string> named = split_list(text);
  if (named.empty()) throw UsageError("accept.stages is empty (give stages, or all)");
  if (named == std::vector<std::string>{"all"}) return kAcceptStages;
  if (std::find(named.begin(), named.end(), "all") != named.end())
    throw UsageError("accept.stages: 'all' stands alone (got '" + text + "')");
  std::vector<std::string> stages;
  for (const std::string& stage : kAcceptStages)
    if (std::find(named.begin(), named.end(), stage) != named.end()) stages.push_back(stage);
  for (const std::string& stage : named)
    if (std::find(kAcceptStages.begin(), kAcceptStages.end(), stage) == kAcceptStages.end())
      throw UsageError("accept.stages: unknown stage '" + stage +
                       "' (known: preflight, sweep, pairwise, train, restore, or all)");
  return stages;
}

// "pairwise=1800,train=900": each a selected stage, once, with a number of seconds above 0.
std::map<std::string, double> stage_times_from(const std::string& text,
                                               const std::vector<std::string>& selected) {
  std::map<std::string, double> times;
  for (const std::string& entry : split_list(text)) {
    const size_t eq = entry.find('=');
    const std::string stage = entry.substr(0, eq);
    const std::string prefix = "accept.stage_time_s: '" + entry + "': ";
    if (eq == std::string::npos)
      throw UsageError(prefix + "expected STAGE=SECONDS, e.g. pairwise=1800");
    if (std::find(kAcceptStages.begin(), kAcceptStages.end(), stage) == kAcceptStages.end())
      throw UsageError(prefix +
                       "unknown stage (known: preflight, sweep, pairwise, train, "
                       "restore)");
    if (std::find(selected.begin(), selected.end(), stage) == selected.end())
      throw UsageError(prefix + "stage " + stage + " is not in accept.stages");
    const std::string number = entry.substr(eq + 1);
    char* end = nullptr;
    const double seconds = std::strtod(number.c_str(), &end);
    if (number.empty() || *end != '\0' || !(seconds > 0) || seconds > 1e7)
      throw UsageError(prefix + "seconds must be a number above 0 and at most 1e7");
    if (!times.emplace(stage, seconds).second)
      throw UsageError(prefix + "stage " + stage + " is given twice");
  }
  return times;
}

// "--gate.min_au on the command line", "gate.min_au in gate.file F", "the default gate.min_au".
std::string source_of(const std::map<std::string, std::string>& sources, const std::string& name) {
  const auto found = sources.find(name);
  if (found == sources.end()) return "the default " + name;
  if (found->second == "command line") return "--" + name + " on the command line";
  return name + " in " + found->second;
}

// A threshold given for a stage that will not run could never be judged: refused before the
// job starts, naming the metric and the stage that would measure it.
void check_stage_selected(const AcceptConfig& c, const ThresholdOption& o,
                          const std::string& source) {
  if (std::string(o.stage) == "drill" || c.runs(o.stage)) return;
  throw UsageError(source + " judges the " + o.metric + ", which only stage " + o.stage +
                   " measures, and accept.stages leaves " + o.stage + " out");
}

GateThreshold gate_threshold(const ThresholdOption& o, double limit, const std::string& source) {
  GateThreshold t;
  t.threshold.check = o.name;
  t.threshold.direction = o.direction;
  t.threshold.limit = limit;
  t.threshold.source = source;
  t.stage = o.stage;
  t.metric = o.metric;
  return t;
}

// The checkpoint figures exist only when train checkpoints.
void check_checkpoints_measured(const ThresholdOption& o, const TrainConfig& train,
                                const std::string& source) {
  const std::string name = o.name;
  if ((name != "min_ckpt_write_gbps" && name != "max_ckpt_stall_fraction") ||
      (!train.checkpoint_dir.empty() && train.checkpoint_every > 0))
    return;
  throw UsageError(source + " judges the " + o.metric +
                   ", which train measures only with checkpoint.dir and checkpoint.every");
}

void read_thresholds(const po::variables_map& vm, const std::map<std::string, std::string>& sources,
                     const TrainConfig& train, AcceptConfig& c) {
  for (const ThresholdOption& o : kThresholdOptions) {
    const std::string name = std::string("gate.") + o.name;
    const double limit = vm[name].as<double>();
    if (!std::isfinite(limit) || limit < 0)
      throw UsageError(name + " must be >= 0 (0: not checked), got " + exact_number(limit));
    if (limit == 0) continue;
    const std::string source = source_of(sources, name);
    // A host or scenario file describes thresholds for every stage; only one given for this run
    // on the command line must be measurable by it.
    const auto given = sources.find(name);
    if (given != sources.end() && given->second == "command line") {
      check_stage_selected(c, o, source);
      check_checkpoints_measured(o, train, source);
    }
    c.thresholds.push_back(gate_threshold(o, limit, source));
    c.thresholds.back().advisory = sources.find(name) == sources.end();
  }
  if (vm["gate.drill"].as<bool>()) {
    const ThresholdOption drill{"drill", Direction::at_least, "drill", "recovery drill's verdict"};
    c.thresholds.push_back(gate_threshold(drill, 1.0, source_of(sources, "gate.drill")));
  }
}

// The restore stage proves the last checkpoint restores the final state bit for bit, so the
// last step must be one that checkpoints, in a folder train wrote.
void check_restore_stage(const AcceptConfig& c, const TrainConfig& train) {
  if (!c.runs("restore")) return;
  if (!c.runs("train"))
    throw UsageError("accept.stages: restore needs train (it restores the checkpoint train wrote)");
  if (train.checkpoint_dir.empty() || train.checkpoint_every == 0)
    throw UsageError(
        "accept.stages: restore needs checkpoint.dir and checkpoint.every (or leave restore out)");
  if (train.steps % train.checkpoint_every != 0)
    throw UsageError(
        "accept.stages: restore checks the last checkpoint against the final state, "
        "so train.steps=" +
        std::to_string(train.steps) +
        " must be a multiple of checkpoint.every=" + std::to_string(train.checkpoint_every));
}

}  // namespace

bool AcceptConfig::runs(const std::string& stage) const {
  return std::find(stages.begin(), stages.end(), stage) != stages.end();
}

AcceptConfig accept_config_from(const po::variables_map& vm,
                                const std::map<std::string, std::string>& sources,
                                const TrainConfig& train) {
  AcceptConfig c;
  c.stages = stages_from(vm["accept.stages"].as<std::string>());
  c.warn_margin = in_range(vm, "gate.warn_margin", 0.0, 0.999999, false);
  c.retries = bounded(vm, "gate.retries", 0, 10, "re-runs of a failing stage");
  c.busbw_bytes = vm["gate.busbw_bytes"].as<int64_t>();
  if (c.busbw_bytes < 1)
    throw UsageError("gate.busbw_bytes must be >= 1, got " + std::to_string(c.busbw_bytes));
  c.expected_hash = vm["gate.scenario_hash"].as<std::string>();
  c.baseline = vm["baseline"].as<std::string>();
  c.tolerance = in_range(vm, "tolerance", 0.0, 1.0, true);
  c.time_budget_s = in_range(vm, "accept.time_budget_s", 0.0, 1e7, false);
  c.stage_time_s = stage_times_from(vm["accept.stage_time_s"].as<std::string>(), c.stages);
  read_thresholds(vm, sources, train, c);
  check_restore_stage(c, train);
  return c;
}

nlohmann::json thresholds_json(const AcceptConfig& config) {
  nlohmann::json out = nlohmann::json::array();
  for (const GateThreshold& t : config.thresholds)
    out.push_back(
        {{"check", t.threshold.check},
         {"direction", t.threshold.direction == Direction::at_least ? "at_least" : "at_most"},
         {"limit", t.threshold.limit},
         {"source", t.threshold.source},
         {"stage", t.stage},
         {"metric", t.metric}});
  return out;
}

}  // namespace tp
