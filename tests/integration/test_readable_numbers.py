"""Every shipped example summary reads as a person reads numbers (docs/report.md, "Numbers in
text"): no e-notation, and no percentage above 100 without words that say why. Scans the golden
summaries and the fenced examples of the README and docs/; the integration tests hold every run's
own summary to the same rule (harness.unreadable_numbers)."""
import glob
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import unreadable_numbers  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)


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

    def test_no_shipped_summary_has_e_notation_or_an_unexplained_share_above_100(self):
        checked = 0
        for where, text in examples():
            checked += 1
            with self.subTest(where=where):
                self.assertEqual(unreadable_numbers(text), [])
        self.assertGreater(checked, 5)


if __name__ == "__main__":
    unittest.main(verbosity=2)
