#!/usr/bin/env bash
# The GPU path's acceptance check on a one-GPU machine that has CUDA, the driver, NCCL and PyTorch
# but none of trainproof's other dependencies, and no package registry.
#
#   scripts/device-check.sh --bundle [--no-pack]   here: build, then pack .device-bundle.tar.xz
#                                                  (scripts/device-bundle.sh does the work)
#   scripts/device-check.sh --run                  there, in the repository root, with the tarball
#                                                  beside it: unpack, run every stage, summarise
#   scripts/device-check.sh --dry-run [--no-pack] [--no-build]
#                                                  here or in CI, without a GPU: --bundle, then
#                                                  --run against the bundle; GPU stages skip, the
#                                                  CPU side (libraries, relocated Open MPI) runs
#                           [--no-bundle]          (the dry run against the existing bundle)
#
# --run writes into $OUT (default out/device-check; the dry run uses out/device-check-dry) at most
# five files, because the GPU machine returns only a few: summary.json and summary.md (one entry
# per stage: status pass/fail/skip/not-run, seconds, key figures), console.log, gpu_tests.json
# (GoogleTest's report) and stages.tar.gz (every stage's log and trainproof report). They are
# rewritten after each stage, so a run cut short still returns what it finished.
#
# Every stage has its own time limit and a failed stage never stops the next one. The stages
# together stay inside DEVICE_CHECK_BUDGET_S seconds (default 420), so the whole call, unpacking
# included, ends well within 8 minutes. Exit status: 1 if any stage failed, else 0.

# The stages are in scripts/device-check/stages.sh; the Python it runs (results.py, torch_probe.py)
# and the dry run's isolate.sh sit beside them. They travel with the working tree, as this script
# does, and not in the bundle, which holds only what the build and this machine provide.

# shellcheck disable=SC2317 # (file-wide) the stage helpers run only from stages, called by name
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo" || exit 2
here=$repo/scripts/device-check

mode=
pack_args=()
make_bundle=1
for arg in "$@"; do
  case $arg in
    --bundle | --run | --dry-run) mode=${arg#--} ;;
    --no-pack | --no-build) pack_args+=("$arg") ;;
    --no-bundle) make_bundle=0 ;;
    -h | --help)
      awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"
      exit 0
      ;;
    *)
      echo "device-check: unknown argument '$arg' (see --help)" >&2
      exit 2
      ;;
  esac
done
if [ -z "$mode" ]; then
  echo "device-check: say --bundle, --run or --dry-run (see --help)" >&2
  exit 2
fi

say() { printf '[device-check %s] %s\n' "$(date +%H:%M:%S)" "$*" >&3; }
loud() { printf '[device-check %s] !!! %s\n' "$(date +%H:%M:%S)" "$*" >&3; }
exec 3>&1

now() { date +%s; }

# Bundled programs get the bundle's libraries and the device's CUDA and NCCL; nothing else does,
# so python3 and PyTorch keep their own.
bun() { env LD_LIBRARY_PATH="$RUN_LD" "$@"; }

results() { python3 "$here/results.py" "$@"; }
TORCH_PROBE=$here/torch_probe.py

# Plain shellcheck does not follow it (SC1091), shellcheck -x does; stages.sh passes on its own too.
# shellcheck disable=SC1091 source-path=SCRIPTDIR source=device-check/stages.sh
. "$here/stages.sh"

# ---------------------------------------------------------------------------------------------
# What stages use (see stages.sh)

# tmo SECONDS CMD...: runs CMD for at most SECONDS, and never past the current stage's end.
tmo() {
  local want=$1 left
  shift
  left=$((STAGE_END - $(now)))
  [ "$want" -lt "$left" ] || want=$left
  if [ "$want" -le 0 ]; then
    echo "device-check: no time left in this stage for: $*"
    return 124
  fi
  echo "+ (limit ${want}s) $*"
  timeout -k 5 "$want" "$@"
}

# launch [--isolated] SECONDS RANKS [MPIRUN_OPTION...] -- TRAINPROOF_ARG...: RANKS ranks of the
# bundled trainproof under the bundled mpirun, through tmo. --isolated hides this machine's own
# Open MPI first, where the dry run can (ISOLATE). mpirun gets the flags one machine needs: the
# GPU machine runs everything as root, and without --oversubscribe Open MPI refuses more ranks
# than the slots it counts.
launch() {
  local isolate=() limit ranks options=()
  if [ "$1" = --isolated ]; then
    isolate=("${ISOLATE[@]}")
    shift
  fi
  limit=$1 ranks=$2
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    options+=("$1")
    shift
  done
  shift
  tmo "$limit" "${isolate[@]}" env LD_LIBRARY_PATH="$RUN_LD" "$BUNDLE/bin/mpirun" \
    --allow-run-as-root --oversubscribe "${options[@]}" -np "$ranks" "$BUNDLE/bin/trainproof" "$@"
}

fig() { [ -z "$2" ] || FIGURES+=("$1=$2"); }    # a text figure
fign() { [ -z "$2" ] || FIGURES+=("$1:=$2"); } # a number, true or false
verdict() {
  STATUS=$1
  REASON=$2
}
section() { printf '\n===== %s\n' "$*"; }

# Adds a trainproof report's figures (verdict, digest, phase p50s in ms, AU, rates), their names
# prefixed by PREFIX; with a prefix, verdict and digest are left to the caller.
report_figs() {
  local file=$1 prefix=$2 line
  while IFS= read -r line; do
    [ -n "$prefix" ] && [[ $line == verdict=* || $line == final_digest=* ]] && continue
    [ -n "$line" ] && FIGURES+=("$prefix$line")
  done < <(results report-figures "$file")
}

# How a GPU run ended, as a stage status: exit 3 (the run could not complete) on a host where no GPU
# is visible, or exit 2 while the bundle holds no GPU library, is a skip; anything else but 0 fails.
gpu_run_status() {
  local rc=$1
  case $rc in
    0) echo pass ;;
    3) if [ "$GPU_VISIBLE" = yes ]; then echo fail; else echo skip; fi ;;
    2) if [ -f "$BUNDLE/bin/libtrainproof_gpu.so" ]; then echo fail; else echo skip; fi ;;
    *) echo fail ;;
  esac
}
gpu_run_reason() {
  local rc=$1 log=$2 what=$3 line
  line=$(grep -E 'error|Error|ERROR|fail' "$log" | grep -v '^+' | tail -1 | cut -c1-240)
  case $rc in
    0) echo "$what: exit 0" ;;
    124 | 137) echo "$what: timed out" ;;
    3) if [ "$GPU_VISIBLE" = yes ]; then echo "$what: exit 3 although a GPU is visible: $line"; else echo "no GPU visible ($what: exit 3: $line)"; fi ;;
    2) if [ -f "$BUNDLE/bin/libtrainproof_gpu.so" ]; then echo "$what: exit 2 (usage): $line"; else echo "the GPU backend library was not built ($what: exit 2)"; fi ;;
    *) echo "$what: exit $rc: $line" ;;
  esac
}

# ---------------------------------------------------------------------------------------------
# Setting up: unpack, relocate Open MPI, find the device's CUDA and NCCL

unpack_bundle() {
  local tarball=$repo/.device-bundle.tar.xz parent=${TMPDIR:-/tmp}/trainproof-device
  if [ -f "$tarball" ]; then
    rm -rf "$parent"
    mkdir -p "$parent"
    say "unpacking .device-bundle.tar.xz ($(($(stat -c %s "$tarball") / 1048576)) MiB) into $parent"
    if command -v xz >/dev/null; then
      tar -C "$parent" -xJf "$tarball" || return 1
    else # no xz on the machine: Python's lzma reads it too
      python3 -c 'import sys, tarfile
t = tarfile.open(sys.argv[1])
t.extractall(sys.argv[2], **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))' \
        "$tarball" "$parent" || return 1
    fi
    BUNDLE=$parent/.device-bundle
  elif [ -d "$repo/.device-bundle" ]; then
    BUNDLE=$repo/.device-bundle
    say "using the unpacked bundle in .device-bundle/"
  else
    loud "no .device-bundle.tar.xz in $repo: build it with scripts/device-check.sh --bundle and bring it along"
    return 1
  fi
  [ -f "$BUNDLE/env.sh" ] || return 1
}

# Adds to RUN_LD the folders that hold the CUDA, NCCL and driver libraries the GPU parts need and
# the bundle does not carry. NCCL comes preferably from the device's pip package (the one PyTorch
# uses), the CUDA runtime and cuBLAS from the toolkit nvcc belongs to; LD_LIBRARY_PATH makes that
# choice win over the build machine's RUNPATH. Then whatever still does not resolve (the driver,
# say) is looked for in the usual places.
locate_gpu_libraries() {
  local gpu_files=() file name round
  for file in "$BUNDLE/bin/libtrainproof_gpu.so" "$BUNDLE/bin/gpu_tests"; do
    [ -f "$file" ] && gpu_files+=("$file")
  done
  [ "${#gpu_files[@]}" -gt 0 ] || return 0
  mapfile -t PIP_LIB_DIRS < <(timeout 30 python3 "$TORCH_PROBE" lib-dirs 2>/dev/null)
  for name in $(for file in "${gpu_files[@]}"; do bun ldd "$file" 2>/dev/null; done |
    awk '$2 == "=>" && $1 ~ /^lib(nccl|cudart|cublas|cublasLt)\.so/ {print $1}' | sort -u); do
    add_lib_dir "$name"
  done
  for round in 1 2 3; do
    local unresolved=()
    mapfile -t unresolved < <(for file in "${gpu_files[@]}"; do bun ldd "$file" 2>/dev/null; done |
      awk '$2 == "=>" && $3 == "not" {print $1}' | sort -u)
    [ "${#unresolved[@]}" -gt 0 ] || return 0
    [ "$round" -lt 3 ] || return 0
    for name in "${unresolved[@]}"; do add_lib_dir "$name"; done
  done
}

# add_lib_dir SONAME: puts the first folder that holds SONAME, in order of preference, on RUN_LD.
add_lib_dir() {
  local name=$1 dir='' candidate order
  local toolkit=(/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib)
  local system=(/usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib/wsl/lib)
  order=("${toolkit[@]}" "${PIP_LIB_DIRS[@]}" "${system[@]}")
  [[ $name == libnccl* ]] && order=("${PIP_LIB_DIRS[@]}" "${toolkit[@]}" "${system[@]}")
  for candidate in "${order[@]}"; do
    if [ -e "$candidate/$name" ]; then
      dir=$candidate
      break
    fi
  done
  if [ -z "$dir" ] && [ "$MODE" = device ]; then # last resort: search the machine
    dir=$(timeout 30 find / \( -path /proc -o -path /sys -o -path /dev -o -path "$BUNDLE" \) -prune \
      -o -name "$name" ! -path '*/stubs/*' -print 2>/dev/null | head -1)
    dir=${dir:+$(dirname "$dir")}
  fi
  if [ -z "$dir" ]; then
    GPU_LIB_DIRS+=("$name: not found")
  else
    GPU_LIB_DIRS+=("$name: $dir")
    [[ ":$RUN_LD:" == *":$dir:"* ]] || RUN_LD=$RUN_LD:$dir
  fi
}

setup() {
  local line
  STARTED=$(date +%Y-%m-%dT%H:%M:%S%z)
  if [ "$MODE" = device ]; then
    OUT=${OUT:-$repo/out/device-check}
    WORK=${TMPDIR:-/tmp}/trainproof-device-check
  else
    OUT=$repo/out/device-check-dry
    WORK=$repo/out/device-check-dry.work
  fi
  rm -rf "$WORK" "$OUT"/summary.json "$OUT"/summary.md "$OUT"/console.log "$OUT"/gpu_tests.json "$OUT"/stages.tar.gz
  mkdir -p "$OUT" "$WORK/results" || return 1
  exec > >(tee "$OUT/console.log") 2>&1
  TEE_PID=$!
  exec 3>&1
  say "mode $MODE; results in $OUT; stage logs in $WORK"
  DEADLINE=$(($(now) + ${DEVICE_CHECK_BUDGET_S:-420}))
  summarise

  unpack_bundle || return 1
  # shellcheck source=/dev/null
  . "$BUNDLE/env.sh"
  RUN_LD=$BUNDLE_LD
  GPU_LIB_DIRS=()
  PIP_LIB_DIRS=()
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  # Shared-memory transport files go to /dev/shm; a sandbox without a writable one gets /tmp.
  [ -w /dev/shm ] || export OMPI_MCA_btl_vader_backing_directory=${TMPDIR:-/tmp}
  locate_gpu_libraries
  say "library path for bundled programs: $RUN_LD"
  for line in "${GPU_LIB_DIRS[@]}"; do say "  $line"; done

  GPU_VISIBLE=no
  if command -v nvidia-smi >/dev/null && timeout 30 nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    GPU_VISIBLE=yes
  fi
  # How many GPUs the multi-GPU stages use. The dry run lists eight through a fake nvidia-smi, so
  # that the branch a multi-GPU machine takes is walked here too (its GPU runs then skip).
  local lister=${DEVICE_CHECK_NVIDIA_SMI:-nvidia-smi}
  [ "$MODE" = dry-run ] && lister=${DEVICE_CHECK_NVIDIA_SMI:-$here/fake-nvidia-smi.sh}
  GPU_COUNT=$(timeout 30 "$lister" -L 2>/dev/null | grep -c '^GPU ')
  [ -n "$GPU_COUNT" ] || GPU_COUNT=0
  PIN_ONE_GPU=()
  [ "$GPU_COUNT" -gt 1 ] && PIN_ONE_GPU=(-x CUDA_VISIBLE_DEVICES=0)
  say "GPU visible: $GPU_VISIBLE; GPUs listed by $lister: $GPU_COUNT"

  # The dry run hides this machine's own Open MPI, PMIx, ssh/rsh and every library the bundle
  # carries from the CPU smoke run, so that only the bundle can satisfy it, as on the GPU machine.
  # The mounts that do it need root and a private mount namespace.
  ISOLATE=()
  if [ "$MODE" = dry-run ]; then
    if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
      ISOLATE=(unshare -m "$here/isolate.sh" "$BUNDLE/MANIFEST.txt")
    else
      say "note: no private mount namespace here (not root, or unshare refused); this machine's own Open MPI stays visible to the CPU smoke run"
    fi
  fi
}

# ---------------------------------------------------------------------------------------------
# Driver

run_stage() {
  local name=$1 limit=${STAGE_LIMIT_S[$1]} left start seconds
  left=$((DEADLINE - $(now)))
  STATUS=fail
  REASON="the stage ended without a verdict"
  FIGURES=()
  STAGE_LOG=$WORK/$name.log
  start=$EPOCHREALTIME
  if [ "$left" -lt 20 ]; then
    STATUS=not-run
    REASON="the time budget (DEVICE_CHECK_BUDGET_S) was spent before this stage"
  else
    [ "$limit" -lt "$left" ] || limit=$left
    STAGE_END=$(($(now) + limit))
    say "stage $name: ${STAGE_TITLE[$name]} (limit ${limit}s)"
    "stage_$name" >"$STAGE_LOG" 2>&1 </dev/null
  fi
  seconds=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1f", b - a}')
  results stage "$WORK/results/$name.json" "$name" "$STATUS" "$seconds" "$REASON" "${FIGURES[@]}"
  if [ "$STATUS" = fail ]; then loud "$name: FAIL (${seconds}s): $REASON"; else say "  -> $STATUS (${seconds}s): $REASON"; fi
  publish
}

# Writes summary.json and summary.md from the stage results so far; a stage not reached yet is
# listed as not-run.
summarise() {
  results summary "$WORK/results" "$OUT" "$MODE" "$STARTED" "$(
    IFS=,
    echo "${STAGES[*]}"
  )"
}

# Rewrites the summary and the stage archive, so a run stopped at any point returns what it did.
publish() {
  summarise
  cp -f "$BUNDLE/MANIFEST.txt" "$WORK/bundle-MANIFEST.txt" 2>/dev/null
  tar -C "$WORK" -czf "$OUT/stages.tar.gz.tmp" . 2>/dev/null && mv -f "$OUT/stages.tar.gz.tmp" "$OUT/stages.tar.gz"
}

run_checks() {
  local stage overall
  MODE=$1
  if ! setup; then
    loud "set-up failed: no bundle to run (see above)"
    results stage "$WORK/results/environment.json" environment fail 0 "set-up failed: the bundle could not be unpacked"
    summarise
    return 1
  fi
  for stage in "${STAGES[@]}"; do run_stage "$stage"; done
  say "summary ($OUT/summary.md):"
  cat "$OUT/summary.md" >&3
  overall=$(results get "$OUT/summary.json" overall)
  say "overall: $overall"
  [ "$overall" = pass ]
}

case $mode in
  bundle) exec "$repo/scripts/device-bundle.sh" "${pack_args[@]}" ;;
  dry-run)
    if [ "$make_bundle" = 1 ]; then "$repo/scripts/device-bundle.sh" "${pack_args[@]}" || exit 1; fi
    run_checks dry-run
    ;;
  run) run_checks device ;;
esac
rc=$?
# Let tee write the last lines of console.log before the caller collects it.
exec 1>&- 2>&- 3>&-
[ -n "${TEE_PID:-}" ] && wait "$TEE_PID" 2>/dev/null
exit "$rc"
