#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "train/heartbeat.h"
#include "train/watchdog.h"

namespace {

std::string fresh_dir(const char* name) {
  const std::string dir = ::testing::TempDir() + name;
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(Heartbeat, RanksBehindAreNamedWithTheirHosts) {
  const std::string dir = fresh_dir("hb-behind");
  tp::Heartbeat r0(dir, 0, "node-a"), r1(dir, 1, "node-a"), r2(dir, 2, "node-b");
  r0.beat(7, "comm");
  r1.beat(7, "compute");  // same step, earlier phase: did not arrive
  r2.beat(7, "comm");
  const auto all = tp::Heartbeat::read_all(dir, 4);  // rank 3 never wrote one
  ASSERT_TRUE(all[1].present);
  EXPECT_EQ(all[1].step, 7);
  EXPECT_EQ(all[1].phase, "compute");
  EXPECT_EQ(all[1].host, "node-a");
  const auto missing = tp::Heartbeat::behind(all, all[0]);
  ASSERT_EQ(missing.size(), 2u);
  EXPECT_EQ(missing[0].rank, 1);
  EXPECT_EQ(missing[1].rank, 3);
  EXPECT_FALSE(missing[1].present);

  const std::string line = tp::write_abort_record(dir, "ncclAllReduce stalled", all[0], missing);
  EXPECT_NE(line.find("rank 1 on node-a (last in step 7 compute)"), std::string::npos) << line;
  EXPECT_NE(line.find("rank 3 (no heartbeat)"), std::string::npos) << line;
  std::ifstream in(dir + "/abort.json");
  const auto record = nlohmann::json::parse(in);
  EXPECT_EQ(record["missing"].size(), 2u);
  EXPECT_EQ(record["missing"][0]["host"], "node-a");
  EXPECT_EQ(record["detected_by"]["rank"], 0);
}

TEST(Heartbeat, LaterStepsAreNotBehind) {
  const std::string dir = fresh_dir("hb-ahead");
  tp::Heartbeat r0(dir, 0, "a"), r1(dir, 1, "b");
  r0.beat(3, "comm");
  r1.beat(4, "data");  // already past this collective
  const auto all = tp::Heartbeat::read_all(dir, 2);
  EXPECT_TRUE(tp::Heartbeat::behind(all, all[0]).empty());
  EXPECT_EQ(tp::Heartbeat::behind(all, all[1]).size(), 1u);
}

void touch(const std::string& path) {
  std::ofstream(path) << "{}\n";
}

TEST(Heartbeat, FinishRemovesTheEvidenceOfANormalRun) {
  const std::string dir = fresh_dir("hb-finish");
  tp::Heartbeat r0(dir, 0, "a");
  r0.finish();
  r0.remove_folder(false);
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(Heartbeat, AFolderTheRunMadeGoesWithEveryRanksFilesAndItsProgress) {
  const std::string dir = fresh_dir("hb-made");
  tp::Heartbeat r0(dir, 0, "a"), r1(dir, 1, "b");
  touch(dir + "/progress.json");
  touch(dir + "/fault-rank-1.json");
  r0.finish();  // rank 1 has not removed its own files yet
  r0.remove_folder(true);
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(Heartbeat, ANamedFolderKeepsTheProgressAndAnAbortKeepsEverything) {
  const std::string named = fresh_dir("hb-named");
  tp::Heartbeat r0(named, 0, "a");
  touch(named + "/progress.json");
  r0.finish();
  r0.remove_folder(false);
  EXPECT_TRUE(std::filesystem::exists(named + "/progress.json"));

  const std::string aborted = fresh_dir("hb-aborted");
  tp::Heartbeat a0(aborted, 0, "a"), a1(aborted, 1, "b");
  touch(aborted + "/abort.json");
  a0.finish();
  a0.remove_folder(true);
  EXPECT_TRUE(std::filesystem::exists(aborted + "/abort.json"));
  EXPECT_TRUE(std::filesystem::exists(tp::heartbeat_path(aborted, 1)));
}

}  // namespace

TEST(Watchdog, AutoTimeoutFollowsTheWarmUpWithAFloor) {
  EXPECT_DOUBLE_EQ(tp::auto_watchdog_timeout(0.001), 30.0);
  EXPECT_DOUBLE_EQ(tp::auto_watchdog_timeout(4.0), 100.0);
}

TEST(Heartbeat, CheckpointPhaseComesAfterTheOptimizer) {
  EXPECT_LT(tp::phase_order("optimizer"), tp::phase_order("checkpoint"));
  EXPECT_LT(tp::phase_order("checkpoint"), tp::phase_order("done"));
}
