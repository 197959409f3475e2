#pragma once
// Deleting checkpoints that retention let go, beside training instead of inside its stall
// (docs/checkpoint.md, "Retention"). A folder handed over is already renamed to .deleting, so it
// never counts as committed whatever happens to the deletion.
#include <string>
#include <thread>
#include <vector>

namespace tp {

class BackgroundDeletion {
 public:
  BackgroundDeletion() = default;
  ~BackgroundDeletion() { wait(); }
  BackgroundDeletion(const BackgroundDeletion&) = delete;
  BackgroundDeletion& operator=(const BackgroundDeletion&) = delete;

  // Deletes `folders` on a thread of its own, after the previous deletion has ended.
  void start(std::vector<std::string> folders);
  // Returns once every folder handed over is gone (or could not be deleted: a leftover the next
  // run's preflight removes). A save waits here first, so the folder never holds more than the
  // keep + 1 checkpoints the preflight found room for.
  void wait();

 private:
  std::thread worker_;
};

}  // namespace tp
