#include "checkpoint/async_writer.h"

#include <utility>

namespace tp {

AsyncCheckpointWriter::~AsyncCheckpointWriter() {
  if (worker_.joinable()) worker_.join();
}

void AsyncCheckpointWriter::submit(TrainingState snapshot) {
  wait();
  snapshot_ = std::move(snapshot);
  worker_ = std::thread([this] {
    try {
      committed_.push_back(store_.save(snapshot_));
    } catch (...) {
      failure_ = std::current_exception();
    }
  });
}

void AsyncCheckpointWriter::wait() {
  if (worker_.joinable()) worker_.join();
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
}

std::vector<CheckpointSave> AsyncCheckpointWriter::take_committed() {
  if (worker_.joinable()) return {};  // the worker may still be appending
  return std::exchange(committed_, {});
}

}  // namespace tp
