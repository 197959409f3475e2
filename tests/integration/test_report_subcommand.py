"""`trainproof report FILE` reprints the run's summary and exits with its verdict."""
import json
import os
import tempfile
import unittest

from harness import direct, main, mpirun


class ReportSubcommand(unittest.TestCase):
    def test_reprints_summary_and_follows_verdict(self):
        run = mpirun(2)
        self.assertEqual(run.returncode, 0, run)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "r.json")
            with open(path, "w") as f:
                json.dump(run.report, f)
            again = direct("report", path)
            self.assertEqual(again.returncode, 0, again)
            self.assertIn(again.stdout, run.stdout)  # the run adds only the report path

            run.report["verdict"] = "FAIL"
            with open(path, "w") as f:
                json.dump(run.report, f)
            self.assertEqual(direct("report", path).returncode, 1)

            with open(path, "w") as f:
                f.write("{not json")
            bad = direct("report", path)
            self.assertEqual(bad.returncode, 2)
            self.assertIn(path, bad.stderr)
        self.assertEqual(direct("report", "/nonexistent.json").returncode, 2)


if __name__ == "__main__":
    main()
