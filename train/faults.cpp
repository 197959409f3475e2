#include "train/faults.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/clock.h"
#include "common/errors.h"
#include "common/files.h"
#include "common/json_depth.h"

namespace tp {

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::data:
      return "data";
    case Phase::compute:
      return "compute";
    case Phase::comm:
      return "comm";
    case Phase::optimizer:
      return "optimizer";
  }
  return "?";
}

namespace {

std::map<std::string, std::string> parse_fields(const std::string& text, const std::string& body) {
  std::map<std::string, std::string> fields;
  size_t start = 0;
  while (start <= body.size()) {
    const size_t comma = body.find(',', start);
    const std::string item =
        body.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      throw UsageError("--fault '" + text + "': expected key=value, got '" + item + "'");
    if (!fields.emplace(item.substr(0, eq), item.substr(eq + 1)).second)
      throw UsageError("--fault '" + text + "': key '" + item.substr(0, eq) + "' given twice");
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return fields;
}

double parse_number(const std::string& text, const std::string& key, const std::string& value) {
  size_t used = 0;
  double number = 0;
  try {
    number = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || !(number == number))
    throw UsageError("--fault '" + text + "': " + key + "='" + value + "' is not a number");
  return number;
}

int64_t parse_integer(const std::string& text, const std::string& key, const std::string& value,
                      int64_t minimum) {
  const double number = parse_number(text, key, value);
  if (number != double(int64_t(number)) || number < double(minimum))
    throw UsageError("--fault '" + text + "': " + key + "='" + value +
                     "' must be an integer >= " + std::to_string(minimum));
  return int64_t(number);
}

}  // namespace

const std::vector<std::string>& kill_phases() {
  static const std::vector<std::string> phases = {"data",      "compute",    "comm",
                                                  "optimizer", "ckpt-write", "ckpt-commit"};
  return phases;
}

namespace {

bool is_checkpoint_phase(const std::string& phase) {
  return phase.rfind("ckpt-", 0) == 0;
}

// Who (rank=R, or host=H for a node), step and phase of a kill, hang, stop or node loss; the
// phase defaults to compute.
void parse_victim(FaultSpec& spec, std::map<std::string, std::string>& fields,
                  const std::string& text, const std::string& kind, bool checkpoint_phases) {
  const std::string who = kind == "node" ? "host" : "rank";
  for (const auto& [key, value] : fields) {
    if (key == who) {
      if (who == "host")
        spec.host = value;
      else
        spec.rank = int(parse_integer(text, key, value, 0));
    } else if (key == "step") {
      spec.step = parse_integer(text, key, value, 1);
    } else if (key == "phase") {
      const auto& all = kill_phases();
      const bool known = std::find(all.begin(), all.end(), value) != all.end() &&
                         (checkpoint_phases || !is_checkpoint_phase(value));
      if (!known)
        throw UsageError("--fault '" + text + "': phase '" + value + "' is not one of: " +
                         (checkpoint_phases
                              ? "data, compute, comm, optimizer, ckpt-write, ckpt-commit"
                              : "data, compute, comm, optimizer"));
      spec.phase = value;
    } else {
      throw UsageError("--fault '" + text + "': unknown key '" + key + "' for " + kind + " (" +
                       who + ", step, phase)");
    }
  }
  if (!fields.count(who) || !fields.count("step"))
    throw UsageError("--fault '" + text + "': " + kind + " needs " + who +
                     (who == "host" ? "=H" : "=R") + " and step=S");
  if (spec.phase.empty()) spec.phase = "compute";
}

// random:seed=N[,kinds=kill|node|kill+node]: without kinds only a kill is drawn, so a seed given
// before node losses existed replays the same fault.
void parse_random(FaultSpec& spec, const std::map<std::string, std::string>& fields,
                  const std::string& text) {
  spec.kind = FaultSpec::Kind::random;
  for (const auto& [key, value] : fields) {
    if (key == "seed") {
      spec.seed = uint64_t(parse_integer(text, key, value, 0));
    } else if (key == "kinds") {
      if (value != "kill" && value != "node" && value != "kill+node" && value != "node+kill")
        throw UsageError("--fault '" + text + "': kinds='" + value +
                         "' is not one of: kill, node, kill+node");
      spec.may_draw_node = value != "kill";
      spec.may_draw_kill = value != "node";
    } else {
      throw UsageError("--fault '" + text + "': unknown key '" + key +
                       "' for random (seed, kinds)");
    }
  }
  if (!fields.count("seed")) throw UsageError("--fault '" + text + "': random needs seed=N");
}

}  // namespace

FaultSpec parse_fault(const std::string& text) {
  const size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  if (colon == std::string::npos || colon + 1 == text.size())
    throw UsageError("--fault '" + text + "': expected KIND:key=value,... (see --help)");
  auto fields = parse_fields(text, text.substr(colon + 1));
  FaultSpec spec;
  spec.text = text;
  spec.origin = text;
  if (kind == "slow") {
    spec.kind = FaultSpec::Kind::slow;
    for (const auto& [key, value] : fields) {
      if (key == "rank")
        spec.rank = int(parse_integer(text, key, value, 0));
      else if (key == "ms")
        spec.ms = parse_number(text, key, value);
      else if (key == "step")
        spec.step = parse_integer(text, key, value, 1);
      else
        throw UsageError("--fault '" + text + "': unknown key '" + key +
                         "' for slow (rank, ms, step)");
    }
    if (!fields.count("rank") || !fields.count("ms"))
      throw UsageError("--fault '" + text + "': slow needs rank=R and ms=M");
    if (spec.ms <= 0) throw UsageError("--fault '" + text + "': ms must be > 0");
    return spec;
  }
  if (kind == "kill" || kind == "hang" || kind == "stop") {
    spec.kind = kind == "kill"   ? FaultSpec::Kind::kill
                : kind == "hang" ? FaultSpec::Kind::hang
                                 : FaultSpec::Kind::stop;
    parse_victim(spec, fields, text, kind, kind != "hang");
    return spec;
  }
  if (kind == "corrupt") {
    spec.kind = FaultSpec::Kind::corrupt;
    spec.mode = "flip";
    spec.rank = 0;
    for (const auto& [key, value] : fields) {
      // rank=R, as every other fault names its rank; shard=R, its first name, still reads.
      if (key == "rank" || key == "shard") {
        spec.rank = int(parse_integer(text, key, value, 0));
      } else if (key == "mode") {
        if (value != "flip" && value != "truncate" && value != "delete")
          throw UsageError("--fault '" + text + "': mode '" + value +
                           "' is not one of: flip, truncate, delete");
        spec.mode = value;
      } else {
        throw UsageError("--fault '" + text + "': unknown key '" + key +
                         "' for corrupt (rank, mode)");
      }
    }
    return spec;
  }
  if (kind == "node") {
    spec.kind = FaultSpec::Kind::node;
    parse_victim(spec, fields, text, kind, true);
    return spec;
  }
  if (kind == "random") {
    parse_random(spec, fields, text);
    return spec;
  }
  throw UsageError("--fault '" + text + "': unknown fault kind '" + kind +
                   "' (known: slow, kill, hang, stop, node, corrupt, random)");
}

std::vector<FaultSpec> parse_faults(const std::vector<std::string>& texts) {
  std::vector<FaultSpec> faults;
  for (const auto& text : texts) faults.push_back(parse_fault(text));
  return faults;
}

void validate_faults(const std::vector<FaultSpec>& faults, int world_size, int64_t steps,
                     int64_t checkpoint_every, const std::vector<std::string>& hosts) {
  for (const auto& f : faults) {
    const bool at_checkpoint =
        (f.kind == FaultSpec::Kind::kill || f.kind == FaultSpec::Kind::stop ||
         f.kind == FaultSpec::Kind::node) &&
        is_checkpoint_phase(f.phase);
    if (f.kind == FaultSpec::Kind::node && !hosts.empty() &&
        std::find(hosts.begin(), hosts.end(), f.host) == hosts.end())
      throw UsageError("--fault '" + f.text + "': host '" + f.host +
                       "' runs none of this job's ranks, so it can never fire (the hosts: " +
                       hosts.front() + (hosts.size() > 1 ? " ... " + hosts.back() : "") + ", " +
                       std::to_string(hosts.size()) + " in all)");
    if (at_checkpoint && checkpoint_every <= 0)
      throw UsageError("--fault '" + f.text + "': " + f.phase +
                       " needs checkpoints (checkpoint.dir and checkpoint.every)");
    if (at_checkpoint && f.step && *f.step % checkpoint_every != 0)
      throw UsageError(
          "--fault '" + f.text + "': step " + std::to_string(*f.step) +
          " takes no checkpoint (checkpoint.every=" + std::to_string(checkpoint_every) + "), so " +
          f.phase + " can never fire there");
    if (f.rank >= world_size)
      throw UsageError("--fault '" + f.text + "': rank " + std::to_string(f.rank) +
                       " does not exist in a world of " + std::to_string(world_size) +
                       " ranks, so it can never fire");
    if (f.step && *f.step > steps)
      throw UsageError("--fault '" + f.text + "': step " + std::to_string(*f.step) +
                       " is beyond train.steps=" + std::to_string(steps) +
                       ", so it can never fire");
  }
}

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

FaultSpec resolve_random(const FaultSpec& random, int world_size, int64_t steps,
                         int64_t checkpoint_every, const std::vector<std::string>& hosts) {
  uint64_t state = random.seed;
  std::vector<std::string> phases;
  for (const auto& p : kill_phases())
    if (!is_checkpoint_phase(p) || (checkpoint_every > 0 && steps >= checkpoint_every))
      phases.push_back(p);
  // Only a random that may draw a node draws its kind: a plain seed's draws are unchanged.
  const bool node = random.may_draw_node && !hosts.empty() &&
                    (!random.may_draw_kill || splitmix64(state) % 2 == 1);
  FaultSpec kill;
  kill.kind = node ? FaultSpec::Kind::node : FaultSpec::Kind::kill;
  kill.rank = int(splitmix64(state) % uint64_t(world_size));
  kill.phase = phases[splitmix64(state) % phases.size()];
  if (is_checkpoint_phase(kill.phase))
    kill.step =
        checkpoint_every * int64_t(1 + splitmix64(state) % uint64_t(steps / checkpoint_every));
  else
    kill.step = int64_t(1 + splitmix64(state) % uint64_t(steps));
  kill.origin = random.origin;
  if (node) {
    kill.host = hosts[size_t(kill.rank) % hosts.size()];
    kill.rank = -1;
    kill.text =
        "node:host=" + kill.host + ",step=" + std::to_string(*kill.step) + ",phase=" + kill.phase;
    return kill;
  }
  kill.text = "kill:rank=" + std::to_string(kill.rank) + ",step=" + std::to_string(*kill.step) +
              ",phase=" + kill.phase;
  return kill;
}

std::vector<FiredFault> read_fired_faults(const std::string& dir) {
  std::vector<FiredFault> fired;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("fault-rank-", 0) != 0 || entry.path().extension() != ".json") continue;
    try {
      std::ifstream in(entry.path());
      const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      if (!json_depth_problem(text).empty()) continue;
      const nlohmann::json j = nlohmann::json::parse(text);
      FiredFault record{j.at("fault"), j.at("origin"),    j.at("kind"),
                        j.at("phase"), j.at("host"),      j.at("rank"),
                        j.at("step"),  j.at("unix_time"), {}};
      if (j.contains("node_ranks")) record.node_ranks = j["node_ranks"].get<std::vector<int>>();
      fired.push_back(std::move(record));
    } catch (const std::exception&) {
      // A record cut short by the kill itself is no evidence; it is skipped.
    }
  }
  std::sort(fired.begin(), fired.end(),
            [](const FiredFault& a, const FiredFault& b) { return a.unix_time < b.unix_time; });
  return fired;
}

FaultInjector::FaultInjector(std::vector<FaultSpec> faults, int rank, std::string host,
                             std::string record_dir)
    : host_(std::move(host)), record_dir_(std::move(record_dir)), rank_(rank) {
  for (auto& f : faults)
    if ((f.rank == rank && (f.kind == FaultSpec::Kind::slow || f.kind == FaultSpec::Kind::kill ||
                            f.kind == FaultSpec::Kind::hang || f.kind == FaultSpec::Kind::stop)) ||
        (f.kind == FaultSpec::Kind::node && f.host == host_))
      mine_.push_back(std::move(f));
}

namespace {

const char* fired_kind(FaultSpec::Kind kind) {
  switch (kind) {
    case FaultSpec::Kind::kill:
      return "kill";
    case FaultSpec::Kind::stop:
      return "stop";
    case FaultSpec::Kind::node:
      return "node";
    default:
      return "hang";
  }
}

}  // namespace

void FaultInjector::fire(const FaultSpec& fault, int64_t step, const std::string& phase) {
  const double now = unix_seconds();
  nlohmann::json record{
      {"fault", fault.text}, {"origin", fault.origin}, {"kind", fired_kind(fault.kind)},
      {"rank", rank_},       {"host", host_},          {"step", step},
      {"phase", phase},      {"unix_time", now}};
  // A node fault: the first of the node's ranks to get here kills them all, itself last.
  std::vector<NodeProcess> node;
  if (fault.kind == FaultSpec::Kind::node) {
    if (node_processes_) node = node_processes_();
    std::vector<int> ranks = {rank_};
    for (const NodeProcess& process : node)
      if (process.rank != rank_) ranks.push_back(process.rank);
    std::sort(ranks.begin(), ranks.end());
    record["node_ranks"] = ranks;
  }
  const std::string path = record_dir_ + "/fault-rank-" + std::to_string(rank_) + ".json";
  const std::string text = record.dump() + "\n";
  try {
    write_file_atomically(path, text);
  } catch (const std::exception&) {
    // The fault fires all the same; the drill then reports it without this record.
  }
  if (fault.kind == FaultSpec::Kind::node) {
    const pid_t self = ::getpid();
    for (const NodeProcess& process : node)
      if (process.pid > 0 && process.pid != self) ::kill(pid_t(process.pid), SIGKILL);
    std::raise(SIGKILL);
  }
  if (fault.kind == FaultSpec::Kind::kill) {
    std::raise(SIGKILL);
  }
  if (fault.kind == FaultSpec::Kind::stop) {
    // Every thread stops with it, the watchdog's too; SIGCONT lets the step go on.
    std::raise(SIGSTOP);
    return;
  }
  // A hang: this thread never returns; the watchdog (another thread, another rank) must act.
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

void FaultInjector::at(int64_t step, Phase phase) {
  for (const auto& f : mine_) {
    if (f.step && *f.step != step) continue;
    switch (f.kind) {
      case FaultSpec::Kind::slow:
        if (phase == Phase::compute)
          std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(f.ms));
        break;
      case FaultSpec::Kind::kill:
      case FaultSpec::Kind::hang:
      case FaultSpec::Kind::stop:
      case FaultSpec::Kind::node:
        if (f.phase == phase_name(phase)) fire(f, step, f.phase);
        break;
      case FaultSpec::Kind::corrupt:
      case FaultSpec::Kind::random:
        break;
    }
  }
}

void FaultInjector::at_checkpoint(int64_t step, const char* point) {
  for (const auto& f : mine_)
    if ((f.kind == FaultSpec::Kind::kill || f.kind == FaultSpec::Kind::stop ||
         f.kind == FaultSpec::Kind::node) &&
        f.step == step && f.phase == point)
      fire(f, step, point);
}

}  // namespace tp
