#pragma once
// Philox4x32-10, the counter-based generator of Salmon et al. (SC'11), as used by cuRAND and JAX.
// Any value is a pure function of (key, counter): init and synthetic data can be drawn for any
// tensor element or global sample index, on any rank or device, in any order.
#include <cstdint>

#include "common/host_device.h"

namespace tp::philox {

struct Counter {
  uint32_t v[4];
  TP_HD uint32_t operator[](int i) const { return v[i]; }
  bool operator==(const Counter& o) const {
    return v[0] == o.v[0] && v[1] == o.v[1] && v[2] == o.v[2] && v[3] == o.v[3];
  }
};
struct Key {
  uint32_t v[2];
};

TP_HD inline Counter round(const Counter& c, const Key& k) {
  const uint64_t p0 = uint64_t{0xD2511F53u} * c.v[0];
  const uint64_t p1 = uint64_t{0xCD9E8D57u} * c.v[2];
  return {{static_cast<uint32_t>(p1 >> 32) ^ c.v[1] ^ k.v[0], static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ c.v[3] ^ k.v[1], static_cast<uint32_t>(p0)}};
}

TP_HD inline Counter philox4x32_10(Counter c, Key k) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k.v[0] += 0x9E3779B9u;
      k.v[1] += 0xBB67AE85u;
    }
    c = round(c, k);
  }
  return c;
}

// Streams keep init and data draws apart even when their indices coincide.
enum Stream : uint32_t {
  kParams = 1,
  kInputs = 2,
  kTargets = 3,
  kSampleBytes = 4,   // dataset sample content
  kSampleLength = 5,  // dataset sample length
  kShuffle = 6,       // per-epoch sample order
};

// Exact map of 24 random bits to a float on the grid k*2^-23 - 1, i.e. uniform in [-1, 1).
TP_HD inline float to_symmetric_unit(uint32_t bits) {
  return static_cast<float>(bits >> 8) * 0x1p-23f - 1.0f;
}

// Element e of item `item` in `stream` takes lane e%4 of counter block e/4, so any element can
// be drawn on its own, by a CPU loop or a GPU thread alike.
TP_HD inline Counter block_bits(uint64_t seed, Stream stream, uint64_t item, uint64_t block) {
  return philox4x32_10({{static_cast<uint32_t>(block), static_cast<uint32_t>(item),
                         static_cast<uint32_t>(item >> 32), stream}},
                       {{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}});
}

// Fills out[0..n) with uniform [-1,1) values * scale for elements [0, n) of `item` in `stream`.
inline void fill_uniform(float* out, uint64_t n, uint64_t seed, Stream stream, uint64_t item,
                         float scale) {
  for (uint64_t block = 0; block * 4 < n; ++block) {
    const Counter bits = block_bits(seed, stream, item, block);
    for (uint64_t lane = 0; lane < 4 && block * 4 + lane < n; ++lane)
      out[block * 4 + lane] = to_symmetric_unit(bits[int(lane)]) * scale;
  }
}

}  // namespace tp::philox
