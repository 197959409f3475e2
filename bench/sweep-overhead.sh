#!/usr/bin/env bash
# Sweep overhead: `trainproof sweep` allreduce (out of place) against a bare MPI_Allreduce timing
# loop (build/bench/allreduce_loop), same sizes, ranks and iterations, back to back, the order
# alternating every repeat. Both time as nccl-tests does, so the ratio is what the sweep's
# interface, buffers and bookkeeping cost.
#   busbw ratio  sweep busbw / bare busbw per size (= bare time / sweep time), median over repeats;
#                target: median over sizes >= 1 MiB at least 0.95
#   small time   sweep time / bare time for sizes below 1 MiB; target: median within 1.10
#   control      the bare loop against itself (a second bare run in every repeat): the ratios
#                a machine this noisy gives when nothing differs; read the targets against it
# Usage: bench/sweep-overhead.sh [REPEATS] [RANKS]   (needs scripts/build.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-5}
ranks=${2:-2}
sizes=(--min_bytes=4096 --max_bytes=67108864 --iters=20 --warmup=5)
opts=(--sweep.ops=allreduce --sweep.min_bytes=4096 --sweep.max_bytes=67108864 --sweep.iters=20
      --sweep.warmup=5 --comm.backend=mpi --preflight.topology=false --log.level=warn)
out=out/bench/sweep
mkdir -p "$out"
rm -f "$out"/bare-*.json "$out"/again-*.json "$out"/sweep-*.json
bare() { scripts/mpirun.sh -np "$ranks" build/bench/allreduce_loop "${sizes[@]}" >"$out/$2-$1.json"; }
sweep() { scripts/mpirun.sh -np "$ranks" build/trainproof sweep "${opts[@]}" --report "$out/sweep-$1.json" >/dev/null; }
for r in $(seq "$repeats"); do
  if ((r % 2)); then bare "$r" bare; sweep "$r"; else sweep "$r"; bare "$r" bare; fi
  bare "$r" again
  echo "repeat $r of $repeats done" >&2
done
python3 - "$out" "$repeats" <<'PY'
import json, statistics, sys
out, repeats = sys.argv[1], int(sys.argv[2])
def loop(name, r):
    return {row["bytes"]: row["time_us"] for row in json.load(open(f"{out}/{name}-{r}.json"))["rows"]}
ratios, control = {}, {}  # bytes -> [reference time / measured time, per repeat]
for r in range(1, repeats + 1):
    bare, again = loop("bare", r), loop("again", r)
    for row in json.load(open(f"{out}/sweep-{r}.json"))["sweep"]["results"]:
        b = row["bytes"]
        if row["in_place"] or b not in bare:
            continue
        ratios.setdefault(b, []).append(bare[b] / row["time_us"]["mean"])
        control.setdefault(b, []).append(bare[b] / again[b])
per_size = {b: statistics.median(v) for b, v in sorted(ratios.items())}
per_size_control = {b: statistics.median(v) for b, v in sorted(control.items())}
def summary(table):
    large = [v for b, v in table.items() if b >= 1 << 20]
    small = [1 / v for b, v in table.items() if b < 1 << 20]
    return statistics.median(large), statistics.median(small)
(large, small), (large_c, small_c) = summary(per_size), summary(per_size_control)
result = {"repeats": repeats, "busbw_ratio_by_bytes": per_size,
          "control_ratio_by_bytes": per_size_control,
          "median_busbw_ratio_1mib_and_up": large, "median_small_time_ratio": small,
          "control_median_busbw_ratio_1mib_and_up": large_c,
          "control_median_small_time_ratio": small_c}
json.dump(result, open(f"{out}/sweep-overhead.json", "w"), indent=2)
print("| bytes | sweep busbw / bare busbw | control: bare / bare |")
print("|---:|---:|---:|")
for b, v in per_size.items():
    print(f"| {b} | {v:.3f} | {per_size_control[b]:.3f} |")
print(f"median busbw ratio, sizes >= 1 MiB: {large:.3f} (target >= 0.95; control {large_c:.3f})")
print(f"median time ratio, sizes < 1 MiB:   {small:.3f} (target <= 1.10; control {small_c:.3f})")
PY
