#include "mpi/collective_ledger.h"

#include <algorithm>
#include <cstring>

namespace tp {

namespace {
constexpr const char* kOpNames[] = {"allreduce", "allgather", "reducescatter",
                                    "broadcast", "alltoall",  "sendrecv"};
}  // namespace

const char* op_name(CollectiveOp op) {
  const int index = int(op);
  return index >= 0 && index < int(std::size(kOpNames)) ? kOpNames[index] : "unknown";
}

bool op_from_name(const std::string& name, CollectiveOp& op) {
  for (size_t i = 0; i < std::size(kOpNames); ++i)
    if (name == kOpNames[i]) {
      op = CollectiveOp(i);
      return true;
    }
  return false;
}

int CollectiveLedger::add(const std::string& label) {
  std::lock_guard<std::mutex> guard(mutex_);
  const int index = added_++ % kLedgerComms;
  comms_[size_t(index)] = CommProgress{};
  comms_[size_t(index)].label = label.substr(0, kLedgerLabelBytes);
  publish_locked(index);
  return index;
}

void CollectiveLedger::entered(int index, int64_t seq, CollectiveOp op, int64_t bytes, int peer) {
  std::lock_guard<std::mutex> guard(mutex_);
  CommProgress& c = comms_[size_t(index)];
  c.entered = seq;
  c.peer = peer;
  if (peer >= 0) c.completed = seq - 1;  // a pair's count: this call is the one outstanding
  std::rotate(c.recent.rbegin(), c.recent.rbegin() + 1, c.recent.rend());
  c.recent[0] = {seq, op, bytes};
  publish_locked(index);
}

void CollectiveLedger::completed(int index, int64_t seq) {
  std::lock_guard<std::mutex> guard(mutex_);
  CommProgress& c = comms_[size_t(index)];
  if (c.peer < 0 && seq <= c.completed) return;
  c.completed = seq;
  publish_locked(index);
}

void CollectiveLedger::attach(LedgerSink* sink) {
  std::lock_guard<std::mutex> guard(mutex_);
  sinks_.push_back(sink);
  for (int i = 0; i < kLedgerComms; ++i) publish_locked(i);
}

void CollectiveLedger::detach(LedgerSink* sink) {
  std::lock_guard<std::mutex> guard(mutex_);
  sinks_.erase(std::remove(sinks_.begin(), sinks_.end(), sink), sinks_.end());
  for (int i = 0; i < kLedgerComms; ++i) publish_locked(i);
}

std::vector<CommProgress> CollectiveLedger::snapshot() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return {comms_.begin(), comms_.end()};
}

void CollectiveLedger::publish_locked(int index) {
  if (!sinks_.empty()) sinks_.back()->publish(index, comms_[size_t(index)]);
}

CollectiveLedger& process_ledger() {
  static CollectiveLedger ledger;
  return ledger;
}

}  // namespace tp
