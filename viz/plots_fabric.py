"""Fabric plots: the collective sweep's busbw against message size, and the pairwise matrices."""
import numpy as np
from matplotlib.colors import Normalize, TwoSlopeNorm

from load import Omitted, natural_key
from plot_common import FLAG_COLOUR, byte_axis, new_figure, text_panel, thinned_ticks, title
from text_format import clip, percent, readable

WORST_PAIRS = 10
ONE_WAY, BOTH_WAYS = "one direction at a time", "both directions at once"
FLAG_OUTCOMES = ("flag", "fail")


def _sweep_rows(report):
    """(group name, drawable rows, rows not run, other groups) of a report's sweep."""
    sweep = report.get("sweep") or {}
    rows = [r for r in sweep.get("results") or [] if isinstance(r, dict)]
    groups = [g.get("name") for g in sweep.get("groups") or [] if isinstance(g, dict)]
    group = "world" if "world" in groups or not groups else groups[0]
    mine = [r for r in rows if r.get("group", group) == group]
    drawable = [r for r in mine if not r.get("not_run") and isinstance(r.get("busbw_gbps"),
                                                                        (int, float))]
    not_run = [r for r in mine if r not in drawable]
    return group, drawable, not_run, [g for g in groups if g != group]


def _curves(rows):
    """{(op, in_place): (bytes[], busbw[], wrong[])}, sorted by size."""
    curves = {}
    for row in rows:
        key = (str(row.get("op")), bool(row.get("in_place")))
        curves.setdefault(key, []).append(
            (float(row.get("bytes", 0)), float(row["busbw_gbps"]), bool(row.get("wrong"))))
    return {k: tuple(map(np.array, zip(*sorted(v)))) for k, v in curves.items()}


def make_busbw(run):
    sweep = run.require_section("sweep")
    group, rows, not_run, others = _sweep_rows(run.report)
    if not rows:
        why = f"{len(not_run)} rows not run" if not_run else "no collective rows"
        raise Omitted(f"the sweep has no measured {group} row ({why}; mode "
                      f"{sweep.get('mode', '?')})")
    curves = _curves(rows)
    ops = sorted({op for op, _ in curves})
    colours = {op: f"C{i % 10}" for i, op in enumerate(ops)}
    figure = new_figure(12, 6)
    ax = figure.add_axes([0.07, 0.11, 0.6, 0.7])
    for (op, in_place), (sizes, busbw, wrong) in sorted(curves.items()):
        ax.plot(sizes, busbw, color=colours[op], ls="-" if in_place else "--",
                marker="o" if in_place else "x", ms=4,
                label=f"{op}, {'in-place' if in_place else 'out-of-place'}")
        if wrong.any():
            ax.plot(sizes[wrong], busbw[wrong], "X", color=FLAG_COLOUR, ms=10)
    notes = _draw_baseline(ax, run, group, colours)
    sizes = np.concatenate([c[0] for c in curves.values()])
    byte_axis(ax, sizes.min(), sizes.max())
    ax.set_xlabel("message size (bytes, log2)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_ylim(bottom=0)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    notes += _sweep_notes(sweep, group, rows, not_run, others)
    text_panel(figure.add_axes([0.69, 0.08, 0.3, 0.38]), notes, size=7.5)
    title(figure, f"Collective sweep: busbw per operation, group {group} "
                  f"({sweep.get('backend', '?')}, {sweep.get('dtype', '?')})", run,
          "solid: in-place; dashed: out-of-place; red X: a row with wrong elements")
    return [("busbw", figure)]


def _draw_baseline(ax, run, group, colours):
    if run.baseline is None:
        return [run.baseline_note] if run.baseline_note else ["no baseline report"]
    _, rows, _, _ = _sweep_rows(run.baseline)
    drawn = 0
    for (op, in_place), (sizes, busbw, _) in sorted(_curves(rows).items()):
        if op in colours and in_place:
            ax.plot(sizes, busbw, color=colours[op], ls=":", lw=2, alpha=0.6,
                    label=f"{op}, in-place, baseline")
            drawn += 1
    return [f"baseline: {clip(run.baseline_path, 60)}",
            f"  {drawn} in-place curve(s) drawn dotted" if drawn else
            "  the baseline has no sweep rows for these operations"]


def _sweep_notes(sweep, group, rows, not_run, others):
    notes = ["", f"{len(rows)} rows drawn of group {group}"]
    if not_run:
        reasons = sorted({str(r.get("not_run") or "no busbw") for r in not_run})
        notes.append(f"{len(not_run)} rows not run: {clip('; '.join(reasons), 60)}")
    if others:
        notes.append(f"{len(others)} other group(s) not drawn: {clip(', '.join(others), 50)}")
        notes.append("  (their averages are in the text summary)")
    wrong = sum(1 for r in rows if r.get("wrong"))
    notes.append(f"rows with wrong elements: {wrong}")
    return notes


def _matrix(values, order):
    matrix = np.array(values, dtype=float)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise Omitted(f"a pairwise matrix is not square: shape {matrix.shape}")
    return matrix[np.ix_(order, order)]


def _norm(matrix):
    """Colours centred on the median pair, so a slow row or column stands out either side."""
    finite = matrix[np.isfinite(matrix)]
    if finite.size == 0:
        return Normalize(0, 1), float("nan")
    centre = float(np.median(finite))
    # The scale spans at least half to 1.25 times the median (half is sweep.fail_fraction's
    # default), so a healthy fabric's few percent of noise stays pale instead of filling the
    # whole colour range.
    low, high = min(float(finite.min()), 0.5 * centre), max(float(finite.max()), 1.25 * centre)
    if low < centre < high:
        return TwoSlopeNorm(vcenter=centre, vmin=low, vmax=high), centre
    return Normalize(low, max(high, low + 1e-9)), centre


def _rail_flags(run, rail, hosts):
    """(nodes this rail's pairwise pass flagged, nodes flagged for other reasons, [(from, to,
    both ways)] of flagged links), as indexes in `hosts` order."""
    where = {h: i for i, h in enumerate(hosts)}
    pairwise, links = set(), []
    for c in rail.get("confirmations") or []:
        if c.get("outcome") not in FLAG_OUTCOMES:
            continue
        if c.get("kind") == "node" and c.get("node") in where:
            pairwise.add(where[c["node"]])
        elif c.get("kind") == "link" and c.get("from") in where and c.get("to") in where:
            links.append((where[c["from"]], where[c["to"]], bool(c.get("both_ways"))))
    others = {where[n["host"]] for n in run.report.get("nodes") or []
              if n.get("flagged") and n.get("host") in where} - pairwise
    return sorted(pairwise), sorted(others), links


def make_pairwise(run):
    sweep = run.require_section("sweep", stage="pairwise")
    pairwise = sweep.get("pairwise")
    if not isinstance(pairwise, dict):
        raise Omitted(run.why_no_stage("pairwise", "sweep.pairwise"))
    rails = [r for r in pairwise.get("rails") or [] if len(r.get("hosts") or []) >= 2]
    if not rails:
        raise Omitted("no rail has two nodes: there is no pair to draw")
    return [(f"pairwise.rail{rail.get('rail', k)}", _rail_figure(run, rail))
            for k, rail in enumerate(rails)]


def _rail_matrix(run, rail, key):
    """The rail's matrix: in the report up to 64 nodes, else in the trace under
    rail.matrices_in_trace (docs/report.md, "The trace"), NaN where not measured."""
    if isinstance(rail.get(key), list):
        return rail[key]
    group = rail.get("matrices_in_trace")
    if not isinstance(group, str) or not run.traces:
        return None
    dataset = run.traces.find(group + key)
    return None if dataset is None else np.array(dataset, dtype=float)


def _rail_figure(run, rail):
    hosts = [str(h) for h in rail["hosts"]]
    order = sorted(range(len(hosts)), key=lambda i: natural_key(hosts[i]))
    hosts = [hosts[i] for i in order]
    flagged, others, links = _rail_flags(run, rail, hosts)
    figure = new_figure(22, 9.5)
    grid = figure.add_gridspec(1, 3, width_ratios=[1, 1, 0.95], left=0.07, right=0.99,
                               bottom=0.1, top=0.84, wspace=0.3)
    lines = []
    for k, (key, name) in enumerate((("one_way_gbps", ONE_WAY), ("both_ways_gbps", BOTH_WAYS))):
        values = _rail_matrix(run, rail, key)
        if values is None:
            lines += [f"{name}: neither in the report nor in its trace", ""]
            continue
        matrix = _matrix(values, order)
        _draw_heat_map(figure.add_subplot(grid[k]), matrix, hosts, (flagged, others, links),
                       name)
        lines += _worst_pairs(matrix, hosts, name) + [""]
    text_panel(figure.add_subplot(grid[2]),
               lines + _flag_lines(run, rail, hosts, flagged + others), 7.5)
    nics = sorted({n for n in rail.get("nics") or [] if n})
    title(figure, f"Pairwise bandwidth, rail {rail.get('rail', '?')}"
                  f"{' (' + clip(', '.join(nics), 40) + ')' if nics else ''}: GB/s from the row's "
                  f"node to the column's, {len(hosts):,} nodes sorted by name", run,
          "colour centred on the median pair, spanning at least half to 1.25 times it; nodes "
          "this pass flagged framed in black (row and column), nodes flagged otherwise framed "
          "dashed grey, flagged links circled")
    return figure


def _draw_heat_map(ax, matrix, hosts, flags, name):
    flagged, others, links = flags
    norm, median = _norm(matrix)
    image = ax.imshow(matrix, cmap=_colour_map(), norm=norm, interpolation="nearest",
                      aspect="equal")
    _frame_nodes(ax, len(hosts), flagged, {"ec": "black", "lw": 1.0})
    _frame_nodes(ax, len(hosts), others, {"ec": "#777777", "lw": 0.8, "ls": "--"})
    _mark_links(ax, [(f, t) for f, t, both in links if both == (name == BOTH_WAYS)])
    _host_ticks(ax, hosts, flagged + others)
    ax.set_ylabel("sending node")
    ax.set_title(f"{name}; median {readable(median)} GB/s", fontsize=9)
    bar = ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.02)
    bar.ax.set_title("GB/s", fontsize=8)


def _mark_links(ax, links):
    """A frame round each flagged link's cell, and at scale, where a cell is a pixel or two,
    a circle round it as well."""
    from matplotlib.patches import Rectangle
    for frm, to in links:
        ax.add_patch(Rectangle((to - 0.5, frm - 0.5), 1, 1, fill=False, ec="black", lw=2))
    if links and len(ax.images[0].get_array()) > 64:
        frm, to = zip(*links)
        ax.scatter(to, frm, s=160, facecolors="none", edgecolors="black", linewidths=1.5,
                   clip_on=False)


def _frame_nodes(ax, count, nodes, style):
    """A frame around each node's row and column, a few cells wide at scale, so the frame
    does not hide the one-pixel row it points at."""
    from matplotlib.patches import Rectangle
    pad = max(0.0, count / 200.0)
    for i in nodes:
        low, size = i - 0.5 - pad, 1 + 2 * pad
        ax.add_patch(Rectangle((-0.5, low), count, size, fill=False, **style))
        ax.add_patch(Rectangle((low, -0.5), size, count, fill=False, **style))


def _host_ticks(ax, hosts, marked):
    count = len(hosts)
    ticks = thinned_ticks(count, keep=marked, most=32)
    size = 6 if count > 16 else 8
    ax.set_xticks(ticks)
    ax.set_xticklabels([hosts[i] for i in ticks], fontsize=size, rotation=90)
    ax.set_yticks(ticks)
    ax.set_yticklabels([hosts[i] for i in ticks], fontsize=size)
    for labels in (ax.get_xticklabels(), ax.get_yticklabels()):
        for label, i in zip(labels, ticks):
            if i in marked:
                label.set_color(FLAG_COLOUR)
                label.set_fontweight("bold")
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1
    ax.set_xlabel("receiving node" + (f" (every {step}th named, and the flagged ones)"
                                      if step > 1 else ""))


def _colour_map():
    import matplotlib
    cmap = matplotlib.colormaps["RdYlBu"].copy()
    cmap.set_bad("#bbbbbb")
    return cmap


def _worst_pairs(matrix, hosts, name):
    values = matrix.copy()
    np.fill_diagonal(values, np.nan)
    finite = np.flatnonzero(np.isfinite(values))
    lines = [f"{name}: the {min(WORST_PAIRS, finite.size)} slowest pairs (sender -> receiver)"]
    if finite.size == 0:
        return lines + ["  no pair measured"]
    median = float(np.median(values.flat[finite]))
    count = min(WORST_PAIRS, finite.size)
    worst = finite[np.argpartition(values.flat[finite], count - 1)[:count]]
    worst = worst[np.argsort(values.flat[worst])]
    for flat in worst:
        i, j = divmod(int(flat), values.shape[1])
        value = values[i, j]
        lines.append(f"  {clip(hosts[i], 18):>18} -> {clip(hosts[j], 18):<18} "
                     f"{readable(value):>6} GB/s {percent(value / median) if median else '':>5}")
    lines.append(f"  (percent of the median pair, {readable(median)} GB/s)")
    return lines


def _flag_lines(run, rail, hosts, nodes):
    lines = ["flagged nodes:" if nodes else "flagged nodes: none"]
    reasons = {n.get("host"): n.get("reasons") or [] for n in run.report.get("nodes") or []}
    for i in nodes[:8]:
        first = reasons.get(hosts[i]) or ["(flagged in this rail's confirmations)"]
        lines.append(f"  {hosts[i]}: {clip(first[0], 240)}")
        if len(first) > 1:
            lines.append(f"    (and {len(first) - 1} more reason(s))")
    if len(nodes) > 8:
        lines.append(f"  ... and {len(nodes) - 8} more: trainproof report nodes REPORT")
    bad = rail.get("bad_links") or []
    lines.append(f"bad links: {len(bad)}" if bad else "bad links: none")
    lines += [f"  {clip(b, 240)}" for b in bad[:4]]
    if len(bad) > 4:
        lines.append(f"  ... and {len(bad) - 4} more (the report's bad_links)")
    reduced = rail.get("reduced") or []
    if reduced:
        lines.append(f"{len(reduced)} transfer(s) moved fewer bytes than pair_bytes (time-bound)")
    return lines
