#include "fabric/sweep_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/errors.h"

namespace tp {
namespace {

// Exact integers: bf16 has 8 significant bits, fp16 11, fp32 24; int32 is kept far from overflow.
int64_t exact_limit(ElementType type) {
  switch (type) {
    case ElementType::bf16:
      return 256;
    case ElementType::f16:
      return 2048;
    case ElementType::f32:
      return int64_t(1) << 24;
    case ElementType::i32:
      return int64_t(1) << 30;
  }
  return 256;
}

uint16_t bf16_bits(int64_t value) {
  const float f = float(value);
  uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  return uint16_t(bits >> 16);  // exact: a small integer's low mantissa bits are zero
}

int64_t from_bf16(uint16_t bits) {
  const uint32_t wide = uint32_t(bits) << 16;
  float f = 0;
  std::memcpy(&f, &wide, sizeof f);
  return std::isfinite(f) && f == std::floor(f) ? int64_t(f) : INT64_MIN;
}

uint16_t f16_bits(int64_t value) {
  if (value == 0) return 0;
  int exponent = 0;
  while ((int64_t(2) << exponent) <= value) ++exponent;
  const uint64_t mantissa =
      (exponent <= 10 ? uint64_t(value) << (10 - exponent) : uint64_t(value) >> (exponent - 10)) &
      0x3FF;
  return uint16_t(((exponent + 15) << 10) | mantissa);
}

int64_t from_f16(uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1F;
  const int64_t mantissa = bits & 0x3FF;
  if (bits & 0x8000 || exponent == 0x1F) return INT64_MIN;  // negative, inf or NaN: never sent
  if (exponent == 0) return mantissa == 0 ? 0 : INT64_MIN;  // subnormal: never an integer here
  const double value = std::ldexp(double(0x400 | mantissa), exponent - 25);
  return value == std::floor(value) ? int64_t(value) : INT64_MIN;
}

}  // namespace

std::string sweep_type_name(ElementType type) {
  switch (type) {
    case ElementType::f32:
      return "float32";
    case ElementType::i32:
      return "int32";
    case ElementType::bf16:
      return "bfloat16";
    case ElementType::f16:
      return "float16";
  }
  return "unknown";
}

size_t sweep_type_bytes(ElementType type) {
  return type == ElementType::f32 || type == ElementType::i32 ? 4 : 2;
}

int64_t most_exact_ranks(ElementType type) {
  return exact_limit(type);
}

int64_t largest_input(ElementType type, int ranks) {
  return std::clamp<int64_t>(exact_limit(type) / std::max(ranks, 1), 1, 1000);
}

int64_t input_value(ElementType type, int ranks, int rank, uint64_t index) {
  // Varies with both the rank and the index, so a block sent to the wrong place is caught.
  const uint64_t mix = uint64_t(rank) * 7919 + index * 104729 + (index >> 7);
  return int64_t(mix % uint64_t(largest_input(type, ranks) + 1));
}

std::vector<unsigned char> encode(ElementType type, const std::vector<int64_t>& values) {
  std::vector<unsigned char> bytes(values.size() * sweep_type_bytes(type));
  for (size_t i = 0; i < values.size(); ++i) {
    unsigned char* at = bytes.data() + i * sweep_type_bytes(type);
    if (type == ElementType::f32) {
      const float f = float(values[i]);
      std::memcpy(at, &f, sizeof f);
    } else if (type == ElementType::i32) {
      const int32_t v = int32_t(values[i]);
      std::memcpy(at, &v, sizeof v);
    } else {
      const uint16_t bits = type == ElementType::bf16 ? bf16_bits(values[i]) : f16_bits(values[i]);
      std::memcpy(at, &bits, sizeof bits);
    }
  }
  return bytes;
}

int64_t decode_element(ElementType type, const unsigned char* element) {
  if (type == ElementType::f32) {
    float f = 0;
    std::memcpy(&f, element, sizeof f);
    return std::isfinite(f) && f == std::floor(f) ? int64_t(f) : INT64_MIN;
  }
  if (type == ElementType::i32) {
    int32_t v = 0;
    std::memcpy(&v, element, sizeof v);
    return v;
  }
  uint16_t bits = 0;
  std::memcpy(&bits, element, sizeof bits);
  return type == ElementType::bf16 ? from_bf16(bits) : from_f16(bits);
}

RowShape row_shape(CollectiveOp op, int ranks, uint64_t count) {
  const uint64_t n = uint64_t(std::max(ranks, 1));
  const bool divided = op == CollectiveOp::allgather || op == CollectiveOp::reducescatter ||
                       op == CollectiveOp::alltoall;
  if (divided && count % n != 0)
    throw UsageError(sweep_op_name(op) + " of " + std::to_string(count) +
                     " elements: the count must be a multiple of the " + std::to_string(n) +
                     " ranks");
  switch (op) {
    case CollectiveOp::allgather:
      return {count / n, count};
    case CollectiveOp::reducescatter:
      return {count, count / n};
    default:
      return {count, count};
  }
}

std::vector<int64_t> row_input(CollectiveOp op, ElementType type, int ranks, int rank,
                               uint64_t count) {
  const RowShape shape = row_shape(op, ranks, count);
  std::vector<int64_t> values(shape.send_count);
  for (uint64_t i = 0; i < values.size(); ++i) values[i] = input_value(type, ranks, rank, i);
  return values;
}

RankSum::RankSum(ElementType type, int ranks)
    : modulus_(uint64_t(largest_input(type, ranks) + 1)), ranks_(uint64_t(std::max(ranks, 0))) {
  // input_value(r, i) = (a_r + b_i) mod M, with a_r = r * 7919 mod M and b_i the index's part.
  // Summed over r: sum(a_r) + n b_i - M * #{r : a_r + b_i >= M}.
  at_least_.assign(modulus_ + 1, 0);
  for (uint64_t r = 0; r < ranks_; ++r) {
    const uint64_t a = r * 7919 % modulus_;
    rank_parts_ += a;
    ++at_least_[a];
  }
  for (uint64_t k = modulus_; k-- > 0;) at_least_[k] += at_least_[k + 1];
}

int64_t RankSum::at(uint64_t index) const {
  const uint64_t b = (index * 104729 + (index >> 7)) % modulus_;
  const uint64_t wrapped = at_least_[modulus_ - b];
  return int64_t(rank_parts_ + ranks_ * b - modulus_ * wrapped);
}

std::vector<int64_t> row_expected(CollectiveOp op, ElementType type, int ranks, int rank,
                                  uint64_t count) {
  const RowShape shape = row_shape(op, ranks, count);
  const auto in = [&](int from, uint64_t i) { return input_value(type, ranks, from, i); };
  const RankSum sum(type, ranks);
  std::vector<int64_t> out(shape.recv_count, 0);
  const uint64_t block = count / uint64_t(std::max(ranks, 1));
  for (uint64_t i = 0; i < out.size(); ++i) {
    switch (op) {
      case CollectiveOp::allreduce:
        out[i] = sum.at(i);
        break;
      case CollectiveOp::reducescatter:
        out[i] = sum.at(uint64_t(rank) * block + i);
        break;
      case CollectiveOp::allgather:
        out[i] = in(int(i / block), i % block);
        break;
      case CollectiveOp::alltoall:
        out[i] = in(int(i / block), uint64_t(rank) * block + i % block);
        break;
      case CollectiveOp::broadcast:
        out[i] = in(0, i);
        break;
      case CollectiveOp::sendrecv:
        out[i] = in((rank + ranks - 1) % ranks, i);
        break;
    }
  }
  return out;
}

uint64_t count_wrong(ElementType type, const unsigned char* received,
                     const std::vector<int64_t>& expected) {
  uint64_t wrong = 0;
  const size_t width = sweep_type_bytes(type);
  for (size_t i = 0; i < expected.size(); ++i)
    if (decode_element(type, received + i * width) != expected[i]) ++wrong;
  return wrong;
}

}  // namespace tp
