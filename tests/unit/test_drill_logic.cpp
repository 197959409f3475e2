#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "app/drill/drill_logic.h"
#include "checkpoint/store.h"
#include "common/errors.h"

namespace {

namespace fs = std::filesystem;

tp::HeartbeatRecord beat(int rank, int64_t step, const char* phase) {
  tp::HeartbeatRecord record;
  record.rank = rank;
  record.step = step;
  record.phase = phase;
  record.present = true;
  return record;
}

TEST(DrillLogic, LastCompletedStepIsTheSlowestRanks) {
  // A kill in step 45's compute: its peers wait in step 45's comm; step 44 is the last complete.
  EXPECT_EQ(tp::last_completed_step({beat(0, 45, "comm"), beat(1, 45, "compute")}), 44);
  // A kill in step 40's checkpoint: every rank had finished step 40's optimizer.
  EXPECT_EQ(tp::last_completed_step({beat(0, 40, "checkpoint"), beat(1, 40, "checkpoint")}), 40);
  EXPECT_EQ(tp::last_completed_step({beat(0, 12, "done"), beat(1, 13, "data")}), 12);
  EXPECT_FALSE(tp::last_completed_step({beat(0, 0, "start"), tp::HeartbeatRecord{}}).has_value());
}

class Folder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("drill-logic-" + std::to_string(::getpid()));
    fs::create_directories(dir / "step-00000004");
    fs::create_directories(dir / "step-00000008");
    fs::create_directories(dir / "step-00000012.partial");
    for (const char* step : {"step-00000004", "step-00000008", "step-00000012.partial"}) {
      std::ofstream(dir / step / "MANIFEST.json") << "{}";
      std::ofstream(dir / step / "rank-00001.h5") << std::string(100, 'x');
    }
  }
  void TearDown() override { fs::remove_all(dir); }
  fs::path dir;
};

TEST_F(Folder, CommittedCheckpointsIgnorePartialFolders) {
  const auto committed = tp::CheckpointStore::committed_in(dir.string());
  ASSERT_EQ(committed.size(), 2u);
  EXPECT_EQ(committed[0].first, 8);  // newest first
  EXPECT_EQ(committed[1].first, 4);
}

TEST_F(Folder, CorruptFlipsTruncatesOrDeletesTheNamedShard) {
  const std::string folder = (dir / "step-00000008").string();
  const std::string file = folder + "/rank-00001.h5";
  tp::corrupt_checkpoint(folder, tp::parse_fault("corrupt:shard=1,mode=flip"));
  std::ifstream in(file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.size(), 100u);
  EXPECT_EQ(text[50], 'x' ^ 1);
  tp::corrupt_checkpoint(folder, tp::parse_fault("corrupt:shard=1,mode=truncate"));
  EXPECT_EQ(fs::file_size(file), 50u);
  tp::corrupt_checkpoint(folder, tp::parse_fault("corrupt:shard=1,mode=delete"));
  EXPECT_FALSE(fs::exists(file));
  EXPECT_THROW(tp::corrupt_checkpoint(folder, tp::parse_fault("corrupt:shard=3")),
               tp::RuntimeError);
}

TEST_F(Folder, EvidenceFilesThatAreMissingOrBrokenReadAsNull) {
  std::ofstream(dir / "abort.json") << R"({"missing": [{"rank": 1}]})";
  std::ofstream(dir / "torn.json") << R"({"missing": [{"ra)";
  EXPECT_EQ(tp::read_json_file((dir / "abort.json").string())["missing"][0]["rank"], 1);
  EXPECT_TRUE(tp::read_json_file((dir / "torn.json").string()).is_null());
  EXPECT_TRUE(tp::read_json_file((dir / "absent.json").string()).is_null());
}

TEST_F(Folder, LastLinesOfALog) {
  std::ofstream(dir / "output.log") << "one\ntwo\nthree\n";
  const std::string log = (dir / "output.log").string();
  EXPECT_EQ(tp::last_lines(log, 1), "three\n");
  EXPECT_EQ(tp::last_lines(log, 2), "two\nthree\n");
  EXPECT_EQ(tp::last_lines(log, 5), "one\ntwo\nthree\n");
  EXPECT_EQ(tp::last_lines((dir / "absent.log").string(), 5), "");
}

TEST_F(Folder, TellingLinesNameTheRankThatFailedFirstNotTheLaunchersLastWords) {
  std::ofstream(dir / "output.log")
      << "step 8 of 12\n"
      << "trainproof: rank 2 on vc-n3 (train): SIGSEGV at 0x0 (address not mapped)\n"
      << "  #0 tp::on_fatal_signal\n"
      << "srun: error: vc-n3: task 2: Segmentation fault\n"
      << "srun: Force Terminated StepId=1.2\n";
  EXPECT_EQ(tp::telling_lines((dir / "output.log").string()),
            "trainproof: rank 2 on vc-n3 (train): SIGSEGV at 0x0 (address not mapped)\n"
            "srun: error: vc-n3: task 2: Segmentation fault\n");
  EXPECT_EQ(tp::telling_lines((dir / "output.log").string(), 1),
            "trainproof: rank 2 on vc-n3 (train): SIGSEGV at 0x0 (address not mapped)\n");
  std::ofstream(dir / "quiet.log") << "step 8 of 12\nsrun: Force Terminated StepId=1.2\n";
  EXPECT_EQ(tp::telling_lines((dir / "quiet.log").string()), "srun: Force Terminated StepId=1.2\n");
  EXPECT_EQ(tp::telling_lines((dir / "absent.log").string()), "");
}

TEST(DrillLogic, ForwardsOnlyOptionsThatDifferFromTheirDefaults) {
  const char* argv[] = {"trainproof",
                        "drill",
                        "--train.steps=30",
                        "--launcher",
                        "mpirun -np 2",
                        "--fault=kill:rank=1,step=5",
                        "--drill.max_restarts=2",
                        "--model.layers=3"};
  const tp::Invocation inv = tp::parse_invocation(8, argv);
  const auto words = tp::forwarded_options(inv.options);
  EXPECT_EQ(words, (std::vector<std::string>{"--model.layers=3", "--train.steps=30"}));
}

TEST(DrillLogic, ShellQuotingSurvivesQuotes) {
  EXPECT_EQ(tp::shell_quote("a b"), "'a b'");
  EXPECT_EQ(tp::shell_quote("it's"), "'it'\\''s'");
}

}  // namespace
