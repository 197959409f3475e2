#!/usr/bin/env bash
# Configures and builds trainproof into build/ (or $TRAINPROOF_BUILD_DIR). Extra arguments go to
# cmake's configure step, e.g. scripts/build.sh -DTRAINPROOF_SANITIZE=ON. $TRAINPROOF_BUILD_TARGETS
# (space-separated) builds only those targets, as a lane that runs a few binaries needs.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${TRAINPROOF_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-Release}" "$@"
targets=()
for target in ${TRAINPROOF_BUILD_TARGETS:-}; do targets+=(--target "$target"); done
cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}"
