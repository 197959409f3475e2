"""Job plots: checkpoint write and restore, the goodput waterfall and cost, the drill."""
import numpy as np

from load import Omitted
from plot_common import FLAG_COLOUR, new_figure, text_panel, title
from text_format import clip, percent, readable

SMALL_LOSS = 0.005   # losses under half a percent of wall time share one bar, named by count
COST_PARTS = ("compute", "storage", "data", "overhead")


def _number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _save_table(run, checkpoint):
    """Per checkpoint: step, write (write + fsync of the slowest rank), total and stall
    seconds, from the trace when it has them, else from checkpoint.saves[]."""
    names = ["checkpoints/step", "checkpoints/write_s", "checkpoints/fsync_s",
             "checkpoints/total_s", "checkpoints/stall_s"]
    found = [run.traces.find(n) for n in names] if run.traces else [None]
    if all(d is not None for d in found):
        step, write, fsync, total, stall = (d[:] for d in found)
        return step, write + np.nan_to_num(fsync), total, stall, "trace checkpoints/"
    saves = [s for s in checkpoint.get("saves") or [] if isinstance(s, dict)]
    column = lambda key: np.array([_number(s.get(key)) or 0.0 for s in saves])  # noqa: E731
    return (column("step"), column("write_s") + column("fsync_s"), column("total_s"),
            column("stall_s"), "report checkpoint.saves[]")


def make_checkpoint(run):
    checkpoint = run.require_section("checkpoint")
    steps = run.traces.find("checkpoints/step") if run.traces else None
    if not checkpoint.get("saves") and (steps is None or steps.shape[0] == 0):
        raise Omitted(f"checkpoints were on ({checkpoint.get('dir', '?')}, checkpoint.every "
                      f"{checkpoint.get('every', '?')}) but none was committed")
    figure = new_figure(16, 6)
    grid = figure.add_gridspec(2, 3, height_ratios=[3, 1.2], width_ratios=[2.2, 1.3, 1.3],
                               left=0.05, right=0.99, bottom=0.07, top=0.84, wspace=0.3,
                               hspace=0.35)
    outliers = _draw_rank_write(figure.add_subplot(grid[0, 0]), run, checkpoint)
    text_panel(figure.add_subplot(grid[1, 0]), outliers, size=7.5)
    restore_notes = _draw_restore(figure.add_subplot(grid[0, 1]), run, checkpoint)
    text_panel(figure.add_subplot(grid[1, 1]), restore_notes, size=7.5)
    step, write, total, stall, source = _save_table(run, checkpoint)
    ax = figure.add_subplot(grid[0, 2])
    _draw_stall_against_write(ax, step, write, stall)
    text_panel(figure.add_subplot(grid[1, 2]), [
        f"from {source}", f"{len(step)} checkpoint(s), every {checkpoint.get('every', '?')} "
        f"steps, {'async' if checkpoint.get('async') else 'sync'}",
        f"overhead {percent(_number(checkpoint.get('overhead')))} of training time"], size=7.5)
    title(figure, f"Checkpoints: write per rank, restore, stall ({checkpoint.get('layout', '?')}"
                  f" layout)", run)
    return [("checkpoint", figure)]


def _draw_rank_write(ax, run, checkpoint):
    rank_gbps = run.traces.find("checkpoints/rank_write_gbps") if run.traces else None
    steps = run.traces.find("checkpoints/step") if run.traces else None
    saves = [s for s in checkpoint.get("saves") or [] if isinstance(s, dict)]
    if rank_gbps is None or steps is None:
        return _draw_write_from_report(ax, checkpoint, saves, run)
    values, numbers = rank_gbps[:], steps[:]
    stats = []
    for c in range(values.shape[1]):
        column = values[:, c][np.isfinite(values[:, c])]
        if column.size == 0:
            column = np.zeros(1)
        p1, q1, med, q3, p99 = np.percentile(column, [1, 25, 50, 75, 99])
        stats.append({"label": str(int(numbers[c])), "med": med, "q1": q1, "q3": q3,
                      "whislo": p1, "whishi": p99, "fliers": [column.min()]})
    ax.bxp(stats, showfliers=True, flierprops={"marker": "v", "markeredgecolor": FLAG_COLOUR})
    _mark_aggregate(ax, saves, numbers)
    ax.set_xlabel("checkpoint (step)")
    ax.set_ylabel("write GB/s per rank")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.15)
    ax.set_title(f"each rank's write over {values.shape[0]:,} ranks: box 25-75%, whiskers 1-99%,"
                 " triangle the slowest rank; 'all': aggregate GB/s", fontsize=8)
    return _slowest_writers(values, run)


def _mark_aggregate(ax, saves, numbers):
    """Each checkpoint's aggregate write (all ranks' bytes over the window) above its box: a
    second scale would crowd the panel, and the figure is a different kind of rate."""
    aggregate = {s.get("step"): _number(s.get("write_gbps")) for s in saves}
    for k, n in enumerate(numbers):
        value = aggregate.get(int(n))
        if value is not None:
            ax.annotate(f"all: {readable(value)}", (k + 1, 1.0),
                        xycoords=("data", "axes fraction"), xytext=(0, -10),
                        textcoords="offset points", ha="center", fontsize=7)


def _slowest_writers(values, run):
    hosts = run.traces.hosts() or run.rank_hosts()
    with np.errstate(all="ignore"):
        median = np.nanmedian(values, axis=1)
    overall = np.nanmedian(median)
    order = np.argsort(np.nan_to_num(median, nan=np.inf))[:5]
    lines = [f"slowest writers (median over checkpoints; all ranks' median "
             f"{readable(overall)} GB/s):"]
    for r in order:
        host = hosts[r] if r < len(hosts) else "?"
        lines.append(f"  rank {r} ({clip(host, 24)}): {readable(median[r])} GB/s")
    return lines


def _draw_write_from_report(ax, checkpoint, saves, run):
    steps = [s.get("step") for s in saves]
    ax.plot(range(len(saves)), [_number(s.get("write_gbps")) or 0 for s in saves], "D-",
            color="#444444", label="aggregate write")
    ax.set_xticks(range(len(saves)))
    ax.set_xticklabels([str(s) for s in steps], fontsize=8)
    ax.set_xlabel("checkpoint (step)")
    ax.set_ylabel("aggregate write GB/s")
    ax.set_ylim(bottom=0)
    ax.set_title("aggregate write per checkpoint (report)", fontsize=8)
    spread = checkpoint.get("rank_write_gbps") or {}
    return [f"per-rank write: {run.traces.why_absent(['checkpoints/rank_write_gbps'])}"
            if run.traces else "per-rank write: no trace was read",
            f"report: ranks wrote {readable(_number(spread.get('min')))} to "
            f"{readable(_number(spread.get('max')))} GB/s"]


def _restore_bars(run, checkpoint):
    """[(label, aggregate GB/s, (slowest, fastest rank) or None)] of every restore."""
    bars = []
    stage = run.section("restore")
    if stage and _number(stage.get("gbps")) is not None:
        spread = stage.get("rank_gbps") or {}
        bars.append(("restore stage", _number(stage["gbps"]),
                     (_number(spread.get("min")), _number(spread.get("max")))))
    resumed = checkpoint.get("restore")
    if isinstance(resumed, dict) and _number(resumed.get("restore_gbps")) is not None:
        bars.append((f"--resume, step {resumed.get('step', '?')}",
                     _number(resumed["restore_gbps"]), None))
    for k, failure in enumerate((run.section("drill") or {}).get("failures") or []):
        if _number(failure.get("restore_gbps")) is not None:
            bars.append((f"drill failure {k + 1}", _number(failure["restore_gbps"]), None))
    return bars


def _draw_restore(ax, run, checkpoint):
    bars = _restore_bars(run, checkpoint)
    if not bars:
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no restore measured\n(no restore stage, --resume or drill)",
                ha="center", va="center", transform=ax.transAxes)
        return []
    y = np.arange(len(bars))
    ax.barh(y, [b[1] for b in bars], color="#756bb1", height=0.6)
    for k, (_, value, spread) in enumerate(bars):
        ranks = f"\n ranks {readable(spread[0])} to {readable(spread[1])}" if spread and \
            None not in spread else ""
        ax.text(value, k, f" {readable(value)}{ranks}", va="center", fontsize=7)
    ax.set_xlim(0, max(b[1] for b in bars) * 1.35)
    ax.set_yticks(y)
    ax.set_yticklabels([b[0] for b in bars], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("restore GB/s, all ranks together")
    ax.set_title("restore bandwidth (per-rank range in GB/s beside it)", fontsize=9)
    stage = run.section("restore") or {}
    if not stage:
        return ["no restore stage"]
    return [f"restore stage: step {stage.get('step', '?')} in "
            f"{readable(_number(stage.get('seconds')))} s, cold read "
            f"{'yes' if stage.get('cold_read') else 'no'}, "
            f"{len(stage.get('rejected') or [])} folder(s) set aside"]


def _draw_stall_against_write(ax, step, write, stall):
    ax.scatter(write * 1e3, stall * 1e3, color="#756bb1", zorder=3)
    for x, y, s in list(zip(write, stall, step))[:40]:
        ax.annotate(str(int(s)), (x * 1e3, y * 1e3), xytext=(3, 3), textcoords="offset points",
                    fontsize=7)
    top = max(float(np.nanmax(write)) if write.size else 0,
              float(np.nanmax(stall)) if stall.size else 0, 1e-6) * 1e3 * 1.1
    ax.plot([0, top], [0, top], ":", color="grey", label="stall = write")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel("write + fsync, slowest rank (ms)")
    ax.set_ylabel("training stall (ms)")
    ax.set_title("stall against write, per checkpoint (labels: step)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")


def _waterfall_rows(job):
    """[(name, seconds)] of the losses, the small ones folded into one row named by count."""
    wall = _number(job.get("wall_s")) or 0.0
    lost = [(str(c.get("name")), _number(c.get("seconds")) or 0.0) for c in job.get("lost") or []]
    big = [(n, s) for n, s in lost if wall and s / wall >= SMALL_LOSS]
    small = [(n, s) for n, s in lost if (n, s) not in big]
    if small:
        big.append((f"{len(small)} smaller losses", sum(s for _, s in small)))
    return wall, big, small


def make_goodput(run):
    job = run.require_section("job", stage="train")
    wall, rows, small = _waterfall_rows(job)
    if not wall:
        raise Omitted("job.wall_s is absent or 0: no timeline to draw")
    figure = new_figure(15, 6.5)
    grid = figure.add_gridspec(2, 2, width_ratios=[2.1, 1], height_ratios=[1.3, 1], left=0.14,
                               right=0.98, bottom=0.08, top=0.86, wspace=0.3, hspace=0.3)
    residual, productive = _draw_waterfall(figure.add_subplot(grid[:, 0]), job, wall, rows)
    _draw_cost(figure.add_subplot(grid[0, 1]), run.section("cost"))
    text_panel(figure.add_subplot(grid[1, 1]),
               _goodput_notes(job, residual, productive, small), size=7.5)
    title(figure, "Goodput: from wall time to productive time, and what the job cost", run,
          f"goodput {readable(_number(job.get('goodput')))} of the job's wall time")
    return [("goodput", figure)]


def _draw_waterfall(ax, job, wall, rows):
    productive = _number(job.get("productive_s")) or 0.0
    labels, lefts, widths, colours = ["wall time"], [0.0], [wall], ["#636363"]
    at = wall
    for name, seconds in rows:
        at -= seconds
        labels.append(f"- {name}")
        lefts.append(at)
        widths.append(seconds)
        colours.append("#e6550d")
    labels.append("= productive")
    lefts.append(0.0)
    widths.append(productive)
    colours.append("#31a354")
    y = np.arange(len(labels))
    ax.barh(y, widths, left=lefts, color=colours, height=0.7)
    for k, (left, width) in enumerate(zip(lefts, widths)):
        ax.text(left + width, k, f" {readable(width)} s ({percent(width / wall)})",
                va="center", fontsize=7)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, wall * 1.25)
    ax.set_xlabel("seconds (mean over ranks)")
    ax.set_title("each loss takes its share off the wall time, largest first", fontsize=9)
    return at, productive


def _goodput_notes(job, residual, productive, small):
    notes = [f"goodput {readable(_number(job.get('goodput')))} (productive over wall time)"]
    if _number(job.get("train_goodput")) is not None:
        notes.append(f"training stage goodput {readable(_number(job['train_goodput']))} "
                     f"over its {readable(_number(job.get('train_wall_s')))} s")
    queue = _number(job.get("queue_s"))
    notes.append(f"queue: {readable(queue)} s before the start (not in the wall time)"
                 if queue is not None else f"queue: {job.get('queue_note') or 'not measured'}")
    if abs(residual - productive) > 0.005 * (_number(job.get("wall_s")) or 1):
        notes.append(f"unaccounted: {readable(residual - productive)} s")
    drill = job.get("drill")
    if isinstance(drill, dict):
        notes.append(f"drill (a separate run, not in this wall time): {drill.get('failures')} "
                     f"failure(s), recovery {readable(_number(drill.get('recovery_s')))} s, "
                     f"redone {readable(_number(drill.get('redone_s')))} s")
    if small:
        notes.append(f"the {len(small)} smaller losses (each under {percent(SMALL_LOSS)}): "
                     + ", ".join(f"{n} {readable(s)} s" for n, s in small))
    return notes


def _draw_cost(ax, cost):
    if not cost:
        text_panel(ax, ["cost: the report has no cost section"])
        return
    if not cost.get("priced"):
        ax.set_axis_off()
        ax.text(0.5, 0.6, "not priced", ha="center", va="center", fontsize=20, color="#888888",
                transform=ax.transAxes)
        ax.text(0.5, 0.4, clip("unpriced: " + ", ".join(map(str, cost.get("unpriced") or [])), 60),
                ha="center", va="center", fontsize=8, transform=ax.transAxes)
        return
    scopes = [(name, cost.get(name)) for name in ("job", "training")
              if isinstance(cost.get(name), dict)]
    bottoms = np.zeros(len(scopes))
    for k, part in enumerate(COST_PARTS):
        values = np.array([_number(s.get(part)) or 0.0 for _, s in scopes])
        ax.bar(range(len(scopes)), values, bottom=bottoms, color=f"C{k}", label=part)
        bottoms += values
    for k, (_, scope) in enumerate(scopes):
        ax.text(k, bottoms[k], f"{readable(_number(scope.get('total')))}", ha="center",
                va="bottom", fontsize=8)
    ax.set_xticks(range(len(scopes)))
    ax.set_xticklabels([name for name, _ in scopes])
    ax.set_ylabel(f"cost ({cost.get('currency', '?')})")
    unpriced = cost.get("unpriced") or []
    ax.set_title("cost split" + (f"; not priced: {', '.join(map(str, unpriced))}"
                                 if unpriced else ""), fontsize=9)
    ax.legend(fontsize=8)


# The milestones of a recovery, in order; each span is named by the milestone that ends it.
DRILL_MILESTONES = ("fault", "detected", "launch", "restored", "first_step")
DRILL_SPANS = {"detected": ("detection", "#d62728"), "launch": ("relaunch", "#ff7f0e"),
               "restored": ("restore", "#9467bd"), "first_step": ("to the first new step",
                                                                  "#2ca02c")}
# A span that holds more than one stage: the report alone gives the detection and the RTO, and
# a trace without a `restored` event has the restore inside the span to the first new step.
MERGED_COLOUR = "#bcbddc"


def _trace_drill_events(run):
    """{failure: {event: unix time}} from the trace's drill group, or None without it."""
    if not run.traces or run.traces.find("drill/event") is None:
        return None
    names = ["drill/time_unix", "drill/event", "drill/launch", "drill/failure"]
    times, events, _, failures = (d[:] for d in run.traces.need(*names))
    events = [e.decode().rstrip("\0") if isinstance(e, bytes) else str(e) for e in events]
    by_failure = {}
    for t, e, f in zip(times, events, failures):
        if f >= 0:
            by_failure.setdefault(int(f), {}).setdefault(e, float(t))
    # The relaunch may belong to no failure (failure -1): take the first launch after the fault.
    for seen in by_failure.values():
        if "launch" not in seen and "fault" in seen:
            later = [float(t) for t, e in zip(times, events)
                     if e == "launch" and t > seen["fault"]]
            if later:
                seen["launch"] = min(later)
    return by_failure


def _spans_from_events(events):
    """[(start, width, name, colour)] from the fault to each later milestone the trace holds."""
    present = [m for m in DRILL_MILESTONES if m in events]
    spans = []
    for begin, end in zip(present, present[1:]):
        name, colour = DRILL_SPANS[end]
        skipped = DRILL_MILESTONES[DRILL_MILESTONES.index(begin) + 1:DRILL_MILESTONES.index(end)]
        if skipped:
            name, colour = " + ".join([DRILL_SPANS[m][0] for m in skipped] + [name]), MERGED_COLOUR
        spans.append((events[begin] - events["fault"], events[end] - events[begin], name, colour))
    return spans


def _spans_from_report(failure):
    detected, rto = _number(failure.get("detected_after_s")), _number(failure.get("rto_s"))
    spans = []
    if detected is not None:
        spans.append((0.0, detected, "detection", DRILL_SPANS["detected"][1]))
        if rto is not None and rto > detected:
            spans.append((detected, rto - detected, "relaunch + restore + to the first new step",
                          MERGED_COLOUR))
    return spans


def make_drill(run):
    drill = run.require_section("drill")
    failures = [f for f in drill.get("failures") or [] if isinstance(f, dict)]
    events = _trace_drill_events(run) or {}
    if not failures and not events:
        raise Omitted("the drill injected no failure")
    count = max(len(failures), len(events))
    rows = []
    for k in range(count):
        failure = failures[k] if k < len(failures) else {}
        seen = events.get(k) or {}
        rows.append((failure, _spans_from_events(seen) if "fault" in seen
                     else _spans_from_report(failure)))
    figure = new_figure(13, 2.6 + 0.8 * count)
    ax = figure.add_axes([0.3, 0.18 if count > 2 else 0.25, 0.5, 0.55 if count > 2 else 0.45])
    for k, (_, spans) in enumerate(rows):
        _draw_failure(ax, k, spans)
    ax.set_yticks(range(count))
    ax.set_yticklabels([_failure_label(k, f) for k, (f, _) in enumerate(rows)], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds after the fault")
    _drill_legend(ax, rows)
    source = "the trace's drill events" if events else \
        "report drill.failures[] (the drill's trace would separate relaunch and restore)"
    title(figure, f"Drill: each failure from fault to the first new step (verdict "
                  f"{drill.get('verdict', '?')}, digest match {drill.get('digest_match')})", run,
          f"from {source}")
    return [("drill", figure)]


def _drill_legend(ax, rows):
    from matplotlib.patches import Patch
    named = {}
    for _, spans in rows:
        for _, _, name, colour in spans:
            named.setdefault(name, colour)
    ax.legend(handles=[Patch(color=c, label=n) for n, c in named.items()],
              loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)


def _draw_failure(ax, row, spans):
    if not spans:
        ax.text(0, row, "  no timing recorded", va="center", fontsize=8)
        return
    ax.broken_barh([(s, w) for s, w, _, _ in spans], (row - 0.3, 0.6),
                   facecolors=[c for _, _, _, c in spans], edgecolor="white")
    end = spans[-1][0] + spans[-1][1]
    ax.text(end, row, f"  {readable(end)} s", va="center", fontsize=8)


def _failure_label(k, failure):
    if not failure:
        return f"failure {k + 1}"
    return (f"failure {k + 1}: {failure.get('kind', '?')} rank {failure.get('rank', '?')} "
            f"({clip(failure.get('host', '?'), 18)})\nstep {failure.get('step', '?')}, "
            f"phase {failure.get('phase', '?')}; restored step {failure.get('restored_step', '?')}"
            f", RPO {failure.get('rpo_steps', '?')} steps, "
            f"RTO {readable(_number(failure.get('rto_s')))} s")
