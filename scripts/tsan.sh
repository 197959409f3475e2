#!/usr/bin/env bash
# ThreadSanitizer lane: builds build-tsan/ (or $TRAINPROOF_TSAN_BUILD_DIR), runs the unit tests
# labelled threads, then a short real run under mpirun -np 2 with every thread of a rank busy at
# once: loader readers on a prepared dataset, the async checkpoint writer (its MPI calls beside
# the step's, under MPI_THREAD_MULTIPLE) and the watchdog. Any report that tests/tsan.supp does
# not suppress fails the lane.
# --build-only builds and stops; --no-build runs what an earlier --build-only built (scripts/test.sh
# builds it beside the integration tests).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${TRAINPROOF_TSAN_BUILD_DIR:-build-tsan}
mode=${1:-all}
case $mode in
  all | --build-only | --no-build) ;;
  *) echo "tsan: unknown argument '$mode' (expected --build-only or --no-build)" >&2; exit 2 ;;
esac

# RelWithDebInfo: an optimised binary keeps the run short, and line tables (-g1, cmake/Warnings.cmake)
# give each report its files and lines.
# Only the two binaries this lane runs are built.
if [ "$mode" != --no-build ]; then
  TRAINPROOF_BUILD_DIR=$build_dir CMAKE_BUILD_TYPE=RelWithDebInfo \
    TRAINPROOF_BUILD_TARGETS="trainproof unit_thread_tests fake_nvml" scripts/build.sh \
    -DTRAINPROOF_TSAN=ON -DTRAINPROOF_CUDA=OFF
fi
[ "$mode" != --build-only ] || exit 0

# exitcode: a process that printed a report exits 66 even when the report did not stop it.
# history_size=7 (the most): a suppression matches a frame of either access, and an access whose
# stack has left the default history prints "failed to restore the stack", matches nothing and
# fails the lane although it is one of Open MPI's hand-overs (the writer thread progressing the
# step's MPI_Iallreduce into the gradients) that tests/tsan.supp names.
export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp exitcode=66 second_deadlock_stack=1 history_size=7"

# --no-tests=error: a lost label would otherwise leave the threads' own tests out unnoticed.
echo "== tsan: unit tests labelled threads"
ctest --test-dir "$build_dir" --output-on-failure --no-tests=error -L threads

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bin=$build_dir/trainproof
failed=0

# tsan_run NAME EXIT ARGS...: trainproof on 2 ranks; fails on another exit status or on any
# report, even one from a rank whose exit status mpirun did not pass on.
tsan_run() {
  local name=$1 want=$2 rc=0
  shift 2
  echo "== tsan: $name"
  local log=$work/$name.log
  scripts/mpirun.sh -np 2 -x TSAN_OPTIONS "$bin" "$@" --log.level=warn >"$log" 2>&1 || rc=$?
  if [ "$rc" -ne "$want" ] || grep -q 'WARNING: ThreadSanitizer' "$log"; then
    cat "$log"
    echo "tsan: FAIL: $name (exit $rc, $(grep -c 'WARNING: ThreadSanitizer' "$log") reports)"
    failed=1
  fi
}

# Negative control: the suppressions must not hide a race between two threads of our own in a
# process whose threads are inside MPI at the same time, as trainproof's are.
cat >"$work/control.cpp" <<'EOF'
#include <mpi.h>
#include <thread>
int unguarded = 0;
void reduce(MPI_Comm comm) {
  double one = 1, sum = 0;
  MPI_Allreduce(&one, &sum, 1, MPI_DOUBLE, MPI_SUM, comm);
  ++unguarded;
}
int main() {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm other;
  MPI_Comm_dup(MPI_COMM_WORLD, &other);
  std::thread t(reduce, other);
  reduce(MPI_COMM_WORLD);
  t.join();
  MPI_Comm_free(&other);
  MPI_Finalize();
}
EOF
mpicxx -std=c++20 -fsanitize=thread -g -O1 "$work/control.cpp" -o "$work/control"
echo "== tsan: negative control (a race in our own code must be reported)"
if scripts/mpirun.sh -np 2 -x TSAN_OPTIONS "$work/control" >"$work/control.log" 2>&1 ||
  ! grep -q 'SUMMARY: ThreadSanitizer: data race .*control.cpp' "$work/control.log"; then
  cat "$work/control.log"
  echo "tsan: FAIL: the deliberate race was not reported; TSan or tests/tsan.supp hides races" >&2
  exit 1
fi

tiny=(--scenario scenarios/tiny.ini)
shape=(--data.samples=256 --data.sample_bytes=4096 --data.files=4)
threads=(--data.prefetch=2 --data.verify=true --checkpoint.async=true --checkpoint.every=3)

tsan_run prepare-raw 0 prepare-data "${tiny[@]}" "${shape[@]}" --data.dir="$work/raw" \
  --report "$work/prepare-raw.json"
tsan_run prepare-hdf5 0 prepare-data "${tiny[@]}" "${shape[@]}" --data.format=hdf5 \
  --data.dir="$work/hdf5" --report "$work/prepare-hdf5.json"
# Each rank writes its own file from the writer thread while the step reduces gradients.
tsan_run train-file-per-rank 0 train "${tiny[@]}" "${threads[@]}" --data.dir="$work/raw" \
  --data.readers=2 --checkpoint.dir="$work/ckpt-fpr" --train.steps=24 --report "$work/fpr.json"
# A restore, then more async checkpoints from the restored loader position.
tsan_run resume-file-per-rank 0 train "${tiny[@]}" "${threads[@]}" --data.dir="$work/raw" \
  --data.readers=2 --checkpoint.dir="$work/ckpt-fpr" --resume=require --train.steps=36 \
  --report "$work/resume.json"
# Collective MPI-IO from the writer thread, HDF5 shards under the readers.
tsan_run train-shared-file 0 train "${tiny[@]}" "${threads[@]}" --data.dir="$work/hdf5" \
  --data.readers=3 --checkpoint.layout=shared-file --checkpoint.dir="$work/ckpt-shared" \
  --train.steps=24 --report "$work/shared.json"
# The watchdog's own thread acts: rank 1 hangs, and the watchdog aborts the job (exit 3) while
# the other threads are mid-step or mid-checkpoint.
tsan_run watchdog-fires 3 train "${tiny[@]}" "${threads[@]}" --data.dir="$work/raw" \
  --data.readers=2 --checkpoint.dir="$work/ckpt-hang" --train.steps=24 \
  --fault hang:rank=1,step=6 --watchdog.timeout_s=2 --report "$work/hang.json"

# node-check --level=full: the burn's threads and the NVML watch's, with the test library
# libnvidia-ml.so.1 answering for two GPUs that raise an XID during the load. No MPI.
echo "== tsan: node-check-full"
cat >"$work/nvml.json" <<'EOF_NVML'
{"driver_version": "550.90.07", "cuda_driver_version": 12040,
 "gpus": [{"name": "NVIDIA H200", "uuid": "GPU-1", "pci_bus_id": "00000000:18:00.0",
           "max_pcie": [5, 16], "health": {"pcie": [1, 16], "clock_event_reasons": 1},
           "later": {"health": {"pcie": [5, 16], "clock_event_reasons": 4}}},
          {"name": "NVIDIA H200", "uuid": "GPU-2", "pci_bus_id": "00000000:28:00.0",
           "max_pcie": [5, 16], "health": {"pcie": [1, 16], "clock_event_reasons": 1},
           "later": {"health": {"pcie": [5, 16], "clock_event_reasons": 4},
                     "xid_events": [79]}}]}
EOF_NVML
rc=0
LD_LIBRARY_PATH="$PWD/$build_dir/tests/fake_nvml" FAKE_NVML_FILE="$work/nvml.json" "$bin" \
  node-check --level=full --health.burn_s=2 --health.sample_s=0.1 \
  --report "$work/node.json" >"$work/node-check-full.log" 2>&1 || rc=$?
# Exit 1: the XID is the node's finding.
if [ "$rc" -ne 1 ] || grep -q 'WARNING: ThreadSanitizer' "$work/node-check-full.log" ||
  ! grep -q 'XID 79' "$work/node-check-full.log"; then
  cat "$work/node-check-full.log"
  echo "tsan: FAIL: node-check-full (exit $rc)"
  failed=1
fi

if [ "$failed" -ne 0 ]; then
  echo "tsan: FAIL (tests/tsan.supp is for races whose ordering is inside a library)" >&2
  exit 1
fi
echo "tsan: no unsuppressed report"
