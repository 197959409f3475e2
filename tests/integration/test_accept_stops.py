"""trainproof accept stopped in each stage (docs/acceptance.md, "Signals, the time budget and
partial reports"): SIGTERM or SIGUSR1 to every rank stops the running stage at its next stop point
and the run ends with exit 4 and an INCOMPLETE report naming the stage and the stages not run;
an exhausted accept.time_budget_s, or a stage's own accept.stage_time_s, does the same with exit 1; a rank killed with SIGKILL leaves
the partial report written as its stage started. A preempted run never reports PASS."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import BIN, accept_command  # noqa: E402

# Stages long enough on 2 cores that a signal sent when one starts lands inside it.
LONG_SWEEP = ["--sweep.max_bytes=67108864", "--sweep.iters=50"]
LONG_TRAIN = ["--train.steps=20000", "--checkpoint.every=50"]
BIG_MODEL = ["--model.hidden=2048", "--model.layers=8", "--train.steps=10",
             "--train.warmup_steps=2"]


def rank_pids(launcher):
    out = subprocess.run(["pgrep", "-P", str(launcher.pid)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


class StoppedInEachStage(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="trainproof-accept-stops-")
        self.addCleanup(self.tmp.cleanup)
        self.report = os.path.join(self.tmp.name, "run.json")
        self.partial = os.path.join(self.tmp.name, "run.partial.json")

    def accept_until(self, marker, send, *args, ranks=2, to_launcher=False):
        """Runs accept, and when `marker` appears in its output calls send(rank pids), or
        send([the launcher's pid]) with `to_launcher`."""
        cmd = accept_command(self.report, os.path.join(self.tmp.name, "ckpt"), *args, ranks=ranks)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        seen = []
        deadline = time.monotonic() + 240
        for line in proc.stdout:
            seen.append(line)
            if marker in line:
                send([proc.pid] if to_launcher else rank_pids(proc))
                break
            self.assertLess(time.monotonic(), deadline, "".join(seen))
        rest, _ = proc.communicate(timeout=240)
        return proc.returncode, "".join(seen) + rest

    def final(self):
        self.assertFalse(os.path.exists(self.partial), "the final report left the partial behind")
        with open(self.report) as f:
            return json.load(f)

    def assert_stopped(self, code, text, stage, by, exit_code=4):
        self.assertEqual(code, exit_code, text)
        report = self.final()
        self.assertEqual(report["verdict"], "INCOMPLETE", text)
        self.assertIn(f"{by}", report["accept"]["incomplete"])
        self.assertIn(f"stage {stage}", report["accept"]["incomplete"])
        self.assertIn("verdict: INCOMPLETE", text)
        return report

    def signal_all(self, sig):
        return lambda pids: [os.kill(p, sig) for p in pids]

    def test_sigterm_in_the_sweep(self):
        code, text = self.accept_until("accept: stage sweep", self.signal_all(signal.SIGTERM),
                                       *LONG_SWEEP)
        report = self.assert_stopped(code, text, "sweep", "SIGTERM received")
        attempts = [(a["stage"], a["stopped"]) for a in report["accept"]["attempts"]]
        self.assertEqual(attempts, [("preflight", False), ("sweep", True)])
        self.assertIn("not completed: sweep, pairwise, train, restore",
                      report["accept"]["incomplete"])

    def test_sigusr1_in_the_pairwise_pass(self):
        code, text = self.accept_until(
            "accept: stage pairwise", self.signal_all(signal.SIGUSR1), "--test.split_hosts=2",
            "--sweep.pair_bytes=67108864", "--sweep.pair_iters=50", "--sweep.max_bytes=65536")
        report = self.assert_stopped(code, text, "pairwise", "SIGUSR1 received")
        self.assertTrue(report["accept"]["attempts"][-1]["stopped"])

    def test_sigterm_in_training_commits_a_checkpoint(self):
        code, text = self.accept_until("accept: stage train", self.signal_all(signal.SIGTERM),
                                       *LONG_TRAIN)
        report = self.assert_stopped(code, text, "train", "SIGTERM received")
        self.assertEqual(report["train"]["preempted"]["signal"], "SIGTERM")
        self.assertLess(report["train"]["steps_completed"], 20000)
        self.assertIn("SIGTERM received: stopped after step", text)

    def test_sigterm_in_the_restore_is_not_swallowed(self):
        code, text = self.accept_until("accept: stage restore", self.signal_all(signal.SIGTERM),
                                       *BIG_MODEL)
        report = self.assert_stopped(code, text, "restore", "SIGTERM received")
        self.assertIn("which finished", report["accept"]["incomplete"])

    def test_an_exhausted_time_budget(self):
        code, text = self.accept_until("accept: stage sweep", lambda pids: None, *LONG_SWEEP,
                                       "--accept.time_budget_s=4")
        self.assert_stopped(code, text, "sweep", "accept.time_budget_s=4", exit_code=1)

    def test_a_stage_past_its_own_deadline(self):
        # The sweep gets 3 s of its own within a budget of an hour: its deadline is named, and no
        # later stage starts.
        code, text = self.accept_until("accept: stage sweep", lambda pids: None, *LONG_SWEEP,
                                       "--accept.time_budget_s=3600",
                                       "--accept.stage_time_s=sweep=3")
        report = self.assert_stopped(code, text, "sweep", "stage sweep's deadline "
                                     "(accept.stage_time_s sweep=3) ran out", exit_code=1)
        self.assertEqual([a["stage"] for a in report["accept"]["attempts"]],
                         ["preflight", "sweep"])

    def test_sigusr1_to_mpirun_reaches_every_rank(self):
        # mpirun passes SIGUSR1 on to the ranks and leaves them running: they stop at the next
        # row, and the job ends with the report and exit 4.
        code, text = self.accept_until("accept: stage sweep", self.signal_all(signal.SIGUSR1),
                                       *LONG_SWEEP, to_launcher=True)
        report = self.assert_stopped(code, text, "sweep", "SIGUSR1 received")
        self.assertEqual(report["accept"]["attempts"][-1]["stopped"], True)

    def test_sigterm_to_mpirun_is_never_pass(self):
        # mpirun passes SIGTERM on, then kills the ranks a second later
        # (odls_base_sigkill_timeout): the final report if they made it, else the partial one.
        code, text = self.accept_until("accept: stage sweep", self.signal_all(signal.SIGTERM),
                                       *LONG_SWEEP, to_launcher=True)
        self.assertNotEqual(code, 0, text)
        for path in (self.report, self.partial):
            if os.path.exists(path):
                with open(path) as f:
                    self.assertEqual(json.load(f)["verdict"], "INCOMPLETE", text)
        self.assertTrue(os.path.exists(self.report) or os.path.exists(self.partial), text)

    def test_a_rank_killed_leaves_the_partial_report_of_its_stage(self):
        def kill_one(pids):
            time.sleep(0.5)
            os.kill(pids[-1], signal.SIGKILL)
        code, text = self.accept_until("accept: stage sweep", kill_one, *LONG_SWEEP)
        self.assertNotIn(code, (0, 1, 4), text)
        self.assertFalse(os.path.exists(self.report), text)
        with open(self.partial) as f:
            partial = json.load(f)
        self.assertEqual(partial["verdict"], "INCOMPLETE")
        self.assertEqual(partial["accept"]["partial"]["running"], "sweep")
        self.assertEqual([a["stage"] for a in partial["accept"]["attempts"]], ["preflight"])
        shown = subprocess.run([BIN, "report", self.partial], capture_output=True, text=True)
        self.assertEqual(shown.returncode, 1, shown.stderr)  # INCOMPLETE
        self.assertIn("PARTIAL REPORT, written as stage sweep started", shown.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
