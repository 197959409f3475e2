// Sequence numbers per communicator (mpi/collective_ledger.h), published with the heartbeats, and
// the collective some ranks never entered (train/unentered.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "mpi/collective_ledger.h"
#include "train/culprits.h"
#include "train/heartbeat.h"
#include "train/unentered.h"

namespace {

// A collective that does nothing but count what reaches it.
class CountingCollective final : public tp::Collective {
 public:
  std::string name() const override { return "counting"; }
  void start_allreduce_sum(float*, size_t) override { ++calls; }
  void progress() override {}
  void wait_all() override {}
  void allreduce_sum(float*, size_t) override { ++calls; }
  tp::CommTiming take_comm_timing() override { return {}; }
  std::string timing_method(bool) const override { return ""; }
  const void* run(const tp::CollectiveCall& call) override {
    ++calls;
    return call.recv;
  }
  void synchronize() override {}
  std::unique_ptr<tp::Collective> split(int, int) override {
    return std::make_unique<CountingCollective>();
  }
  int calls = 0;
};

class Sink final : public tp::LedgerSink {
 public:
  void publish(int index, const tp::CommProgress& progress) override {
    if (size_t(index) >= seen.size()) seen.resize(size_t(index) + 1);
    seen[size_t(index)] = progress;
  }
  std::vector<tp::CommProgress> seen;
};

tp::CollectiveCall call_of(tp::CollectiveOp op, size_t count, tp::ElementType type) {
  tp::CollectiveCall call;
  call.op = op;
  call.type = type;
  call.send_count = call.recv_count = count;
  return call;
}

TEST(CollectiveLedger, EveryOperationGetsTheNextNumberOfItsCommunicator) {
  tp::CollectiveLedger ledger;
  tp::CommTimeLog times;
  Sink sink;
  ledger.attach(&sink);
  auto world = tp::with_sequence_numbers(std::make_unique<CountingCollective>(), "world", ledger,
                                         nullptr, times);
  float data[4] = {};
  world->allreduce_sum(data, 4);
  // The first alltoall is waited for alone (its time is the first of its kind); the second is
  // complete only at synchronize().
  const auto alltoall = call_of(tp::CollectiveOp::alltoall, 1024, tp::ElementType::bf16);
  world->run(alltoall);
  world->run(alltoall);
  ASSERT_EQ(sink.seen.size(), size_t(tp::kLedgerComms)) << "every slot, empty ones too";
  EXPECT_TRUE(sink.seen[1].empty());
  EXPECT_EQ(sink.seen[0].label, "world");
  EXPECT_EQ(sink.seen[0].entered, 3);
  EXPECT_EQ(sink.seen[0].completed, 2);
  EXPECT_EQ(sink.seen[0].recent[0].op, tp::CollectiveOp::alltoall);
  EXPECT_EQ(sink.seen[0].recent[0].bytes, 2048);
  EXPECT_EQ(sink.seen[0].recent[2].seq, 1);
  world->synchronize();
  EXPECT_EQ(sink.seen[0].completed, 3);
  // A split is a communicator of its own, numbered from 1.
  auto rail = world->split(3, 0);
  rail->allreduce_sum(data, 4);
  EXPECT_EQ(sink.seen[1].label, "world:3");
  EXPECT_EQ(sink.seen[1].entered, 1);
  // Timed: each operation's first call, the later ones steady, the split's set-up.
  const auto slots = times.slots();
  EXPECT_GE(slots[size_t(tp::first_slot(0, tp::CollectiveOp::allreduce))], 0.0);
  EXPECT_GE(slots[size_t(tp::first_slot(0, tp::CollectiveOp::alltoall))], 0.0);
  EXPECT_GE(slots[size_t(tp::steady_slot(0, tp::CollectiveOp::alltoall))], 0.0);
  EXPECT_EQ(slots[size_t(tp::steady_slot(0, tp::CollectiveOp::allreduce))], -1.0)
      << "one allreduce: no steady figure";
  EXPECT_GE(slots[size_t(tp::set_up_slot(1))], 0.0);
  EXPECT_GE(slots[size_t(tp::first_slot(1, tp::CollectiveOp::allreduce))], 0.0);
  EXPECT_EQ(slots[size_t(tp::set_up_slot(0))], -1.0) << "the world's set-up is its maker's";
}

TEST(CommTimings, NcclsInitTimingsLineIsReadWithItsParts) {
  const auto t = tp::parse_nccl_init_timings(
      "node-01:1106802:1106870 [3] NCCL INFO Init timings - ncclCommInitRankConfig: rank 3 "
      "nranks 8 total 55.01 (kernels 52.45, alloc 0.41, bootstrap 0.57, allgathers 0.08, topo "
      "1.10, graphs 0.01, connections 0.39, rest 0.00)");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->rank, 3);
  EXPECT_EQ(t->nranks, 8);
  EXPECT_DOUBLE_EQ(t->total, 55.01);
  ASSERT_EQ(t->parts.size(), 8u);
  EXPECT_EQ(t->parts[2].first, "bootstrap");
  EXPECT_DOUBLE_EQ(t->parts[2].second, 0.57);
  EXPECT_FALSE(tp::parse_nccl_init_timings("NCCL INFO Init COMPLETE"));
}

TEST(CollectiveLedger, TransfersAreCountedPerPairAndAnIdleRankCountsNone) {
  tp::CollectiveLedger ledger;
  Sink sink;
  ledger.attach(&sink);
  auto world = tp::with_sequence_numbers(std::make_unique<CountingCollective>(), "world", ledger);
  tp::CollectiveCall call = call_of(tp::CollectiveOp::sendrecv, 256, tp::ElementType::f32);
  call.send_to = call.recv_from = -1;
  world->run(call);  // no part in this round
  EXPECT_TRUE(sink.seen[1].empty());
  call.send_to = 5;
  world->run(call);
  world->synchronize();
  call.send_to = 6;
  world->run(call);
  EXPECT_EQ(sink.seen[1].label, "world/p2p");
  EXPECT_EQ(sink.seen[1].peer, 6);
  EXPECT_EQ(sink.seen[1].entered, 1) << "the first transfer with rank 6";
  EXPECT_EQ(sink.seen[1].completed, 0) << "outstanding";
  EXPECT_EQ(sink.seen[0].entered, 0) << "transfers are not collectives";
}

TEST(CollectiveLedger, AHeldRankStopsShortOfItsCollective) {
  tp::CollectiveLedger ledger;
  auto inner = std::make_unique<CountingCollective>();
  CountingCollective* counting = inner.get();
  int64_t held_at = 0;
  auto world = tp::with_sequence_numbers(std::move(inner), "world", ledger,
                                         [&](const std::string& label, int64_t seq) {
                                           if (label == "world" && seq == 3) {
                                             held_at = seq;
                                             throw std::runtime_error("held");
                                           }
                                         });
  float data[1] = {};
  world->allreduce_sum(data, 1);
  world->allreduce_sum(data, 1);
  EXPECT_THROW(world->allreduce_sum(data, 1), std::runtime_error);
  EXPECT_EQ(held_at, 3);
  EXPECT_EQ(counting->calls, 2) << "the held collective never reached the library";
  EXPECT_EQ(ledger.snapshot()[0].entered, 2);
}

tp::HeartbeatRecord rank_with(int rank, const std::string& host,
                              std::vector<tp::CommProgress> comms) {
  tp::HeartbeatRecord h;
  h.rank = rank;
  h.host = host;
  h.present = true;
  h.comms = std::move(comms);
  return h;
}

// Names built by appending: GCC 12 warns falsely (-Wrestrict) of "literal" + std::to_string.
std::string numbered(const char* prefix, int n, const char* suffix = "") {
  std::string label = prefix;
  label += std::to_string(n);
  label += suffix;
  return label;
}
std::string split_label(int color, const char* suffix = "") {
  return numbered("world:", color, suffix);
}

tp::CommProgress comm(const std::string& label, int64_t entered, int64_t completed, int peer = -1) {
  tp::CommProgress c;
  c.label = label;
  c.entered = entered;
  c.completed = completed;
  c.peer = peer;
  for (int64_t i = 0; i < tp::kLedgerRecent && entered - i > 0; ++i)
    c.recent[size_t(i)] = {entered - i,
                           peer >= 0 ? tp::CollectiveOp::sendrecv : tp::CollectiveOp::allreduce,
                           4096 * (entered - i)};
  return c;
}

TEST(Unentered, TheRanksBehindOnACommunicatorAreNamedWithTheCallTheOthersEntered) {
  std::vector<tp::HeartbeatRecord> records;
  for (int r = 0; r < 4; ++r)
    records.push_back(rank_with(r, numbered("node-", r / 2), {comm("world", r == 3 ? 6 : 7, 6)}));
  const auto u = tp::first_unentered(records);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->comm, "world");
  EXPECT_EQ(u->seq, 7);
  EXPECT_EQ(u->op, "allreduce");
  EXPECT_EQ(u->bytes, 7 * 4096);
  EXPECT_EQ(u->ranks, std::vector<int>{3});
  EXPECT_EQ(u->hosts, std::vector<std::string>{"node-1"});
  EXPECT_EQ(u->waiting, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(tp::unentered_text(*u),
            "world seq 7 (allreduce, 28672 B) was not entered by rank 3 on node-1");
}

TEST(Unentered, EveryRankInTheSameCollectiveIsNoGap) {
  std::vector<tp::HeartbeatRecord> records;
  for (int r = 0; r < 4; ++r) records.push_back(rank_with(r, "n", {comm("world", 7, 6)}));
  EXPECT_FALSE(tp::first_unentered(records));
}

TEST(Unentered, APeerThatNeverEnteredItsTransferIsNamed) {
  std::vector<tp::HeartbeatRecord> records = {
      rank_with(0, "a", {comm("world/p2p", 3, 2, 1)}),  // waits on rank 1, its third transfer
      rank_with(1, "b", {comm("world/p2p", 2, 2, 0)}),  // finished the second, never the third
      rank_with(2, "c", {comm("world/p2p", 5, 5, 3)}),
      rank_with(3, "d", {comm("world/p2p", 5, 5, 2)})};
  const auto u = tp::first_unentered(records);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->comm, "world/p2p");
  EXPECT_EQ(u->seq, 3);
  EXPECT_EQ(u->op, "sendrecv");
  EXPECT_EQ(u->ranks, std::vector<int>{1});
  EXPECT_EQ(u->waiting, std::vector<int>{0});
  // Both inside the same transfer: a slow link, not one that was never entered.
  records[1].comms[0] = comm("world/p2p", 3, 2, 0);
  EXPECT_FALSE(tp::first_unentered(records));
}

TEST(Unentered, ACollectiveGapOutranksATransferAndTheMostWaitedOnGapWins) {
  std::vector<tp::HeartbeatRecord> records;
  for (int r = 0; r < 8; ++r)
    records.push_back(rank_with(
        r, numbered("n", r),
        {comm("world", r == 5 ? 10 : 11, 10), comm(split_label(r % 2), r == 2 ? 3 : 4, 3)}));
  records[6].comms.push_back(comm("world/p2p", 1, 0, 7));
  const auto u = tp::first_unentered(records);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->comm, "world") << "seven ranks wait in world, three in world:0";
  EXPECT_EQ(u->ranks, std::vector<int>{5});
}

// 4,096 ranks on 512 nodes, every one with four communicators: one pass over the records, and
// the one rank of 4,096 that stopped short is named.
TEST(Unentered, FourThousandRanksNameTheOneRankThatStoppedShort) {
  std::vector<tp::HeartbeatRecord> records;
  for (int r = 0; r < 4096; ++r)
    records.push_back(
        rank_with(r, numbered("node-", r / 8),
                  {comm("world", r == 2777 ? 40 : 41, 40), comm(split_label(r % 8), 9, 9),
                   comm(split_label(r % 8, "/p2p"), 2, 2, r ^ 1)}));
  const auto u = tp::first_unentered(records);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->seq, 41);
  EXPECT_EQ(u->ranks, std::vector<int>{2777});
  EXPECT_EQ(u->hosts, std::vector<std::string>{"node-347"});
  EXPECT_EQ(u->waiting.size(), 4095u);
}

// The records go through the node's file and back: what a watchdog on another node reads.
TEST(Unentered, TheSequenceNumbersTravelInTheHeartbeatFileAndReachAbortJson) {
  const std::string dir = ::testing::TempDir() + "unentered-beats";
  std::filesystem::remove_all(dir);
  {
    tp::Heartbeat r0(dir, 0, "node-a"), r1(dir, 1, "node-b");
    r0.publish(0, comm("world", 7, 6));
    r0.publish(1, comm("world/p2p", 2, 1, 1));
    r1.publish(0, comm("world", 6, 6));
    r0.publish_now();
    r1.publish_now();
    const std::vector<tp::HeartbeatRecord> read = tp::Heartbeat::read_all(dir, 2);
    ASSERT_EQ(read[0].comms.size(), 2u);
    EXPECT_EQ(read[0].comms[0].label, "world");
    EXPECT_EQ(read[0].comms[0].recent[0].bytes, 7 * 4096);
    EXPECT_EQ(read[0].comms[1].peer, 1);
    const tp::Verdict verdict = tp::name_culprits(read, read);
    ASSERT_TRUE(verdict.unentered);
    const std::string summary = tp::write_abort_record(dir, "test", read[0], verdict);
    EXPECT_NE(summary.find("world seq 7 (allreduce, 28672 B) was not entered by rank 1 on node-b"),
              std::string::npos)
        << summary;
    std::ifstream in(dir + "/abort.json");
    const nlohmann::json abort = nlohmann::json::parse(in);
    EXPECT_EQ(abort["first_unentered"]["comm"], "world");
    EXPECT_EQ(abort["first_unentered"]["seq"], 7);
    EXPECT_EQ(abort["first_unentered"]["op"], "allreduce");
    EXPECT_EQ(abort["first_unentered"]["ranks"], nlohmann::json::array({1}));
    EXPECT_EQ(abort["first_unentered"]["hosts"], nlohmann::json::array({"node-b"}));
  }
  std::filesystem::remove_all(dir);
}

}  // namespace

namespace {

// A rank still inside the collective before is told apart from one that never came: it waits too.
TEST(Unentered, RanksStillInsideThePreviousCollectiveAreNotTheOnesThatNeverCame) {
  std::vector<tp::HeartbeatRecord> records = {
      rank_with(0, "a", {comm("world", 40, 39)}),  // inside 40, waiting for rank 1's share
      rank_with(1, "b", {comm("world", 40, 40)}),  // finished 40, never entered 41
      rank_with(2, "c", {comm("world", 41, 40)})};
  const auto u = tp::first_unentered(records);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->seq, 41);
  EXPECT_EQ(u->ranks, std::vector<int>{1});
  EXPECT_EQ(u->inside_previous, std::vector<int>{0});
  EXPECT_EQ(tp::unentered_text(*u),
            "world seq 41 (allreduce, 167936 B) was not entered by rank 1 on b, nor by 1 rank(s) "
            "still inside seq 40");
}

}  // namespace
