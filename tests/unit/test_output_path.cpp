#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "common/errors.h"
#include "common/files.h"

namespace {

namespace fs = std::filesystem;

fs::path fresh_folder(const std::string& name) {
  const fs::path folder = fs::path(::testing::TempDir()) / name;
  fs::remove_all(folder);
  fs::create_directories(folder);
  return folder;
}

void expect_refused(const std::string& path, const std::string& must_name) {
  try {
    tp::check_output_file("--report", path);
    FAIL() << "no usage error for " << path;
  } catch (const tp::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(must_name), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--report"), std::string::npos) << e.what();
  }
}

std::string contents(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(OutputFile, APlantedLinkIsReplacedNeverWrittenThrough) {
  const fs::path folder = fresh_folder("output-links");
  const fs::path victim = folder / "victim", other = folder / "other";
  std::ofstream(victim) << "precious";
  std::ofstream(other) << "also precious";
  // At the temporary name the write goes through first, and at the report's own name.
  fs::create_symlink(victim, folder / "r.json.tmp");
  fs::create_symlink(other, folder / "r.json");
  tp::write_file_atomically((folder / "r.json").string(), "{}\n");
  EXPECT_EQ(contents(victim), "precious");
  EXPECT_EQ(contents(other), "also precious");
  EXPECT_FALSE(fs::is_symlink(folder / "r.json"));
  EXPECT_EQ(contents(folder / "r.json"), "{}\n");
  EXPECT_FALSE(fs::exists(fs::symlink_status(folder / "r.json.tmp")));
}

TEST(OutputFile, NewOrRegularFileInAWritableFolderIsAccepted) {
  const fs::path folder = fresh_folder("output-ok");
  EXPECT_NO_THROW(tp::check_output_file("--report", (folder / "r.json").string()));
  std::ofstream(folder / "old.json") << "{}";
  EXPECT_NO_THROW(tp::check_output_file("--report", (folder / "old.json").string()));
  EXPECT_TRUE(fs::is_empty(folder / "old.json") == false);  // the check writes nothing
  EXPECT_FALSE(fs::exists(folder / "r.json"));
}

TEST(OutputFile, ExistingDirectoryIsRefused) {
  const fs::path folder = fresh_folder("output-dir");
  fs::create_directories(folder / "r.json");
  expect_refused((folder / "r.json").string(), "is a folder");
}

TEST(OutputFile, FifoIsRefused) {
  const fs::path folder = fresh_folder("output-fifo");
  ASSERT_EQ(::mkfifo((folder / "r.json").c_str(), 0600), 0);
  expect_refused((folder / "r.json").string(), "not a regular file");
}

TEST(OutputFile, TemporaryNameTakenByADirectoryIsRefused) {
  const fs::path folder = fresh_folder("output-tmp");
  fs::create_directories(folder / "r.json.tmp");
  expect_refused((folder / "r.json").string(), "r.json.tmp");
}

TEST(OutputFile, MissingFolderIsRefused) {
  expect_refused("/nonexistent/dir/r.json", "/nonexistent/dir");
}

}  // namespace
