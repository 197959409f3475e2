#pragma once
// `trainproof report hostfile` (docs/acceptance.md, "A host file from golden runs"): a host file
// for one host type, written from golden runs of it. Each [reference] figure is the worst of the
// runs; each [gate] threshold is that figure moved by `share` as its kind says (the rule of
// "Setting thresholds from a golden run"); the [inventory] is what the node-check reports among
// them found, as minimums where a figure varies from node to node. Every line says where it came
// from, so the file can be defended and the self-consistency check holds it like a shipped one.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tp {

struct GoldenReport {
  std::string path;
  nlohmann::json report;
};

// A limit `share` as demanding as the reference: an at-least figure times share, an at-most time
// over it, a share of time o as o / (o + share (1 - o)). `share` lies in (0.6, 0.95): below, a
// host 60% as good passes; above, a healthy host lands in the WARN band.
// UsageError (exit 2) names the file for a report that measured nothing the gate or the
// inventory judges, reports of different work (scenario hash) or job shape, and node-check
// reports that disagree on what a node of the type has (a count or a model).
std::string draft_host_file(const std::vector<GoldenReport>& golden, double share);

}  // namespace tp
