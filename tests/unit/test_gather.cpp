#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "mpi/gather.h"
#include "one_rank.h"

namespace {

// A host name or path is bytes: one that is not UTF-8 must reach rank 0 unchanged, to be escaped
// once in the report (docs/report.md, "Text that is not UTF-8"), not throw on the way.
TEST(GatherRecords, StringsThatAreNotUtf8CrossUnchanged) {
  const tp::World world = tp::test::one_rank_world("r\xe9sum\xe9-host");
  const nlohmann::json mine = {{"host", world.host}, {"path", "/scratch/\xff\xfe"}};
  const auto all = tp::gather_records_at_root(world, mine);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0], mine);
}

TEST(GatherRecords, DoublesCrossBitForBit) {
  const tp::World world = tp::test::one_rank_world();
  const double values[] = {0.1, 1.0 / 3.0, 6.02214076e23, -0.0,
                           std::numeric_limits<double>::denorm_min()};
  for (const double value : values) {
    const auto all = tp::gather_records_at_root(world, value);
    ASSERT_EQ(all.size(), 1u);
    EXPECT_EQ(std::signbit(all[0]), std::signbit(value));
    EXPECT_EQ(all[0], value);
  }
}

}  // namespace
