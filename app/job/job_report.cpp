#include "app/job/job_report.h"

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <set>

#include "mpi/gather.h"

namespace tp {
namespace {

using nlohmann::json;

// scontrol prints times as 2026-12-01T19:05:46 in the controller's local time; both fields are
// read the same way, so the zone cancels out.
std::optional<double> field_time(const std::string& text, const std::string& field) {
  const size_t at = text.find(field + "=");
  if (at == std::string::npos) return std::nullopt;
  std::tm tm{};
  const std::string value = text.substr(at + field.size() + 1, 19);
  if (std::sscanf(value.c_str(), "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6)
    return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return double(timegm(&tm));
}

double number_or(const json& report, const json::json_pointer& at, double fallback) {
  return report.contains(at) && report[at].is_number() ? report[at].get<double>() : fallback;
}

}  // namespace

StepPhaseSums phase_sums(const std::vector<StepTiming>& measured) {
  StepPhaseSums sums;
  for (const StepTiming& t : measured) {
    sums.data += t.data;
    sums.comm_exposed += t.comm_exposed;
    sums.checkpoint += t.checkpoint;
  }
  return sums;
}

std::optional<double> queue_seconds_from(const std::string& text) {
  const auto submit = field_time(text, "SubmitTime");
  const auto start = field_time(text, "StartTime");
  if (!submit || !start || *start < *submit) return std::nullopt;
  return *start - *submit;
}

std::optional<double> slurm_queue_seconds(std::string& note) {
  const char* job = std::getenv("SLURM_JOB_ID");
  if (!job) {
    note = kNoQueueNote;
    return std::nullopt;
  }
  const std::string id = job;
  if (id.find_first_not_of("0123456789_") != std::string::npos) {
    note = "SLURM_JOB_ID is not a job id: no queue time";
    return std::nullopt;
  }
  std::string text;
  if (FILE* pipe = ::popen(("scontrol show job " + id + " 2>/dev/null").c_str(), "r")) {
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) text.append(buffer, n);
    ::pclose(pipe);
  }
  const std::optional<double> queue = queue_seconds_from(text);
  note = queue ? "Slurm job " + id +
                     ": SubmitTime to StartTime (scontrol show job), before the "
                     "processes started, so beside the wall time"
               : "Slurm job " + id + ": scontrol show job gave no SubmitTime and StartTime";
  return queue;
}

json gather_job_section(const World& world, JobClock& clock, const StepPhaseSums& mine) {
  clock.mark(kTeardown);
  json sent = clock.to_json();
  sent["sums"] = {mine.data, mine.comm_exposed, mine.checkpoint};
  const std::vector<json> all = gather_records_at_root(world, sent);
  if (world.rank != 0) return nullptr;
  std::vector<RankTimeline> ranks;
  for (size_t r = 0; r < all.size(); ++r) {
    const json& s = all[r]["sums"];
    ranks.push_back(rank_timeline(int(r), all[r], {s[0], s[1], s[2]}));
  }
  std::string note;
  const std::optional<double> queue = slurm_queue_seconds(note);
  return job_json(ranks, queue, note);
}

CostInputs cost_inputs_from(const json& report) {
  CostInputs in;
  const json& job = report.at("job");
  in.wall_s = job.value("wall_s", 0.0);
  in.training_wall_s = in.wall_s;
  for (const json& c : job.value("categories", json::array()))
    for (const std::string& stage : kNonTrainingSegments)
      if (c.value("name", "") == stage) in.training_wall_s -= c.value("seconds", 0.0);
  for (const json& lost : job.value("lost", json::array()))
    in.losses.emplace_back(lost.value("name", ""), lost.value("seconds", 0.0));
  std::set<std::string> hosts;
  for (const json& r : report.value("ranks", json::array())) {
    hosts.insert(r.value("host", ""));
    if (r.contains("gpu") && !r["gpu"].is_null()) ++in.gpus;
  }
  in.nodes = std::max<int>(1, int(hosts.size()));
  using P = json::json_pointer;
  in.steps_completed = int64_t(number_or(report, P("/train/steps_run"), 0));
  in.tokens = double(in.steps_completed) * number_or(report, P("/train/model/global_batch"), 0) *
              number_or(report, P("/train/model/seq"), 0);
  in.step_s = number_or(report, P("/train/phases/step/p50"), 0);
  if (report.contains("checkpoint") && report["checkpoint"].is_object()) {
    const json& c = report["checkpoint"];
    const double saves = c.contains("saves") ? double(c["saves"].size()) : 0.0;
    const double kept = std::min<double>(c.value("keep", 0), saves);
    in.checkpoint_bytes_kept = number_or(c, P("/bytes"), 0) * kept;
    in.checkpoint_every = c.value("every", int64_t(0));
    in.ckpt_stall_s = number_or(c, P("/stall_s/p50"), 0);
    const double between = number_or(c, P("/training_between_s"), 0);
    if (between > 0 && in.checkpoint_every > 0)
      in.training_step_s = between / double(in.checkpoint_every);
    in.time_to_durable_s = number_or(c, P("/total_s/p50"), 0);
    for (const json& save : c.value("saves", json::array()))
      if (save.contains("time_to_durable_s"))
        in.time_to_durable_s =
            std::max(in.time_to_durable_s, save["time_to_durable_s"].get<double>());
    in.bytes_read += number_or(c, P("/restore/bytes"), 0);
  }
  if (in.training_step_s <= 0) in.training_step_s = in.step_s;
  in.bytes_read += number_or(report, P("/data/bytes_read"), 0);
  in.bytes_read += number_or(report, P("/restore/bytes"), 0);
  if (report.contains("drill") && report["drill"].is_object()) {
    const json& d = report["drill"];
    if (d.contains("rto_s") && d["rto_s"].is_number()) in.rto_s = d["rto_s"].get<double>();
    if (d.contains("rpo_steps") && d["rpo_steps"].is_number())
      in.rpo_steps = d["rpo_steps"].get<double>();
    for (const json& f : d.value("failures", json::array()))
      in.failures.push_back(
          {number_or(f, P("/rpo_steps"), 0) * in.step_s, number_or(f, P("/rto_s"), 0)});
  }
  return in;
}

}  // namespace tp
