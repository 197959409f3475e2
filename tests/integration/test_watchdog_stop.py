"""A rank SIGSTOPped in any phase (--fault stop) is named by the watchdog, alone: never an innocent
rank blocked behind it, never nobody. The job ends within a bounded time and the launcher ends the
stopped process too.

CI runs one case per phase at 4 ranks. TRAINPROOF_WATCHDOG_SOAK=N runs N cases per phase instead,
the stopped rank going round the four, and prints a tally (docs/drills.md records one)."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from harness import BIN, MPIEXEC, TINY, main

RANKS = 4
TIMEOUT_S = 2.0
CHECKPOINT_EVERY = 4
# A rank waiting in a checkpoint is given ten times the timeout (train/watchdog.cpp).
CHECKPOINT_PHASES = ("ckpt-write", "ckpt-commit")
STEP_PHASES = ("data", "compute", "comm", "optimizer")
# The stopped rank of each CI case: rank 0 is the culprit once, and innocent in the others.
CI_CASES = {"data": 3, "compute": 0, "comm": 2, "optimizer": 1, "ckpt-write": 2,
            "ckpt-commit": 1}
# From the fault firing to the launcher's exit: the watchdog's limit, the second look at the
# heartbeats (at most 5 s) and the launcher's teardown, with room for a loaded machine.
SLACK_S = 15.0


def limit_s(phase):
    return TIMEOUT_S * (10 if phase in CHECKPOINT_PHASES else 1)


def process_state(pid):
    """The state letter of /proc/PID/stat if PID is a trainproof process, else None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    name = stat[stat.index("(") + 1:stat.rindex(")")]
    return stat[stat.rindex(")") + 2] if name == "trainproof" else None


def rank_pids(beats):
    pids = {}
    for name in os.listdir(beats) if os.path.isdir(beats) else []:
        match = re.fullmatch(r"pid-rank-(\d+)", name)
        if match:
            with open(os.path.join(beats, name)) as f:
                pids[int(match.group(1))] = int(f.read().split()[1])
    return pids


class Outcome:
    def __init__(self, phase, rank, returncode, stderr, abort, fired, ended_unix, gone):
        self.phase, self.rank, self.returncode, self.stderr = phase, rank, returncode, stderr
        self.abort, self.fired, self.ended_unix, self.gone = abort, fired, ended_unix, gone

    def named_in_abort_json(self):
        return [m["rank"] for m in (self.abort or {}).get("missing", [])]

    def named_on_stderr(self):
        """The ranks each watchdog's line names, one list per line that fired."""
        lines = [l for l in self.stderr.splitlines() if "trainproof: watchdog on rank" in l]
        return [sorted(int(r) for r in re.findall(r"(?:arrive: |, )rank (\d+)", l)) for l in lines]

    def seconds_to_end(self):
        return self.ended_unix - self.fired["unix_time"] if self.fired else None

    def problems(self):
        found = []
        if self.returncode != 3:
            found.append(f"exit {self.returncode}, not 3")
        if self.fired is None:
            found.append("the stop never fired")
        elif self.seconds_to_end() > limit_s(self.phase) + SLACK_S:
            found.append(f"ended {self.seconds_to_end():.1f} s after the stop")
        if self.named_in_abort_json() != [self.rank]:
            found.append(f"abort.json names {self.named_in_abort_json()}")
        lines = self.named_on_stderr()
        if not lines or any(named != [self.rank] for named in lines):
            found.append(f"the watchdogs named {lines}")
        if not self.gone:
            found.append("the stopped process outlived the job")
        return found

    def __repr__(self):
        return (f"stop rank {self.rank} in {self.phase}: {'; '.join(self.problems()) or 'ok'}\n"
                f"--- abort.json\n{json.dumps(self.abort)}\n--- stderr\n{self.stderr}")


def end_all(launcher, beats):
    """Kills the launcher's group and every rank still alive, stopped ones included."""
    if launcher.poll() is None:
        os.killpg(launcher.pid, signal.SIGKILL)
    for pid in rank_pids(beats).values():
        if process_state(pid) not in (None, "Z"):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    launcher.wait()


def stop_one_rank(phase, rank, step=5):
    """Runs 4 ranks with `rank` SIGSTOPped on entering `phase` of `step`; returns the Outcome."""
    tmp = tempfile.mkdtemp(prefix="trainproof-stop-")
    beats = os.path.join(tmp, "beats")
    args = [f"--watchdog.timeout_s={TIMEOUT_S}", f"--watchdog.dir={beats}",
            f"--fault=stop:rank={rank},step={step},phase={phase}"]
    if phase in CHECKPOINT_PHASES:
        step = CHECKPOINT_EVERY
        args[-1] = f"--fault=stop:rank={rank},step={step},phase={phase}"
        args += [f"--checkpoint.dir={os.path.join(tmp, 'ckpt')}",
                 f"--checkpoint.every={CHECKPOINT_EVERY}"]
    cmd = [MPIEXEC, "-np", str(RANKS), "--oversubscribe", "--map-by", "core", "--bind-to",
           "core:overload-allowed", BIN, "train", "--scenario", TINY, "--log.level=warn",
           "--report", os.path.join(tmp, "report.json"), *args]
    launcher = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
    try:
        try:
            _, stderr = launcher.communicate(timeout=limit_s(phase) + SLACK_S + 60)
        except subprocess.TimeoutExpired:
            end_all(launcher, beats)
            _, stderr = launcher.communicate()
            stderr += "\n(the job did not end: killed by the test)"
        ended = time.time()
        stopped_pid = rank_pids(beats).get(rank)
        deadline = time.monotonic() + 5  # the launcher reaps its children as it exits
        while (stopped_pid and process_state(stopped_pid) not in (None, "Z")
               and time.monotonic() < deadline):
            time.sleep(0.1)
        gone = not stopped_pid or process_state(stopped_pid) in (None, "Z")
        abort, fired = None, None
        if os.path.exists(os.path.join(beats, "abort.json")):
            with open(os.path.join(beats, "abort.json")) as f:
                abort = json.load(f)
        if os.path.exists(os.path.join(beats, f"fault-rank-{rank}.json")):
            with open(os.path.join(beats, f"fault-rank-{rank}.json")) as f:
                fired = json.load(f)
        return Outcome(phase, rank, launcher.returncode, stderr, abort, fired, ended, gone)
    finally:
        end_all(launcher, beats)
        shutil.rmtree(tmp, ignore_errors=True)


class WatchdogStop(unittest.TestCase):
    def check(self, phase):
        outcome = stop_one_rank(phase, CI_CASES[phase])
        self.assertEqual(outcome.problems(), [], outcome)
        self.assertGreaterEqual(outcome.seconds_to_end(), TIMEOUT_S, outcome)

    def test_stop_in_data(self):
        self.check("data")

    def test_stop_in_compute_rank_0(self):
        self.check("compute")

    def test_stop_in_comm_where_every_heartbeat_looks_alike(self):
        self.check("comm")

    def test_stop_in_optimizer(self):
        self.check("optimizer")

    def test_stop_while_writing_a_checkpoint(self):
        self.check("ckpt-write")

    def test_stop_before_the_checkpoint_commits(self):
        self.check("ckpt-commit")


def soak(runs):
    """`runs` cases per phase, the stopped rank going round; prints a tally, exit 1 on any miss."""
    print(f"soak: {runs} runs per phase, {RANKS} ranks, watchdog.timeout_s={TIMEOUT_S}",
          file=sys.stderr)
    missed = 0
    for phase in STEP_PHASES + CHECKPOINT_PHASES:
        correct, slowest = 0, 0.0
        for run in range(runs):
            outcome = stop_one_rank(phase, run % RANKS)
            if outcome.problems():
                print(outcome, file=sys.stderr)
            else:
                correct += 1
            slowest = max(slowest, outcome.seconds_to_end() or 0.0)
        missed += runs - correct
        print(f"  {phase:<12} {correct}/{runs} named exactly the stopped rank; "
              f"job ended at most {slowest:.1f} s after the stop", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    if os.environ.get("TRAINPROOF_WATCHDOG_SOAK"):
        sys.exit(soak(int(os.environ["TRAINPROOF_WATCHDOG_SOAK"])))
    main()
