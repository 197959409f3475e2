#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "app/cli/cli_options.h"
#include "app/job/cost.h"
#include "common/errors.h"

namespace {

using nlohmann::json;
namespace po = boost::program_options;

constexpr double kTight = 1e-12;

// Rates chosen so that every figure is easy by hand: 2 nodes at 3.6 an hour are 0.002 a second;
// 2.592 per GB-month is 1e-6 per GB-second (a month is 30 x 86400 = 2,592,000 s); 0.01 per GB
// read; a quarter added for overhead, so the job's compute costs 0.0025 a second with it.
tp::CostRates rates() {
  tp::CostRates r;
  r.node_hour = 3.6;
  r.storage_gb_month = 2.592;
  r.data_gb = 0.01;
  r.overhead_fraction = 0.25;
  return r;
}

// A small run: 1000 s in all, 800 s of it training; 400 steps of 2 s, 2 million tokens; 5 GB of
// checkpoints kept, 20 GB read; a checkpoint every 100 steps stalls 20 s and is durable 10 s
// after it starts.
tp::CostInputs small_run() {
  tp::CostInputs in;
  in.wall_s = 1000;
  in.training_wall_s = 800;
  in.nodes = 2;
  in.gpus = 8;
  in.steps_completed = 400;
  in.tokens = 2e6;
  in.checkpoint_bytes_kept = 5e9;
  in.bytes_read = 20e9;
  in.losses = {{"warmup", 30}, {"data_stall", 50}, {"checkpoint_stall", 80}};
  in.step_s = 2;
  in.ckpt_stall_s = 20;
  in.time_to_durable_s = 10;
  in.checkpoint_every = 100;
  return in;
}

// Job (1000 s): compute 3.6 x 2 x 1000 / 3600 = 2.0; storage 2.592 x 5 x 1000 / 2592000 = 0.005;
// data 0.01 x 20 = 0.2; overhead 0.25 x 2.205 = 0.55125; total 2.75625.
// Per 1,000 steps 2.75625 / 400 x 1000 = 6.890625; per million tokens 2.75625 / 2 = 1.378125.
// Training (800 s): compute 1.6, storage 0.004, data 0.2 (every byte read), overhead 0.451;
// total 2.255; per 1,000 steps 5.6375; per million tokens 1.1275.
TEST(Cost, HandComputedJobAndTrainingStage) {
  const json cost = tp::cost_json(rates(), small_run());
  EXPECT_TRUE(cost["priced"].get<bool>());
  EXPECT_EQ(cost["currency"], "USD");
  EXPECT_EQ(cost["compute_rate"]["basis"], "node_hour");
  EXPECT_EQ(cost["compute_rate"]["units"], 2);
  EXPECT_NEAR(cost["compute_rate"]["per_hour"].get<double>(), 7.2, kTight);
  const json& job = cost["job"];
  EXPECT_NEAR(job["compute"].get<double>(), 2.0, kTight);
  EXPECT_NEAR(job["storage"].get<double>(), 0.005, kTight);
  EXPECT_NEAR(job["data"].get<double>(), 0.2, kTight);
  EXPECT_NEAR(job["overhead"].get<double>(), 0.55125, kTight);
  EXPECT_NEAR(job["total"].get<double>(), 2.75625, kTight);
  EXPECT_NEAR(job["per_1000_steps"].get<double>(), 6.890625, kTight);
  EXPECT_NEAR(job["per_million_tokens"].get<double>(), 1.378125, kTight);
  const json& training = cost["training"];
  EXPECT_EQ(training["wall_s"], 800.0);
  EXPECT_NEAR(training["compute"].get<double>(), 1.6, kTight);
  EXPECT_NEAR(training["storage"].get<double>(), 0.004, kTight);
  EXPECT_NEAR(training["data"].get<double>(), 0.2, kTight);
  EXPECT_NEAR(training["total"].get<double>(), 2.255, kTight);
  EXPECT_NEAR(training["per_1000_steps"].get<double>(), 5.6375, kTight);
  EXPECT_NEAR(training["per_million_tokens"].get<double>(), 1.1275, kTight);
  // The inputs it rests on are echoed, and nothing is said to be unpriced.
  EXPECT_EQ(cost["inputs"]["rates"]["node_hour"], 3.6);
  EXPECT_EQ(cost["inputs"]["checkpoint_bytes_kept"], 5e9);
  EXPECT_EQ(cost["inputs"]["bytes_read"], 20e9);
  EXPECT_TRUE(cost["inputs"]["rto_s"].is_null());
  EXPECT_EQ(cost["unpriced"], json::array());
}

// At 0.0025 a second with overhead: checkpoint_stall 80 s = 0.2, data_stall 50 s = 0.125,
// warmup 30 s = 0.075, largest first. data_stall per 1,000 steps: 0.125 / 400 x 1000 = 0.3125;
// its share of the job's 2.75625 is 0.125 / 2.75625; of its wall time 50 / 1000.
TEST(Cost, EachLossCategoryIsPricedAtTheComputeRateLargestFirst) {
  const json losses = tp::cost_json(rates(), small_run())["losses"];
  ASSERT_EQ(losses.size(), 3u);
  EXPECT_EQ(losses[0]["category"], "checkpoint_stall");
  EXPECT_EQ(losses[1]["category"], "data_stall");
  EXPECT_EQ(losses[2]["category"], "warmup");
  EXPECT_NEAR(losses[0]["cost"].get<double>(), 0.2, kTight);
  EXPECT_NEAR(losses[1]["cost"].get<double>(), 0.125, kTight);
  EXPECT_NEAR(losses[2]["cost"].get<double>(), 0.075, kTight);
  EXPECT_NEAR(losses[1]["per_1000_steps"].get<double>(), 0.3125, kTight);
  EXPECT_NEAR(losses[1]["share_of_cost"].get<double>(), 0.125 / 2.75625, kTight);
  EXPECT_NEAR(losses[1]["share_of_wall"].get<double>(), 0.05, kTight);
}

// Two failures share the job's checkpoint storage (0.005, so 0.0025 each).
// First: (12 + 18) s x 0.002 = 0.06; + 0.0025 = 0.0625; overhead 0.015625; total 0.078125.
// Second: (4 + 16) s x 0.002 = 0.04; + 0.0025 = 0.0425; overhead 0.010625; total 0.053125.
// Both: 0.13125.
TEST(Cost, ADrillsFailuresCostTheirRedoneWorkRecoveryAndTheCheckpointsKept) {
  tp::CostInputs in = small_run();
  in.failures = {{12, 18}, {4, 16}};
  const json cost = tp::cost_json(rates(), in);
  const json& f = cost["failures"];
  ASSERT_EQ(f.size(), 2u);
  EXPECT_NEAR(f[0]["work"].get<double>(), 0.06, kTight);
  EXPECT_NEAR(f[0]["checkpoint_storage"].get<double>(), 0.0025, kTight);
  EXPECT_NEAR(f[0]["overhead"].get<double>(), 0.015625, kTight);
  EXPECT_NEAR(f[0]["total"].get<double>(), 0.078125, kTight);
  EXPECT_NEAR(f[1]["total"].get<double>(), 0.053125, kTight);
  EXPECT_NEAR(cost["failures_total"].get<double>(), 0.13125, kTight);
}

// 2.4 failures per node-day on 2 nodes: 4.8 a day, MTBF 86400 / 4.8 = 18000 s, the worked
// example of test_checkpoint_interval.cpp with a 10 s time to durable:
//   optimal: sqrt(2 x 20 x 18000) - 20 = 828.53 s -> 414 steps, 828 s;
//            lost 20/(828 + 20) + (414 + 10)/18000
//   used:    100 steps x 2 s = 200 s; lost 20/(200 + 20) + (100 + 10)/18000
// Expected redone work per failure: 200/2 + 10 = 110 s; with a 30 s RTO, failures cost
// 4.8 x (110 + 30) x 0.0025 = 1.68 a day. A day's loss at an interval: lost x 86400 x 0.0025.
TEST(Cost, TheProjectionPricesFailuresAndNamesTheIntervalThatMinimisesThem) {
  tp::CostRates r = rates();
  r.failures_per_node_day = 2.4;
  tp::CostInputs in = small_run();
  in.rto_s = 30;
  in.rpo_steps = 10;
  const json proj = tp::cost_json(r, in)["projection"];
  EXPECT_NEAR(proj["failures_per_day"].get<double>(), 4.8, kTight);
  EXPECT_NEAR(proj["mtbf_s"].get<double>(), 18000, 1e-9);
  EXPECT_EQ(proj["optimal"]["steps"], 414);
  EXPECT_NEAR(proj["optimal"]["seconds"].get<double>(), 828, kTight);
  const double best_lost = 20.0 / 848 + (414.0 + 10) / 18000;
  EXPECT_NEAR(proj["optimal"]["lost_fraction"].get<double>(), best_lost, kTight);
  EXPECT_NEAR(proj["optimal"]["cost_per_day"].get<double>(), best_lost * 86400 * 0.0025, 1e-9);
  EXPECT_EQ(proj["used"]["steps"], 100);
  EXPECT_NEAR(proj["used"]["seconds"].get<double>(), 200, kTight);
  const double used_lost = 20.0 / 220 + (100.0 + 10) / 18000;
  EXPECT_NEAR(proj["used"]["lost_fraction"].get<double>(), used_lost, kTight);
  EXPECT_NEAR(proj["redone_s_per_failure"].get<double>(), 110, kTight);
  EXPECT_NEAR(proj["measured_rpo_s"].get<double>(), 20, kTight);
  EXPECT_NEAR(proj["failure_cost_per_day"].get<double>(), 1.68, 1e-9);
  EXPECT_NE(proj["rests_on"].get<std::string>().find("RTO"), std::string::npos);
}

// Without a drill there is no RTO: 4.8 x 110 x 0.0025 = 1.32 a day, and it says so.
TEST(Cost, WithoutADrillTheProjectionRestsOnTheRedoneWorkAlone) {
  tp::CostRates r = rates();
  r.failures_per_node_day = 2.4;
  const json cost = tp::cost_json(r, small_run());
  const json& proj = cost["projection"];
  EXPECT_TRUE(proj["rto_s"].is_null());
  EXPECT_NEAR(proj["failure_cost_per_day"].get<double>(), 1.32, 1e-9);
  EXPECT_NE(proj["rests_on"].get<std::string>().find("no drill measured an RTO"),
            std::string::npos);
  const std::vector<std::string> lines = tp::cost_lines(cost);
  EXPECT_EQ(lines.back(),
            "  projection at 4.8 failures a day (MTBF 18000 s): failures cost 1.32 a day (redone "
            "work alone: no RTO measured); checkpoint every 414 steps (828 s of training) to lose "
            "4.7% to checkpoints and redone work; the run's 100 steps (200 s) lose 9.7%");
  EXPECT_TRUE(tp::cost_json(rates(), small_run())["projection"].is_null())
      << "no failure rate, no projection";
}

// Nothing priced: every money figure is null, never a free 0, and the quantities and the
// intervals (which need no price) are still there.
TEST(Cost, UnpricedTheSectionSaysSoAndKeepsTheQuantities) {
  tp::CostRates r;
  r.failures_per_node_day = 2.4;
  const json cost = tp::cost_json(r, small_run());
  EXPECT_FALSE(cost["priced"].get<bool>());
  EXPECT_TRUE(cost["job"]["total"].is_null());
  EXPECT_TRUE(cost["job"]["compute"].is_null());
  EXPECT_TRUE(cost["job"]["per_1000_steps"].is_null());
  EXPECT_TRUE(cost["training"]["total"].is_null());
  EXPECT_TRUE(cost["losses"][0]["cost"].is_null());
  EXPECT_EQ(cost["losses"][0]["seconds"], 80.0);
  EXPECT_EQ(cost["inputs"]["steps_completed"], 400);
  EXPECT_EQ(cost["unpriced"], json({"compute", "storage", "data", "overhead"}));
  EXPECT_TRUE(cost["projection"]["failure_cost_per_day"].is_null());
  EXPECT_EQ(cost["projection"]["optimal"]["steps"], 414);
  const std::vector<std::string> lines = tp::cost_lines(cost);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].rfind("cost: not priced", 0), 0u) << lines[0];
}

// Storage alone priced: compute, data and overhead stay null and the total is the storage.
TEST(Cost, APartlyPricedJobTotalsOnlyWhatIsPriced) {
  tp::CostRates r;
  r.storage_gb_month = 2.592;
  const json cost = tp::cost_json(r, small_run());
  EXPECT_TRUE(cost["priced"].get<bool>());
  EXPECT_TRUE(cost["job"]["compute"].is_null());
  EXPECT_NEAR(cost["job"]["total"].get<double>(), 0.005, kTight);
  EXPECT_TRUE(cost["losses"][0]["cost"].is_null()) << "losses rest on the compute rate";
  EXPECT_EQ(cost["unpriced"], json({"compute", "data", "overhead"}));
}

// gpu_hour prices GPUs: 0.45 x 8 GPUs = 3.6 an hour, 1.0 for 1000 s. On a CPU host it prices
// nothing, and a note names the option.
TEST(Cost, GpuHourPricesTheGpusAndNothingOnACpuHost) {
  tp::CostRates r;
  r.gpu_hour = 0.45;
  json cost = tp::cost_json(r, small_run());
  EXPECT_EQ(cost["compute_rate"]["basis"], "gpu_hour");
  EXPECT_NEAR(cost["job"]["compute"].get<double>(), 1.0, kTight);
  EXPECT_EQ(tp::cost_lines(cost)[0],
            "cost (USD, gpu_hour 0.45 x 8 GPUs): 2.5 per 1,000 steps, 0.5 per million tokens; "
            "job 1");
  tp::CostInputs cpu = small_run();
  cpu.gpus = 0;
  cost = tp::cost_json(r, cpu);
  EXPECT_FALSE(cost["priced"].get<bool>());
  EXPECT_NE(cost["notes"][0].get<std::string>().find("cost.gpu_hour"), std::string::npos);
  // The summary says it too, not only the JSON's notes.
  const std::vector<std::string> lines = tp::cost_lines(cost);
  EXPECT_NE(std::find(lines.begin(), lines.end(),
                      "  not priced: compute: cost.gpu_hour is set but the job ran on no GPU "
                      "(give cost.node_hour)"),
            lines.end());
}

TEST(Cost, NoStepOrTokenGivesNoPerWorkFigure) {
  tp::CostInputs in = small_run();
  in.steps_completed = 0;
  in.tokens = 0;
  const json cost = tp::cost_json(rates(), in);
  EXPECT_NEAR(cost["job"]["total"].get<double>(), 2.75625, kTight);
  EXPECT_TRUE(cost["job"]["per_1000_steps"].is_null());
  EXPECT_TRUE(cost["job"]["per_million_tokens"].is_null());
}

TEST(Cost, SummaryHeadlineAndLossesLargestFirst) {
  const std::vector<std::string> lines = tp::cost_lines(tp::cost_json(rates(), small_run()));
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0],
            "cost (USD, node_hour 3.6 x 2 nodes): 6.89 per 1,000 steps, 1.38 per million tokens; "
            "job 2.76");
  EXPECT_EQ(lines[2], "  lost to checkpoint_stall: 0.2 (80 s)");
  EXPECT_EQ(lines[4], "  lost to warmup: 0.075 (30 s)");
}

po::variables_map parse_options(std::vector<std::string> args) {
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(tp::option_registry()).run(), vm);
  po::notify(vm);
  return vm;
}

std::string usage_error(std::vector<std::string> args) {
  try {
    tp::cost_rates_from(parse_options(std::move(args)));
  } catch (const tp::UsageError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Cost, RatesAreReadFromTheOptions) {
  const tp::CostRates r = tp::cost_rates_from(
      parse_options({"--cost.node_hour=3.2", "--cost.overhead_fraction=0.1",
                     "--cost.failures_per_node_day=0.01", "--cost.currency=EUR"}));
  EXPECT_EQ(r.node_hour, 3.2);
  EXPECT_EQ(r.overhead_fraction, 0.1);
  EXPECT_EQ(r.failures_per_node_day, 0.01);
  EXPECT_EQ(r.currency, "EUR");
  EXPECT_TRUE(r.priced());
  EXPECT_FALSE(tp::cost_rates_from(parse_options({})).priced()) << "every rate defaults to 0";
}

TEST(Cost, BadRatesAreUsageErrorsNamingTheOption) {
  EXPECT_NE(usage_error({"--cost.storage_gb_month=-1"}).find("cost.storage_gb_month=-1"),
            std::string::npos);
  EXPECT_NE(usage_error({"--cost.data_gb=nan"}).find("cost.data_gb=nan must be a number from 0"),
            std::string::npos);
  // Rates so large that the costs would overflow to infinity (written as null: "not priced").
  EXPECT_EQ(usage_error({"--cost.node_hour=1.7e308"}),
            "cost.node_hour=1.7e+308 must be a number from 0 to 1e+06 (0: not priced)");
  EXPECT_EQ(usage_error({"--cost.overhead_fraction=1e9"}),
            "cost.overhead_fraction=1e+09 must be a number from 0 to 100 (0: not priced)");
  EXPECT_NE(usage_error({"--cost.failures_per_node_day=1e5"}).find("from 0 to 10000"),
            std::string::npos);
  EXPECT_NO_THROW(tp::cost_rates_from(parse_options({"--cost.gpu_hour=1e6"})));
  const std::string both = usage_error({"--cost.node_hour=3", "--cost.gpu_hour=1"});
  EXPECT_NE(both.find("cost.node_hour=3"), std::string::npos) << both;
  EXPECT_NE(both.find("cost.gpu_hour=1"), std::string::npos) << both;
  EXPECT_NE(usage_error({"--cost.currency", ""}).find("cost.currency"), std::string::npos);
}

}  // namespace
