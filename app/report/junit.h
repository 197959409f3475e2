#pragma once
// A report's checks as JUnit XML (docs/report.md, "Outputs for CI and monitoring"), as CI systems
// read ReFrame's or pytest's: one <testsuite> per stage, one <testcase> per check carrying its
// status, value, threshold and source; <failure> with the reason for FAIL, <skipped> for n/a.
// WARN and PASS are passing test cases; a WARN case carries its status as a property and a
// <system-err> line, so a green CI run still shows it. Suites have their stage's time and the
// run's start as their timestamp.
#include <nlohmann/json.hpp>
#include <string>

namespace tp {

std::string render_junit(const nlohmann::json& report);

}  // namespace tp
