#pragma once
// How a drill relaunches after a lost node (docs/drills.md, "Losing a node"): the rank count and
// the hosts left out, decided by drill.on_node_loss, and the launcher line that carries them. Under
// Slurm the supervisor appends srun's own options; any other launcher names the values with the
// placeholders {ranks} and {exclude}. Pure, so it is unit-tested without launching anything.
#include <optional>
#include <string>
#include <vector>

namespace tp {

enum class NodeLossAction { shrink, spare, wait };
const char* node_loss_action_name(NodeLossAction action);
// Throws UsageError naming drill.on_node_loss and the value.
NodeLossAction parse_node_loss_action(const std::string& text);

// The world a launch runs: its ranks, on how many nodes, and the hosts it must not use.
struct LaunchShape {
  int ranks = 0;
  int nodes = 0;
  std::vector<std::string> excluded;
};

// The shape after losing `lost_host`, which ran `lost_ranks` of `before`'s ranks.
LaunchShape shape_after_node_loss(const LaunchShape& before, const std::string& lost_host,
                                  int lost_ranks, NodeLossAction action);

// Whether the launcher's first command is srun (after any `env` and VAR=value words).
bool launcher_is_srun(const std::string& launcher);

// Throws UsageError for a launcher that cannot carry a relaunch at another shape: an unknown
// {placeholder}, {ranks} without drill.ranks, or an action the launcher cannot express (shrink
// needs srun or {ranks}; spare needs srun or {exclude}). `node_loss_possible`: a node fault or an
// external node kill may strike; without one only the placeholders are checked.
void check_relaunch_launcher(const std::string& launcher, int first_ranks, NodeLossAction action,
                             bool node_loss_possible);

// The launcher line for a launch of `shape` (nullopt: the first launch, as given). Under srun,
// --nodes, --ntasks and --exclude are appended (later options win); otherwise {ranks} and
// {exclude} are replaced (the first launch: drill.ranks and nothing). The line goes to the
// shell: an excluded host that is not a plain host name (is_plain_host_name) is a RuntimeError
// naming it, never a word of the command.
// Letters, digits, '.', '-' and '_', at most 253 bytes, not starting with '-' (an option to the
// launcher): what a host name in a heartbeat or progress record must be before the drill puts it
// on a command line.
bool is_plain_host_name(const std::string& host);

std::string launcher_for(const std::string& launcher, const std::optional<LaunchShape>& shape,
                         int first_ranks);

}  // namespace tp
