#include "train/bucket_plan.h"

#include <algorithm>

namespace tp {

std::vector<Bucket> plan_buckets(int layers, size_t layer_floats, double bucket_mb) {
  const double cap_bytes = bucket_mb * 1024.0 * 1024.0;
  const size_t total = size_t(layers) * layer_floats;
  // A bucket starts at its lowest layer's start, rounded up to the alignment. The few elements
  // rounded over belong to that layer and travel in the next bucket, which is released later,
  // when they are long done.
  auto aligned_start = [&](int layer) {
    const size_t start = size_t(layer) * layer_floats;
    const size_t up = (start + kBucketAlignFloats - 1) / kBucketAlignFloats * kBucketAlignFloats;
    return layer == 0 ? 0 : std::min(up, total);
  };
  std::vector<Bucket> buckets;
  int highest = layers - 1;
  size_t end = total;
  for (int l = layers - 1; l >= 0; --l) {
    const double bytes = double(highest - l + 1) * double(layer_floats) * sizeof(float);
    if (bytes >= cap_bytes || l == 0) {
      const size_t start = aligned_start(l);
      // Layers smaller than the alignment can round to nothing: they join the next bucket.
      if (start == end) continue;
      buckets.push_back({l, highest, start, end - start});
      highest = l - 1;
      end = start;
    }
  }
  return buckets;
}

}  // namespace tp
