#pragma once
// The acceptance gate's thresholds (docs/acceptance.md): a measured figure held against a limit
// its user set, with a WARN band just inside the limit, and the limit's source carried into the
// check so a verdict can be defended.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace tp {

// Which side of the limit is good: at_least for rates and scores, at_most for times and spreads.
enum class Direction { at_least, at_most };

struct Threshold {
  std::string check;  // the check's name in gate.checks[], e.g. "min_au"
  Direction direction = Direction::at_least;
  double limit = 0;
  std::string source;  // where the limit came from: an option, a host file, a golden report
};

// One check's measured figure. Without a value, the stage that measures it was skipped.
struct Measurement {
  std::optional<double> value;
  std::string unit;           // printed after the value and the limit ("GB/s", "s", "")
  std::string where;          // the node, rank or stage the figure belongs to, when known
  std::string detail;         // what the figure is, said plainly
  std::string skipped_stage;  // the stage that would have measured it
  std::string why_not;        // or, when its stage ran, why it measured nothing
  bool passed_on_retry = false;
};

// PASS when the value clears the limit by at least `warn_margin` of it; WARN when it clears it by
// less, or only on a retry; FAIL when it does not clear it; "n/a" when nothing was measured (never
// a silent PASS). The entry is gate_check's, with the threshold's direction and source added.
nlohmann::json judge_threshold(const Threshold& threshold, const Measurement& measured,
                               double warn_margin);

}  // namespace tp
