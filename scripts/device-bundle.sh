#!/usr/bin/env bash
# Builds trainproof for the lent one-GPU machine and packs, into .device-bundle/ and
# .device-bundle.tar.xz at the repository root, everything it needs there that the machine lacks.
#
# That machine has CUDA, the driver, NCCL (a pip package) and PyTorch, but none of our Debian
# dependencies (Open MPI, HDF5, Boost, spdlog, OpenBLAS, fmt, xxHash, hwloc, ...), no package
# registry, and it receives only 64 MiB of files per call. So the binaries travel with their own
# shared libraries and a relocatable copy of Open MPI, compressed into one carried tarball.
#
#   scripts/device-bundle.sh [--no-build] [--no-pack]
#     --no-build  bundle what build-device/ (or $TRAINPROOF_DEVICE_BUILD_DIR) already holds
#     --no-pack   assemble .device-bundle/ but skip the xz tarball (saves a minute in CI)
#
# The bundle is Open MPI's install prefix (OPAL_PREFIX): the same relative layout as Debian's
# package, so Open MPI finds its components, help files and parameter file inside it. env.sh in
# the bundle sets the variables; scripts/device-check.sh --run uses it.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

build=1
pack=1
for arg in "$@"; do
  case $arg in
    --no-build) build=0 ;;
    --no-pack) pack=0 ;;
    -h | --help)
      awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"
      exit 0
      ;;
    *)
      echo "device-bundle: unknown argument '$arg' (see --help)" >&2
      exit 2
      ;;
  esac
done

# CI bundles its regular build (its default architectures include sm_90) to save a second one.
build_dir=$repo/${TRAINPROOF_DEVICE_BUILD_DIR:-build-device}
bundle=$repo/.device-bundle
tarball=$repo/.device-bundle.tar.xz

say() { printf '[device-bundle] %s\n' "$*"; }
die() {
  printf '[device-bundle] ERROR: %s\n' "$*" >&2
  exit 1
}

# Keep the bundle out of git and out of what travels uncarried (build*/ is already in .gitignore).
exclude_file=$(git rev-parse --git-path info/exclude 2>/dev/null || echo .git/info/exclude)
mkdir -p "$(dirname "$exclude_file")"
for pattern in /.device-bundle/ /.device-bundle.tar.xz; do
  grep -qxF "$pattern" "$exclude_file" 2>/dev/null || echo "$pattern" >>"$exclude_file"
done

if [ "$build" = 1 ]; then
  say "building into build-device/ (Release, CUDA architecture 90)"
  TRAINPROOF_BUILD_DIR=build-device CMAKE_BUILD_TYPE=Release scripts/build.sh \
    -DCMAKE_CUDA_ARCHITECTURES=90 || die "the build failed; nothing was bundled"
fi
[ -x "$build_dir/trainproof" ] || die "$build_dir/trainproof is missing (run without --no-build)"
[ -x "$build_dir/tests/unit_tests" ] || die "$build_dir/tests/unit_tests is missing"
command -v ompi_info >/dev/null || die "Open MPI is not installed (scripts/setup.sh installs it)"

# Where this Open MPI keeps its pieces, as it resolves them itself. Every folder below its prefix
# moves with OPAL_PREFIX; the sysconfdir (/etc/openmpi on Debian) does not, so env.sh sets it.
ompi_path() { ompi_info --parsable --path "$1" | awk -F: -v k="$1" '$2 == k {print $3; exit}'; }
ompi_prefix=$(ompi_path prefix)
ompi_bindir=$(ompi_path bindir)
ompi_pkglibdir=$(ompi_path pkglibdir)      # MCA components
ompi_pkgdatadir=$(ompi_path pkgdatadir)    # help files
ompi_sysconfdir=$(ompi_path sysconfdir)    # openmpi-mca-params.conf
for dir in "$ompi_bindir" "$ompi_pkglibdir" "$ompi_pkgdatadir"; do
  [[ $dir == "$ompi_prefix"/* ]] || die "$dir is outside Open MPI's prefix $ompi_prefix; OPAL_PREFIX cannot move it"
  [ -d "$dir" ] || die "Open MPI's folder $dir is missing"
done
under_prefix() { echo "$bundle/${1#"$ompi_prefix"/}"; }

# Libraries the device provides itself and that must never travel: glibc and the compiler's
# runtime (the device's are newer than Debian 12's), and CUDA, NCCL and the driver (they must match
# the device's driver). Everything else that a bundled file loads travels.
system_lib_re='^(ld-linux[^/]*|linux-vdso|libc|libm|libmvec|libpthread|libdl|librt|libresolv|libutil|libanl|libnsl|libBrokenLocale|libthread_db|libnss_[a-z0-9_]+|libstdc\+\+|libgcc_s)\.so'
gpu_lib_re='^(libcuda|libcudart|libcublas|libcublasLt|libcufft|libcurand|libcusparse|libcusolver|libcupti|libcudnn[a-z_]*|libnccl|libnvidia-[a-z0-9_-]+|libnvrtc[a-z-]*|libnvJitLink|libnvToolsExt|libnvblas)\.so'
# Open MPI components for fabrics a single-GPU machine does not have (UCX, libfabric, verbs, PSM):
# shipping them would drag those stacks along, and the bundled parameter file excludes them anyway.
fabric_lib_re='^(libucp|libuct|libucs|libucm|libfabric|libpsm_infinipath|libpsm2|libibverbs|librdmacm|libmca_common_(ucx|ofi|verbs))\.so'

is_device_provided() {
  local name=$1 path=$2
  [[ $name =~ $system_lib_re || $name =~ $gpu_lib_re ]] && return 0
  [[ $path == /usr/local/cuda* || $path == /usr/local/nvidia* ]] && return 0
  return 1
}

# needed_libs FILE: "soname<TAB>path" for every shared library FILE loads (transitively), as
# resolved on this machine; "soname<TAB>not-found" for the ones that are not.
needed_libs() {
  ldd "$1" 2>/dev/null | awk '
    $2 == "=>" && $3 == "not" { print $1 "\tnot-found"; next }
    $2 == "=>" && $3 ~ /^\// { print $1 "\t" $3 }'
}

rm -rf "$bundle" "$tarball"
mkdir -p "$bundle"/{bin,lib,scenarios,etc/openmpi}
declare -A bundled_libs=()   # soname -> source path
sources=()                   # "kind<TAB>bundle path<TAB>where it came from", for MANIFEST.txt
missing=()
record() { sources+=("$1"$'\t'"${2#"$bundle"/}"$'\t'"$3"); }

# add_deps FILE: copy every library FILE needs that the device does not provide into lib/.
add_deps() {
  local file=$1 name path
  while IFS=$'\t' read -r name path; do
    [ -n "$name" ] || continue
    if is_device_provided "$name" "$path"; then continue; fi
    if [ "$path" = not-found ]; then
      missing+=("$name (needed by ${file#"$bundle"/})")
      continue
    fi
    [ -n "${bundled_libs[$name]:-}" ] && continue
    # A library the build made (say a project .so) is found through the build tree's RUNPATH.
    cp -L "$path" "$bundle/lib/$name"
    bundled_libs[$name]=$path
    record library "$bundle/lib/$name" "$path"
  done < <(needed_libs "$file")
}

say "executables"
cp -L "$build_dir/trainproof" "$bundle/bin/trainproof"
cp -L "$build_dir/tests/unit_tests" "$bundle/bin/unit_tests"
record build "$bundle/bin/trainproof" "$build_dir/trainproof"
record build "$bundle/bin/unit_tests" "$build_dir/tests/unit_tests"
# `trainproof report plot|html` runs the plot script from beside the executable.
mkdir -p "$bundle/bin/viz"
cp "$build_dir"/viz/*.py "$bundle/bin/viz/"
record build "$bundle/bin/viz" "$build_dir/viz"
gpu_parts=()
# trainproof dlopens the GPU library from its own folder, so the library sits next to it in bin/.
if [ -f "$build_dir/libtrainproof_gpu.so" ]; then
  cp -L "$build_dir/libtrainproof_gpu.so" "$bundle/bin/libtrainproof_gpu.so"
  ln -s ../bin/libtrainproof_gpu.so "$bundle/lib/libtrainproof_gpu.so"   # for gpu_tests, if it links it
  record build "$bundle/bin/libtrainproof_gpu.so" "$build_dir/libtrainproof_gpu.so"
  gpu_parts+=(libtrainproof_gpu.so)
else
  say "note: build-device/libtrainproof_gpu.so was not built; GPU stages will be skipped"
fi
if [ -f "$build_dir/tests/gpu_tests" ]; then
  cp -L "$build_dir/tests/gpu_tests" "$bundle/bin/gpu_tests"
  record build "$bundle/bin/gpu_tests" "$build_dir/tests/gpu_tests"
  gpu_parts+=(gpu_tests)
else
  say "note: build-device/tests/gpu_tests was not built; the GPU unit test stage will be skipped"
fi
cp -R scenarios/. "$bundle/scenarios/"
record build "$bundle/scenarios" "$repo/scenarios"

say "$(ompi_info --version 2>/dev/null | head -1) runtime"
# mpirun is orterun (Debian points mpirun at it through alternatives); orted is the daemon it
# and singletons may start. Both sit in the bundle's bin/, which is the prefix's bindir too.
[ "$(under_prefix "$ompi_bindir")" = "$bundle/bin" ] || die "Open MPI's bindir $ompi_bindir is not <prefix>/bin"
cp -L "$ompi_bindir/orterun" "$bundle/bin/orterun"
cp -L "$ompi_bindir/orted" "$bundle/bin/orted"
record program "$bundle/bin/orterun" "$ompi_bindir/orterun"
record program "$bundle/bin/orted" "$ompi_bindir/orted"
ln -s orterun "$bundle/bin/mpirun"
ln -s orterun "$bundle/bin/mpiexec"

# MCA components, at the same place under the prefix as in the package.
components_dst=$(under_prefix "$ompi_pkglibdir")
mkdir -p "$components_dst"
skipped_components=()
for so in "$ompi_pkglibdir"/*.so; do
  if needed_libs "$so" | cut -f1 | grep -Eq "$fabric_lib_re"; then
    skipped_components+=("$(basename "$so" .so)")
    continue
  fi
  cp -L "$so" "$components_dst/"
done
record folder "$components_dst" "$ompi_pkglibdir"
say "  $(find "$components_dst" -name '*.so' | wc -l) components; left out (fabric stacks): ${skipped_components[*]:-none}"

# Help files; without them every Open MPI error reads "help file not found".
help_dst=$(under_prefix "$ompi_pkgdatadir")
mkdir -p "$(dirname "$help_dst")"
cp -RL "$ompi_pkgdatadir" "$help_dst"
record folder "$help_dst" "$ompi_pkgdatadir"

# The parameter file: Debian's settings, then the single-host transport this bundle supports.
# Open MPI reads it from OPAL_SYSCONFDIR because Debian's sysconfdir is not under the prefix.
{
  grep -Ev '^[[:space:]]*btl[[:space:]]*=' "$ompi_sysconfdir/openmpi-mca-params.conf"
  cat <<'EOF'

# --- added by scripts/device-bundle.sh ---
# One host: shared memory and self only (the fabric components are not in the bundle).
btl = self,vader
# Single copy through CMA needs ptrace rights that sandboxed machines often refuse; a copy
# through the shared segment is enough for a smoke check.
btl_vader_single_copy_mechanism = none
# Launch local ranks without looking for ssh/rsh, which the device does not have.
plm = isolated
# A singleton (a rank started without mpirun) must not try to start an orted either.
ess_singleton_isolated = 1
EOF
} >"$bundle/etc/openmpi/openmpi-mca-params.conf"
record folder "$bundle/etc/openmpi" "$ompi_sysconfdir"

# PMIx, Open MPI's process-management layer, is a separate Debian package with its own prefix;
# its few components and help files go to the same relative place, relocated by PMIX_PREFIX.
libpmix=$(needed_libs "$ompi_pkglibdir/mca_pmix_ext3x.so" 2>/dev/null | awk -F'\t' '$1 ~ /^libpmix/ {print $2}')
[ -n "$libpmix" ] || die "cannot tell where Open MPI's PMIx library is (ldd of mca_pmix_ext3x.so)"
pmix_prefix=$(dirname "$(dirname "$(readlink -f "$libpmix")")")   # <prefix>/lib/libpmix.so.2
[[ $pmix_prefix == "$ompi_prefix"/* ]] || die "PMIx's prefix $pmix_prefix is outside $ompi_prefix"
pmix_dst=$(under_prefix "$pmix_prefix")
mkdir -p "$pmix_dst/lib"
for sub in lib/pmix share; do
  [ -d "$pmix_prefix/$sub" ] || continue
  cp -RL "$pmix_prefix/$sub" "$pmix_dst/$sub"
  record folder "$pmix_dst/$sub" "$pmix_prefix/$sub"
done

say "shared libraries"
for file in "$bundle"/bin/* "$components_dst"/*.so "$pmix_dst"/lib/pmix/*.so; do
  if [ ! -f "$file" ] || [ -L "$file" ]; then continue; fi
  case $(head -c 4 "$file" | od -An -c | tr -d ' ') in *ELF*) add_deps "$file" ;; esac
done
if [ "${#missing[@]}" -gt 0 ]; then
  printf '[device-bundle] ERROR: not found on this machine: %s\n' "${missing[@]}" >&2
  exit 1
fi

# env.sh: what a shell sources to use the bundle from wherever it was unpacked.
cat >"$bundle/env.sh" <<EOF
# Sourced by scripts/device-check.sh. Relocates the bundled Open MPI and PMIx to this folder.
# LD_LIBRARY_PATH is left alone on purpose: set it only for bundled programs (see BUNDLE_LD),
# so the device's own python3 and PyTorch keep their libraries.
BUNDLE_ROOT=\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)
export OPAL_PREFIX=\$BUNDLE_ROOT
export OPAL_SYSCONFDIR=\$BUNDLE_ROOT/etc/openmpi
export PMIX_PREFIX=\$BUNDLE_ROOT/${pmix_prefix#"$ompi_prefix"/}
export PATH=\$BUNDLE_ROOT/bin:\$PATH
BUNDLE_LD=\$BUNDLE_ROOT/lib
# Sonames the device provides itself (glibc, the compiler runtime, CUDA, NCCL, the driver).
DEVICE_PROVIDED_RE='$system_lib_re|$gpu_lib_re'
EOF

# MANIFEST.txt says what the bundle holds and where each piece came from; the dry run reads the
# sources to hide them, so that only the bundle can satisfy the run.
{
  echo "# trainproof device bundle"
  echo "# git revision: $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD 2>/dev/null || echo '+uncommitted')"
  # shellcheck disable=SC1091
  echo "# built on: $(. /etc/os-release && echo "$PRETTY_NAME"), $(ldd --version | head -1)"
  echo "# $(ompi_info --version 2>/dev/null | head -1)"
  echo "# GPU parts: ${gpu_parts[*]:-none}"
  echo "# Open MPI components left out: ${skipped_components[*]:-none}"
  echo "# kind<TAB>in the bundle<TAB>copied from"
  printf '%s\n' "${sources[@]}" | sort
} >"$bundle/MANIFEST.txt"

say "bundle: $(du -sh "$bundle" | cut -f1) in .device-bundle/ (${#bundled_libs[@]} libraries)"
if [ "$pack" = 1 ]; then
  say "packing .device-bundle.tar.xz"
  tar -C "$repo" -cf - .device-bundle | xz -T2 -6 >"$tarball.tmp"
  mv "$tarball.tmp" "$tarball"
  size=$(stat -c %s "$tarball")
  say "tarball: .device-bundle.tar.xz $((size / 1024)) KiB ($(awk -v s="$size" 'BEGIN {printf "%.1f", s / 1048576}') MiB; 64 MiB travel per call)"
  [ "$size" -lt $((48 * 1024 * 1024)) ] || die "the tarball is over 48 MiB; it leaves too little of the 64 MiB for the working tree"
fi
