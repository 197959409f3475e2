#include <gtest/gtest.h>

#include <chrono>

#include "common/errors.h"
#include "train/faults.h"

TEST(Faults, ParsesSlow) {
  const auto f = tp::parse_fault("slow:rank=3,ms=40");
  EXPECT_EQ(f.rank, 3);
  EXPECT_DOUBLE_EQ(f.ms, 40);
  EXPECT_FALSE(f.step.has_value());
  EXPECT_EQ(tp::parse_fault("slow:ms=1.5,rank=0,step=4").step.value(), 4);
}

TEST(Faults, RejectsMalformedSpecsNamingThem) {
  for (const char* bad : {"slow", "slow:", "slow:rank=1", "slow:rank=x,ms=3", "slow:rank=1,ms=-2",
                          "slow:rank=1,ms=2,colour=red", "slow:rank=1,rank=2,ms=1",
                          "explode:rank=1", "slow:rank=1.5,ms=2", "slow:rank=1,ms"}) {
    try {
      tp::parse_fault(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const tp::UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(Faults, AFaultThatCanNeverFireIsRejected) {
  const auto faults = tp::parse_faults({"slow:rank=4,ms=1"});
  EXPECT_THROW(tp::validate_faults(faults, 4, 10, 0), tp::UsageError);
  EXPECT_NO_THROW(tp::validate_faults(faults, 5, 10, 0));
  EXPECT_THROW(tp::validate_faults(tp::parse_faults({"slow:rank=0,ms=1,step=11"}), 2, 10, 0),
               tp::UsageError);
  // A checkpoint phase at a step that takes no checkpoint can never fire.
  const auto commit = tp::parse_faults({"kill:rank=0,step=6,phase=ckpt-commit"});
  EXPECT_THROW(tp::validate_faults(commit, 2, 10, 4), tp::UsageError);
  try {
    tp::validate_faults(commit, 2, 10, 0);
    ADD_FAILURE() << "a ckpt-commit fault without checkpoints must be refused";
  } catch (const tp::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("ckpt-commit needs checkpoints"), std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(tp::validate_faults(commit, 2, 10, 3));
}

TEST(Faults, ParsesKillHangCorruptAndRandom) {
  const auto kill = tp::parse_fault("kill:rank=2,step=40,phase=ckpt-write");
  EXPECT_EQ(kill.kind, tp::FaultSpec::Kind::kill);
  EXPECT_EQ(kill.rank, 2);
  EXPECT_EQ(kill.step.value(), 40);
  EXPECT_EQ(kill.phase, "ckpt-write");
  EXPECT_EQ(tp::parse_fault("kill:rank=0,step=3").phase, "compute");
  const auto hang = tp::parse_fault("hang:rank=1,step=20");
  EXPECT_EQ(hang.kind, tp::FaultSpec::Kind::hang);
  const auto corrupt = tp::parse_fault("corrupt:shard=1,mode=truncate");
  EXPECT_EQ(corrupt.kind, tp::FaultSpec::Kind::corrupt);
  EXPECT_EQ(corrupt.rank, 1);
  EXPECT_EQ(corrupt.mode, "truncate");
  EXPECT_EQ(tp::parse_fault("random:seed=7").seed, 7u);
  for (const char* bad : {"kill:rank=1", "kill:step=3", "kill:rank=1,step=3,phase=lunch",
                          "hang:rank=1,step=3,phase=ckpt-write", "corrupt:mode=shred",
                          "random:seed=x", "random:colour=1"}) {
    EXPECT_THROW(tp::parse_fault(bad), tp::UsageError) << bad;
  }
}

TEST(Faults, RandomDrawsAKillThatCanFireAndReplaysFromItsSeed) {
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    const auto random = tp::parse_fault("random:seed=" + std::to_string(seed));
    const tp::FaultSpec kill = tp::resolve_random(random, 4, 20, 5);
    EXPECT_EQ(kill.kind, tp::FaultSpec::Kind::kill);
    EXPECT_EQ(kill.origin, random.text);
    EXPECT_NO_THROW(tp::validate_faults({kill}, 4, 20, 5)) << kill.text;
    EXPECT_EQ(tp::resolve_random(random, 4, 20, 5).text, kill.text);
  }
  // Without checkpoints only the step phases can be drawn.
  for (uint64_t seed = 1; seed <= 50; ++seed)
    EXPECT_EQ(tp::resolve_random(tp::parse_fault("random:seed=" + std::to_string(seed)), 2, 8, 0)
                  .phase.rfind("ckpt-", 0),
              std::string::npos);
}

TEST(Faults, SlowDelaysOnlyComputeOnItsRank) {
  using clock = std::chrono::steady_clock;
  auto time = [](tp::FaultInjector& inj, tp::Phase phase) {
    const auto start = clock::now();
    inj.at(1, phase);
    return std::chrono::duration<double, std::milli>(clock::now() - start).count();
  };
  tp::FaultInjector victim(tp::parse_faults({"slow:rank=1,ms=30"}), 1, "h", "/tmp");
  tp::FaultInjector bystander(tp::parse_faults({"slow:rank=1,ms=30"}), 0, "h", "/tmp");
  EXPECT_GE(time(victim, tp::Phase::compute), 30.0);
  EXPECT_TRUE(bystander.empty());
}
