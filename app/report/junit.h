#pragma once
// A report's checks as JUnit XML (docs/report.md, "Outputs for CI and monitoring"), as CI systems
// read ReFrame's or pytest's: one <testsuite> per stage, one <testcase> per check carrying its
// status, value, threshold and source; <failure> with the reason for FAIL, <skipped> for n/a.
// WARN and PASS are passing test cases whose output says which.
#include <nlohmann/json.hpp>
#include <string>

namespace tp {

std::string render_junit(const nlohmann::json& report);

}  // namespace tp
