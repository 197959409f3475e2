#include "checkpoint/background_deletion.h"

#include <filesystem>
#include <utility>

namespace tp {

void BackgroundDeletion::start(std::vector<std::string> folders) {
  wait();
  if (folders.empty()) return;
  worker_ = std::thread([folders = std::move(folders)] {
    for (const std::string& folder : folders) {
      std::error_code ec;
      try {
        std::filesystem::remove_all(folder, ec);
      } catch (...) {
        // Out of memory while listing: the folder is a .deleting leftover, never a checkpoint.
      }
    }
  });
}

void BackgroundDeletion::wait() {
  if (worker_.joinable()) worker_.join();
}

}  // namespace tp
