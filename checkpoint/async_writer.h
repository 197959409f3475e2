#pragma once
// `checkpoint.async=true`: training hands a host snapshot of its state to a background thread,
// which writes and commits it through a store bound to its own duplicated communicator (MPI must
// provide MPI_THREAD_MULTIPLE). At most one checkpoint is in flight: the next one waits.
#include <exception>
#include <thread>
#include <vector>

#include "checkpoint/store.h"

namespace tp {

class AsyncCheckpointWriter {
 public:
  explicit AsyncCheckpointWriter(CheckpointStore& store) : store_(store) {}
  ~AsyncCheckpointWriter();
  AsyncCheckpointWriter(const AsyncCheckpointWriter&) = delete;
  AsyncCheckpointWriter& operator=(const AsyncCheckpointWriter&) = delete;

  // Waits for the checkpoint in flight, then starts writing `snapshot`. Collective in effect:
  // every rank submits the same steps in the same order.
  void submit(TrainingState snapshot);
  // Waits for the checkpoint in flight, if any. A failure on the writer thread is rethrown here.
  void wait();
  // Saves committed since the last call, in step order.
  std::vector<CheckpointSave> take_committed();

 private:
  CheckpointStore& store_;
  std::thread worker_;
  TrainingState snapshot_;
  std::exception_ptr failure_;
  std::vector<CheckpointSave> committed_;
};

}  // namespace tp
