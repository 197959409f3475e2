#!/usr/bin/env bash
# The README's test command and CI's (.ci/run). Lanes run from the quickest to the slowest, so a
# format slip, a shell script warning, an include against the layers or a failing unit test
# stops the run in its first minutes, before the MPI and Slurm integration tests and the
# sanitizer builds. Each lane prints "== lane: NAME" and, when it ends, its wall time; the last
# lines list every lane's time and the total, held to CI's budget of 45 minutes on a fresh 2-core
# machine (README "Development": each lane's time, fresh and warm).
# TRAINPROOF_SANITIZE_TESTS=0 skips the two sanitizer lanes.
set -euo pipefail
cd "$(dirname "$0")/.."

budget_s=2700
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
# The sanitizer builds run in the background while the integration tests that measure no time
# run (below); they are a process group of their own, so they can be paused and ended at once.
sanitizer_builds=""
sanitizer_builds_start=0
# set -e ends the run inside a lane without passing end_lane; say which lane it was.
on_exit() {
  local rc=$?
  if [ -n "$sanitizer_builds" ]; then
    kill -CONT -- "-$sanitizer_builds" 2>/dev/null || true
    kill -TERM -- "-$sanitizer_builds" 2>/dev/null || true
  fi
  if [ "$rc" -ne 0 ] && [ -n "$lane_name" ]; then
    echo "== lane: $lane_name: FAILED after $((SECONDS - lane_start))s (exit $rc)" >&2
  fi
}
trap on_exit EXIT
sanitize=${TRAINPROOF_SANITIZE_TESTS:-1}

# Both sanitizer builds, one after the other, at the lowest priority (SCHED_IDLE where chrt has
# it): they take a core only when the tests beside them leave it idle. Their logs and progress
# marks go to build-ci/.
ci_dir=build-ci
idle=(nice -n 19)
if chrt --idle 0 true 2>/dev/null; then idle=(chrt --idle 0 nice -n 19); fi
start_sanitizer_builds() {
  rm -rf "$ci_dir" && mkdir -p "$ci_dir"
  set -m  # a process group of its own
  (
    if "${idle[@]}" scripts/asan.sh --build-only >"$ci_dir/asan.log" 2>&1; then
      touch "$ci_dir/asan.done"
    fi
    if "${idle[@]}" scripts/tsan.sh --build-only >"$ci_dir/tsan.log" 2>&1; then
      touch "$ci_dir/tsan.done"
    fi
  ) &
  sanitizer_builds=$!
  set +m
  sanitizer_builds_start=$SECONDS
  echo "== sanitizer builds started in the background ($ci_dir/asan.log, $ci_dir/tsan.log)"
}
# wait_for_build asan|tsan: resumes the background builds and waits until that one is built;
# fails with the tail of its log when it did not build.
wait_for_build() {
  kill -CONT -- "-$sanitizer_builds" 2>/dev/null || true
  while [ ! -e "$ci_dir/$1.done" ] && kill -0 "$sanitizer_builds" 2>/dev/null; do sleep 1; done
  if [ ! -e "$ci_dir/$1.done" ]; then
    tail -50 "$ci_dir/$1.log" >&2
    echo "test.sh: the $1 build failed ($ci_dir/$1.log)" >&2
    exit 1
  fi
  echo "== $1 build ready, $((SECONDS - sanitizer_builds_start))s after the background builds began"
}

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

# First the tests that measure no time, two at a time, with the sanitizer builds beside them at the
# lowest priority; then, the builds paused (SIGSTOP), the tests labelled timing, each alone: even
# a SCHED_IDLE build beside them once made a healthy node of the fabric test look slow. The
# builds go on during the device dry run.
lane integration
if [ "$sanitize" != 0 ]; then start_sanitizer_builds; fi
ctest --test-dir build --output-on-failure --timeout 600 -j "$jobs" -LE 'unit|timing'
if [ -n "$sanitizer_builds" ]; then kill -STOP -- "-$sanitizer_builds" 2>/dev/null || true; fi
ctest --test-dir build --output-on-failure --timeout 600 -L timing -LE unit
if [ -n "$sanitizer_builds" ]; then kill -CONT -- "-$sanitizer_builds" 2>/dev/null || true; fi

# The GPU machine's prepared check must not rot between device windows: bundle this build and run
# every CPU-side stage of it (GPU stages report "skip" here).
lane device-dry-run
TRAINPROOF_DEVICE_BUILD_DIR=build scripts/device-check.sh --dry-run --no-pack --no-build

if [ "$sanitize" != 0 ]; then
  # ASan and UBSan: the unit tests (each GoogleTest program in one process, scripts/asan.sh says
  # why), built in the background since the integration lane.
  lane asan-ubsan
  wait_for_build asan
  scripts/asan.sh --no-build

  lane tsan
  wait_for_build tsan
  sanitizer_builds=""
  scripts/tsan.sh --no-build
fi
end_lane

total=$((SECONDS - run_start))
echo "== lane times"
printf '  %s\n' "${times[@]}"
printf '  %-15s %5ss (budget %ss)\n' total "$total" "$budget_s"
if [ "$total" -gt "$budget_s" ]; then
  echo "== over the 45-minute CI budget: $total s of $budget_s s (README \"Development\")"
fi
echo "== all tests passed"
