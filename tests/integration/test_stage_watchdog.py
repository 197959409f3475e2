"""A rank that stops in a stage that is not training is named by the heartbeat watchdog, as in
training (docs/drills.md, "Heartbeats"): its MPI waits have no deadline of their own, so the other
ranks wait in a collective until their watchdog fires, writes abort.json naming the stopped rank
alone, and ends the job with exit 3. The test SIGSTOPs one rank from outside once the stage is
under way: in the collective sweep of `trainproof sweep`, and in the pairwise pass of
`trainproof accept` over pretend nodes."""
import json
import os
import signal
import subprocess
import tempfile
import time
import unittest

from harness import BIN, MPIEXEC, SCENARIOS, main

RANKS = 3
TIMEOUT_S = 2.0
STOPPED = 1


def rank_pid(beats, rank):
    try:
        with open(os.path.join(beats, f"pid-rank-{rank}")) as f:
            return int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return None


def wait_for(predicate, seconds):
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    return None


class StageWatchdog(unittest.TestCase):
    def stop_in_stage(self, words, beats, started_line):
        """Runs `words` under mpirun, SIGSTOPs rank STOPPED once `started_line` is printed and
        its heartbeat is there; returns (exit code, output, abort.json)."""
        launcher = subprocess.Popen(
            [MPIEXEC, "-np", str(RANKS), "--oversubscribe", BIN, *words,
             f"--watchdog.timeout_s={TIMEOUT_S}", f"--watchdog.dir={beats}", "--log.level=info"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True)
        output = []
        stopped_pid = None
        try:
            for line in launcher.stdout:
                output.append(line)
                if started_line in line and stopped_pid is None:
                    stopped_pid = wait_for(lambda: rank_pid(beats, STOPPED), 30)
                    self.assertIsNotNone(stopped_pid, "no heartbeat of the rank to stop")
                    time.sleep(0.5)  # inside the stage's first rows or rounds
                    os.kill(stopped_pid, signal.SIGSTOP)
            code = launcher.wait(timeout=60)
        finally:
            launcher.stdout.close()
            if launcher.poll() is None:
                os.killpg(launcher.pid, signal.SIGKILL)
                launcher.wait()
            if stopped_pid:
                try:
                    os.kill(stopped_pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        text = "".join(output)
        self.assertIsNotNone(stopped_pid, text)
        abort_path = os.path.join(beats, "abort.json")
        self.assertTrue(os.path.exists(abort_path), text)
        with open(abort_path) as f:
            return code, text, json.load(f)

    def assert_stopped_rank_named(self, code, text, abort, phases):
        self.assertEqual(code, 3, text)
        self.assertEqual([m["rank"] for m in abort["missing"]], [STOPPED], abort)
        self.assertEqual(abort["missing"][0]["why"], "stopped", abort)
        self.assertIn(abort["detected_by"]["phase"], phases, abort)
        self.assertIn("trainproof: watchdog on rank", text)

    def test_a_rank_stopped_in_the_sweep_is_named(self):
        with tempfile.TemporaryDirectory(prefix="trainproof-stage-watch-") as tmp:
            beats = os.path.join(tmp, "beats")
            code, text, abort = self.stop_in_stage(
                ["sweep", "--report", os.path.join(tmp, "sweep.json"), "--sweep.iters=50",
                 "--sweep.max_bytes=16777216"], beats, "sweep: 3 ranks")
            self.assert_stopped_rank_named(code, text, abort, ("start", "sweep"))

    def test_a_rank_stopped_in_the_pairwise_pass_of_accept_is_named(self):
        with tempfile.TemporaryDirectory(prefix="trainproof-stage-watch-") as tmp:
            beats = os.path.join(tmp, "beats")
            code, text, abort = self.stop_in_stage(
                ["accept", "--scenario", os.path.join(SCENARIOS, "accept-smoke.ini"),
                 "--report", os.path.join(tmp, "accept.json"),
                 f"--checkpoint.dir={os.path.join(tmp, 'ckpt')}", "--accept.stages=pairwise",
                 f"--test.split_hosts={RANKS}", "--sweep.pair_iters=40"],
                beats, "accept: stage pairwise")
            self.assert_stopped_rank_named(code, text, abort, ("start", "pairwise"))
            # The partial report written as the stage started stays, naming the stage.
            with open(os.path.join(tmp, "accept.partial.json")) as f:
                self.assertIn("pairwise", json.dumps(json.load(f)))


if __name__ == "__main__":
    main()
