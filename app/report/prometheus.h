#pragma once
// A report as the Prometheus text exposition format (docs/report.md, "Outputs for CI and
// monitoring"), for node_exporter's textfile collector: the verdict and each check's status as
// state sets, each check's value and threshold, the step phases by quantile, busbw per operation
// and size, checkpoint write and restore bandwidth, goodput, and each node's flag. Units in
// names, base units (seconds, bytes); labels are bounded by checks, operations, sizes and hosts,
// never by ranks, and a run's id is only in trainproof_run_info.
#include <nlohmann/json.hpp>
#include <string>

namespace tp {

std::string render_prometheus(const nlohmann::json& report);

// A label value as the exposition format writes it: backslash, double quote and newline escaped.
std::string prometheus_label_value(const std::string& text);

}  // namespace tp
