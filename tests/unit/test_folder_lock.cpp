// The checkpoint folder's lock: one holder at a time, whoever the second taker is (another open of
// the file in the same process, another process), released when the holder closes or dies.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "checkpoint/folder_lock.h"
#include "common/errors.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using tp::FolderLock;

class FolderLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("trainproof-lock-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
    path = dir + "/" + tp::kFolderLockFile;
  }
  void TearDown() override { fs::remove_all(dir); }

  std::string me() const { return "host unit-host, pid " + std::to_string(::getpid()); }

  // A child process that takes the lock, says so through a pipe, then waits to be killed (or
  // exits after `hold_s` when that is positive). Returns its pid once it holds the lock.
  pid_t child_holding(double hold_s = 0) {
    int ready[2];
    EXPECT_EQ(::pipe(ready), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(ready[0]);
      FolderLock lock = FolderLock::take(path, 0, "child-host");
      const char byte = lock.held() ? 'y' : 'n';
      if (::write(ready[1], &byte, 1) != 1) ::_exit(2);
      if (hold_s > 0) {
        ::usleep(useconds_t(hold_s * 1e6));
        ::_exit(0);
      }
      for (;;) ::pause();
    }
    ::close(ready[1]);
    char byte = 0;
    EXPECT_EQ(::read(ready[0], &byte, 1), 1);
    ::close(ready[0]);
    EXPECT_EQ(byte, 'y') << "the child could not take a free lock";
    return pid;
  }

  std::string dir, path;
};

TEST_F(FolderLockTest, TakesAFreeLockAndWritesItsHostAndPid) {
  const FolderLock lock = FolderLock::take(path, 0, "unit-host");
  EXPECT_TRUE(lock.held());
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "unit-host " + std::to_string(::getpid()) + "\n");
  EXPECT_EQ(tp::describe_lock_holder(text), me());
}

TEST_F(FolderLockTest, ASecondOpenInTheSameProcessFindsItBusyAndNamesTheHolder) {
  const FolderLock first = FolderLock::take(path, 0, "unit-host");
  ASSERT_TRUE(first.held());
  const FolderLock second = FolderLock::take(path, 0, "other-host");
  EXPECT_EQ(second.state(), FolderLock::State::busy);
  EXPECT_EQ(second.holder(), me());
}

TEST_F(FolderLockTest, ClosingTheHolderReleasesIt) {
  {
    const FolderLock first = FolderLock::take(path, 0, "unit-host");
    ASSERT_TRUE(first.held());
  }
  EXPECT_TRUE(FolderLock::take(path, 0, "unit-host").held());
}

TEST_F(FolderLockTest, AChildProcessHoldsItUntilItIsKilled) {
  const pid_t child = child_holding();
  const FolderLock blocked = FolderLock::take(path, 0, "unit-host");
  EXPECT_EQ(blocked.state(), FolderLock::State::busy);
  EXPECT_EQ(blocked.holder(), "host child-host, pid " + std::to_string(child));
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(FolderLock::take(path, 0, "unit-host").held()) << "a killed holder keeps the lock";
}

TEST_F(FolderLockTest, WaitsForTheGivenTimeThenReportsTheHolder) {
  const FolderLock first = FolderLock::take(path, 0, "unit-host");
  int announced = 0;
  std::string announced_holder;
  const auto start = std::chrono::steady_clock::now();
  const FolderLock second = FolderLock::take(path, 0.5, "unit-host", [&](const std::string& who) {
    ++announced;
    announced_holder = who;
  });
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(second.state(), FolderLock::State::busy);
  EXPECT_GE(waited, 0.5);
  EXPECT_LT(waited, 5.0);
  EXPECT_EQ(announced, 1) << "the wait is announced once";
  EXPECT_EQ(announced_holder, me());
}

TEST_F(FolderLockTest, TakesItWhenTheHolderEndsWithinTheWait) {
  const pid_t child = child_holding(0.3);
  const FolderLock lock = FolderLock::take(path, 30, "unit-host");
  EXPECT_TRUE(lock.held());
  int status = 0;
  ::waitpid(child, &status, 0);
}

TEST_F(FolderLockTest, AFileThatCannotBeOpenedIsARuntimeErrorNamingIt) {
  try {
    FolderLock::take(dir + "/no/such/folder/lock", 0, "unit-host");
    FAIL() << "opened a lock file in a folder that does not exist";
  } catch (const tp::RuntimeError& e) {
    EXPECT_THAT(e.what(), HasSubstr(dir + "/no/such/folder/lock"));
    EXPECT_THAT(e.what(), HasSubstr("No such file or directory"));
  }
}

TEST(FolderLockHolder, AnUnwrittenFileNamesAnUnknownHolder) {
  EXPECT_EQ(tp::describe_lock_holder(""), "an unknown holder");
  EXPECT_EQ(tp::describe_lock_holder("node7"), "an unknown holder");
  EXPECT_EQ(tp::describe_lock_holder("node7 4242\n"), "host node7, pid 4242");
}

}  // namespace

namespace {

TEST_F(FolderLockTest, ASharedHandleKeepsTheLockUntilEveryHandleIsClosed) {
  std::optional<FolderLock> first(FolderLock::take(path, 0, "unit-host"));
  ASSERT_TRUE(first->held());
  {
    const FolderLock shared = first->share();
    EXPECT_TRUE(shared.held());
  }
  EXPECT_EQ(FolderLock::take(path, 0, "other-host").state(), FolderLock::State::busy)
      << "closing the shared handle released the holder's lock";
  const FolderLock shared = first->share();
  first.reset();
  EXPECT_EQ(FolderLock::take(path, 0, "other-host").state(), FolderLock::State::busy)
      << "the shared handle lost the lock when the first closed";
  EXPECT_FALSE(FolderLock().share().held()) << "an unheld lock shares nothing";
}

}  // namespace
