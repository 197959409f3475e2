#!/usr/bin/env bash
# Configures and builds trainproof into build/ (or $TRAINPROOF_BUILD_DIR). Extra arguments go to
# cmake's configure step, e.g. scripts/build.sh -DTRAINPROOF_SANITIZE=ON. $TRAINPROOF_BUILD_TARGETS
# (space-separated) builds only those targets, as a lane that runs a few binaries needs.
# A new build folder uses Ninja when it is installed (scripts/setup.sh installs it); a folder
# configured before keeps its generator. ccache, when installed, caches every compile, so a
# machine that built this source before rebuilds in a fraction of the time
# (CCACHE_DISABLE=1 turns it off).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${TRAINPROOF_BUILD_DIR:-build}
configure=(-DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-Release}")
if [ ! -f "$build_dir/CMakeCache.txt" ] && command -v ninja >/dev/null; then
  configure+=(-G Ninja)
fi
if command -v ccache >/dev/null; then
  configure+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
    -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  # Paths under the checkout are hashed relative to it, so another clone of the same source hits.
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
fi
cmake -S . -B "$build_dir" "${configure[@]}" "$@"
targets=()
for target in ${TRAINPROOF_BUILD_TARGETS:-}; do targets+=(--target "$target"); done
cmake --build "$build_dir" -j "$(nproc)" "${targets[@]}"
