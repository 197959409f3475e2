#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "app/stages/train_setup.h"
#include "common/errors.h"
#include "train/culprits.h"
#include "train/heartbeat.h"
#include "train/node_region.h"
#include "train/watchdog.h"

namespace {

std::string fresh_dir(const char* name) {
  const std::string dir = ::testing::TempDir() + name;
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(Heartbeat, AHeartbeatIsReadableOnceItsFileHoldsABeat) {
  const std::string dir = fresh_dir("hb-unreadable");
  tp::Heartbeat r0(dir, 0, "node-a"), r1(dir, 1, "node-a");
  EXPECT_TRUE(tp::Heartbeat::readable_within(dir, 1, 0.0));
  EXPECT_FALSE(tp::Heartbeat::readable_within(dir, 2, 0.3));
}

// The visibility check reads one heartbeat per node, in a ring: linear in the nodes, never the
// square of the ranks (4,096 ranks on 512 nodes read 512 files, not 16.7 million).
TEST(Heartbeat, TheVisibilityRingReadsOneHeartbeatPerNode) {
  std::vector<std::string> hosts;
  for (int r = 0; r < 4096; ++r) hosts.push_back("node-" + std::to_string(r / 8));
  const auto ring = tp::heartbeat_ring(hosts);
  ASSERT_EQ(ring.size(), 512u);
  EXPECT_EQ(ring.front(), (std::pair<int, int>{0, 8}));
  EXPECT_EQ(ring.back(), (std::pair<int, int>{4088, 0}));
  EXPECT_TRUE(tp::heartbeat_ring({"a", "a", "a"}).empty()) << "one node shares its own folder";
  // Interleaved placement: each host's first rank reads the next host's first rank.
  EXPECT_EQ(tp::heartbeat_ring({"a", "b", "a", "b"}),
            (std::vector<std::pair<int, int>>{{0, 1}, {1, 0}}));
}

// Node b mounts another folder under the same path: it sees only its own ranks' heartbeats, and
// node a only its own. Each host is named once, with the ranks and hosts it cannot see.
TEST(Heartbeat, AFolderSomeNodeDoesNotShareIsAWarningPerHost) {
  const std::vector<std::string> hosts = {"node-a", "node-a", "node-b", "node-b"};
  const auto warnings =
      tp::heartbeat_visibility_warnings("/scratch/hb", hosts, {{2, 3}, {2, 3}, {0, 1}, {0, 1}});
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[0],
            "heartbeats in '/scratch/hb': host node-a cannot read those of ranks 2-3 (host "
            "node-b): the folder is not shared by every node, so a stalled job's abort.json "
            "would name live ranks as missing; set watchdog.dir to a folder every node mounts");
  EXPECT_NE(warnings[1].find("host node-b cannot read those of ranks 0-1 (host node-a)"),
            std::string::npos);
  EXPECT_TRUE(tp::heartbeat_visibility_warnings("/scratch/hb", hosts, {{}, {}, {}, {}}).empty());
}

TEST(Heartbeat, RecordsAreReadWithTheirHostsAndLiveness) {
  const std::string dir = fresh_dir("hb-read");
  tp::Heartbeat r0(dir, 0, "node-a"), r1(dir, 1, "node-b");
  r0.beat(7, "comm");
  r1.beat(7, "compute");
  r1.tick();
  r1.tick();
  auto all = tp::Heartbeat::read_all(dir, 3);  // rank 2 never wrote one
  ASSERT_TRUE(all[1].present);
  EXPECT_EQ(all[1].rank, 1);
  EXPECT_EQ(all[1].step, 7);
  EXPECT_EQ(all[1].phase, "compute");
  EXPECT_EQ(all[1].host, "node-b");
  EXPECT_EQ(all[1].liveness, 2);
  EXPECT_FALSE(all[1].watch_ended);
  EXPECT_EQ(all[0].liveness, -1) << "no watchdog has counted on rank 0";
  EXPECT_FALSE(all[2].present);
  EXPECT_EQ(all[2].rank, 2);
  // A beat leaves the counter alone, and the counter leaves the beat alone.
  r1.beat(8, "data");
  r1.tick();
  all = tp::Heartbeat::read_all(dir, 3);
  EXPECT_EQ(all[1].step, 8);
  EXPECT_EQ(all[1].phase, "data");
  EXPECT_EQ(all[1].liveness, 3);
  r1.end_watch();
  all = tp::Heartbeat::read_all(dir, 3);
  EXPECT_EQ(all[1].liveness, 3);
  EXPECT_TRUE(all[1].watch_ended);
}

TEST(Heartbeat, TheAbortRecordNamesTheCulpritsWithTheirHostsAndWhy) {
  const std::string dir = fresh_dir("hb-abort");
  tp::Heartbeat r0(dir, 0, "node-a"), r1(dir, 1, "node-a"), r2(dir, 2, "node-b");
  r0.beat(7, "comm");
  r1.beat(7, "comm");
  r2.beat(7, "comm");
  for (auto* h : {&r0, &r1, &r2}) h->tick();
  const auto first = tp::Heartbeat::read_all(dir, 4);  // rank 3 never wrote one
  r0.tick();
  r2.tick();  // rank 1's counter did not move: it stopped
  const auto second = tp::Heartbeat::read_all(dir, 4);
  const tp::Verdict verdict = tp::name_culprits(first, second);

  const std::string line = tp::write_abort_record(dir, "ncclAllReduce stalled", second[0], verdict);
  EXPECT_NE(line.find("did not arrive: rank 1 on node-a (last in step 7 comm; stopped or dead), "
                      "rank 3 (no heartbeat)"),
            std::string::npos)
      << line;
  std::ifstream in(dir + "/abort.json");
  const auto record = nlohmann::json::parse(in);
  ASSERT_EQ(record["missing"].size(), 2u);
  EXPECT_EQ(record["missing"][0]["rank"], 1);
  EXPECT_EQ(record["missing"][0]["host"], "node-a");
  EXPECT_EQ(record["missing"][0]["last_phase"], "comm");
  EXPECT_EQ(record["missing"][0]["why"], "stopped");
  EXPECT_EQ(record["missing"][1]["rank"], 3);
  EXPECT_TRUE(record["missing"][1]["host"].is_null());
  EXPECT_EQ(record["missing"][1]["why"], "no heartbeat");
  EXPECT_EQ(record["detected_by"]["rank"], 0);
  EXPECT_EQ(record["furthest"]["step"], 7);
}

void touch(const std::string& path) {
  std::ofstream(path) << "{}\n";
}

// Once the first rank to look has published its verdict, the job is being torn down: a launcher
// may let a stopped rank go on meanwhile, so a later look is no better evidence.
TEST(Heartbeat, TheFirstVerdictStands) {
  const std::string dir = fresh_dir("hb-first");
  tp::Heartbeat r0(dir, 0, "node-a"), r1(dir, 1, "node-b");
  r0.beat(4, "checkpoint");
  r1.beat(4, "checkpoint");
  const auto all = tp::Heartbeat::read_all(dir, 2);
  tp::Verdict first;
  first.culprits.push_back({all[1], tp::Culprit::Why::stopped});
  const std::string line = tp::write_abort_record(dir, "stalled", all[0], first);
  EXPECT_EQ(line.find("looked first"), std::string::npos) << line;
  const std::string later = tp::write_abort_record(dir, "stalled", all[1], tp::Verdict{});
  EXPECT_NE(later.find("rank 0 looked first: did not arrive: rank 1 on node-b (last in step 4 "
                       "checkpoint; stopped or dead)"),
            std::string::npos)
      << later;
  std::ifstream in(dir + "/abort.json");
  const auto record = nlohmann::json::parse(in);
  EXPECT_EQ(record["detected_by"]["rank"], 0);
  ASSERT_EQ(record["missing"].size(), 1u);
  EXPECT_EQ(record["missing"][0]["rank"], 1);
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(entry.path().filename().string().rfind("abort.json.", 0), std::string::npos)
        << "a temporary record is left: " << entry.path();
}

// A reused folder: rank 0 clears the verdict of an earlier run as it starts.
TEST(Heartbeat, AnEarlierRunsVerdictIsClearedByRankZero) {
  const std::string dir = fresh_dir("hb-earlier");
  std::filesystem::create_directory(dir);
  touch(dir + "/abort.json");
  tp::Heartbeat r1(dir, 1, "b");
  EXPECT_TRUE(std::filesystem::exists(dir + "/abort.json"));
  tp::Heartbeat r0(dir, 0, "a");
  EXPECT_FALSE(std::filesystem::exists(dir + "/abort.json"));
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
  EXPECT_TRUE(std::filesystem::exists(tp::node_beats_path(aborted, 1)));
}

// Two ranks of one node, sharing the node's memory as prepare_outputs sets them up.
struct OneNode {
  explicit OneNode(const std::string& dir, double publish_every_s = 0.0) {
    const std::string memory = ::testing::TempDir() + "hb-node-memory";
    std::filesystem::remove(memory);
    auto made = tp::NodeRegion::create(memory, 2);
    auto mapped = tp::NodeRegion::attach(memory, 2);
    made->join();  // each rank that maps the node's memory counts itself in, as node_place does
    mapped->join();
    std::filesystem::remove(memory);  // as the node's first rank does once all have mapped it
    first = std::make_unique<tp::Heartbeat>(dir, 0, "node-a",
                                            tp::NodePlace{made, 0, 0, true, publish_every_s});
    second = std::make_unique<tp::Heartbeat>(dir, 1, "node-a",
                                             tp::NodePlace{mapped, 1, 0, false, publish_every_s});
  }
  std::unique_ptr<tp::Heartbeat> first, second;
};

int files_starting(const std::string& dir, const std::string& prefix) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    n += entry.path().filename().string().rfind(prefix, 0) == 0;
  return n;
}

// The folder holds one heartbeat file per node, whatever the ranks per node.
TEST(Heartbeat, TheRanksOfANodeShareOneFile) {
  const std::string dir = fresh_dir("hb-node");
  OneNode node(dir);
  node.first->beat(3, "comm");
  node.second->beat(3, "compute");
  EXPECT_EQ(files_starting(dir, "beats-"), 1);
  const auto all = tp::Heartbeat::read_all(dir, 2);
  EXPECT_EQ(all[0].phase, "comm");
  EXPECT_EQ(all[1].phase, "compute");
  EXPECT_EQ(all[1].host, "node-a");
  EXPECT_EQ(tp::Heartbeat::ranks_in(dir), 2);
}

// Rank 1 stopped: its slot stops counting while rank 0 goes on publishing the node. It is named,
// and only it.
TEST(Heartbeat, ARankStoppedOnANodeIsNamedThroughItsNodesFile) {
  const std::string dir = fresh_dir("hb-node-stopped");
  OneNode node(dir);
  node.first->beat(5, "comm");
  node.second->beat(5, "comm");
  node.first->tick();
  node.second->tick();
  const auto first = tp::Heartbeat::read_all(dir, 2);
  node.first->tick();
  const tp::Verdict verdict = tp::name_culprits(first, tp::Heartbeat::read_all(dir, 2));
  ASSERT_EQ(verdict.culprits.size(), 1u);
  EXPECT_EQ(verdict.culprits[0].last.rank, 1);
  EXPECT_EQ(verdict.culprits[0].why, tp::Culprit::Why::stopped);
}

// Beats and ticks between two publishes touch memory only: the file changes once per interval.
TEST(Heartbeat, TheNodesFileIsRewrittenAtMostOncePerInterval) {
  const std::string dir = fresh_dir("hb-node-bounded");
  OneNode node(dir, 3600.0);
  EXPECT_FALSE(tp::Heartbeat::read_all(dir, 2)[1].present) << "not yet published";
  node.first->publish_now();
  for (int i = 0; i < 50; ++i) {
    node.first->tick();
    node.second->beat(i, "data");
  }
  auto all = tp::Heartbeat::read_all(dir, 2);
  EXPECT_EQ(all[0].liveness, -1) << "fifty ticks, no publish";
  EXPECT_EQ(all[1].step, 0);
  node.second->set_publish_interval(0.0);
  node.second->tick();
  all = tp::Heartbeat::read_all(dir, 2);
  EXPECT_EQ(all[0].liveness, 50);
  EXPECT_EQ(all[1].step, 49);
  EXPECT_EQ(all[1].phase, "data");
}

// The node's file goes with the last of its ranks to finish, not the first.
TEST(Heartbeat, TheLastRankOfANodeToFinishRemovesItsFile) {
  const std::string dir = fresh_dir("hb-node-finish");
  OneNode node(dir);
  node.first->finish();
  EXPECT_TRUE(std::filesystem::exists(tp::node_beats_path(dir, 0)));
  node.second->tick();  // still running: it publishes its node
  node.second->finish();
  EXPECT_FALSE(std::filesystem::exists(tp::node_beats_path(dir, 0)));
}

// A rank that cannot map its node's memory gets no region and publishes a file of its own.
TEST(Heartbeat, ANodeRegionThatCannotBeMappedIsNone) {
  const std::string memory = ::testing::TempDir() + "hb-node-foreign";
  std::filesystem::remove(memory);
  EXPECT_EQ(tp::NodeRegion::attach(memory, 2), nullptr);
  auto made = tp::NodeRegion::create(memory, 2);
  EXPECT_EQ(tp::NodeRegion::attach(memory, 3), nullptr) << "another layout";
  EXPECT_THROW(tp::NodeRegion::create(memory, 2), tp::RuntimeError) << "never another job's";
  std::filesystem::remove(memory);
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
