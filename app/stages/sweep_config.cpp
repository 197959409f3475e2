#include "app/stages/sweep_config.h"

#include <algorithm>

#include "app/cli/option_values.h"
#include "common/dtype_names.h"
#include "common/errors.h"
#include "common/number_text.h"
#include "fabric/sweep_data.h"
#include "fabric/sweep_runner.h"

namespace tp {
namespace {

namespace po = boost::program_options;

// Far beyond any fabric test, and small enough that two buffers of it fit a host's memory.
constexpr int64_t kMaxSweepBytes = int64_t(16) << 30;

// sweep.dtype in any common spelling (common/dtype_names.h).
ElementType element_type_from(const po::variables_map& vm) {
  const std::string given = vm["sweep.dtype"].as<std::string>();
  const std::string name = dtype_name(given);
  for (ElementType t : {ElementType::f32, ElementType::i32, ElementType::bf16, ElementType::f16})
    if (!name.empty() && sweep_type_name(t) == name) return t;
  throw UsageError("sweep.dtype='" + given +
                   "' is not one of: float32 (fp32, float), int32, bfloat16 (bf16), float16 (fp16, "
                   "half)");
}

SweepPlan plan_from(const po::variables_map& vm) {
  SweepPlan plan;
  plan.ops = parse_sweep_ops(vm["sweep.ops"].as<std::string>(), "sweep.ops");
  plan.type = element_type_from(vm);
  plan.min_bytes = uint64_t(bounded<int64_t>(vm, "sweep.min_bytes", 0, kMaxSweepBytes, "bytes"));
  // 0 (auto) is set when the stage knows the world size; until then every check takes the most
  // it can become.
  plan.max_bytes = uint64_t(bounded<int64_t>(vm, "sweep.max_bytes", 0, kMaxSweepBytes, "bytes"));
  const bool grows = plan.max_bytes == 0;
  if (grows) plan.max_bytes = uint64_t(kMaxSweepBytes);
  if (plan.min_bytes > plan.max_bytes)
    throw UsageError("sweep.min_bytes=" + std::to_string(plan.min_bytes) +
                     " is larger than sweep.max_bytes=" + std::to_string(plan.max_bytes));
  plan.factor = in_range(vm, "sweep.factor", 1.0, 1e6, true);
  if (plan.min_bytes == 0 && plan.max_bytes > 0)
    throw UsageError("sweep.min_bytes=0 cannot grow by sweep.factor: start at 1 byte or more");
  // A factor so close to 1 would sweep for hours (or, before each size had to grow by an element,
  // forever): the number of sizes is bounded.
  if (sweep_sizes(plan.min_bytes, plan.max_bytes, plan.factor, sweep_type_bytes(plan.type)).size() >
      kMaxSweepSizes)
    throw UsageError(
        "sweep.factor=" + exact_number(plan.factor) +
        " from sweep.min_bytes=" + std::to_string(plan.min_bytes) + " to sweep.max_bytes=" +
        (grows ? "0 (growing with the ranks to at most " + std::to_string(plan.max_bytes) + ")"
               : std::to_string(plan.max_bytes)) +
        " gives more than " + std::to_string(kMaxSweepSizes) +
        " sizes per operation; use a larger factor or a narrower range");
  plan.iters = int(bounded<int64_t>(vm, "sweep.iters", 1, 1000000, "timed iterations"));
  plan.warmup = int(bounded<int64_t>(vm, "sweep.warmup", 0, 1000000, "warm-up iterations"));
  plan.corrupt_rank = vm["test.corrupt_sweep_rank"].as<int>();
  return plan;
}

}  // namespace

SweepConfig sweep_config_from(const po::variables_map& vm) {
  SweepConfig c;
  c.mode = one_of(vm, "sweep.mode", {"collectives", "pairwise"});
  c.plan = plan_from(vm);
  c.auto_max_bytes = vm["sweep.max_bytes"].as<int64_t>() == 0;
  c.split = one_of(vm, "sweep.split", {"none", "node", "rail"});
  c.pair_bytes = uint64_t(bounded<int64_t>(vm, "sweep.pair_bytes", 4, kMaxSweepBytes, "bytes"));
  c.pair_iters = int(bounded<int64_t>(vm, "sweep.pair_iters", 1, 1000000, "transfers"));
  c.pair_ranks = one_of(vm, "sweep.pair_ranks", {"rail", "node"});
  c.confirm_max = int(bounded<int64_t>(vm, "sweep.confirm_max", 0, 1000000, "trials"));
  c.confirm_share = in_range(vm, "sweep.confirm_share", 0.0, 1000.0, false);
  c.slow_pair_rank = vm.count("test.slow_pair_rank") ? vm["test.slow_pair_rank"].as<int>() : -1;
  if (c.slow_pair_rank >= 0) c.slow_pair_gbps = in_range(vm, "test.slow_pair_gbps", 0.0, 1e6, true);
  c.flag_fraction = in_range(vm, "sweep.flag_fraction", 0.0, 1.0, true);
  c.fail_fraction = in_range(vm, "sweep.fail_fraction", 0.0, 1.0, false);
  if (c.fail_fraction > c.flag_fraction)
    throw UsageError("sweep.fail_fraction=" + exact_number(c.fail_fraction) +
                     " is above sweep.flag_fraction=" + exact_number(c.flag_fraction) +
                     ": a failure must be a flag too");
  c.fail_floor = in_range(vm, "sweep.fail_floor", 0.0, 1.0, false);
  // The default floor follows a fail_fraction set below it; a floor given above it is an error.
  if (vm["sweep.fail_floor"].defaulted()) c.fail_floor = std::min(c.fail_floor, c.fail_fraction);
  if (c.fail_floor > c.fail_fraction)
    throw UsageError("sweep.fail_floor=" + exact_number(c.fail_floor) +
                     " is above sweep.fail_fraction=" + exact_number(c.fail_fraction) +
                     ": the floor fails what lies below it whatever the noise, so it cannot be "
                     "above the line the noise rule fails at");
  if (vm.count("gate.min_pair_gbps") && !vm["gate.min_pair_gbps"].defaulted())
    c.confirm_below_gbps = vm["gate.min_pair_gbps"].as<double>();
  if (c.mode == "pairwise" && c.split != "none")
    throw UsageError("sweep.split=" + c.split +
                     " applies to sweep.mode=collectives; pairwise mode chooses its ranks with "
                     "sweep.pair_ranks");
  return c;
}

}  // namespace tp
