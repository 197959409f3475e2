"""Signals to mpirun and to single ranks in every stage of `trainproof accept` (docs/promises.md,
"Hostile input"), beyond the stops of test_accept_stops.py: a rank that crashes in any stage
leaves its crash record and the partial report of that stage, a rank killed in training or in
the restore leaves the partial report naming it, and SIGTERM or SIGUSR1 to mpirun in the stages
is never PASS. Every case is timed against the stage it lands in, so the file runs alone."""
import json
import os
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import test_accept_stops as stops  # noqa: E402
from harness import main, timing  # noqa: E402

PAIRWISE = ["--test.split_hosts=2", "--sweep.pair_bytes=67108864", "--sweep.pair_iters=50",
            "--sweep.max_bytes=65536"]
STAGES = {"sweep": stops.LONG_SWEEP, "pairwise": PAIRWISE, "train": stops.LONG_TRAIN,
          "restore": stops.BIG_MODEL}
# What test_accept_stops.py does not already send to mpirun in that stage.
TO_MPIRUN = (("pairwise", signal.SIGTERM), ("train", signal.SIGUSR1),
             ("restore", signal.SIGUSR1))


class SignalsInEveryStage(unittest.TestCase):
    """Borrows test_accept_stops.py's launcher and signal helpers, not its tests."""
    setUp = stops.StoppedInEachStage.setUp
    accept_until = stops.StoppedInEachStage.accept_until
    signal_all = stops.StoppedInEachStage.signal_all
    cases = 0

    @classmethod
    def tearDownClass(cls):
        print("signal cases:", cls.cases, file=sys.stderr)

    def one_rank(self, sig):
        def send(pids):
            time.sleep(0.3)
            os.kill(pids[-1], sig)
        return send

    def partial_of(self, stage, text):
        self.assertFalse(os.path.exists(self.report), text)
        with open(self.partial) as f:
            partial = json.load(f)
        self.assertEqual(partial["verdict"], "INCOMPLETE", text)
        self.assertEqual(partial["accept"]["partial"]["running"], stage, text)

    @timing
    def test_a_rank_that_crashes_in_each_stage(self):
        for stage, args in STAGES.items():
            with self.subTest(stage=stage):
                self.setUp()
                code, text = self.accept_until(f"accept: stage {stage}",
                                               self.one_rank(signal.SIGSEGV), *args)
                self.assertEqual(code, 128 + signal.SIGSEGV, text)
                self.assertRegex(text, r"trainproof: rank 1 on \S+ \(accept\): SIGSEGV at 0x")
                beats = os.path.join(self.tmp.name, "trainproof-heartbeats")
                with open(os.path.join(beats, "crash-rank1.json")) as f:
                    self.assertEqual(json.load(f)["subcommand"], "accept")
                self.partial_of(stage, text)
                type(self).cases += 1

    @timing
    def test_a_rank_killed_in_the_restore(self):
        for stage in ("restore",):
            with self.subTest(stage=stage):
                self.setUp()
                code, text = self.accept_until(f"accept: stage {stage}",
                                               self.one_rank(signal.SIGKILL), *STAGES[stage])
                self.assertNotIn(code, (0, 1, 4), text)
                self.partial_of(stage, text)
                type(self).cases += 1

    @timing
    def test_sigterm_and_sigusr1_to_mpirun_are_never_pass(self):
        for stage, sig in TO_MPIRUN:
            args = STAGES[stage]
            with self.subTest(stage=stage, signal=sig.name):
                self.setUp()
                code, text = self.accept_until(f"accept: stage {stage}",
                                               self.signal_all(sig), *args, to_launcher=True)
                self.assertNotEqual(code, 0, text)
                written = [p for p in (self.report, self.partial) if os.path.exists(p)]
                self.assertTrue(written, text)
                for path in written:
                    with open(path) as f:
                        self.assertEqual(json.load(f)["verdict"], "INCOMPLETE", text)
                type(self).cases += 1


if __name__ == "__main__":
    main()
