#!/usr/bin/env bash
# Installs every Debian/Ubuntu package that the build, the tests and the tools need.
# Idempotent: packages already present are skipped, and apt is not touched when none is missing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  # Faster builds: Ninja schedules the unity batches; ccache reuses compiles on a machine that
  # built before (scripts/build.sh uses both when present).
  ninja-build ccache
  libopenmpi-dev openmpi-bin
  libhdf5-openmpi-dev
  libboost-program-options-dev libspdlog-dev
  libgtest-dev libgmock-dev
  nlohmann-json3-dev libopenblas-dev libxxhash-dev libhwloc-dev
  # The crash report's stack walk and symbol names (common/crash_stack.cpp).
  libunwind-dev
  # The integration harness's stacks of every rank of a run that outlives its timeout.
  gdb
  python3 clang-format clang-tidy shellcheck
  # g++'s ThreadSanitizer runtime, for scripts/tsan.sh; g++ usually brings it already.
  libtsan2
  slurm-wlm munge iproute2 fio python3-matplotlib python3-h5py hdf5-tools
  # Readers the tests hand the --junit and --metrics files to: a real JUnit parser, and promtool
  # (in prometheus) to check the exposition format.
  python3-junitparser prometheus
  # The HTML report's browser test: headless Chromium driven through its WebDriver.
  chromium chromium-driver python3-selenium
)

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: not root and no sudo; install: ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
