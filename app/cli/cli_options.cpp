#include "app/cli/cli_options.h"

#include "app/cli/gate_options.h"
#include "app/cli/general_options.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tp {
namespace {

namespace po = boost::program_options;

// Boost cuts the first column at line_length - min_description_length: at its 80 and 40, the
// longest names (--gate.min_ckpt_write_gbps_per_node arg (=0)) broke mid-word.
constexpr unsigned kHelpLineLength = 100;
constexpr unsigned kHelpDescriptionLength = 45;

}  // namespace

po::options_description option_group(const std::string& caption) {
  return po::options_description(caption, kHelpLineLength, kHelpDescriptionLength);
}

namespace {

po::options_description model_options() {
  po::options_description group =
      option_group("Model (decides the state; part of the scenario hash)");
  // clang-format off
  group.add_options()
      ("model.layers", po::value<int64_t>()->default_value(4), "square linear layers")
      ("model.hidden", po::value<int64_t>()->default_value(256), "layer width")
      ("model.params", po::value<int64_t>()->default_value(0),
       "parameter budget; when > 0 the width is derived from it (give this or model.hidden)")
      ("model.seq", po::value<int64_t>()->default_value(64), "tokens per sample")
      ("model.batch", po::value<int64_t>()->default_value(32),
       "GLOBAL batch in samples, split over the ranks: the final digest is the same at any "
       "world size")
      ("model.batch_per_rank", po::value<int64_t>()->default_value(0),
       "> 0: samples per rank and step instead of model.batch, so a scenario asks the same of "
       "each GPU at any size (global batch = this x ranks; the digest is the same only at the "
       "same world size). Excludes model.batch; the command line's choice replaces the "
       "scenario's")
      ("model.dtype", po::value<std::string>()->default_value("float32"),
       "GEMM element type: float32, bfloat16 or float16 (also spelled fp32, float, bf16, fp16, "
       "half; 16-bit inputs accumulate in float32; cuda only)");
  // clang-format on
  return group;
}

po::options_description train_options() {
  po::options_description group = option_group("Training");
  // clang-format off
  group.add_options()
      ("train.steps", po::value<int64_t>()->default_value(50), "steps to run")
      ("train.epochs", po::value<double>()->default_value(0.0),
       "with data.dir: run this many passes over the dataset instead of train.steps (one epoch "
       "reads every sample exactly once)")
      ("train.warmup_steps", po::value<int64_t>()->default_value(5),
       "first steps left out of every statistic")
      ("train.seed", po::value<int64_t>()->default_value(1234),
       "seed of init and synthetic data, >= 0")
      ("train.optimizer", po::value<std::string>()->default_value("sgd-momentum"),
       "sgd-momentum or adam")
      ("train.lr", po::value<double>()->default_value(0.01), "learning rate")
      ("train.momentum", po::value<double>()->default_value(0.9), "sgd-momentum coefficient")
      ("train.adam_beta1", po::value<double>()->default_value(0.9), "adam first-moment decay")
      ("train.adam_beta2", po::value<double>()->default_value(0.999), "adam second-moment decay")
      ("train.adam_eps", po::value<double>()->default_value(1e-8), "adam epsilon")
      ("train.log_every", po::value<int64_t>()->default_value(0),
       "progress line every N steps on rank 0; 0 means about ten per run");
  // clang-format on
  return group;
}

po::options_description compute_options() {
  po::options_description group = option_group("Compute");
  // clang-format off
  group.add_options()
      ("compute.backend", po::value<std::string>()->default_value("auto"),
       "cpu (OpenBLAS, one thread per rank), cuda, or auto (cuda when every rank has a usable "
       "GPU, cpu when none has; some with and some without is exit 3 naming the hosts)");
  // clang-format on
  return group;
}

po::options_description comm_options() {
  po::options_description group = option_group("Communication");
  // clang-format off
  group.add_options()
      ("comm.backend", po::value<std::string>()->default_value("auto"),
       "mpi (MPI_Allreduce on host buffers), nccl, or auto (nccl when usable, else mpi)")
      ("comm.bucket_mb", po::value<double>()->default_value(25.0),
       "gradient bucket size in MiB; a bucket is reduced as soon as its layers are done")
      ("comm.overlap", po::value<bool>()->default_value(true),
       "true: each bucket's reduction starts as its layers finish and overlaps the remaining "
       "backward; false: every bucket starts after the backward, and the step waits once")
      ("comm.ranks_per_root", po::value<int>()->default_value(128),
       "NCCL set-up: one root (ncclUniqueId) per this many ranks via ncclCommInitRankScalable "
       "(NCCL 2.23+; older: one root, as the report says)");
  // clang-format on
  return group;
}

po::options_description checkpoint_options() {
  po::options_description group = option_group("Checkpoints");
  // clang-format off
  group.add_options()
      ("resume", po::value<std::string>()->default_value("none"),
       "none: start fresh; auto: restore the newest valid checkpoint in checkpoint.dir, or start "
       "fresh (loudly) when there is none; require: like auto, but no valid checkpoint is an error")
      ("checkpoint.dir", po::value<std::string>()->default_value(""),
       "folder of step-NNNNNNNN/ checkpoints (HDF5 files and MANIFEST.json); empty: no checkpoints")
      ("checkpoint.layout", po::value<std::string>()->default_value("file-per-rank"),
       "file-per-rank: every rank writes its own HDF5 file; shared-file: one HDF5 file written "
       "collectively through MPI-IO, each rank writing its slice as a hyperslab")
      ("checkpoint.shard_optimizer", po::value<bool>()->default_value(false),
       "file-per-rank: each rank writes only its slice of the parameters and optimizer state "
       "(ZeRO-1 style, no duplicate bytes), and a restore needs every rank's file; false: every "
       "rank writes the whole replica. The shared file is always written in slices")
      ("checkpoint.async", po::value<bool>()->default_value(false),
       "snapshot the state into host memory and write and commit it on a background thread while "
       "training goes on; at most one checkpoint is in flight (needs MPI_THREAD_MULTIPLE). The "
       "run refuses to start when the checkpoint buffers (docs/checkpoint.md, \"Memory\") do "
       "not fit in host memory beside the model")
      ("checkpoint.every", po::value<int64_t>()->default_value(0),
       "checkpoint after every N-th step (step-N is the state after step N); 0: never")
      ("checkpoint.keep", po::value<int64_t>()->default_value(2),
       "committed checkpoints kept; older ones are deleted only after a newer one is committed")
      ("checkpoint.cold_read", po::value<bool>()->default_value(false),
       "drop the checkpoint files from the page cache before a restore reads them, so "
       "restore_gbps measures storage, not memory")
      ("checkpoint.overwrite", po::value<bool>()->default_value(false),
       "true: checkpoints of another scenario (another scenario hash) in checkpoint.dir are "
       "deleted at start; false: --resume none into such a folder is an error naming both hashes")
      ("checkpoint.allow_resize", po::value<std::string>()->default_value("auto"),
       "a checkpoint written by another number of ranks restores at this run's size (each rank "
       "reads the files or slabs that cover its share, all verified; the global batch stays the "
       "checkpoint's, so the training is the same): true, false, or auto (true with --resume "
       "auto, false with --resume require); false: another world size is an error (exit 2)")
      ("checkpoint.lock_wait_s", po::value<double>()->default_value(60.0),
       "one job at a time writes a checkpoint folder (a lock file in it, held for the run): a "
       "second job waits this long for the lock, then stops (exit 2) naming the holder's host and "
       "pid. The wait covers a requeued job that briefly overlaps the one it replaces");
  // clang-format on
  return group;
}

po::options_description watchdog_options() {
  po::options_description group = option_group("Watchdog");
  // clang-format off
  group.add_options()
      ("watchdog.timeout_s", po::value<double>()->default_value(0.0),
       "a rank whose heartbeat has not moved for this long aborts the job (exit 3), naming the "
       "ranks that did not arrive in abort.json. 0: auto, 25 times the slowest warm-up step and "
       "at least 30 s (600 s until the warm-up is done); checkpoints and set-up get 10 times "
       "the timeout. An NCCL wait aborts its communicator (ncclCommAbort) 0.8 times it after "
       "the rank's last progress (during set-up, 10 times that), naming the missing ranks first")
      ("watchdog.dir", po::value<std::string>()->default_value(""),
       "folder all ranks can read and write for the heartbeats (one file per node) and "
       "abort.json; empty: trainproof-heartbeats/ beside the report")
      ("watchdog.abort_grace_s", po::value<double>()->default_value(30.0),
       "how long an ncclCommAbort may take (it can hang) before the rank exits with 3, abort.json "
       "written first")
      ("watchdog.publish_s", po::value<double>()->default_value(1.0),
       "each rank beats into its node's memory; a node's heartbeat file in watchdog.dir is "
       "rewritten, with all its ranks, at most this often (more often only where the watchdog's "
       "timeout is under 30 s): one small write per node per interval on the shared storage, whatever "
       "the ranks per node. trainproof drill uses 0.05 for drill.external_kill, to see each "
       "step begin");
  // clang-format on
  return group;
}

po::options_description fault_options() {
  po::options_description group = option_group("Faults");
  // clang-format off
  group.add_options()
      ("fault", po::value<std::vector<std::string>>()->value_name("SPEC"),
       "inject a fault, repeatable; SPECs below");
  // clang-format on
  return group;
}

po::options_description data_options() {
  po::options_description group =
      option_group("Data (trainproof prepare-data, and train with data.dir)");
  // clang-format off
  group.add_options()
      ("data.dir", po::value<std::string>()->default_value(""),
       "folder of a dataset written by prepare-data; empty: synthetic samples made in memory")
      ("data.format", po::value<std::string>()->default_value("raw"),
       "raw: binary shards and per-sample index files, read with pread; hdf5: chunked uint8 "
       "datasets, read with pread through their chunk addresses")
      ("data.files", po::value<int>()->default_value(4),
       "shards the samples are spread over, 1 to 100000")
      ("data.samples", po::value<int64_t>()->default_value(1024),
       "samples in the dataset, data.files to 4294967296 (2^32; each rank's loader keeps 32 bytes "
       "of index and order per sample)")
      ("data.sample_bytes", po::value<int64_t>()->default_value(65536),
       "bytes per sample, 1 to 1073741824 (1 GiB)")
      ("data.spread", po::value<double>()->default_value(0.0),
       "sample lengths vary uniformly within sample_bytes * (1 +- spread), 0 <= spread < 1")
      ("data.readers", po::value<int>()->default_value(2),
       "reader threads per rank, 1 to 1024; give each rank readers + 1 CPUs, or the report warns that reads "
       "and stall measure CPU")
      ("data.prefetch", po::value<int>()->default_value(2),
       "batches read ahead of the step, 0 to 1024; the loader holds (prefetch + 1) batches of "
       "buffers, and refuses to start when they exceed the host's memory")
      ("data.verify", po::value<bool>()->default_value(false),
       "check every sample's checksum; a mismatch is an error naming the file and sample")
      ("data.cache", po::value<std::string>()->default_value("keep"),
       "keep: leave read data in the page cache; drop: posix_fadvise(DONTNEED) after each read")
      ("data.direct", po::value<bool>()->default_value(false),
       "open shards with O_DIRECT (aligned reads), where the filesystem allows it")
      ("data.rank_shift", po::value<int>()->default_value(-1),
       "K >= 0: each rank reads only the shards prepare-data's rank K nodes away wrote (shard f "
       "by rank f mod N), in an order of its own, so no node reads what its own page cache "
       "holds; the digest then depends on the world size. -1: one shuffled order for all ranks")
      ("force", po::bool_switch()->default_value(false),
       "prepare-data: replace a dataset in data.dir that was prepared with other parameters");
  // clang-format on
  return group;
}

po::options_description drill_options() {
  po::options_description group = option_group("Drill (trainproof drill)");
  // clang-format off
  group.add_options()
      ("launcher", po::value<std::string>()->default_value(""),
       "the command that starts the ranks, before the trainproof binary: \"mpirun -np 4\", or "
       "inside a Slurm allocation \"srun --mpi=pmix\". Run by the shell as written; command "
       "line only (a scenario file may not set it)")
      ("drill.max_restarts", po::value<int>()->default_value(3),
       "relaunches with --resume auto after failures before the drill gives up")
      ("drill.reference_digest", po::value<std::string>()->default_value(""),
       "the final digest of a fault-free run of the same scenario; empty: run the reference first")
      ("drill.external_kill", po::value<std::string>()->default_value("false"),
       "false; true or rank: the drill SIGKILLs one rank's process from outside at a step drawn "
       "from drill.seed; node: every rank on that rank's host at once. Processes this host can "
       "signal only (its own, or a test bed sharing its process table); on a real cluster use "
       "--fault node:host=H,step=S")
      ("drill.on_node_loss", po::value<std::string>()->default_value("shrink"),
       "after a lost node: shrink (relaunch on the surviving nodes, fewer ranks), spare (the same "
       "ranks, the lost host excluded: a spare node takes its place) or wait (the same launch "
       "again, until drill.max_restarts). Under srun the drill appends --nodes, --ntasks and "
       "--exclude; another launcher carries {ranks} and {exclude}")
      ("drill.ranks", po::value<int>()->default_value(0),
       "the first launch's rank count, for a launcher that carries {ranks} (\"mpirun -np "
       "{ranks}\"); srun needs none")
      ("drill.seed", po::value<int64_t>()->default_value(0),
       "seed of the drill's own draws (external kill); 0: from the clock. Printed for replay")
      ("drill.run_timeout_s", po::value<double>()->default_value(1800.0),
       "a launch still running after this long is killed (the watchdog should act first)");
  // clang-format on
  return group;
}

po::options_description preflight_options() {
  po::options_description group = option_group("Preflight (train and sweep)");
  // clang-format off
  group.add_options()
      ("preflight.topology", po::value<bool>()->default_value(true),
       "read every node's CPUs, memory, NICs, InfiniBand ports, PCIe links, GPUs and library "
       "versions at start, and flag a node that differs from the majority or has a PCIe link "
       "trained below its width (docs/sweep.md, \"Topology preflight\")");
  // clang-format on
  return group;
}

po::options_description sweep_options() {
  po::options_description group = option_group("Sweep (trainproof sweep; docs/sweep.md)");
  // clang-format off
  group.add_options()
      ("sweep.mode", po::value<std::string>()->default_value("collectives"),
       "collectives: every operation at every size; pairwise: every pair of nodes, one rank per "
       "node, to name a slow node or link")
      ("sweep.ops", po::value<std::string>()->default_value("all"),
       "comma list of allreduce, allgather, reducescatter, broadcast, alltoall, sendrecv, or all")
      ("sweep.min_bytes", po::value<int64_t>()->default_value(1024),
       "smallest buffer in bytes (the whole buffer, as nccl-tests counts it)")
      ("sweep.max_bytes", po::value<int64_t>()->default_value(0),
       "largest buffer in bytes (a rank holds about 6x this in host memory, 4x on nccl); 0: grows "
       "with the ranks, 64 MiB to 32 ranks up to 16 GiB, fit to host memory (docs/sweep.md)")
      ("sweep.factor", po::value<double>()->default_value(2.0),
       "each size is the previous one times this (> 1), and at least one element more; at most "
       "128 sizes from min_bytes to max_bytes")
      ("sweep.dtype", po::value<std::string>()->default_value("float32"),
       "float32 or int32; bfloat16 and float16 on comm.backend=nccl (also spelled fp32, float, "
       "bf16, fp16, half)")
      ("sweep.iters", po::value<int64_t>()->default_value(20),
       "timed iterations per row (and again for the per-iteration p50/p99)")
      ("sweep.warmup", po::value<int64_t>()->default_value(5), "untimed iterations before each row")
      ("sweep.split", po::value<std::string>()->default_value("none"),
       "none (all ranks), node (the ranks of each node at once: intra-node fabric) or rail (the "
       "ranks with the same local rank across nodes: inter-node fabric)")
      ("sweep.pair_bytes", po::value<int64_t>()->default_value(int64_t(64) << 20),
       "pairwise: bytes each transfer of a pair moves")
      ("sweep.pair_iters", po::value<int64_t>()->default_value(5),
       "pairwise: timed transfers per pair and direction")
      ("sweep.pair_ranks", po::value<std::string>()->default_value("rail"),
       "pairwise: rail (every local rank measures its own rail, local rank k of node a with local "
       "rank k of node b: every NIC of a node with one NIC per GPU) or node (the lowest rank of "
       "each node only)")
      ("sweep.confirm_max", po::value<int64_t>()->default_value(64),
       "pairwise: the most suspect trials, worst first; the rest are reported unconfirmed")
      ("sweep.confirm_share", po::value<double>()->default_value(2.0),
       "pairwise: the trials stop after this share of the first pass's time; 0: no trial")
      ("sweep.flag_fraction", po::value<double>()->default_value(0.8),
       "pairwise: a suspect confirmed below this fraction of its control, by more than the "
       "measured noise, is flagged (WARN)")
      ("sweep.fail_fraction", po::value<double>()->default_value(0.5),
       "pairwise: below this fraction, by more than the noise, a flag is a failure (FAIL)")
      ("sweep.fail_floor", po::value<double>()->default_value(0.1),
       "pairwise: below this fraction of its control a confirmed flag is a failure (FAIL) "
       "whatever the noise; a noise above sweep.fail_fraction - sweep.fail_floor is reported as "
       "an unreliable measurement (pairwise_noise, WARN)");
  // clang-format on
  return group;
}

po::options_description health_options() {
  po::options_description group = option_group(
      "Node health (trainproof node-check, and accept's preflight; docs/node-check.md)");
  // clang-format off
  group.add_options()
      ("level", po::value<std::string>()->default_value("quick")->value_name("LEVEL"),
       "quick: the machine against the [inventory] of --gate.file HOSTFILE (its [gate] "
       "thresholds aside): GPUs, NICs and their ports, versions, memory, CPUs and mounts, in a "
       "few seconds (for Slurm's HealthCheckProgram, a prolog or an epilog); node-check adds the "
       "kernel log's XIDs of health.xid_lookback_s. full adds a GEMM burn of health.burn_s on "
       "every GPU at once (on the CPU where there is no GPU driver), watched through NVML: "
       "clock-event reasons and the PCIe link while busy, XID events, counters before and after, "
       "each GPU's GEMM rate, memory copy and host-to-device and device-to-host rates against its "
       "peers, and every GPU pair's peer copy rate (about 90 s at the defaults). In accept, full "
       "burns every node at once in the preflight and also judges each GPU against the job's "
       "median GPU")
      ("health.burn_s", po::value<double>()->default_value(60.0)->value_name("S"),
       "level=full: seconds of GEMM burn, long enough for a GPU to reach its thermal and power "
       "steady state; each copy figure is measured for burn_s/60 s (0.1 to 1)")
      ("health.sample_s", po::value<double>()->default_value(1.0)->value_name("S"),
       "seconds between two reads of every GPU's health while it is loaded (node-check's burn; "
       "accept's stages)");
  // clang-format on
  return group;
}

po::options_description node_options() {
  po::options_description group =
      option_group("Node check (trainproof node-check; docs/node-check.md)");
  // clang-format off
  group.add_options()
      ("health.xid_lookback_s", po::value<double>()->default_value(7200.0)->value_name("S"),
       "XIDs the kernel log holds from this many seconds back are the node's findings");
  // clang-format on
  return group;
}

po::options_description test_options() {
  po::options_description group =
      option_group("Testing hooks (for the test suite; never in a real run)");
  // clang-format off
  group.add_options()
      ("test.perturb_state_rank", po::value<int>()->default_value(-1),
       "flip one parameter bit on this rank before the final digest")
      ("test.corrupt_collective_rank", po::value<int>()->default_value(-1),
       "falsify this rank's result in the collective self-check")
      ("test.clock_offset_rank", po::value<int>()->default_value(-1),
       "skew this rank's raw clock by test.clock_offset_s")
      ("test.clock_offset_s", po::value<double>()->default_value(0.0), "the skew, in seconds")
      ("test.skip_clock_alignment", po::value<bool>()->default_value(false),
       "leave clocks unaligned (the negative control of the alignment)")
      ("test.split_hosts", po::value<int>()->default_value(0),
       "pretend the ranks are spread evenly over this many hosts")
      ("test.skip_restore", po::value<std::string>()->default_value(""),
       "moment1: a restore leaves the momentum zero (the negative control of resume equality)")
      ("test.unshared_checkpoint_rank", po::value<int>()->default_value(-1),
       "this rank's checkpoint preflight sees a folder of its own (the negative control of the "
       "shared-folder check)")
      ("test.host_memory_bytes", po::value<int64_t>()->default_value(0),
       "> 0: the memory check at start takes this as the host's available memory")
      ("test.read_delay_ms", po::value<double>()->default_value(0.0),
       "each dataset sample read sleeps this long (the negative control of the data stall)")
      ("test.hold_collective", po::value<std::string>()->default_value(""),
       "RANK:SEQ[:COMM]: that rank waits, alive, before entering collective SEQ of communicator "
       "COMM (default world) until the job is ended: a hang the watchdog reports as "
       "first_unentered in abort.json")
      ("test.mpi_error_rank", po::value<int>()->default_value(-1),
       "make this rank issue an invalid MPI call before training (exit code 3 path)")
      ("test.sysfs_root", po::value<std::string>()->default_value(""),
       "the topology preflight of test.sysfs_root_rank's node, and node-check, read this tree "
       "instead of /sys")
      ("test.kernel_log", po::value<std::string>()->default_value(""),
       "node-check reads these /dev/kmsg records instead of /dev/kmsg")
      ("test.sysfs_root_rank", po::value<int>()->default_value(-1),
       "the rank (the first of its node) that reads test.sysfs_root")
      ("test.sysfs_root_after", po::value<std::string>()->default_value(""),
       "accept: the same rank reads this tree after the last stage (counters that rose during "
       "the load); default test.sysfs_root")
      ("test.corrupt_sweep_rank", po::value<int>()->default_value(-1),
       "sweep: perturb this world rank's result of every row before it is checked")
      ("test.slow_pair_rank", po::value<int>()->default_value(-1),
       "pairwise: this world rank waits before each transfer as if its link ran at "
       "test.slow_pair_gbps (a fault on one rail, for tests)")
      ("test.slow_pair_gbps", po::value<double>()->default_value(0.05),
       "the link speed test.slow_pair_rank pretends to, in GB/s")
      ("test.linger_rank", po::value<int>()->default_value(-1),
       "this rank waits test.linger_s after its last work before it leaves (the negative control "
       "of leaving together)")
      ("test.linger_s", po::value<double>()->default_value(0.0), "the wait, in seconds")
      ("test.crash_rank", po::value<int>()->default_value(-1),
       "this rank crashes as the subcommand's work starts, as test.crash says (the crash "
       "report's cases)")
      ("test.crash", po::value<std::string>()->default_value("null_call"),
       "null_call (SIGSEGV at 0x0) or uncaught_exception (an exception escapes a thread)");
  // clang-format on
  return group;
}

}  // namespace

const std::vector<OptionGroup>& option_groups() {
  static const std::vector<OptionGroup> groups = {{"general", general_options},
                                                  {"report", report_options},
                                                  {"model", model_options},
                                                  {"train", train_options},
                                                  {"compute", compute_options},
                                                  {"comm", comm_options},
                                                  {"checkpoint", checkpoint_options},
                                                  {"watchdog", watchdog_options},
                                                  {"faults", fault_options},
                                                  {"data", data_options},
                                                  {"drill", drill_options},
                                                  {"preflight", preflight_options},
                                                  {"sweep", sweep_options},
                                                  {"accept", accept_options},
                                                  {"gate", gate_options},
                                                  {"cost", cost_options},
                                                  {"health", health_options},
                                                  {"node", node_options},
                                                  {kTestHooksGroup, test_options}};
  return groups;
}

// Boost reflows a description to its own column width, which breaks any table inside it; this one
// is printed as it stands. Keep it in step with parse_fault (train/faults.cpp) and docs/drills.md.
std::string fault_grammar() {
  return "Fault specs (--fault SPEC):\n"
         "  slow:rank=R,ms=MS[,step=S]    rank R spends MS more milliseconds in compute\n"
         "                                on every step (or only step S): a straggler\n"
         "                                the report must flag\n"
         "  kill:rank=R,step=S[,phase=P]  rank R SIGKILLs itself on entering phase P of\n"
         "                                step S\n"
         "  hang:rank=R,step=S[,phase=P]  rank R stops responding there; the watchdog\n"
         "                                must abort the job and name it\n"
         "                                (watchdog.timeout_s)\n"
         "  stop:rank=R,step=S[,phase=P]  rank R SIGSTOPs itself there, every thread\n"
         "                                frozen; the watchdog must name it alone\n"
         "  corrupt:rank=R,mode=MODE      trainproof drill damages the newest committed\n"
         "                                checkpoint before a relaunch restores it;\n"
         "                                either field may be left out, not both\n"
         "  node:host=H,step=S[,phase=P]  every rank on host H SIGKILLs at once on\n"
         "                                entering phase P of step S: a lost node\n"
         "  random:seed=N[,kinds=K]       one kill at a rank, step and phase drawn from\n"
         "                                seed N; kinds=kill+node may draw a node loss\n"
         "\n"
         "  R     rank >= 0; corrupt: the rank whose file is damaged (default 0; in the\n"
         "        shared-file layout, the shared file)\n"
         "  S     step >= 1; ckpt-* phases: a step that takes a checkpoint\n"
         "  MS    milliseconds > 0\n"
         "  P     data, compute (default), comm, optimizer: on entering that phase\n"
         "        ckpt-write (kill, stop, node): midway through writing its checkpoint\n"
         "        data\n"
         "        ckpt-commit (kill, stop, node): its files durable, its checksum not yet\n"
         "        reported; on rank 0 after the manifest, before the rename\n"
         "  MODE  flip (default): one byte flipped; truncate: cut to half; delete\n"
         "  H     a host of the job, as the report's ranks[].host names it\n"
         "  N     seed >= 0; the same seed draws the same kill, so a failure replays\n"
         "  K     kill (default), node, or kill+node\n"
         "\n"
         "A fault that can never fire (a rank outside the world, a host that runs no\n"
         "rank, a step past train.steps, a checkpoint phase at a step without a\n"
         "checkpoint) is an error. Examples:\n"
         "  --fault slow:rank=1,ms=20\n"
         "  --fault kill:rank=0,step=8,phase=ckpt-commit\n"
         "  --fault hang:rank=1,step=5,phase=comm\n"
         "  --fault stop:rank=2,step=5,phase=comm\n"
         "  --fault corrupt:rank=1,mode=truncate\n"
         "  --fault node:host=node07,step=20,phase=ckpt-write\n"
         "  --fault random:seed=3\n";
}
}  // namespace tp
