"""The trace and the pictures on a real run (docs/report.md, "The trace" and "Pictures"):
scripts/acceptance.sh on 4 local ranks with checkpoints, a dataset and a drill writes the traces
beside its reports; every rank's rows are there, the file is as large as the documented formula
says and no larger; `trainproof report plot` draws a picture of every stage that ran, each PNG
decodes; and the HTML page is written, self-contained."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy

from harness import BIN, MPIEXEC, SCENARIOS, main

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "acceptance.sh")
SMOKE = os.path.join(SCENARIOS, "accept-smoke.ini")
RANKS = 4
# Stages of the acceptance run on one host: the pairwise matrix needs two nodes.
EXPECTED_PLOTS = {"phases", "step_time", "step_timeline", "busbw", "checkpoint", "goodput",
                  "drill"}


def prepare_dataset(folder):
    run = subprocess.run([MPIEXEC, "-np", "2", "--oversubscribe", BIN, "prepare-data",
                          "--scenario", SMOKE, f"--data.dir={folder}", "--data.samples=256",
                          "--data.files=4", "--checkpoint.every=0"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


class Pictures(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="trainproof-pictures-")
        cls.out = os.path.join(cls.tmp, "out")
        data = os.path.join(cls.tmp, "data")
        prepare_dataset(data)
        env = dict(os.environ, TRAINPROOF=os.path.abspath(BIN))
        cls.acceptance = subprocess.run([SCRIPT, "-n", str(RANKS), "-s", SMOKE, "-o", cls.out, "--",
                                  f"--data.dir={data}"],
                                 capture_output=True, text=True, env=env, timeout=500)
        merged = os.path.join(cls.out, "acceptance.json")
        assert os.path.exists(merged), cls.acceptance.stdout + cls.acceptance.stderr
        with open(merged) as f:
            cls.report = json.load(f)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_every_rank_writes_its_rows_and_the_size_is_the_documented_one(self):
        self.assertIn(self.acceptance.returncode, (0, 1),
                      self.acceptance.stdout + self.acceptance.stderr)
        with open(os.path.join(self.out, "accept.json")) as f:
            accept = json.load(f)
        # Every stage ran: training read the dataset, and the cold restore of a run that read
        # one hashes the dataset's shape as training did.
        self.assertIn("data", accept)
        restore = [c for c in accept["gate"]["checks"] if c["name"] == "restore_digest"]
        self.assertEqual([c["status"] for c in restore], ["pass"], accept["gate"]["checks"])
        path = os.path.join(self.out, "accept.trace.h5")
        self.assertEqual(accept["context"]["trace"], path)
        with h5py.File(path, "r") as t:
            self.assertEqual(t.attrs["schema"], "trainproof.trace/1")
            self.assertEqual(t.attrs["run_id"], accept["context"]["run_id"])
            self.assertEqual(t.attrs["scenario_hash"], accept["context"]["scenario_hash"])
            self.assertEqual(int(t.attrs["world_size"]), RANKS)
            self.assertEqual(len(t["ranks/host"]), RANKS)
            steps = t["train/step_number"][:]
            self.assertEqual(len(steps), accept["train"]["measured_steps"])
            for field in ("start", "arrival", "data", "compute", "comm", "comm_exposed",
                          "optimizer", "checkpoint", "step"):
                self.assertEqual(t["train/" + field].shape, (RANKS, len(steps)), field)
                self.assertFalse(numpy.isnan(t["train/" + field][:]).any(), field)
            step = t["train/step"][:]
            # The report's statistics come from the same samples.
            self.assertAlmostEqual(step.max(), accept["train"]["phases"]["step"]["max"], places=9)
            buckets = t["train/bucket_start"].shape[2]
            ends = t["train/bucket_end"][:]
            self.assertTrue((ends >= t["train/bucket_start"][:]).all())
            saves = accept["checkpoint"]["saves"]
            self.assertEqual(list(t["checkpoints/step"][:]), [s["step"] for s in saves])
            self.assertEqual(t["checkpoints/rank_write_gbps"].shape, (RANKS, len(saves)))
            self.assertEqual(t["checkpoints/rank_stall_s"].shape[0], RANKS)
            rows, iters = t["sweep/iteration_s"].shape
            self.assertEqual(rows, len([r for r in accept["sweep"]["results"]
                                        if r["group"] == "world"]))
            self.assertEqual(iters, accept["sweep"]["iters"])
            self.assertEqual(t["sweep/rank_iteration_s"].shape, (RANKS, rows, iters))
        # docs/report.md: 72 bytes per rank and step, 16 per bucket and step, 16 per rank and
        # checkpoint, 8 per rank, row and iteration; the rest is HDF5's own, a few pages per
        # dataset.
        samples = (RANKS * len(steps) * (72 + 16 * buckets) + RANKS * len(saves) * 16 +
                   (RANKS + 1) * rows * iters * 8)
        size = os.path.getsize(path)
        self.assertGreaterEqual(size, samples)
        self.assertLess(size, samples + 40 * 4096, "no more than the samples and HDF5's metadata")

    def test_the_drill_writes_its_events(self):
        with open(os.path.join(self.out, "drill.json")) as f:
            drill = json.load(f)
        with h5py.File(os.path.join(self.out, "drill.trace.h5"), "r") as t:
            self.assertEqual(t.attrs["subcommand"], "drill")
            events = [e.decode() for e in t["drill/event"][:]]
            times = t["drill/time_unix"][:]
        self.assertEqual(events.count("launch"), len(drill["drill"]["runs"]))
        self.assertEqual(events.count("fault"), len(drill["drill"]["failures"]))
        self.assertGreaterEqual(events.count("fault"), 1)
        self.assertTrue((numpy.diff(times) >= 0).all(), "in time order")

    def test_every_stage_that_ran_has_its_picture_and_each_decodes(self):
        import matplotlib.image
        report = os.path.join(self.out, "acceptance.json")
        run = subprocess.run([BIN, "report", "plot", report], capture_output=True, text=True,
                             timeout=300)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        drawn = {re.sub(r"^acceptance\.|\.png$", "", os.path.basename(p))
                 for p in glob.glob(os.path.join(self.out, "acceptance.*.png"))}
        self.assertTrue(EXPECTED_PLOTS <= {d.split(".")[0] for d in drawn}, (drawn, run.stdout))
        self.assertRegex(run.stdout, r"omitted: pairwise")
        for png in glob.glob(os.path.join(self.out, "acceptance.*.png")):
            self.assertGreater(os.path.getsize(png), 1000, png)
            image = matplotlib.image.imread(png)
            self.assertGreater(image.shape[0], 100, png)
            self.assertGreater(image.shape[1], 100, png)

    def test_the_html_page_is_written_and_self_contained(self):
        page = os.path.join(self.out, "acceptance.html")
        with open(page) as f:
            html = f.read()
        self.assertIn(self.report["verdict"], html)
        for check in self.report["gate"]["checks"]:
            self.assertIn(check["name"], html)
        self.assertNotRegex(html, r"(src|href)=\"(https?:)?//")
        images = re.findall(r"<img [^>]*src=\"([^\"]{0,30})", html)
        self.assertGreaterEqual(len(images), len(EXPECTED_PLOTS))
        for src in images:
            self.assertTrue(src.startswith("data:image/png;base64,"), src)

    def test_a_real_browser_opens_the_page_of_the_real_run(self):
        browser = os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_html_browser.py")
        run = subprocess.run([sys.executable, browser, "--report",
                              os.path.join(self.out, "acceptance.json"), "--screenshot",
                              os.path.join(self.tmp, "page.png")],
                             capture_output=True, text=True, timeout=300,
                             env=dict(os.environ, TRAINPROOF_BIN=os.path.abspath(BIN)))
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertIn(f"verdict {self.report['verdict']}", run.stdout)
        self.assertGreater(os.path.getsize(os.path.join(self.tmp, "page.png")), 10000)

    def test_compare_writes_both_reports_side_by_side(self):
        accept = os.path.join(self.out, "accept.json")
        page = os.path.join(self.tmp, "compare.html")
        run = subprocess.run([BIN, "report", "compare", accept, accept, "--html", page],
                             capture_output=True, text=True, timeout=300)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        with open(page) as f:
            html = f.read()
        self.assertGreaterEqual(html.count(accept), 2, "each side names its report")
        self.assertNotRegex(html, r"(src|href)=\"(https?:)?//")

    def test_bad_input_is_exit_2_naming_it(self):
        missing = os.path.join(self.tmp, "missing.json")
        run = subprocess.run([BIN, "report", "plot", missing], capture_output=True, text=True)
        self.assertEqual(run.returncode, 2, run)
        self.assertIn(missing, run.stderr)
        # Without matplotlib (a folder on PYTHONPATH whose matplotlib cannot be imported).
        shim = os.path.join(self.tmp, "shim", "matplotlib")
        os.makedirs(shim, exist_ok=True)
        with open(os.path.join(shim, "__init__.py"), "w") as f:
            f.write("raise ImportError('matplotlib is not installed here')\n")
        run = subprocess.run([BIN, "report", "plot", os.path.join(self.out, "acceptance.json")],
                             capture_output=True, text=True, timeout=120,
                             env=dict(os.environ, PYTHONPATH=os.path.dirname(shim)))
        self.assertEqual(run.returncode, 2, run)
        self.assertIn("python3-matplotlib", run.stdout + run.stderr)
        # A trace that would replace the report.
        report = os.path.join(self.tmp, "r.json")
        run = subprocess.run([MPIEXEC, "-np", "1", BIN, "train", "--report", report,
                              f"--trace={report}"], capture_output=True, text=True, timeout=60)
        self.assertEqual(run.returncode, 2, run.stderr)
        self.assertIn("--trace", run.stderr)
        self.assertFalse(os.path.exists(report))


if __name__ == "__main__":
    main()
