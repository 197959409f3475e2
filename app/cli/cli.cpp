#include "app/cli/cli.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <vector>

#include "app/cli/cli_options.h"
#include "app/cli/host_reference.h"
#include "app/cli/option_suggestion.h"
#include "app/cli/option_values.h"
#include "common/dtype_names.h"
#include "common/errors.h"
#include "common/files.h"
#include "data/dataset.h"
#include "data/loader.h"

namespace tp {
namespace {

const char* const kSubcommands = "accept, train, sweep, drill, prepare-data, node-check, report";
// Far beyond any real run, and small enough that epochs x samples stays an exact step count.
constexpr double kMaxEpochs = 1e6;

// Checked before opening: a FIFO would block the open, a directory would read as empty.
std::string read_file(const std::string& option, const std::string& path) {
  if (const std::string what = not_a_regular_file(path); !what.empty())
    throw UsageError(option + ": '" + path + "' " + what);
  std::ifstream in(path);
  if (!in) throw UsageError(option + ": cannot open '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// model.dtype in any common spelling, kept as the GPU plugin and the scenario hash know it (fp32,
// bf16, fp16), so a respelling changes neither.
std::string model_dtype_from(const po::variables_map& vm) {
  const std::string given = vm["model.dtype"].as<std::string>();
  const std::string name = dtype_name(given);
  if (name == "float32") return "fp32";
  if (name == "bfloat16") return "bf16";
  if (name == "float16") return "fp16";
  throw UsageError("model.dtype='" + given +
                   "' is not one of: float32 (fp32, float), bfloat16 (bf16), float16 (fp16, half)");
}

// The shape; the width comes from model.hidden or, when model.params is given, from the budget.
ModelSpec model_from(const po::variables_map& vm) {
  ModelSpec m;
  m.layers = fits_int(positive(vm, "model.layers"), "model.layers");
  m.seq = fits_int(positive(vm, "model.seq"), "model.seq");
  if (vm["model.batch_per_rank"].as<int64_t>() == 0) m.global_batch = positive(vm, "model.batch");
  const int64_t params = vm["model.params"].as<int64_t>();
  if (params < 0) throw UsageError("model.params must be positive, got " + std::to_string(params));
  if (params > 0) {
    if (!vm["model.hidden"].defaulted())
      throw UsageError("give model.params or model.hidden, not both");
    const int hidden = hidden_for_parameters(params, m.layers);
    if (hidden < 1)
      throw UsageError("model.params=" + std::to_string(params) +
                       " is too small for model.layers=" + std::to_string(m.layers));
    m.hidden = hidden;
  } else {
    m.hidden = fits_int(positive(vm, "model.hidden"), "model.hidden");
  }
  return m;
}

// Largest per-rank batch: beyond it the global batch of a million ranks could overflow.
constexpr int64_t kMaxBatchPerRank = int64_t(1) << 30;

int64_t batch_per_rank_from(const po::variables_map& vm) {
  const int64_t per_rank =
      bounded<int64_t>(vm, "model.batch_per_rank", 0, kMaxBatchPerRank, "0 takes model.batch");
  // Only when both are in one place: settle_batch_setting lets the command line's replace a
  // scenario's.
  if (per_rank > 0 && !vm["model.batch"].defaulted())
    throw UsageError("model.batch=" + std::to_string(vm["model.batch"].as<int64_t>()) +
                     " and model.batch_per_rank=" + std::to_string(per_rank) +
                     " exclude each other: give the global batch or the per-rank one");
  return per_rank;
}

void read_run_length(const po::variables_map& vm, TrainConfig& c) {
  c.steps = positive(vm, "train.steps");
  c.warmup_steps = vm["train.warmup_steps"].as<int64_t>();
  if (c.warmup_steps < 0 || c.warmup_steps >= c.steps)
    throw UsageError("train.warmup_steps=" + std::to_string(c.warmup_steps) +
                     " must be >= 0 and less than train.steps=" + std::to_string(c.steps));
  c.seed = uint64_t(vm["train.seed"].as<int64_t>());  // >= 0, checked when parsed
}

OptimizerConfig optimizer_from(const po::variables_map& vm) {
  OptimizerConfig o;
  const std::string kind = one_of(vm, "train.optimizer", {"sgd-momentum", "adam"});
  o.kind = kind == "adam" ? OptimizerKind::adam : OptimizerKind::sgd_momentum;
  o.lr = float(in_range(vm, "train.lr", 0.0, 1e3, true));
  o.momentum = float(in_range(vm, "train.momentum", 0.0, 1.0, false));
  o.beta1 = float(in_range(vm, "train.adam_beta1", 0.0, 1.0, false));
  o.beta2 = float(in_range(vm, "train.adam_beta2", 0.0, 1.0, false));
  o.eps = float(in_range(vm, "train.adam_eps", 0.0, 1.0, true));
  return o;
}

// Compute and communication backends, and the watchdog that guards them.
void read_backends(const po::variables_map& vm, TrainConfig& c) {
  c.compute_backend = one_of(vm, "compute.backend", {"auto", "cpu", "cuda"});
  c.comm_backend = one_of(vm, "comm.backend", {"auto", "mpi", "nccl"});
  c.bucket_mb = in_range(vm, "comm.bucket_mb", 0.0, 1e6, true);
  c.overlap = vm["comm.overlap"].as<bool>();
  c.ranks_per_root = vm["comm.ranks_per_root"].as<int>();
  if (c.ranks_per_root < 1 || c.ranks_per_root > (1 << 20))
    throw UsageError("comm.ranks_per_root=" + std::to_string(c.ranks_per_root) +
                     " is out of range [1, 1048576]");
  c.watchdog_timeout_s = in_range(vm, "watchdog.timeout_s", 0.0, 1e7, false);
  c.watchdog_dir = vm["watchdog.dir"].as<std::string>();
  c.watchdog_publish_s = in_range(vm, "watchdog.publish_s", 0.01, 60.0, true);
  c.watchdog_abort_grace_s = in_range(vm, "watchdog.abort_grace_s", 0.1, 3600.0, false);
}

void read_checkpointing(const po::variables_map& vm, TrainConfig& c) {
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
  c.checkpoint_overwrite = vm["checkpoint.overwrite"].as<bool>();
  c.checkpoint_lock_wait_s = in_range(vm, "checkpoint.lock_wait_s", 0.0, 1e7, false);
  const std::string resize = one_of(vm, "checkpoint.allow_resize", {"auto", "true", "false"});
  c.checkpoint_allow_resize = resize == "auto" ? c.resume == "auto" : resize == "true";
  if (c.checkpoint_dir.empty() && (c.checkpoint_every > 0 || c.resume != "none"))
    throw UsageError(std::string(c.checkpoint_every > 0 ? "checkpoint.every" : "--resume ") +
                     (c.checkpoint_every > 0 ? "" : c.resume) + " needs checkpoint.dir");
}

// The dataset's shape and how it is read, each within the bounds data/ reads an index with.
DataConfig data_from(const po::variables_map& vm) {
  DataConfig d;
  d.dir = vm["data.dir"].as<std::string>();
  d.format = one_of(vm, "data.format", {"raw", "hdf5"});
  d.files = bounded(vm, "data.files", 1, kMaxDatasetFiles, "shards");
  d.samples = bounded<int64_t>(vm, "data.samples", 1, kMaxDatasetSamples, "samples");
  d.sample_bytes =
      bounded<int64_t>(vm, "data.sample_bytes", 1, kMaxSampleBytes, "bytes per sample, 1 GiB");
  d.spread = in_range(vm, "data.spread", 0.0, kMaxSpread, false);
  d.readers = bounded(vm, "data.readers", 1, kMaxDataReaders, "reader threads per rank");
  d.prefetch = bounded(vm, "data.prefetch", 0, kMaxDataPrefetch, "batches read ahead");
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
  return d;
}

TestHooks test_hooks_from(const po::variables_map& vm) {
  TestHooks t;
  t.perturb_state_rank = vm["test.perturb_state_rank"].as<int>();
  t.corrupt_collective_rank = vm["test.corrupt_collective_rank"].as<int>();
  t.clock_offset_rank = vm["test.clock_offset_rank"].as<int>();
  t.clock_offset_s = vm["test.clock_offset_s"].as<double>();
  t.skip_clock_alignment = vm["test.skip_clock_alignment"].as<bool>();
  t.split_hosts = vm["test.split_hosts"].as<int>();
  t.mpi_error_rank = vm["test.mpi_error_rank"].as<int>();
  t.read_delay_ms = vm["test.read_delay_ms"].as<double>();
  t.unshared_checkpoint_rank = vm["test.unshared_checkpoint_rank"].as<int>();
  t.host_memory_bytes = vm["test.host_memory_bytes"].as<int64_t>();
  t.skip_restore = one_of(vm, "test.skip_restore", {"", "moment1"});
  t.sysfs_root = vm["test.sysfs_root"].as<std::string>();
  t.sysfs_root_rank = vm["test.sysfs_root_rank"].as<int>();
  t.sysfs_root_after = vm["test.sysfs_root_after"].as<std::string>();
  if (t.split_hosts < 0) throw UsageError("test.split_hosts must be >= 0");
  if (const std::string hold = vm["test.hold_collective"].as<std::string>(); !hold.empty()) {
    std::istringstream in(hold);
    char colon = 0, colon2 = 0;
    std::string comm;
    if (!(in >> t.hold_rank >> colon >> t.hold_seq) || colon != ':' || t.hold_rank < 0 ||
        t.hold_seq < 1 || (in >> colon2 && (colon2 != ':' || !(in >> comm))))
      throw UsageError("test.hold_collective=" + hold +
                       ": expected RANK:SEQ[:COMM], with RANK >= 0 and SEQ >= 1");
    if (!comm.empty()) t.hold_comm = comm;
  }
  return t;
}

// Boost ends a value at '#' but reads ';' as part of it, so "dir = x ; note" would name a folder
// "x ; note". A ';' after a blank is refused rather than guessed at (docs/promises.md).
void check_scenario_lines(const std::string& what, const std::string& path,
                          const std::string& text) {
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#' || line[start] == '[') continue;
    const size_t equals = line.find('=');
    if (equals == std::string::npos) continue;
    const size_t semicolon = line.find(';', equals);
    if (semicolon != std::string::npos && semicolon > 0 &&
        (line[semicolon - 1] == ' ' || line[semicolon - 1] == '\t'))
      throw UsageError(what + " '" + path + "', line " + std::to_string(number) +
                       ": ' ;' inside a value (" + line.substr(start) +
                       "); comments start with '#'");
  }
}

// The drill runs its launcher through the shell; only the person at the command line chooses it.
void check_scenario_options(const std::string& path, const po::parsed_options& parsed) {
  for (const po::option& o : parsed.options)
    if (o.string_key == "launcher")
      throw UsageError("scenario file '" + path +
                       "': launcher may only be given on the command line of trainproof drill "
                       "(it is run by the shell as written)");
}

// A host's reference thresholds may not change the work itself: a gate file holds [gate] (and the
// [reference] figures, split off before this) only.
void check_gate_file_options(const std::string& path, const po::parsed_options& parsed) {
  for (const po::option& o : parsed.options)
    if (o.string_key.rfind("gate.", 0) != 0 || o.string_key == "gate.file")
      throw UsageError(
          "gate.file '" + path + "': " + o.string_key +
          " is not a [gate] threshold (a gate file holds [gate] options and [reference] figures "
          "only)");
}

// `what` is "scenario file" or "gate.file": how its errors name it. A gate file's [inventory] goes
// to `inventory` (node-check and accept's preflight judge it).
po::parsed_options parse_option_file(const std::string& what, const std::string& path,
                                     const std::string& file_text,
                                     const po::options_description& options,
                                     InventorySpec* inventory = nullptr) {
  // A host file's [reference] figures are checked here and read by its self-consistency test.
  HostReference reference;
  InventoryLines inventory_lines;
  const std::string text = what == "gate.file"
                               ? split_host_sections(path, file_text, reference, inventory_lines)
                               : file_text;
  if (inventory) *inventory = parse_inventory(path, inventory_lines);
  check_scenario_lines(what, path, text);
  std::istringstream lines(text);
  try {
    po::parsed_options parsed = po::parse_config_file(lines, options, /*allow_unregistered=*/false);
    if (what == "gate.file")
      check_gate_file_options(path, parsed);
    else
      check_scenario_options(path, parsed);
    return parsed;
  } catch (const po::unknown_option& e) {
    throw UsageError(what + " '" + path +
                     "': " + unknown_option_text(options, e.get_option_name()));
  } catch (const po::error& e) {
    throw UsageError(what + " '" + path + "': " + e.what());
  }
}

// A byte count as nccl-tests' users type it: 64M, 1K, 2G (binary: K = 1024), with or without
// "iB" or "B" after the letter; a plain number stays as it is. Every option named *_bytes.
std::string expanded_byte_count(const std::string& name, const std::string& text) {
  static const std::regex suffixed(R"(([0-9]+)\s*([KkMmGgTt])(i?[Bb])?)");
  std::smatch m;
  if (!std::regex_match(text, m, suffixed)) return text;
  const int shift = std::string("kmgt").find(char(std::tolower(m[2].str()[0]))) * 10 + 10;
  const uint64_t count = std::stoull(m[1].str());
  if (m[1].str().size() > 12 || count > (uint64_t(INT64_MAX) >> shift))
    throw UsageError(name + "=" + text + " is too large");
  return std::to_string(count << shift);
}

void expand_byte_counts(po::parsed_options& parsed) {
  for (po::option& o : parsed.options) {
    const std::string& key = o.string_key;
    if (key.size() < 6 || key.compare(key.size() - 6, 6, "_bytes") != 0) continue;
    for (std::string& value : o.value) value = expanded_byte_count(key, value);
  }
}

// store() keeps values already present, so what is stored first wins.
void store_parsed(Invocation& inv, const std::string& what, const std::string& path,
                  po::parsed_options parsed) {
  expand_byte_counts(parsed);
  try {
    po::store(parsed, inv.options);
  } catch (const po::error& e) {
    throw UsageError(what + " '" + path + "': " + e.what());
  }
}

// The gate file the command line names, else the one the scenario names, else "".
std::string gate_file_path(const Invocation& inv, const po::parsed_options* scenario) {
  if (inv.options.count("gate.file") && !inv.options["gate.file"].defaulted())
    return inv.options["gate.file"].as<std::string>();
  if (scenario)
    for (const po::option& o : scenario->options)
      if (o.string_key == "gate.file" && !o.value.empty()) return o.value.front();
  return "";
}

// Every option stored so far that has no source yet came from `source`.
void note_sources(Invocation& inv, const std::string& source) {
  for (const auto& [name, value] : inv.options)
    if (!value.defaulted() && name != "operand") inv.option_source.emplace(name, source);
}

// model.batch and model.batch_per_rank exclude each other. When the command line gives one and a
// scenario the other, the command line's replaces the scenario's, which goes back to its default
// (both in one place stays an error, in batch_per_rank_from).
void settle_batch_setting(Invocation& inv, const po::options_description& options) {
  const char* pair[] = {"model.batch", "model.batch_per_rank"};
  auto given = [&](const char* name) {
    return inv.options.count(name) > 0 && !inv.options[name].defaulted();
  };
  if (!given(pair[0]) || !given(pair[1])) return;
  for (int i = 0; i < 2; ++i) {
    const char* other = pair[1 - i];
    if (inv.option_source[pair[i]] != "command line" || inv.option_source[other] == "command line")
      continue;
    boost::any fallback;
    options.find(other, false).semantic()->apply_default(fallback);
    inv.options.at(other) = po::variable_value(fallback, true);
    inv.option_source.erase(other);
    return;
  }
}

void check_general_options(const po::variables_map& vm) {
  one_of(vm, "log.level", {"trace", "debug", "info", "warn", "error", "critical", "off"});
  run_id_option(vm);
  for (const char* name : {"train.seed", "drill.seed"})
    if (vm[name].as<int64_t>() < 0)
      throw UsageError(std::string(name) + " must be >= 0, got " +
                       std::to_string(vm[name].as<int64_t>()));
}

}  // namespace

Invocation parse_invocation(int argc, const char* const argv[]) {
  Invocation inv;
  for (int i = 0; i < argc; ++i) inv.argv.emplace_back(argv[i]);
  int first = 1;
  if (argc > 1 && argv[1][0] != '-') {
    inv.subcommand = argv[1];
    if (inv.subcommand != "train" && inv.subcommand != "report" && inv.subcommand != "drill" &&
        inv.subcommand != "prepare-data" && inv.subcommand != "sweep" &&
        inv.subcommand != "accept" && inv.subcommand != "node-check")
      throw UsageError("unknown subcommand '" + inv.subcommand + "' (known: " + kSubcommands + ")");
    first = 2;
  }

  const po::options_description options = option_registry();
  po::options_description cli;
  cli.add(options).add_options()("operand", po::value<std::vector<std::string>>());
  po::positional_options_description operands;
  operands.add("operand", -1);
  try {
    // Names are matched exactly, as in scenario files: Boost's default would take --train.step
    // for train.steps, and --gate.min_p for whichever gate option it happens to prefix.
    po::parsed_options given =
        po::command_line_parser(argc - first + 1, argv + first - 1)
            .options(cli)
            .positional(operands)
            .style(po::command_line_style::default_style & ~po::command_line_style::allow_guessing)
            .run();
    expand_byte_counts(given);
    po::store(given, inv.options);
  } catch (const po::unknown_option& e) {
    throw UsageError("command line: " + unknown_option_text(options, e.get_option_name()));
  } catch (const po::error& e) {
    throw UsageError(std::string("command line: ") + e.what());
  }
  if (inv.options.count("operand"))
    inv.positional = inv.options["operand"].as<std::vector<std::string>>();
  inv.help_all = inv.options.count("help-all") > 0;
  inv.help = inv.help_all || inv.options.count("help") > 0;
  inv.version = inv.options.count("version") > 0;
  if (inv.help || inv.version) return inv;
  if (inv.subcommand.empty())
    throw UsageError(std::string("no subcommand given (known: ") + kSubcommands +
                     "); see trainproof --help");
  if (inv.subcommand != "report" && !inv.positional.empty())
    throw UsageError(inv.subcommand + " takes no operands, got '" + inv.positional.front() + "'");

  note_sources(inv, "command line");
  std::optional<po::parsed_options> scenario;
  if (inv.options.count("scenario")) {
    inv.scenario_path = inv.options["scenario"].as<std::string>();
    inv.scenario_text = read_file("--scenario", inv.scenario_path);
    scenario = parse_option_file("scenario file", inv.scenario_path, inv.scenario_text, options);
  }
  // Precedence: the command line, then the host's gate file, then the scenario. The host type is
  // more specific than the workload, so its thresholds win over the scenario's
  // (docs/acceptance.md, "Reference thresholds per host type"). Stored before notify, so each
  // source can be named.
  if (const std::string path = gate_file_path(inv, scenario ? &*scenario : nullptr);
      !path.empty()) {
    store_parsed(inv, "gate.file", path,
                 parse_option_file("gate.file", path, read_file("--gate.file", path), options,
                                   &inv.inventory));
    inv.inventory_file = path;
    note_sources(inv, "gate.file " + path);
  }
  if (scenario) {
    store_parsed(inv, "scenario file", inv.scenario_path, *scenario);
    note_sources(inv, "scenario " + inv.scenario_path);
  }
  settle_batch_setting(inv, options);
  po::notify(inv.options);
  check_general_options(inv.options);
  return inv;
}

TrainConfig train_config_from(const po::variables_map& vm) {
  TrainConfig c;
  c.model = model_from(vm);
  c.batch_per_rank = batch_per_rank_from(vm);
  c.dtype = model_dtype_from(vm);
  read_run_length(vm, c);
  c.optimizer = optimizer_from(vm);
  c.log_every = vm["train.log_every"].as<int64_t>();
  if (c.log_every < 0) throw UsageError("train.log_every must be >= 0");
  read_backends(vm, c);
  read_checkpointing(vm, c);
  if (vm.count("fault")) c.faults = parse_faults(vm["fault"].as<std::vector<std::string>>());
  c.data = data_from(vm);
  c.epochs = in_range(vm, "train.epochs", 0.0, kMaxEpochs, false);
  if (c.epochs > 0 && c.data.dir.empty()) throw UsageError("train.epochs needs data.dir");
  c.test = test_hooks_from(vm);
  c.preflight_topology = vm["preflight.topology"].as<bool>();
  return c;
}

TrainConfig stage_config_from(const po::variables_map& vm) {
  TrainConfig c;
  read_backends(vm, c);
  c.test = test_hooks_from(vm);
  c.preflight_topology = vm["preflight.topology"].as<bool>();
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
