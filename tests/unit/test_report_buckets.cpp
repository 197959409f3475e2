#include <gtest/gtest.h>

#include "app/report/report_buckets.h"

namespace {

using nlohmann::json;

// 3 layers of 32x32 floats (4096 bytes each) in buckets of at least 8000 bytes: layers 2 and 1
// form one 8192-byte bucket, started first; layer 0 a 4096-byte one.
tp::TrainConfig two_bucket_sizes() {
  tp::TrainConfig cfg;
  cfg.model = {3, 32, 8, 8};
  cfg.bucket_mb = 8000.0 / (1024.0 * 1024.0);
  return cfg;
}

TEST(ReportBuckets, EachSizeHasItsMedianTimeAndBusBandwidth) {
  // Three steps; the 8192-byte bucket takes 2, 4, 3 us, the 4096-byte one 1 us each time.
  const json sizes =
      tp::bucket_sizes_json(two_bucket_sizes(), 4, {{2e-6, 1e-6}, {4e-6, 1e-6}, {3e-6, 1e-6}});
  ASSERT_EQ(sizes.size(), 2u) << sizes;
  EXPECT_EQ(sizes[0]["bytes"], 8192);
  EXPECT_EQ(sizes[0]["buckets"], 1);
  EXPECT_DOUBLE_EQ(sizes[0]["time_s"]["p50"], 3e-6);
  EXPECT_DOUBLE_EQ(sizes[0]["time_s"]["max"], 4e-6);
  EXPECT_NEAR(sizes[0]["algbw_gbps"].get<double>(), 8192 / 3e-6 / 1e9, 1e-9);
  // 4 ranks: busbw = 2 * 3/4 * algbw.
  EXPECT_NEAR(sizes[0]["busbw_gbps"].get<double>(), 1.5 * 8192 / 3e-6 / 1e9, 1e-9);
  EXPECT_EQ(sizes[1]["bytes"], 4096);
  EXPECT_DOUBLE_EQ(sizes[1]["time_s"]["p50"], 1e-6);
}

TEST(ReportBuckets, OneRankMovesNothingAcrossALink) {
  const json sizes = tp::bucket_sizes_json(two_bucket_sizes(), 1, {{2e-6, 1e-6}});
  EXPECT_EQ(sizes[0]["busbw_gbps"], 0.0);
}

json row_of_sweep(uint64_t bytes, double busbw, bool in_place = true,
                  const std::string& group = "world") {
  return {{"group", group},       {"op", "allreduce"}, {"dtype", "float32"}, {"bytes", bytes},
          {"in_place", in_place}, {"not_run", ""},     {"busbw_gbps", busbw}};
}

// A report holding a training stage and a sweep of the same backend, as `accept` writes one.
json accept_fixture() {
  json report;
  report["context"]["backends"] = {{"compute", "cuda"}, {"comm", "nccl"}};
  report["train"]["buckets"] = json::array({{{"bytes", 8192}, {"busbw_gbps", 30.0}},
                                            {{"bytes", 4096}, {"busbw_gbps", 5.0}},
                                            {{"bytes", 1 << 30}, {"busbw_gbps", 100.0}}});
  report["sweep"] = {
      {"backend", "nccl"},
      {"split", "none"},
      {"results", json::array({row_of_sweep(4096, 20.0), row_of_sweep(8192, 99.0, false),
                               row_of_sweep(16384, 60.0), row_of_sweep(8192, 1.0, true, "node a"),
                               row_of_sweep(65536, 80.0)})}};
  return report;
}

TEST(ReportBuckets, EfficiencyIsAgainstTheNearestInPlaceWorldRowNotBelowTheBucket) {
  const json rows = tp::comm_efficiency_json(accept_fixture());
  ASSERT_EQ(rows.size(), 2u) << rows << ": no sweep row reaches 1 GiB";
  // 8192 bytes: the out-of-place and per-node rows of that size do not count; 16384 does.
  EXPECT_EQ(rows[0]["bytes"], 8192);
  EXPECT_EQ(rows[0]["sweep_bytes"], 16384);
  EXPECT_DOUBLE_EQ(rows[0]["efficiency"], 0.5);
  EXPECT_EQ(rows[1]["sweep_bytes"], 4096);
  EXPECT_DOUBLE_EQ(rows[1]["efficiency"], 0.25);
}

TEST(ReportBuckets, NoEfficiencyAgainstAnotherBackendOrASplitSweep) {
  json report = accept_fixture();
  report["sweep"]["backend"] = "mpi";
  EXPECT_TRUE(tp::comm_efficiency_json(report).empty());
  report = accept_fixture();
  report["sweep"]["split"] = "node";
  EXPECT_TRUE(tp::comm_efficiency_json(report).empty());
  report.erase("sweep");
  EXPECT_TRUE(tp::comm_efficiency_json(report).empty());
}

}  // namespace
