#pragma once
// `checkpoint.async=true`: training hands a host snapshot of its state to a background thread,
// which writes and commits it through a store bound to its own duplicated communicator (MPI must
// provide MPI_THREAD_MULTIPLE). At most one checkpoint is in flight: the next one waits.
// The snapshot buffer is the writer's for the whole run: prepare() (or else the first save)
// allocates and touches it, later saves copy into it, so a checkpoint faults in no fresh memory
// of the state's size.
#include <chrono>
#include <exception>
#include <functional>
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

  // Before the first save: lets `fill` write the state into the snapshot buffer and keeps it, so
  // the buffer's memory is allocated and touched during set-up rather than in the first stall.
  void prepare(const std::function<void(TrainingState&)>& fill);
  // Waits for the checkpoint in flight, lets `fill` write the state (its step included) into the
  // snapshot buffer, then starts writing it. Collective in effect: every rank submits the same
  // steps in the same order.
  void submit(const std::function<void(TrainingState&)>& fill);
  // The same, copying `state` into the snapshot buffer.
  void submit(const TrainingState& state);
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
