// The drill's events for its trace (app/drill/drill_trace.h): every launch's start and exit, each
// failure's fault, detection and first new step, in time order with their launch and failure.
#include <gtest/gtest.h>

#include "app/drill/drill_trace.h"

namespace {

tp::DrillResult two_launches_one_failure() {
  tp::DrillResult r;
  r.runs = {{"reference", 0, "/d/reference", 100.0, 110.0},
            {"run-0", 137, "/d/faulted/run-0", 111.0, 115.0},
            {"run-1", 0, "/d/faulted/run-1", 116.0, 125.0}};
  tp::DrillFailure f;
  f.kind = "kill";
  f.fault = "kill:rank=1,step=4";
  f.fault_unix = 113.0;
  f.detected = true;
  f.detected_after_s = 1.5;
  f.run = "/d/faulted/run-0";
  tp::DrillRecovery recovery;
  recovery.restored_step = 2;
  recovery.rto_s = 6.0;
  f.recovery = recovery;
  r.failures.push_back(f);
  return r;
}

TEST(DrillEvents, EveryLaunchAndEachFailuresStepsInTimeOrder) {
  const auto events = tp::drill_events(two_launches_one_failure());
  std::vector<std::string> names;
  for (const tp::DrillEvent& e : events) names.push_back(e.event);
  EXPECT_EQ(names, (std::vector<std::string>{"launch", "exit", "launch", "fault", "detected",
                                             "exit", "launch", "first_step", "exit"}));
  for (size_t i = 1; i < events.size(); ++i)
    EXPECT_LE(events[i - 1].time_unix, events[i].time_unix);
  const tp::DrillEvent& fault = events[3];
  EXPECT_EQ(fault.launch, 1) << "the launch it struck";
  EXPECT_EQ(fault.failure, 0);
  EXPECT_EQ(fault.detail, "kill:rank=1,step=4");
  EXPECT_DOUBLE_EQ(events[4].time_unix, 114.5) << "detected 1.5 s after the fault";
  const tp::DrillEvent& first = events[7];
  EXPECT_DOUBLE_EQ(first.time_unix, 119.0) << "the recovery time after the fault";
  EXPECT_EQ(first.launch, 2) << "the relaunch";
  EXPECT_EQ(first.detail, "restored step 2");
}

TEST(DrillEvents, AnUndetectedFailureWithoutRecoveryHasOnlyItsFault) {
  tp::DrillResult r = two_launches_one_failure();
  r.failures[0].detected = false;
  r.failures[0].recovery.reset();
  int faults = 0, others = 0;
  for (const tp::DrillEvent& e : tp::drill_events(r)) {
    faults += e.event == "fault";
    others += e.event == "detected" || e.event == "first_step";
  }
  EXPECT_EQ(faults, 1);
  EXPECT_EQ(others, 0);
}

}  // namespace
