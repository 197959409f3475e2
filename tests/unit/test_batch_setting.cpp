// model.batch and model.batch_per_rank: one of them sets the batch, the command line's choice
// replaces a scenario's, and the scenario hash follows the setting, not the world size.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "app/cli/cli.h"
#include "common/errors.h"
#include "train/train_config.h"

namespace {

tp::Invocation parse_args(std::vector<std::string> args) {
  std::vector<const char*> argv{"trainproof"};
  for (const auto& a : args) argv.push_back(a.c_str());
  return tp::parse_invocation(int(argv.size()), argv.data());
}

tp::TrainConfig config_of(std::vector<std::string> args) {
  return tp::train_config_from(parse_args(std::move(args)).options);
}

std::string scenario_with(const std::string& name, const std::string& model_lines) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << "[model]\n" << model_lines;
  return path;
}

std::string usage_error_of(std::vector<std::string> args) {
  try {
    config_of(std::move(args));
  } catch (const tp::UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(BatchSetting, PerRankBatchScalesWithTheWorld) {
  tp::TrainConfig cfg = config_of({"train", "--model.batch_per_rank=8"});
  EXPECT_EQ(cfg.batch_per_rank, 8);
  tp::resolve_global_batch(cfg, 4096);
  EXPECT_EQ(cfg.model.global_batch, 8 * 4096);
}

TEST(BatchSetting, GlobalBatchStandsAtAnySize) {
  tp::TrainConfig cfg = config_of({"train", "--model.batch=64"});
  EXPECT_EQ(cfg.batch_per_rank, 0);
  tp::resolve_global_batch(cfg, 128);
  EXPECT_EQ(cfg.model.global_batch, 64);
}

TEST(BatchSetting, TheCommandLineReplacesTheScenariosChoice) {
  const std::string global = scenario_with("batch-global.ini", "batch = 64\n");
  tp::TrainConfig cfg = config_of({"train", "--scenario", global, "--model.batch_per_rank=2"});
  EXPECT_EQ(cfg.batch_per_rank, 2);

  const std::string per_rank = scenario_with("batch-per-rank.ini", "batch_per_rank = 8\n");
  cfg = config_of({"train", "--scenario", per_rank, "--model.batch=12"});
  EXPECT_EQ(cfg.batch_per_rank, 0);
  EXPECT_EQ(cfg.model.global_batch, 12);
}

TEST(BatchSetting, BothInOnePlaceIsAUsageError) {
  const std::string both = usage_error_of({"train", "--model.batch=4", "--model.batch_per_rank=2"});
  EXPECT_NE(both.find("model.batch=4 and model.batch_per_rank=2 exclude each other"),
            std::string::npos)
      << both;
  const std::string file = scenario_with("batch-both.ini", "batch = 64\nbatch_per_rank = 8\n");
  EXPECT_NE(usage_error_of({"train", "--scenario", file}).find("exclude each other"),
            std::string::npos);
  EXPECT_NE(usage_error_of({"train", "--model.batch_per_rank=-1"}).find("model.batch_per_rank"),
            std::string::npos);
}

TEST(BatchSetting, ThePerRankHashDoesNotDependOnTheWorldSize) {
  tp::TrainConfig small = config_of({"train", "--model.batch_per_rank=8"});
  tp::TrainConfig large = small;
  tp::resolve_global_batch(small, 8);
  tp::resolve_global_batch(large, 512);
  EXPECT_EQ(tp::scenario_hash(small), tp::scenario_hash(large));
  // The same global batch set the other way is another scenario: its digest stands at any size.
  tp::TrainConfig global = config_of({"train", "--model.batch=64"});
  EXPECT_NE(tp::scenario_hash(small), tp::scenario_hash(global));
}

}  // namespace
