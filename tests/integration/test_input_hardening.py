"""Hostile files and values met by one process, no launcher: each ends with exit 2 and one line
that names the file, the field or the option, never a signal or a raw library message.
Reports nested 50,000 levels deep (the stack of every reader that walks them), fields of the wrong
type, baselines that `trainproof report` would refuse, and error lines that carry control bytes,
bytes that are not UTF-8, or a password (docs/promises.md)."""
import copy
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from harness import BIN, SCENARIOS, TINY, main

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                      "report.golden.json")
DEEP = "[" * 50000 + "]" * 50000


def trainproof(*args):
    return subprocess.run([BIN, *args], capture_output=True, timeout=120)


class InputHardening(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="trainproof-inputs-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        with open(GOLDEN) as f:
            self.golden = json.load(f)

    def write(self, name, content):
        path = os.path.join(self.tmp, name)
        with open(path, "wb") as f:
            f.write(content if isinstance(content, bytes) else content.encode())
        return path

    def expect_usage_error(self, run, *must_name):
        self.assertEqual(run.returncode, 2, run)
        lines = run.stderr.decode("utf-8").splitlines()
        errors = [line for line in lines if line.startswith("trainproof: error: ")]
        self.assertEqual(len(errors), 1, run.stderr)
        for name in must_name:
            self.assertIn(name, errors[0])
        self.assertNotIn("json.exception", errors[0])
        return errors[0]

    def every_reader(self, path):
        """`report`, `report compare` (either side), `report merge` and --baseline of one file."""
        good = self.write("good.json", json.dumps(self.golden))
        out = os.path.join(self.tmp, "merged.json")
        return [trainproof("report", path), trainproof("report", "compare", good, path),
                trainproof("report", "compare", path, good),
                trainproof("report", "merge", path, good, "--report", out),
                trainproof("train", "--scenario", TINY, "--baseline", path)]

    def test_a_report_nested_too_deep_is_refused_by_every_reader(self):
        deep = self.write("deep.json", DEEP)
        for run in self.every_reader(deep):
            self.expect_usage_error(run, deep, "nested more than 256 levels")

    def test_a_dataset_index_nested_too_deep_is_refused(self):
        data = os.path.join(self.tmp, "data")
        os.makedirs(data)
        index = self.write("data/index.json", DEEP)
        run = trainproof("train", "--scenario", TINY, f"--data.dir={data}")
        self.expect_usage_error(run, index, "nested more than 256 levels")

    def test_fields_of_the_wrong_type_name_the_file_and_the_field(self):
        cases = [("context", "str", "/context"), ("train", [], "/train"),
                 ("train.phases.step", "fast", "/train/phases/step")]
        for where, value, field in cases:
            report = copy.deepcopy(self.golden)
            parent = report
            *path, last = where.split(".")
            for key in path:
                parent = parent[key]
            parent[last] = value
            broken = self.write(f"{where}.json", json.dumps(report))
            for run in self.every_reader(broken):
                self.expect_usage_error(run, broken, field)
        numeric_verdict = dict(self.golden, drill={"verdict": 3})
        broken = self.write("drill-verdict.json", json.dumps(numeric_verdict))
        for run in self.every_reader(broken):
            self.expect_usage_error(run, broken, "/drill/verdict is a number, not a string")
        no_context = copy.deepcopy(self.golden)
        del no_context["context"]
        broken = self.write("no-context.json", json.dumps(no_context))
        self.expect_usage_error(trainproof("report", broken), broken, "context")

    def test_a_baseline_is_read_as_trainproof_report_reads_it(self):
        future = dict(self.golden, schema="trainproof.report/99")
        no_verdict = {k: v for k, v in self.golden.items() if k != "verdict"}
        for name, report, why in [("future.json", future, "schema is not"),
                                  ("no-verdict.json", no_verdict, "verdict is not one of")]:
            path = self.write(name, json.dumps(report))
            self.expect_usage_error(trainproof("report", path), path, why)
            self.expect_usage_error(trainproof("train", "--scenario", TINY, "--baseline", path),
                                    "--baseline", path, why)

    def test_error_lines_escape_control_bytes_and_redact_passwords(self):
        line = self.expect_usage_error(trainproof("train", "--cost.currency=US\x1b[2J"),
                                       "cost.currency")
        self.assertIn("US\\x1B[2J", line)
        gate = self.write("gate.ini", b"[gate]\nmax_rto_s = \xff12\n")
        line = self.expect_usage_error(trainproof("train", "--scenario", TINY,
                                                  f"--gate.file={gate}"), gate)
        self.assertIn("\\xFF", line)
        line = self.expect_usage_error(
            trainproof("train", "--scenario", TINY, "--data.dir=s3://alice:hunter2@bucket/data"),
            "data.dir")
        self.assertNotIn("hunter2", line)

    def test_a_gate_file_is_named_as_one(self):
        gate = self.write("gate.ini", "[gate]\nmax_rto_s = 30 ; seconds\n")
        self.expect_usage_error(trainproof("train", "--scenario", TINY, f"--gate.file={gate}"),
                                f"gate.file '{gate}', line 2: ' ;' inside a value")

    def test_values_in_messages_read_back_exactly(self):
        for value, shown in [("-1e-9", "-1e-09"), ("1e300", "1e+300")]:
            line = self.expect_usage_error(trainproof("sweep", f"--sweep.flag_fraction={value}"),
                                           "sweep.flag_fraction")
            self.assertIn(f"sweep.flag_fraction={shown} is out of range", line)


if __name__ == "__main__":
    main()
