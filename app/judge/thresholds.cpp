#include "app/judge/thresholds.h"

#include "app/report/gate.h"
#include "common/number_text.h"

namespace tp {
namespace {

// Four significant digits, never e-notation: a limit drafted from a golden run may be 0.00000232.
std::string number(double value, const std::string& unit) {
  const std::string text = readable_number(value, 4);
  return unit.empty() ? text : text + " " + unit;
}

// The status before a retry is considered.
std::string status_of(Direction direction, double value, double limit, double margin) {
  if (direction == Direction::at_least) {
    if (value < limit) return "fail";
    return value < limit + margin ? "warn" : "pass";
  }
  if (value > limit) return "fail";
  return value > limit - margin ? "warn" : "pass";
}

}  // namespace

nlohmann::json judge_threshold(const Threshold& t, const Measurement& m, double warn_margin) {
  const bool at_least = t.direction == Direction::at_least;
  nlohmann::json check;
  if (!m.value) {
    check = gate_check(
        t.check, nullptr, t.limit, "n/a",
        "not measured: " +
            (m.why_not.empty() ? "stage " + m.skipped_stage + " did not run" : m.why_not));
  } else {
    const double margin = warn_margin * (t.limit < 0 ? -t.limit : t.limit);
    std::string status = status_of(t.direction, *m.value, t.limit, margin);
    std::string reason = (m.where.empty() ? "" : m.where + ": ") +
                         (m.detail.empty() ? "" : m.detail + "; ") + number(*m.value, m.unit) +
                         (status == "fail" ? (at_least ? " is below " : " is above ")
                                           : (at_least ? " is at least " : " is at most ")) +
                         number(t.limit, m.unit);
    if (status == "warn") reason += ", within " + number(100 * warn_margin, "") + "% of it";
    if (status == "pass" && m.passed_on_retry) {
      status = "warn";
      reason += ", only on a retry";
    }
    if (!t.source.empty()) reason += " (limit from " + t.source + ")";
    check = gate_check(t.check, *m.value, t.limit, status, reason);
  }
  check["direction"] = at_least ? "at_least" : "at_most";
  check["source"] = t.source;
  return check;
}

}  // namespace tp
