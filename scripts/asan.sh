#!/usr/bin/env bash
# AddressSanitizer and UBSan lane: builds build-asan/ (or $TRAINPROOF_ASAN_BUILD_DIR) with
# -DTRAINPROOF_SANITIZE=ON, then runs every unit test under it: each GoogleTest program once, all
# its tests in one process, and the GPU boundary test on the sanitized trainproof.
# One process per program, not ctest's one per test: a sanitized process takes about 0.85 s to
# start (millions of relocations, the runtime's own set-up) against 0.14 s for the release build,
# which over 570 tests is most of the lane. The unit lane of scripts/test.sh still runs each test
# in a process of its own, so a test that only passes in a fresh process is caught there, and one
# that only passes after another has run is caught here.
# --build-only builds and stops; --no-build runs what an earlier --build-only built (scripts/test.sh
# builds it beside the integration tests).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${TRAINPROOF_ASAN_BUILD_DIR:-build-asan}
mode=${1:-all}
case $mode in
  all | --build-only | --no-build) ;;
  *) echo "asan: unknown argument '$mode' (expected --build-only or --no-build)" >&2; exit 2 ;;
esac

if [ "$mode" != --no-build ]; then
  # Line tables only (-g1): enough for the sanitizers' reports to name file and line.
  TRAINPROOF_BUILD_DIR=$build_dir CMAKE_BUILD_TYPE=Debug \
    TRAINPROOF_BUILD_TARGETS="trainproof unit_tests unit_rank_tests unit_thread_tests" \
    scripts/build.sh -DTRAINPROOF_SANITIZE=ON -DTRAINPROOF_CUDA=OFF \
    -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DCMAKE_C_FLAGS_DEBUG=-g1
fi
[ "$mode" != --build-only ] || exit 0

export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp"
# UBSan's findings already end the process (-fno-sanitize-recover, cmake/Warnings.cmake).
export UBSAN_OPTIONS="print_stacktrace=1"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0

# gtest_run NAME: runs build_dir/tests/NAME, its log in $work; prints the log when it failed.
gtest_run() {
  local rc=0
  "$build_dir/tests/$1" --gtest_brief=1 >"$work/$1.log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    cat "$work/$1.log"
    echo "asan: FAIL: $1 (exit $rc)"
    return 1
  fi
  echo "asan: $1: $(grep -o '[0-9]* tests\? from [0-9]* test suites\? ran' "$work/$1.log")"
}

# A build folder configured without the sanitizers would pass every test: check that each program
# carries both runtimes first.
for program in unit_tests unit_rank_tests unit_thread_tests; do
  imports=$(nm -D --undefined-only "$build_dir/tests/$program")
  for runtime in __asan_report __ubsan_handle; do
    if ! grep -q "$runtime" <<<"$imports"; then
      echo "asan: $build_dir/tests/$program is not built with $runtime (-DTRAINPROOF_SANITIZE=ON)" >&2
      exit 1
    fi
  done
done

# The two programs that measure no time run side by side, one per core; the threads' tests (the
# watchdog's and the deadlines' timings) then run alone, as in the unit lane.
echo "== asan: unit_tests and unit_rank_tests, side by side"
gtest_run unit_tests &
plain=$!
gtest_run unit_rank_tests || failed=1
wait "$plain" || failed=1
echo "== asan: unit_thread_tests"
gtest_run unit_thread_tests || failed=1
echo "== asan: the GPU boundary test on the sanitized trainproof"
ctest --test-dir "$build_dir" --output-on-failure --no-tests=error -R '^unit\.gpu_boundary$' ||
  failed=1

if [ "$failed" -ne 0 ]; then
  echo "asan: FAILED" >&2
  exit 1
fi
echo "asan: all passed"
