#pragma once
// Fixtures shared by the acceptance gate's and report's unit tests: thresholds as
// accept_config_from makes them, a sweep section, and lookups of checks by name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/accept/accept_config.h"

namespace tp::test {

using nlohmann::json;

inline tp::GateThreshold gate(const std::string& check, tp::Direction direction, double limit,
                              const std::string& stage, const std::string& metric) {
  tp::GateThreshold t;
  t.threshold = {check, direction, limit, "--gate." + check + " on the command line"};
  t.stage = stage;
  t.metric = metric;
  return t;
}

inline tp::AcceptConfig gated(std::vector<tp::GateThreshold> thresholds,
                              double warn_margin = 0.05) {
  tp::AcceptConfig c;
  c.stages = tp::kAcceptStages;
  c.thresholds = std::move(thresholds);
  c.warn_margin = warn_margin;
  return c;
}

inline const tp::GateThreshold kMinAu =
    gate("min_au", tp::Direction::at_least, 0.5, "train", "accelerator utilisation");
inline const tp::GateThreshold kMaxStepCv =
    gate("max_step_cv", tp::Direction::at_most, 0.5, "train",
         "coefficient of variation of the step time");
inline const tp::GateThreshold kMinBusbw = gate("min_busbw_gbps", tp::Direction::at_least, 30,
                                                "sweep", "in-place bus bandwidth per operation");
inline const tp::GateThreshold kMinPair = gate("min_pair_gbps", tp::Direction::at_least, 10,
                                               "pairwise", "bandwidth of every pair of nodes");

inline json sweep_row(const std::string& op, int64_t bytes, double busbw, bool in_place = true,
                      const std::string& group = "world") {
  return {{"group", group},       {"op", op},      {"bytes", bytes},
          {"in_place", in_place}, {"not_run", ""}, {"algbw_gbps", busbw / 2},
          {"busbw_gbps", busbw}};
}

inline constexpr int64_t kMiB = int64_t(1) << 20;

// allreduce has rows on both sides of 64 MiB (and faster rows that are not in place or not the
// world group); allgather stops below it; reducescatter's rows are out of size order.
inline json sweep_report() {
  return {{"sweep",
           {{"results",
             {sweep_row("allreduce", 1 * kMiB, 10), sweep_row("allreduce", 64 * kMiB, 50),
              sweep_row("allreduce", 256 * kMiB, 60), sweep_row("allreduce", 64 * kMiB, 100, false),
              sweep_row("allreduce", 64 * kMiB, 200, true, "node n0"),
              sweep_row("allgather", 1 * kMiB, 5), sweep_row("allgather", 16 * kMiB, 20),
              sweep_row("reducescatter", 256 * kMiB, 45),
              sweep_row("reducescatter", 128 * kMiB, 42), sweep_row("alltoall", 64 * kMiB, 1),
              sweep_row("broadcast", 64 * kMiB, 1), sweep_row("sendrecv", 64 * kMiB, 1)}}}}};
}

inline const json& named(const json& checks, const std::string& name) {
  for (const json& c : checks)
    if (c.value("name", "") == name) return c;
  static const json none;
  ADD_FAILURE() << "no check " << name << " in " << checks.dump();
  return none;
}

inline std::vector<std::string> names_of(const json& checks) {
  std::vector<std::string> names;
  for (const json& c : checks) names.push_back(c.value("name", ""));
  return names;
}

inline json baseline_report(double samples_per_s, double step_p50, const std::string& hash) {
  return {{"schema", "trainproof.report/2"},
          {"context", {{"scenario_hash", hash}}},
          {"train",
           {{"samples_per_s", samples_per_s},
            {"au", 0.8},
            {"phases", {{"step", {{"p50", step_p50}}}}}}}};
}

}  // namespace tp::test
