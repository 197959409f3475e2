#pragma once
// Gradient buckets, as DDP forms them: layers in backward order are packed into a bucket until it
// holds at least `bucket_mb`; a bucket is reduced as soon as its last layer's backward is done.
#include <cstddef>
#include <vector>

namespace tp {

struct Bucket {
  int lowest_layer = 0;   // its backward finishes last, and releases the bucket
  int highest_layer = 0;  // inclusive
  size_t offset = 0;      // floats into the flat gradient buffer
  size_t count = 0;       // floats
};

// Buckets in launch order (highest layers first). Layer l occupies [l*layer_floats, (l+1)*...).
std::vector<Bucket> plan_buckets(int layers, size_t layer_floats, double bucket_mb);

}  // namespace tp
