#!/usr/bin/python3
"""The pictures (viz/trainproof_viz.py) on synthetic runs of 4,096 ranks on 512 nodes and of 2
ranks: every plot is written and decodes as a PNG, within 60 s and 2 GiB; a plot whose stage did
not run is omitted with a line saying so and no file; the HTML page holds the verdict and every
check, loads nothing from elsewhere, and is written without matplotlib; a partial report says
what it lacks; two reports compare side by side; and at scale the plots show distributions,
not 4,096 bars or 512 tick labels.

A plain script: it prints each failed expectation and exits 1 when any failed, or when numpy,
matplotlib or h5py is missing (scripts/setup.sh installs them). TRAINPROOF_BIN, when set, is passed to the
page as --trainproof for the text summary."""
import importlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VIZ = os.path.join(ROOT, "viz", "trainproof_viz.py")
SYNTHETIC = os.path.join(ROOT, "tests", "viz", "synthetic_run.py")
PYTHON = sys.executable
BIN = os.environ.get("TRAINPROOF_BIN")
PLOTS_AT_SCALE = ("phases", "step_time", "step_timeline", "busbw", "pairwise.rail0",
                  "pairwise.rail1", "checkpoint", "goodput", "drill")
LIMIT_S, LIMIT_BYTES = 60.0, 2 * 2 ** 30
FAILED = []

# Runs one command and reports its own peak memory: RUSAGE_CHILDREN in this process would be
# the largest of every child so far (the generator's included), not the command's.
MEASURE = ("import json, resource, subprocess, sys, time\n"
           "t = time.monotonic()\n"
           "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
           "print(json.dumps({'rc': p.returncode, 'out': p.stdout, 'err': p.stderr,\n"
           "  's': time.monotonic() - t,\n"
           "  'rss': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}))\n")


def expect(condition, what):
    if not condition:
        FAILED.append(what)
        print(f"FAIL: {what}", flush=True)
    return condition


def generate(folder, *args):
    subprocess.run([PYTHON, SYNTHETIC, folder, *args], check=True, capture_output=True)
    return os.path.join(folder, "synthetic.json")


def viz(*args, env=None, timeout=180):
    return subprocess.run([PYTHON, VIZ, *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def measured_viz(*args):
    proc = subprocess.run([PYTHON, "-c", MEASURE, PYTHON, VIZ, *args], capture_output=True,
                          text=True, timeout=600)
    return json.loads(proc.stdout)


def png_size(path):
    """(width, height) of a well-formed PNG, or raises ValueError saying what is wrong: the
    signature, every chunk's CRC, and the image data inflate to the size the header gives."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("no PNG signature")
    at, idat, header = 8, b"", None
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length:at + 12 + length])
        if zlib.crc32(kind + body) != crc:
            raise ValueError(f"bad CRC in chunk {kind!r}")
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    if header is None or not idat:
        raise ValueError("no IHDR or IDAT")
    width, height, depth, colour = header[:4]
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[colour]
    expected = height * (1 + width * channels * depth // 8)
    if len(zlib.decompress(idat)) != expected:
        raise ValueError("image data does not inflate to the header's size")
    return width, height


def expect_png(path):
    if not expect(os.path.isfile(path) and os.path.getsize(path) > 0, f"{path} written"):
        return
    try:
        width, height = png_size(path)
    except (ValueError, KeyError, struct.error, zlib.error) as error:
        expect(False, f"{path} decodes as PNG: {error}")
        return
    expect(300 <= width <= 4000 and 200 <= height <= 3000,
           f"{path}: a sane size, not {width} x {height}")
    expect(os.path.getsize(path) < 8 * 2 ** 20, f"{path}: under 8 MiB")


def check_plot_run(report, folder, plots, omitted=(), label=""):
    result = measured_viz("plot", report, "--out", folder)
    print(f"{label}: plot took {result['s']:.1f} s, peak {result['rss'] / 2 ** 20:.0f} MiB")
    if not expect(result["rc"] == 0, f"{label}: plot exits 0: {result['err']}"):
        return result
    expect(result["s"] < LIMIT_S, f"{label}: plot within {LIMIT_S} s, not {result['s']:.1f}")
    expect(result["rss"] < LIMIT_BYTES, f"{label}: peak memory under 2 GiB: {result['rss']}")
    stem = os.path.splitext(os.path.basename(report))[0]
    for plot in plots:
        path = os.path.join(folder, f"{stem}.{plot}.png")
        expect_png(path)
        expect(path in result["out"].splitlines(), f"{label}: prints {path}")
    for plot in omitted:
        expect(re.search(rf"^omitted: {re.escape(plot)}: \S", result["out"], re.M),
               f"{label}: an 'omitted: {plot}:' line in\n{result['out']}")
        expect(not any(f.startswith(f"{stem}.{plot}") for f in os.listdir(folder)),
               f"{label}: no file for the omitted {plot}")
    return result


def check_scale(report):
    """Countable readability at 4,096 ranks on 512 nodes."""
    sys.path.insert(0, os.path.dirname(VIZ))
    import load
    import render
    run = load.Run(report)
    try:
        phases = render.figure_of(run, "phases")
        patches = sum(len(ax.patches) for ax in phases.axes)
        expect(patches <= 200, f"phases at 4,096 ranks draws {patches} patches, at most 200")
        panel = "\n".join(t.get_text() for ax in phases.axes for t in ax.texts)
        flagged = [r for r in run.report["ranks"] if r["flagged"]]
        expect(flagged and f"rank {flagged[0]['rank']} ({flagged[0]['host']})" in panel,
               "phases names the flagged rank and its host")
        check_heat_map(render.figure_of(run, "pairwise"), run)
        timeline = render.figure_of(run, "step_timeline")
        lanes = len(timeline.axes[0].get_yticklabels())
        expect(lanes <= 16, f"step_timeline shows {lanes} ranks at 4,096, at most 16")
        expect(any("showing" in t.get_text() for t in timeline.texts),
               "step_timeline's title says it shows a few ranks")
    finally:
        run.close()


def check_heat_map(figure, run):
    heat = [ax for ax in figure.axes if ax.images]
    expect(len(heat) == 2, f"pairwise: a heat map per matrix, not {len(heat)}")
    for ax in heat:
        labels = [t for t in ax.get_xticklabels() if t.get_text()]
        expect(8 <= len(labels) <= 40, f"pairwise: {len(labels)} host labels of 512, thinned")
        expect(len(ax.texts) == 0, "pairwise: no text per cell")
    text = "\n".join(t.get_text() for ax in figure.axes for t in ax.texts)
    hosts = run.report["context"]["hosts"]
    listed = re.findall(r"(gpu-node-\d+) -> (gpu-node-\d+)", text)
    expect(len(listed) >= 10 and all(a in hosts and b in hosts for a, b in listed),
           f"pairwise: the worst pairs listed by host: {listed[:3]}")


def check_page(page, report, plots_expected=True):
    with open(page, encoding="utf-8") as f:
        text = f.read()
    verdict = report["verdict"]
    expect(f'class="verdict {verdict.lower()}">{verdict}<' in text, f"{page}: the verdict")
    for check in report["gate"]["checks"]:
        expect(f"<td>{check['name']}</td>" in text, f"{page}: check {check['name']}")
    for forbidden in ("http://", "https://", 'src="//', "<script", "<link"):
        expect(forbidden not in text, f"{page}: no {forbidden}")
    images = re.findall(r"<img\b[^>]*>", text)
    for tag in images:
        expect(re.search(r'src="data:image/png;base64,[A-Za-z0-9+/]+=*"', tag),
               f"{page}: an <img> that is not an inline PNG: {tag[:80]}")
    if plots_expected:
        expect(len(images) >= 3, f"{page}: plots inlined ({len(images)} images)")
    return text


def test_html(report_path):
    page = os.path.join(os.path.dirname(report_path), "page.html")
    args = ["html", report_path, "--out", page] + (["--trainproof", BIN] if BIN else [])
    started = time.monotonic()
    proc = viz(*args)
    print(f"html at 4,096 ranks took {time.monotonic() - started:.1f} s")
    if expect(proc.returncode == 0 and page in proc.stdout,
              f"html exits 0 and prints {page}: {proc.returncode} {proc.stdout} {proc.stderr}"):
        with open(report_path) as f:
            report = json.load(f)
        text = check_page(page, report)
        expect(len(re.findall(r"<img\b", text)) == len(PLOTS_AT_SCALE),
               f"html: one image per plot ({len(PLOTS_AT_SCALE)})")
        if BIN:
            expect("checks:" in text and "verdict:" in text, "html: the text summary")
        expect("<details" in text and "<pre>" in text, "html: the context and scenario")


def test_escaping(folder, report_path):
    report = load_json(report_path)
    hostile = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'
    report["gate"]["checks"][0]["reason"] = hostile
    report["context"]["hosts"][0] = "gpu<b>node"
    report["context"]["scenario_text"] = "</pre><script>alert(3)</script>"
    path = save_json(folder, "hostile.json", report)
    page = os.path.join(folder, "hostile.html")
    proc = viz("html", path, "--out", page)
    if expect(proc.returncode == 0, f"html on hostile text exits 0: {proc.stderr}"):
        text = open(page, encoding="utf-8").read()
        expect("<script" not in text and "<img src=x" not in text and "gpu<b>" not in text,
               "hostile text is escaped")
        expect("&lt;script&gt;alert(1)" in text and "gpu&lt;b&gt;node" in text,
               "hostile text shows as text")


def test_without_matplotlib(folder, report_path):
    shim = os.path.join(folder, "shim", "matplotlib")
    os.makedirs(shim)
    with open(os.path.join(shim, "__init__.py"), "w") as f:
        f.write("raise ImportError('matplotlib is made unimportable by the test')\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(shim))
    page = os.path.join(folder, "no-mpl.html")
    proc = viz("html", report_path, "--out", page, env=env)
    if expect(proc.returncode == 0, f"html without matplotlib exits 0: {proc.stderr}"):
        text = check_page(page, load_json(report_path), plots_expected=False)
        expect("python3-matplotlib" in text, "the page names python3-matplotlib")
        expect("<img" not in text, "no image without matplotlib")
        expect("<td>productive</td>" in text, "the job table is still there")
    proc = viz("plot", report_path, "--out", folder, env=env)
    expect(proc.returncode == 2 and "python3-matplotlib" in proc.stderr,
           f"plot without matplotlib exits 2 naming the package: {proc.returncode} {proc.stderr}")


def test_partial(folder, report_path):
    report = load_json(report_path)
    report["verdict"] = "INCOMPLETE"
    del report["restore"]
    report["accept"]["attempts"] = [a for a in report["accept"]["attempts"]
                                    if a["stage"] != "restore"]
    report["accept"]["incomplete"] = "accept.time_budget_s ran out before stage restore"
    path = save_json(folder, "partial.json", report)
    page = os.path.join(folder, "partial.html")
    proc = viz("html", path, "--out", page)
    if expect(proc.returncode == 0, f"html on a partial report exits 0: {proc.stderr}"):
        text = check_page(page, report)
        line = re.search(r'<p class="partial">(.*?)</p>', text)
        expect(line and "lacks stage(s) restore" in line.group(1),
               f"the partial report says it lacks the restore: {line and line.group(1)}")
        expect(text.index('class="partial"') < text.index("<h2>Checks"), "said at the top")
    proc = viz("plot", path, "--out", folder)
    expect(proc.returncode == 0, f"plot on a partial report exits 0: {proc.stderr}")


def test_compare(folder, first, second):
    report = load_json(second)
    report["verdict"] = "WARN"
    second = save_json(folder, "second.json", report)
    page = os.path.join(folder, "compare.html")
    proc = viz("compare-html", first, second, "--out", page,
               *(["--trainproof", BIN] if BIN else []))
    if expect(proc.returncode == 0, f"compare-html exits 0: {proc.stderr}"):
        text = open(page, encoding="utf-8").read()
        expect('class="verdict fail">FAIL<' in text and 'class="verdict warn">WARN<' in text,
               "compare-html holds both verdicts")
        expect(text.count('<div class="verdict') == 2, "one verdict per column")
        if BIN:
            expect("exit code" in text, "compare-html gives report compare's exit code")


def test_unreadable_report(folder):
    proc = viz("plot", os.path.join(folder, "absent.json"))
    expect(proc.returncode == 2 and "absent.json" in proc.stderr,
           f"a missing report is exit 2 naming it: {proc.returncode} {proc.stderr}")
    broken = os.path.join(folder, "broken.json")
    with open(broken, "w") as f:
        f.write("{\"verdict\": ")
    proc = viz("html", broken)
    expect(proc.returncode == 2 and "broken.json" in proc.stderr,
           f"a report that is not JSON is exit 2 naming it: {proc.returncode} {proc.stderr}")


def load_json(path):
    with open(path) as f:
        return json.load(f)


def save_json(folder, name, report):
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        json.dump(report, f)
    return path


def test_omitted(folder, report_path):
    report = load_json(report_path)
    for key in ("sweep", "drill"):
        report.pop(key)
    report["accept"]["stages"] = [s for s in report["accept"]["stages"]
                                  if s not in ("sweep", "pairwise")]
    os.makedirs(os.path.join(folder, "lean"))
    lean = save_json(os.path.join(folder, "lean"), "lean.json", report)
    result = check_plot_run(lean, os.path.dirname(lean), ("phases", "checkpoint", "goodput"),
                            ("step_time", "step_timeline", "busbw", "pairwise", "drill"),
                            "no sweep, drill or trace")
    expect("no trace at" in result["out"], "the missing trace is named")


def main():
    try:
        for module in ("h5py", "matplotlib", "numpy"):
            importlib.import_module(module)
    except ImportError as error:
        # scripts/setup.sh installs them: a machine without them is a missing install step.
        print(f"FAIL: {error}; install python3-matplotlib python3-numpy python3-h5py "
              "(scripts/setup.sh does)")
        return 1
    folder = tempfile.mkdtemp(prefix="test-viz-")
    try:
        started = time.monotonic()
        big = generate(os.path.join(folder, "big"))
        print(f"synthetic 4,096 ranks on 512 nodes: {time.monotonic() - started:.1f} s")
        check_plot_run(big, os.path.dirname(big), PLOTS_AT_SCALE, (), "4,096 ranks")
        check_scale(big)
        small = generate(os.path.join(folder, "small"), "--ranks", "2", "--nodes", "1")
        check_plot_run(small, os.path.dirname(small),
                       [p for p in PLOTS_AT_SCALE if not p.startswith("pairwise")],
                       ("pairwise",), "2 ranks")
        test_omitted(folder, small)
        test_html(big)
        test_escaping(folder, small)
        test_without_matplotlib(folder, small)
        test_partial(folder, small)
        test_compare(folder, small, generate(os.path.join(folder, "mid"), "--ranks", "64",
                                             "--nodes", "8", "--seed", "2"))
        test_unreadable_report(folder)
        print(f"all checks took {time.monotonic() - started:.1f} s")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if FAILED:
        print(f"{len(FAILED)} expectation(s) failed")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
