#include "app/judge/gate_config.h"

#include <algorithm>
#include <cmath>

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
  const char* per = "";  // "node", "gpu": a figure per unit, scaled by the job's size
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
    {"min_ckpt_write_gbps_per_node", Direction::at_least, "train",
     "checkpoint write bandwidth per node", "node"},
    {"min_ckpt_write_gbps_per_gpu", Direction::at_least, "train",
     "checkpoint write bandwidth per GPU", "gpu"},
    {"max_ckpt_overhead", Direction::at_most, "train", "checkpoint overhead"},
    {"min_goodput", Direction::at_least, "train", "goodput of the training stage"},
    {"min_job_goodput", Direction::at_least, "train", "goodput of the whole job"},
    {"min_restore_gbps", Direction::at_least, "restore", "cold-restore bandwidth"},
    {"min_restore_gbps_per_node", Direction::at_least, "restore", "cold-restore bandwidth per node",
     "node"},
    {"min_restore_gbps_per_gpu", Direction::at_least, "restore", "cold-restore bandwidth per GPU",
     "gpu"},
    {"max_restore_s", Direction::at_most, "restore", "cold-restore time"},
    {"max_rto_s", Direction::at_most, "drill", "recovery time of a failure"},
    {"max_rpo_steps", Direction::at_most, "drill", "steps lost to a failure"},
};

// "--gate.min_au on the command line", "gate.min_au in gate.file F", "the default gate.min_au".
std::string source_of(const std::map<std::string, std::string>& sources, const std::string& name) {
  const auto found = sources.find(name);
  if (found == sources.end()) return "the default " + name;
  if (found->second == "command line") return "--" + name + " on the command line";
  return name + " in " + found->second;
}

// A threshold given for a stage that will not run could never be judged: refused before the
// job starts, naming the metric and the stage that would measure it.
void check_stage_selected(const GateConfig& c, const ThresholdOption& o, const std::string& source,
                          const std::string& stages_named_by) {
  if (std::string(o.stage) == "drill" || c.runs(o.stage)) return;
  throw UsageError(source + " judges the " + o.metric + ", which only stage " + o.stage +
                   " measures, and " + stages_named_by +
                   (stages_named_by == "accept.stages" ? " leaves " + std::string(o.stage) + " out"
                                                       : " does not run it"));
}

GateThreshold gate_threshold(const ThresholdOption& o, double limit, const std::string& source) {
  GateThreshold t;
  t.threshold.check = o.name;
  t.threshold.direction = o.direction;
  t.threshold.limit = limit;
  t.threshold.source = source;
  t.stage = o.stage;
  t.metric = o.metric;
  t.per = o.per;
  return t;
}

// The checkpoint figures exist only when train checkpoints.
void check_checkpoints_measured(const ThresholdOption& o, const TrainConfig& train,
                                const std::string& source) {
  const std::string name = o.name;
  if ((name.rfind("min_ckpt_write_gbps", 0) != 0 && name != "max_ckpt_overhead") ||
      (!train.checkpoint_dir.empty() && train.checkpoint_every > 0))
    return;
  throw UsageError(source + " judges the " + o.metric +
                   ", which train measures only with checkpoint.dir and checkpoint.every");
}

void read_thresholds(const po::variables_map& vm, const std::map<std::string, std::string>& sources,
                     const TrainConfig& train, const std::string& stages_named_by, GateConfig& c) {
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
      check_stage_selected(c, o, source, stages_named_by);
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

}  // namespace

bool GateConfig::runs(const std::string& stage) const {
  return std::find(stages.begin(), stages.end(), stage) != stages.end();
}

GateConfig gate_config_from(const po::variables_map& vm,
                            const std::map<std::string, std::string>& sources,
                            const TrainConfig& train, std::vector<std::string> stages,
                            const std::string& stages_named_by) {
  GateConfig c;
  c.stages = std::move(stages);
  c.warn_margin = in_range(vm, "gate.warn_margin", 0.0, 0.999999, false);
  c.busbw_bytes = vm["gate.busbw_bytes"].as<int64_t>();
  if (c.busbw_bytes < 1)
    throw UsageError("gate.busbw_bytes must be >= 1, got " + std::to_string(c.busbw_bytes));
  read_thresholds(vm, sources, train, stages_named_by, c);
  return c;
}

GateConfig every_gate_threshold(int64_t busbw_bytes) {
  GateConfig config;
  config.stages = {"preflight", "sweep", "pairwise", "train", "restore", "drill"};
  config.busbw_bytes = busbw_bytes;
  for (const ThresholdOption& o : kThresholdOptions) {
    const double limit = o.direction == Direction::at_least ? 0.0 : 1e300;
    config.thresholds.push_back(
        {{o.name, o.direction, limit, "every_gate_threshold"}, o.stage, o.metric, o.per, false});
  }
  return config;
}

nlohmann::json thresholds_json(const GateConfig& config) {
  nlohmann::json out = nlohmann::json::array();
  for (const GateThreshold& t : config.thresholds) {
    out.push_back(
        {{"check", t.threshold.check},
         {"direction", t.threshold.direction == Direction::at_least ? "at_least" : "at_most"},
         {"limit", t.threshold.limit},
         {"source", t.threshold.source},
         {"stage", t.stage},
         {"metric", t.metric}});
    if (!t.per.empty()) out.back()["per"] = t.per;  // the limit is per node or GPU
  }
  return out;
}

}  // namespace tp
