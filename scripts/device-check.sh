#!/usr/bin/env bash
# The GPU path's acceptance check on a one-GPU machine that has CUDA, the driver, NCCL and PyTorch
# but none of trainproof's other dependencies, and no package registry.
#
#   scripts/device-check.sh --bundle [--no-pack]   here: build, then pack .device-bundle.tar.xz
#                                                  (scripts/device-bundle.sh does the work)
#   scripts/device-check.sh --run                  there, in the repository root, with the tarball
#                                                  beside it: unpack, run every stage, summarise
#   scripts/device-check.sh --dry-run [--no-pack] [--no-build]
#                                                  here or in CI, without a GPU: --bundle, then
#                                                  --run against the bundle; GPU stages skip, the
#                                                  CPU side (libraries, relocated Open MPI) runs
#                           [--no-bundle]          (the dry run against the existing bundle)
#
# --run writes into $OUT (default out/device-check; the dry run uses out/device-check-dry) at most
# five files, because the GPU machine returns only a few: summary.json and summary.md (one entry
# per stage: status pass/fail/skip/not-run, seconds, key figures), console.log, gpu_tests.json
# (GoogleTest's report) and stages.tar.gz (every stage's log and trainproof report). They are
# rewritten after each stage, so a run cut short still returns what it finished.
#
# Every stage has its own time limit and a failed stage never stops the next one. The stages
# together stay inside DEVICE_CHECK_BUDGET_S seconds (default 420), so the whole call, unpacking
# included, ends well within 8 minutes. Exit status: 1 if any stage failed, else 0.

# shellcheck disable=SC2317 # (file-wide) stage functions are called by name, as stage_$name
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo" || exit 2

mode=
pack_args=()
make_bundle=1
for arg in "$@"; do
  case $arg in
    --bundle | --run | --dry-run) mode=${arg#--} ;;
    --no-pack | --no-build) pack_args+=("$arg") ;;
    --no-bundle) make_bundle=0 ;;
    -h | --help)
      awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"
      exit 0
      ;;
    *)
      echo "device-check: unknown argument '$arg' (see --help)" >&2
      exit 2
      ;;
  esac
done
if [ -z "$mode" ]; then
  echo "device-check: say --bundle, --run or --dry-run (see --help)" >&2
  exit 2
fi

say() { printf '[device-check %s] %s\n' "$(date +%H:%M:%S)" "$*" >&3; }
loud() { printf '[device-check %s] !!! %s\n' "$(date +%H:%M:%S)" "$*" >&3; }
exec 3>&1

# The stages, in order. A stage is a function stage_<name> that runs with its log on stdout and
# ends by calling `verdict STATUS REASON`, after `fig KEY TEXT` or `fign KEY NUMBER` for each figure
# worth reporting.
STAGES=(environment cpu_smoke gpu_unit_tests gemm_vs_torch train_nccl_1rank train_cuda_mpi_2rank
        checkpoint_resume data_path)
# --- Later capabilities add their stages here (function, time limit, entry in STAGES), e.g.
#     collective_sweep:  `trainproof sweep` over NCCL on the GPU, checking algbw/busbw and `wrong`.
declare -A STAGE_LIMIT_S=(
  [environment]=60
  [cpu_smoke]=60
  [gpu_unit_tests]=120
  [gemm_vs_torch]=150
  [train_nccl_1rank]=90
  [train_cuda_mpi_2rank]=150
  [checkpoint_resume]=150
  [data_path]=120
)
declare -A STAGE_TITLE=(
  [environment]="GPU, driver, CUDA, NCCL, PyTorch; every bundled file's libraries resolve"
  [cpu_smoke]="bundled mpirun, 2 ranks of the bundled trainproof on scenarios/tiny.ini (CPU)"
  [gpu_unit_tests]="gpu_tests (GoogleTest)"
  [gemm_vs_torch]="cuBLAS GEMM rate from trainproof against torch.matmul, fp32 and bf16"
  [train_nccl_1rank]="smoke.ini, compute cuda, comm nccl, 1 rank"
  [train_cuda_mpi_2rank]="smoke.ini, compute cuda, comm mpi, 2 ranks, twice; digests agree"
  [data_path]="a prepared dataset read by the loader into the GPU compute (nccl 1 rank, mpi 2 ranks), verified; digests agree and differ from synthetic"
  [checkpoint_resume]="GPU state checkpointed, stopped and resumed (nccl file-per-rank sync; mpi 2 ranks shared-file async); digests match the uninterrupted run"
)

# ---------------------------------------------------------------------------------------------
# Helpers

now() { date +%s; }

# tmo SECONDS CMD...: runs CMD for at most SECONDS, and never past the current stage's end.
tmo() {
  local want=$1 left
  shift
  left=$((STAGE_END - $(now)))
  [ "$want" -lt "$left" ] || want=$left
  if [ "$want" -le 0 ]; then
    echo "device-check: no time left in this stage for: $*"
    return 124
  fi
  echo "+ (limit ${want}s) $*"
  timeout -k 5 "$want" "$@"
}

# Bundled programs get the bundle's libraries and the device's CUDA and NCCL; nothing else does,
# so python3 and PyTorch keep their own.
bun() { env LD_LIBRARY_PATH="$RUN_LD" "$@"; }
mpirun_flags=(--allow-run-as-root --oversubscribe)

fig() { [ -z "$2" ] || FIGURES+=("$1=$2"); }    # a text figure
fign() { [ -z "$2" ] || FIGURES+=("$1:=$2"); } # a number, true or false
verdict() {
  STATUS=$1
  REASON=$2
}
section() { printf '\n===== %s\n' "$*"; }
py() { python3 "$WORK/device_check.py" "$@"; }

# Adds a trainproof report's figures (verdict, digest, phase p50s in ms, AU, rates), their names
# prefixed by PREFIX; with a prefix, verdict and digest are left to the caller.
report_figs() {
  local file=$1 prefix=$2 line
  while IFS= read -r line; do
    [ -n "$prefix" ] && [[ $line == verdict=* || $line == final_digest=* ]] && continue
    [ -n "$line" ] && FIGURES+=("$prefix$line")
  done < <(py report-figures "$file")
}

# How a GPU run ended, as a stage status: exit 3 (the run could not complete) on a host where no GPU
# is visible, or exit 2 while the bundle holds no GPU library, is a skip; anything else but 0 fails.
gpu_run_status() {
  local rc=$1
  case $rc in
    0) echo pass ;;
    3) if [ "$GPU_VISIBLE" = yes ]; then echo fail; else echo skip; fi ;;
    2) if [ -f "$BUNDLE/bin/libtrainproof_gpu.so" ]; then echo fail; else echo skip; fi ;;
    *) echo fail ;;
  esac
}
gpu_run_reason() {
  local rc=$1 log=$2 what=$3 line
  line=$(grep -E 'error|Error|ERROR|fail' "$log" | grep -v '^+' | tail -1 | cut -c1-240)
  case $rc in
    0) echo "$what: exit 0" ;;
    124 | 137) echo "$what: timed out" ;;
    3) if [ "$GPU_VISIBLE" = yes ]; then echo "$what: exit 3 although a GPU is visible: $line"; else echo "no GPU visible ($what: exit 3: $line)"; fi ;;
    2) if [ -f "$BUNDLE/bin/libtrainproof_gpu.so" ]; then echo "$what: exit 2 (usage): $line"; else echo "the GPU backend library was not built ($what: exit 2)"; fi ;;
    *) echo "$what: exit $rc: $line" ;;
  esac
}

# ---------------------------------------------------------------------------------------------
# Setting up: unpack, relocate Open MPI, find the device's CUDA and NCCL

# The helper that reads reports, writes summaries and times torch.matmul. Python because it is on
# both machines and reads JSON; it never runs with the bundle's libraries.
write_python_helper() {
  cat >"$WORK/device_check.py" <<'PY'
import glob, json, os, sys, time

def figure(arg):
    # "key=text" is text; "key:=value" is a JSON number, true or false.
    key, value = arg.split("=", 1)
    if not key.endswith(":"):
        return key, value
    try:
        return key[:-1], json.loads(value)
    except ValueError:
        return key[:-1], value

def dig(data, path):
    for key in path.split("."):
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data

def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None

def cmd_result(path, name, status, seconds, reason, *figures):
    entry = {"name": name, "status": status, "seconds": round(float(seconds), 1), "reason": reason,
             "figures": dict(figure(f) for f in figures)}
    with open(path, "w") as f:
        json.dump(entry, f, indent=1)

def cmd_get(path, key):
    value = dig(load(path), key)
    print("" if value is None else value)

def cmd_report_figures(path):
    report = load(path)
    if report is None:
        return
    train = report.get("train", {})
    print(f"verdict={report.get('verdict', '')}")
    print(f"final_digest={train.get('final_digest', '')}")
    for phase in ("data", "compute", "comm", "comm_exposed", "optimizer", "step"):
        p50 = dig(train, f"phases.{phase}.p50")
        if p50 is not None:
            print(f"{phase}_p50_ms:={p50 * 1e3:.3f}")
    for key in ("au", "gemm_rate_flops", "achieved_flops"):
        if train.get(key) is not None:
            print(f"{key}:={train[key]:.4g}")
    failed = [c["name"] for c in dig(report, "gate.checks") or [] if c.get("status") == "fail"]
    if failed:
        print("failed_checks=" + ",".join(failed))

def cmd_gtest(path):
    report = load(path)
    if report is None:
        return
    for key in ("tests", "failures", "errors", "disabled"):
        print(f"{key}:={report.get(key, 0)}")
    failed = [f"{s['name']}.{t['name']}" for s in report.get("testsuites", [])
              for t in s.get("testsuite", []) if t.get("failures")]
    if failed:
        print("failed=" + ",".join(failed[:8]) + (",..." if len(failed) > 8 else ""))

def cmd_torch_gemm(path):
    try:
        import torch
    except ImportError as e:
        print(f"torch is not importable: {e}")
        sys.exit(77)
    if not torch.cuda.is_available():
        print("torch sees no CUDA device")
        sys.exit(77)
    # trainproof's per-sample forward GEMM: M = seq, N = K = hidden.
    m, n, k = 2048, 4096, 4096
    result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "shape": [m, n, k], "warmup": 3, "timed": 20}
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        b = torch.randn(k, n, device="cuda", dtype=dtype)
        for _ in range(3):
            torch.matmul(a, b)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(20):
            torch.matmul(a, b)
        end.record()
        end.synchronize()
        seconds = start.elapsed_time(end) / 1e3 / 20
        result[f"{name}_flops"] = 2.0 * m * n * k / seconds
        print(f"torch.matmul {name} {m}x{n}x{k}: {result[name + '_flops'] / 1e12:.1f} TFLOP/s")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)

def cmd_summary(results_dir, out_dir, mode, started, stages):
    entries = []
    for name in stages.split(","):
        entry = load(os.path.join(results_dir, name + ".json"))
        entries.append(entry or {"name": name, "status": "not-run", "seconds": 0,
                                 "reason": "not reached", "figures": {}})
    failed = [e["name"] for e in entries if e["status"] == "fail"]
    summary = {"schema": "trainproof.device-check/1", "mode": mode,
               "started": started, "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
               "overall": "fail" if failed else "pass", "failed_stages": failed,
               "stages": entries}
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    lines = [f"# trainproof device check ({mode})", "",
             f"started {started}; overall **{summary['overall'].upper()}**"
             + (f" (failed: {', '.join(failed)})" if failed else ""), "",
             "| stage | status | seconds | reason |", "|---|---|---|---|"]
    for e in entries:
        lines.append(f"| {e['name']} | {e['status']} | {e['seconds']} | "
                     f"{str(e['reason']).replace('|', '/')} |")
    gemm = next((e for e in entries if e["name"] == "gemm_vs_torch"), None)
    if gemm and any(k.startswith("torch_") for k in gemm["figures"]):
        g = gemm["figures"]
        lines += ["", "| dtype | trainproof cuBLAS TFLOP/s | torch.matmul TFLOP/s | ratio |",
                  "|---|---|---|---|"]
        for dtype in ("fp32", "bf16"):
            lines.append(f"| {dtype} | {g.get(f'trainproof_{dtype}_tflops', '-')} | "
                         f"{g.get(f'torch_{dtype}_tflops', '-')} | {g.get(f'ratio_{dtype}', '-')} |")
    for e in entries:
        if e["figures"]:
            lines += ["", f"## {e['name']}", ""]
            lines += [f"- {k}: {json.dumps(v) if isinstance(v, bool) else v}"
                      for k, v in e["figures"].items()]
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")

def cmd_pip_lib_dirs():
    # Library folders of the pip packages that carry CUDA and NCCL (nvidia-* wheels, torch).
    import importlib.util
    for module in ("nvidia.nccl", "nvidia.cu13", "nvidia.cublas", "nvidia.cuda_runtime",
                   "nvidia.cu12", "torch"):
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            continue
        for base in (spec.submodule_search_locations or []) if spec else []:
            for sub in ("lib", "lib64"):
                if os.path.isdir(os.path.join(base, sub)):
                    print(os.path.join(base, sub))

if __name__ == "__main__":
    command, args = sys.argv[1].replace("-", "_"), sys.argv[2:]
    globals()["cmd_" + command](*args)
PY
}

unpack_bundle() {
  local tarball=$repo/.device-bundle.tar.xz parent=${TMPDIR:-/tmp}/trainproof-device
  if [ -f "$tarball" ]; then
    rm -rf "$parent"
    mkdir -p "$parent"
    say "unpacking .device-bundle.tar.xz ($(($(stat -c %s "$tarball") / 1048576)) MiB) into $parent"
    if command -v xz >/dev/null; then
      tar -C "$parent" -xJf "$tarball" || return 1
    else # no xz on the machine: Python's lzma reads it too
      python3 -c 'import sys, tarfile
t = tarfile.open(sys.argv[1])
t.extractall(sys.argv[2], **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))' \
        "$tarball" "$parent" || return 1
    fi
    BUNDLE=$parent/.device-bundle
  elif [ -d "$repo/.device-bundle" ]; then
    BUNDLE=$repo/.device-bundle
    say "using the unpacked bundle in .device-bundle/"
  else
    loud "no .device-bundle.tar.xz in $repo: build it with scripts/device-check.sh --bundle and bring it along"
    return 1
  fi
  [ -f "$BUNDLE/env.sh" ] || return 1
}

# Adds to RUN_LD the folders that hold the CUDA, NCCL and driver libraries the GPU parts need and
# the bundle does not carry. NCCL comes preferably from the device's pip package (the one PyTorch
# uses), the CUDA runtime and cuBLAS from the toolkit nvcc belongs to; LD_LIBRARY_PATH makes that
# choice win over the build machine's RUNPATH. Then whatever still does not resolve (the driver,
# say) is looked for in the usual places.
locate_gpu_libraries() {
  local gpu_files=() file name dir round
  for file in "$BUNDLE/bin/libtrainproof_gpu.so" "$BUNDLE/bin/gpu_tests"; do
    [ -f "$file" ] && gpu_files+=("$file")
  done
  [ "${#gpu_files[@]}" -gt 0 ] || return 0
  mapfile -t PIP_LIB_DIRS < <(timeout 30 python3 "$WORK/device_check.py" pip-lib-dirs 2>/dev/null)
  for name in $(for file in "${gpu_files[@]}"; do bun ldd "$file" 2>/dev/null; done |
    awk '$2 == "=>" && $1 ~ /^lib(nccl|cudart|cublas|cublasLt)\.so/ {print $1}' | sort -u); do
    add_lib_dir "$name"
  done
  for round in 1 2 3; do
    local unresolved=()
    mapfile -t unresolved < <(for file in "${gpu_files[@]}"; do bun ldd "$file" 2>/dev/null; done |
      awk '$2 == "=>" && $3 == "not" {print $1}' | sort -u)
    [ "${#unresolved[@]}" -gt 0 ] || return 0
    [ "$round" -lt 3 ] || return 0
    for name in "${unresolved[@]}"; do add_lib_dir "$name"; done
  done
}

# add_lib_dir SONAME: puts the first folder that holds SONAME, in order of preference, on RUN_LD.
add_lib_dir() {
  local name=$1 dir='' candidate order
  local toolkit=(/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib)
  local system=(/usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib/wsl/lib)
  order=("${toolkit[@]}" "${PIP_LIB_DIRS[@]}" "${system[@]}")
  [[ $name == libnccl* ]] && order=("${PIP_LIB_DIRS[@]}" "${toolkit[@]}" "${system[@]}")
  for candidate in "${order[@]}"; do
    if [ -e "$candidate/$name" ]; then
      dir=$candidate
      break
    fi
  done
  if [ -z "$dir" ] && [ "$MODE" = device ]; then # last resort: search the machine
    dir=$(timeout 30 find / \( -path /proc -o -path /sys -o -path /dev -o -path "$BUNDLE" \) -prune \
      -o -name "$name" ! -path '*/stubs/*' -print 2>/dev/null | head -1)
    dir=${dir:+$(dirname "$dir")}
  fi
  if [ -z "$dir" ]; then
    GPU_LIB_DIRS+=("$name: not found")
  else
    GPU_LIB_DIRS+=("$name: $dir")
    [[ ":$RUN_LD:" == *":$dir:"* ]] || RUN_LD=$RUN_LD:$dir
  fi
}

# For the dry run: a wrapper that runs its arguments in a private mount namespace where this
# machine's own Open MPI, PMIx, ssh/rsh and every library the bundle carries are made unreadable,
# so the run proves that the bundle alone satisfies it, as on the GPU machine. Needs root.
write_isolation_wrapper() {
  cat >"$WORK/isolated.sh" <<'SH'
#!/usr/bin/env bash
set -e
manifest=$1
shift
# Files first: a folder hidden earlier would hide the file a link resolves to.
while IFS=$'\t' read -r kind _ source; do
  case $kind in library | program)
    target=$(readlink -f "$source")
    [ -f "$target" ] && mount --bind /dev/null "$target" ;;
  esac
done <"$manifest"
for tool in ssh rsh; do
  path=$(command -v "$tool" 2>/dev/null) && mount --bind /dev/null "$(readlink -f "$path")"
done
while IFS=$'\t' read -r kind _ source; do
  [ "$kind" = folder ] && [ -d "$source" ] && mount -t tmpfs -o size=1m none "$source"
done <"$manifest"
exec "$@"
SH
  chmod +x "$WORK/isolated.sh"
}

setup() {
  STARTED=$(date +%Y-%m-%dT%H:%M:%S%z)
  if [ "$MODE" = device ]; then
    OUT=${OUT:-$repo/out/device-check}
    WORK=${TMPDIR:-/tmp}/trainproof-device-check
  else
    OUT=$repo/out/device-check-dry
    WORK=$repo/out/device-check-dry.work
  fi
  rm -rf "$WORK" "$OUT"/summary.json "$OUT"/summary.md "$OUT"/console.log "$OUT"/gpu_tests.json "$OUT"/stages.tar.gz
  mkdir -p "$OUT" "$WORK/results" || return 1
  exec > >(tee "$OUT/console.log") 2>&1
  TEE_PID=$!
  exec 3>&1
  say "mode $MODE; results in $OUT; stage logs in $WORK"
  DEADLINE=$(($(now) + ${DEVICE_CHECK_BUDGET_S:-420}))
  write_python_helper
  py summary "$WORK/results" "$OUT" "$MODE" "$STARTED" "$(
    IFS=,
    echo "${STAGES[*]}"
  )"

  unpack_bundle || return 1
  # shellcheck source=/dev/null
  . "$BUNDLE/env.sh"
  RUN_LD=$BUNDLE_LD
  GPU_LIB_DIRS=()
  PIP_LIB_DIRS=()
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  # Shared-memory transport files go to /dev/shm; a sandbox without a writable one gets /tmp.
  [ -w /dev/shm ] || export OMPI_MCA_btl_vader_backing_directory=${TMPDIR:-/tmp}
  locate_gpu_libraries
  say "library path for bundled programs: $RUN_LD"
  for line in "${GPU_LIB_DIRS[@]}"; do say "  $line"; done

  GPU_VISIBLE=no
  if command -v nvidia-smi >/dev/null && timeout 30 nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    GPU_VISIBLE=yes
  fi
  say "GPU visible: $GPU_VISIBLE"

  ISOLATE=()
  if [ "$MODE" = dry-run ]; then
    write_isolation_wrapper
    if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
      ISOLATE=(unshare -m "$WORK/isolated.sh" "$BUNDLE/MANIFEST.txt")
    else
      say "note: no private mount namespace here (not root, or unshare refused); this machine's own Open MPI stays visible to the CPU smoke run"
    fi
  fi
}

# ---------------------------------------------------------------------------------------------
# Stages

stage_environment() {
  local file missing=() expected=() outside=() line name path rel
  section "host"
  uname -a
  grep -E '^(PRETTY_NAME|VERSION_ID)=' /etc/os-release
  ldd --version | head -1
  echo "cpus: $(nproc)"
  free -g 2>/dev/null | head -2
  fig glibc "$(ldd --version | head -1 | awk '{print $NF}')"
  head -8 "$BUNDLE/MANIFEST.txt"

  section "nvidia-smi"
  if command -v nvidia-smi >/dev/null; then
    tmo 30 nvidia-smi
    tmo 30 nvidia-smi --query-gpu=name,uuid,pci.bus_id,driver_version,memory.total,clocks.max.sm,persistence_mode --format=csv
    line=$(timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
    fig gpu "${line%%,*}"
    fig driver "$(echo "$line" | cut -d, -f2 | tr -d ' ')"
    fig gpu_memory "$(echo "$line" | cut -d, -f3 | sed 's/^ //')"
  else
    echo "nvidia-smi: not installed"
  fi
  fig gpu_visible "$GPU_VISIBLE"

  section "nvcc"
  local nvcc
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  if [ -x "$nvcc" ]; then
    tmo 30 "$nvcc" --version
    fig nvcc "$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
  else
    echo "nvcc: not installed"
  fi

  section "PyTorch and its NCCL"
  line=$(tmo 90 python3 -c 'import torch
try:
    v = torch.cuda.nccl.version()
    nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
except Exception:
    nccl = "unknown"
print(f"version={torch.__version__} cuda={torch.version.cuda} nccl={nccl} gpu={torch.cuda.is_available()}")' 2>&1 | tail -1)
  echo "$line"
  case $line in
    version=*)
      for kv in $line; do fig "torch_${kv%%=*}" "${kv#*=}"; done
      ;;
    *) fig torch "not importable" ;;
  esac

  section "library path for bundled programs"
  echo "$RUN_LD" | tr : '\n'
  printf '%s\n' "${GPU_LIB_DIRS[@]}"
  # Where the GPU library's CUDA and NCCL actually come from, with the path above.
  if [ -f "$BUNDLE/bin/libtrainproof_gpu.so" ]; then
    bun ldd "$BUNDLE/bin/libtrainproof_gpu.so" | grep -E 'libnccl|libcudart|libcublas|libcuda\.'
    for name in nccl cudart cublas; do
      fig "lib${name}" "$(bun ldd "$BUNDLE/bin/libtrainproof_gpu.so" | awk -v n="lib$name.so" 'index($1, n) == 1 {print $3; exit}')"
    done
  fi

  # A library that does not resolve shows here at once, rather than as a dlopen failure later.
  section "unresolved libraries and symbols"
  while IFS= read -r -d '' file; do
    case $(head -c 4 "$file" | od -An -c | tr -d ' ') in *ELF*) ;; *) continue ;; esac
    rel=${file#"$BUNDLE"/}
    local flags=()
    [[ $rel == bin/libtrainproof_gpu.so ]] && flags=(-r) # -r: every symbol too, as dlopen(RTLD_NOW)
    while IFS= read -r line; do
      line=${line#"${line%%[![:space:]]*}"}
      if [[ $line == *"not found"* || $line == *"undefined symbol"* ]]; then
        # Without a driver (the dry run) the driver's libraries, and the symbols they would have
        # brought, are missing by nature.
        if [ "$MODE" = dry-run ] && [[ $line == libcuda.so* || $line == libnvidia-* ||
          ($line == *"undefined symbol"* && ${#expected[@]} -gt 0) ]]; then
          expected+=("$rel: $line")
        else
          missing+=("$rel: $line")
        fi
      elif [[ $line == *" => /"* ]]; then
        # Found outside the bundle, and not something the device provides itself: the bundle
        # forgot it. Here this machine's own copy hides that; on the device it would be missing.
        name=${line%% *}
        path=${line#* => }
        path=${path%% (*}
        [[ $path == "$BUNDLE"/* || $name =~ $DEVICE_PROVIDED_RE ]] || outside+=("$rel: $name => $path")
      fi
    done < <(bun ldd "${flags[@]}" "$file" 2>&1)
  done < <(find "$BUNDLE/bin" "$BUNDLE/lib" -type f \( -perm -u+x -o -name '*.so*' \) -print0)
  echo "checked every ELF file under bin/ and lib/ (components included)"
  for line in "${expected[@]}"; do echo "expected without a driver: $line"; done
  for line in "${missing[@]}"; do
    echo "MISSING: $line"
    loud "MISSING: $line"
  done
  fign unresolved "${#missing[@]}"
  for line in "${outside[@]}"; do echo "resolved outside the bundle: $line"; done
  fign resolved_outside_bundle "${#outside[@]}"
  # Here that is a gap in the bundle; on the device such a library merely happened to be there.
  if [ "$MODE" = dry-run ]; then
    for line in "${outside[@]}"; do
      missing+=("not in the bundle: $line")
      loud "NOT IN THE BUNDLE: $line"
    done
  fi

  if [ "${#missing[@]}" -gt 0 ]; then
    verdict fail "${#missing[@]} library problems, first: ${missing[0]}"
  elif [ "$MODE" = device ] && [ "$GPU_VISIBLE" != yes ]; then
    verdict fail "nvidia-smi lists no GPU"
  else
    verdict pass "every bundled file resolves$([ "${#outside[@]}" -gt 0 ] && echo ", but ${#outside[@]} libraries resolve to the machine's own copies, not the bundle's (see the log)")$([ "${#expected[@]}" -gt 0 ] && echo " (driver libraries absent here: ${#expected[@]} lines, expected without a GPU)")"
  fi
}

# The relocated Open MPI on CPU: if this fails, the 2-rank GPU stage cannot work either, and this
# says why without a GPU in the way.
stage_cpu_smoke() {
  local scenario=$BUNDLE/scenarios/tiny.ini rc2 rc1 d2 d1
  fign isolated_from_system_mpi "$([ "${#ISOLATE[@]}" -gt 0 ] && echo true || echo false)"
  section "2 ranks under the bundled mpirun"
  tmo 60 "${ISOLATE[@]}" env LD_LIBRARY_PATH="$RUN_LD" "$BUNDLE/bin/mpirun" "${mpirun_flags[@]}" -np 2 \
    "$BUNDLE/bin/trainproof" train --scenario "$scenario" --compute.backend=cpu --comm.backend=mpi \
    --report "$WORK/cpu-smoke-2rank.json"
  rc2=$?
  section "1 rank started directly (an MPI singleton)"
  tmo 60 "${ISOLATE[@]}" env LD_LIBRARY_PATH="$RUN_LD" "$BUNDLE/bin/trainproof" train --scenario "$scenario" \
    --compute.backend=cpu --comm.backend=mpi --report "$WORK/cpu-smoke-1rank.json"
  rc1=$?
  d2=$(py get "$WORK/cpu-smoke-2rank.json" train.final_digest)
  d1=$(py get "$WORK/cpu-smoke-1rank.json" train.final_digest)
  fign exit_2rank "$rc2"
  fign exit_1rank "$rc1"
  fig verdict_2rank "$(py get "$WORK/cpu-smoke-2rank.json" verdict)"
  fig digest_2rank "$d2"
  fig digest_1rank "$d1"
  if [ "$rc2" != 0 ]; then
    verdict fail "bundled mpirun -np 2 exited $rc2 (see cpu_smoke.log)"
  elif [ "$rc1" != 0 ]; then
    verdict fail "the directly started rank exited $rc1 (see cpu_smoke.log)"
  elif [ -z "$d2" ] || [ "$d2" != "$d1" ]; then
    verdict fail "digests differ: 2 ranks $d2, 1 rank $d1"
  else
    verdict pass "2 ranks and 1 rank agree on $d2$([ "${#ISOLATE[@]}" -gt 0 ] && echo ", with this machine's Open MPI hidden")"
  fi
}

stage_gpu_unit_tests() {
  local rc
  if [ ! -x "$BUNDLE/bin/gpu_tests" ]; then
    verdict skip "gpu_tests was not built (no GPU backend in this build)"
    return
  fi
  tmo 120 env LD_LIBRARY_PATH="$RUN_LD" "$BUNDLE/bin/gpu_tests" --gtest_output="json:$OUT/gpu_tests.json"
  rc=$?
  local line
  while IFS= read -r line; do FIGURES+=("$line"); done < <(py gtest "$OUT/gpu_tests.json")
  fign exit "$rc"
  case $rc in
    0) verdict pass "$(py get "$OUT/gpu_tests.json" tests) tests passed" ;;
    77)
      if [ "$GPU_VISIBLE" = yes ]; then
        verdict fail "gpu_tests saw no GPU (exit 77) although nvidia-smi lists one"
      else
        verdict skip "no GPU visible (gpu_tests exit 77)"
      fi
      ;;
    124 | 137) verdict fail "gpu_tests timed out" ;;
    *) verdict fail "gpu_tests exited $rc: $(grep -E '^\[  FAILED  \]' "$STAGE_LOG" | head -3 | tr '\n' ' ')" ;;
  esac
}

stage_gemm_vs_torch() {
  local dtype rc status statuses=() reasons=() rate torch_rc
  for dtype in fp32 bf16; do
    section "trainproof, $dtype"
    tmo 60 env LD_LIBRARY_PATH="$RUN_LD" "$BUNDLE/bin/trainproof" train --compute.backend=cuda --comm.backend=mpi \
      --model.layers=4 --model.hidden=4096 --model.seq=2048 --model.batch=4 --model.dtype="$dtype" \
      --train.steps=6 --train.warmup_steps=2 --report "$WORK/gemm-$dtype.json" >"$WORK/gemm-$dtype.log" 2>&1
    rc=$?
    cat "$WORK/gemm-$dtype.log"
    status=$(gpu_run_status "$rc")
    statuses+=("$status")
    reasons+=("$(gpu_run_reason "$rc" "$WORK/gemm-$dtype.log" "trainproof $dtype")")
    rate=$(py get "$WORK/gemm-$dtype.json" train.gemm_rate_flops)
    fign "exit_$dtype" "$rc"
    [ -n "$rate" ] && fign "trainproof_${dtype}_tflops" "$(awk -v r="$rate" 'BEGIN {printf "%.2f", r / 1e12}')"
  done
  if [ "${statuses[0]}" = skip ] && [ "${statuses[1]}" = skip ]; then
    verdict skip "${reasons[0]}"
    return
  fi

  section "torch.matmul, same shapes"
  tmo 120 python3 "$WORK/device_check.py" torch-gemm "$WORK/torch-gemm.json"
  torch_rc=$?
  for dtype in fp32 bf16; do
    local torch_rate tp_rate
    torch_rate=$(py get "$WORK/torch-gemm.json" "${dtype}_flops")
    tp_rate=$(py get "$WORK/gemm-$dtype.json" train.gemm_rate_flops)
    [ -n "$torch_rate" ] && fign "torch_${dtype}_tflops" "$(awk -v r="$torch_rate" 'BEGIN {printf "%.2f", r / 1e12}')"
    [ -n "$torch_rate" ] && [ -n "$tp_rate" ] &&
      fign "ratio_${dtype}" "$(awk -v a="$tp_rate" -v b="$torch_rate" 'BEGIN {printf "%.3f", a / b}')"
  done
  if [[ " ${statuses[*]} " == *" fail "* ]]; then
    verdict fail "$(printf '%s; ' "${reasons[@]}")"
  elif [ "$torch_rc" != 0 ]; then
    verdict fail "torch.matmul timing exited $torch_rc (see gemm_vs_torch.log)"
  else
    verdict pass "rates and ratios in the figures (trainproof / torch)"
  fi
}

stage_train_nccl_1rank() {
  local rc
  tmo 90 env LD_LIBRARY_PATH="$RUN_LD" "$BUNDLE/bin/trainproof" train --scenario "$BUNDLE/scenarios/smoke.ini" \
    --compute.backend=cuda --comm.backend=nccl --report "$WORK/train-nccl.json" >"$WORK/train-nccl.log" 2>&1
  rc=$?
  cat "$WORK/train-nccl.log"
  fign exit "$rc"
  report_figs "$WORK/train-nccl.json" ""
  NCCL_DIGEST=$(py get "$WORK/train-nccl.json" train.final_digest)
  verdict "$(gpu_run_status "$rc")" "$(gpu_run_reason "$rc" "$WORK/train-nccl.log" "trainproof")$([ "$rc" = 0 ] && echo ", verdict $(py get "$WORK/train-nccl.json" verdict)")"
}

# Two identical runs must end bit-identical; by design they also match the 1-rank NCCL run, since
# the digest depends on neither the world size nor the collective.
stage_train_cuda_mpi_2rank() {
  local i rc rcs=() digests=() status=pass reason=
  for i in 1 2; do
    section "run $i"
    tmo 70 env LD_LIBRARY_PATH="$RUN_LD" "$BUNDLE/bin/mpirun" "${mpirun_flags[@]}" -np 2 \
      "$BUNDLE/bin/trainproof" train --scenario "$BUNDLE/scenarios/smoke.ini" --compute.backend=cuda \
      --comm.backend=mpi --report "$WORK/train-mpi-$i.json" >"$WORK/train-mpi-$i.log" 2>&1
    rc=$?
    cat "$WORK/train-mpi-$i.log"
    rcs+=("$rc")
    digests+=("$(py get "$WORK/train-mpi-$i.json" train.final_digest)")
    fign "exit_run$i" "$rc"
    fig "verdict_run$i" "$(py get "$WORK/train-mpi-$i.json" verdict)"
    fig "digest_run$i" "${digests[-1]}"
    [ "$i" = 1 ] && report_figs "$WORK/train-mpi-1.json" "run1_"
    if [ "$(gpu_run_status "$rc")" != pass ]; then
      status=$(gpu_run_status "$rc")
      reason=$(gpu_run_reason "$rc" "$WORK/train-mpi-$i.log" "run $i")
      [ "$status" = skip ] && break
    fi
  done
  if [ "$status" != pass ]; then
    verdict "$status" "$reason"
    return
  fi
  local cross=null
  [ -n "${NCCL_DIGEST:-}" ] && cross=$([ "${digests[0]}" = "$NCCL_DIGEST" ] && echo true || echo false)
  fign digests_agree "$([ -n "${digests[0]}" ] && [ "${digests[0]}" = "${digests[1]}" ] && echo true || echo false)"
  fig nccl_1rank_digest "${NCCL_DIGEST:-}"
  fign matches_nccl_1rank "$cross"
  if [ -z "${digests[0]}" ] || [ "${digests[0]}" != "${digests[1]}" ]; then
    verdict fail "the two runs differ: ${digests[0]:-none} vs ${digests[1]:-none}"
  elif [ "$cross" = false ]; then
    verdict pass "runs agree on ${digests[0]}; EXPECTED TO MATCH but differs from the 1-rank NCCL digest $NCCL_DIGEST"
    loud "2-rank MPI digest ${digests[0]} differs from the 1-rank NCCL digest $NCCL_DIGEST"
  else
    verdict pass "runs agree on ${digests[0]}$([ "$cross" = true ] && echo ", and match the 1-rank NCCL run")"
  fi
}

# A run stopped after step 20 (checkpoints every 8: step 16 holds) and resumed with --resume auto
# must end on the digest of the uninterrupted 30-step run of stage train_nccl_1rank: the device
# state goes to the host, into HDF5, and back to the device bit-exactly. Two ways: NCCL on 1 rank
# with sync file-per-rank checkpoints, and 2 ranks over MPI with async shared-file checkpoints.
stage_checkpoint_resume() {
  local name rc status=pass reason="" restored digest
  local -a ranks_of=([0]=1 [1]=2)
  local -a args_of=(
    "--comm.backend=nccl"
    "--comm.backend=mpi --checkpoint.layout=shared-file --checkpoint.async=true"
  )
  local i
  for i in 0 1; do
    name=$([ "$i" = 0 ] && echo nccl_sync || echo mpi_shared_async)
    section "$name"
    rm -rf "$WORK/ckpt-$name"
    local -a cmd=(env LD_LIBRARY_PATH="$RUN_LD" "$BUNDLE/bin/mpirun" "${mpirun_flags[@]}"
      -np "${ranks_of[$i]}" "$BUNDLE/bin/trainproof" train --scenario "$BUNDLE/scenarios/smoke.ini"
      --compute.backend=cuda --checkpoint.dir="$WORK/ckpt-$name" --checkpoint.every=8)
    # shellcheck disable=SC2206 # the per-case options are words on purpose
    local -a extra=(${args_of[$i]})
    tmo 60 "${cmd[@]}" "${extra[@]}" --train.steps=20 --report "$WORK/ckpt-$name-stop.json" \
      >"$WORK/ckpt-$name-stop.log" 2>&1
    rc=$?
    cat "$WORK/ckpt-$name-stop.log"
    if [ "$(gpu_run_status "$rc")" != pass ]; then
      status=$(gpu_run_status "$rc")
      reason=$(gpu_run_reason "$rc" "$WORK/ckpt-$name-stop.log" "$name, first run")
      break
    fi
    tmo 60 "${cmd[@]}" "${extra[@]}" --resume auto --report "$WORK/ckpt-$name-resume.json" \
      >"$WORK/ckpt-$name-resume.log" 2>&1
    rc=$?
    cat "$WORK/ckpt-$name-resume.log"
    restored=$(py get "$WORK/ckpt-$name-resume.json" train.restored_step)
    digest=$(py get "$WORK/ckpt-$name-resume.json" train.final_digest)
    fign "${name}_exit" "$rc"
    fig "${name}_restored_step" "$restored"
    fig "${name}_digest" "$digest"
    fig "${name}_write_gbps" "$(py get "$WORK/ckpt-$name-stop.json" checkpoint.write_gbps)"
    fig "${name}_restore_gbps" "$(py get "$WORK/ckpt-$name-resume.json" checkpoint.restore_gbps)"
    if [ "$rc" != 0 ]; then
      status=fail
      reason=$(gpu_run_reason "$rc" "$WORK/ckpt-$name-resume.log" "$name, resumed run")
      break
    elif [ "$restored" != 16 ]; then
      status=fail
      reason="$name: restored step ${restored:-none}, expected 16"
      break
    elif [ -n "${NCCL_DIGEST:-}" ] && [ "$digest" != "$NCCL_DIGEST" ]; then
      status=fail
      reason="$name: resumed digest $digest differs from the uninterrupted run's $NCCL_DIGEST"
      break
    fi
    reason+="${reason:+; }$name: restored 16, digest ${digest:0:12}"
    [ -z "${NCCL_DIGEST:-}" ] && reason+=" (no uninterrupted digest to compare)"
  done
  verdict "$status" "$reason"
}

# prepare-data writes a raw dataset (on the CPU, over the bundled Open MPI); the loader then feeds
# it to the GPU compute with every sample's checksum verified: 1 rank over NCCL with 2 readers,
# and 2 ranks sharing the GPU over MPI with 4 readers and a deeper prefetch. The digest depends on
# neither the world size, the collective nor the readers, so both runs must agree; and the bytes
# read feed the GEMMs, so they must differ from the synthetic 30-step run (train_nccl_1rank).
stage_data_path() {
  local rc name digest status=pass reason="" first=""
  # The dataset (32 MiB of random bytes) stays out of $WORK, which is archived for the return trip.
  local dataset
  dataset=$(mktemp -d "${TMPDIR:-/tmp}/trainproof-device-data.XXXXXX")
  local -a shape=(--data.dir="$dataset" --data.format=raw --data.files=4 --data.samples=512
    --data.sample_bytes=65536 --data.spread=0.25)
  tmo 40 env LD_LIBRARY_PATH="$RUN_LD" "$BUNDLE/bin/mpirun" "${mpirun_flags[@]}" -np 2 \
    "$BUNDLE/bin/trainproof" prepare-data --scenario "$BUNDLE/scenarios/smoke.ini" "${shape[@]}" \
    >"$WORK/data-prepare.log" 2>&1
  rc=$?
  cat "$WORK/data-prepare.log"
  fign prepare_exit "$rc"
  if [ "$rc" != 0 ]; then
    rm -rf "$dataset"
    verdict fail "prepare-data exited $rc: $(tail -n 1 "$WORK/data-prepare.log")"
    return
  fi
  local -a runs=("1 nccl 2 2" "2 mpi 4 4")
  local run ranks comm readers prefetch
  for run in "${runs[@]}"; do
    read -r ranks comm readers prefetch <<<"$run"
    name=${comm}_${ranks}rank
    section "$name"
    tmo 35 env LD_LIBRARY_PATH="$RUN_LD" "$BUNDLE/bin/mpirun" "${mpirun_flags[@]}" --bind-to none \
      -np "$ranks" "$BUNDLE/bin/trainproof" train --scenario "$BUNDLE/scenarios/smoke.ini" \
      "${shape[@]}" --compute.backend=cuda --comm.backend="$comm" --data.verify=true \
      --data.readers="$readers" --data.prefetch="$prefetch" --report "$WORK/data-$name.json" \
      >"$WORK/data-$name.log" 2>&1
    rc=$?
    cat "$WORK/data-$name.log"
    fign "${name}_exit" "$rc"
    if [ "$(gpu_run_status "$rc")" != pass ]; then
      status=$(gpu_run_status "$rc")
      reason=$(gpu_run_reason "$rc" "$WORK/data-$name.log" "$name")
      break
    fi
    digest=$(py get "$WORK/data-$name.json" train.final_digest)
    fig "${name}_digest" "$digest"
    fign "${name}_samples_read" "$(py get "$WORK/data-$name.json" data.samples_read)"
    fign "${name}_read_gbps" "$(py get "$WORK/data-$name.json" data.read_gbps)"
    fign "${name}_au" "$(py get "$WORK/data-$name.json" train.au)"
    if [ -z "$first" ]; then
      first=$digest
    elif [ "$digest" != "$first" ]; then
      status=fail
      reason="$name: digest $digest differs from the 1-rank NCCL run's $first"
      break
    fi
    reason+="${reason:+; }$name: verified, digest ${digest:0:12}"
  done
  if [ "$status" = pass ] && [ -n "${NCCL_DIGEST:-}" ] && [ "$first" = "$NCCL_DIGEST" ]; then
    status=fail
    reason="the dataset run's digest equals the synthetic run's: the bytes read never reached the GPU"
  fi
  rm -rf "$dataset"
  verdict "$status" "$reason"
}

# ---------------------------------------------------------------------------------------------
# Driver

run_stage() {
  local name=$1 limit=${STAGE_LIMIT_S[$1]} left start seconds
  left=$((DEADLINE - $(now)))
  STATUS=fail
  REASON="the stage ended without a verdict"
  FIGURES=()
  STAGE_LOG=$WORK/$name.log
  start=$EPOCHREALTIME
  if [ "$left" -lt 20 ]; then
    STATUS=not-run
    REASON="the time budget (DEVICE_CHECK_BUDGET_S) was spent before this stage"
  else
    [ "$limit" -lt "$left" ] || limit=$left
    STAGE_END=$(($(now) + limit))
    say "stage $name: ${STAGE_TITLE[$name]} (limit ${limit}s)"
    "stage_$name" >"$STAGE_LOG" 2>&1 </dev/null
  fi
  seconds=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1f", b - a}')
  py result "$WORK/results/$name.json" "$name" "$STATUS" "$seconds" "$REASON" "${FIGURES[@]}"
  if [ "$STATUS" = fail ]; then loud "$name: FAIL (${seconds}s): $REASON"; else say "  -> $STATUS (${seconds}s): $REASON"; fi
  publish
}

# Rewrites the summary and the stage archive, so a run stopped at any point returns what it did.
publish() {
  py summary "$WORK/results" "$OUT" "$MODE" "$STARTED" "$(
    IFS=,
    echo "${STAGES[*]}"
  )"
  cp -f "$BUNDLE/MANIFEST.txt" "$WORK/bundle-MANIFEST.txt" 2>/dev/null
  tar -C "$WORK" -czf "$OUT/stages.tar.gz.tmp" . 2>/dev/null && mv -f "$OUT/stages.tar.gz.tmp" "$OUT/stages.tar.gz"
}

run_checks() {
  MODE=$1
  if ! setup; then
    loud "set-up failed: no bundle to run (see above)"
    py result "$WORK/results/environment.json" environment fail 0 "set-up failed: the bundle could not be unpacked"
    py summary "$WORK/results" "$OUT" "$MODE" "$STARTED" "$(
      IFS=,
      echo "${STAGES[*]}"
    )"
    return 1
  fi
  for stage in "${STAGES[@]}"; do run_stage "$stage"; done
  say "summary ($OUT/summary.md):"
  cat "$OUT/summary.md" >&3
  local overall
  overall=$(py get "$OUT/summary.json" overall)
  say "overall: $overall"
  [ "$overall" = pass ]
}

case $mode in
  bundle) exec "$repo/scripts/device-bundle.sh" "${pack_args[@]}" ;;
  dry-run)
    if [ "$make_bundle" = 1 ]; then "$repo/scripts/device-bundle.sh" "${pack_args[@]}" || exit 1; fi
    run_checks dry-run
    ;;
  run) run_checks device ;;
esac
rc=$?
# Let tee write the last lines of console.log before the caller collects it.
exec 1>&- 2>&- 3>&-
[ -n "${TEE_PID:-}" ] && wait "$TEE_PID" 2>/dev/null
exit "$rc"
