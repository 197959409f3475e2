"""One job per checkpoint folder: a second job is exit 2 naming the holder's host and pid, a
killed holder releases the folder, and a requeued job waits for the job it replaces; another
scenario's checkpoints are not written over without --checkpoint.overwrite=true; and what earlier
runs left behind is removed at start, and nothing else."""
import json
import os
import signal
import socket

from background import Launch
from harness import CheckpointCase, main, mpirun

EVERY = CheckpointCase.EVERY
# Long enough to still hold the folder while the tests start a second job beside it.
LONG = ("--train.steps=2000", "--fault", "slow:rank=0,ms=20")


def ancestors(pid):
    """The pids above `pid` in the process tree."""
    found = []
    while pid > 1:
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
        found.append(pid)
    return found


def rank_0_of(launcher_pid):
    """The pid of rank 0 among the processes under `launcher_pid` (Open MPI names each rank in
    its environment)."""
    for name in os.listdir("/proc"):
        try:
            if not name.isdigit() or launcher_pid not in ancestors(int(name)):
                continue
            with open(f"/proc/{name}/environ", "rb") as f:
                if b"OMPI_COMM_WORLD_RANK=0\0" in f.read():
                    return int(name)
        except OSError:  # a process that ended meanwhile
            continue
    raise AssertionError(f"no rank 0 under pid {launcher_pid}")


def scenario_hash_of(folder):
    with open(os.path.join(folder, "MANIFEST.json")) as f:
        return json.load(f)["scenario_hash"]


class CheckpointFolder(CheckpointCase):

    def beats(self, name):
        path = os.path.join(self.tmp, name)
        os.makedirs(path)
        return path

    def holder(self):
        """A long run that holds the folder, once its preflight is done; and its rank 0's pid."""
        first = Launch(2, f"--checkpoint.dir={self.dir}", f"--checkpoint.every={EVERY}", *LONG,
                       beats=self.beats("first"))
        self.addCleanup(first.finish, 0)  # ends it if a test failed midway
        first.wait_for_progress()
        return first, rank_0_of(first.proc.pid)

    def test_a_second_job_is_exit_2_naming_the_holder_and_a_killed_holder_releases_it(self):
        first, rank0 = self.holder()
        second = Launch(2, f"--checkpoint.dir={self.dir}", f"--checkpoint.every={EVERY}",
                        "--checkpoint.lock_wait_s=1", beats=self.beats("second")).finish(60)
        self.assertIsNotNone(second, "the second job hung")
        self.assertEqual(second.returncode, 2, second)
        self.assertIn(f"is in use by another job: host {socket.gethostname()}, pid {rank0}",
                      second.stderr)
        self.assertIn("checkpoint.lock_wait_s=1", second.stderr)
        self.assertIsNone(first.proc.poll(), "the second job stopped the first")

        os.kill(rank0, signal.SIGKILL)
        self.assertIsNotNone(first.finish(60), "the first job outlived its rank 0")
        third = mpirun(2, f"--checkpoint.dir={self.dir}", f"--checkpoint.every={EVERY}",
                       "--checkpoint.lock_wait_s=1")
        self.assertEqual(third.returncode, 0, third)

    def test_a_job_waits_for_the_lock_of_the_job_it_replaces(self):
        first, rank0 = self.holder()
        second = Launch(2, f"--checkpoint.dir={self.dir}", f"--checkpoint.every={EVERY}",
                        "--checkpoint.lock_wait_s=60", beats=self.beats("second"))
        # Waiting is what the second job says it does: the holder is killed only once it says so,
        # however long the second job's start-up takes.
        self.assertTrue(second.wait_for_stderr("waiting up to 60 s", timeout=120),
                        "the second job never said it waits for the lock")
        self.assertIsNone(second.proc.poll(), "the second job did not wait for the lock")
        os.kill(rank0, signal.SIGKILL)
        outcome = second.finish(120)
        self.assertIsNotNone(outcome, "the second job hung")
        self.assertEqual(outcome.returncode, 0, outcome)
        self.assertIn(f"is in use by another job (host {socket.gethostname()}, pid {rank0}); "
                      "waiting up to 60 s", outcome.stderr)
        first.finish(60)

    def test_resume_none_over_another_scenarios_checkpoints_needs_overwrite(self):
        old = self.train(1, "--train.steps=8")
        self.assertEqual(old.returncode, 0, old)
        old_hash = scenario_hash_of(self.folder(8))
        other = ("--model.hidden=48",)
        new_hash = mpirun(1, "--train.steps=4", *other).report["context"]["scenario_hash"]
        self.assertNotEqual(old_hash, new_hash)

        refused = self.train(1, "--resume", "none", *other)
        self.assertEqual(refused.returncode, 2, refused)
        self.assertIn(f"scenario hash {old_hash}", refused.stderr)
        self.assertIn(f"this run's scenario hash is {new_hash}", refused.stderr)
        self.assertIn("--checkpoint.overwrite=true", refused.stderr)
        self.assertEqual(scenario_hash_of(self.folder(8)), old_hash, "the folder was touched")
        self.assertEqual(scenario_hash_of(self.folder(4)), old_hash)

        replaced = self.train(1, "--resume", "none", "--checkpoint.overwrite=true", *other)
        self.assertEqual(replaced.returncode, 0, replaced)
        steps = sorted(n for n in os.listdir(self.dir) if n.startswith("step-"))
        self.assertEqual(steps, ["step-00000008", "step-00000012"])
        for name in steps:
            self.assertEqual(scenario_hash_of(os.path.join(self.dir, name)), new_hash)
        warnings = replaced.report["context"]["warnings"]
        self.assertTrue(any("deleted 2 checkpoint(s) of scenario hash " + old_hash in w
                            for w in warnings), warnings)

    def test_what_earlier_runs_left_behind_is_removed_and_nothing_else(self):
        os.makedirs(self.dir)
        leftovers = ["step-00000100.partial", "step-00000002.deleting"]
        probes = [".preflight-rank-0", ".preflight-rank-1"]
        others = ["notes.txt", "step-7.partial", "mine.deleting", "step-00000100.partial.keep"]
        for name in leftovers:
            os.makedirs(os.path.join(self.dir, name))
            with open(os.path.join(self.dir, name, "rank-00000.h5"), "w") as f:
                f.write("half a checkpoint")
        for name in probes + others:
            with open(os.path.join(self.dir, name), "w") as f:
                f.write("x")
        os.makedirs(os.path.join(self.dir, "step-00000003.corrupt"))
        run = self.train(2)
        self.assertEqual(run.returncode, 0, run)
        self.assertEqual(sorted(os.listdir(self.dir)),
                         sorted(others + ["step-00000003.corrupt", "step-00000008",
                                          "step-00000012", "trainproof.lock"]))


if __name__ == "__main__":
    main()
