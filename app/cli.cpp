#include "app/cli.h"

#include <fstream>
#include <iomanip>
#include <sstream>

#include "common/digest.h"
#include "common/errors.h"

namespace tp {
namespace {

const char* const kSubcommands = "train, drill, prepare-data, report";

po::options_description registry() {
  // clang-format off
  po::options_description general("General");
  general.add_options()
      ("help,h", "show this help and exit")
      ("version", "print the version and exit")
      ("scenario", po::value<std::string>()->value_name("FILE"),
       "INI file of options ([section] name = value); the command line wins over it")
      ("report", po::value<std::string>()->default_value("trainproof-report.json")->value_name("FILE"),
       "where rank 0 writes the JSON report")
      ("log.level", po::value<std::string>()->default_value("info"),
       "trace, debug, info, warn, error");

  po::options_description model("Model (decides the state; part of the scenario hash)");
  model.add_options()
      ("model.layers", po::value<int64_t>()->default_value(4), "square linear layers")
      ("model.hidden", po::value<int64_t>()->default_value(256), "layer width")
      ("model.params", po::value<int64_t>()->default_value(0),
       "parameter budget; when > 0 the width is derived from it (give this or model.hidden)")
      ("model.seq", po::value<int64_t>()->default_value(64), "tokens per sample")
      ("model.batch", po::value<int64_t>()->default_value(32),
       "GLOBAL batch in samples, split over the ranks")
      ("model.dtype", po::value<std::string>()->default_value("fp32"),
       "GEMM element type: fp32, bf16 or fp16 (16-bit inputs accumulate in fp32; cuda only)");

  po::options_description train("Training");
  train.add_options()
      ("train.steps", po::value<int64_t>()->default_value(50), "steps to run")
      ("train.epochs", po::value<double>()->default_value(0.0),
       "with data.dir: run this many passes over the dataset instead of train.steps (one epoch "
       "reads every sample exactly once)")
      ("train.warmup_steps", po::value<int64_t>()->default_value(5),
       "first steps left out of every statistic")
      ("train.seed", po::value<uint64_t>()->default_value(1234), "seed of init and synthetic data")
      ("train.optimizer", po::value<std::string>()->default_value("sgd-momentum"),
       "sgd-momentum or adam")
      ("train.lr", po::value<double>()->default_value(0.01), "learning rate")
      ("train.momentum", po::value<double>()->default_value(0.9), "sgd-momentum coefficient")
      ("train.adam_beta1", po::value<double>()->default_value(0.9), "adam first-moment decay")
      ("train.adam_beta2", po::value<double>()->default_value(0.999), "adam second-moment decay")
      ("train.adam_eps", po::value<double>()->default_value(1e-8), "adam epsilon")
      ("train.log_every", po::value<int64_t>()->default_value(0),
       "progress line every N steps on rank 0; 0 means about ten per run");

  po::options_description compute("Compute");
  compute.add_options()
      ("compute.backend", po::value<std::string>()->default_value("auto"),
       "cpu (OpenBLAS, one thread per rank), cuda, or auto (cuda when usable, else cpu)");

  po::options_description comm("Communication");
  comm.add_options()
      ("comm.backend", po::value<std::string>()->default_value("auto"),
       "mpi (MPI_Allreduce on host buffers), nccl, or auto (nccl when usable, else mpi)")
      ("comm.bucket_mb", po::value<double>()->default_value(25.0),
       "gradient bucket size in MiB; a bucket is reduced as soon as its layers are done")
      ("comm.overlap", po::value<bool>()->default_value(true),
       "true: non-blocking reductions overlap the remaining backward; false: blocking after it");

  po::options_description checkpoint("Checkpoints");
  checkpoint.add_options()
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
       "training goes on; at most one checkpoint is in flight (needs MPI_THREAD_MULTIPLE)")
      ("checkpoint.every", po::value<int64_t>()->default_value(0),
       "checkpoint after every N-th step (step-N is the state after step N); 0: never")
      ("checkpoint.keep", po::value<int64_t>()->default_value(2),
       "committed checkpoints kept; older ones are deleted only after a newer one is committed")
      ("checkpoint.cold_read", po::value<bool>()->default_value(false),
       "drop the checkpoint files from the page cache before a restore reads them, so "
       "restore_gbps measures storage, not memory");

  po::options_description watchdog("Watchdog");
  watchdog.add_options()
      ("watchdog.timeout_s", po::value<double>()->default_value(0.0),
       "a rank whose heartbeat has not moved for this long aborts the job (exit 3), naming the "
       "ranks that did not arrive in abort.json; NCCL communicators are aborted "
       "(ncclCommAbort). 0: auto, 25 times the slowest warm-up step and at least 30 s (600 s "
       "until the warm-up is done); checkpoints and set-up get 10 times the timeout")
      ("watchdog.dir", po::value<std::string>()->default_value(""),
       "folder all ranks can write for per-rank heartbeats and abort.json; "
       "empty: trainproof-heartbeats/ beside the report");

  po::options_description faults("Faults");
  faults.add_options()
      ("fault", po::value<std::vector<std::string>>()->value_name("SPEC"), fault_help().c_str());

  po::options_description data("Data (trainproof prepare-data, and train with data.dir)");
  data.add_options()
      ("data.dir", po::value<std::string>()->default_value(""),
       "folder of a dataset written by prepare-data; empty: synthetic samples made in memory")
      ("data.format", po::value<std::string>()->default_value("raw"),
       "raw: binary shards and per-sample index files, read with pread; hdf5: chunked uint8 "
       "datasets, read with pread through their chunk addresses")
      ("data.files", po::value<int>()->default_value(4), "shards the samples are spread over")
      ("data.samples", po::value<int64_t>()->default_value(1024), "samples in the dataset")
      ("data.sample_bytes", po::value<int64_t>()->default_value(65536), "bytes per sample")
      ("data.spread", po::value<double>()->default_value(0.0),
       "sample lengths vary uniformly within sample_bytes * (1 +- spread), 0 <= spread < 1")
      ("data.readers", po::value<int>()->default_value(2), "reader threads per rank; give each rank readers + 1 CPUs, or the report warns that reads "
       "and stall measure CPU")
      ("data.prefetch", po::value<int>()->default_value(2), "batches read ahead of the step; the loader holds (prefetch + 1) batches of buffers")
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

  po::options_description drill("Drill (trainproof drill)");
  drill.add_options()
      ("launcher", po::value<std::string>()->default_value(""),
       "the command that starts the ranks, before the trainproof binary: \"mpirun -np 4\", or "
       "inside a Slurm allocation \"srun --mpi=pmix\"")
      ("drill.max_restarts", po::value<int>()->default_value(3),
       "relaunches with --resume auto after failures before the drill gives up")
      ("drill.reference_digest", po::value<std::string>()->default_value(""),
       "the final digest of a fault-free run of the same scenario; empty: run the reference first")
      ("drill.external_kill", po::value<bool>()->default_value(false),
       "the drill SIGKILLs one rank's process from outside at a step drawn from drill.seed (local "
       "host only; under Slurm, scancel --signal=KILL the step instead)")
      ("drill.seed", po::value<uint64_t>()->default_value(0),
       "seed of the drill's own draws (external kill); 0: from the clock. Printed for replay")
      ("drill.run_timeout_s", po::value<double>()->default_value(1800.0),
       "a launch still running after this long is killed (the watchdog should act first)");

  po::options_description test("Testing hooks (for the test suite; never in a real run)");
  test.add_options()
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
      ("test.read_delay_ms", po::value<double>()->default_value(0.0),
       "each dataset sample read sleeps this long (the negative control of the data stall)")
      ("test.mpi_error_rank", po::value<int>()->default_value(-1),
       "make this rank issue an invalid MPI call before training (exit code 3 path)");
  // clang-format on

  po::options_description all;
  all.add(general)
      .add(model)
      .add(train)
      .add(compute)
      .add(comm)
      .add(checkpoint)
      .add(watchdog)
      .add(faults)
      .add(data)
      .add(drill)
      .add(test);
  return all;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("--scenario: cannot open '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

int64_t positive(const po::variables_map& vm, const char* name) {
  const int64_t value = vm[name].as<int64_t>();
  if (value <= 0)
    throw UsageError(std::string(name) + " must be positive, got " + std::to_string(value));
  return value;
}

int64_t positive_int(const po::variables_map& vm, const char* name) {
  const int value = vm[name].as<int>();
  if (value <= 0)
    throw UsageError(std::string(name) + " must be positive, got " + std::to_string(value));
  return value;
}

int fits_int(int64_t value, const char* name) {
  if (value > int64_t(1) << 30)
    throw UsageError(std::string(name) + "=" + std::to_string(value) + " is too large");
  return static_cast<int>(value);
}

double in_range(const po::variables_map& vm, const char* name, double low, double high,
                bool low_open) {
  const double value = vm[name].as<double>();
  if (!(value >= low && value <= high) || (low_open && value == low))
    throw UsageError(std::string(name) + "=" + std::to_string(value) + " is out of range " +
                     (low_open ? "(" : "[") + std::to_string(low) + ", " + std::to_string(high) +
                     "]");
  return value;
}

std::string one_of(const po::variables_map& vm, const char* name,
                   std::initializer_list<const char*> allowed) {
  const std::string value = vm[name].as<std::string>();
  std::string list;
  for (const char* a : allowed) {
    if (value == a) return value;
    list += list.empty() ? a : std::string(", ") + a;
  }
  throw UsageError(std::string(name) + "='" + value + "' is not one of: " + list);
}

}  // namespace

Invocation parse_invocation(int argc, const char* const argv[]) {
  Invocation inv;
  for (int i = 0; i < argc; ++i) inv.argv.emplace_back(argv[i]);
  int first = 1;
  if (argc > 1 && argv[1][0] != '-') {
    inv.subcommand = argv[1];
    if (inv.subcommand != "train" && inv.subcommand != "report" && inv.subcommand != "drill" &&
        inv.subcommand != "prepare-data")
      throw UsageError("unknown subcommand '" + inv.subcommand + "' (known: " + kSubcommands + ")");
    first = 2;
  }

  const po::options_description options = registry();
  po::options_description cli;
  cli.add(options).add_options()("operand", po::value<std::vector<std::string>>());
  po::positional_options_description operands;
  operands.add("operand", -1);
  try {
    po::store(po::command_line_parser(argc - first + 1, argv + first - 1)
                  .options(cli)
                  .positional(operands)
                  .run(),
              inv.options);
  } catch (const po::error& e) {
    throw UsageError(std::string("command line: ") + e.what());
  }
  if (inv.options.count("operand"))
    inv.positional = inv.options["operand"].as<std::vector<std::string>>();
  inv.help = inv.options.count("help") > 0;
  inv.version = inv.options.count("version") > 0;
  if (inv.help || inv.version) return inv;
  if (inv.subcommand.empty())
    throw UsageError(std::string("no subcommand given (known: ") + kSubcommands +
                     "); see trainproof --help");
  if (inv.subcommand != "report" && !inv.positional.empty())
    throw UsageError(inv.subcommand + " takes no operands, got '" + inv.positional.front() + "'");

  if (inv.options.count("scenario")) {
    inv.scenario_path = inv.options["scenario"].as<std::string>();
    inv.scenario_text = read_file(inv.scenario_path);
    std::istringstream text(inv.scenario_text);
    try {
      // store() keeps values already present, so the command line (stored first) wins.
      po::store(po::parse_config_file(text, options, /*allow_unregistered=*/false), inv.options);
    } catch (const po::error& e) {
      throw UsageError("scenario file '" + inv.scenario_path + "': " + e.what());
    }
  }
  po::notify(inv.options);
  return inv;
}

std::string help_text(const std::string& subcommand) {
  std::ostringstream out;
  if (subcommand.empty()) {
    out << "trainproof: prove that a cluster can train.\n\n"
           "usage: trainproof SUBCOMMAND [options]\n"
           "  train    run synthetic data-parallel training steps with real collectives, time\n"
           "           data, compute and communication on every rank, and write a JSON report\n"
           "  drill    recovery drill: launch train with faults, relaunch with --resume auto "
           "after\n"
           "           each failure, and prove the final state bit-identical to a reference run\n"
           "  prepare-data  write a synthetic dataset to data.dir (MPI: every rank writes its\n"
           "           share of the shards), for train to read with data.dir\n"
           "  report   print the summary of an existing JSON report: trainproof report FILE\n\n"
           "Launch train with mpirun or srun, one rank per device or core set. Every option can\n"
           "also be set in a scenario file: [train] steps = 100 is --train.steps=100.\n"
           "Exit codes: 0 PASS or WARN, 1 FAIL, 2 bad usage or input, 3 runtime error.\n";
  } else if (subcommand == "train") {
    out << "usage: mpirun -np N trainproof train [--scenario FILE] [options]\n"
           "Runs train.steps steps; ranks share model.batch. Writes --report on rank 0.\n";
  } else if (subcommand == "prepare-data") {
    out << "usage: mpirun -np N trainproof prepare-data --data.dir=DIR [--scenario FILE] "
           "[options]\n"
           "Writes data.samples samples (content from train.seed) in data.files shards of\n"
           "data.format, with a checksum per sample and data.dir/index.json. Running it again\n"
           "with the same parameters does nothing; with others it is an error unless --force.\n";
  } else if (subcommand == "drill") {
    out << "usage: trainproof drill --launcher \"mpirun -np N\" [--scenario FILE] [options]\n"
           "Not an MPI rank: runs the launcher itself. A reference run, then the run with the\n"
           "--fault specs, relaunched with --resume auto after each failure (each fault fires\n"
           "once), then the final digest compared with the reference. Every training option is\n"
           "forwarded to each run. Needs checkpoint.dir and checkpoint.every; the runs use\n"
           "checkpoint.dir/drill-<time>-<pid>/. Writes --report (the final run's report with a\n"
           "drill section) and prints a drill summary. See docs/drills.md.\n";
  } else {
    out << "usage: trainproof report FILE\n"
           "Prints the summary of a report and exits with its verdict's code (0 PASS/WARN, 1 "
           "FAIL).\n"
           "All options are accepted, so a whole scenario file can be passed.\n";
  }
  out << '\n' << registry();
  return out.str();
}

TrainConfig train_config_from(const po::variables_map& vm) {
  TrainConfig c;
  c.model.layers = fits_int(positive(vm, "model.layers"), "model.layers");
  c.model.seq = fits_int(positive(vm, "model.seq"), "model.seq");
  c.model.global_batch = positive(vm, "model.batch");
  const int64_t params = vm["model.params"].as<int64_t>();
  if (params < 0) throw UsageError("model.params must be positive, got " + std::to_string(params));
  if (params > 0) {
    if (!vm["model.hidden"].defaulted())
      throw UsageError("give model.params or model.hidden, not both");
    const int hidden = hidden_for_parameters(params, c.model.layers);
    if (hidden < 1)
      throw UsageError("model.params=" + std::to_string(params) +
                       " is too small for model.layers=" + std::to_string(c.model.layers));
    c.model.hidden = hidden;
  } else {
    c.model.hidden = fits_int(positive(vm, "model.hidden"), "model.hidden");
  }
  c.dtype = one_of(vm, "model.dtype", {"fp32", "bf16", "fp16"});

  c.steps = positive(vm, "train.steps");
  c.warmup_steps = vm["train.warmup_steps"].as<int64_t>();
  if (c.warmup_steps < 0 || c.warmup_steps >= c.steps)
    throw UsageError("train.warmup_steps=" + std::to_string(c.warmup_steps) +
                     " must be >= 0 and less than train.steps=" + std::to_string(c.steps));
  c.seed = vm["train.seed"].as<uint64_t>();
  const std::string optimizer = one_of(vm, "train.optimizer", {"sgd-momentum", "adam"});
  c.optimizer.kind = optimizer == "adam" ? OptimizerKind::adam : OptimizerKind::sgd_momentum;
  c.optimizer.lr = float(in_range(vm, "train.lr", 0.0, 1e3, true));
  c.optimizer.momentum = float(in_range(vm, "train.momentum", 0.0, 1.0, false));
  c.optimizer.beta1 = float(in_range(vm, "train.adam_beta1", 0.0, 1.0, false));
  c.optimizer.beta2 = float(in_range(vm, "train.adam_beta2", 0.0, 1.0, false));
  c.optimizer.eps = float(in_range(vm, "train.adam_eps", 0.0, 1.0, true));
  c.log_every = vm["train.log_every"].as<int64_t>();
  if (c.log_every < 0) throw UsageError("train.log_every must be >= 0");

  c.compute_backend = one_of(vm, "compute.backend", {"auto", "cpu", "cuda"});
  c.comm_backend = one_of(vm, "comm.backend", {"auto", "mpi", "nccl"});
  c.bucket_mb = in_range(vm, "comm.bucket_mb", 0.0, 1e6, true);
  c.overlap = vm["comm.overlap"].as<bool>();
  c.watchdog_timeout_s = in_range(vm, "watchdog.timeout_s", 0.0, 1e7, false);
  c.watchdog_dir = vm["watchdog.dir"].as<std::string>();
  c.resume = one_of(vm, "resume", {"none", "auto", "require"});
  c.checkpoint_dir = vm["checkpoint.dir"].as<std::string>();
  c.checkpoint_every = vm["checkpoint.every"].as<int64_t>();
  if (c.checkpoint_every < 0)
    throw UsageError("checkpoint.every must be >= 0, got " + std::to_string(c.checkpoint_every));
  c.checkpoint_keep = fits_int(positive(vm, "checkpoint.keep"), "checkpoint.keep");
  c.checkpoint_cold_read = vm["checkpoint.cold_read"].as<bool>();
  c.checkpoint_layout = one_of(vm, "checkpoint.layout", {"file-per-rank", "shared-file"});
  c.checkpoint_shard_optimizer = vm["checkpoint.shard_optimizer"].as<bool>();
  c.checkpoint_async = vm["checkpoint.async"].as<bool>();
  if (c.checkpoint_dir.empty() && (c.checkpoint_every > 0 || c.resume != "none"))
    throw UsageError(std::string(c.checkpoint_every > 0 ? "checkpoint.every" : "--resume ") +
                     (c.checkpoint_every > 0 ? "" : c.resume) + " needs checkpoint.dir");
  if (vm.count("fault")) c.faults = parse_faults(vm["fault"].as<std::vector<std::string>>());

  c.test.perturb_state_rank = vm["test.perturb_state_rank"].as<int>();
  c.test.corrupt_collective_rank = vm["test.corrupt_collective_rank"].as<int>();
  c.test.clock_offset_rank = vm["test.clock_offset_rank"].as<int>();
  c.test.clock_offset_s = vm["test.clock_offset_s"].as<double>();
  c.test.skip_clock_alignment = vm["test.skip_clock_alignment"].as<bool>();
  c.test.split_hosts = vm["test.split_hosts"].as<int>();
  c.test.mpi_error_rank = vm["test.mpi_error_rank"].as<int>();
  c.test.read_delay_ms = vm["test.read_delay_ms"].as<double>();
  c.test.unshared_checkpoint_rank = vm["test.unshared_checkpoint_rank"].as<int>();
  DataConfig& d = c.data;
  d.dir = vm["data.dir"].as<std::string>();
  d.format = one_of(vm, "data.format", {"raw", "hdf5"});
  d.files = int(positive_int(vm, "data.files"));
  d.samples = positive(vm, "data.samples");
  d.sample_bytes = positive(vm, "data.sample_bytes");
  d.spread = in_range(vm, "data.spread", 0.0, 0.99, false);
  d.readers = int(positive_int(vm, "data.readers"));
  d.prefetch = vm["data.prefetch"].as<int>();
  if (d.prefetch < 0 || d.prefetch > 1024)
    throw UsageError("data.prefetch must be in [0, 1024], got " + std::to_string(d.prefetch));
  d.verify = vm["data.verify"].as<bool>();
  d.cache = one_of(vm, "data.cache", {"keep", "drop"});
  d.direct = vm["data.direct"].as<bool>();
  d.rank_shift = vm["data.rank_shift"].as<int>();
  if (d.rank_shift < -1)
    throw UsageError("data.rank_shift must be -1 (off) or >= 0, got " +
                     std::to_string(d.rank_shift));
  d.force = vm["force"].as<bool>();
  if (d.files > d.samples)
    throw UsageError("data.files=" + std::to_string(d.files) +
                     " is more than data.samples=" + std::to_string(d.samples));
  for (const char* name :
       {"data.format", "data.files", "data.samples", "data.sample_bytes", "data.spread"})
    if (!vm[name].defaulted()) d.given.push_back(name);
  c.epochs = vm["train.epochs"].as<double>();
  if (c.epochs < 0) throw UsageError("train.epochs must be >= 0, got " + std::to_string(c.epochs));
  if (c.epochs > 0 && d.dir.empty()) throw UsageError("train.epochs needs data.dir");
  c.test.skip_restore = one_of(vm, "test.skip_restore", {"", "moment1"});
  if (c.test.split_hosts < 0) throw UsageError("test.split_hosts must be >= 0");
  return c;
}

nlohmann::json effective_options(const po::variables_map& vm) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, entry] : vm) {
    if (name == "operand") continue;
    const boost::any& v = entry.value();
    if (auto p = boost::any_cast<int64_t>(&v))
      out[name] = *p;
    else if (auto p = boost::any_cast<uint64_t>(&v))
      out[name] = *p;
    else if (auto p = boost::any_cast<int>(&v))
      out[name] = *p;
    else if (auto p = boost::any_cast<double>(&v))
      out[name] = *p;
    else if (auto p = boost::any_cast<bool>(&v))
      out[name] = *p;
    else if (auto p = boost::any_cast<std::string>(&v))
      out[name] = *p;
    else if (auto p = boost::any_cast<std::vector<std::string>>(&v))
      out[name] = *p;
    else
      out[name] = nullptr;
  }
  return out;
}

}  // namespace tp
