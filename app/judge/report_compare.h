#pragma once
// `trainproof report compare GOLDEN NEW` (docs/acceptance.md, "Baselines"): each metric of a new
// report against a golden one, in the direction that is better for it, with a verdict. This is
// how a team compares two host types, or an image before and after an update, on the same work.
#include <nlohmann/json.hpp>
#include <string>

namespace tp {

// {tolerance, metrics[]: {name, unit, better, golden, new, ratio, status, reason}, differences[],
// verdict}. A metric passes when new is at least `tolerance` of golden in its better direction
// (higher is better: new/golden; lower: golden/new); it is n/a when either report lacks it. The
// verdict is FAIL when one fell, NONE when none could be compared. `differences` says where the
// two runs differ in what they ran: scenario hash, world size, steps, backends, sweep sizes.
nlohmann::json compare_reports(const nlohmann::json& golden, const nlohmann::json& fresh,
                               double tolerance);

// The comparison as a table, its differences and its verdict.
std::string render_comparison(const nlohmann::json& comparison);

}  // namespace tp
