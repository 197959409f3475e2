#include "app/report/viz_launcher.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "common/errors.h"

namespace tp {

std::string executable_path() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) throw RuntimeError("cannot find this executable (/proc/self/exe): " + error.message());
  return self.string();
}

std::string viz_script_path() {
  return (std::filesystem::path(executable_path()).parent_path() / "viz" / "trainproof_viz.py")
      .string();
}

namespace {

// TRAINPROOF_PYTHON when set; else the distribution's python3, which holds the Debian packages
// the script uses (python3-matplotlib, python3-h5py) even where a user's PATH puts another python3
// (pyenv, a virtual environment) first; else python3 from PATH.
std::string python_interpreter() {
  if (const char* chosen = std::getenv("TRAINPROOF_PYTHON"); chosen != nullptr && *chosen != '\0')
    return chosen;
  if (::access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  return "python3";
}

}  // namespace

int run_viz_script(const std::vector<std::string>& args) {
  const std::string script = viz_script_path();
  if (!std::filesystem::is_regular_file(script))
    throw UsageError("the plot script '" + script +
                     "' is missing: the build puts viz/ beside trainproof (scripts/build.sh)");
  const std::string python = python_interpreter();
  std::vector<std::string> words{python, script};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  const pid_t child = ::fork();
  if (child < 0) throw RuntimeError(std::string("cannot start python3: ") + std::strerror(errno));
  if (child == 0) {
    ::execvp(python.c_str(), argv.data());
    _exit(127);
  }
  // A deadline on the wait: 4,096 ranks render in under a minute (tests/integration/test_viz.py),
  // so ten minutes means the script is stuck.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) break;
    if (done < 0 && errno != EINTR)
      throw RuntimeError(std::string("waitpid: ") + std::strerror(errno));
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &status, 0);
      throw RuntimeError("the plot script '" + script + "' ran past 10 minutes and was ended");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
    throw UsageError(
        "python3 cannot be run: install it (Debian: python3, python3-matplotlib, "
        "python3-h5py)");
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  throw RuntimeError("the plot script was ended by signal " + std::to_string(WTERMSIG(status)));
}

}  // namespace tp
