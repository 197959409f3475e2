// accept's preflight: the folder_probe check from every rank's probes, and the probes themselves
// (app/accept/accept_preflight.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/accept/accept_preflight.h"
#include "data/dataset.h"

namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;
namespace fs = std::filesystem;

tp::FolderProbe worked() {
  return {"", 0.01};
}
tp::FolderProbe broken(const std::string& why) {
  return {why, 0};
}

TEST(AcceptPreflight, FolderProbeNamesTheFirstFailingRankHostAndFolder) {
  const std::vector<std::string> roles = {"checkpoint.dir /ck", "data.dir /data"};
  const std::vector<std::string> hosts = {"n0", "n0", "n1"};
  const json failed = tp::folder_probe_check(
      roles,
      {{worked(), worked()},
       {worked(), broken("cannot open the dataset's index '/data/index.json'")},
       {broken("cannot create '/ck'"), worked()}},
      hosts);
  EXPECT_EQ(failed["name"], "folder_probe");
  EXPECT_EQ(failed["status"], "fail");
  EXPECT_EQ(failed["value"], 2);
  EXPECT_EQ(failed["threshold"], 0);
  EXPECT_EQ(failed["reason"],
            "2 probe(s) failed; first: rank 1 (n0), data.dir /data: cannot open the dataset's "
            "index '/data/index.json'");

  const json passed =
      tp::folder_probe_check(roles, {{worked(), worked()}, {worked(), worked()}}, {"n0", "n1"});
  EXPECT_EQ(passed["status"], "pass");
  EXPECT_EQ(passed["value"], 0);
  EXPECT_THAT(passed["reason"].get<std::string>(), StartsWith("every rank wrote"));

  const json none = tp::folder_probe_check({}, {{}, {}}, {"n0", "n1"});
  EXPECT_EQ(none["status"], "n/a");
  EXPECT_EQ(none["value"], nullptr);
  EXPECT_EQ(none["reason"], "no checkpoint.dir or data.dir to probe");
}

// A folder of its own under the test's temporary directory, removed at the end.
class AcceptProbe : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            ("accept_probe_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(AcceptProbe, CheckpointFolderIsCreatedWrittenAndLeftEmpty) {
  const fs::path dir = root_ / "ckpt" / "nested";
  const tp::ProbeFolder folder = tp::make_probe_folder(dir.string());
  ASSERT_EQ(folder.problem, "");
  EXPECT_EQ(fs::path(folder.path).parent_path(), dir);
  EXPECT_EQ(fs::status(folder.path).permissions(), fs::perms::owner_all) << "the run's own";
  for (int rank : {0, 3}) {
    const tp::FolderProbe probe = tp::probe_checkpoint_folder(folder.path, rank);
    EXPECT_EQ(probe.problem, "");
    EXPECT_GE(probe.seconds, 0.0);
  }
  EXPECT_TRUE(fs::is_empty(folder.path)) << "each probe file is deleted";
  tp::remove_probe_folder(folder.path);
  ASSERT_TRUE(fs::is_directory(dir));
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST_F(AcceptProbe, CheckpointFolderUnderARegularFileFails) {
  const fs::path file = root_ / "not_a_folder";
  std::ofstream(file) << "x";
  const std::string dir = (file / "ckpt").string();
  const tp::ProbeFolder folder = tp::make_probe_folder(dir);
  EXPECT_EQ(folder.path, "");
  EXPECT_THAT(folder.problem, StartsWith("cannot create '" + dir + "': "));
  EXPECT_GT(folder.problem.size(), ("cannot create '" + dir + "': ").size()) << "and says why";
}

std::string contents(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST_F(AcceptProbe, PlantedLinkAndFileUnderTheOldProbeNamesStayUntouched) {
  const fs::path dir = root_ / "ckpt", target = root_ / "precious";
  fs::create_directories(dir);
  std::ofstream(target) << "precious";
  fs::create_symlink(target, dir / ".trainproof-accept-probe-0");
  std::ofstream(dir / ".trainproof-accept-probe-1") << "theirs";
  const tp::ProbeFolder folder = tp::make_probe_folder(dir.string());
  ASSERT_EQ(folder.problem, "");
  for (int rank : {0, 1}) EXPECT_EQ(tp::probe_checkpoint_folder(folder.path, rank).problem, "");
  tp::remove_probe_folder(folder.path);
  EXPECT_EQ(contents(target), "precious");
  EXPECT_TRUE(fs::is_symlink(dir / ".trainproof-accept-probe-0"));
  EXPECT_EQ(contents(dir / ".trainproof-accept-probe-1"), "theirs");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 2);
}

TEST_F(AcceptProbe, AProbeFileIsOnlyEverCreatedNeverOpened) {
  const fs::path target = root_ / "precious";
  std::ofstream(target) << "precious";
  fs::create_symlink(target, root_ / "rank-0");
  const tp::FolderProbe probe = tp::probe_checkpoint_folder(root_.string(), 0);
  EXPECT_THAT(probe.problem, StartsWith("cannot create '" + (root_ / "rank-0").string() + "': "));
  EXPECT_EQ(contents(target), "precious");
}

TEST_F(AcceptProbe, AProbeFolderMissingOnThisHostSaysTheFolderIsNotShared) {
  const std::string missing = (root_ / ".trainproof-accept-probe-gone").string();
  EXPECT_EQ(tp::probe_checkpoint_folder(missing, 2).problem,
            "the probe folder '" + missing +
                "' that rank 0 made is not there: checkpoint.dir is not the same folder on every "
                "host");
}

TEST_F(AcceptProbe, DataFolderNeedsAReadableIndexAndNeverWaitsOnAFifo) {
  const std::string dir = root_.string();
  const std::string index = dir + "/index.json";
  EXPECT_THAT(tp::probe_data_folder(dir).problem, HasSubstr("holds no dataset (no index.json)"));
  std::ofstream(index).close();
  EXPECT_THAT(tp::probe_data_folder(dir).problem, HasSubstr(index));
  fs::remove(index);
  ASSERT_EQ(::mkfifo(index.c_str(), 0600), 0);
  EXPECT_EQ(tp::probe_data_folder(dir).problem,
            index + " is not a regular file (a FIFO); rerun prepare-data");
  fs::remove(index);
  tp::DatasetSpec spec;
  spec.dir = dir;
  std::ofstream(index) << tp::index_json(spec, std::vector<uint64_t>(size_t(spec.files), 1)).dump();
  const tp::FolderProbe probe = tp::probe_data_folder(dir);
  EXPECT_EQ(probe.problem, "");
  EXPECT_GE(probe.seconds, 0.0);
}

}  // namespace
