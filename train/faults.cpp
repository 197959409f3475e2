#include "train/faults.h"

#include <chrono>
#include <map>
#include <thread>

#include "common/errors.h"

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

FaultSpec parse_fault(const std::string& text) {
  const size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  if (colon == std::string::npos || colon + 1 == text.size())
    throw UsageError("--fault '" + text + "': expected KIND:key=value,... (see --help)");
  auto fields = parse_fields(text, text.substr(colon + 1));
  FaultSpec spec;
  spec.text = text;
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
  throw UsageError("--fault '" + text + "': unknown fault kind '" + kind + "' (known: slow)");
}

std::vector<FaultSpec> parse_faults(const std::vector<std::string>& texts) {
  std::vector<FaultSpec> faults;
  for (const auto& text : texts) faults.push_back(parse_fault(text));
  return faults;
}

void validate_faults(const std::vector<FaultSpec>& faults, int world_size, int64_t steps) {
  for (const auto& f : faults) {
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

std::string fault_help() {
  return "inject a fault; repeatable. A fault that can never fire is an error.\n"
         "  slow:rank=R,ms=M[,step=S]  rank R spends M more milliseconds in compute on every step\n"
         "                             (or only step S): a straggler the report must flag";
}

FaultInjector::FaultInjector(std::vector<FaultSpec> faults, int rank) {
  for (auto& f : faults)
    if (f.rank == rank) mine_.push_back(std::move(f));
}

void FaultInjector::at(int64_t step, Phase phase) {
  for (const auto& f : mine_) {
    if (f.step && *f.step != step) continue;
    switch (f.kind) {
      case FaultSpec::Kind::slow:
        if (phase == Phase::compute)
          std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(f.ms));
        break;
    }
  }
}

}  // namespace tp
