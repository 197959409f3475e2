#include "checkpoint/async_writer.h"

#include <utility>

namespace tp {

AsyncCheckpointWriter::~AsyncCheckpointWriter() {
  if (worker_.joinable()) worker_.join();
}

void AsyncCheckpointWriter::submit(const std::function<void(TrainingState&)>& fill) {
  wait();
  const auto submitted = std::chrono::steady_clock::now();
  fill(snapshot_);
  worker_ = std::thread([this, submitted] {
    try {
      CheckpointSave save = store_.save(snapshot_);
      save.time_to_durable_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - submitted).count();
      committed_.push_back(std::move(save));
    } catch (...) {
      failure_ = std::current_exception();
    }
  });
}

void AsyncCheckpointWriter::prepare(const std::function<void(TrainingState&)>& fill) {
  wait();
  fill(snapshot_);
}

void AsyncCheckpointWriter::submit(const TrainingState& state) {
  // Copy assignment keeps the buffers' memory when they are large enough already.
  submit([&state](TrainingState& snapshot) { snapshot = state; });
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
