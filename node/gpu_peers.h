#pragma once
// Judges one figure of every GPU of a job against its peers (docs/node-check.md, "GPU against
// its peers"): a GEMM burn's TFLOP/s, device-memory bandwidth, host-to-device and device-to-host
// copy bandwidth, each higher-is-better. A GPU is a suspect when it falls below a fraction of the
// best GPU of its node, or of the job's median GPU, by more than the healthy GPUs' own spread; and
// a failure below a lower fraction, or below the host file's absolute floor whatever the spread.
// Suspects are measured again before they count, as the pairwise pass confirms a slow link.
#include <string>
#include <vector>

namespace tp {

struct GpuFigure {
  std::string host;
  int gpu = 0;
  std::string uuid;
  double value = 0;  // higher is better
};

struct PeerRules {
  double warn_fraction = 0.9;  // below it, by more than the noise: WARN
  double fail_fraction = 0.8;  // below it, by more than the noise: FAIL
  double floor = 0;            // below it: FAIL whatever the noise; 0: none
};

struct PeerFlag {
  size_t index = 0;            // into the figures
  std::string status;          // "warn" or "fail"
  double ratio = 0;            // value over the reference it fell below
  double reference = 0;        // that reference's value
  std::string reference_name;  // "the best GPU of its node" or "the job's median GPU"
  std::string reason;
};

struct PeerJudgement {
  double median = 0;
  double noise = 0;  // the relative median absolute deviation of the figures
  std::vector<PeerFlag> flags;
};

// O(n log n) in the figures (one sort for the median, one pass per node); `what` names the figure
// in reasons ("GEMM 612 TFLOP/s").
PeerJudgement judge_gpu_peers(const std::vector<GpuFigure>& figures, const PeerRules& rules,
                              const std::string& what, const std::string& unit);

}  // namespace tp
