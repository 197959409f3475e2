#!/usr/bin/env bash
# The pairwise pass's record on the 3-node virtual cluster (docs/sweep.md, "How often a flag
# reproduces"): RUNS runs of each case at trainproof's default options, one node (vc-n3)
# throttled with tc tbf, and one line per run plus a tally per case.
#
#   scripts/pairwise-record.sh [RUNS] [CASES]   defaults: 20, "healthy 4gbit 1gbit 300mbit"
#
# Needs root (scripts/vcluster.sh); starts the cluster and always stops it. The build must exist
# (scripts/build.sh). Each line: case, run, exit code, verdict, flagged nodes, the pass's seconds
# (confirmation included), the largest noise of a trial with the pairwise_noise check, and the
# suspects measured again with their outcome.
set -euo pipefail

RUNS=${1:-20}
CASES=${2:-healthy 4gbit 1gbit 300mbit}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VCLUSTER="$ROOT/scripts/vcluster.sh"
export VC_STATE=${VC_STATE:-/var/lib/trainproof-vcluster}
export SLURM_CONF="$VC_STATE/slurm.conf"
WORK="$VC_STATE/pairwise-record"

[ -x "$ROOT/build/trainproof" ] || { echo "pairwise-record: build first (scripts/build.sh)" >&2; exit 2; }
case $RUNS in '' | *[!0-9]*) echo "pairwise-record: RUNS must be a count, got '$RUNS'" >&2; exit 2 ;; esac

cleanup() { "$VCLUSTER" stop >/dev/null 2>&1 || true; }
trap cleanup EXIT
"$VCLUSTER" start 3 >/dev/null
rm -rf "$WORK" && mkdir -p "$WORK" && cp "$ROOT/build/trainproof" "$WORK/"
cd "$WORK"

summarise() {  # REPORT CASE RUN RC
  python3 - "$@" <<'PY'
import json, sys
report, case, run, rc = sys.argv[1:5]
try:
    r = json.load(open(report))
except (OSError, ValueError):
    print(f"{case}\t{run}\trc={rc}\tno report")
    sys.exit()
p = r["sweep"]["pairwise"]
flagged = ",".join(n["host"] for n in r["nodes"] if n["flagged"]) or "-"
links = sum(1 for rail in p["rails"] for c in rail["confirmations"]
            if c["kind"] == "link" and c["outcome"] != "transient")
suspects = "; ".join(
    f"{c['kind']} {c['node'] or c['from'] + '->' + c['to']} {c['direction'] or ''}"
    f"{' both-ways' if c['both_ways'] else ''}: {c['outcome']}"
    for rail in p["rails"] for c in rail["confirmations"])
noise = max((c["noise"] for rail in p["rails"] for c in rail["confirmations"]), default=0)
checks = {c["name"]: c["status"] for c in r["gate"]["checks"]}
print(f"{case}\t{run}\trc={rc}\t{r['verdict']}\tflagged={flagged}\tlinks={links}\t"
      f"pass={p['seconds']:.1f}s\tnoise={100 * noise:.0f}% ({checks.get('pairwise_noise')})\t"
      f"{suspects or 'no suspect'}")
PY
}

for case in $CASES; do
  "$VCLUSTER" restore vc-n3 >/dev/null 2>&1 || true
  if [ "$case" != healthy ]; then "$VCLUSTER" degrade vc-n3 "$case" both >/dev/null; fi
  for run in $(seq 1 "$RUNS"); do
    report="$WORK/$case-$run.json"
    rc=0
    timeout 600 srun -N3 -n3 --mpi=pmix -K1 ./trainproof sweep --sweep.mode=pairwise \
      --report "$report" --log.level=warn >"$WORK/$case-$run.out" 2>&1 || rc=$?
    summarise "$report" "$case" "$run" "$rc"
  done
done | tee "$WORK/record.tsv"

echo
python3 - "$WORK/record.tsv" <<'PY'
import collections, re, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
by_case = collections.OrderedDict()
for row in rows:
    by_case.setdefault(row[0], []).append(row)
print("case\truns\tonly vc-n3 flagged\tFAIL (exit 1)\ta flag elsewhere\tnot finished\t"
      "pass s (median, max)")
for case, runs in by_case.items():
    done = [r for r in runs if len(r) > 6]
    alone = sum(1 for r in done if r[4] == "flagged=vc-n3" and r[5] == "links=0")
    elsewhere = sum(1 for r in done
                    if r[4] not in ("flagged=vc-n3", "flagged=-") or r[5] != "links=0")
    failed = sum(1 for r in done if r[2] == "rc=1")
    seconds = sorted(float(re.sub("[^0-9.]", "", r[6])) for r in done)
    middle = seconds[len(seconds) // 2] if seconds else float("nan")
    print(f"{case}\t{len(runs)}\t{alone}\t{failed}\t{elsewhere}\t{len(runs) - len(done)}\t{middle:.1f}, "
          f"{max(seconds, default=float('nan')):.1f}")
PY
