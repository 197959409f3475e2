#!/usr/bin/env bash
# Checkpoint bandwidth: trainproof's aggregate checkpoint write and cold restore against fio in the
# same run, with the same bytes per writer, the same number of writers and the same folder.
#   write: fio sequential write, fsync at the end of each file (as trainproof fsyncs each file)
#   read:  page cache dropped first (as checkpoint.cold_read=true does for trainproof)
#   LAYOUT=shared-file: trainproof writes one file through MPI-IO; fio's jobs then write and read
#   their own ranges of one shared file (offset_increment), as the ranks' hyperslabs are.
# Usage: [ROUNDS=3] [LAYOUT=file-per-rank] bench/checkpoint-bandwidth.sh [FOLDER] [RANKS]   (needs scripts/build.sh
# first; root to drop the page cache before fio's read)
set -euo pipefail
cd "$(dirname "$0")/.."
folder=${1:-out/bench/ckpt-folder}
ranks=${2:-2}
out=out/bench
mkdir -p "$out" "$folder"
model=(--model.layers=8 --model.hidden=2048 --model.seq=8 --model.batch="$ranks"
       --train.optimizer=sgd-momentum --train.warmup_steps=0 --log.level=warn)
layout=${LAYOUT:-file-per-rank}
ckpt=(--checkpoint.dir="$folder/trainproof" --checkpoint.keep=1 --checkpoint.layout="$layout")

rounds=${ROUNDS:-3}
fio_dir="$folder/fio"
drop_caches() { sync; if [ "$(id -u)" -eq 0 ]; then echo 3 >/proc/sys/vm/drop_caches; fi; }
# Storage on shared machines drifts by tens of percent between minutes, so each round runs
# trainproof and fio back to back, and the figure is the median of the per-round ratios.
for round in $(seq 1 "$rounds"); do
  rm -rf "$folder/trainproof"
  scripts/mpirun.sh -np "$ranks" build/trainproof train "${model[@]}" "${ckpt[@]}" \
    --train.steps=1 --checkpoint.every=1 --report "$out/ckpt-write-$round.json" >/dev/null
  scripts/mpirun.sh -np "$ranks" build/trainproof train "${model[@]}" "${ckpt[@]}" \
    --train.steps=1 --checkpoint.every=4 --resume auto --checkpoint.cold_read=true \
    --report "$out/ckpt-restore-$round.json" >/dev/null
  per_rank=$(python3 -c 'import json; print(json.load(open("'"$out/ckpt-write-$round.json"'"))["checkpoint"]["bytes"] // '"$ranks"')')
  rm -rf "$folder/trainproof" "$fio_dir"
  mkdir -p "$fio_dir"
  shared=()
  if [ "$layout" = shared-file ]; then shared=(--filename=shared --offset_increment="$per_rank"); fi
  fio --name=ckpt --directory="$fio_dir" "${shared[@]}" --rw=write --bs=16M --size="$per_rank" \
    --numjobs="$ranks" --end_fsync=1 --group_reporting --output-format=json \
    >"$out/fio-write-$round.json"
  drop_caches
  fio --name=ckpt --directory="$fio_dir" "${shared[@]}" --rw=read --bs=16M --size="$per_rank" \
    --numjobs="$ranks" --group_reporting --output-format=json >"$out/fio-read-$round.json"
  rm -rf "$fio_dir"
done

python3 - "$out" "$ranks" "$per_rank" "$rounds" "$layout" <<'PY'
import json, statistics, sys
out, ranks, per_rank, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
layout = sys.argv[5]
rows = []
for r in range(1, rounds + 1):
    write = json.load(open(f"{out}/ckpt-write-{r}.json"))["checkpoint"]
    restore = json.load(open(f"{out}/ckpt-restore-{r}.json"))["checkpoint"]["restore"]
    fio_w = json.load(open(f"{out}/fio-write-{r}.json"))["jobs"][0]["write"]["bw_bytes"] / 1e9
    fio_r = json.load(open(f"{out}/fio-read-{r}.json"))["jobs"][0]["read"]["bw_bytes"] / 1e9
    rows.append({"trainproof_write_gbps": write["write_gbps"], "fio_write_gbps": fio_w,
                 "write_ratio": write["write_gbps"] / fio_w,
                 "trainproof_restore_gbps": restore["restore_gbps"], "fio_read_gbps": fio_r,
                 "restore_ratio": restore["restore_gbps"] / fio_r})
result = {"layout": layout, "ranks": ranks, "bytes_per_rank": per_rank, "rounds": rows,
          "write_ratio": statistics.median(r["write_ratio"] for r in rows),
          "restore_ratio": statistics.median(r["restore_ratio"] for r in rows)}
json.dump(result, open(f"{out}/checkpoint-bandwidth.json", "w"), indent=2)
print(f"{layout}: {ranks} writers x {per_rank / 1e6:.0f} MB, {rounds} rounds")
for i, r in enumerate(rows, 1):
    print(f"  round {i}: write {r['trainproof_write_gbps']:.2f} vs fio {r['fio_write_gbps']:.2f} GB/s"
          f" ({r['write_ratio']:.2f}); cold restore {r['trainproof_restore_gbps']:.2f} vs fio"
          f" {r['fio_read_gbps']:.2f} GB/s ({r['restore_ratio']:.2f})")
print(f"write:   median ratio {result['write_ratio']:.2f} of fio (target >= 0.9)")
print(f"restore: median ratio {result['restore_ratio']:.2f} of fio (target >= 0.9)")
PY
