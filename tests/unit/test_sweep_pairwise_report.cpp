// The pairwise pass in the report: flags once per node and direction, the second pass's verdict on
// each flagged node, and the checks that set the verdict (app/stages/sweep_pairwise_report.h).
#include <gtest/gtest.h>

#include "app/stages/sweep_pairwise_report.h"
#include "app/stages/sweep_report.h"

namespace {

// Three nodes; n3's pairs run at `slow` GB/s, the others at 1.
tp::PairwiseRail rail(double slow) {
  tp::PairwiseRail r;
  r.hosts = {"n1", "n2", "n3"};
  r.world_ranks = {0, 1, 2};
  r.one_way = {{-1, 1.0, slow}, {1.0, -1, slow}, {slow, slow, -1}};
  r.both_ways = r.one_way;
  r.judged_one_way = tp::judge_pairs(r.one_way, 0.8, 0.5);
  r.judged_both_ways = tp::judge_pairs(r.both_ways, 0.8, 0.5);
  return r;
}

tp::PairwiseRecord record(double slow, double again) {
  tp::PairwiseRecord p;
  p.pair_bytes = 1 << 20;
  p.pair_iters = 3;
  p.rails = {rail(slow)};
  if (slow < 0.8) p.rails[0].second_pass = {{2, 0, again, again, again, again}};
  return p;
}

TEST(PairwiseReport, ASlowNodeIsNamedOncePerDirectionWithTheSecondPass) {
  const auto reasons = tp::pairwise_node_reasons(record(0.004, 0.004));
  ASSERT_EQ(reasons.size(), 1u);
  const auto& n3 = reasons.at("n3");
  ASSERT_EQ(n3.size(), 2u) << "both ways adds nothing where one way already flagged";
  EXPECT_NE(n3[0].find("(send direction), one direction at a time"), std::string::npos) << n3[0];
  EXPECT_NE(n3[1].find("(receive direction)"), std::string::npos) << n3[1];
  for (const auto& why : n3)
    EXPECT_NE(why.find("measured again against n1 (the best node): 4 MB/s, still slow"),
              std::string::npos)
        << why;
  const auto checks = tp::pairwise_checks(record(0.004, 0.004));
  EXPECT_EQ(checks[0]["status"], "pass");
  EXPECT_EQ(checks[1]["status"], "fail");  // 0.4% is below sweep.fail_fraction
}

TEST(PairwiseReport, NormalAgainstTheBestNodeMeansItsPairsAreSlow) {
  const auto reasons = tp::pairwise_node_reasons(record(0.7, 1.0));
  EXPECT_NE(reasons.at("n3")[0].find("normal: its pairs, not the node, are slow"),
            std::string::npos);
  EXPECT_EQ(tp::pairwise_checks(record(0.7, 1.0))[1]["status"], "warn");
}

TEST(PairwiseReport, AHealthyFabricPassesAndAWrongElementFails) {
  tp::PairwiseRecord healthy = record(1.0, 0);
  EXPECT_TRUE(tp::pairwise_node_reasons(healthy).empty());
  EXPECT_EQ(tp::pairwise_checks(healthy)[1]["status"], "pass");
  EXPECT_TRUE(tp::pairwise_warnings(healthy).empty());
  healthy.wrong = 2;
  healthy.first_wrong = "n1 -> n2 (one way): 2 wrong element(s) received by rank 1";
  const auto checks = tp::pairwise_checks(healthy);
  EXPECT_EQ(checks[0]["status"], "fail");
  EXPECT_EQ(checks[0]["reason"], healthy.first_wrong);
}

TEST(PairwiseReport, GrownErrorCountersFlagTheirNode) {
  tp::PairwiseRecord p = record(1.0, 0);
  p.counter_reasons["n2"] = {"InfiniBand mlx5_0 port 1: symbol_error grew by 12 (3 -> 15)"};
  EXPECT_EQ(tp::pairwise_node_reasons(p).at("n2").size(), 1u);
  EXPECT_EQ(tp::pairwise_checks(p)[1]["status"], "warn");
}

TEST(PairwiseReport, NoisyPairsAreSaid) {
  tp::PairwiseRecord p = record(1.0, 0);
  p.rails[0].one_way[0][1] = 2.0;  // one healthy pair twice as fast as the others
  p.rails[0].judged_one_way = tp::judge_pairs(p.rails[0].one_way, 0.25, 0.1);
  p.rails[0].judged_both_ways = tp::judge_pairs(p.rails[0].both_ways, 0.25, 0.1);
  const auto warnings = tp::pairwise_warnings(p);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("2x the slowest"), std::string::npos) << warnings[0];
}

}  // namespace
