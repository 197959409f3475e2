"""What the GPU machine's own Python stack brings: PyTorch's versions, the torch.matmul rate on
trainproof's GEMM shape (the yardstick for trainproof's cuBLAS rate), and the folders of the pip
packages that carry CUDA and NCCL (the NCCL PyTorch uses is the one the bundle should use too).

    torch_probe.py versions
    torch_probe.py gemm OUT_JSON      exit 77: no torch, or no CUDA device for it
    torch_probe.py lib-dirs

Run with the machine's own libraries, never the bundle's.
"""
import importlib.util
import json
import os
import sys


def cmd_versions():
    # Not caught: when torch does not import, the traceback's last line is what the log shows.
    import torch
    try:
        v = torch.cuda.nccl.version()
        nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception:
        nccl = "unknown"
    print(f"version={torch.__version__} cuda={torch.version.cuda} nccl={nccl} "
          f"gpu={torch.cuda.is_available()}")


def cmd_gemm(path):
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
    # trainproof's fp32 GEMMs never drop to TF32, so torch's must not either, or the ratio would
    # compare different arithmetic.
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


def cmd_lib_dirs():
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
