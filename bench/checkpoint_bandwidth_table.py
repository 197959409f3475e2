"""The figures of bench/checkpoint-bandwidth.sh: reads its reports, fio's and memory_copy's JSON,
checks that every run gave what it should (a broken run is an error, a slow one is a figure),
prints the table of medians and ratios against the targets, writes checkpoint-bandwidth.json.

Usage: checkpoint_bandwidth_table.py OUT RANKS ROUNDS SAVES "LAYOUTS" SIZE...
"""
import json
import statistics
import sys

out, ranks, rounds, saves = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
layouts, sizes = sys.argv[5].split(), sys.argv[6:]


class BrokenRun(Exception):
    pass


def load(name):
    try:
        with open(f"{out}/{name}.json") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise BrokenRun(f"{out}/{name}.json: {e}")


def positive(value, what):
    if not isinstance(value, (int, float)) or value <= 0:
        raise BrokenRun(f"{what}: {value!r} is not a positive figure")
    return float(value)


def fio_seconds(name, rw, expect_bytes):
    """fio's time for the group: the slowest job's runtime, the end_fsync included, scaled to
    the expected bytes (the script gives fio whole blocks, leaving out the last few KB)."""
    job = load(name)["jobs"][0]
    if job.get("error"):
        raise BrokenRun(f"{name}: fio error {job['error']}")
    moved = job[rw]["io_bytes"]
    if not 0.99 * expect_bytes <= moved <= expect_bytes:
        raise BrokenRun(f"{name}: fio moved {moved} bytes, expected {expect_bytes}")
    return positive(job[rw]["runtime"], f"{name} runtime") / 1e3 * expect_bytes / moved


def first_and_steady(values):
    return values[0], statistics.median(values[1:] if len(values) > 1 else values)


def checked_saves(name, expect):
    report = load(name)
    saves_ = report["checkpoint"]["saves"]
    if len(saves_) != expect:
        raise BrokenRun(f"{name}: {len(saves_)} saves in the report, expected {expect}")
    return report, saves_


def layout_round(size, r, layout):
    name = f"{size}-r{r}-{layout}"
    report, saves_ = checked_saves(f"{name}-sync", saves)
    per_rank = report["checkpoint"]["bytes"] // ranks
    total = per_rank * ranks
    stall_first, stall = first_and_steady(
        [positive(s["stall_s"], f"{name}-sync stall_s") for s in saves_])
    window = statistics.median(s["write_gbps"] for s in saves_[1:] or saves_)
    restore = load(f"{name}-restore")["checkpoint"]["restore"]
    if not restore or restore["step"] != saves:
        raise BrokenRun(f"{name}-restore: did not restore step {saves}: {restore!r}")
    restore_s = positive(restore["seconds"], f"{name}-restore seconds")
    fio_write = fio_seconds(f"{name}-fio-write", "write", total)
    fio_read = fio_seconds(f"{name}-fio-read", "read", total)
    return {"bytes_per_rank": per_rank, "stall_first_s": stall_first, "stall_s": stall,
            "fio_write_s": fio_write, "stall_ratio": fio_write / stall,
            "window_ratio": window / (total / fio_write / 1e9),
            "restore_s": restore_s, "fio_read_s": fio_read, "restore_ratio": fio_read / restore_s}


def async_round(size, r):
    name = f"{size}-r{r}"
    report, saves_ = checked_saves(f"{name}-async", saves)
    per_rank = report["checkpoint"]["bytes"]
    every = report["checkpoint"]["every"]
    # time_to_durable_s where the report has it; before it did, the stall (the wait for the
    # previous save, nil here, plus the snapshot) and the writer's start-to-commit time.
    measured = all("time_to_durable_s" in s for s in saves_)
    durable = [positive(s["time_to_durable_s"] if measured else s["stall_s"] + s["total_s"],
                        f"{name}-async time to durable") for s in saves_]
    stalls = [positive(s["stall_s"], f"{name}-async stall_s") for s in saves_]
    interval = every * report["train"]["phases"]["step"]["p50"]
    waited = [s["step"] for s, before in zip(saves_[1:], durable) if before >= interval]
    copy = load(f"{name}-copy")
    if copy["bytes"] != per_rank:
        raise BrokenRun(f"{name}-copy: copied {copy['bytes']} bytes, the state has {per_rank}")
    copy_s = positive(copy["copy_s"], f"{name}-copy copy_s")
    fio_write = fio_seconds(f"{name}-fio-async-write", "write", per_rank)
    stall_first, stall = first_and_steady(stalls)
    durable_first, durable_steady = first_and_steady(durable)
    return {"bytes": per_rank, "every": every, "interval_s": interval, "waited_steps": waited,
            "time_to_durable_source": "time_to_durable_s" if measured else "stall_s + total_s",
            "stall_first_s": stall_first, "stall_s": stall, "copy_s": copy_s,
            "stall_vs_copy": stall / copy_s, "durable_first_s": durable_first,
            "durable_s": durable_steady, "fio_write_s": fio_write,
            "durable_ratio": fio_write / durable_steady}


def med(rows, key):
    return statistics.median(row[key] for row in rows)


def mark(value, target, at_least):
    met = value >= target if at_least else value <= target
    return "met" if met else "NOT MET"


def table(size, per_layout, asyncs):
    lines = []

    def row(label, tp, ref_label, ref, ratio=None, target=None, at_least=True, unit=""):
        text = f"  {label:<38} {tp:8.3f} s  {ref_label:>6} {ref:8.3f} s"
        if ratio is not None:
            sign = ">=" if at_least else "<="
            text += f"  {ratio:6.2f}{unit}  {sign} {target:g}{unit}  {mark(ratio, target, at_least)}"
        lines.append(text)

    targets = {"file-per-rank": (0.87, 0.9), "shared-file": (0.8, 0.8)}
    for layout, rows in per_layout.items():
        w, rd = targets[layout]
        row(f"{layout}: sync stall", med(rows, "stall_s"), "fio", med(rows, "fio_write_s"),
            med(rows, "stall_ratio"), w)
        row(f"{layout}: sync stall, first save", med(rows, "stall_first_s"), "fio",
            med(rows, "fio_write_s"))
        row(f"{layout}: cold restore", med(rows, "restore_s"), "fio", med(rows, "fio_read_s"),
            med(rows, "restore_ratio"), rd)
        lines.append(f"  {layout}: write+fsync window alone (write_gbps) {med(rows, 'window_ratio'):.2f}"
                     " of fio (for comparison with earlier figures; not the cost)")
    if asyncs:
        row("async stall (1 rank)", med(asyncs, "stall_s"), "1 copy", med(asyncs, "copy_s"),
            med(asyncs, "stall_vs_copy"), 1.5, at_least=False, unit="x")
        row("async stall, first save", med(asyncs, "stall_first_s"), "1 copy",
            med(asyncs, "copy_s"))
        row("async time to durable (1 rank)", med(asyncs, "durable_s"), "fio",
            med(asyncs, "fio_write_s"), med(asyncs, "durable_ratio"), round(1 / 1.2, 2))
        row("async time to durable, first save", med(asyncs, "durable_first_s"), "fio",
            med(asyncs, "fio_write_s"))
        source = asyncs[0]["time_to_durable_source"]
        if source != "time_to_durable_s":
            lines.append(f"  (time to durable computed as {source}: the report has no"
                         " time_to_durable_s yet)")
        waited = [a["waited_steps"] for a in asyncs if a["waited_steps"]]
        if waited:
            lines.append(f"  WARNING: saves at steps {waited} started before the previous one was"
                         " durable: their stall includes that wait")
    return lines


def main():
    result = {"ranks": ranks, "rounds": rounds, "saves_per_run": saves, "sizes": {}}
    for size in sizes:
        per_layout = {layout: [layout_round(size, r, layout) for r in range(1, rounds + 1)]
                      for layout in layouts}
        asyncs = ([async_round(size, r) for r in range(1, rounds + 1)]
                  if "file-per-rank" in layouts else [])
        result["sizes"][size] = {"layouts": per_layout, "async": asyncs}
        per_rank = next(iter(per_layout.values()))[0]["bytes_per_rank"]
        print(f"{size}: {per_rank / 1e6:.0f} MB per rank, {ranks} ranks (async: 1 rank),"
              f" {rounds} rounds of {saves} saves; medians, ratio = fio time / trainproof time"
              " unless marked x")
        print("\n".join(table(size, per_layout, asyncs)))
    with open(f"{out}/../checkpoint-bandwidth.json", "w") as f:
        json.dump(result, f, indent=2)


try:
    main()
except (BrokenRun, KeyError, TypeError) as e:
    print(f"checkpoint-bandwidth: BROKEN RUN: {e!r}", file=sys.stderr)
    sys.exit(1)
