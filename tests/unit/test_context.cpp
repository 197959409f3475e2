#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "app/report/context.h"
#include "common/sysinfo.h"

TEST(Context, KeepsLauncherVariablesAndRedactsSecrets) {
  const auto env = tp::launcher_environment(
      {"NCCL_DEBUG=INFO", "OMPI_COMM_WORLD_RANK=0", "SLURM_JOB_ID=77", "UCX_TLS=rc",
       "FI_PROVIDER=efa", "HOME=/root", "PATH=/bin", "SLURM_AUTH_TOKEN=abc", "NCCL_IB_KEY_FILE=k",
       "FI_secret_thing=s", "OMPI_MCA_PASSWORD=p"});
  EXPECT_EQ(env["NCCL_DEBUG"], "INFO");
  EXPECT_EQ(env["SLURM_JOB_ID"], "77");
  EXPECT_EQ(env["UCX_TLS"], "rc");
  EXPECT_EQ(env["FI_PROVIDER"], "efa");
  EXPECT_FALSE(env.contains("HOME"));
  EXPECT_FALSE(env.contains("PATH"));
  for (const char* secret :
       {"SLURM_AUTH_TOKEN", "NCCL_IB_KEY_FILE", "FI_secret_thing", "OMPI_MCA_PASSWORD"})
    EXPECT_EQ(env[secret], "<redacted>") << secret;
}

TEST(Context, RedactsSecretsInsideValuesAndKeepsWhatTheReportNeeds) {
  const auto env = tp::launcher_environment(
      {"OMPI_MCA_foo=https://user:pass@host/x", "UCX_HEADER=Bearer abc.def",
       "FI_OPTS=mode=1,token=t0k", "OMPI_MCA_orte_precondition_transports=ba2b7f57-e470586a",
       "OMPI_MCA_tag=5f2a9c81d04e7b36a1c9e8f20b7d4c53", "SLURM_JOB_ID=1234567890", "NCCL_ALGO=Ring",
       "CUDA_VISIBLE_DEVICES=GPU-8f6c9b1e-3a2d-4c5b-9e8f-1a2b3c4d5e6f"});
  EXPECT_EQ(env["OMPI_MCA_foo"], "https://<redacted>@host/x");
  EXPECT_EQ(env["UCX_HEADER"], "Bearer <redacted>");
  EXPECT_EQ(env["FI_OPTS"], "mode=1,token=<redacted>");
  EXPECT_EQ(env["OMPI_MCA_orte_precondition_transports"], "<redacted>");
  EXPECT_EQ(env["OMPI_MCA_tag"], "<redacted>");
  EXPECT_EQ(env["SLURM_JOB_ID"], "1234567890");
  EXPECT_EQ(env["NCCL_ALGO"], "Ring");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "GPU-8f6c9b1e-3a2d-4c5b-9e8f-1a2b3c4d5e6f");
}

// Per-task binding: each rank of a node sees one GPU as its index 0. The node lists all of them
// once, in PCI order.
TEST(Context, ANodesGpusAreTheUnionOfWhatItsRanksSee) {
  auto gpu = [](const std::string& uuid, const std::string& bus) {
    return nlohmann::json{{"index", 0}, {"uuid", uuid}, {"pci_bus_id", bus}, {"name", "H200"}};
  };
  const nlohmann::json merged = tp::merge_gpu_inventories(
      {nlohmann::json::array({gpu("GPU-b", "0000:9b:00.0")}),
       nlohmann::json::array({gpu("GPU-a", "0000:1b:00.0")}),
       nlohmann::json::array({gpu("GPU-b", "0000:9b:00.0")}), nlohmann::json::array()});
  ASSERT_EQ(merged.size(), 2u) << merged;
  EXPECT_EQ(merged[0]["uuid"], "GPU-a");
  EXPECT_EQ(merged[1]["uuid"], "GPU-b");
  EXPECT_FALSE(merged[0].contains("index")) << "a rank's visible index is not the node's";
}

TEST(Context, ANodesGpuEnvironmentLeavesThePerRankVariableOut) {
  const nlohmann::json env = tp::node_gpu_environment(
      {"NCCL_IB_HCA=mlx5_0", "CUDA_VISIBLE_DEVICES=3", "CUDA_DEVICE_MAX_CONNECTIONS=1",
       "NCCL_PASSWORD=hunter2", "PATH=/usr/bin"});
  EXPECT_EQ(env["NCCL_IB_HCA"], "mlx5_0");
  EXPECT_EQ(env["CUDA_DEVICE_MAX_CONNECTIONS"], "1");
  EXPECT_FALSE(env.contains("CUDA_VISIBLE_DEVICES"));
  EXPECT_FALSE(env.contains("PATH"));
  EXPECT_NE(env["NCCL_PASSWORD"], "hunter2");
}

TEST(Context, TimingWarnings) {
  // A quiet environment: as many CPUs as ranks, a governor that does not ramp, an optimised build
  // without sanitizers, enough steps for percentiles.
  EXPECT_TRUE(tp::timing_warnings({4, 4, "performance", "Release", false, 10}).empty());
  EXPECT_TRUE(tp::timing_warnings({1, 1, "", "RelWithDebInfo", false, 100}).empty())
      << "an unknown governor and RelWithDebInfo warn of nothing";

  // Each condition alone gives exactly its sentence, naming the figures it found.
  using W = std::vector<std::string>;
  EXPECT_EQ(tp::timing_warnings({8, 2, "performance", "Release", false, 10}),
            W{"8 ranks share 2 CPUs on one host: ranks are time-sliced, so compute and skew "
              "figures include scheduler noise"});
  EXPECT_EQ(tp::timing_warnings({2, 4, "powersave", "Release", false, 10}),
            W{"CPU frequency governor is 'powersave', not 'performance': clock ramps add noise"});
  EXPECT_EQ(tp::timing_warnings({2, 4, "performance", "Debug", false, 10}),
            W{"built as 'Debug': timings are not representative"});
  EXPECT_EQ(tp::timing_warnings({2, 4, "performance", "Release", true, 10}),
            W{"built with sanitizers: timings are not representative"});
  EXPECT_EQ(tp::timing_warnings({2, 4, "performance", "Release", false, 9}),
            W{"only 9 measured steps: percentiles rest on few samples"});

  // All at once: every sentence, in that order.
  EXPECT_EQ(tp::timing_warnings({8, 2, "powersave", "Debug", true, 3}),
            (W{"8 ranks share 2 CPUs on one host: ranks are time-sliced, so compute and skew "
               "figures include scheduler noise",
               "CPU frequency governor is 'powersave', not 'performance': clock ramps add noise",
               "built as 'Debug': timings are not representative",
               "built with sanitizers: timings are not representative",
               "only 3 measured steps: percentiles rest on few samples"}));
}

TEST(CpuShares, ParsesCpulistsBothWays) {
  EXPECT_EQ(tp::parse_cpulist("0-3,8"), (std::vector<int>{0, 1, 2, 3, 8}));
  EXPECT_EQ(tp::parse_cpulist("5"), (std::vector<int>{5}));
  EXPECT_TRUE(tp::parse_cpulist("").empty());
  EXPECT_EQ(tp::parse_cpulist("1,x,3"), (std::vector<int>{1}));
  EXPECT_EQ(tp::format_cpulist(tp::parse_cpulist("0-3,8,10-11")), "0-3,8,10-11");
}

TEST(CpuShares, SplitsEachCpuOverTheRanksOfItsHostThatHoldIt) {
  // Bound apart: each rank has its own core.
  EXPECT_EQ(tp::cpu_shares({"0", "1"}, {"a", "a"}), (std::vector<double>{1, 1}));
  // Unbound: two ranks see the same 4 CPUs and get 2 each.
  EXPECT_EQ(tp::cpu_shares({"0-3", "0-3"}, {"a", "a"}), (std::vector<double>{2, 2}));
  // A cpuset of one CPU under taskset, shared by both ranks.
  EXPECT_EQ(tp::cpu_shares({"0", "0"}, {"a", "a"}), (std::vector<double>{0.5, 0.5}));
  // The same CPU numbers on two hosts are different CPUs.
  EXPECT_EQ(tp::cpu_shares({"0-1", "0-1"}, {"a", "b"}), (std::vector<double>{2, 2}));
  // Overlapping sets: CPU 1 is shared, 0 and 2 are not.
  EXPECT_EQ(tp::cpu_shares({"0-1", "1-2"}, {"a", "a"}), (std::vector<double>{1.5, 1.5}));
}
