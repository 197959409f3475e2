#include <gtest/gtest.h>

#include "app/context.h"

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

TEST(Context, TimingWarnings) {
  EXPECT_TRUE(tp::timing_warnings({2, 4, "performance", "Release", false, 100}).empty());
  const auto w = tp::timing_warnings({8, 2, "powersave", "Debug", true, 3});
  EXPECT_EQ(w.size(), 5u);
}
