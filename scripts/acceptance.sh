#!/usr/bin/env bash
# The whole acceptance of a host type or image in one command (docs/acceptance.md): trainproof
# accept (preflight, sweep, pairwise, train, cold restore), then the recovery drill, then report
# merge into one report and one verdict.
#
# usage: scripts/acceptance.sh [-n RANKS] [-s SCENARIO] [-g GATE_FILE] [-o OUTDIR] [-f FAULT]
#                              [-- OPTIONS]
#   -n  local ranks under scripts/mpirun.sh (default 2); or set LAUNCHER, e.g.
#       LAUNCHER="srun --mpi=pmix" inside an allocation (slurm/acceptance.sbatch does)
#   -s  scenario (default scenarios/accept.ini)
#   -g  the host type's thresholds (a scenarios/hosts/*.ini file)
#   -o  output folder (default out/acceptance): accept.json, drill.json, acceptance.json and the
#       checkpoint folders, which must be on the storage under test
#   -f  the drill's fault (default random:seed=3: one kill at a rank, step and phase drawn from
#       the seed; see trainproof --help for the grammar)
#   OPTIONS go to accept and to the drill (e.g. --cost.node_hour=3.2 --gate.max_rto_s=120)
# Exit code: the merged verdict's (0 PASS/WARN, 1 FAIL), or accept's or the drill's own 2 or 3.
set -euo pipefail
cd "$(dirname "$0")/.."

ranks=2
scenario=scenarios/accept.ini
gate_file=
out=out/acceptance
fault=random:seed=3
while getopts "n:s:g:o:f:h" flag; do
  case $flag in
    n) ranks=$OPTARG ;;
    s) scenario=$OPTARG ;;
    g) gate_file=$OPTARG ;;
    o) out=$OPTARG ;;
    f) fault=$OPTARG ;;
    *) sed -n '2,18p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift

bin=${TRAINPROOF:-$PWD/build/trainproof}
launcher=${LAUNCHER:-$PWD/scripts/mpirun.sh -np $ranks}
gate=()
if [ -n "$gate_file" ]; then gate=(--gate.file="$gate_file"); fi
mkdir -p "$out"
# A fresh checkpoint folder per attempt: accept starts from step 1.
rm -rf "$out/accept-ckpt" "$out/drill-ckpt"

echo "== 1/3 trainproof accept ($launcher)"
set +e
# shellcheck disable=SC2086 # the launcher is a command line of its own
$launcher "$bin" accept --scenario "$scenario" "${gate[@]}" --gate.drill=true \
  --checkpoint.dir="$out/accept-ckpt" --report "$out/accept.json" "$@"
code=$?
set -e
if [ "$code" -ge 2 ]; then
  echo "accept stopped with exit $code; no drill or merge"
  exit "$code"
fi

echo
echo "== 2/3 trainproof drill (one rank killed mid-run, relaunched from its checkpoint)"
set +e
"$bin" drill --launcher "$launcher" --scenario "$scenario" --checkpoint.dir="$out/drill-ckpt" \
  --fault "$fault" --report "$out/drill.json" "$@"
code=$?
set -e
if [ "$code" -ge 2 ]; then
  echo "the drill stopped with exit $code; merging what accept measured alone is not an acceptance"
  exit "$code"
fi

echo
echo "== 3/3 trainproof report merge"
set +e
"$bin" report merge "$out/accept.json" "$out/drill.json" --report "$out/acceptance.json"
code=$?
set -e
echo
echo "exit code $code; the acceptance report: $(realpath "$out/acceptance.json")"
exit "$code"
