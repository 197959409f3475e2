"""The device check's records: trainproof's and GoogleTest's reports read, each stage's result and
the summary (summary.json, summary.md) written.

    results.py stage FILE NAME STATUS SECONDS REASON [FIGURE...]
    results.py get FILE DOTTED.KEY              a list's item by its index: gpus.0.name
    results.py count FILE DOTTED.KEY            the items of a list there (0 when none)
    results.py report-figures TRAINPROOF_REPORT
    results.py gtest GTEST_JSON
    results.py gpu-uuids TRAINPROOF_REPORT       ranks, then distinct GPU UUIDs the ranks drove
    results.py nccl-transports NCCL_LOG...       the transports NCCL chose (P2P/IPC, SHM, NET/IB...)
    results.py abort-names ABORT_JSON           the ranks abort.json names as missing
    results.py summary RESULTS_DIR OUT_DIR MODE STARTED STAGE[,STAGE...]

Python because it is on both machines and reads JSON; it never runs with the bundle's libraries.
"""
import json
import os
import sys
import time


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
        if isinstance(data, list) and key.isdigit() and int(key) < len(data):
            data = data[int(key)]
        elif isinstance(data, dict) and key in data:
            data = data[key]
        else:
            return None
    return data


# A report that is missing, cut short or nested past the parser's depth reads as no report: the
# stage that wanted it says why.
def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError, RecursionError):
        return None


def cmd_stage(path, name, status, seconds, reason, *figures):
    entry = {"name": name, "status": status, "seconds": round(float(seconds), 1), "reason": reason,
             "figures": dict(figure(f) for f in figures)}
    with open(path, "w") as f:
        json.dump(entry, f, indent=1)


def cmd_get(path, key):
    value = dig(load(path), key)
    print("" if value is None else value)


def cmd_count(path, key):
    value = dig(load(path), key)
    print(len(value) if isinstance(value, list) else 0)


# One "key=text" or "key:=number" line per figure, as the shell's FIGURES takes them.
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
    # The world communicator's set-up, first and steady allreduce, and NCCL's own Init timings
    # (context.communicators), in ms: p50 and the slowest rank.
    world = next((c for c in dig(report, "context.communicators") or []
                  if c.get("comm") == "world"), None)
    if world:
        for name, path in (("comm_setup", "set_up_s"), ("first_allreduce", "first_s.allreduce"),
                           ("steady_allreduce", "steady_s.allreduce"),
                           ("nccl_init_total", "nccl_init_timings_s.total"),
                           ("nccl_init_connections", "nccl_init_timings_s.connections")):
            spread = dig(world, path)
            if spread:
                print(f"{name}_p50_ms:={spread['p50'] * 1e3:.3f}")
                print(f"{name}_max_ms:={spread['max'] * 1e3:.3f}")
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


def cmd_gpu_uuids(path):
    report = load(path)
    if report is None:
        return
    uuids = [(r.get("gpu") or {}).get("uuid") for r in report.get("ranks", [])]
    print(len(uuids), len({u for u in uuids if u}))


# NCCL_DEBUG=INFO names each channel's connection: "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
# "via NET/IB/0/GDRDMA", "via SHM/direct/direct"; NVLS and CollNet announce themselves too.
def cmd_nccl_transports(*paths):
    import re
    found = set()
    for path in paths:
        try:
            with open(path, errors="replace") as f:
                for line in f:
                    m = re.search(r" via ([A-Za-z0-9]+(?:/[A-Za-z0-9]+)?)", line)
                    if m:
                        found.add(m.group(1))
                    if "NVLS" in line and "enabled" in line.lower():
                        found.add("NVLS")
        except OSError:
            continue
    print(",".join(sorted(found)))


def cmd_abort_names(path):
    record = load(path)
    if record is None:
        return
    print(",".join(str(m.get("rank")) for m in record.get("missing", [])))


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


if __name__ == "__main__":
    command, args = sys.argv[1].replace("-", "_"), sys.argv[2:]
    globals()["cmd_" + command](*args)
