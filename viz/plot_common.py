"""What every plot shares: the Agg figure, titles that say what ran, readable numbers and byte
labels, and the encoding to PNG."""
import io
import math
import textwrap

import matplotlib

matplotlib.use("Agg")
# Every label holds text from the report (host names, scenario names, reasons): a `$` there must
# print as itself, never start mathtext, whose parser raises on text like `$\frac` and would end
# the page or the plot (docs/promises.md, "Hostile input").
matplotlib.rcParams["text.parse_math"] = False
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter  # noqa: E402

from text_format import binary_size  # noqa: E402

DPI = 100
PHASES = ("data", "compute", "comm_exposed", "optimizer", "checkpoint")
PHASE_COLOURS = {"data": "#8c6d31", "compute": "#3182bd", "comm_exposed": "#e6550d",
                 "optimizer": "#31a354", "checkpoint": "#756bb1", "bucket": "#fd8d3c"}
FLAG_COLOUR = "#d62728"
# Above this many ranks a per-rank picture has more bars than pixels worth reading.
PER_RANK_LIMIT = 64


def new_figure(width, height):
    figure = Figure(figsize=(width, height), dpi=DPI)
    return figure


def title(figure, what, run, note=None):
    """The plot's name on the first line, the run on the second, an optional note on a third."""
    lines = [what, run.what_ran()]
    if note:
        lines.append(note)
    figure.suptitle("\n".join(lines), fontsize=11, x=0.01, ha="left")


def png_bytes(figure):
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def byte_axis(ax, low, high):
    """A log2 x axis of message sizes, labelled in B, KiB, MiB and GiB at powers of two."""
    ax.set_xscale("log", base=2)
    axis = ax.xaxis
    first, last = int(math.floor(math.log2(max(low, 1)))), int(math.ceil(math.log2(max(high, 1))))
    step = max(1, math.ceil((last - first + 1) / 10))
    ticks = [2.0 ** e for e in range(first, last + 1, step)]
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(lambda v, _: binary_size(v)))
    axis.set_minor_locator(FixedLocator([]))


def text_panel(ax, lines, size=8):
    """A plain panel of text, top-left aligned: the outliers named, the notes. Long lines are
    wrapped to the panel's width, so nothing runs into the next panel or is cut."""
    ax.set_axis_off()
    width_in = ax.get_position().width * ax.figure.get_figwidth()
    columns = max(20, int(width_in * 72 / (size * 0.62)))
    wrapped = []
    for line in lines:
        lead = " " * (len(line) - len(line.lstrip(" ")))
        wrapped += textwrap.wrap(line.strip(), columns, initial_indent=lead,
                                 subsequent_indent=lead + "  ") or [""]
    ax.text(0.0, 1.0, "\n".join(wrapped), va="top", ha="left", family="monospace",
            fontsize=size, transform=ax.transAxes)


def thinned_ticks(count, keep=(), most=24):
    """Tick positions for `count` labels: every k-th, so at most about `most`, plus `keep`."""
    step = max(1, int(math.ceil(count / most)))
    return sorted(set(range(0, count, step)) | set(keep))


def rank_label(rank, hosts):
    host = hosts[rank] if 0 <= rank < len(hosts) else "?"
    return f"rank {rank} ({host})"
