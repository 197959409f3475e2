#!/usr/bin/env bash
# The README's test command and CI's (.ci/run). Lanes run from the quickest to the slowest, so a
# format slip, a shell script warning, an include against the layers or a failing unit test
# stops the run in its first minutes, before the MPI and Slurm integration tests and the
# sanitizer builds. Each lane prints "== lane: NAME" and, when it ends, its wall time; the last
# lines list every lane's time and the total, held to CI's budget of 30 minutes on a fresh 2-core
# machine (README "Development": each lane's time, fresh and warm).
# TRAINPROOF_SANITIZE_TESTS=0 skips the two sanitizer lanes.
set -euo pipefail
cd "$(dirname "$0")/.."

budget_s=1800
run_start=$SECONDS
lane_name=""
lane_start=$SECONDS
times=()
end_lane() {
  [ -n "$lane_name" ] || return 0
  local took=$((SECONDS - lane_start))
  echo "== lane: $lane_name: ${took}s"
  times+=("$(printf '%-15s %5ss' "$lane_name" "$took")")
  lane_name=""
}
lane() {
  end_lane
  lane_name=$1
  lane_start=$SECONDS
  echo "== lane: $lane_name"
}
# set -e ends the run inside a lane without passing end_lane; say which lane it was.
on_exit() {
  local rc=$?
  if [ "$rc" -ne 0 ] && [ -n "$lane_name" ]; then
    echo "== lane: $lane_name: FAILED after $((SECONDS - lane_start))s (exit $rc)" >&2
  fi
}
trap on_exit EXIT

lane setup
scripts/setup.sh

lane format
scripts/format.sh --check

lane shellcheck
scripts/shellcheck.sh

lane layers
scripts/check-layers.sh

# The GPU backend is compiled for one architecture here: enough to prove it compiles. The device
# check builds its own bundle for the GPU it runs on (scripts/device-bundle.sh).
lane build
scripts/build.sh -DCMAKE_CUDA_ARCHITECTURES=90

# Two tests at a time; those labelled `timing` run alone (tests/CMakeLists.txt says why).
jobs=$(nproc)
lane unit
ctest --test-dir build --output-on-failure --timeout 600 -j "$jobs" -L unit

lane function-size
scripts/function-size.sh build

lane integration
ctest --test-dir build --output-on-failure --timeout 600 -j "$jobs" -LE unit

# The GPU machine's prepared check must not rot between device windows: bundle this build and run
# every CPU-side stage of it (GPU stages report "skip" here).
lane device-dry-run
TRAINPROOF_DEVICE_BUILD_DIR=build scripts/device-check.sh --dry-run --no-pack --no-build

if [ "${TRAINPROOF_SANITIZE_TESTS:-1}" != 0 ]; then
  # Only what the unit label runs: the three GoogleTest programs, and trainproof for the GPU
  # boundary test.
  lane asan-ubsan
  TRAINPROOF_BUILD_DIR=build-asan CMAKE_BUILD_TYPE=Debug \
    TRAINPROOF_BUILD_TARGETS="trainproof unit_tests unit_rank_tests unit_thread_tests" \
    scripts/build.sh -DTRAINPROOF_SANITIZE=ON -DTRAINPROOF_CUDA=OFF
  LSAN_OPTIONS="suppressions=$(pwd)/tests/lsan.supp" ctest --test-dir build-asan --output-on-failure \
    -j "$jobs" -L unit

  lane tsan
  scripts/tsan.sh
fi
end_lane

total=$((SECONDS - run_start))
echo "== lane times"
printf '  %s\n' "${times[@]}"
printf '  %-15s %5ss (budget %ss)\n' total "$total" "$budget_s"
if [ "$total" -gt "$budget_s" ]; then
  echo "== over the 30-minute CI budget: $total s of $budget_s s (README \"Development\")"
fi
echo "== all tests passed"
