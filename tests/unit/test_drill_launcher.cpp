#include <gtest/gtest.h>

#include "app/drill/drill_launcher.h"
#include "app/drill/drill_node_loss.h"
#include "common/errors.h"

namespace {

using tp::NodeLossAction;

std::string usage_error(const std::function<void()>& call) {
  try {
    call();
  } catch (const tp::UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(DrillLauncher, ShrinkSpareAndWaitShapeTheRelaunch) {
  const tp::LaunchShape before{12, 3, {}};
  const auto shrunk = tp::shape_after_node_loss(before, "n2", 4, NodeLossAction::shrink);
  EXPECT_EQ(shrunk.ranks, 8);
  EXPECT_EQ(shrunk.nodes, 2);
  EXPECT_EQ(shrunk.excluded, std::vector<std::string>{"n2"});
  const auto spare = tp::shape_after_node_loss(before, "n2", 4, NodeLossAction::spare);
  EXPECT_EQ(spare.ranks, 12);
  EXPECT_EQ(spare.nodes, 3);
  EXPECT_EQ(spare.excluded, std::vector<std::string>{"n2"});
  const auto waited = tp::shape_after_node_loss(before, "n2", 4, NodeLossAction::wait);
  EXPECT_EQ(waited.ranks, 12);
  EXPECT_TRUE(waited.excluded.empty());
  // A second loss adds to the hosts left out.
  const auto twice = tp::shape_after_node_loss(shrunk, "n3", 4, NodeLossAction::shrink);
  EXPECT_EQ(twice.ranks, 4);
  EXPECT_EQ(twice.excluded, (std::vector<std::string>{"n2", "n3"}));
}

TEST(DrillLauncher, SrunGetsItsOwnOptionsAndOtherLaunchersTheirPlaceholders) {
  EXPECT_TRUE(tp::launcher_is_srun("srun --mpi=pmix -K1"));
  EXPECT_TRUE(tp::launcher_is_srun("env FOO=1 /usr/bin/srun -N2"));
  EXPECT_FALSE(tp::launcher_is_srun("mpirun -np 4"));
  const tp::LaunchShape shape{8, 2, {"n2"}};
  EXPECT_EQ(tp::launcher_for("srun --mpi=pmix -K1", std::nullopt, 0), "srun --mpi=pmix -K1");
  EXPECT_EQ(tp::launcher_for("srun --mpi=pmix -K1", shape, 0),
            "srun --mpi=pmix -K1 --nodes=2 --ntasks=8 --exclude=n2");
  EXPECT_EQ(tp::launcher_for("mpirun -np {ranks} --exclude '{exclude}'", std::nullopt, 12),
            "mpirun -np 12 --exclude ''");
  EXPECT_EQ(tp::launcher_for("mpirun -np {ranks} --exclude '{exclude}'", shape, 12),
            "mpirun -np 8 --exclude 'n2'");
}

TEST(DrillLauncher, ALostHostThatIsNotAHostNameNeverReachesTheShell) {
  const std::string hostile[] = {"n1;touch /tmp/owned",
                                 "$(reboot)",
                                 "`id`",
                                 "n1 n2",
                                 "n1'x",
                                 "n1\"x",
                                 "n1\nrm -rf /",
                                 "-N999",
                                 "n1|cat",
                                 "n1&",
                                 "n1>f",
                                 "",
                                 "n1,n2",
                                 std::string(254, 'a'),
                                 "n\xc3\xa9",
                                 "n1\\"};
  for (const std::string& host : hostile) {
    for (const char* launcher : {"srun --mpi=pmix", "mpirun -np {ranks} --exclude '{exclude}'"}) {
      const tp::LaunchShape shape{8, 2, {"n2", host}};
      EXPECT_THROW(tp::launcher_for(launcher, shape, 12), tp::RuntimeError)
          << launcher << " with " << host;
    }
    EXPECT_FALSE(tp::is_plain_host_name(host)) << host;
  }
  for (const char* host : {"n2", "gpu-node-017", "node7.cluster.example", "vc_n3", "10.0.0.7"})
    EXPECT_TRUE(tp::is_plain_host_name(host)) << host;
}

TEST(DrillLauncher, ALauncherThatCannotCarryTheRelaunchIsRefusedBeforeAnythingRuns) {
  // The refusal's message, or "" when the launcher is accepted.
  const auto refusal = [](const char* launcher, int ranks, NodeLossAction action, bool loss) {
    return usage_error([&] { tp::check_relaunch_launcher(launcher, ranks, action, loss); });
  };
  const auto shrink = NodeLossAction::shrink, spare = NodeLossAction::spare;
  EXPECT_NE(refusal("mpirun -np {rank}", 4, shrink, false).find("'{rank}' is not a placeholder"),
            std::string::npos);
  EXPECT_NE(refusal("mpirun -np {ranks}", 0, shrink, false).find("drill.ranks"), std::string::npos);
  EXPECT_NE(refusal("mpirun -np 4", 0, shrink, true).find("drill.on_node_loss=shrink"),
            std::string::npos);
  EXPECT_NE(refusal("mpirun -np {ranks}", 4, spare, true).find("{exclude}"), std::string::npos);
  // What each can express is accepted; without a node loss a fixed launcher is fine; ${VAR}
  // belongs to the shell that runs the launcher.
  EXPECT_EQ(refusal("srun -K1", 0, spare, true), "");
  EXPECT_EQ(refusal("mpirun -np {ranks}", 4, shrink, true), "");
  EXPECT_EQ(refusal("mpirun -np 4", 0, NodeLossAction::wait, true), "");
  EXPECT_EQ(refusal("mpirun -np 4", 0, shrink, false), "");
  EXPECT_EQ(refusal("mpirun -np ${NP}", 0, NodeLossAction::wait, true), "");
  EXPECT_THROW(tp::parse_node_loss_action("grow"), tp::UsageError);
}

TEST(DrillNodeLoss, TheProofAppliesAcrossSizesUnlessTheRunCannotBeTheSame) {
  using nlohmann::json;
  auto report = [](int size, int64_t batch, const char* cpu) {
    json ranks = json::array();
    for (int r = 0; r < size; ++r) ranks.push_back({{"rank", r}, {"cpu_model", cpu}});
    return json{{"context", {{"world_size", size}}},
                {"train", {{"model", {{"global_batch", batch}}}}},
                {"ranks", ranks}};
  };
  const std::vector<tp::DrillFailure> none;
  EXPECT_EQ(tp::proof_not_applicable(report(6, 24, "X"), report(4, 24, "X"), none), "");
  EXPECT_EQ(tp::proof_not_applicable(report(4, 16, "X"), report(4, 24, "X"), none), "");
  EXPECT_NE(tp::proof_not_applicable(report(6, 24, "X"), report(4, 16, "X"), none)
                .find("the global batch followed the world size: 24 samples, then 16"),
            std::string::npos);
  EXPECT_NE(
      tp::proof_not_applicable(report(6, 24, "X"), report(4, 24, "Y"), none).find("2 CPU models"),
      std::string::npos);
  json shifted = report(4, 24, "X");
  shifted["data"] = {{"rank_shift", 1}};
  EXPECT_NE(tp::proof_not_applicable(report(6, 24, "X"), shifted, none).find("data.rank_shift=1"),
            std::string::npos);
  // Without a reference report, the first lost node's world size stands for it.
  tp::DrillFailure lost;
  lost.node_loss = tp::NodeLossResponse{"shrink", 6, 4, {"n2"}, "srun"};
  EXPECT_NE(tp::proof_not_applicable(nullptr, shifted, {lost}).find("6 ranks, then 4"),
            std::string::npos);
  EXPECT_EQ(tp::proof_not_applicable(nullptr, shifted, none), "");
  // Without a reference report, a per-rank batch the final run set itself gives it away.
  json per_rank = report(4, 8, "X");
  per_rank["train"]["model"]["batch_set_by"] = "model.batch_per_rank";
  EXPECT_NE(tp::proof_not_applicable(nullptr, per_rank, {lost}).find("model.batch_per_rank x 4"),
            std::string::npos);
  per_rank["train"]["model"]["batch_set_by"] = "the checkpoint: model.batch_per_rank x the 6 ranks";
  EXPECT_EQ(tp::proof_not_applicable(nullptr, per_rank, {lost}), "");
}

TEST(DrillNodeLoss, TheLostRanksAreTheMoreOfTheRecordsAndTheHostsHeartbeats) {
  std::vector<tp::HeartbeatRecord> heartbeats(4);
  for (int r = 0; r < 4; ++r) {
    heartbeats[size_t(r)].rank = r;
    heartbeats[size_t(r)].present = true;
    heartbeats[size_t(r)].host = r < 2 ? "n1" : "n2";
  }
  tp::DrillFailure failure;
  failure.host = "n2";
  failure.lost_ranks = {3};  // one rank fired alone; its neighbour died without a record
  EXPECT_EQ(tp::lost_rank_count(failure, heartbeats), 2);
  const tp::LaunchShape shape = tp::launch_shape(heartbeats, {"n0"});
  EXPECT_EQ((std::vector<int>{shape.ranks, shape.nodes}), (std::vector<int>{4, 2}));
  EXPECT_EQ(shape.excluded, std::vector<std::string>{"n0"});
}
