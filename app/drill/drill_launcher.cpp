#include "app/drill/drill_launcher.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "common/errors.h"
#include "common/redact.h"

namespace tp {
namespace {

constexpr const char* kRanks = "{ranks}";
constexpr const char* kExclude = "{exclude}";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

std::string joined(const std::vector<std::string>& words) {
  std::string text;
  for (const std::string& word : words) text += (text.empty() ? "" : ",") + word;
  return text;
}

// Every {word} in the launcher must be one the drill fills in: a typo would reach the shell.
void check_placeholders(const std::string& launcher) {
  for (size_t open = launcher.find('{'); open != std::string::npos;
       open = launcher.find('{', open + 1)) {
    if (open > 0 && launcher[open - 1] == '$') continue;  // ${VAR}: the shell's, not the drill's
    const size_t close = launcher.find('}', open);
    const std::string word =
        launcher.substr(open, close == std::string::npos ? std::string::npos : close - open + 1);
    if (word != kRanks && word != kExclude)
      throw UsageError("--launcher: '" + word +
                       "' is not a placeholder the drill fills in (known: {ranks}, {exclude})");
  }
}

}  // namespace

const char* node_loss_action_name(NodeLossAction action) {
  switch (action) {
    case NodeLossAction::shrink:
      return "shrink";
    case NodeLossAction::spare:
      return "spare";
    case NodeLossAction::wait:
      return "wait";
  }
  return "?";
}

NodeLossAction parse_node_loss_action(const std::string& text) {
  if (text == "shrink") return NodeLossAction::shrink;
  if (text == "spare") return NodeLossAction::spare;
  if (text == "wait") return NodeLossAction::wait;
  throw UsageError("drill.on_node_loss='" + text + "' is not one of: shrink, spare, wait");
}

LaunchShape shape_after_node_loss(const LaunchShape& before, const std::string& lost_host,
                                  int lost_ranks, NodeLossAction action) {
  LaunchShape after = before;
  if (action == NodeLossAction::wait) return after;  // the same hosts, once the node is back
  if (std::find(after.excluded.begin(), after.excluded.end(), lost_host) == after.excluded.end())
    after.excluded.push_back(lost_host);
  if (action == NodeLossAction::shrink) {
    after.ranks = std::max(0, before.ranks - lost_ranks);
    after.nodes = std::max(0, before.nodes - 1);
  }
  return after;
}

bool launcher_is_srun(const std::string& launcher) {
  std::istringstream words(launcher);
  std::string word;
  while (words >> word) {
    if (word == "env" || (word.find('=') != std::string::npos && word.front() != '-')) continue;
    const size_t slash = word.rfind('/');
    return (slash == std::string::npos ? word : word.substr(slash + 1)) == "srun";
  }
  return false;
}

void check_relaunch_launcher(const std::string& launcher, int first_ranks, NodeLossAction action,
                             bool node_loss_possible) {
  check_placeholders(launcher);
  if (contains(launcher, kRanks) && first_ranks <= 0)
    throw UsageError(
        "--launcher uses {ranks}: drill.ranks must give the first launch's rank count");
  if (!node_loss_possible || launcher_is_srun(launcher)) return;
  if (action == NodeLossAction::shrink && !contains(launcher, kRanks))
    throw UsageError(
        "drill.on_node_loss=shrink relaunches with fewer ranks: the launcher must be srun, or "
        "carry {ranks} (for example --launcher \"mpirun -np {ranks}\" --drill.ranks=8)");
  if (action == NodeLossAction::spare && !contains(launcher, kExclude))
    throw UsageError(
        "drill.on_node_loss=spare relaunches without the lost host: the launcher must be srun, "
        "or carry {exclude} (the lost hosts, comma-separated)");
}

bool is_plain_host_name(const std::string& host) {
  return !host.empty() && host.size() <= 253 && host.front() != '-' &&
         std::all_of(host.begin(), host.end(), [](unsigned char c) {
           return std::isalnum(c) || c == '.' || c == '-' || c == '_';
         });
}

std::string launcher_for(const std::string& launcher, const std::optional<LaunchShape>& shape,
                         int first_ranks) {
  for (const std::string& host : shape ? shape->excluded : std::vector<std::string>{})
    if (!is_plain_host_name(host))
      throw RuntimeError("the lost host '" + message_text(host) +
                         "' is not a plain host name; it is not put on the launcher's command "
                         "line, and the drill does not relaunch");
  const int ranks = shape ? shape->ranks : first_ranks;
  const std::string excluded = shape ? joined(shape->excluded) : "";
  std::string line =
      replace_all(replace_all(launcher, kRanks, std::to_string(ranks)), kExclude, excluded);
  if (!shape || !launcher_is_srun(launcher)) return line;
  line += " --nodes=" + std::to_string(shape->nodes) + " --ntasks=" + std::to_string(shape->ranks);
  if (!excluded.empty()) line += " --exclude=" + excluded;
  return line;
}

}  // namespace tp
