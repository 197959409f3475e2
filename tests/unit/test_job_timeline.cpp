#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "app/job/job_timeline.h"

namespace {

using nlohmann::json;

// A clock the test moves by hand: every duration below is a multiple of 1/4 s, exact in binary,
// so sums compare exactly.
struct FakeClock {
  double now = 1000.0;
  tp::JobClock clock() {
    return tp::JobClock(now, [this] { return now; });
  }
};

// What a rank sends after running `plan` (each stage taking its seconds, then marked), with
// `unmarked_s` more elapsed before it sends.
json sent_after(const tp::Segments& plan, double unmarked_s = 0) {
  FakeClock fake;
  tp::JobClock clock = fake.clock();
  for (const auto& [name, seconds] : plan) {
    fake.now += seconds;
    clock.mark(name);
  }
  fake.now += unmarked_s;
  return clock.to_json();
}

// Two ranks of 30 s each. Means: launch 1.5, setup 2.75, dataset_open 0.5, warmup 2, steady 20
// (productive 16.25, data 1.25, comm 1.5, checkpoint 1), final checkpoint wait 2, teardown 1.25.
std::vector<tp::RankTimeline> two_ranks(double unmarked_s = 0) {
  const json rank0 = sent_after({{"launch", 1.0},
                                 {"setup", 3.0},
                                 {"dataset_open", 0.5},
                                 {"warmup_steps", 2.0},
                                 {"steady_steps", 20.0},
                                 {"final_checkpoint_wait", 2.0},
                                 {"teardown", 1.5}},
                                unmarked_s);
  const json rank1 = sent_after({{"launch", 2.0},
                                 {"setup", 2.5},
                                 {"dataset_open", 0.5},
                                 {"warmup_steps", 2.0},
                                 {"steady_steps", 20.0},
                                 {"final_checkpoint_wait", 2.0},
                                 {"teardown", 1.0}});
  // Productive: rank 0 20 - 1 - 2 - 1 = 16, rank 1 20 - 1.5 - 1 - 1 = 16.5.
  return {tp::rank_timeline(0, rank0, {1.0, 2.0, 1.0}),
          tp::rank_timeline(1, rank1, {1.5, 1.0, 1.0})};
}

std::vector<std::string> names(const json& entries) {
  std::vector<std::string> out;
  for (const json& entry : entries) out.push_back(entry.at("name"));
  return out;
}

TEST(JobTimeline, MarksAttributeTheTimeSinceThePreviousMark) {
  FakeClock fake;
  tp::JobClock clock(fake.now - 0.5, [&fake] { return fake.now; });  // started 0.5 s ago
  clock.mark("launch");
  fake.now += 1.5;
  clock.mark("setup");
  fake.now += 4.0;
  clock.mark("steady_steps");
  fake.now += 0.25;
  clock.mark("setup");  // a second visit adds up, keeping its first place
  fake.now += 0.75;
  const tp::Segments expected{{"launch", 0.5}, {"setup", 1.75}, {"steady_steps", 4.0}};
  EXPECT_EQ(clock.segments(), expected);
  EXPECT_EQ(clock.elapsed_s(), 7.0) << "the 0.75 s since the last mark is elapsed but unmarked";
  EXPECT_EQ(clock.to_json(),
            json::parse(R"({"wall_s": 7.0, "segments": [{"name": "launch", "seconds": 0.5},
              {"name": "setup", "seconds": 1.75}, {"name": "steady_steps", "seconds": 4.0}]})"));
}

TEST(JobTimeline, ARankTimelineIsWhatItsClockSentWithTheSteadyStepsSplit) {
  const tp::RankTimeline rank =
      tp::rank_timeline(3, sent_after({{"launch", 1.0}, {"steady_steps", 8.0}}, 0.5), {1, 2, 1});
  EXPECT_EQ(rank.rank, 3);
  EXPECT_EQ(rank.wall_s, 9.5);
  const tp::Segments expected{{"launch", 1.0},
                              {"productive", 4.0},
                              {"data_stall", 1.0},
                              {"comm_exposed", 2.0},
                              {"checkpoint_stall", 1.0}};
  EXPECT_EQ(rank.categories, expected);
  EXPECT_THROW(tp::rank_timeline(0, json{{"segments", json::array()}}, {}), json::exception);
}

// Fields 3..21 hold their own numbers, so reading any field but 22 (starttime) gives a wrong age.
TEST(JobTimeline, ProcessAgeReadsStarttimeAfterACommandNameWithSpacesAndParentheses) {
  std::string stat = "4242 (my (odd) name) S";
  for (int field = 4; field <= 21; ++field) stat.append(" ").append(std::to_string(field));
  stat += " 50000 23 24\n";  // starttime: 500 s after boot at 100 ticks per second
  EXPECT_DOUBLE_EQ(tp::process_age_from(stat, "512.25 9000.50\n", 100), 12.25);
  EXPECT_EQ(tp::process_age_from(stat, "499.99 1.0\n", 100), 0.0) << "rounding: never negative";
  EXPECT_EQ(tp::process_age_from(stat, "", 100), 0.0);
  EXPECT_EQ(tp::process_age_from("4242 (name) S 4 5", "512.25 0", 100), 0.0);
  EXPECT_EQ(tp::process_age_from(stat, "512.25 0", 0), 0.0);
}

TEST(JobTimeline, ProcessAgeOfThisProcessGrowsWithTheClock) {
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const double age = tp::JobClock::process_age_s();
  if (age == 0) GTEST_SKIP() << "no /proc, or a /proc/uptime of the container's own";
  // Both files round to 1/100 s; the process has lived at least the 100 ms slept.
  EXPECT_GE(age, 0.07);
  EXPECT_LT(age, 86400.0);
}

// A step's time already holds its checkpoint stall: it is taken out of the steady segment once.
TEST(JobTimeline, SteadySplitCountsTheCheckpointStallOnce) {
  const tp::SteadySplit split = tp::split_steady(10.0, {1.0, 2.0, 1.5});
  EXPECT_EQ(split.productive, 5.5);
  EXPECT_EQ(split.data_stall, 1.0);
  EXPECT_EQ(split.comm_exposed, 2.0);
  EXPECT_EQ(split.checkpoint_stall, 1.5);
  const tp::Segments parts = tp::with_steady_split({{"steady_steps", 10.0}}, {1.0, 2.0, 1.5});
  double total = 0;
  for (const auto& part : parts) total += part.second;
  EXPECT_EQ(total, 10.0);
}

TEST(JobTimeline, PhasesLongerThanTheSteadySegmentAreScaledToFillIt) {
  const tp::SteadySplit split = tp::split_steady(2.0, {1.0, 2.0, 1.0});
  EXPECT_EQ(split.productive, 0.0);
  EXPECT_EQ(split.data_stall, 0.5);
  EXPECT_EQ(split.comm_exposed, 1.0);
  EXPECT_EQ(split.checkpoint_stall, 0.5);
  const tp::SteadySplit negative = tp::split_steady(3.0, {-1.0, 1.0, 0.0});
  EXPECT_EQ(negative.data_stall, 0.0);
  EXPECT_EQ(negative.productive, 2.0);
  const tp::Segments no_steady{{"launch", 1.0}, {"teardown", 2.0}};
  EXPECT_EQ(tp::with_steady_split(no_steady, {1.0, 1.0, 1.0}), no_steady);
}

TEST(JobTimeline, CategoriesAddUpToTheWallExactlyOnAFakeClock) {
  const json job = tp::job_json(two_ranks(), 3.0);
  EXPECT_EQ(job.at("wall_s"), 30.0);
  EXPECT_EQ(job.at("accounted_fraction"), 1.0);
  double total = 0;
  for (const json& category : job.at("categories")) total += category.at("seconds").get<double>();
  EXPECT_EQ(total, 30.0);
  ASSERT_EQ(job.at("ranks").size(), 2u);
  for (const json& rank : job.at("ranks")) {
    EXPECT_EQ(rank.at("accounted_fraction"), 1.0) << rank.dump();
    double rank_total = 0;
    for (const auto& category : rank.at("categories").items())
      rank_total += category.value().get<double>();
    EXPECT_EQ(rank_total, rank.at("wall_s").get<double>()) << rank.dump();
  }
}

// An acceptance run's job: 50 s, of which training's stage is 13 s and 8 s productive.
json accept_like_job() {
  const json sent = sent_after({{"launch", 2.0},
                                {"setup", 1.0},
                                {"preflight", 3.0},
                                {"sweep", 10.0},
                                {"pairwise", 20.0},
                                {"warmup_steps", 1.0},
                                {"steady_steps", 10.0},
                                {"teardown", 1.0},
                                {"cold_restore", 2.0}},
                               0.0);
  return tp::job_json({tp::rank_timeline(0, sent, {1.0, 1.0, 0.0})}, {});
}

// The training stage's goodput counts its own wall time: accept's other stages and the launch are
// the job's, not training's. A job that did not train has no training goodput.
TEST(JobTimeline, TheTrainingStagesGoodputLeavesOutTheOtherStages) {
  const json job = accept_like_job();
  EXPECT_EQ(job.at("wall_s"), 50.0);
  EXPECT_EQ(job.at("productive_s"), 8.0);
  EXPECT_EQ(job.at("goodput"), 8.0 / 50.0);
  EXPECT_EQ(job.at("train_wall_s"), 13.0);  // setup, warm-up, steady steps, teardown
  EXPECT_EQ(job.at("train_goodput"), 8.0 / 13.0);
  const json fabric_only = sent_after({{"launch", 2.0}, {"sweep", 10.0}}, 0.0);
  const json untrained = tp::job_json({tp::rank_timeline(0, fabric_only, {})}, {});
  EXPECT_TRUE(untrained.at("train_goodput").is_null());
  EXPECT_TRUE(untrained.at("train_wall_s").is_null());
}

// The job's goodput alone (0.16) reads as if training wasted most of the job: the summary names
// both, and what the job holds that is not training.
TEST(JobTimeline, TheSummaryNamesBothGoodputsAndWhatIsNotTraining) {
  const json job = accept_like_job();
  EXPECT_EQ(tp::goodput_text(job),
            "goodput: training stage 0.62, whole job 0.16 (launch, preflight, sweep, pairwise and "
            "cold_restore are not training)");
  EXPECT_EQ(tp::timeline_lines(job).front(), "job: 50.0 s wall on every rank (mean); " +
                                                 tp::goodput_text(job) +
                                                 "; queue: not under Slurm: no queue time");
  const json fabric_only = sent_after({{"launch", 2.0}, {"sweep", 10.0}}, 0.0);
  EXPECT_EQ(tp::goodput_text(tp::job_json({tp::rank_timeline(0, fabric_only, {})}, {})),
            "goodput 0.00");
}

TEST(JobTimeline, CategoriesAddUpToTheWallWithinOnePercentOnTheSteadyClock) {
  tp::JobClock clock(tp::JobClock::steady_now_s());
  for (const char* stage : {"launch", "setup", "steady_steps", "teardown"}) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    clock.mark(stage);
  }
  const json job = tp::job_json({tp::rank_timeline(0, clock.to_json(), {0.01, 0.01, 0.0})}, {});
  EXPECT_NEAR(job.at("accounted_fraction").get<double>(), 1.0, 0.01);
  EXPECT_GE(job.at("wall_s").get<double>(), 0.12);
}

TEST(JobTimeline, UnmarkedTimeShowsInTheAccountedFraction) {
  const json job = tp::job_json(two_ranks(3.0), {});  // rank 0 sent 3 s after its last mark
  EXPECT_DOUBLE_EQ(job.at("ranks")[0].at("accounted_fraction").get<double>(), 30.0 / 33.0);
  EXPECT_EQ(job.at("ranks")[1].at("accounted_fraction"), 1.0);
  EXPECT_DOUBLE_EQ(job.at("accounted_fraction").get<double>(), 30.0 / 33.0) << "the worst rank";
  EXPECT_EQ(job.at("wall_max_s"), 33.0);
  EXPECT_EQ(tp::timeline_lines(job).back(),
            "  the categories account for 90.9% of a rank's wall time, not 100%");
}

TEST(JobTimeline, GoodputIsProductiveTimeOverWallTime) {
  const json job = tp::job_json(two_ranks(), 3.0);
  EXPECT_EQ(job.at("productive_s"), 16.25);  // (16 + 16.5) / 2
  EXPECT_DOUBLE_EQ(job.at("goodput").get<double>(), 16.25 / 30.0);
  EXPECT_DOUBLE_EQ(job.at("ranks")[0].at("goodput").get<double>(), 16.0 / 30.0);
  EXPECT_DOUBLE_EQ(job.at("ranks")[1].at("goodput").get<double>(), 16.5 / 30.0);
  EXPECT_EQ(job.at("ranks")[1].at("categories").at("data_stall"), 1.5);
  const std::vector<std::string> timeline_order{
      "launch",     "setup",        "dataset_open",     "warmup_steps",          "productive",
      "data_stall", "comm_exposed", "checkpoint_stall", "final_checkpoint_wait", "teardown"};
  EXPECT_EQ(names(job.at("categories")), timeline_order);
  EXPECT_EQ(job.at("categories")[1],
            json::parse(R"({"name": "setup", "seconds": 2.75, "fraction": 0.09166666666666666})"));
}

TEST(JobTimeline, LostCategoriesAreLargestFirstAndEqualOnesInTimelineOrder) {
  const json lost = tp::job_json(two_ranks(), 3.0).at("lost");
  const std::vector<std::string> expected{"setup",    "warmup_steps",     "final_checkpoint_wait",
                                          "launch",   "comm_exposed",     "data_stall",
                                          "teardown", "checkpoint_stall", "dataset_open"};
  EXPECT_EQ(names(lost), expected) << "every category but productive";
  for (size_t i = 1; i < lost.size(); ++i)
    EXPECT_GE(lost[i - 1].at("seconds").get<double>(), lost[i].at("seconds").get<double>());
}

// Rank 1 restored a checkpoint and rank 0 did not: the category keeps its place in the timeline
// and its mean counts rank 0's zero, so the means still add up to the mean wall time.
TEST(JobTimeline, ACategoryOnlySomeRanksHaveKeepsItsPlace) {
  const json job = tp::job_json(
      {tp::rank_timeline(0, sent_after({{"launch", 1.0}, {"setup", 1.0}, {"teardown", 1.0}}), {}),
       tp::rank_timeline(1, sent_after({{"launch", 1.0}, {"restore", 2.0}, {"teardown", 1.0}}),
                         {})},
      {});
  EXPECT_EQ(names(job.at("categories")),
            (std::vector<std::string>{"launch", "setup", "restore", "teardown"}));
  EXPECT_EQ(job.at("categories")[2].at("seconds"), 1.0);
  EXPECT_EQ(job.at("wall_s"), 3.5);
  EXPECT_EQ(job.at("productive_s"), 0.0);
  EXPECT_EQ(job.at("goodput"), 0.0);
}

TEST(JobTimeline, AQueueIsBesideTheWallTimeAndAMissingOneSaysSo) {
  const json queued = tp::job_json(two_ranks(), 3.0);
  EXPECT_EQ(queued.at("queue_s"), 3.0);
  EXPECT_EQ(queued.at("wall_s"), 30.0) << "the queue is not in the wall time";
  const json unqueued = tp::job_json(two_ranks(), {});
  EXPECT_TRUE(unqueued.at("queue_s").is_null());
  EXPECT_EQ(unqueued.at("queue_note"), tp::kNoQueueNote);
  EXPECT_EQ(tp::timeline_lines(unqueued).front(),
            "job: 30.0 s wall on every rank (mean); goodput: training stage 0.57, whole job 0.54 "
            "(launch is not training); queue: not under Slurm: no queue time");
  const json unknown = tp::job_json(two_ranks(), {}, "sacct gave no start time");
  EXPECT_EQ(unknown.at("queue_note"), "sacct gave no start time");
}

// A category of 1/8192 s in a 64 s job is 0.0002% of it: it reads <0.1%, never 0.0% (nothing)
// nor 0.00019%.
TEST(JobTimeline, ATinyShareReadsAsBelowATenthOfAPercent) {
  const json job = tp::job_json(
      {tp::rank_timeline(0, sent_after({{"launch", 1.0 / 8192}, {"setup", 64.0}}), {})}, {});
  const std::vector<std::string> lines = tp::timeline_lines(job);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2], "  launch   0.00 s   <0.1%");
}

TEST(JobTimeline, SummaryLinesAreOnePerCategoryLargestFirstAndAligned) {
  const std::vector<std::string> expected{
      "job: 30.0 s wall on every rank (mean); goodput: training stage 0.57, whole job 0.54 "
      "(launch is not training); queue 3.0 s before it",
      "  productive             16.25 s   54.2%",
      "  setup                   2.75 s    9.2%",
      "  warmup_steps            2.00 s    6.7%",
      "  final_checkpoint_wait   2.00 s    6.7%",
      "  launch                  1.50 s    5.0%",
      "  comm_exposed            1.50 s    5.0%",
      "  data_stall              1.25 s    4.2%",
      "  teardown                1.25 s    4.2%",
      "  checkpoint_stall        1.00 s    3.3%",
      "  dataset_open            0.50 s    1.7%"};
  EXPECT_EQ(tp::timeline_lines(tp::job_json(two_ranks(), 3.0)), expected);
  EXPECT_TRUE(tp::timeline_lines(json()).empty()) << "a report without a job section";
}

}  // namespace
