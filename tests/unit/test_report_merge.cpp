#include <gtest/gtest.h>

#include "app/judge/report_merge.h"

#include "app/job/cost.h"
#include "app/job/job_report.h"
#include "app/judge/thresholds.h"
#include "common/errors.h"

namespace {

using nlohmann::json;

json threshold(const std::string& check, const std::string& direction, double limit,
               const std::string& stage) {
  return {{"check", check},
          {"direction", direction},
          {"limit", limit},
          {"source", "command line"},
          {"stage", stage}};
}

// The n/a check the accept run wrote for a stage it did not run.
json not_run(const std::string& check, tp::Direction direction, double limit) {
  tp::Measurement skipped;
  skipped.skipped_stage = "drill";
  skipped.why_not = "the drill is judged when report merge joins its report";
  return tp::judge_threshold({check, direction, limit, "command line"}, skipped, 0.05);
}

// An accept run that passed its own checks, with the drill's thresholds waiting for the drill.
json accept_report(const std::string& hash = "h1") {
  return {
      {"schema", "trainproof.report/2"},
      {"verdict", "PASS"},
      {"context", {{"scenario_hash", hash}, {"warnings", json::array()}}},
      {"accept", {{"stages", {"preflight", "train"}}}},
      {"train", {{"samples_per_s", 100.0}, {"final_digest", "clean"}}},
      {"job", {{"goodput", 0.9}}},
      {"gate",
       {{"warn_margin", 0.05},
        {"thresholds",
         {threshold("min_au", "at_least", 0.5, "train"), threshold("drill", "at_least", 1, "drill"),
          threshold("max_rto_s", "at_most", 60, "drill"),
          threshold("max_rpo_steps", "at_most", 8, "drill")}},
        {"checks",
         {{{"name", "min_au"}, {"status", "pass"}, {"reason", "0.8 is at least 0.5"}},
          not_run("drill", tp::Direction::at_least, 1),
          not_run("max_rto_s", tp::Direction::at_most, 60),
          not_run("max_rpo_steps", tp::Direction::at_most, 8)}}}}};
}

// The drill's report: its final run trained with faults, so its train section and its own
// checks differ from the accept run's.
json drill_report(const std::string& verdict, json rto_s, json rpo_steps,
                  const std::string& hash = "h1") {
  const bool pass = verdict == "PASS";
  return {
      {"schema", "trainproof.report/2"},
      {"verdict", verdict},
      {"context", {{"scenario_hash", hash}, {"drill", {{"started", "t0"}, {"ended", "t1"}}}}},
      {"train", {{"samples_per_s", 40.0}, {"final_digest", "faulted"}}},
      {"drill",
       {{"verdict", verdict},
        {"rto_s", rto_s},
        {"rpo_steps", rpo_steps},
        {"redone_step_seconds", 1.5},
        {"failures", {{{"kind", "crash"}, {"rto_s", 20.0}}, {{"kind", "hang"}, {"rto_s", 30.0}}}}}},
      {"gate",
       {{"checks",
         {{{"name", "min_straggler_score"}, {"status", "fail"}, {"reason", "rank 1 slow"}},
          {{"name", "drill"},
           {"value", verdict},
           {"status", pass ? "pass" : "fail"},
           {"reason", pass ? "final digest matches the reference after 2 failure(s)"
                           : "final digest differs from the reference"}}}}}}};
}

json merge(const json& accept, const json& other) {
  return tp::merge_reports({{"accept.json", accept}, {"drill.json", other}});
}

const json& check(const json& report, const std::string& name) {
  for (const json& c : report["gate"]["checks"])
    if (c["name"] == name) return c;
  static const json none;
  ADD_FAILURE() << "no check " << name << " in " << report["gate"]["checks"].dump(2);
  return none;
}

int checks_named(const json& report, const std::string& name) {
  int count = 0;
  for (const json& c : report["gate"]["checks"]) count += c["name"] == name;
  return count;
}

TEST(ReportMerge, DrillThresholdsAreJudgedFromTheDrill) {
  const json merged = merge(accept_report(), drill_report("PASS", 30.0, 3));
  EXPECT_EQ(check(merged, "drill")["status"], "pass") << "1 against a limit of 1 is no WARN";
  EXPECT_EQ(check(merged, "drill")["value"], 1);
  EXPECT_EQ(check(merged, "drill")["reason"],
            "drill: final digest matches the reference after 2 failure(s); 1 is at least 1 "
            "(limit from command line)");
  EXPECT_EQ(check(merged, "max_rto_s")["status"], "pass");
  EXPECT_EQ(check(merged, "max_rto_s")["value"], 30.0);
  EXPECT_EQ(check(merged, "max_rpo_steps")["status"], "pass");
  EXPECT_EQ(check(merged, "max_rpo_steps")["direction"], "at_most");
  EXPECT_EQ(checks_named(merged, "drill"), 1) << "the drill's own check is folded in";
  EXPECT_EQ(merged["gate"]["checks"][1]["name"], "drill") << "the gate's order is kept";
  EXPECT_EQ(merged["verdict"], "PASS");
}

TEST(ReportMerge, AnRtoOverTheLimitFailsTheMergedReport) {
  const json merged = merge(accept_report(), drill_report("PASS", 90.0, 3));
  EXPECT_EQ(check(merged, "max_rto_s")["status"], "fail");
  EXPECT_NE(check(merged, "max_rto_s")["reason"].get<std::string>().find("90 s is above 60 s"),
            std::string::npos)
      << check(merged, "max_rto_s");
  EXPECT_EQ(merged["verdict"], "FAIL");
}

TEST(ReportMerge, AnRtoJustInsideTheLimitWarns) {
  const json merged = merge(accept_report(), drill_report("PASS", 59.0, 3));
  EXPECT_EQ(check(merged, "max_rto_s")["status"], "warn");
  EXPECT_EQ(merged["verdict"], "WARN");
}

TEST(ReportMerge, AFailedDrillFailsItsCheck) {
  const json merged = merge(accept_report(), drill_report("FAIL", 30.0, 3));
  EXPECT_EQ(check(merged, "drill")["status"], "fail");
  EXPECT_EQ(check(merged, "drill")["value"], 0);
  EXPECT_NE(check(merged, "drill")["reason"].get<std::string>().find("final digest differs"),
            std::string::npos);
  EXPECT_EQ(merged["verdict"], "FAIL");
}

TEST(ReportMerge, WhatTheDrillDidNotMeasureStaysNa) {
  const json merged = merge(accept_report(), drill_report("PASS", nullptr, 3));
  EXPECT_EQ(check(merged, "max_rto_s")["status"], "n/a");
  EXPECT_EQ(check(merged, "max_rto_s")["reason"],
            "not measured: the drill did not measure drill.rto_s");
  EXPECT_EQ(merged["verdict"], "PASS");

  json silent = drill_report("PASS", 30.0, 3);
  silent["drill"].erase("verdict");
  silent["gate"]["checks"].erase(1);
  EXPECT_EQ(check(merge(accept_report(), silent), "drill")["reason"],
            "not measured: the drill's report has neither drill.verdict nor a drill check");
}

TEST(ReportMerge, WithoutADrillReportTheDrillChecksStayNa) {
  json train = {{"schema", "trainproof.report/2"},
                {"verdict", "PASS"},
                {"context", {{"scenario_hash", "h1"}}},
                {"train", {{"final_digest", "other"}}},
                {"checkpoint", {{"write_gbps", 2.0}}}};
  const json merged = merge(accept_report(), train);
  EXPECT_EQ(check(merged, "max_rto_s"), accept_report()["gate"]["checks"][2]);
  EXPECT_EQ(merged["train"]["final_digest"], "clean");
  EXPECT_EQ(merged["checkpoint"]["write_gbps"], 2.0) << "a section accept lacked";
  EXPECT_EQ(merged["merged_from"][1],
            json({{"file", "drill.json"}, {"kind", "train"}, {"sections", {"checkpoint"}}}));
  EXPECT_EQ(merged["verdict"], "PASS");
  EXPECT_FALSE(merged.contains("drill"));
}

TEST(ReportMerge, TheDrillsTrainRunNeverReplacesTheAcceptRun) {
  const json merged = merge(accept_report(), drill_report("PASS", 30.0, 3));
  EXPECT_EQ(merged["train"], accept_report()["train"]);
  EXPECT_EQ(checks_named(merged, "min_straggler_score"), 0) << "the faulted run's checks stay out";
  EXPECT_EQ(merged["drill"]["rto_s"], 30.0);
  EXPECT_EQ(merged["context"]["drill"]["started"], "t0");
  EXPECT_EQ(merged["accept"]["stages"], accept_report()["accept"]["stages"]);
  EXPECT_EQ(merged["merged_from"],
            json::parse(R"([{"file": "accept.json", "kind": "accept", "sections": ["job", "train"]},
                            {"file": "drill.json", "kind": "drill", "sections": ["drill"]}])"));
}

TEST(ReportMerge, WithoutADrillThresholdTheDrillsOwnCheckIsAdded) {
  json accept = accept_report();
  accept["gate"]["thresholds"] = json::array({accept["gate"]["thresholds"][0]});
  accept["gate"]["checks"] = json::array({accept["gate"]["checks"][0]});
  const json merged = merge(accept, drill_report("FAIL", 30.0, 3));
  json own = drill_report("FAIL", 30.0, 3)["gate"]["checks"][1];
  own["stage"] = "drill";
  EXPECT_EQ(check(merged, "drill"), own);
  EXPECT_EQ(merged["verdict"], "FAIL");
  EXPECT_EQ(merge(accept, drill_report("PASS", 30.0, 3))["verdict"], "PASS");
}

TEST(ReportMerge, TheVerdictIsRecomputedFromTheChecks) {
  json accept = accept_report();
  accept["verdict"] = "FAIL";  // what the accept run said before the drill was judged
  EXPECT_EQ(merge(accept, drill_report("PASS", 30.0, 3))["verdict"], "PASS");
}

TEST(ReportMerge, AnIncompleteAcceptRunStaysIncompleteWhateverTheDrillSays) {
  json accept = accept_report();
  accept["gate"]["checks"].push_back({{"name", "run_complete"},
                                      {"status", "incomplete"},
                                      {"reason", "SIGTERM received during stage train"}});
  accept["verdict"] = "INCOMPLETE";
  EXPECT_EQ(merge(accept, drill_report("PASS", 30.0, 3))["verdict"], "INCOMPLETE");
  EXPECT_EQ(merge(accept, drill_report("FAIL", 30.0, 3))["verdict"], "FAIL");
}

TEST(ReportMerge, ExactlyOneAcceptReportAndAtMostOneDrill) {
  const auto message = [](const std::vector<tp::StageReport>& inputs) {
    try {
      tp::merge_reports(inputs);
    } catch (const tp::UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({{"a.json", accept_report()}, {"b.json", accept_report()}}),
            "report merge: a.json, b.json are all accept reports; give exactly one");
  const json drill = drill_report("PASS", 30.0, 3);
  EXPECT_EQ(message({{"d.json", drill}, {"e.json", drill}}),
            "report merge: none of d.json, e.json is an accept report (one with an \"accept\" "
            "section); give exactly one");
  EXPECT_EQ(message({{"a.json", accept_report()}, {"d.json", drill}, {"e.json", drill}}),
            "report merge: d.json, e.json are all drill reports; give at most one");
}

TEST(ReportMerge, DifferentWorkIsWarnedButJoined) {
  const json merged = merge(accept_report("h1"), drill_report("PASS", 30.0, 3, "h2"));
  ASSERT_EQ(merged["context"]["warnings"].size(), 1u);
  EXPECT_EQ(merged["context"]["warnings"][0],
            "scenario hashes differ: accept.json has h1, drill.json has h2; the merged report "
            "joins runs of different work");
  EXPECT_EQ(check(merged, "max_rto_s")["status"], "pass");
  EXPECT_TRUE(merge(accept_report(), drill_report("PASS", 30.0, 3))["context"]["warnings"].empty());
}

TEST(ReportMerge, TheJobSaysWhatTheDrillsFailuresCost) {
  const json merged = merge(accept_report(), drill_report("PASS", 30.0, 3));
  EXPECT_EQ(merged["job"]["goodput"], 0.9) << "the accept run's goodput is its own";
  EXPECT_EQ(merged["job"]["drill"]["redone_s"], 1.5);
  EXPECT_EQ(merged["job"]["drill"]["recovery_s"], 50.0);
  EXPECT_EQ(merged["job"]["drill"]["failures"], 2);
  EXPECT_NE(merged["job"]["drill"]["note"].get<std::string>().find("goodput is unchanged"),
            std::string::npos);

  json quiet = drill_report("PASS", nullptr, nullptr);
  quiet["drill"]["failures"] = json::array();
  EXPECT_FALSE(merge(accept_report(), quiet)["job"].contains("drill"));
  json no_job = accept_report();
  no_job.erase("job");
  EXPECT_FALSE(merge(no_job, drill_report("PASS", 30.0, 3)).contains("job"));
}

// Priced at 3.6 per node-hour (0.001 a second) on 1 node: each failure's recovery (its RTO) and
// redone work (its RPO steps x the 0.5 s step) cost 0.001 a second: (20 + 0.5 x 2) x 0.001 =
// 0.021 and (30 + 0.5 x 4) x 0.001 = 0.032. Storage and data are not priced.
TEST(ReportMerge, TheAcceptRunsPricesAreAppliedToTheDrillsFailures) {
  json accept = accept_report();
  accept["job"] = {
      {"wall_s", 100.0}, {"goodput", 0.9}, {"categories", json::array()}, {"lost", json::array()}};
  accept["ranks"] = {{{"rank", 0}, {"host", "n1"}, {"gpu", nullptr}}};
  accept["train"]["phases"] = {{"step", {{"p50", 0.5}}}};
  accept["cost"] =
      tp::cost_json(tp::CostRates{3.6, 0, 0, 0, 0, 0, "EUR"}, tp::cost_inputs_from(accept));
  ASSERT_TRUE(accept["cost"]["failures"].empty());
  json drill = drill_report("PASS", 30.0, 4);
  drill["drill"]["failures"][0]["rpo_steps"] = 2;
  drill["drill"]["failures"][1]["rpo_steps"] = 4;
  const json merged = merge(accept, drill);
  const json& failures = merged["cost"]["failures"];
  ASSERT_EQ(failures.size(), 2u);
  EXPECT_NEAR(failures[0]["total"].get<double>(), 0.021, 1e-12);
  EXPECT_NEAR(failures[1]["total"].get<double>(), 0.032, 1e-12);
  EXPECT_EQ(merged["cost"]["currency"], "EUR");
  EXPECT_EQ(merged["cost"]["inputs"]["rto_s"], 30.0);
}

TEST(ReportMerge, ADamagedGateIsRefusedByName) {
  json accept = accept_report();
  accept["gate"]["thresholds"][2]["direction"] = "sideways";
  EXPECT_THROW(merge(accept, drill_report("PASS", 30.0, 3)), tp::UsageError);
  json drill = drill_report("PASS", 30.0, 3);
  drill["gate"]["checks"][0] = 42;
  try {
    merge(accept_report(), drill);
    ADD_FAILURE() << "a check that is not an object was merged";
  } catch (const tp::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("report 'drill.json': a gate check"), std::string::npos)
        << e.what();
  }
}

}  // namespace
