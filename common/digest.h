#pragma once
// xxh3-128 digests of state buffers, as lowercase hex. One streaming state so a model's many
// tensors hash as one byte sequence.
#include <cstddef>
#include <cstdint>
#include <string>

struct XXH3_state_s;

namespace tp {

struct Digest128 {
  uint64_t high = 0;
  uint64_t low = 0;
  bool operator==(const Digest128& o) const { return high == o.high && low == o.low; }
  bool operator!=(const Digest128& o) const { return !(*this == o); }
  std::string hex() const;
};

class DigestBuilder {
 public:
  DigestBuilder();
  ~DigestBuilder();
  DigestBuilder(const DigestBuilder&) = delete;
  DigestBuilder& operator=(const DigestBuilder&) = delete;

  void add(const void* data, size_t bytes);
  // Every element of a contiguous container (vector, array) as raw bytes.
  template <typename Contiguous>
  void add_all(const Contiguous& values) {
    add(values.data(), values.size() * sizeof(*values.data()));
  }
  Digest128 finish() const;

 private:
  XXH3_state_s* state_;
};

Digest128 digest_of(const void* data, size_t bytes);

}  // namespace tp
