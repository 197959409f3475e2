#!/usr/bin/env bash
# Data loader throughput: trainproof's read bandwidth (bytes its reader threads read over their
# reading window) against fio reading the same shards with the same block size (one sample), the
# same number of threads, random order, page cache dropped before each, in rounds back to back.
# The model is tiny and prefetch deep, so the readers, not the compute, set the pace.
# Usage: [ROUNDS=6] [READERS=4] [FORMAT=raw] [BIND=none] bench/dataloader-throughput.sh [FOLDER]
#   (needs scripts/build.sh first; root to drop the page cache)
set -euo pipefail
cd "$(dirname "$0")/.."
folder=${1:-out/bench/dataset}
rounds=${ROUNDS:-6}
readers=${READERS:-4}
format=${FORMAT:-raw}
# fio's jobs may run on every CPU; so may the loader's rank, unless BIND=core shows what a
# rank pinned to one core (mpirun's default for small jobs) does to its readers.
bind=${BIND:-none}
out=out/bench
mkdir -p "$out"
sample_bytes=$((1 << 20))
shape=(--data.dir="$folder" --data.format="$format" --data.files=4 --data.samples=1024
       --data.sample_bytes="$sample_bytes")
drop_caches() { sync; if [ "$(id -u)" -eq 0 ]; then echo 3 >/proc/sys/vm/drop_caches; fi; }

scripts/mpirun.sh -np 1 build/trainproof prepare-data "${shape[@]}" >/dev/null
# fio: one job per reader, each over its own shards (round robin), reading each of its blocks
# once in random order. Jobs sharing files would each keep their own random map and read some
# blocks twice, the second time from the page cache, which flatters fio.
mapfile -t fio_jobs < <(python3 - "$folder/index.json" "$readers" <<'PY'
import json, sys
shards = json.load(open(sys.argv[1]))["shards"]
readers = int(sys.argv[2])
for job in range(readers):
    mine = shards[job::readers]
    if mine:
        print(f"--name=reader{job}")
        print("--filename=" + ":".join(s["name"] for s in mine))
        print(f"--size={sum(s['bytes'] for s in mine)}")
PY
)
run_loader() {
  drop_caches
  scripts/mpirun.sh --bind-to "$bind" -np 1 build/trainproof train "${shape[@]}" \
    --data.readers="$readers" \
    --data.prefetch=16 --model.layers=1 --model.hidden=32 --model.seq=4 --model.batch=16 \
    --train.epochs=1 --train.warmup_steps=0 --log.level=warn \
    --report "$out/loader-$1.json" >/dev/null
}
run_fio() {
  drop_caches
  fio --directory="$folder" --rw=randread --bs="$sample_bytes" --ioengine=psync \
    --group_reporting --output-format=json "${fio_jobs[@]}" >"$out/fio-loader-$1.json"
}
# Shared or virtual storage drifts over seconds: alternate which side goes first, so a drift
# favours each side in turn and the median ratio cancels it.
for round in $(seq 1 "$rounds"); do
  if ((round % 2)); then run_loader "$round"; run_fio "$round"
  else run_fio "$round"; run_loader "$round"; fi
done

python3 - "$out" "$rounds" "$readers" "$format" "$bind" <<'PY'
import json, statistics, sys
out, rounds, readers, fmt, bind = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
rows = []
for r in range(1, rounds + 1):
    data = json.load(open(f"{out}/loader-{r}.json"))["data"]
    fio = json.load(open(f"{out}/fio-loader-{r}.json"))["jobs"][0]["read"]["bw_bytes"] / 1e9
    rows.append({"trainproof_gbps": data["read_gbps"], "fio_gbps": fio,
                 "ratio": data["read_gbps"] / fio})
result = {"format": fmt, "readers": readers, "bind": bind, "rounds": rows,
          "ratio": statistics.median(r["ratio"] for r in rows)}
json.dump(result, open(f"{out}/dataloader-throughput.json", "w"), indent=2)
print(f"{fmt}, {readers} readers, 1 MiB samples, cold cache, rank bound to {bind}, {rounds} rounds")
for i, r in enumerate(rows, 1):
    print(f"  round {i}: trainproof {r['trainproof_gbps']:.2f} GB/s, fio {r['fio_gbps']:.2f} GB/s ({r['ratio']:.2f})")
print(f"read: median ratio {result['ratio']:.2f} of fio (target >= 0.85)")
PY
