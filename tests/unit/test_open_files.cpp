// The open-file limit against what the selected stages need (app/accept/accept_open_files.h).
#include <gtest/gtest.h>
#include <sys/resource.h>

#include "app/accept/accept_open_files.h"

namespace {

using tp::CollectiveOp;

TEST(OpenFiles, ThePairwisePassNeedsTwoFilesPerPeer) {
  const tp::OpenFileNeed need = tp::open_files_needed({"preflight", "pairwise"}, {}, 4096);
  EXPECT_EQ(need.files, 256u + 2u * 4095u);
  EXPECT_EQ(need.why, "the pairwise pass at 4096 ranks");
}

TEST(OpenFiles, ASweepNeedsEveryPeerOnlyWithAlltoall) {
  EXPECT_EQ(tp::open_files_needed({"sweep"}, {CollectiveOp::allreduce}, 4096).files, 256u + 64u);
  const tp::OpenFileNeed all =
      tp::open_files_needed({"sweep"}, {CollectiveOp::allreduce, CollectiveOp::alltoall}, 512);
  EXPECT_EQ(all.files, 256u + 2u * 511u);
  EXPECT_EQ(all.why, "the sweep's alltoall at 512 ranks");
  EXPECT_EQ(tp::open_files_needed({"train"}, {CollectiveOp::alltoall}, 4096).files, 320u)
      << "the ops of a sweep that does not run need nothing";
}

TEST(OpenFiles, EveryRankAtOrAboveTheNeedPassesAndSaysWhereItWasRaised) {
  const tp::OpenFileNeed need = tp::open_files_needed({"pairwise"}, {}, 4);
  std::vector<tp::OpenFileLimit> ranks(4, tp::OpenFileLimit{1024, 1024, 4096, ""});
  ranks[2] = {100, 262, 4096, ""};
  const auto check = tp::open_files_check(need, ranks, {"a", "a", "b", "b"});
  EXPECT_EQ(check["status"], "pass") << check;
  EXPECT_EQ(check["value"], 262);
  EXPECT_EQ(check["threshold"], 262);
  EXPECT_NE(check["reason"].get<std::string>().find("raised on 1 rank(s)"), std::string::npos);
}

// 4,096 ranks on 512 nodes, where 40 nodes' hard limit is 1,024: the check fails naming the
// need and eight hosts with their limits, then how many more.
TEST(OpenFiles, AHardLimitBelowTheNeedFailsNamingTheLimitTheNeedAndTheHosts) {
  const tp::OpenFileNeed need = tp::open_files_needed({"pairwise"}, {}, 4096);
  std::vector<tp::OpenFileLimit> ranks;
  std::vector<std::string> hosts;
  for (int r = 0; r < 4096; ++r) {
    const int node = r / 8;
    const bool short_node = node % 13 == 0;  // 40 of 512
    ranks.push_back(short_node ? tp::OpenFileLimit{1024, 1024, 1024, ""}
                               : tp::OpenFileLimit{1024, need.files, 1048576, ""});
    std::string host = "node-";
    host += std::to_string(1000 + node);
    hosts.push_back(host);
  }
  const auto check = tp::open_files_check(need, ranks, hosts);
  EXPECT_EQ(check["status"], "fail");
  EXPECT_EQ(check["value"], 1024);
  EXPECT_EQ(check["threshold"], 8446);
  const std::string reason = check["reason"];
  EXPECT_NE(reason.find("the open-file limit (ulimit -n) is below the 8446 open files (the "
                        "pairwise pass at 4096 ranks) on node-1000 (soft 1024, hard 1024)"),
            std::string::npos)
      << reason;
  EXPECT_NE(reason.find("and 32 more host(s)"), std::string::npos) << reason;
  EXPECT_LT(reason.size(), 1000u) << "readable whatever the number of hosts";
}

TEST(OpenFiles, TheSoftLimitIsRaisedUpToTheHardOneAndNoFurther) {
  rlimit before{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &before), 0);
  if (before.rlim_max != RLIM_INFINITY && before.rlim_max < 512)
    GTEST_SKIP() << "a hard limit under 512 leaves no room to lower the soft one";
  // Lowering the soft limit is always allowed; raising it back, up to the hard one, too.
  rlimit lowered = before;
  lowered.rlim_cur = 400;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  const tp::OpenFileLimit raised = tp::ensure_open_files(450);
  EXPECT_EQ(raised.soft_before, 400u);
  EXPECT_EQ(raised.soft, 450u);
  EXPECT_TRUE(raised.problem.empty()) << raised.problem;
  if (before.rlim_max != RLIM_INFINITY) {
    const tp::OpenFileLimit capped = tp::ensure_open_files(uint64_t(before.rlim_max) + 1000);
    EXPECT_EQ(capped.soft, uint64_t(before.rlim_max)) << "no further than the hard limit";
  }
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &before), 0);
}

}  // namespace
