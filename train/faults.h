#pragma once
// Fault injection. Every fault kind is parsed from one spec syntax, `kind:key=value,...`, and fires
// through one hook, FaultInjector::at(step, phase), which the step loop calls at each phase
// boundary. New kinds (kill, hang, corrupt) add a parser branch and a case in at().
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tp {

enum class Phase { data, compute, comm, optimizer };
const char* phase_name(Phase phase);

struct FaultSpec {
  enum class Kind { slow } kind = Kind::slow;
  std::string text;  // as given, for messages and the report
  int rank = -1;
  std::optional<int64_t> step;  // unset: every step
  double ms = 0.0;
};

// Throws UsageError naming the spec and the offending key or value.
FaultSpec parse_fault(const std::string& text);
std::vector<FaultSpec> parse_faults(const std::vector<std::string>& texts);
// Throws UsageError for a fault that can never fire in this run: a rank outside the world, or a
// step beyond the last one.
void validate_faults(const std::vector<FaultSpec>& faults, int world_size, int64_t steps);

// The text shown under --help for --fault.
std::string fault_help();

class FaultInjector {
 public:
  FaultInjector(std::vector<FaultSpec> faults, int rank);
  // The single hook: called by the step loop on entering each phase of each step.
  void at(int64_t step, Phase phase);
  bool empty() const { return mine_.empty(); }

 private:
  std::vector<FaultSpec> mine_;  // only the faults aimed at this rank
};

}  // namespace tp
