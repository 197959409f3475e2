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
  EXPECT_THROW(tp::validate_faults(faults, 4, 10), tp::UsageError);
  EXPECT_NO_THROW(tp::validate_faults(faults, 5, 10));
  EXPECT_THROW(tp::validate_faults(tp::parse_faults({"slow:rank=0,ms=1,step=11"}), 2, 10),
               tp::UsageError);
}

TEST(Faults, SlowDelaysOnlyComputeOnItsRank) {
  using clock = std::chrono::steady_clock;
  auto time = [](tp::FaultInjector& inj, tp::Phase phase) {
    const auto start = clock::now();
    inj.at(1, phase);
    return std::chrono::duration<double, std::milli>(clock::now() - start).count();
  };
  tp::FaultInjector victim(tp::parse_faults({"slow:rank=1,ms=30"}), 1);
  tp::FaultInjector bystander(tp::parse_faults({"slow:rank=1,ms=30"}), 0);
  EXPECT_GE(time(victim, tp::Phase::compute), 30.0);
  EXPECT_TRUE(bystander.empty());
}
