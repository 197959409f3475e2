"""Every shipped example summary reads as a person reads numbers (docs/report.md, "Numbers in
text"): no e-notation, no float with every digit a double holds, no share too small to read as a
percentage, and no percentage above 100 without words that say why. Scans the golden summaries
and the fenced examples of the README and docs/, the HTML page's tables (viz/html_page.py: one
unit per column of durations, correctness checks as what was compared) and `report compare`
(its wording moves the way its ratio column does); the integration tests hold every run's own
summary, the drill's included, to the same rule (harness.unreadable_numbers)."""
import copy
import glob
import html.parser
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import unreadable_numbers  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
BIN = os.environ.get("TRAINPROOF_BIN")
VIZ = os.path.join(ROOT, "viz", "trainproof_viz.py")
GOLDEN_REPORT = os.path.join(ROOT, "tests", "data", "report.golden.json")
DURATION = re.compile(r"^-?[\d,.]+ (s|ms|us)$")


def examples():
    """(where, text) of every golden summary and every fenced example that is not code."""
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "data", "*.golden"))):
        with open(path) as f:
            yield os.path.relpath(path, ROOT), f.read()
    for path in [os.path.join(ROOT, "README.md")] + sorted(
            glob.glob(os.path.join(ROOT, "docs", "*.md"))):
        with open(path) as f:
            text = f.read()
        for n, block in enumerate(FENCE.findall(text)):
            yield f"{os.path.relpath(path, ROOT)} example {n + 1}", block


class ReadableNumbers(unittest.TestCase):
    def test_the_rule_finds_what_it_should(self):
        self.assertEqual(unreadable_numbers("stalled 1.7e+04% of training time\nok 3.5 GB/s\n"),
                         ["stalled 1.7e+04% of training time"])
        self.assertEqual(unreadable_numbers("took 130% of the time\n"), ["took 130% of the time"])
        self.assertEqual(unreadable_numbers("busbw 2.6 GB/s, 130% of the sweep's 2 GB/s\n"), [])
        raw = "  restarts 1; RPO 6 steps (0.0008107049999999999 s); RTO 6.231903791427612 s"
        self.assertEqual(unreadable_numbers(raw + "\n"), [raw])
        self.assertEqual(unreadable_numbers("  launch 0.00 s 0.00034%\n"), ["  launch 0.00 s 0.00034%"])
        self.assertEqual(unreadable_numbers("step 112.500 ms, launch <0.1%, 0%, version 0.1.0\n"),
                         [])

    def test_no_shipped_summary_has_e_notation_or_an_unexplained_share_above_100(self):
        checked = 0
        for where, text in examples():
            checked += 1
            with self.subTest(where=where):
                self.assertEqual(unreadable_numbers(text), [])
        self.assertGreater(checked, 5)


class TableCells(html.parser.HTMLParser):
    """Every <table> of a page as rows of cell text."""

    def __init__(self):
        super().__init__()
        self.tables, self.cell = [], None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.cell = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None and self.tables:
            self.tables[-1][-1].append(self.cell)
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


def job_section(seconds):
    """A job section whose categories take `seconds` (name: s) of the wall."""
    wall = sum(seconds.values())
    categories = [{"name": n, "seconds": s, "fraction": s / wall} for n, s in seconds.items()]
    return {"wall_s": wall, "wall_max_s": wall, "queue_s": None, "queue_note": "not under Slurm",
            "categories": categories, "productive_s": seconds.get("productive", 0),
            "goodput": seconds.get("productive", 0) / wall, "train_wall_s": wall,
            "train_goodput": seconds.get("productive", 0) / wall,
            "lost": [c for c in categories if c["name"] != "productive"],
            "accounted_fraction": 1.0, "ranks": []}


class HtmlTables(unittest.TestCase):
    def page_tables(self, report):
        with tempfile.TemporaryDirectory() as tmp:
            path, page = os.path.join(tmp, "report.json"), os.path.join(tmp, "report.html")
            with open(path, "w") as f:
                json.dump(report, f)
            proc = subprocess.run([sys.executable, VIZ, "html", path, "--out", page],
                                  capture_output=True, text=True, timeout=60)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            with open(page, encoding="utf-8") as f:
                parser = TableCells()
                parser.feed(f.read())
        return parser.tables

    def test_every_cell_is_readable_and_a_column_of_durations_has_one_unit(self):
        with open(GOLDEN_REPORT) as f:
            report = json.load(f)
        # Durations from 120 us to 20 s, and a share of 0.0006% (launch).
        report["job"] = job_section({"launch": 0.00012, "setup": 2.5, "productive": 20.0,
                                     "data_stall": 0.0042, "teardown": 0.5})
        tables = self.page_tables(report)
        job = next(t for t in tables if t[0] == ["category", "time", "share of wall"])
        self.assertEqual(job[1], ["launch", "0.00012 s", "<0.1%"])
        for table in tables:
            for column in zip(*table[1:]):
                units = {DURATION.match(c).group(1) for c in column if DURATION.match(c)}
                self.assertLessEqual(len(units), 1, f"{table[0]}: {column}")
                for text in column:
                    self.assertEqual(unreadable_numbers(text), [], f"{table[0]}: {text}")

    def test_correctness_checks_say_what_was_compared_not_0_against_0(self):
        with open(GOLDEN_REPORT) as f:
            report = json.load(f)
        checks = next(t for t in self.page_tables(report) if t[0][0] == "check")
        rows = {row[0]: row for row in checks[1:]}
        self.assertEqual(rows["replica_digest"][2:4],
                         ["pass: exact", "compared every rank's state digest against the others'"])
        self.assertEqual(rows["collective_correctness"][2:4],
                         ["pass: exact", "compared allreduce results against the known values"])
        wrong = copy.deepcopy(report)
        for check in wrong["gate"]["checks"]:
            if check["name"] == "replica_digest":
                check.update(value=1, status="fail")
        rows = {row[0]: row for row in
                next(t for t in self.page_tables(wrong) if t[0][0] == "check")[1:]}
        self.assertEqual(rows["replica_digest"][2], "fail: 1 ranks differ")


def reason_direction_problems(text):
    """Rows of `report compare` whose wording moves against their ratio column (new / golden):
    a ratio above 1 that "fell to", or below 1 that "rose to"."""
    problems = []
    for line in text.splitlines():
        columns = line.split()
        ratio = next((c for c in columns[3:6] if re.fullmatch(r"\d+(\.\d+)?", c)), None)
        if ratio is None or ("fell to" not in line and "rose to" not in line):
            continue
        if (float(ratio) > 1) != ("rose to" in line):
            problems.append(line)
    return problems


class ReportCompare(unittest.TestCase):
    def test_the_golden_comparison_moves_the_way_its_ratios_do(self):
        with open(os.path.join(ROOT, "tests", "data", "report-compare.golden")) as f:
            text = f.read()
        self.assertIn("rose to", text)
        self.assertEqual(reason_direction_problems(text), [])
        self.assertEqual(reason_direction_problems(
            "step p50   20  46.3 ms  2.317  lower   FAIL: fell to 43% of golden (lower is better)"),
            ["step p50   20  46.3 ms  2.317  lower   FAIL: fell to 43% of golden (lower is better)"])

    @unittest.skipUnless(BIN and os.path.exists(BIN), "TRAINPROOF_BIN names no built trainproof")
    def test_report_compare_output_is_readable_and_consistent(self):
        with open(GOLDEN_REPORT) as f:
            golden = json.load(f)
        slower = copy.deepcopy(golden)
        slower["train"]["phases"]["step"]["p50"] *= 2.317
        slower["train"]["samples_per_s"] *= 0.43
        slower["train"]["achieved_flops"] *= 1.0000001
        with tempfile.TemporaryDirectory() as tmp:
            paths = [os.path.join(tmp, "golden.json"), os.path.join(tmp, "new.json")]
            for path, report in zip(paths, (golden, slower)):
                with open(path, "w") as f:
                    json.dump(report, f)
            proc = subprocess.run([BIN, "report", "compare", *paths], capture_output=True,
                                  text=True, timeout=60)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertEqual(unreadable_numbers(proc.stdout), [])
        self.assertEqual(reason_direction_problems(proc.stdout), [])
        step = next(line for line in proc.stdout.splitlines() if line.startswith("step p50"))
        self.assertIn("2.32  lower   FAIL: rose to 232% of golden: worse", step)


if __name__ == "__main__":
    unittest.main(verbosity=2)
