#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "app/cli/cli.h"
#include "app/cli/cli_options.h"
#include "common/errors.h"
#include "train/faults.h"

namespace {

tp::Invocation parse(std::vector<std::string> args) {
  std::vector<const char*> argv{"trainproof"};
  for (const auto& a : args) argv.push_back(a.c_str());
  return tp::parse_invocation(int(argv.size()), argv.data());
}

std::string write_ini(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(Cli, DefaultsApplyWithoutScenario) {
  const auto inv = parse({"train"});
  const auto cfg = tp::train_config_from(inv.options);
  EXPECT_EQ(cfg.steps, 50);
  EXPECT_EQ(cfg.model.hidden, 256);
  EXPECT_TRUE(cfg.overlap);
}

TEST(Cli, CommandLineWinsOverScenarioFile) {
  const auto path =
      write_ini("precedence.ini", "[train]\nsteps = 100\nwarmup_steps = 3\n[model]\nlayers = 6\n");
  const auto inv = parse({"train", "--scenario", path, "--train.steps=40"});
  const auto cfg = tp::train_config_from(inv.options);
  EXPECT_EQ(cfg.steps, 40);        // command line
  EXPECT_EQ(cfg.warmup_steps, 3);  // file
  EXPECT_EQ(cfg.model.layers, 6);  // file
  EXPECT_EQ(inv.scenario_path, path);
  EXPECT_NE(inv.scenario_text.find("steps = 100"), std::string::npos);
}

TEST(Cli, FaultsInFileAndOnCommandLine) {
  const auto path = write_ini("faults.ini", "fault = slow:rank=1,ms=5\n");
  EXPECT_EQ(tp::train_config_from(parse({"train", "--scenario", path}).options).faults.size(), 1u);
  const auto cli = tp::train_config_from(
      parse({"train", "--scenario", path, "--fault", "slow:rank=0,ms=1"}).options);
  ASSERT_EQ(cli.faults.size(), 1u);
  EXPECT_EQ(cli.faults[0].rank, 0);
}

void expect_usage_error(std::vector<std::string> args, const std::string& must_name) {
  try {
    const auto inv = parse(args);
    tp::train_config_from(inv.options);
    FAIL() << "no usage error for " << args.back();
  } catch (const tp::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(must_name), std::string::npos)
        << "message '" << e.what() << "' does not name '" << must_name << "'";
  }
}

TEST(Cli, UnknownOptionOnCommandLine) {
  expect_usage_error({"train", "--train.stepz=3"}, "train.stepz");
}

TEST(Cli, UnknownOptionInScenarioNamesFileAndOption) {
  const auto path = write_ini("unknown.ini", "[model]\nlayerz = 3\n");
  expect_usage_error({"train", "--scenario", path}, "model.layerz");
  expect_usage_error({"train", "--scenario", path}, path);
}

TEST(Cli, MalformedValue) {
  expect_usage_error({"train", "--model.hidden=abc"}, "model.hidden");
}
TEST(Cli, MissingScenario) {
  expect_usage_error({"train", "--scenario", "/nonexistent/x.ini"}, "/nonexistent/x.ini");
}
TEST(Cli, NonPositiveSize) {
  expect_usage_error({"train", "--model.batch=0"}, "model.batch");
}
TEST(Cli, NegativeSize) {
  expect_usage_error({"train", "--model.layers=-2"}, "model.layers");
}
TEST(Cli, WarmupNotBelowSteps) {
  expect_usage_error({"train", "--train.steps=5", "--train.warmup_steps=5"}, "train.warmup_steps");
}
TEST(Cli, UnknownChoice) {
  expect_usage_error({"train", "--train.optimizer=lion"}, "train.optimizer");
}
TEST(Cli, UnknownSubcommand) {
  expect_usage_error({"trian"}, "trian");
}
TEST(Cli, ParamsAndHiddenConflict) {
  expect_usage_error({"train", "--model.params=100000", "--model.hidden=64"}, "model.params");
}

TEST(Cli, ParamsDeriveHidden) {
  const auto cfg =
      tp::train_config_from(parse({"train", "--model.params=1000000", "--model.layers=4"}).options);
  EXPECT_EQ(cfg.model.hidden, 500);
}

TEST(Cli, ScenarioHashIgnoresRunLengthButNotModel) {
  const auto a = tp::train_config_from(parse({"train"}).options);
  const auto b =
      tp::train_config_from(parse({"train", "--train.steps=7", "--comm.bucket_mb=1"}).options);
  const auto c = tp::train_config_from(parse({"train", "--model.hidden=255"}).options);
  const auto d = tp::train_config_from(parse({"train", "--train.lr=0.0100001"}).options);
  EXPECT_EQ(tp::scenario_hash(a), tp::scenario_hash(b));
  EXPECT_NE(tp::scenario_hash(a), tp::scenario_hash(c));
  EXPECT_NE(tp::scenario_hash(a), tp::scenario_hash(d));
}

TEST(Cli, HelpListsEveryOptionWithDefault) {
  const std::string help = tp::help_text("train");
  for (const char* option :
       {"--model.layers", "--model.hidden", "--model.seq", "--model.batch", "--model.params",
        "--train.steps", "--train.warmup_steps", "--train.seed", "--train.optimizer",
        "--compute.backend", "--comm.backend", "--comm.bucket_mb", "--comm.overlap", "--fault",
        "--report", "slow:rank"})
    EXPECT_NE(help.find(option), std::string::npos) << option;
  EXPECT_NE(help.find("(=50)"), std::string::npos);
}

// Defaults as a person reads them, every option name whole, and the test hooks only under
// --help-all.
TEST(Cli, HelpShowsReadableDefaultsWholeNamesAndHidesTheTestHooks) {
  const std::string help = tp::help_text("accept");
  EXPECT_EQ(help.find("0000000"), std::string::npos) << "a double printed to 17 digits";
  EXPECT_NE(help.find("--tolerance arg (=0.9)"), std::string::npos);
  EXPECT_NE(help.find("--comm.overlap arg (=true)"), std::string::npos);
  EXPECT_NE(help.find("--checkpoint.async arg (=false)"), std::string::npos);
  const auto registry = tp::option_registry_of(tp::option_groups_of("accept"), false);
  for (const auto& option : registry.options())  // options() refers into the registry
    EXPECT_NE(help.find("--" + option->long_name()), std::string::npos)
        << option->long_name() << " is cut or missing";
  EXPECT_EQ(help.find("--test."), std::string::npos);
  EXPECT_NE(help.find("trainproof --help-all lists every option"), std::string::npos);
  const std::string all = tp::help_text("accept", true);
  EXPECT_NE(all.find("--test.split_hosts arg (=0)"), std::string::npos);
  const char* argv[] = {"trainproof", "train", "--help-all"};
  const tp::Invocation inv = tp::parse_invocation(3, argv);
  EXPECT_TRUE(inv.help);
  EXPECT_TRUE(inv.help_all);
}

// Every common spelling of a type, one name in the report, one scenario hash.
TEST(Cli, ElementTypesTakeEverySpellingAndHashAsOne) {
  const auto config = [](const char* dtype) {
    const std::string option = std::string("--model.dtype=") + dtype;
    const char* argv[] = {"trainproof", "train", option.c_str()};
    return tp::train_config_from(tp::parse_invocation(3, argv).options);
  };
  EXPECT_EQ(config("float32").dtype, "fp32");
  EXPECT_EQ(config("FP32").dtype, "fp32");
  EXPECT_EQ(config("bfloat16").dtype, "bf16");
  EXPECT_EQ(config("half").dtype, "fp16");
  EXPECT_EQ(tp::scenario_hash(config("float")), tp::scenario_hash(config("fp32")));
  expect_usage_error({"train", "--model.dtype=fp8"}, "model.dtype='fp8' is not one of");
}

// Byte counts as nccl-tests' users type them, in every *_bytes option, binary.
TEST(Cli, ByteOptionsTakeBinarySuffixes) {
  const char* argv[] = {
      "trainproof",         "sweep", "--sweep.max_bytes=64M", "--sweep.min_bytes=1KiB",
      "--sweep.pair_bytes", "2G"};
  const tp::Invocation inv = tp::parse_invocation(int(std::size(argv)), argv);
  EXPECT_EQ(inv.options["sweep.max_bytes"].as<int64_t>(), int64_t(64) << 20);
  EXPECT_EQ(inv.options["sweep.min_bytes"].as<int64_t>(), 1024);
  EXPECT_EQ(inv.options["sweep.pair_bytes"].as<int64_t>(), int64_t(2) << 30);
  expect_usage_error({"sweep", "--sweep.max_bytes=64X"}, "sweep.max_bytes");
  expect_usage_error({"sweep", "--sweep.max_bytes=99999999999999T"}, "too large");
}

// Every data.* size has an upper bound, named in the error and in --help.
TEST(Cli, DataSizesOutOfRangeNameTheirBound) {
  expect_usage_error({"train", "--data.readers=100000"}, "data.readers=100000");
  expect_usage_error({"train", "--data.readers=1025"}, "[1, 1024]");
  expect_usage_error({"train", "--data.readers=0"}, "data.readers=0");
  expect_usage_error({"train", "--data.prefetch=1025"}, "[0, 1024]");
  expect_usage_error({"prepare-data", "--data.files=100001"}, "[1, 100000]");
  expect_usage_error({"prepare-data", "--data.samples=4294967297"}, "[1, 4294967296]");
  expect_usage_error({"prepare-data", "--data.sample_bytes=1073741825"}, "[1, 1073741824]");
  expect_usage_error({"prepare-data", "--data.sample_bytes=-1"}, "data.sample_bytes=-1");
  // Boost wraps the descriptions: words are compared, not lines.
  std::istringstream words(tp::help_text("prepare-data"));
  std::string help, word;
  while (words >> word) help += word + " ";
  for (const char* bound : {"1 to 1024", "0 to 1024", "1 to 100000", "to 4294967296",
                            "1 to 1073741824", "has room for the"})
    EXPECT_NE(help.find(bound), std::string::npos) << bound;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Boost reflows an option's description to its own column, which once scattered the --fault
// grammar over indented fragments. The grammar is a table of its own, one row per kind, with the
// descriptions in one column and no wider than Boost's 80-column listing; its examples parse.
TEST(Cli, HelpPrintsTheFaultGrammarAsATable) {
  for (const char* subcommand : {"", "train", "drill"}) {
    // `trainproof --help` lists the common options alone; --help-all has the grammar.
    const std::vector<std::string> lines = lines_of(tp::help_text(subcommand, !*subcommand));
    size_t description_column = 0;
    for (const char* kind : {"slow:", "kill:", "hang:", "corrupt:", "random:"}) {
      const std::string start = std::string("  ") + kind;
      const auto row = std::find_if(lines.begin(), lines.end(), [&](const std::string& line) {
        return line.rfind(start, 0) == 0;
      });
      ASSERT_NE(row, lines.end()) << subcommand << ": no row starting '" << start << "'";
      const size_t column = row->find_first_not_of(' ', row->find(' ', 2));
      if (description_column == 0) description_column = column;
      EXPECT_EQ(column, description_column) << *row;
    }
    const auto grammar = std::find(lines.begin(), lines.end(), "Fault specs (--fault SPEC):");
    ASSERT_NE(grammar, lines.end());
    for (auto line = grammar; line != lines.end(); ++line) {
      EXPECT_LE(line->size(), 80u) << *line;
      if (line->rfind("  --fault ", 0) == 0) {
        EXPECT_NO_THROW(tp::parse_fault(line->substr(10))) << *line;
      }
    }
    for (const std::string& line : lines) EXPECT_LE(line.size(), 100u) << line;
    // The option's own description stays on its line: the next one ends the group.
    const auto fault = std::find_if(lines.begin(), grammar, [](const std::string& line) {
      return line.rfind("  --fault SPEC ", 0) == 0;
    });
    ASSERT_NE(fault, grammar);
    EXPECT_EQ(*(fault + 1), "") << *fault;
  }
}

TEST(Cli, EveryShippedScenarioParses) {
  for (const char* name : {"tiny", "smoke", "acceptance", "gpt-small", "llama-1b"}) {
    const std::string path = std::string(TRAINPROOF_SCENARIOS) + "/" + name + ".ini";
    EXPECT_NO_THROW(tp::train_config_from(parse({"train", "--scenario", path}).options)) << path;
  }
}

}  // namespace

// Hardening (docs/promises.md): each of these once ran with a silently wrong value.
TEST(CliHardening, ScenarioThatIsADirectoryIsRefused) {
  expect_usage_error({"train", "--scenario", ::testing::TempDir()}, "not a regular file");
}
TEST(CliHardening, UnknownLogLevel) {
  expect_usage_error({"train", "--log.level=loud"}, "log.level");
}
TEST(CliHardening, NegativeSeedDoesNotWrap) {
  expect_usage_error({"train", "--train.seed=-1"}, "train.seed");
  expect_usage_error({"drill", "--drill.seed=-1"}, "drill.seed");
}
TEST(CliHardening, EpochsOutOfRangeOrNotANumber) {
  expect_usage_error({"train", "--train.epochs=1e300", "--data.dir=d"}, "train.epochs");
  expect_usage_error({"train", "--train.epochs=nan", "--data.dir=d"}, "train.epochs");
}
TEST(CliHardening, SemicolonInsideAScenarioValueNamesTheLine) {
  const auto path = write_ini("inline.ini", "[checkpoint]\n# a comment\ndir = x ; comment\n");
  expect_usage_error({"train", "--scenario", path}, path + "', line 3");
  expect_usage_error({"train", "--scenario", path}, "'#'");
}
TEST(CliHardening, ScenarioMayNotSetTheDrillLauncher) {
  const auto path = write_ini("launcher.ini", "launcher = mpirun -np 2; touch x; true\n");
  expect_usage_error({"drill", "--scenario", path}, "launcher");
}
