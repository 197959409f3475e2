#pragma once
// The pairwise pass in the sweep report (docs/sweep.md, "Reading the matrix"): the matrices, the
// flags with reasons a person can act on, and the checks that set the verdict.
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/stages/sweep_report.h"

namespace tp {

nlohmann::json pairwise_json(const PairwiseRecord& record);
// Conditions that make the matrix's flags less trustworthy, for context.warnings.
std::vector<std::string> pairwise_warnings(const PairwiseRecord& record);
// Each flagged host's findings (node_finding, check pairwise_flags), for nodes[]: what the node
// itself showed (WARN, as pairwise_flags counts it), then its confirmed flags, each FAIL or WARN
// as its confirmation decided (sweep.fail_fraction, the noise and sweep.fail_floor), with a
// summary ("send 36 MB/s = 2.8% of control").
std::map<std::string, std::vector<nlohmann::json>> pairwise_node_findings(
    const PairwiseRecord& record);
// pairwise_correctness (a wrong element is FAIL), pairwise_flags (a flag is WARN, a flag below
// sweep.fail_fraction by more than the noise, or below sweep.fail_floor, FAIL) and pairwise_noise
// (a trial too noisy for the noise rule to judge is WARN).
nlohmann::json pairwise_checks(const PairwiseRecord& record);

}  // namespace tp
