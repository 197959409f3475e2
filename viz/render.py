"""Every plot, in the order the page shows them, and the one loop that draws them: `plot` saves
each figure to a file, `html` keeps it in memory. A plot that cannot be drawn says why."""
import plot_common
import plots_fabric
import plots_job
import plots_train
from load import Omitted

PLOTS = (
    ("phases", plots_train.make_phases),
    ("step_time", plots_train.make_step_time),
    ("step_timeline", plots_train.make_step_timeline),
    ("busbw", plots_fabric.make_busbw),
    ("pairwise", plots_fabric.make_pairwise),
    ("checkpoint", plots_job.make_checkpoint),
    ("goodput", plots_job.make_goodput),
    ("drill", plots_job.make_drill),
)

NAMES = tuple(name for name, _ in PLOTS)


def figures(run, only=None):
    """Yields (plot, name, figure or None, why omitted or None), one figure at a time, so that
    only one figure is held in memory however many ranks the run had."""
    for plot, make in PLOTS:
        if only and plot not in only:
            continue
        try:
            for name, figure in make(run):
                yield plot, name, figure, None
        except Omitted as why:
            yield plot, plot, None, str(why)
        except (ValueError, TypeError, IndexError, KeyError, AttributeError, OSError) as error:
            # A report or trace that passed the checks and still cannot be drawn costs this plot
            # only, with the reason; the page and the other plots are still written.
            yield plot, plot, None, f"could not be drawn: {type(error).__name__}: {error}"


def render_png(run, only=None):
    """[(name, png bytes or None, why omitted or None)] for the page."""
    out = []
    for _, name, figure, why in figures(run, only):
        out.append((name, None if figure is None else plot_common.png_bytes(figure), why))
    return out


def figure_of(run, plot):
    """The first figure of one plot, for tests that count what it draws."""
    for _, _, figure, why in figures(run, only=(plot,)):
        if figure is None:
            raise Omitted(why)
        return figure
    raise KeyError(plot)
