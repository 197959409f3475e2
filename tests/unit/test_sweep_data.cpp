// The sweep's inputs and expected outputs (docs/sweep.md, "Correctness") against collectives
// carried out here on the ranks' encoded buffers, the way MPI and NCCL define them: every element
// of every rank must match, and one flipped element must be counted.
#include <gtest/gtest.h>

#include <vector>

#include "common/errors.h"
#include "fabric/sweep_data.h"

namespace {

using tp::CollectiveOp;
using tp::ElementType;
using Buffer = std::vector<unsigned char>;

// What each rank receives when every rank's `inputs` go through `op`, done element by element on
// the encoded bytes (a reduction decodes, adds and encodes again).
std::vector<Buffer> carry_out(CollectiveOp op, ElementType type, const std::vector<Buffer>& inputs,
                              uint64_t count) {
  const int n = int(inputs.size());
  const size_t w = tp::sweep_type_bytes(type);
  const uint64_t block = count / uint64_t(n);
  std::vector<Buffer> out(inputs.size());
  const auto element = [&](int rank, uint64_t i) { return inputs[size_t(rank)].data() + i * w; };
  const auto sum_at = [&](uint64_t i) {
    int64_t sum = 0;
    for (int r = 0; r < n; ++r) sum += tp::decode_element(type, element(r, i));
    return tp::encode(type, {sum});
  };
  for (int r = 0; r < n; ++r) {
    Buffer& mine = out[size_t(r)];
    const auto append = [&](const unsigned char* at) { mine.insert(mine.end(), at, at + w); };
    switch (op) {
      case CollectiveOp::allreduce:
        for (uint64_t i = 0; i < count; ++i) {
          const Buffer s = sum_at(i);
          mine.insert(mine.end(), s.begin(), s.end());
        }
        break;
      case CollectiveOp::reducescatter:
        for (uint64_t i = 0; i < block; ++i) {
          const Buffer s = sum_at(uint64_t(r) * block + i);
          mine.insert(mine.end(), s.begin(), s.end());
        }
        break;
      case CollectiveOp::allgather:
        for (int from = 0; from < n; ++from)
          for (uint64_t i = 0; i < block; ++i) append(element(from, i));
        break;
      case CollectiveOp::alltoall:
        for (int from = 0; from < n; ++from)
          for (uint64_t i = 0; i < block; ++i) append(element(from, uint64_t(r) * block + i));
        break;
      case CollectiveOp::broadcast:
        mine = inputs[0];
        break;
      case CollectiveOp::sendrecv:
        mine = inputs[size_t((r + n - 1) % n)];
        break;
    }
  }
  return out;
}

TEST(SweepData, EveryRankReceivesWhatItExpectsForEveryOpTypeAndRankCount) {
  for (const ElementType type :
       {ElementType::f32, ElementType::i32, ElementType::bf16, ElementType::f16})
    for (const int n : {1, 2, 3, 4, 8, 16})
      for (const CollectiveOp op : tp::all_sweep_ops()) {
        const uint64_t count = uint64_t(n) * 48;
        std::vector<Buffer> inputs;
        for (int r = 0; r < n; ++r)
          inputs.push_back(tp::encode(type, tp::row_input(op, type, n, r, count)));
        const std::vector<Buffer> received = carry_out(op, type, inputs, count);
        for (int r = 0; r < n; ++r) {
          const auto expected = tp::row_expected(op, type, n, r, count);
          ASSERT_EQ(received[size_t(r)].size(), expected.size() * tp::sweep_type_bytes(type));
          EXPECT_EQ(tp::count_wrong(type, received[size_t(r)].data(), expected), 0u)
              << tp::sweep_op_name(op) << " " << tp::sweep_type_name(type) << " n=" << n << " rank "
              << r;
        }
      }
}

TEST(SweepData, AWrongElementIsCountedAndAMisplacedBlockToo) {
  const ElementType type = ElementType::bf16;
  const int n = 4;
  const uint64_t count = 64;
  std::vector<Buffer> inputs;
  for (int r = 0; r < n; ++r)
    inputs.push_back(tp::encode(type, tp::row_input(CollectiveOp::allgather, type, n, r, count)));
  std::vector<Buffer> received = carry_out(CollectiveOp::allgather, type, inputs, count);
  const auto expected = tp::row_expected(CollectiveOp::allgather, type, n, 2, count);
  received[2][10 * 2] ^= 0x01;  // one element's lowest bit
  EXPECT_EQ(tp::count_wrong(type, received[2].data(), expected), 1u);
  // Rank 1's block where rank 0's belongs: the inputs differ by rank, so it is caught.
  Buffer swapped = carry_out(CollectiveOp::allgather, type, inputs, count)[2];
  std::copy(swapped.begin() + 16 * 2, swapped.begin() + 32 * 2, swapped.begin());
  EXPECT_GT(tp::count_wrong(type, swapped.data(), expected), 0u);
}

TEST(SweepData, SumsStayExactInSixteenBits) {
  for (const int n : {1, 2, 8, 64, 256}) {
    EXPECT_LE(n * tp::largest_input(ElementType::bf16, n), 256) << n;
    EXPECT_LE(n * tp::largest_input(ElementType::f16, n), 2048) << n;
    for (int64_t v = 0; v <= 256; ++v) {
      EXPECT_EQ(tp::decode_element(ElementType::bf16, tp::encode(ElementType::bf16, {v}).data()),
                v);
      EXPECT_EQ(tp::decode_element(ElementType::f16, tp::encode(ElementType::f16, {v}).data()), v);
    }
  }
  EXPECT_EQ(tp::decode_element(ElementType::f16, tp::encode(ElementType::f16, {2048}).data()),
            2048);
}

TEST(SweepData, ACountThatDoesNotDivideAmongTheRanksIsRefused) {
  EXPECT_THROW(tp::row_shape(CollectiveOp::allgather, 3, 10), tp::UsageError);
  EXPECT_EQ(tp::row_shape(CollectiveOp::allgather, 2, 10).send_count, 5u);
  EXPECT_EQ(tp::row_shape(CollectiveOp::reducescatter, 2, 10).recv_count, 5u);
  EXPECT_EQ(tp::row_shape(CollectiveOp::allreduce, 3, 10).recv_count, 10u);
}

TEST(RankSum, EqualsTheSumOfEveryRanksInput) {
  for (tp::ElementType type :
       {tp::ElementType::f32, tp::ElementType::i32, tp::ElementType::bf16, tp::ElementType::f16})
    for (int ranks : {1, 2, 3, 7, 64, 255, 256, 1000}) {
      const tp::RankSum sum(type, ranks);
      for (uint64_t index : {0ull, 1ull, 127ull, 128ull, 4093ull, 1000003ull, 17179869183ull}) {
        int64_t expected = 0;
        for (int r = 0; r < ranks; ++r) expected += tp::input_value(type, ranks, r, index);
        ASSERT_EQ(sum.at(index), expected) << ranks << " ranks, index " << index;
      }
    }
}

}  // namespace
