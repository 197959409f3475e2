#include "app/accept/accept_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "app/cli/option_values.h"
#include "common/errors.h"
#include "common/number_text.h"

namespace tp {
namespace {

namespace po = boost::program_options;

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
    // Plain decimal only: strtod would also take " 5", "0x10", "inf" and a denormal.
    const bool decimal =
        !number.empty() &&
        (std::isdigit(static_cast<unsigned char>(number[0])) || number[0] == '.') &&
        number.find_first_not_of("0123456789.eE+-") == std::string::npos;
    char* end = nullptr;
    const double seconds = decimal ? std::strtod(number.c_str(), &end) : 0.0;
    if (!decimal || *end != '\0' || !(seconds >= 0.001) || seconds > 1e7)
      throw UsageError(prefix + "seconds must be a decimal number from 0.001 to 1e7");
    if (!times.emplace(stage, seconds).second)
      throw UsageError(prefix + "stage " + stage + " is given twice");
  }
  return times;
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

AcceptConfig accept_config_from(const po::variables_map& vm,
                                const std::map<std::string, std::string>& sources,
                                const TrainConfig& train) {
  AcceptConfig c;
  static_cast<GateConfig&>(c) = gate_config_from(
      vm, sources, train, stages_from(vm["accept.stages"].as<std::string>()), "accept.stages");
  c.retries = bounded(vm, "gate.retries", 0, 10, "re-runs of a failing stage");
  c.expected_hash = vm["gate.scenario_hash"].as<std::string>();
  c.baseline = vm["baseline"].as<std::string>();
  c.tolerance = in_range(vm, "tolerance", 0.0, 1.0, true);
  c.time_budget_s = in_range(vm, "accept.time_budget_s", 0.0, 1e7, false);
  c.stage_time_s = stage_times_from(vm["accept.stage_time_s"].as<std::string>(), c.stages);
  check_restore_stage(c, train);
  c.burn = one_of(vm, "level", {"quick", "full"}) == "full";
  c.burn_s = in_range(vm, "health.burn_s", 0, 86400, true);
  c.sample_s = in_range(vm, "health.sample_s", 0, 60, true);
  if (c.burn && !c.runs("preflight"))
    throw UsageError("--level=full burns in the preflight: add preflight to accept.stages");
  return c;
}

}  // namespace tp
