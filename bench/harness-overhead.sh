#!/usr/bin/env bash
# Harness overhead: trainproof's mean step time on 2 ranks against bare loops doing the same GEMMs
# and blocking MPI_Allreduce calls, measured in the same run, interleaved, median of REPEATS.
#   raw        GEMMs + allreduce + update only: the cost of everything trainproof adds
#   same-work  also synthesises batches and shapes gradients: the cost of the harness alone
#              (timers, phase marks, fault hooks, progress calls, statistics)
# Usage: bench/harness-overhead.sh [REPEATS]   (needs scripts/build.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-7}
shape=(--layers=4 --hidden=512 --seq=128 --batch=8 --steps=60 --warmup=5)
opts=(--model.layers=4 --model.hidden=512 --model.seq=128 --model.batch=8 --train.steps=60
      --train.warmup_steps=5 --comm.overlap=false --log.level=warn)
out=out/bench
mkdir -p "$out"
: > "$out/harness-overhead.samples"
for _ in $(seq "$repeats"); do
  raw=$(scripts/mpirun.sh -np 2 build/bench/bare_loop "${shape[@]}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["mean_step_s"])')
  same=$(scripts/mpirun.sh -np 2 build/bench/bare_loop "${shape[@]}" --same-work | python3 -c 'import json,sys; print(json.load(sys.stdin)["mean_step_s"])')
  scripts/mpirun.sh -np 2 build/trainproof train "${opts[@]}" --report "$out/harness-run.json" >/dev/null
  tp=$(python3 -c 'import json; t=json.load(open("'"$out"'/harness-run.json"))["train"]; print(t["model"]["global_batch"]/t["samples_per_s"])')
  echo "$raw $same $tp" | tee -a "$out/harness-overhead.samples"
done
python3 - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]
rows = [list(map(float, l.split())) for l in open(f"{out}/harness-overhead.samples")]
raw, same, tp = (statistics.median(c) for c in zip(*rows))
# Ratios are taken within each repeat (the three runs are back to back), then the median: this
# cancels the slow drift of a shared machine that a ratio of medians would keep.
vs_raw = statistics.median(t / r for r, _, t in rows)
vs_same = statistics.median(t / s for _, s, t in rows)
result = {"ranks": 2, "repeats": len(rows), "bare_raw_step_s": raw, "bare_same_work_step_s": same,
          "trainproof_step_s": tp, "ratio_vs_raw": vs_raw, "ratio_vs_same_work": vs_same}
json.dump(result, open(f"{out}/harness-overhead.json", "w"), indent=2)
print(f"median step: bare raw {raw*1e3:.2f} ms, bare same-work {same*1e3:.2f} ms, trainproof {tp*1e3:.2f} ms")
print(f"trainproof / bare same-work = {vs_same:.3f}  (harness overhead {100*(vs_same-1):+.1f}%, target <= +3%)")
print(f"trainproof / bare raw       = {vs_raw:.3f}  (harness + data synthesis + gradient shaping)")
PY
