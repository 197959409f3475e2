"""trainproof accept checks every input that a selected stage will need before its first stage
starts (docs/acceptance.md, "Checked before the first stage"): each bad input below, which a run
used to meet only at its stage (after the preflight, the sweep and the pairwise pass), is exit 2
before the line that starts the first stage, with no report and no checkpoint folder made."""
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import TINY, accept_command, mpirun  # noqa: E402

FIRST_STAGE = "accept: stage "


class CheckedBeforeTheFirstStage(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="trainproof-accept-inputs-")
        self.addCleanup(self.tmp.cleanup)
        self.report = os.path.join(self.tmp.name, "accept.json")
        self.ckpt = os.path.join(self.tmp.name, "ckpt")

    def accept(self, *args, checkpoint_dir=None):
        cmd = accept_command(self.report, checkpoint_dir or self.ckpt, *args)
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    def assert_refused(self, must_name, *args, checkpoint_dir=None, folder_made=False):
        run = self.accept(*args, checkpoint_dir=checkpoint_dir)
        text = run.stdout + run.stderr
        self.assertEqual(run.returncode, 2, text)
        self.assertIn(must_name, text)
        self.assertNotIn(FIRST_STAGE, text, "a stage started before the input was refused")
        self.assertEqual(text.count("trainproof: error:"), 1, text)
        self.assertFalse(os.path.exists(self.report), "a refused run left a report")
        if not folder_made:
            self.assertFalse(os.path.exists(self.ckpt), "a refused run made its checkpoint folder")

    def test_the_control_starts_its_first_stage(self):
        run = self.accept("--accept.stages=preflight")
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertIn(FIRST_STAGE + "preflight", run.stdout + run.stderr)

    def test_a_run_that_does_not_train_leaves_the_checkpoint_folder_alone(self):
        run = self.accept("--accept.stages=sweep", "--resume=require", "--sweep.max_bytes=4096")
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertFalse(os.path.exists(self.ckpt), "a sweep made the checkpoint folder")

    def test_a_dataset_folder_that_is_empty_or_missing(self):
        empty = os.path.join(self.tmp.name, "empty")
        os.mkdir(empty)
        self.assert_refused(empty, f"--data.dir={empty}")
        self.assert_refused("/nonexistent/trainproof-data", "--data.dir=/nonexistent/trainproof-data")

    def test_a_global_batch_smaller_than_the_world(self):
        self.assert_refused("is smaller than the world size 2", "--model.batch=1")

    def test_faults_that_name_no_rank_or_step_of_the_run(self):
        self.assert_refused("rank=5", "--fault=kill:rank=5,step=3")
        self.assert_refused("step=999", "--fault=kill:rank=0,step=999")
        self.assert_refused("only trainproof drill", "--fault=corrupt:shard=0")

    def test_resume_require_without_a_checkpoint(self):
        os.mkdir(self.ckpt)
        self.assert_refused("--resume require", "--resume=require", folder_made=True)

    def test_a_heartbeat_folder_that_cannot_be_made(self):
        self.assert_refused("/proc/nope", "--watchdog.dir=/proc/nope")

    def test_a_checkpoint_folder_that_is_a_file_or_under_proc(self):
        a_file = os.path.join(self.tmp.name, "a-file")
        open(a_file, "w").close()
        self.assert_refused(a_file, checkpoint_dir=a_file)
        self.assert_refused("/proc/trainproof-ckpt", checkpoint_dir="/proc/trainproof-ckpt")

    def test_a_folder_holding_another_scenarios_checkpoints(self):
        other = mpirun(2, f"--checkpoint.dir={self.ckpt}", "--checkpoint.every=4",
                       "--train.steps=4", scenario=TINY)
        self.assertEqual(other.returncode, 0, other)
        self.assert_refused("holds checkpoints of another scenario", folder_made=True)

    def test_a_folder_another_job_holds(self):
        os.mkdir(self.ckpt)
        with open(os.path.join(self.ckpt, "trainproof.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            lock.write("other-node 4242\n")
            lock.flush()
            self.assert_refused("in use by another job: host other-node, pid 4242",
                                "--checkpoint.lock_wait_s=1", folder_made=True)

    def test_a_16_bit_model_on_the_cpu(self):
        self.assert_refused("model.dtype=bf16", "--model.dtype=bf16", "--compute.backend=cpu")

    def test_a_16_bit_sweep_over_mpi(self):
        self.assert_refused("sweep.dtype=bfloat16 with comm.backend=mpi", "--sweep.dtype=bf16",
                            "--comm.backend=mpi")


class OpenFiles(unittest.TestCase):
    """The preflight's open_files check (docs/acceptance.md, "Open files"): a hard limit below what
    the pairwise pass needs at this world size fails it, naming the need and every host; a soft
    limit below it is raised to it and the run passes the check."""

    def run_under(self, nofile):
        with tempfile.TemporaryDirectory(prefix="trainproof-open-files-") as tmp:
            report = os.path.join(tmp, "accept.json")
            cmd = ["prlimit", f"--nofile={nofile}", *accept_command(
                report, os.path.join(tmp, "ckpt"), "--accept.stages=preflight,pairwise",
                "--test.split_hosts=3", ranks=3)]
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            with open(report) as f:
                checks = json.load(f)["gate"]["checks"]
        return run, next(c for c in checks if c["name"] == "open_files")

    def test_a_hard_limit_below_the_need_fails_naming_it(self):
        # 256 + 2 per peer at 3 ranks: 260.
        run, check = self.run_under("258:258")
        self.assertEqual(check["status"], "fail", check)
        self.assertEqual((check["value"], check["threshold"]), (258, 260), check)
        self.assertIn("below the 260 open files (the pairwise pass at 3 ranks)", check["reason"])
        for node in range(3):
            self.assertIn(f"-vnode{node} (soft 258, hard 258)", check["reason"])
        self.assertEqual(run.returncode, 1, run.stdout + run.stderr)

    def test_a_soft_limit_below_the_need_is_raised(self):
        run, check = self.run_under("258:4096")
        self.assertEqual(check["status"], "pass", check)
        self.assertIn("raised on 3 rank(s)", check["reason"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
