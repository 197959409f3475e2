#!/usr/bin/python3
"""Pictures of a trainproof report: PNG plots, or one self-contained HTML page.

  trainproof_viz.py plot REPORT [--trace FILE] [--baseline FILE] [--out DIR]
  trainproof_viz.py html REPORT [--trainproof BIN] [--trace FILE] [--baseline FILE] [--out FILE]
  trainproof_viz.py compare-html A B --out FILE [--trainproof BIN]

Exit 0 on success; 2 when the report cannot be read, or when `plot` lacks matplotlib, numpy or
h5py (the page is still written without its plots).
"""
import argparse
import os
import sys

# The sibling modules are found wherever this folder is copied.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import load  # noqa: E402

PROGRAM = "trainproof_viz"


def fail(message):
    print(f"{PROGRAM}: {message}", file=sys.stderr)
    return 2


def parse_arguments(argv):
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    plot = commands.add_parser("plot", help="write PNG plots beside the report")
    plot.add_argument("report")
    plot.add_argument("--trace", help="the HDF5 trace (default: REPORT with .trace.h5)")
    plot.add_argument("--baseline", help="a baseline report whose sweep is drawn too")
    plot.add_argument("--out", help="folder for the PNGs (default: the report's folder)")
    html = commands.add_parser("html", help="write one self-contained HTML page")
    html.add_argument("report")
    html.add_argument("--trainproof", help="the trainproof binary, for the text summary")
    html.add_argument("--trace")
    html.add_argument("--baseline")
    html.add_argument("--out", help="the page (default: REPORT with .html)")
    compare = commands.add_parser("compare-html", help="two reports side by side")
    compare.add_argument("a")
    compare.add_argument("b")
    compare.add_argument("--out", required=True)
    compare.add_argument("--trainproof")
    return parser.parse_args(argv)


def command_plot(args):
    missing = load.missing_plot_packages()
    if missing:
        return fail("plot needs matplotlib, numpy and h5py: "
                    + load.missing_packages_text(missing))
    try:
        run = load.Run(args.report, trace=args.trace, baseline=args.baseline)
    except load.ReportError as error:
        return fail(str(error))
    import plot_common
    import render
    folder = args.out or os.path.dirname(os.path.abspath(args.report))
    os.makedirs(folder, exist_ok=True)
    try:
        for note in run.traces.notes:
            print(f"note: {note}")
        for plot, name, figure, why in render.figures(run):
            if figure is None:
                print(f"omitted: {plot}: {why}")
                continue
            path = os.path.join(folder, f"{run.stem}.{name}.png")
            with open(path, "wb") as f:
                f.write(plot_common.png_bytes(figure))
            print(path)
    finally:
        run.close()
    return 0


def page_plots(run):
    """(plots, why there are none): plots as render.render_png gives them."""
    missing = load.missing_plot_packages()
    if missing:
        return None, "the plots are missing: " + load.missing_packages_text(missing)
    import render
    return render.render_png(run), None


def open_run(path, trace=None, baseline=None):
    """A Run whose traces are opened only when h5py is there: the page needs the report alone."""
    have_h5py = not any(p == "python3-h5py" for p, _ in load.missing_plot_packages())
    return load.Run(path, trace=trace, baseline=baseline, open_traces=have_h5py)


def command_html(args):
    import html_page
    try:
        run = open_run(args.report, args.trace, args.baseline)
    except load.ReportError as error:
        return fail(str(error))
    out = args.out or load.sibling_path(args.report, ".html")
    try:
        plots, why = page_plots(run)
        summary = html_page.run_trainproof(args.trainproof, ["report", args.report])
        text = html_page.single_page(run, summary, plots, why)
    finally:
        run.close()
    html_page.write_page(out, text)
    print(out)
    return 0


def command_compare_html(args):
    import html_page
    runs = []
    try:
        for path in (args.a, args.b):
            runs.append(open_run(path))
        compare = html_page.run_trainproof(args.trainproof, ["report", "compare", args.a, args.b])
        columns = []
        for run in runs:
            plots, why = page_plots(run)
            columns.append((run, plots, why))
        text = html_page.compare_page(columns, compare)
    except load.ReportError as error:
        return fail(str(error))
    finally:
        for run in runs:
            run.close()
    html_page.write_page(args.out, text)
    print(args.out)
    return 0


def main(argv=None):
    args = parse_arguments(sys.argv[1:] if argv is None else argv)
    commands = {"plot": command_plot, "html": command_html, "compare-html": command_compare_html}
    return commands[args.command](args)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:
        # A reader that stopped early (`| head`): the rest of the lines have nowhere to go.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
