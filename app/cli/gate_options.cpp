#include "app/cli/gate_options.h"

#include "app/cli/cli_options.h"

#include <cstdint>
#include <string>

namespace tp {

namespace po = boost::program_options;

po::options_description accept_options() {
  po::options_description group =
      option_group("Acceptance (trainproof accept; docs/acceptance.md)");
  // clang-format off
  group.add_options()
      ("accept.stages", po::value<std::string>()->default_value("all"),
       "comma list of the stages to run, in this order whatever the list's: preflight "
       "(inventory, versions, topology, a probe of the checkpoint and data folders), sweep "
       "(allreduce and the other sweep.ops), pairwise (every pair of nodes; needs 2 or more "
       "nodes), train (with data.dir and checkpoint.dir when set), restore (a cold restore of "
       "the last checkpoint, its digest checked); or all. A skipped stage's checks are n/a")
      ("accept.time_budget_s", po::value<double>()->default_value(0.0),
       "> 0: the whole run's time budget, counted from its start. Past it, the running stage "
       "stops at its next stop point (a row of the sweep, a round of the pairwise pass, a "
       "training step), no further stage starts, and the report says the budget ran out "
       "(verdict INCOMPLETE, exit 1). 0: no budget")
      ("accept.stage_time_s", po::value<std::string>()->default_value(""),
       "STAGE=SECONDS[,STAGE=SECONDS...], e.g. pairwise=1800,train=900: a stage's own "
       "deadline (a decimal number of seconds from 0.001 to 1e7), counted from its start. Past it (or past the time budget, whichever comes "
       "first) the stage stops at its next stop point, as it does when the budget runs out, and "
       "the report names the stage's deadline. Empty: the stages share the budget");
  // clang-format on
  return group;
}

po::options_description gate_options() {
  po::options_description group = option_group(
      "Gate (accept, train, sweep; a threshold of 0 is not checked; docs/acceptance.md, "
      "\"Checks\")");
  // clang-format off
  group.add_options()
      ("gate.file", po::value<std::string>()->default_value("")->value_name("FILE"),
       "a file of [gate] options only (scenarios/hosts/*.ini: a host type's reference "
       "thresholds). Precedence: the command line, then this file, then --scenario: the host "
       "type is more specific than the workload. The report names each threshold's source")
      ("gate.scenario_hash", po::value<std::string>()->default_value(""),
       "the scenario hash the thresholds were measured with (set in a host file); a run of "
       "other work warns that AU and step CV thresholds may not apply")
      ("gate.warn_margin", po::value<double>()->default_value(0.05),
       "a check that clears its threshold by less than this share of it is WARN, in [0, 1)")
      ("gate.retries", po::value<int>()->default_value(0),
       "a stage with a failing check is run again up to this many times; a check that passes on "
       "a retry is WARN, and the report keeps every attempt")
      ("gate.min_busbw_gbps", po::value<double>()->default_value(0.0),
       "sweep: least in-place bus bandwidth (GB/s) of allreduce, allgather and reducescatter, "
       "each at gate.busbw_bytes")
      ("gate.busbw_bytes", po::value<int64_t>()->default_value(int64_t(64) << 20),
       "the smallest size gate.min_busbw_gbps must hold at: the best row at or above it counts")
      ("gate.min_pair_gbps", po::value<double>()->default_value(0.0),
       "pairwise: least bandwidth of every pair of nodes, one direction (GB/s); a pair below it "
       "is measured again and fails only below it by more than its measured noise, at any node "
       "count (the fraction rule is sweep.flag_fraction and sweep.fail_fraction)")
      ("gate.max_step_cv", po::value<double>()->default_value(0.0),
       "train: largest coefficient of variation (stddev / mean) of the step time")
      ("gate.min_au", po::value<double>()->default_value(0.0),
       "train: least accelerator utilisation (compute p50 / step p50)")
      ("gate.min_straggler_score", po::value<double>()->default_value(0.8),
       "train: least straggler score of any rank (median compute p50 / its own; low is slow)")
      ("gate.max_comm_exposed_fraction", po::value<double>()->default_value(0.0),
       "train: largest share of the step p50 spent waiting for communication after compute")
      ("gate.min_ckpt_write_gbps", po::value<double>()->default_value(0.0),
       "train: least aggregate checkpoint write bandwidth (GB/s)")
      ("gate.min_ckpt_write_gbps_per_node", po::value<double>()->default_value(0.0),
       "train: least aggregate checkpoint write bandwidth per node (GB/s), judged times the "
       "job's node count, so one host file holds at any size")
      ("gate.min_ckpt_write_gbps_per_gpu", po::value<double>()->default_value(0.0),
       "train: the same per GPU, times the ranks that drive a GPU (n/a without one)")
      ("gate.max_ckpt_overhead", po::value<double>()->default_value(0.0),
       "train: largest checkpoint.overhead, the share of training time checkpoints take "
       "(stall / (stall + the training between two saves), medians; 0 to 1)")
      ("gate.min_restore_gbps", po::value<double>()->default_value(0.0),
       "restore: least cold-restore read bandwidth (GB/s)")
      ("gate.min_restore_gbps_per_node", po::value<double>()->default_value(0.0),
       "restore: least cold-restore read bandwidth per node (GB/s), times the node count")
      ("gate.min_restore_gbps_per_gpu", po::value<double>()->default_value(0.0),
       "restore: the same per GPU, times the ranks that drive a GPU (n/a without one)")
      ("gate.max_restore_s", po::value<double>()->default_value(0.0),
       "restore: longest cold restore of the last checkpoint (s)")
      ("gate.min_goodput", po::value<double>()->default_value(0.0),
       "train: least goodput of the training stage (productive time over the training stage's "
       "own wall time, docs/acceptance.md)")
      ("gate.min_job_goodput", po::value<double>()->default_value(0.0),
       "train: least goodput of the whole job (productive time over the job's wall time: in "
       "accept, the preflight, sweep, pairwise pass and restore count as lost)")
      ("gate.drill", po::value<bool>()->default_value(false),
       "the recovery drill must PASS; judged when report merge joins the drill's report")
      ("gate.max_rto_s", po::value<double>()->default_value(0.0),
       "drill: longest recovery time (failure to the first step after the relaunch), s")
      ("gate.max_rpo_steps", po::value<double>()->default_value(0.0),
       "drill: most steps lost to a failure");
  // clang-format on
  return group;
}

po::options_description cost_options() {
  po::options_description group =
      option_group("Cost (docs/acceptance.md, \"Cost\"; 0: not priced; each rate at most 1e6)");
  // clang-format off
  group.add_options()
      ("cost.node_hour", po::value<double>()->default_value(0.0),
       "price of one node for one hour (give this or cost.gpu_hour)")
      ("cost.gpu_hour", po::value<double>()->default_value(0.0),
       "price of one GPU for one hour")
      ("cost.storage_gb_month", po::value<double>()->default_value(0.0),
       "price of keeping one GB for a month (the checkpoints kept)")
      ("cost.data_gb", po::value<double>()->default_value(0.0),
       "price of moving one GB (the dataset and checkpoint bytes read)")
      ("cost.overhead_fraction", po::value<double>()->default_value(0.0),
       "platform and operations, as a share added to the rest, 0 to 100")
      ("cost.failures_per_node_day", po::value<double>()->default_value(0.0),
       "expected failures per node and day (0 to 1e4), for the projection of what failures cost "
       "and the checkpoint interval that minimises it")
      ("cost.currency", po::value<std::string>()->default_value("USD"),
       "the unit every money figure is printed in");
  // clang-format on
  return group;
}

}  // namespace tp
