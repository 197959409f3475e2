// main() of the one-process test executables that may need MPI (see one_rank.h).
#include <gtest/gtest.h>
#include <mpi.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include "tests/unit/one_rank.h"

namespace tp::test {

long minor_page_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

World one_rank_world(const std::string& host) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
#if defined(__SANITIZE_ADDRESS__)
    // Open MPI's start-up leaks a little of its own, partly in components it unloads again, whose
    // frames then name no module a suppression could match. What MPI_Init allocates on this
    // thread is not this project's to report.
    __lsan_disable();
#endif
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
#if defined(__SANITIZE_ADDRESS__)
    __lsan_enable();
#endif
    if (rc != MPI_SUCCESS || provided < MPI_THREAD_MULTIPLE) {
      ADD_FAILURE() << "MPI_Init_thread did not provide MPI_THREAD_MULTIPLE";
      std::abort();
    }
  }
  World world;
  world.comm = MPI_COMM_SELF;
  world.host = host;
  world.host_of_rank = {host};
  world.hosts = {host};
  return world;
}

namespace {

// One folder per test process, named in the environment so that a death test's child, which
// re-runs this binary, works in its parent's folders rather than in its own.
constexpr const char* kRootVariable = "TRAINPROOF_UNIT_TMP";
bool owns_root = false;

std::filesystem::path root() {
  if (const char* inherited = std::getenv(kRootVariable)) return inherited;
  const std::filesystem::path made = std::filesystem::path(::testing::TempDir()) /
                                     ("trainproof-unit-" + std::to_string(::getpid()));
  std::filesystem::remove_all(made);
  ::setenv(kRootVariable, made.c_str(), 1);
  owns_root = true;
  return made;
}

}  // namespace

std::string fresh_dir(const std::string& name) {
  const bool parent = std::getenv(kRootVariable) == nullptr || owns_root;
  const std::filesystem::path dir = root() / name;
  if (parent) std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

void remove_test_folders() {
  if (owns_root) std::filesystem::remove_all(root());
}

}  // namespace tp::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Per-step progress lines would bury the failures; warnings (a checkpoint set aside) stay.
  spdlog::set_level(spdlog::level::warn);
  // Death tests re-run this binary for the one test, rather than fork a process with threads.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // Named before any test starts a thread that might read the environment.
  tp::test::root();
  const int rc = RUN_ALL_TESTS();
  tp::test::remove_test_folders();
#if defined(__SANITIZE_ADDRESS__)
  // Leak-check the tests while MPI still holds what it allocated: Open MPI frees little at
  // MPI_Finalize and unloads its components, so an at-exit check would report its memory, in
  // frames without names, rather than ours. After this call LeakSanitizer checks nothing at exit.
  __lsan_do_leak_check();
#endif
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
  return rc;
}
