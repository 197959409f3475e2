#!/usr/bin/env bash
# Checkpoint cost as training pays it, against what the storage and memory need for the same
# bytes, measured in the same run, in rounds that alternate which side goes first:
#   sync stall      the report's saves[].stall_s (file-per-rank, every rank writes its replica)
#                   against fio writing the same bytes, files and writers, fsync at each file's end
#   async stall     the stall with checkpoint.async=true (1 rank, a checkpoint interval longer
#                   than its time to durable, so the stall is the snapshot, not a wait for the
#                   previous write) against one memcpy of the same bytes into touched memory
#   time to durable async: from the checkpoint hook to the commit, against fio (1 writer)
#   cold restore    restore.seconds (read, verify, decode; checkpoint.cold_read=true) against
#                   fio's read of the same files with the page cache dropped first
#   shared file     the sync stall and cold restore of checkpoint.layout=shared-file against fio
#                   writing and reading one shared file at the ranks' offsets (offset_increment)
# Each figure is a median over the saves of a run (the first save, which touches its memory for
# the first time, is reported apart), then a ratio per round, then the median of the rounds.
# Each ratio is printed beside its target, marked met or NOT MET; the script never fails on a
# ratio, only on a run that broke (a trainproof exit other than 0 or 1, a missing figure, fio).
# Usage: [ROUNDS=3] [SIZES="small big"] [SAVES=3] [LAYOUTS="file-per-rank shared-file"] [QUICK=1]
#        bench/checkpoint-bandwidth.sh [FOLDER] [RANKS]
#   SIZES: tiny (8 MB per rank), small (268 MB: 8 layers x 2048), big (2.1 GB: 16 layers x 4096);
#   a size that does not fit in the free memory or disk is skipped with a message.
#   QUICK=1: a smoke run (tiny, 1 round, 2 saves). Needs scripts/build.sh first; root to drop the
#   page cache before fio's reads.
set -euo pipefail
cd "$(dirname "$0")/.."
folder=${1:-out/bench/ckpt-folder}
ranks=${2:-2}
if [ "${QUICK:-0}" = 1 ]; then
  rounds=${ROUNDS:-1} sizes=${SIZES:-tiny} saves=${SAVES:-2}
else
  rounds=${ROUNDS:-3} sizes=${SIZES:-small big} saves=${SAVES:-3}
fi
layouts=${LAYOUTS:-file-per-rank shared-file}
out=out/bench/checkpoint
fio_dir="$folder/fio"
tp_dir="$folder/trainproof"
# The async run's steps sleep this long on top of their compute (the slow fault: a sleep, as a
# host thread waiting for its GPU), so an interval longer than the time to durable stays short.
pad_ms=50
rm -rf "$out"
mkdir -p "$out" "$folder"
for tool in build/trainproof build/bench/memory_copy; do
  [ -x "$tool" ] || { echo "checkpoint-bandwidth: $tool missing; run scripts/build.sh" >&2; exit 1; }
done
command -v fio >/dev/null || { echo "checkpoint-bandwidth: fio missing; run scripts/setup.sh" >&2; exit 1; }

drop_caches() { sync; if [ "$(id -u)" -eq 0 ]; then echo 3 >/proc/sys/vm/drop_caches; fi; }
die() { echo "checkpoint-bandwidth: $*" >&2; exit 1; }
json_field() { python3 -c 'import json, sys; print(eval(sys.argv[2], {"r": json.load(open(sys.argv[1]))}))' "$@"; }

set_model() {
  case $1 in
    tiny) layers=4 hidden=512 ;;
    small) layers=8 hidden=2048 ;;
    big) layers=16 hidden=4096 ;;
    *) die "unknown size '$1' in SIZES (tiny, small, big)" ;;
  esac
}

# Per rank the run holds parameters, gradients and momentum (1.5x the state) and a checkpoint's
# encoded copy; the folder holds keep + 1 checkpoints and fio's files.
fits() {
  local state=$1 avail_mem avail_disk need_mem need_disk
  avail_mem=$(($(awk '/^MemAvailable:/ {print $2}' /proc/meminfo) * 1024))
  avail_disk=$(df -B1 --output=avail "$folder" | tail -n 1)
  need_mem=$((ranks * state * 3 + (1 << 30)))
  need_disk=$((ranks * state * 3 + (1 << 30)))
  if [ "$need_mem" -gt "$avail_mem" ] || [ "$need_disk" -gt "$avail_disk" ]; then
    echo "checkpoint-bandwidth: skipping size $size: needs about $((need_mem >> 20)) MiB of memory" \
      "($((avail_mem >> 20)) available) and $((need_disk >> 20)) MiB of disk ($((avail_disk >> 20)) free)" >&2
    return 1
  fi
}

# One trainproof run; its report is $out/NAME.json. Exit 1 is a FAIL verdict, a judgement of the
# run that the report explains, not a broken benchmark; any other failure is.
# launch_flags: extra mpirun flags for this run.
launch_flags=()
run_tp() {
  local name=$1 np=$2 rc=0
  shift 2
  rm -f "$out/$name.json"
  scripts/mpirun.sh -np "$np" "${launch_flags[@]}" build/trainproof train "$@" --report "$out/$name.json" \
    >"$out/$name.log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ] && { [ "$rc" -ne 1 ] || [ ! -s "$out/$name.json" ]; }; then
    tail -n 20 "$out/$name.log" >&2
    die "trainproof run $name failed (exit $rc); its output: $out/$name.log"
  fi
  [ "$rc" -eq 0 ] || echo "checkpoint-bandwidth: $name: verdict FAIL (see its report), figures kept" >&2
}

# fio writes (fsync at the end of each file) then reads cold, JOBS writers of BYTES each, in
# files of their own or, for shared-file, at their offsets in one file.
run_fio() {
  local name=$1 layout=$2 jobs=$3 bytes=$4 shared=() block=$((16 << 20)) size
  if [ "$bytes" -lt "$block" ]; then block=$((bytes / 4096 * 4096)); fi
  # Whole blocks: fio leaves out the last few KB (the files' HDF5 metadata); the table scales
  # fio's time to the full bytes.
  size=$((bytes / block * block))
  if [ "$layout" = shared-file ]; then shared=(--filename=shared --offset_increment="$size"); fi
  local common=(--name=ckpt --directory="$fio_dir" "${shared[@]}" --bs="$block" --size="$size"
                --numjobs="$jobs" --group_reporting --output-format=json)
  rm -rf "$fio_dir"
  mkdir -p "$fio_dir"
  fio "${common[@]}" --rw=write --end_fsync=1 >"$out/$name-write.json" || die "fio write $name failed"
  if [ "${5:-}" != write-only ]; then
    drop_caches
    fio "${common[@]}" --rw=read >"$out/$name-read.json" || die "fio read $name failed"
  fi
  rm -rf "$fio_dir"
}

# Sync saves (every step, SAVES steps) then a cold restore of the last, RANKS ranks.
run_tp_layout() {
  local name=$1 layout=$2
  rm -rf "$tp_dir"
  sync
  run_tp "$name-sync" "$ranks" "${model[@]}" --model.batch="$ranks" "${ckpt[@]}" \
    --checkpoint.layout="$layout" --train.steps="$saves" --checkpoint.every=1
  run_tp "$name-restore" "$ranks" "${model[@]}" --model.batch="$ranks" "${ckpt[@]}" \
    --checkpoint.layout="$layout" --train.steps="$saves" --checkpoint.every="$((saves + 1))" \
    --resume auto --checkpoint.cold_read=true
  rm -rf "$tp_dir"
}

run_layout() {
  local name=$1 layout=$2 round=$3 per_rank
  if ((round % 2)); then run_tp_layout "$name" "$layout"; fi
  # fio's bytes per writer: in the odd rounds from this round's report, else the expected ones
  # (the files' HDF5 metadata is a few KB on top of the state).
  if [ -s "$out/$name-sync.json" ]; then
    per_rank=$(json_field "$out/$name-sync.json" "r['checkpoint']['bytes'] // $ranks")
  else
    per_rank=$(cat "$out/$size-$layout-bytes")
  fi
  run_fio "$name-fio" "$layout" "$ranks" "$per_rank"
  if ! ((round % 2)); then run_tp_layout "$name" "$layout"; fi
  json_field "$out/$name-sync.json" "r['checkpoint']['bytes'] // $ranks" >"$out/$size-$layout-bytes"
}

# Async, 1 rank unbound (on 2 cores a second busy rank, or a binding to one core, leaves the writer
# thread no core of its own; trainproof warns when that happens), saves spaced
# wider than 1.5 times the slowest sync stall of this round (2 writers), which bounds the time
# to durable of 1 writer from above.
run_async() {
  local name=$1 round=$2 sync_report=$3 every bytes
  every=$(python3 - "$sync_report" "$pad_ms" <<'PY'
import json, math, sys
r = json.load(open(sys.argv[1]))
stalls = [s["stall_s"] for s in r["checkpoint"]["saves"]]
phases = r["train"]["phases"]
# A step of 1 rank may take half the time of a step of 2 on 2 cores: the estimate errs short, so
# the interval errs long.
work = min(phases["step"]["p50"] - phases["checkpoint"]["p50"],
           phases["compute"]["p50"] + phases["optimizer"]["p50"])
step = max(work, 0.0) / 2 + float(sys.argv[2]) / 1e3
print(max(2, math.ceil((1.5 * max(stalls) + 1.0) / step)))
PY
)
  bytes=$(json_field "$sync_report" "r['checkpoint']['bytes'] // $ranks")
  async_tp() {
    rm -rf "$tp_dir"
    sync
    launch_flags=(--bind-to none)
    run_tp "$name-async" 1 "${model[@]}" --model.batch=1 "${ckpt[@]}" --checkpoint.async=true \
      --train.steps="$((saves * every))" --checkpoint.every="$every" --fault "slow:rank=0,ms=$pad_ms"
    launch_flags=()
    rm -rf "$tp_dir"
  }
  one_copy() { build/bench/memory_copy --bytes="$bytes" --repeats=3 >"$out/$name-copy.json"; }
  if ((round % 2)); then async_tp; one_copy; run_fio "$name-fio-async" file-per-rank 1 "$bytes" write-only
  else run_fio "$name-fio-async" file-per-rank 1 "$bytes" write-only; one_copy; async_tp; fi
}

measured_sizes=()
for size in $sizes; do
  set_model "$size"
  state=$((layers * hidden * hidden * 4 * 2))
  fits "$state" || continue
  measured_sizes+=("$size")
  model=(--model.layers="$layers" --model.hidden="$hidden" --model.seq=8
         --train.optimizer=sgd-momentum --train.warmup_steps=0 --log.level=warn)
  ckpt=(--checkpoint.dir="$tp_dir" --checkpoint.keep=1)
  echo "checkpoint-bandwidth: $size ($layers x $hidden, $((state >> 20)) MiB per rank): $rounds rounds" >&2
  for round in $(seq 1 "$rounds"); do
    for layout in $layouts; do
      run_layout "$size-r$round-$layout" "$layout" "$round"
    done
    if [[ " $layouts " == *" file-per-rank "* ]]; then
      run_async "$size-r$round" "$round" "$out/$size-r$round-file-per-rank-sync.json"
    fi
  done
done
[ ${#measured_sizes[@]} -gt 0 ] || die "no size fits this machine"

python3 bench/checkpoint_bandwidth_table.py "$out" "$ranks" "$rounds" "$saves" \
  "${layouts}" "${measured_sizes[@]}"
