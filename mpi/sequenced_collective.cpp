// The decorator that numbers every operation a Collective runs (mpi/collective_ledger.h). It
// forwards each call unchanged; only the bookkeeping around it is its own.
#include <map>
#include <set>

#include "common/clock.h"
#include "mpi/collective_ledger.h"

namespace tp {
namespace {

int64_t element_bytes(ElementType type) {
  return type == ElementType::bf16 || type == ElementType::f16 ? 2 : 4;
}

class SequencedCollective final : public Collective {
 public:
  SequencedCollective(std::unique_ptr<Collective> inner, std::string label,
                      CollectiveLedger& ledger,
                      std::function<void(const std::string&, int64_t)> before_enter,
                      CommTimeLog& times)
      : inner_(std::move(inner)),
        label_(std::move(label)),
        ledger_(ledger),
        before_enter_(std::move(before_enter)),
        times_(times),
        index_(ledger.add(label_)) {}

  std::string name() const override { return inner_->name(); }
  std::vector<std::string> set_up_notes() const override { return inner_->set_up_notes(); }

  void start_allreduce_sum(float* data, size_t count) override {
    enter(CollectiveOp::allreduce, int64_t(count) * 4);
    batch(CollectiveOp::allreduce);
    inner_->start_allreduce_sum(data, count);
  }
  bool posting_waits_for_peers() const override { return inner_->posting_waits_for_peers(); }
  void progress() override { inner_->progress(); }
  void wait_all() override {
    inner_->wait_all();
    complete_all();
  }
  void allreduce_sum(float* data, size_t count) override {
    enter(CollectiveOp::allreduce, int64_t(count) * 4);
    batch(CollectiveOp::allreduce);
    inner_->allreduce_sum(data, count);
    complete_all();
  }
  CommTiming take_comm_timing() override { return inner_->take_comm_timing(); }
  std::string timing_method(bool overlap) const override { return inner_->timing_method(overlap); }

  int group_rank() const override { return inner_->group_rank(); }
  int group_size() const override { return inner_->group_size(); }
  std::string cannot_run(CollectiveOp op, ElementType type, bool in_place) const override {
    return inner_->cannot_run(op, type, in_place);
  }
  std::shared_ptr<void> allocate(size_t bytes) override { return inner_->allocate(bytes); }
  void copy_in(void* buffer, const void* host, size_t bytes) override {
    inner_->copy_in(buffer, host, bytes);
  }
  void copy_out(void* host, const void* buffer, size_t bytes) override {
    inner_->copy_out(host, buffer, bytes);
  }
  const void* run(const CollectiveCall& call) override {
    const int64_t bytes =
        int64_t(std::max(call.send_count, call.recv_count)) * element_bytes(call.type);
    if (call.op == CollectiveOp::sendrecv)
      enter_pair(call, bytes);
    else
      enter(call.op, bytes);
    const bool first = !seen_.count(call.op);
    if (!first) {
      batch(call.op);
      return inner_->run(call);
    }
    // The first of its kind is waited for alone: NCCL makes its connections for it.
    seen_.insert(call.op);
    complete_batch();
    const double started = steady_seconds();
    const void* result = inner_->run(call);
    inner_->synchronize();
    times_.first(label_, call.op, steady_seconds() - started);
    complete_all();
    return result;
  }
  void synchronize() override {
    inner_->synchronize();
    complete_all();
  }
  std::unique_ptr<Collective> split(int color, int key) override {
    const std::string label = label_ + ":" + std::to_string(color);
    const double started = steady_seconds();
    std::unique_ptr<Collective> group = inner_->split(color, key);
    times_.set_up(label, steady_seconds() - started);
    return std::make_unique<SequencedCollective>(std::move(group), label, ledger_, before_enter_,
                                                 times_);
  }

 private:
  void enter(CollectiveOp op, int64_t bytes) {
    const int64_t seq = ++entered_;
    if (before_enter_) before_enter_(label_, seq);
    ledger_.entered(index_, seq, op, bytes);
  }
  // A transfer between two ranks is numbered by how many this pair has had.
  void enter_pair(const CollectiveCall& call, int64_t bytes) {
    const int peer = call.send_to >= 0 ? call.send_to : call.recv_from;
    if (peer < 0) return;  // a rank with no part in this transfer
    if (pair_index_ < 0) pair_index_ = ledger_.add(label_ + "/p2p");
    const int64_t seq = ++pair_calls_[peer];
    ledger_.entered(pair_index_, seq, CollectiveOp::sendrecv, bytes, peer);
    pair_pending_ = seq;
  }
  void complete_all() {
    if (entered_ > 0) ledger_.completed(index_, entered_);
    if (pair_pending_ > 0) ledger_.completed(pair_index_, pair_pending_);
    pair_pending_ = 0;
    complete_batch();
  }
  // A call joins the batch that the next completion ends.
  void batch(CollectiveOp op) {
    if (batch_ops_.empty()) batch_started_ = steady_seconds();
    batch_ops_.push_back(op);
  }
  // The batch's time shared by its calls: the first batch of the step's reductions is their
  // first (a step posts its buckets together), every later one steady.
  void complete_batch() {
    if (batch_ops_.empty()) return;
    const double each = (steady_seconds() - batch_started_) / double(batch_ops_.size());
    for (CollectiveOp op : batch_ops_) {
      if (seen_.insert(op).second)
        times_.first(label_, op, each * double(batch_ops_.size()));
      else
        times_.steady(label_, op, each);
    }
    batch_ops_.clear();
  }

  std::unique_ptr<Collective> inner_;
  std::string label_;
  CollectiveLedger& ledger_;
  std::function<void(const std::string&, int64_t)> before_enter_;
  CommTimeLog& times_;
  int index_;
  std::set<CollectiveOp> seen_;  // operations whose first call was timed
  std::vector<CollectiveOp> batch_ops_;
  double batch_started_ = 0;
  int64_t entered_ = 0;
  int pair_index_ = -1;
  std::map<int, int64_t> pair_calls_;  // sendrecv calls with each peer
  int64_t pair_pending_ = 0;
};

}  // namespace

std::unique_ptr<Collective> with_sequence_numbers(
    std::unique_ptr<Collective> inner, const std::string& label, CollectiveLedger& ledger,
    std::function<void(const std::string&, int64_t)> before_enter, CommTimeLog& times) {
  return std::make_unique<SequencedCollective>(std::move(inner), label, ledger,
                                               std::move(before_enter), times);
}

}  // namespace tp
