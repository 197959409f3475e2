#pragma once
// What the completed work cost (docs/acceptance.md, "Cost"): the run's measured wall time,
// checkpoints kept and bytes read, priced at the rates of the [cost] options; the part of it each
// goodput loss cost; what each failure of a drill cost; and a projection of what failures cost a
// day, beside the checkpoint interval that minimises them (app/job/checkpoint_interval.h). Pure:
// the caller gathers the measurements, so every figure can be checked by hand.
#include <boost/program_options.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tp {

// The [cost] options. 0 means not priced: that part of the cost is null, never a free 0.
struct CostRates {
  double node_hour = 0;  // one node for one hour; or gpu_hour, never both
  double gpu_hour = 0;
  double storage_gb_month = 0;       // keeping one GB (1e9 bytes) for a 30-day month
  double data_gb = 0;                // moving (reading) one GB
  double overhead_fraction = 0;      // platform and operations, a share added to every other part
  double failures_per_node_day = 0;  // for the projection; not a price
  std::string currency = "USD";
  // A rate was given for compute, storage or data (cost_json's "priced" also asks whether the job
  // can use it: cost.gpu_hour prices nothing on a job without GPUs).
  bool priced() const;
};

// Throws UsageError naming the option for a negative, NaN or infinite value, for both
// cost.node_hour and cost.gpu_hour given, and for a currency that is empty, longer than 16
// characters or holds a control character.
CostRates cost_rates_from(const boost::program_options::variables_map& vm);

// One failure a drill recovered from.
struct FailureCost {
  double redone_s = 0;    // the steps computed twice, as step-seconds
  double recovery_s = 0;  // the RTO: from the fault to the first step after the relaunch
};

struct CostInputs {
  double wall_s = 0;           // the job's wall time, every stage
  double training_wall_s = 0;  // the training stage alone
  int nodes = 1;
  int gpus = 0;  // 0 on CPU hosts: cost.gpu_hour then prices nothing, and the section says so
  int64_t steps_completed = 0;
  double tokens = 0;
  double checkpoint_bytes_kept = 0;  // the checkpoints kept at the end
  double bytes_read = 0;             // dataset and checkpoint restore bytes read
  // Goodput loss category -> seconds of the job's wall time ("warmup", "data_stall", ...).
  std::vector<std::pair<std::string, double>> losses;
  double step_s = 0;  // the measured step time
  // The step without its checkpoint phase (checkpoint.training_between_s / every): the training
  // an interval holds, as the checkpoint overhead counts it; step_s when not measured.
  double training_step_s = 0;
  double ckpt_stall_s = 0;            // training time one checkpoint costs
  double time_to_durable_s = 0;       // a save's start to its commit
  int64_t checkpoint_every = 0;       // checkpoint.every, in steps; 0 when none were taken
  std::optional<double> rto_s;        // a drill's, when one was merged
  std::optional<double> rpo_steps;    // likewise
  std::vector<FailureCost> failures;  // a drill's
};

// The report's `cost` section, every money figure in `currency`. Always present: with nothing
// priced it says "priced": false and still carries the quantities and the projection's intervals.
// A figure whose rate is 0 is null. Members: priced, currency, inputs (the rates and every
// measured quantity used), compute_rate, job and training (compute, storage, data, overhead, total,
// per_1000_steps, per_million_tokens), losses[] (largest first), failures[] and failures_total,
// projection (null without cost.failures_per_node_day), unpriced (the parts without a rate) and
// notes (why, and what else a figure rests on).
nlohmann::json cost_json(const CostRates& rates, const CostInputs& in);

// The summary's cost lines, without trailing newlines: the headline, the training stage, one line
// per priced loss category (largest first), the drill's failures, and the projection.
std::vector<std::string> cost_lines(const nlohmann::json& cost);

}  // namespace tp
