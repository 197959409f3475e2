#pragma once
// Where every second of a job's wall time went on every rank (the report's `job` section): each
// rank's timeline as consecutive named segments from its process start, the steady steps split
// into what they produced and what they lost, and goodput = productive time / wall time.
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace tp {

// The segment names of a training run, in the order its timeline runs. Any other name may be
// marked too (an acceptance run's sweep, pairwise or cold restore stage is a category of its own).
inline constexpr const char* kLaunch = "launch";  // process start to the return of MPI_Init
inline constexpr const char* kSetup = "setup";    // outputs, faults, the watchdog, the loader
// Set-up's parts that can grow with the job, each a category of its own.
inline constexpr const char* kSetupBackends = "setup_backends";  // GPU choice, communicators
inline constexpr const char* kSetupHeartbeatCheck = "setup_heartbeat_check";
inline constexpr const char* kSetupTopology = "setup_topology";  // the topology preflight
inline constexpr const char* kSetupModel = "setup_model";        // parameters and memory checks
inline constexpr const char* kSetupClockAlignment = "setup_clock_alignment";
inline constexpr const char* kSetupCheckpointFolder = "setup_checkpoint_folder";  // its preflight
inline constexpr const char* kSetupCollectiveCheck = "setup_collective_check";
inline constexpr const char* kSetupGemmRate = "setup_gemm_rate";
inline constexpr const char* kRestore = "restore";
inline constexpr const char* kDatasetOpen = "dataset_open";
inline constexpr const char* kWarmupSteps = "warmup_steps";  // a loss of its own, never productive
inline constexpr const char* kSteadySteps = "steady_steps";  // split before it is reported
inline constexpr const char* kFinalCheckpointWait = "final_checkpoint_wait";
inline constexpr const char* kTeardown = "teardown";  // gathering the figures
// What the steady steps split into, in this order.
inline constexpr const char* kProductive = "productive";
inline constexpr const char* kDataStall = "data_stall";
inline constexpr const char* kCommExposed = "comm_exposed";
inline constexpr const char* kCheckpointStall = "checkpoint_stall";

// Named durations in seconds, in the order they first ran.
using Segments = std::vector<std::pair<std::string, double>>;

// One rank's timeline: mark(name) gives the time since the previous mark (or since the start) to
// `name`. A name marked again adds up, keeping the place it first ran in.
class JobClock {
 public:
  using Clock = std::function<double()>;  // seconds on any fixed origin

  // `start_s` is on `clock`'s origin; in production it is the process start (since_process_start).
  explicit JobClock(double start_s, Clock clock = steady_now_s);
  // A clock on steady_clock whose start is the process start, so `launch` includes the time the
  // loader and MPI_Init took before main could read a clock.
  static JobClock since_process_start();

  void mark(const std::string& name);
  const Segments& segments() const { return segments_; }
  double elapsed_s() const { return clock_() - start_s_; }

  // What a rank sends to rank 0: {"wall_s": elapsed now, "segments": [{"name", "seconds"}]}.
  // Time since the last mark is in wall_s and no segment, so mark before sending.
  nlohmann::json to_json() const;

  static double steady_now_s();
  // How long ago this process started (/proc/self/stat starttime against /proc/uptime); 0 when
  // either cannot be read or they disagree (a container whose /proc/uptime is its own), so the
  // launch segment then starts at the clock's construction instead.
  static double process_age_s();

 private:
  double start_s_;
  double last_s_;
  Clock clock_;
  Segments segments_;
};

// The process age from the text of /proc/self/stat and /proc/uptime and the clock ticks per
// second; 0 when either text cannot be parsed.
double process_age_from(const std::string& stat, const std::string& uptime, long ticks_per_second);

// Sums over one rank's measured (steady) steps of the StepTiming phases that lose time.
struct StepPhaseSums {
  double data = 0;          // waiting for the batch
  double comm_exposed = 0;  // waiting for communication after compute
  double checkpoint = 0;    // checkpoint stall, already inside each step's time
};

struct SteadySplit {
  double productive = 0;
  double data_stall = 0;
  double comm_exposed = 0;
  double checkpoint_stall = 0;
};

// The steady-steps segment split by its steps' phase sums; the parts add up to `steady_s`. Each
// phase counts once, the checkpoint stall included. When the phases exceed the segment (they are
// timed inside it, so only timer granularity or a timing fault does that) they are scaled down
// together to fill it, keeping their proportions and the accounting exact; productive is then 0.
SteadySplit split_steady(double steady_s, const StepPhaseSums& sums);

// `segments` with the steady-steps segment replaced, in place, by its split (productive,
// data_stall, comm_exposed, checkpoint_stall). Without a steady-steps segment it is unchanged.
Segments with_steady_split(const Segments& segments, const StepPhaseSums& sums);

// One rank's accounted timeline, as job_json takes it.
struct RankTimeline {
  int rank = 0;
  double wall_s = 0;    // process start to when the rank sent its timeline
  Segments categories;  // steady steps already split
};

// A rank's timeline from what its JobClock::to_json sent, with the steady steps split by `sums`.
// Throws nlohmann::json::exception when `sent` is not that shape.
RankTimeline rank_timeline(int rank, const nlohmann::json& sent, const StepPhaseSums& sums);

inline constexpr const char* kNoQueueNote = "not under Slurm: no queue time";

// The parts of a job that are not its training stage: the launch, and accept's other stages
// (app/accept/accept_command.cpp marks them by these names).
inline const std::set<std::string> kNotTraining = {kLaunch, "preflight", "sweep", "pairwise",
                                                   "cold_restore"};

// The report's `job` section:
//   wall_s (mean over ranks), wall_max_s, queue_s (null when absent), queue_note (what the queue
//   time is, or why there is none),
//   categories [{name, seconds (mean over ranks), fraction (of wall_s)}] in timeline order,
//   productive_s, goodput (productive_s / wall_s), train_wall_s (wall_s less kNotTraining) and
//   train_goodput (productive_s / train_wall_s), both null when no training ran, lost [{name,
//   seconds, fraction}] (every category but productive, largest first), accounted_fraction (the
//   ranks' value furthest from 1), ranks [{rank, wall_s, goodput, accounted_fraction (sum of its
//   categories / its wall), categories {name: seconds}}].
// A category a rank lacks counts 0 there. `queue_s` is Slurm's submit to start: it came before the
// processes, so it is beside wall_s, not in it; without it, `queue_note` says why.
nlohmann::json job_json(const std::vector<RankTimeline>& ranks, std::optional<double> queue_s,
                        const std::string& queue_note = kNoQueueNote);

// Both goodputs, each named, and what the job holds that is not training: "goodput: training
// stage 0.91, whole job 0.05 (launch, preflight, sweep and cold_restore are not training)";
// "goodput 0.59" for a job that trained nothing.
std::string goodput_text(const nlohmann::json& job);

// The summary's lines for a `job` section: a header, then one aligned line per category, largest
// first, and one more when the categories differ from a rank's wall time by over 1%.
std::vector<std::string> timeline_lines(const nlohmann::json& job);

}  // namespace tp
