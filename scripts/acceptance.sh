#!/usr/bin/env bash
# The whole acceptance of a host type or image in one command (docs/acceptance.md): trainproof
# accept (preflight, sweep, pairwise, train, cold restore), then the recovery drill, then report
# merge into one report and one verdict.
#
# usage: scripts/acceptance.sh [-n RANKS] [-s SCENARIO] [-g GATE_FILE] [-o OUTDIR] [-f FAULT]
#                              [-S] [-- OPTIONS]
#   -n  local ranks under scripts/mpirun.sh (default 2); or set LAUNCHER, e.g.
#       LAUNCHER="srun --mpi=pmix" inside an allocation (slurm/acceptance.sbatch does)
#   -s  scenario (default scenarios/accept.ini)
#   -g  the host type's thresholds (a scenarios/hosts/*.ini file)
#   -o  output folder (default out/acceptance): accept.json, drill.json, acceptance.json (with
#       acceptance.junit.xml and acceptance.prom: its checks as JUnit XML and Prometheus text;
#       acceptance.html: the page with its plots), the traces (*.trace.h5) and the checkpoint
#       folders, which must be on the storage under test. Reports of an earlier run
#       found there are first moved into earlier-TIME/ beside them.
#   -f  the drill's fault (default random:seed=3: one kill at a rank, step and phase drawn from
#       the seed; see trainproof drill --help for the grammar)
#   -S  strict: a WARN verdict exits 1 (report merge --strict)
#   OPTIONS go to accept and to the drill (e.g. --cost.node_hour=3.2 --gate.max_rto_s=120)
# Exit code: the merged verdict's (0 PASS/WARN, 1 FAIL or INCOMPLETE); 2 for a bad option, here or
# in accept or the drill; 3 when accept or the drill failed (a launcher that could not start, a
# crash): a run that wrote no report of its own is never taken for a verdict; 4 when a signal
# stopped accept or the drill (its report, or its partial report, is kept).
set -euo pipefail
cd "$(dirname "$0")/.."

usage_error() {
  echo "acceptance.sh: $*" >&2
  exit 2
}
# A value from the command line as the shell would quote it: control bytes stay inert.
quoted() { printf '%q' "$1"; }

ranks=2
scenario=scenarios/accept.ini
gate_file=
out=out/acceptance
fault=random:seed=3
strict=()
while getopts "n:s:g:o:f:Sh" flag; do
  case $flag in
    n) ranks=$OPTARG ;;
    s) scenario=$OPTARG ;;
    g) gate_file=$OPTARG ;;
    o) out=$OPTARG ;;
    f) fault=$OPTARG ;;
    S) strict=(--strict) ;;
    *) sed -n '2,23p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift

# Every option is checked before anything runs. The rank count becomes part of a command line
# that the drill hands to the shell, so it must be a number and nothing else.
[[ $ranks =~ ^[1-9][0-9]{0,5}$ ]] || usage_error "-n $(quoted "$ranks") is not a number of ranks"
if ! { [ -f "$scenario" ] && [ -r "$scenario" ]; }; then
  usage_error "-s $(quoted "$scenario") is not a readable scenario file"
fi
if [ -n "$gate_file" ] && ! { [ -f "$gate_file" ] && [ -r "$gate_file" ]; }; then
  usage_error "-g $(quoted "$gate_file") is not a readable gate file"
fi
if [ -e "$out" ] && [ ! -d "$out" ]; then usage_error "-o $(quoted "$out") is a file, not a folder"; fi
[ -n "$fault" ] || usage_error "-f needs a fault (see trainproof drill --help)"

bin=${TRAINPROOF:-$PWD/build/trainproof}
launcher=${LAUNCHER:-$PWD/scripts/mpirun.sh -np $ranks}
gate=()
if [ -n "$gate_file" ]; then gate=(--gate.file="$gate_file"); fi
mkdir -p "$out"

# This run's id goes into every report it writes; the merge refuses a report of any other run.
run_id=acceptance-$(date -u +%Y%m%dT%H%M%SZ)-$$
# Reports of an earlier run are moved aside, named by the time they were written, never merged.
earlier=()
for name in accept.json accept.partial.json drill.json acceptance.json acceptance.junit.xml \
  acceptance.prom accept.trace.h5 drill.trace.h5 acceptance.html; do
  if [ -e "$out/$name" ]; then earlier+=("$name"); fi
done
if [ "${#earlier[@]}" -gt 0 ]; then
  aside=$out/earlier-$(date -u -r "$out/${earlier[0]}" +%Y%m%dT%H%M%SZ)
  while [ -e "$aside" ]; do aside=$aside+; done
  mkdir "$aside"
  for name in "${earlier[@]}"; do mv "$out/$name" "$aside/"; done
  echo "== earlier reports moved to $aside: ${earlier[*]}"
fi
# A fresh checkpoint folder per attempt: accept starts from step 1.
rm -rf "$out/accept-ckpt" "$out/drill-ckpt"

# this_run_wrote FILE: FILE is a report that this run wrote (its context.run_id is this run's).
this_run_wrote() { [ -f "$1" ] && grep -qF "\"run_id\": \"$run_id\"" "$1"; }
# judged STEP CODE FILE: exit 0/1 with this run's report is a verdict; without one, the launch
# itself failed (srun: Unable to create step, a node that is down), which is no verdict at all.
# Exit 2 or more stops the script; what the step wrote stays (a report with verdict INCOMPLETE
# after a signal, exit 4; or, when a rank died, the partial report written as its stage started).
judged() {
  if [ "$2" -ge 2 ]; then
    echo "$1 stopped with exit $2; nothing after it runs"
    local partial=${3%.json}.partial.json
    if this_run_wrote "$3"; then
      echo "its report, kept: $(realpath "$3")"
    elif this_run_wrote "$partial"; then
      echo "its partial report, kept (how far it got): $(realpath "$partial")"
    fi
    exit "$2"
  fi
  if ! this_run_wrote "$3"; then
    echo "$1 ended with exit $2 but wrote no report of this run ($3, run $run_id): the launch" \
      "failed, which is not a verdict; see the launcher's messages above"
    exit 3
  fi
}

echo "== 1/3 trainproof accept ($launcher; run $run_id)"
set +e
# shellcheck disable=SC2086 # the launcher is a command line of its own
$launcher "$bin" accept --scenario "$scenario" "${gate[@]}" --gate.drill=true \
  --checkpoint.dir="$out/accept-ckpt" --report "$out/accept.json" --run_id "$run_id" "$@"
code=$?
set -e
judged accept "$code" "$out/accept.json"

echo
echo "== 2/3 trainproof drill (one rank killed mid-run, relaunched from its checkpoint)"
set +e
"$bin" drill --launcher "$launcher" --scenario "$scenario" --checkpoint.dir="$out/drill-ckpt" \
  --fault "$fault" --report "$out/drill.json" --run_id "$run_id" "$@"
code=$?
set -e
judged "the drill" "$code" "$out/drill.json"

echo
echo "== 3/3 trainproof report merge"
set +e
"$bin" report merge "$out/accept.json" "$out/drill.json" --report "$out/acceptance.json" \
  --junit "$out/acceptance.junit.xml" --metrics "$out/acceptance.prom" --run_id "$run_id" \
  "${strict[@]}"
code=$?
set -e
# The page for people: verdict, checks, timeline, plots (docs/report.md, "Pictures"). Drawing is
# not judging: a page that cannot be drawn is said, and the verdict's exit code stands.
if [ -f "$out/acceptance.json" ]; then
  echo
  echo "== the HTML report"
  "$bin" report html "$out/acceptance.json" || echo "acceptance.sh: the HTML report was not written (above)" >&2
fi
echo
echo "exit code $code; the acceptance report: $(realpath "$out/acceptance.json")"
exit "$code"
