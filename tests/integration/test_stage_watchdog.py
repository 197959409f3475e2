"""A rank that stops in a stage that is not training is named by the heartbeat watchdog, as in
training (docs/drills.md, "Heartbeats"): its MPI waits have no deadline of their own, so the other
ranks wait in a collective until their watchdog fires, writes abort.json naming the stopped rank
alone, and ends the job with exit 3. The test SIGSTOPs one rank from outside once the stage is
under way: in the collective sweep of `trainproof sweep`, and in the pairwise pass of
`trainproof accept` over pretend nodes."""
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import unittest

from harness import BIN, MPIEXEC, SCENARIOS, main

RANKS = 3
TIMEOUT_S = 2.0
STOPPED = 1
# test.split_hosts=2 at 4 ranks: ranks 2 and 3 on the second pretend node.
SECOND_NODE = socket.gethostname() + "-vnode1"


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
            # Stopped between collectives, it never entered the next one; stopped inside one, the
            # ranks it holds back are still in it too; inside the one every rank entered, no rank
            # is behind on the sequence and the record is absent (the liveness names it).
            if "first_unentered" in abort:
                u = abort["first_unentered"]
                self.assertEqual(u["comm"], "world", abort)
                self.assertEqual(u["op"], "allreduce", abort)
                self.assertIn(STOPPED, u["ranks"] + u["inside_previous"], abort)

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
            # Its peer waits in a transfer the stopped rank never entered, unless both were inside
            # the same one when it stopped.
            if "first_unentered" in abort:
                u = abort["first_unentered"]
                self.assertEqual((u["comm"], u["op"], u["ranks"]), ("world/p2p", "sendrecv",
                                                                   [STOPPED]), abort)
            # The partial report written as the stage started stays, naming the stage.
            with open(os.path.join(tmp, "accept.partial.json")) as f:
                self.assertIn("pairwise", json.dumps(json.load(f)))


class HeldCollective(unittest.TestCase):
    """One rank of four, on two pretend nodes, is held back (alive) before the sweep's collective
    7: every rank is alive and at the same row, so only the sequence numbers can say who the job
    waits for (docs/drills.md, "Which collective a hang is in")."""

    def test_the_collective_a_held_rank_never_entered_is_named(self):
        with tempfile.TemporaryDirectory(prefix="trainproof-hold-") as tmp:
            beats = os.path.join(tmp, "beats")
            proc = subprocess.run(
                [MPIEXEC, "-np", "4", "--oversubscribe", BIN, "sweep",
                 "--report", os.path.join(tmp, "sweep.json"), "--sweep.min_bytes=1024",
                 "--sweep.max_bytes=65536", "--sweep.iters=3", "--sweep.warmup=1",
                 "--test.split_hosts=2", "--test.hold_collective=3:7",
                 "--watchdog.timeout_s=1", f"--watchdog.dir={beats}"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
            self.assertEqual(proc.returncode, 3, proc.stdout)
            with open(os.path.join(beats, "abort.json")) as f:
                abort = json.load(f)
        u = abort["first_unentered"]
        self.assertEqual(u["comm"], "world", abort)
        self.assertEqual(u["seq"], 7, abort)
        self.assertEqual(u["op"], "allreduce", abort)
        self.assertEqual(u["bytes"], 1024, abort)
        self.assertEqual(u["ranks"], [3], abort)
        self.assertEqual(u["hosts"], [SECOND_NODE], abort)
        self.assertEqual(u["entered_by"], 3, abort)
        self.assertEqual(abort["missing"], [], abort)  # every rank alive and at the same row
        self.assertIn("world seq 7 (allreduce, 1024 B) was not entered by rank 3 on " +
                      SECOND_NODE, proc.stdout)


if __name__ == "__main__":
    main()
