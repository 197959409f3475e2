"""Training plots: the phases per rank, the step time over the run, and one step's timeline."""
import numpy as np

from load import Omitted
from plot_common import (FLAG_COLOUR, PER_RANK_LIMIT, PHASE_COLOURS, PHASES, new_figure,
                         rank_label, text_panel, thinned_ticks, title)
from text_format import clip, readable

BINS = 32          # bars of the sorted-ranks view: 32 x 5 phases stays under 200 patches
TIMELINE_RANKS = 16
FLAGGED_SHOWN = 8


class RankTable:
    """Per-rank p50 of each phase (seconds), their hosts and flags, ranks in order."""

    def __init__(self, ranks, hosts, phases, step, flagged, score, source):
        self.ranks, self.hosts, self.phases = ranks, hosts, phases
        self.step, self.flagged, self.score, self.source = step, flagged, score, source

    def __len__(self):
        return len(self.ranks)


def rank_table(run):
    rows = [r for r in run.report.get("ranks") or [] if isinstance(r.get("p50"), dict)]
    if rows:
        rows.sort(key=lambda r: r.get("rank", 0))
        phases = np.array([[_number(r["p50"].get(p)) for p in PHASES] for r in rows])
        step = np.array([_number(r["p50"].get("step")) for r in rows])
        step = np.where(np.isfinite(step), step, np.nansum(phases, axis=1))
        return RankTable(np.array([r.get("rank", i) for i, r in enumerate(rows)]),
                         [str(r.get("host", "?")) for r in rows], phases, step,
                         np.array([bool(r.get("flagged")) for r in rows]),
                         np.array([_number(r.get("straggler_score")) for r in rows]),
                         "report ranks[]")
    return _rank_table_from_trace(run)


def _rank_table_from_trace(run):
    if not run.traces:
        raise Omitted("the report has no ranks[] and no trace was read")
    datasets = run.traces.need(*[f"train/{p}" for p in PHASES], "train/step")
    medians = [np.nanmedian(d[:], axis=1) for d in datasets]
    phases, step = np.stack(medians[:-1], axis=1), medians[-1]
    hosts = run.traces.hosts() or ["?"] * len(step)
    flagged = np.zeros(len(step), dtype=bool)
    return RankTable(np.arange(len(step)), hosts, phases, step, flagged,
                     np.full(len(step), np.nan), "trace train/*, median over steps")


def _number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return np.nan
    return float(value)


def make_phases(run):
    run.require_section("train")
    table = rank_table(run)
    if len(table) == 0:
        raise Omitted("no rank has phase figures")
    if len(table) <= PER_RANK_LIMIT:
        return [("phases", _phases_per_rank(run, table))]
    return [("phases", _phases_distribution(run, table))]


def _phases_per_rank(run, table):
    figure = new_figure(max(7.0, 0.25 * len(table) + 4), 5.5)
    ax = figure.add_axes([0.08, 0.2, 0.72, 0.62])
    x = np.arange(len(table))
    bottom = np.zeros(len(table))
    for i, phase in enumerate(PHASES):
        values = np.nan_to_num(table.phases[:, i]) * 1e3
        ax.bar(x, values, bottom=bottom, color=PHASE_COLOURS[phase], label=phase, width=0.8)
        bottom += values
    for i in np.flatnonzero(table.flagged):
        ax.annotate("flagged", (x[i], bottom[i]), xytext=(0, 4), textcoords="offset points",
                    ha="center", color=FLAG_COLOUR, fontsize=8, fontweight="bold")
    ticks = thinned_ticks(len(table), keep=np.flatnonzero(table.flagged), most=32)
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{table.ranks[i]}\n{table.hosts[i]}" if len(table) <= 8 else
                        str(table.ranks[i]) for i in ticks], fontsize=8)
    for label, i in zip(ax.get_xticklabels(), ticks):
        if table.flagged[i]:
            label.set_color(FLAG_COLOUR)
    ax.set_xlabel("rank" + (" (host)" if len(table) <= 8 else ""))
    ax.set_ylabel("p50 per step (ms)")
    ax.set_ylim(0, max(bottom.max(), 1e-9) * 1.15)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, title="phase")
    title(figure, f"Phase breakdown per rank (p50 of each phase, from {table.source})", run,
          "flagged ranks in red" if table.flagged.any() else "no rank flagged")
    return figure


def _phases_distribution(run, table):
    # Sorted by compute, the straggler score's basis: in a synchronous step every rank waits for
    # the slowest, so step times hardly differ while compute and exposed comm trade places.
    order = np.argsort(table.phases[:, PHASES.index("compute")], kind="stable")
    groups = np.array_split(order, min(BINS, len(order)))
    figure = new_figure(15, 6.5)
    grid = figure.add_gridspec(1, 3, width_ratios=[3.2, 1.6, 2.2], left=0.05, right=0.99,
                               bottom=0.14, top=0.8, wspace=0.25)
    _draw_sorted_bins(figure.add_subplot(grid[0]), table, groups)
    _draw_phase_percentiles(figure.add_subplot(grid[1]), table)
    text_panel(figure.add_subplot(grid[2]), _outlier_lines(table), size=7.5)
    title(figure, f"Phase breakdown over {len(table):,} ranks (p50 of each phase, from "
                  f"{table.source})", run,
          f"ranks sorted by compute p50 into {len(groups)} bins of about "
          f"{len(order) // len(groups)}; bars: each bin's mean; black ticks: each bin's slowest "
          "compute; the outliers are named on the right")
    return figure


def _draw_sorted_bins(ax, table, groups):
    x = np.arange(len(groups))
    bottom = np.zeros(len(groups))
    for i, phase in enumerate(PHASES):
        values = np.array([np.nanmean(table.phases[g, i]) for g in groups]) * 1e3
        values = np.nan_to_num(values)
        ax.bar(x, values, bottom=bottom, color=PHASE_COLOURS[phase], label=phase, width=0.85)
        bottom += values
    compute = PHASES.index("compute")
    slowest = np.array([np.nanmax(table.phases[g, compute]) for g in groups]) * 1e3
    start = np.nan_to_num(np.array([np.nanmean(table.phases[g, 0]) for g in groups])) * 1e3
    ax.plot(x, start + slowest, "_", color="black", ms=14, mew=2,
            label="slowest compute in the bin")
    top = max(bottom.max(), (start + slowest).max(), 1e-9)
    for b, group in enumerate(groups):
        flagged = [int(j) for j in group if table.flagged[j]]
        if flagged:
            ax.annotate(f"flagged: rank {table.ranks[flagged[0]]}"
                        + (f" +{len(flagged) - 1}" if len(flagged) > 1 else ""),
                        (b, start[b] + slowest[b]), xytext=(-10, 40), textcoords="offset points",
                        ha="right", color=FLAG_COLOUR, fontsize=8, fontweight="bold",
                        bbox={"fc": "white", "ec": FLAG_COLOUR, "pad": 2},
                        arrowprops={"arrowstyle": "->", "color": FLAG_COLOUR})
    ticks = thinned_ticks(len(groups), keep=[len(groups) - 1], most=8)
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{_share(groups, b)}" for b in ticks], fontsize=8)
    ax.set_xlabel("ranks sorted by compute p50, fastest on the left "
                  "(share of ranks up to the bin)")
    ax.set_ylabel("p50 per step, mean over the bin's ranks (ms)")
    ax.set_ylim(0, top * 1.45)
    ax.legend(loc="upper left", fontsize=8, ncol=3)


def _share(groups, b):
    done = sum(len(g) for g in groups[:b + 1])
    total = sum(len(g) for g in groups)
    return f"{100 * done / total:.0f}%"


def _draw_phase_percentiles(ax, table):
    stats = []
    for i, phase in enumerate(PHASES + ("step",)):
        values = table.step if phase == "step" else table.phases[:, i]
        values = values[np.isfinite(values)] * 1e3
        if values.size == 0:
            values = np.zeros(1)
        p1, q1, med, q3, p99 = np.percentile(values, [1, 25, 50, 75, 99])
        stats.append({"label": phase.replace("_", "\n"), "med": med, "q1": q1, "q3": q3,
                      "whislo": p1, "whishi": p99, "fliers": [values.max()]})
    ax.bxp(stats, showfliers=True, flierprops={"marker": "v", "markeredgecolor": FLAG_COLOUR})
    ax.set_ylim(bottom=0)
    ax.set_ylabel("p50 per step across ranks (ms)")
    ax.set_title("across ranks: box 25-75%, whiskers 1-99%, triangle the max", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)


def _outlier_lines(table):
    lines = ["flagged ranks:"]
    flagged = np.flatnonzero(table.flagged)
    for i in flagged[:FLAGGED_SHOWN]:
        lines.append(f"  {_who(table, i)}: compute {_ms(table, i, 'compute')}, score "
                     f"{readable(table.score[i])}")
    if len(flagged) > FLAGGED_SHOWN:
        lines.append(f"  ... and {len(flagged) - FLAGGED_SHOWN} more (see the report)")
    if not len(flagged):
        lines.append("  none")
    compute = table.phases[:, PHASES.index("compute")]
    median = np.nanmedian(compute)
    lines += ["", f"median compute p50 {readable(median * 1e3)} ms, median step p50 "
                  f"{readable(np.nanmedian(table.step) * 1e3)} ms", "slowest compute p50:"]
    for i in np.argsort(-np.nan_to_num(compute, nan=-np.inf))[:5]:
        lines.append(f"  {_who(table, i)}: {_ms(table, i, 'compute')}, "
                     f"{readable(compute[i] / median)}x the median")
    lines.append("slowest step p50:")
    for i in np.argsort(-np.nan_to_num(table.step, nan=-np.inf))[:3]:
        lines.append(f"  {_who(table, i)}: {readable(table.step[i] * 1e3)} ms")
    lines.append("fastest step p50:")
    for i in np.argsort(np.nan_to_num(table.step, nan=np.inf))[:2]:
        lines.append(f"  {_who(table, i)}: {readable(table.step[i] * 1e3)} ms")
    return lines


def _who(table, i):
    return f"rank {table.ranks[i]} ({clip(table.hosts[i], 24)})"


def _ms(table, i, phase):
    return f"{readable(table.phases[i, PHASES.index(phase)] * 1e3)} ms"


def _slowest_median_fastest(mean):
    """Indexes of the ranks with the highest, the median and the lowest mean, in that order."""
    finite = np.flatnonzero(np.isfinite(mean))
    if finite.size == 0:
        raise Omitted("every rank's step time in the trace is NaN")
    order = finite[np.argsort(mean[finite], kind="stable")]
    return {"slowest": int(order[-1]), "median": int(order[len(order) // 2]),
            "fastest": int(order[0])}


def _roles(picks):
    """{rank: 'slowest, median'}: with few ranks one rank can hold several roles."""
    roles = {}
    for role, rank in picks.items():
        roles[rank] = f"{roles[rank]}, {role}" if rank in roles else role
    return roles


def make_step_time(run):
    run.require_section("train")
    step_set, numbers_set = _traces(run).need("train/step", "train/step_number")
    steps, numbers = step_set[:], numbers_set[:]
    if steps.size == 0:
        raise Omitted("the trace holds no measured step")
    hosts = run.traces.hosts() or run.rank_hosts()
    with np.errstate(all="ignore"):
        mean = np.nanmean(steps, axis=1)
        low, mid, high = np.nanpercentile(steps, [1, 50, 99], axis=0)
    roles = _roles(_slowest_median_fastest(mean))
    figure = new_figure(11, 5.5)
    ax = figure.add_axes([0.08, 0.12, 0.62, 0.7])
    if steps.shape[0] > 3:
        ax.fill_between(numbers, low * 1e3, high * 1e3, color="#cccccc",
                        label=f"all {steps.shape[0]:,} ranks: 1-99%")
        ax.plot(numbers, mid * 1e3, color="#888888", lw=1, label="all ranks: median")
    colours = {"slowest": FLAG_COLOUR, "median": "#2ca02c", "fastest": "#1f77b4"}
    for rank, role in roles.items():
        ax.plot(numbers, steps[rank] * 1e3, lw=1.4, color=colours[role.split(",")[0]],
                label=f"{role}: {rank_label(rank, hosts)}, mean {readable(mean[rank] * 1e3)} ms")
    ax.set_xlabel("step")
    ax.set_ylabel("step time (ms)")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    title(figure, "Step time over the run (trace train/step)", run,
          "slowest, median and fastest rank by mean step time")
    return [("step_time", figure)]


def _traces(run):
    if not run.traces:
        raise Omitted("no trace was read")
    return run.traces


def _median_step(step_set):
    """Index of the step whose slowest rank is the median over steps: a typical step."""
    steps = step_set[:]
    with np.errstate(all="ignore"):
        slowest = np.nanmax(steps, axis=0)
        mean = np.nanmean(steps, axis=1)
    finite = np.flatnonzero(np.isfinite(slowest))
    if finite.size == 0:
        raise Omitted("every step time in the trace is NaN")
    return int(finite[np.argsort(slowest[finite])[len(finite) // 2]]), mean


def _timeline_ranks(run, mean):
    count = len(mean)
    if count <= TIMELINE_RANKS:
        return {r: "" for r in range(count)}, None
    roles = _roles(_slowest_median_fastest(mean))
    flagged = [r.get("rank") for r in run.report.get("ranks") or [] if r.get("flagged")]
    for rank in [r for r in flagged if isinstance(r, int) and r < count][:FLAGGED_SHOWN]:
        roles[rank] = f"{roles[rank]}, flagged" if rank in roles else "flagged"
    return roles, f"showing {len(roles)} of {count:,} ranks: the slowest, median and fastest " \
                  f"by mean step time, and the flagged ones"


def make_step_timeline(run):
    run.require_section("train")
    names = ["train/start", *[f"train/{p}" for p in PHASES], "train/step", "train/step_number"]
    sets = dict(zip(names, _traces(run).need(*names)))
    column, mean = _median_step(sets["train/step"])
    roles, note = _timeline_ranks(run, mean)
    chosen = sorted(roles)
    starts = sets["train/start"][:, column]
    origin = np.nanmin(starts)
    phases = {p: sets[f"train/{p}"][chosen, column] for p in PHASES}
    buckets = _bucket_rows(run, chosen, column)
    hosts = run.traces.hosts() or run.rank_hosts()
    figure = new_figure(12, 2.2 + 0.55 * len(chosen))
    ax = figure.add_axes([0.2, 0.12, 0.65, 0.72 if len(chosen) > 4 else 0.6])
    for lane, rank in enumerate(chosen):
        begin = (starts[rank] - origin) * 1e3
        _draw_rank_lanes(ax, lane, begin, {p: phases[p][lane] for p in PHASES},
                         None if buckets is None else buckets[lane])
    ax.set_yticks([2 * lane + 0.9 for lane in range(len(chosen))])
    ax.set_yticklabels([f"{rank_label(r, hosts)}" + (f"\n{roles[r]}" if roles[r] else "")
                        for r in chosen], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time since the earliest rank began the step (ms, clock aligned to rank 0)")
    _timeline_legend(ax, buckets is not None)
    step_number = int(sets["train/step_number"][column])
    title(figure, f"One step as a timeline: step {step_number}, the median step by its "
                  "slowest rank", run,
          (note + "; " if note else "") + "upper lane: phases; lower lane: gradient buckets")
    return [("step_timeline", figure)]


def _bucket_rows(run, chosen, column):
    start, end = run.traces.find("train/bucket_start"), run.traces.find("train/bucket_end")
    if start is None or end is None:
        return None
    return [(start[r, column, :], end[r, column, :]) for r in chosen]


def _draw_rank_lanes(ax, lane, begin, phases, buckets):
    base = 2 * lane
    at, spans, colours = begin, [], []
    for phase in PHASES:
        width = float(np.nan_to_num(phases[phase])) * 1e3
        spans.append((at, width))
        colours.append(PHASE_COLOURS[phase])
        at += width
    ax.broken_barh(spans, (base + 0.2, 0.8), facecolors=colours)
    if buckets is not None:
        start, end = buckets
        ok = np.isfinite(start) & np.isfinite(end)
        spans = [(begin + s * 1e3, (e - s) * 1e3) for s, e in zip(start[ok], end[ok])]
        shades = ["#fd8d3c", "#a63603"] * (len(spans) // 2 + 1)
        ax.broken_barh(spans, (base + 1.05, 0.5), facecolors=shades[:len(spans)],
                       edgecolor="white", linewidth=0.3)


def _timeline_legend(ax, with_buckets):
    from matplotlib.patches import Patch
    handles = [Patch(color=PHASE_COLOURS[p], label=p) for p in PHASES]
    if with_buckets:
        handles.append(Patch(color=PHASE_COLOURS["bucket"], label="bucket allreduce"))
    else:
        handles.append(Patch(color="white", label="buckets: not in the trace"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
