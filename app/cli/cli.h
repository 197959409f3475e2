#pragma once
// Command line and scenario files. One option registry serves every subcommand, so a whole
// scenario file is accepted everywhere and an unknown option name is always an error.
#include <boost/program_options.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "node/inventory_spec.h"
#include "train/train_config.h"

namespace tp {

namespace po = boost::program_options;

struct Invocation {
  std::string subcommand;  // "train", "report", or empty for top-level --help/--version
  bool help = false;
  bool help_all = false;  // --help-all: --help with the test.* hooks
  bool version = false;
  po::variables_map options;
  std::vector<std::string> positional;  // operands after the subcommand (report FILE)
  std::vector<std::string> argv;
  std::string scenario_path;
  std::string scenario_text;
  // Where each option given explicitly came from: "command line", "scenario FILE" or
  // "gate.file FILE". A gate check names it as its threshold's source.
  std::map<std::string, std::string> option_source;
  // The gate file's [inventory] (node/inventory_spec.h), and that file; empty without one.
  InventorySpec inventory;
  std::string inventory_file;
};

// Throws UsageError naming the option, file or value at fault.
Invocation parse_invocation(int argc, const char* const argv[]);
// --help: the subcommand's usage, the options it reads (app/cli/option_groups.cpp) with their
// defaults, and the fault grammar where it takes --fault; `with_test_hooks` (--help-all): every
// option, the test suite's hooks (test.*) included.
std::string help_text(const std::string& subcommand, bool with_test_hooks = false);

TrainConfig train_config_from(const po::variables_map& options);
// What a stage that trains nothing (the sweep) reads of the training settings: the backends, the
// watchdog, the preflight's topology read and the test hooks; the model, the run, checkpoints,
// data and faults keep their defaults.
TrainConfig stage_config_from(const po::variables_map& options);

// Every option with its effective value, for the report context.
nlohmann::json effective_options(const po::variables_map& options);

}  // namespace tp
