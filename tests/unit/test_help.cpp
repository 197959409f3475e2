// Each subcommand's --help lists its own options and the common ones, --help-all every option, and
// what a subcommand's --help lists is what its code reads (app/cli/option_groups.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "app/accept/accept_config.h"
#include "app/cli/cli.h"
#include "app/cli/cli_options.h"
#include "app/cli/mpi_command.h"
#include "app/cli/option_values.h"
#include "app/cli/output_options.h"
#include "app/drill/drill_command.h"
#include "app/job/cost.h"
#include "app/judge/baseline.h"
#include "app/judge/gate_config.h"
#include "app/stages/sweep_config.h"

namespace {

namespace po = boost::program_options;

const std::vector<std::string> kSubcommands = {"train", "sweep",        "accept",
                                               "drill", "prepare-data", "report"};

// The options a --help text lists: each line that starts "  --NAME" or "  -h [ --NAME ]".
std::set<std::string> listed(const std::string& help) {
  std::set<std::string> names;
  std::istringstream lines(help);
  for (std::string line; std::getline(lines, line);) {
    size_t at = line.rfind("  --", 0) == 0 ? 4 : line.rfind("  -h [ --", 0) == 0 ? 9 : 0;
    if (at == 0) continue;
    names.insert(line.substr(at, line.find_first_of(" ]", at) - at));
  }
  return names;
}

std::set<std::string> names_of(const po::options_description& options) {
  std::set<std::string> names;
  for (const auto& option : options.options()) names.insert(option->long_name());
  return names;
}

size_t line_count(const std::string& text) {
  return size_t(std::count(text.begin(), text.end(), '\n'));
}

// The options of a subcommand's groups (and the test hooks, which every subcommand parses), each
// at its default, with `args` given: nothing else. A reader that takes an option outside them
// finds no value there and throws.
po::variables_map only_its_options(const std::string& subcommand, std::vector<std::string> args) {
  const po::options_description options =
      tp::option_registry_of(tp::option_groups_of(subcommand), true);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(options).run(), vm);
  po::notify(vm);
  return vm;
}

TEST(Help, SweepHelpListsNoOptionASweepNeverReads) {
  const std::string sweep = tp::help_text("sweep"), all = tp::help_text("sweep", true);
  std::istringstream lines(sweep);
  for (std::string line; std::getline(lines, line);)
    for (const char* foreign : {"  --checkpoint.", "  --drill.", "  --cost.", "  --model.",
                                "  --data.", "  --train.", "  --accept.", "  --fault"})
      EXPECT_NE(line.rfind(foreign, 0), 0u) << line;
  EXPECT_NE(sweep.find("  --sweep.ops"), std::string::npos);
  EXPECT_NE(sweep.find("  --comm.backend"), std::string::npos);
  EXPECT_NE(sweep.find("  --gate.min_busbw_gbps"), std::string::npos);
  EXPECT_NE(sweep.find("  --report"), std::string::npos) << "the common options stay";
  EXPECT_LT(line_count(sweep), line_count(all) / 2) << sweep;
  EXPECT_LT(line_count(sweep), 250u);
}

// --help-all lists every option of the registry, the test hooks included, whichever subcommand.
TEST(Help, HelpAllListsEveryOption) {
  const std::set<std::string> every = names_of(tp::option_registry(true));
  for (const std::string& subcommand : kSubcommands)
    EXPECT_EQ(listed(tp::help_text(subcommand, true)), every) << subcommand;
  EXPECT_EQ(listed(tp::help_text("", true)), every);
}

// A subcommand's --help lists exactly the options of its groups, the test hooks left out.
TEST(Help, EachSubcommandListsTheOptionsOfItsGroups) {
  for (const std::string& subcommand : kSubcommands) {
    const std::set<std::string> groups =
        names_of(tp::option_registry_of(tp::option_groups_of(subcommand), false));
    EXPECT_EQ(listed(tp::help_text(subcommand)), groups) << subcommand;
    EXPECT_TRUE(groups.count("report") && groups.count("scenario")) << subcommand;
  }
  EXPECT_EQ(listed(tp::help_text("")),
            names_of(tp::option_registry_of(tp::option_groups_of(""), false)));
}

// What a subcommand's --help lists is what its code reads: each reader it calls before it starts
// (as run_train, run_sweep_command, run_accept, run_drill and run_prepare call them) works from
// the options of its groups alone. A group left out of app/cli/option_groups.cpp fails here.
TEST(Help, EverySubcommandsReadersFindTheirOptionsInItsHelp) {
  const std::map<std::string, std::string> none;
  auto common = [](const po::variables_map& vm) {
    tp::side_outputs_from(vm, false);
    tp::baseline_from(vm);
    vm["log.level"].as<std::string>();
    vm["trace"].as<std::string>();
    vm["run_id"].as<std::string>();
    tp::MpiCommand command;
    tp::set_test_linger(command, vm);
  };
  {
    const po::variables_map vm = only_its_options("train", {});
    const tp::TrainConfig train = tp::train_config_from(vm);
    tp::cost_rates_from(vm);
    tp::gate_config_from(vm, none, train, {"train"}, "trainproof train");
    EXPECT_NO_THROW(common(vm));
  }
  {
    const po::variables_map vm = only_its_options("sweep", {});
    const tp::TrainConfig train = tp::stage_config_from(vm);
    EXPECT_NO_THROW(tp::sweep_config_from(vm));
    EXPECT_NO_THROW(tp::gate_config_from(vm, none, train, {"sweep"}, "trainproof sweep"));
    EXPECT_NO_THROW(common(vm));
    // What it would read if it took the training settings whole: not in its help.
    EXPECT_ANY_THROW(tp::train_config_from(vm));
  }
  {
    const po::variables_map vm =
        only_its_options("accept", {"--checkpoint.dir=/tmp/ckpt", "--checkpoint.every=5"});
    const tp::TrainConfig train = tp::train_config_from(vm);
    try {
      tp::accept_config_from(vm, none, train);
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
    }
    EXPECT_NO_THROW(tp::sweep_config_from(vm));
    EXPECT_NO_THROW(tp::cost_rates_from(vm));
    EXPECT_NO_THROW(common(vm));
  }
  {
    const po::variables_map vm = only_its_options(
        "drill", {"--launcher=mpirun -np 2", "--checkpoint.dir=/tmp/ckpt", "--checkpoint.every=4",
                  "--report=" + ::testing::TempDir() + "drill.json"});
    EXPECT_NO_THROW(tp::read_drill_options(vm));
    EXPECT_NO_THROW(tp::cost_rates_from(vm));
    EXPECT_NO_THROW(tp::gate_config_from(vm, none, tp::train_config_from(vm), {"train"}, "drill"));
  }
  EXPECT_NO_THROW(tp::train_config_from(only_its_options("prepare-data", {})));
  {
    const po::variables_map vm = only_its_options("report", {});
    for (const char* name : {"tolerance", "html", "format", "baseline", "trace", "report"})
      EXPECT_EQ(vm.count(name), 1u) << name;
  }
}

}  // namespace
