#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/digest.h"

TEST(Digest, KnownAnswerForEmptyInput) {
  EXPECT_EQ(tp::digest_of("", 0).hex(), "99aa06d3014798d86001c324468d497f");
}

TEST(Digest, StreamingEqualsOneShot) {
  std::vector<float> a{1, 2, 3}, b{4, 5};
  tp::DigestBuilder builder;
  builder.add_all(a);
  builder.add_all(b);
  const std::vector<float> both{1, 2, 3, 4, 5};
  EXPECT_EQ(builder.finish(), tp::digest_of(both.data(), both.size() * sizeof(float)));
}

TEST(Digest, OneBitChangesTheDigest) {
  std::vector<float> a{1, 2, 3};
  const auto before = tp::digest_of(a.data(), 12);
  a[1] = std::nextafter(a[1], 10.0f);
  EXPECT_NE(before, tp::digest_of(a.data(), 12));
  EXPECT_EQ(before.hex().size(), 32u);
}
