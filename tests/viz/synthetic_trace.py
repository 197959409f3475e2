"""The trace of the synthetic run (synthetic_run.py) in the documented layout
(docs/report.md, "The trace", trainproof.trace/1)."""
import h5py
import numpy as np

PHASES = ("data", "compute", "comm_exposed", "optimizer", "checkpoint")
SWEEP_ITERS = 10
START_UNIX = 1796212000.0


def write_trace(path, shape, report, trace, rng, pairwise=None):
    t = trace["t"]
    with h5py.File(path, "w") as f:
        context = report["context"]
        for key, value in (("schema", "trainproof.trace/1"), ("report", "synthetic.json"),
                           ("run_id", context["run_id"]),
                           ("scenario_hash", context["scenario_hash"]),
                           ("start_time", context["start_time"]), ("subcommand", "accept"),
                           ("world_size", shape.ranks)):
            f.attrs[key] = value
        f["ranks/host"] = np.array(shape.rank_hosts, dtype="S64")
        f["train/step_number"] = trace["numbers"].astype(np.int64)
        for name in ("start", "arrival", *PHASES, "comm", "step"):
            f[f"train/{name}"] = t[name]
        f["train/bucket_start"] = trace["bucket_start"]
        f["train/bucket_end"] = trace["bucket_end"]
        write_checkpoints(f, report["checkpoint"]["saves"], trace["rank_gbps"], rng)
        write_sweep(f, shape, trace["rows"], rng)
        write_drill(f, report["drill"]["failures"])
        for rail, matrices in (pairwise or {}).items():
            for key, matrix in zip(("one_way_gbps", "both_ways_gbps"), matrices):
                f[f"pairwise/rail{rail}/{key}"] = np.array(matrix, dtype=float)


def write_checkpoints(f, saves, rank_gbps, rng):
    for key in ("step", "bytes"):
        f[f"checkpoints/{key}"] = np.array([s[key] for s in saves], dtype=np.int64)
    for key in ("serialize_s", "write_s", "fsync_s", "commit_s", "total_s", "stall_s"):
        f[f"checkpoints/{key}"] = np.array([s[key] for s in saves], dtype=float)
    f["checkpoints/rank_write_gbps"] = rank_gbps
    f["checkpoints/rank_stall_s"] = 0.12 * rng.lognormal(0, 0.05, rank_gbps.shape)


def write_sweep(f, shape, rows, rng):
    W = len(rows)
    f["sweep/op"] = np.array([r["op"] for r in rows], dtype="S16")
    f["sweep/bytes"] = np.array([r["bytes"] for r in rows], dtype=np.int64)
    f["sweep/in_place"] = np.array([r["in_place"] for r in rows], dtype=np.int64)
    base = np.array([r["time_us"]["p50"] * 1e-6 if not r["not_run"] else np.nan for r in rows])
    each = base[None, :, None] * rng.lognormal(0, 0.05, (shape.ranks, W, SWEEP_ITERS))
    f["sweep/rank_iteration_s"] = each
    f["sweep/iteration_s"] = each.max(axis=0)


def write_drill(f, failures):
    """The events as the drill's supervisor records them (app/drill/drill_trace.cpp): each
    launch's start and exit belong to no failure (-1); each failure has its fault, detection and
    the relaunch's first step, whose detail names the restored step."""
    events = [(START_UNIX, "launch", 0, -1, "reference")]
    for k, fail in enumerate(failures):
        at = fail["fault_unix"]
        detected = at + fail["detected_after_s"]
        events += [(at, "fault", k, k, fail["fault"]), (detected, "detected", k, k, "kill"),
                   (detected + 2.0, "exit", k, -1, f"run-{k} exit 137"),
                   (detected + 9.0, "launch", k + 1, -1, f"run-{k + 1}"),
                   (at + fail["rto_s"], "first_step", k + 1, k,
                    f"restored step {fail['restored_step']}")]
    events.sort()
    times, names, launches, failure, detail = zip(*events)
    f["drill/time_unix"] = np.array(times, dtype=float)
    f["drill/event"] = np.array(names, dtype="S16")
    f["drill/launch"] = np.array(launches, dtype=np.int64)
    f["drill/failure"] = np.array(failure, dtype=np.int64)
    f["drill/detail"] = np.array(detail, dtype="S128")
