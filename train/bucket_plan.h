#pragma once
// Gradient buckets, as DDP forms them: layers in backward order are packed into a bucket until it
// holds at least `bucket_mb`; a bucket is reduced as soon as its last layer's backward is done.
#include <cstddef>
#include <vector>

namespace tp {

struct Bucket {
  int lowest_layer = 0;   // its backward finishes last, and releases the bucket
  int highest_layer = 0;  // inclusive (a few of the next layer's elements may be rounded in)
  size_t offset = 0;      // floats into the flat gradient buffer
  size_t count = 0;       // floats
};

// Every bucket but the last (which starts at 0) starts on a 256-byte boundary, whatever the
// layer's size: NCCL and the network move aligned buffers fastest.
inline constexpr size_t kBucketAlignFloats = 256 / sizeof(float);

// Buckets in launch order (highest layers first). Layer l occupies [l*layer_floats, (l+1)*...);
// a bucket holds its layers, its start rounded up to the alignment (and so a few elements of its
// lowest layer in the next bucket when a layer's size is not a multiple of it).
std::vector<Bucket> plan_buckets(int layers, size_t layer_floats, double bucket_mb);

}  // namespace tp
