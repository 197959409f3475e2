#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite under ctest and the GPU check's
# dry run. Then, when TRAINPROOF_SANITIZE_TESTS is not 0, rebuilds the unit tests with ASan/UBSan
# and runs them too.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
scripts/format.sh --check
scripts/build.sh
ctest --test-dir build --output-on-failure --timeout 600

# The GPU machine's prepared check must not rot between device windows: bundle this build and run
# every CPU-side stage of it (GPU stages report "skip" here).
echo "== scripts/device-check.sh --dry-run"
TRAINPROOF_DEVICE_BUILD_DIR=build scripts/device-check.sh --dry-run --no-pack --no-build

if [ "${TRAINPROOF_SANITIZE_TESTS:-1}" != 0 ]; then
  echo "== unit tests under AddressSanitizer and UndefinedBehaviorSanitizer"
  TRAINPROOF_BUILD_DIR=build-asan CMAKE_BUILD_TYPE=Debug scripts/build.sh -DTRAINPROOF_SANITIZE=ON \
    -DTRAINPROOF_CUDA=OFF
  LSAN_OPTIONS="suppressions=$(pwd)/tests/lsan.supp" ctest --test-dir build-asan --output-on-failure -L unit
fi
echo "== all tests passed"
