// Which option groups each subcommand reads, so that its --help lists those and no others
// (`sweep --help` once listed 487 lines of model, checkpoint, data, drill and cost options a sweep
// never reads). tests/unit/test_cli.cpp holds each list to the code: the readers a subcommand
// calls before it starts work from the options of its groups alone.
#include "app/cli/cli_options.h"

#include <algorithm>
#include <map>

#include "common/errors.h"

namespace tp {
namespace {

namespace po = boost::program_options;

// What train_config_from reads (app/cli/cli.cpp): train, prepare-data, and the runs of a drill.
#define TP_TRAINING_GROUPS \
  "model", "train", "compute", "comm", "checkpoint", "watchdog", "faults", "data", "preflight"

const std::map<std::string, std::vector<std::string>>& groups_by_subcommand() {
  static const std::map<std::string, std::vector<std::string>> table = {
      // `trainproof --help`: the overview and the options every subcommand reads.
      {"", {"general"}},
      // train_config_from, cost_rates_from, gate_config_from (its stage's thresholds).
      {"train", {"general", TP_TRAINING_GROUPS, "gate", "cost"}},
      // drill_options_from, and every training option forwarded to each run.
      {"drill", {"general", TP_TRAINING_GROUPS, "drill", "gate", "cost"}},
      // train_config_from, accept_config_from (its level and health.*), sweep_config_from,
      // cost_rates_from.
      {"accept", {"general", TP_TRAINING_GROUPS, "sweep", "accept", "gate", "cost", "health"}},
      // sweep_config_from, stage_config_from (backends, watchdog, preflight), gate_config_from.
      {"sweep", {"general", "compute", "comm", "watchdog", "preflight", "sweep", "gate"}},
      // train_config_from: the dataset's shape, and the seed its content follows.
      {"prepare-data", {"general", TP_TRAINING_GROUPS}},
      // node_check_config_from: the level; gate.file's [inventory] is read by parse_invocation.
      {"node-check", {"general", "health", "node"}},
      // Its own options (format, min-status, share); tolerance, html, baseline and trace are
      // common ones, as train, sweep and accept read them too.
      {"report", {"general", "report"}},
  };
  return table;
}

#undef TP_TRAINING_GROUPS

}  // namespace

const std::vector<std::string>& option_groups_of(const std::string& subcommand) {
  const auto& table = groups_by_subcommand();
  const auto found = table.find(subcommand);
  if (found == table.end()) throw UsageError("no subcommand '" + subcommand + "'");
  return found->second;
}

po::options_description option_registry_of(const std::vector<std::string>& groups,
                                           bool with_test_hooks) {
  po::options_description all = option_group("");
  for (const OptionGroup& group : option_groups()) {
    const bool hooks = group.name == kTestHooksGroup;
    if (hooks ? with_test_hooks : std::count(groups.begin(), groups.end(), group.name) > 0)
      all.add(group.make());
  }
  return all;
}

po::options_description option_registry(bool with_test_hooks) {
  std::vector<std::string> every;
  for (const OptionGroup& group : option_groups()) every.push_back(group.name);
  return option_registry_of(every, with_test_hooks);
}

}  // namespace tp
