// "unknown option '--train.step'; did you mean --train.steps?": the closest registered name.
#include "app/cli/option_suggestion.h"

#include <algorithm>
#include <vector>

namespace tp {
namespace {

// Edit distance between two option names (insertions, deletions, substitutions).
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string unknown_option_text(const boost::program_options::options_description& options,
                                std::string given) {
  given.erase(0, given.find_first_not_of('-'));
  given = given.substr(0, given.find('='));
  const std::string text = "unknown option '--" + given + "'";
  std::string best;
  size_t best_distance = std::max<size_t>(2, given.size() / 3) + 1;
  for (const auto& option : options.options()) {
    const std::string& name = option->long_name();
    const size_t distance = name.rfind(given, 0) == 0 ? 1 : edit_distance(given, name);
    if (distance < best_distance) {
      best = name;
      best_distance = distance;
    }
  }
  return best.empty() ? text : text + "; did you mean --" + best + "?";
}

}  // namespace tp
