#include "train/bucket_plan.h"

namespace tp {

std::vector<Bucket> plan_buckets(int layers, size_t layer_floats, double bucket_mb) {
  const double cap_bytes = bucket_mb * 1024.0 * 1024.0;
  std::vector<Bucket> buckets;
  int highest = layers - 1;
  for (int l = layers - 1; l >= 0; --l) {
    const double bytes = double(highest - l + 1) * double(layer_floats) * sizeof(float);
    if (bytes >= cap_bytes || l == 0) {
      buckets.push_back(
          {l, highest, size_t(l) * layer_floats, size_t(highest - l + 1) * layer_floats});
      highest = l - 1;
    }
  }
  return buckets;
}

}  // namespace tp
