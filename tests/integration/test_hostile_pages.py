"""Hostile input to the pictures and the page (docs/promises.md, "Hostile input"): every string of
a report carrying markup, event attributes, `javascript:` URLs or mathtext, and traces crafted to
mislead the reader (links out of the file, groups for datasets, wrong types, dimensions that
disagree or would not fit in memory). The page stays inert text, every plot is drawn or omitted
with its reason, and nothing ends in a traceback.

Each (string, payload) pair and each (dataset, defect) pair is one case; the totals are printed."""
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VIZ_DIR = os.path.join(ROOT, "viz")
VIZ = os.path.join(VIZ_DIR, "trainproof_viz.py")
SYNTHETIC = os.path.join(ROOT, "tests", "viz", "synthetic_run.py")
BIN = os.environ.get("TRAINPROOF_BIN")
PAYLOADS = {
    "script": "<script>alert({i})</script>",
    "attribute": "\"' onerror=alert({i}) onmouseover=alert({i}) x=\"",
    "url": "javascript:alert({i})",
    "tags": "</td></pre></details><img src=x onerror=alert({i})><svg onload=alert({i})>",
    "mathtext": "$\\frac{{a}}{{b}}$ ${i}^ \\\\ %s {{}}",
}
URL_ATTRIBUTES = {"href", "src", "action", "formaction", "xlink:href", "data", "poster"}


class PageAudit(html.parser.HTMLParser):
    """What a browser would run: script elements, on* handlers, javascript: URLs."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.problems = []
        self.text = []

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "iframe", "object", "embed", "base") or (
                tag == "meta" and any(name == "http-equiv" for name, _ in attrs)):
            self.problems.append(f"<{tag}> element")
        for name, value in attrs:
            if name.startswith("on"):
                self.problems.append(f"<{tag} {name}=...>")
            if name in URL_ATTRIBUTES and value and \
                    re.sub(r"[\s\x00-\x1f]", "", value).lower().startswith(("javascript:",
                                                                             "vbscript:")):
                self.problems.append(f"<{tag} {name}={value[:40]}>")
            if name == "src" and value and not value.startswith("data:image/png;base64,"):
                self.problems.append(f"<{tag} src={value[:40]}> loads from elsewhere")

    handle_startendtag = handle_starttag

    def handle_data(self, data):
        self.text.append(data)


def leaves(value, path=""):
    """Every string in a JSON document, with its path."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, f"{path}/{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaves(item, f"{path}/{index}")
    elif isinstance(value, str):
        yield path


def with_payload(value, payload, counter):
    if isinstance(value, dict):
        return {key: with_payload(item, payload, counter) for key, item in value.items()}
    if isinstance(value, list):
        return [with_payload(item, payload, counter) for item in value]
    if isinstance(value, str):
        counter[0] += 1
        return value + payload.format(i=counter[0])
    return value


def viz(*args, timeout=300):
    return subprocess.run([sys.executable, VIZ, *args], capture_output=True, text=True,
                          timeout=timeout)


class HostilePages(unittest.TestCase):
    cases = {}

    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.mkdtemp(prefix="trainproof-hostile-")
        subprocess.run([sys.executable, SYNTHETIC, cls.folder, "--ranks", "8", "--nodes", "4",
                        "--steps", "12"], check=True, capture_output=True)
        cls.report_path = os.path.join(cls.folder, "synthetic.json")
        cls.trace_path = os.path.join(cls.folder, "synthetic.trace.h5")
        with open(cls.report_path) as f:
            cls.report = json.load(f)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.folder, ignore_errors=True)
        print("hostile cases:", ", ".join(f"{k} {v}" for k, v in cls.cases.items()),
              "; total", sum(cls.cases.values()), file=sys.stderr)

    def count(self, kind, n):
        type(self).cases[kind] = type(self).cases.get(kind, 0) + n

    def hostile_copy(self, name, payload):
        counter = [0]
        report = with_payload(self.report, payload, counter)
        path = os.path.join(self.folder, f"{name}.json")
        with open(path, "w") as f:
            json.dump(report, f)
        shutil.copy(self.trace_path, os.path.join(self.folder, f"{name}.trace.h5"))
        return path, counter[0]

    def test_every_string_of_the_report_shows_as_inert_text(self):
        strings = len(list(leaves(self.report)))
        self.assertGreater(strings, 500)
        for kind, payload in PAYLOADS.items():
            with self.subTest(payload=kind):
                path, injected = self.hostile_copy(f"hostile-{kind}", payload)
                page = path.replace(".json", ".html")
                args = ["html", path, "--out", page] + (["--trainproof", BIN] if BIN else [])
                made = viz(*args)
                self.assertEqual(made.returncode, 0, made.stderr[-3000:])
                self.assertNotIn("Traceback", made.stderr)
                with open(page, encoding="utf-8") as f:
                    text = f.read()
                audit = PageAudit()
                audit.feed(text)
                self.assertEqual(audit.problems, [], kind)
                shown = "".join(audit.text)
                # Strings the page shows read as the text they are, markup included.
                if kind in ("script", "tags"):
                    self.assertIn(payload.format(i=1).split(">")[0], shown)
                self.assertGreater(len(re.findall(r"<img\b", text)), 3, "plots drawn")
                self.count("page strings x payloads", injected)

    def test_plots_with_mathtext_in_every_label(self):
        path, injected = self.hostile_copy("hostile-plot", PAYLOADS["mathtext"])
        out = os.path.join(self.folder, "plots")
        os.makedirs(out)
        made = viz("plot", path, "--out", out)
        self.assertEqual(made.returncode, 0, made.stderr[-3000:])
        self.assertNotIn("Traceback", made.stderr)
        self.assertGreater(len([f for f in os.listdir(out) if f.endswith(".png")]), 3)
        self.count("plot labels with mathtext", injected)


def craft(source, target, name, defect):
    """A copy of trace `source` with dataset `name` given `defect`."""
    import h5py
    import numpy as np
    shutil.copy(source, target)
    with h5py.File(target, "r+") as f:
        original = f[name][()]
        del f[name]
        if defect == "soft_link":
            f[name] = h5py.SoftLink("/ranks/host" if name != "ranks/host" else "/train/step")
        elif defect == "external_link":
            f[name] = h5py.ExternalLink("/etc/hostname", "/x")
        elif defect == "group":
            f.create_group(name)
        elif defect == "wrong_type":
            length = max(1, len(np.atleast_1d(original)))
            strings = np.asarray(original).dtype.kind == "S"
            f[name] = np.zeros(length) if strings else np.array([b"x" * 8] * length)
        elif defect == "wrong_rank":
            f[name] = np.zeros((2, 2, 2, 2))
        elif defect == "wrong_length":
            shape = list(np.shape(original)) or [1]
            shape[0] += 3
            f[name] = np.zeros(shape, dtype=np.asarray(original).dtype)
        elif defect == "huge":
            # Declared, never written: a reader that loads it whole asks for terabytes.
            shape = (2 ** 40,) + tuple(np.shape(original)[1:])
            f.create_dataset(name, shape=shape, dtype=np.asarray(original).dtype,
                             chunks=(1024,) + tuple(np.shape(original)[1:]))


DEFECTS = ("soft_link", "external_link", "group", "wrong_type", "wrong_rank", "wrong_length",
           "huge")


class CraftedTraces(unittest.TestCase):
    cases = 0

    @classmethod
    def setUpClass(cls):
        sys.path.insert(0, VIZ_DIR)
        cls.folder = tempfile.mkdtemp(prefix="trainproof-traces-")
        subprocess.run([sys.executable, SYNTHETIC, cls.folder, "--ranks", "8", "--nodes", "4",
                        "--steps", "12"], check=True, capture_output=True)
        cls.report_path = os.path.join(cls.folder, "synthetic.json")
        cls.trace_path = os.path.join(cls.folder, "synthetic.trace.h5")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.folder, ignore_errors=True)
        print("crafted trace cases:", cls.cases, file=sys.stderr)

    def test_each_dataset_with_each_defect_is_refused_naming_it(self):
        import load
        target = os.path.join(self.folder, "crafted.trace.h5")
        for name in load.TRACE_LAYOUT:
            for defect in DEFECTS:
                if defect == "wrong_length" and name in ("ranks/host", "train/step_number",
                                                         "checkpoints/step", "sweep/op",
                                                         "drill/event"):
                    continue  # these set their dimension; the others are held to them
                with self.subTest(dataset=name, defect=defect):
                    craft(self.trace_path, target, name, defect)
                    run = load.Run(self.report_path, trace=target)
                    try:
                        self.assertIsNone(run.traces.find(name))
                        self.assertTrue(any(name in note for note in run.traces.notes),
                                        run.traces.notes)
                    finally:
                        run.close()
                    type(self).cases += 1

    def test_every_plot_of_a_crafted_trace_is_drawn_or_omitted_with_its_reason(self):
        import load
        import render
        for defect in DEFECTS:
            with self.subTest(defect=defect):
                target = os.path.join(self.folder, f"all-{defect}.trace.h5")
                shutil.copy(self.trace_path, target)
                for name in ("train/step", "train/bucket_start", "checkpoints/rank_write_gbps",
                             "sweep/rank_iteration_s", "drill/event"):
                    craft(target, target + ".tmp", name, defect)
                    os.replace(target + ".tmp", target)
                run = load.Run(self.report_path, trace=target)
                try:
                    for plot, name, figure, why in render.figures(run):
                        self.assertTrue(figure is not None or why, (plot, name))
                finally:
                    run.close()
                type(self).cases += 1

    def test_the_command_on_a_crafted_trace_exits_0_with_its_notes(self):
        target = os.path.join(self.folder, "command.trace.h5")
        craft(self.trace_path, target, "train/step", "huge")
        out = os.path.join(self.folder, "command-plots")
        os.makedirs(out)
        made = viz("plot", self.report_path, "--trace", target, "--out", out)
        self.assertEqual(made.returncode, 0, made.stderr[-3000:])
        self.assertNotIn("Traceback", made.stderr)
        self.assertIn("train/step", made.stdout + made.stderr)
        type(self).cases += 1


if __name__ == "__main__":
    unittest.main(verbosity=2)
