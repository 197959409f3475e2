# shellcheck shell=bash
# The device check's stages, sourced by scripts/device-check.sh, which runs them in the order of
# STAGES. A stage is a function stage_<name> that runs with its log on stdout and ends by calling
# `verdict STATUS REASON`, after `fig KEY TEXT` or `fign KEY NUMBER` for each figure worth
# reporting. It may use what the driver's setup found: BUNDLE (the unpacked bundle), WORK (this
# run's scratch folder, archived into stages.tar.gz), OUT, MODE (device or dry-run), RUN_LD,
# GPU_LIB_DIRS, GPU_VISIBLE (yes or no), GPU_COUNT (what `nvidia-smi -L` lists; the dry run's
# fake lists eight), PIN_ONE_GPU (mpirun options that keep GPU-sharing stages on one GPU when
# there are several), ISOLATE and STAGE_LOG.

# shellcheck disable=SC2034 # the table is read by scripts/device-check.sh
STAGES=(environment cpu_smoke gpu_unit_tests gemm_vs_torch train_nccl_1rank train_nccl_all_gpus
        collective_sweep train_cuda_mpi_2rank watchdog_gpu checkpoint_resume data_path node_health)
# --- Later capabilities add their stages here (function, time limit, entry in STAGES).
# shellcheck disable=SC2034
declare -A STAGE_LIMIT_S=(
  [environment]=60
  [cpu_smoke]=60
  [gpu_unit_tests]=120
  [gemm_vs_torch]=150
  [train_nccl_1rank]=90
  [train_nccl_all_gpus]=90
  [watchdog_gpu]=60
  [collective_sweep]=90
  [train_cuda_mpi_2rank]=150
  [checkpoint_resume]=150
  [data_path]=120
  [node_health]=90
)
# shellcheck disable=SC2034
declare -A STAGE_TITLE=(
  [environment]="GPU, driver, CUDA, NCCL, PyTorch; every bundled file's libraries resolve"
  [cpu_smoke]="bundled mpirun, 2 ranks of the bundled trainproof on scenarios/tiny.ini (CPU)"
  [gpu_unit_tests]="gpu_tests (GoogleTest)"
  [gemm_vs_torch]="cuBLAS GEMM rate from trainproof against torch.matmul, fp32 and bf16"
  [train_nccl_1rank]="smoke.ini, compute cuda, comm nccl, 1 rank"
  [train_nccl_all_gpus]="with more than one GPU: smoke.ini over NCCL on every GPU, one rank each; the 1-rank digest, N distinct UUIDs, NCCL's transports"
  [watchdog_gpu]="2 ranks on one GPU (cuda + mpi), rank 1 hangs in compute at step 5 with watchdog.timeout_s=5: the job ends and abort.json names rank 1"
  [collective_sweep]="trainproof sweep over NCCL, every op, float32 and bf16, one rank per GPU: every element right, timings sane"
  [train_cuda_mpi_2rank]="smoke.ini, compute cuda, comm mpi, 2 ranks, twice; digests agree"
  [data_path]="a prepared dataset read by the loader into the GPU compute (nccl 1 rank, mpi 2 ranks), verified; digests agree and differ from synthetic"
  [checkpoint_resume]="GPU state checkpointed, stopped and resumed (nccl file-per-rank sync; mpi 2 ranks shared-file async); digests match the uninterrupted run"
  [node_health]="trainproof node-check --level=full (a 20 s burn) against an inventory of this machine's GPUs (NVML): Healthy, each GPU's health at rest, its GEMM rate, and its clocks and PCIe link while busy"
)

# ---------------------------------------------------------------------------------------------
# environment: what the machine offers, then whether every bundled file's libraries resolve

environment_host() {
  section "host"
  uname -a
  grep -E '^(PRETTY_NAME|VERSION_ID)=' /etc/os-release
  ldd --version | head -1
  echo "cpus: $(nproc)"
  free -g 2>/dev/null | head -2
  fig glibc "$(ldd --version | head -1 | awk '{print $NF}')"
  head -8 "$BUNDLE/MANIFEST.txt"
}

environment_nvidia_smi() {
  local line
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
}

environment_nvcc() {
  local nvcc
  section "nvcc"
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  if [ -x "$nvcc" ]; then
    tmo 30 "$nvcc" --version
    fig nvcc "$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
  else
    echo "nvcc: not installed"
  fi
}

environment_torch() {
  local line kv
  section "PyTorch and its NCCL"
  line=$(tmo 90 python3 "$TORCH_PROBE" versions 2>&1 | tail -1)
  echo "$line"
  case $line in
    version=*)
      for kv in $line; do fig "torch_${kv%%=*}" "${kv#*=}"; done
      ;;
    *) fig torch "not importable" ;;
  esac
}

environment_library_path() {
  local name
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
}

stage_environment() {
  local file missing=() expected=() outside=() line name path rel
  environment_host
  environment_nvidia_smi
  environment_nvcc
  environment_torch
  environment_library_path

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

# ---------------------------------------------------------------------------------------------
# The other stages

# The relocated Open MPI on CPU: if this fails, the 2-rank GPU stage cannot work either, and this
# says why without a GPU in the way.
stage_cpu_smoke() {
  local scenario=$BUNDLE/scenarios/tiny.ini rc2 rc1 d2 d1
  fign isolated_from_system_mpi "$([ "${#ISOLATE[@]}" -gt 0 ] && echo true || echo false)"
  section "2 ranks under the bundled mpirun"
  launch --isolated 60 2 -- train --scenario "$scenario" --compute.backend=cpu --comm.backend=mpi \
    --report "$WORK/cpu-smoke-2rank.json"
  rc2=$?
  section "1 rank started directly (an MPI singleton)"
  tmo 60 "${ISOLATE[@]}" env LD_LIBRARY_PATH="$RUN_LD" "$BUNDLE/bin/trainproof" train --scenario "$scenario" \
    --compute.backend=cpu --comm.backend=mpi --report "$WORK/cpu-smoke-1rank.json"
  rc1=$?
  d2=$(results get "$WORK/cpu-smoke-2rank.json" train.final_digest)
  d1=$(results get "$WORK/cpu-smoke-1rank.json" train.final_digest)
  fign exit_2rank "$rc2"
  fign exit_1rank "$rc1"
  fig verdict_2rank "$(results get "$WORK/cpu-smoke-2rank.json" verdict)"
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
  local rc line
  if [ ! -x "$BUNDLE/bin/gpu_tests" ]; then
    verdict skip "gpu_tests was not built (no GPU backend in this build)"
    return
  fi
  tmo 120 env LD_LIBRARY_PATH="$RUN_LD" "$BUNDLE/bin/gpu_tests" --gtest_output="json:$OUT/gpu_tests.json"
  rc=$?
  while IFS= read -r line; do FIGURES+=("$line"); done < <(results gtest "$OUT/gpu_tests.json")
  fign exit "$rc"
  case $rc in
    0) verdict pass "$(results get "$OUT/gpu_tests.json" tests) tests passed" ;;
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
  local dtype rc status statuses=() reasons=() rate torch_rc torch_rate tp_rate
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
    rate=$(results get "$WORK/gemm-$dtype.json" train.gemm_rate_flops)
    fign "exit_$dtype" "$rc"
    [ -n "$rate" ] && fign "trainproof_${dtype}_tflops" "$(awk -v r="$rate" 'BEGIN {printf "%.2f", r / 1e12}')"
  done
  if [ "${statuses[0]}" = skip ] && [ "${statuses[1]}" = skip ]; then
    verdict skip "${reasons[0]}"
    return
  fi

  section "torch.matmul, same shapes"
  tmo 120 python3 "$TORCH_PROBE" gemm "$WORK/torch-gemm.json"
  torch_rc=$?
  for dtype in fp32 bf16; do
    torch_rate=$(results get "$WORK/torch-gemm.json" "${dtype}_flops")
    tp_rate=$(results get "$WORK/gemm-$dtype.json" train.gemm_rate_flops)
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
  # NCCL's Init timings line reaches the report's context.communicators through this file.
  tmo 90 env LD_LIBRARY_PATH="$RUN_LD" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT \
    NCCL_DEBUG_FILE="$WORK/nccl-debug-1rank.%h.%p" "$BUNDLE/bin/trainproof" train --scenario "$BUNDLE/scenarios/smoke.ini" \
    --compute.backend=cuda --comm.backend=nccl --report "$WORK/train-nccl.json" >"$WORK/train-nccl.log" 2>&1
  rc=$?
  cat "$WORK/train-nccl.log"
  fign exit "$rc"
  report_figs "$WORK/train-nccl.json" ""
  NCCL_DIGEST=$(results get "$WORK/train-nccl.json" train.final_digest)
  verdict "$(gpu_run_status "$rc")" "$(gpu_run_reason "$rc" "$WORK/train-nccl.log" "trainproof")$([ "$rc" = 0 ] && echo ", verdict $(results get "$WORK/train-nccl.json" verdict)")"
}

# The sweep over NCCL on every GPU of the machine (one rank each): every op's rows in float32 and
# bf16 must be right, and their timings sane (p50 <= p99, algbw above 0). With one GPU busbw's
# factor is 0, so algbw is the figure: allreduce out of place is a device copy there.
sweep_sanity() {
  python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
rows = [x for x in r["sweep"]["results"] if not x["not_run"]]
bad = [x for x in rows if not (x["time_us"]["p50"] <= x["time_us"]["p99"] and x["algbw_gbps"] > 0
                               and x["time_us"]["mean"] > 0)]
top = max((x for x in rows if x["op"] == "allreduce" and not x["in_place"]), key=lambda x: x["bytes"])
print(len(rows), r["sweep"]["wrong"], len(bad), "%.1f" % top["algbw_gbps"], top["bytes"])
PY
}

stage_collective_sweep() {
  local gpus=$GPU_COUNT dtype rc status=pass reason="" figures
  [ "$gpus" -ge 1 ] || gpus=1
  fign gpus "$gpus"
  for dtype in float32 bf16; do
    section "sweep $dtype on $gpus rank(s)"
    launch 40 "$gpus" -- sweep --comm.backend=nccl --sweep.dtype="$dtype" --sweep.min_bytes=1024 \
      --sweep.max_bytes=67108864 --sweep.iters=10 --sweep.warmup=2 \
      --report "$WORK/sweep-$dtype.json" >"$WORK/sweep-$dtype.log" 2>&1
    rc=$?
    cat "$WORK/sweep-$dtype.log"
    fign "exit_$dtype" "$rc"
    if [ "$(gpu_run_status "$rc")" != pass ]; then
      status=$(gpu_run_status "$rc")
      reason=$(gpu_run_reason "$rc" "$WORK/sweep-$dtype.log" "sweep $dtype")
      [ "$status" = skip ] && break
      continue
    fi
    read -r -a figures < <(sweep_sanity "$WORK/sweep-$dtype.json")
    fign "${dtype}_rows" "${figures[0]:-}"
    fign "${dtype}_wrong" "${figures[1]:-}"
    fign "${dtype}_insane_rows" "${figures[2]:-}"
    fign "${dtype}_allreduce_algbw_gbps_at_${figures[4]:-max}" "${figures[3]:-}"
    if [ "${figures[1]:-x}" != 0 ] || [ "${figures[2]:-x}" != 0 ]; then
      status=fail
      reason="sweep $dtype: ${figures[1]:-?} wrong elements, ${figures[2]:-?} rows with insane timings"
    fi
  done
  verdict "$status" "${reason:-every row right in float32 and bf16; figures hold the allreduce algbw}"
}

# Every GPU of the machine, one NCCL rank each, on the 1-rank run's work: the digest must be the
# 1-rank digest (it depends on neither the world size nor the collective), every rank must have
# driven its own GPU, and NCCL's own log says which transports it chose between them.
stage_train_nccl_all_gpus() {
  local rc counts transports digest
  if [ "$GPU_COUNT" -lt 2 ]; then
    verdict skip "$GPU_COUNT GPU listed: train_nccl_1rank covers it"
    return
  fi
  fign gpus "$GPU_COUNT"
  rm -f "$WORK"/nccl-debug.*
  launch 80 "$GPU_COUNT" -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,GRAPH \
    -x NCCL_DEBUG_FILE="$WORK/nccl-debug.%h.%p" -- train --scenario "$BUNDLE/scenarios/smoke.ini" \
    --compute.backend=cuda --comm.backend=nccl --report "$WORK/train-nccl-all.json" \
    >"$WORK/train-nccl-all.log" 2>&1
  rc=$?
  cat "$WORK/train-nccl-all.log"
  fign exit "$rc"
  if [ "$(gpu_run_status "$rc")" != pass ]; then
    verdict "$(gpu_run_status "$rc")" "$(gpu_run_reason "$rc" "$WORK/train-nccl-all.log" "$GPU_COUNT ranks")"
    return
  fi
  report_figs "$WORK/train-nccl-all.json" ""
  read -r -a counts < <(results gpu-uuids "$WORK/train-nccl-all.json")
  transports=$(results nccl-transports "$WORK"/nccl-debug.*)
  digest=$(results get "$WORK/train-nccl-all.json" train.final_digest)
  fign ranks "${counts[0]:-0}"
  fign distinct_gpus "${counts[1]:-0}"
  fig transports "${transports:-none seen}"
  fign matches_nccl_1rank "$([ -n "${NCCL_DIGEST:-}" ] && [ "$digest" = "$NCCL_DIGEST" ] && echo true || echo false)"
  if [ "${counts[1]:-0}" != "$GPU_COUNT" ]; then
    verdict fail "$GPU_COUNT ranks drove ${counts[1]:-0} distinct GPUs (ranks[].gpu.uuid)"
  elif [ -n "${NCCL_DIGEST:-}" ] && [ "$digest" != "$NCCL_DIGEST" ]; then
    verdict fail "digest $digest differs from the 1-rank NCCL run's $NCCL_DIGEST"
  else
    verdict pass "$GPU_COUNT ranks on $GPU_COUNT GPUs, digest ${digest:0:12}$([ -n "${NCCL_DIGEST:-}" ] && echo " (the 1-rank digest)"), transports ${transports:-none seen}"
  fi
}

# The watchdog on the GPU path: rank 1 stops responding on entering step 5's compute; rank 0 waits
# for it in the collective. The job must end well within the stage's limit, and abort.json must
# name rank 1 and nobody else.
stage_watchdog_gpu() {
  local rc started seconds named dir=$WORK/watchdog
  rm -rf "$dir"
  mkdir -p "$dir"
  started=$(now)
  launch 50 2 "${PIN_ONE_GPU[@]}" -- train --scenario "$BUNDLE/scenarios/smoke.ini" \
    --compute.backend=cuda --comm.backend=mpi --fault hang:rank=1,step=5 \
    --watchdog.timeout_s=5 --watchdog.dir="$dir" --report "$WORK/watchdog.json" \
    >"$WORK/watchdog.log" 2>&1
  rc=$?
  seconds=$(($(now) - started))
  cat "$WORK/watchdog.log"
  fign exit "$rc"
  fign seconds "$seconds"
  if [ ! -f "$dir/abort.json" ]; then
    if [ "$GPU_VISIBLE" = no ] || [ ! -f "$BUNDLE/bin/libtrainproof_gpu.so" ]; then
      verdict skip "$(gpu_run_reason "$rc" "$WORK/watchdog.log" "hung run")"
    else
      verdict fail "no abort.json after the hang ($(gpu_run_reason "$rc" "$WORK/watchdog.log" "hung run"))"
    fi
    return
  fi
  cp "$dir/abort.json" "$WORK/watchdog-abort.json"
  named=$(results abort-names "$dir/abort.json")
  fig named "$named"
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    verdict fail "the hung job was still running at the stage's limit"
  elif [ "$named" != 1 ]; then
    verdict fail "abort.json names rank(s) '${named}', expected rank 1"
  else
    verdict pass "the job ended after ${seconds}s (exit $rc); abort.json names rank 1"
  fi
}

# Two identical runs must end bit-identical; by design they also match the 1-rank NCCL run, since
# the digest depends on neither the world size nor the collective.
stage_train_cuda_mpi_2rank() {
  local i rc rcs=() digests=() status=pass reason=
  for i in 1 2; do
    section "run $i"
    launch 70 2 "${PIN_ONE_GPU[@]}" -- train --scenario "$BUNDLE/scenarios/smoke.ini" \
      --compute.backend=cuda --comm.backend=mpi --report "$WORK/train-mpi-$i.json" \
      >"$WORK/train-mpi-$i.log" 2>&1
    rc=$?
    cat "$WORK/train-mpi-$i.log"
    rcs+=("$rc")
    digests+=("$(results get "$WORK/train-mpi-$i.json" train.final_digest)")
    fign "exit_run$i" "$rc"
    fig "verdict_run$i" "$(results get "$WORK/train-mpi-$i.json" verdict)"
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
  local spec name ranks words rc status=pass reason="" restored digest
  # name, ranks, then the options that make the case
  local -a specs=(
    "nccl_sync 1 --comm.backend=nccl"
    "mpi_shared_async 2 --comm.backend=mpi --checkpoint.layout=shared-file --checkpoint.async=true"
  )
  for spec in "${specs[@]}"; do
    read -r -a words <<<"$spec"
    name=${words[0]} ranks=${words[1]}
    section "$name"
    rm -rf "$WORK/ckpt-$name"
    local -a run=(train --scenario "$BUNDLE/scenarios/smoke.ini" --compute.backend=cuda
      --checkpoint.dir="$WORK/ckpt-$name" --checkpoint.every=8 "${words[@]:2}")
    launch 60 "$ranks" "${PIN_ONE_GPU[@]}" -- "${run[@]}" --train.steps=20 \
      --report "$WORK/ckpt-$name-stop.json" >"$WORK/ckpt-$name-stop.log" 2>&1
    rc=$?
    cat "$WORK/ckpt-$name-stop.log"
    if [ "$(gpu_run_status "$rc")" != pass ]; then
      status=$(gpu_run_status "$rc")
      reason=$(gpu_run_reason "$rc" "$WORK/ckpt-$name-stop.log" "$name, first run")
      break
    fi
    launch 60 "$ranks" "${PIN_ONE_GPU[@]}" -- "${run[@]}" --resume auto \
      --report "$WORK/ckpt-$name-resume.json" >"$WORK/ckpt-$name-resume.log" 2>&1
    rc=$?
    cat "$WORK/ckpt-$name-resume.log"
    restored=$(results get "$WORK/ckpt-$name-resume.json" train.restored_step)
    digest=$(results get "$WORK/ckpt-$name-resume.json" train.final_digest)
    fign "${name}_exit" "$rc"
    fig "${name}_restored_step" "$restored"
    fig "${name}_digest" "$digest"
    fig "${name}_write_gbps" "$(results get "$WORK/ckpt-$name-stop.json" checkpoint.write_gbps)"
    fig "${name}_restore_gbps" "$(results get "$WORK/ckpt-$name-resume.json" checkpoint.restore_gbps)"
    fig "${name}_stall_p50_s" "$(results get "$WORK/ckpt-$name-stop.json" checkpoint.stall_s.p50)"
    # The host copy is page-locked for the run unless trainproof warned that it could not be.
    if grep -q "cannot page-lock" "$WORK/ckpt-$name-stop.log"; then fign "${name}_pinned" false
    else fign "${name}_pinned" true; fi
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
  launch 40 2 -- prepare-data --scenario "$BUNDLE/scenarios/smoke.ini" "${shape[@]}" \
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
    # Not bound to cores: the loader's reader threads need more than the one core a rank would get.
    launch 35 "$ranks" --bind-to none "${PIN_ONE_GPU[@]}" -- train \
      --scenario "$BUNDLE/scenarios/smoke.ini" \
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
    digest=$(results get "$WORK/data-$name.json" train.final_digest)
    fig "${name}_digest" "$digest"
    fign "${name}_samples_read" "$(results get "$WORK/data-$name.json" data.samples_read)"
    fign "${name}_read_gbps" "$(results get "$WORK/data-$name.json" data.read_gbps)"
    fign "${name}_au" "$(results get "$WORK/data-$name.json" train.au)"
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
# node_health: node-check --level=full through the real NVML (docs/node-check.md): a 20 s GEMM
# burn on every GPU with the watch beside it (clock reasons, the PCIe link while busy, XIDs),
# and what NVML says of every GPU; without a GPU it burns the CPU and checks this host against
# the dev-VM host file.

stage_node_health() {
  local rc hosts=$WORK/node-health.ini report=$WORK/node-health.json last
  if [ "$GPU_VISIBLE" = yes ]; then
    printf '[inventory]\ngpus = %s\ngpu_name = H200\nmin_gpu_memory_gb = 100\necc = on\nmig = off\n' \
      "$GPU_COUNT" >"$hosts"
  else
    cp "$BUNDLE/scenarios/hosts/dev-vm-2core.ini" "$hosts"
  fi
  cat "$hosts"
  tmo 50 env LD_LIBRARY_PATH="$RUN_LD" "$BUNDLE/bin/trainproof" node-check --gate.file="$hosts" \
    --level=full --health.burn_s=20 --report "$report" >"$WORK/node-health.log" 2>&1
  rc=$?
  cat "$WORK/node-health.log"
  last=$(tail -n 1 "$WORK/node-health.log")
  fign exit "$rc"
  fig last_line "$last"
  fig driver "$(results get "$report" node_check.driver.driver_version)"
  fig cuda_driver "$(results get "$report" node_check.driver.cuda_driver_version)"
  fign gpus_by_driver "$(results count "$report" node_check.driver.gpus)"
  fign temperature_c "$(results get "$report" node_check.driver.gpus.0.health.temperature_c)"
  fign power_w "$(results get "$report" node_check.driver.gpus.0.health.power_w)"
  fign sm_clock_mhz "$(results get "$report" node_check.driver.gpus.0.health.sm_clock_mhz)"
  fig gpu_health "$(results get "$report" gate.checks.1.status)"
  fig xid "$(results get "$report" gate.checks.2.status)"
  fig load_health "$(results get "$report" gate.checks.3.status)"
  fig gpu_burn "$(results get "$report" gate.checks.4.status)"
  fig burn_backend "$(results get "$report" node_check.burn.backend)"
  fign burn_tflops_gpu0 "$(results get "$report" node_check.burn.devices.0.tflops)"
  fign busy_pcie_gen_gpu0 "$(results get "$report" node_check.load.gpus.0.busy_pcie.gen)"
  fign busy_pcie_width_gpu0 "$(results get "$report" node_check.load.gpus.0.busy_pcie.width)"
  fign hottest_c_gpu0 "$(results get "$report" node_check.load.gpus.0.hottest_c)"
  fign peak_power_w_gpu0 "$(results get "$report" node_check.load.gpus.0.peak_power_w)"
  fign memory_copy_gbps_gpu0 "$(results get "$report" node_check.copies.devices.0.device_gbps)"
  fign h2d_gbps_gpu0 "$(results get "$report" node_check.copies.devices.0.h2d_gbps)"
  fign d2h_gbps_gpu0 "$(results get "$report" node_check.copies.devices.0.d2h_gbps)"
  fign peer_pairs "$(results count "$report" node_check.copies.pairs)"
  fig gpu_copies "$(results get "$report" gate.checks.5.status)"
  if [ "$GPU_VISIBLE" != yes ]; then
    if [ "$rc" = 0 ]; then
      verdict skip "no GPU visible; this host against dev-vm-2core.ini: $last"
    else
      verdict fail "node-check exited $rc on this host: $last"
    fi
  elif [ "$rc" = 0 ]; then
    verdict pass "$last"
  else
    verdict fail "node-check exited $rc: $last"
  fi
}
