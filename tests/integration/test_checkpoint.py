"""Checkpoints: bit-exact resume, the commit protocol, verified restore with fallback, retention."""
import json
import os
import shutil
import signal
import subprocess
import threading
import time

from harness import (CheckpointCase, BIN, MPIEXEC, TINY, edit_manifest, flip_byte, main, mpirun,
                     timing, truncate_tail)

EVERY = CheckpointCase.EVERY


class Checkpoint(CheckpointCase):

    def stopped_after(self, ranks, steps, *args):
        """A run that ends after `steps` (as a killed job would leave its checkpoints)."""
        run = self.train(ranks, f"--train.steps={steps}", *args)
        self.assertEqual(run.returncode, 0, run)

    def test_resume_is_bit_exact_at_1_2_and_4_ranks(self):
        for ranks in (1, 2, 4):
            for extra in ((), ("--train.optimizer=adam",)):
                shutil.rmtree(self.dir, ignore_errors=True)
                self.stopped_after(ranks, 10, *extra)  # step 10's work is lost; step-8 holds
                run = self.train(ranks, "--resume", "auto", *extra)
                self.assertEqual(run.returncode, 0, run)
                train = run.report["train"]
                self.assertEqual(train["restored_step"], 8, (ranks, extra))
                self.assertEqual(train["steps_run"], 4)
                self.assertEqual(train["steps_completed"], 12)
                self.assertEqual(train["final_digest"], self.uninterrupted(ranks, *extra),
                                 (ranks, extra))
                self.assertGreater(run.report["checkpoint"]["restore"]["bytes"], 0)

    def test_cold_read_restores_the_same_state(self):
        self.stopped_after(2, 10)
        run = self.train(2, "--resume", "auto", "--checkpoint.cold_read=true")
        self.assertEqual(run.returncode, 0, run)
        self.assertTrue(run.report["checkpoint"]["cold_read"])
        self.assertEqual(run.report["train"]["restored_step"], 8)
        self.assertEqual(run.report["train"]["final_digest"], self.uninterrupted(2))

    def test_skipping_part_of_the_state_breaks_equality(self):
        # Negative control: the comparison above can fail.
        self.stopped_after(2, 10)
        run = self.train(2, "--resume", "auto", "--test.skip_restore=moment1")
        self.assertEqual(run.returncode, 0, run)
        self.assertEqual(run.report["train"]["restored_step"], 8)
        self.assertNotEqual(run.report["train"]["final_digest"], self.uninterrupted(2))

    def test_resume_none_starts_fresh_and_the_report_says_so(self):
        self.stopped_after(1, 10)
        run = self.train(1, "--resume", "none")
        self.assertEqual(run.returncode, 0, run)
        self.assertIsNone(run.report["train"]["restored_step"])
        self.assertEqual(run.report["train"]["steps_run"], 12)
        self.assertEqual(sorted(os.listdir(self.dir)),
                         ["step-00000008", "step-00000012", "trainproof.lock"])

    def test_requeued_job_with_nothing_left_to_run_is_none_not_pass(self):
        self.assertEqual(self.train(2).returncode, 0)
        run = self.train(2, "--resume", "auto")
        self.assertEqual(run.returncode, 0, run)  # a requeued batch job must not look failed
        self.assertEqual(run.report["verdict"], "NONE")
        self.assertEqual(run.report["train"]["steps_run"], 0)
        self.assertIn("training already complete at step 12", run.stderr)

    def test_partial_and_manifestless_folders_are_ignored(self):
        self.stopped_after(2, 10)
        # A crash mid-write leaves .partial; a folder that lost its manifest is not committed.
        shutil.copytree(self.folder(8), os.path.join(self.dir, "step-00000012.partial"))
        shutil.copytree(self.folder(8), self.folder(11))
        os.remove(os.path.join(self.folder(11), "MANIFEST.json"))
        run = self.train(2, "--resume", "auto")
        self.assertEqual(run.returncode, 0, run)
        self.assertEqual(run.report["train"]["restored_step"], 8)
        self.assertEqual(run.report["train"]["final_digest"], self.uninterrupted(2))

    def damage_newest_and_resume(self, damage):
        self.stopped_after(2, 10)
        damage(self.folder(8))
        run = self.train(2, "--resume", "auto")
        self.assertEqual(run.returncode, 0, run)
        train = run.report["train"]
        self.assertEqual(train["restored_step"], 4, "must fall back to exactly the previous one")
        self.assertEqual(train["final_digest"], self.uninterrupted(2))
        self.assertTrue(os.path.isdir(self.folder(8) + ".corrupt"))
        self.assertEqual(len(run.report["checkpoint"]["restore"]["rejected"]), 1)
        return run.report["checkpoint"]["restore"]["rejected"][0]

    def test_flipped_byte_falls_back(self):
        def flip(folder):
            flip_byte(os.path.join(folder, "rank-00001.h5"))
        self.assertIn("checksum", self.damage_newest_and_resume(flip))

    def test_truncated_file_falls_back(self):
        def truncate(folder):
            truncate_tail(os.path.join(folder, "rank-00000.h5"))
        self.assertIn("bytes", self.damage_newest_and_resume(truncate))

    def test_missing_file_falls_back(self):
        reason = self.damage_newest_and_resume(
            lambda folder: os.remove(os.path.join(folder, "rank-00001.h5")))
        self.assertIn("rank-00001.h5", reason)

    def test_manifest_with_wrong_checksum_falls_back(self):
        def lie(folder):
            path = os.path.join(folder, "MANIFEST.json")
            manifest = json.load(open(path))
            manifest["files"][0]["xxh3_128"] = "0" * 32
            json.dump(manifest, open(path, "w"))
        self.assertIn("checksum", self.damage_newest_and_resume(lie))

    @timing
    def test_fifo_in_place_of_a_rank_file_falls_back_without_blocking(self):
        # Rank 1 alone meets the FIFO. A rank blocked opening it would hang the job: after 30 s
        # a guard opens the FIFO's write end (which releases the open) and the test fails.
        fifo = os.path.join(self.folder(8), "rank-00001.h5")
        released = threading.Event()
        done = threading.Event()

        def guard():
            if done.wait(30):
                return
            while not done.wait(0.05):
                try:
                    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                    released.set()
                except OSError:
                    pass

        def make_fifo(folder):
            os.remove(fifo)
            os.mkfifo(fifo)
            threading.Thread(target=guard, daemon=True).start()
        try:
            reason = self.damage_newest_and_resume(make_fifo)
        finally:
            done.set()
        self.assertFalse(released.is_set(), "the restore blocked opening a FIFO")
        self.assertIn("rank-00001.h5 is not a regular file (a FIFO)", reason)

    def test_manifest_field_of_the_wrong_type_falls_back(self):
        def mistype(folder):
            edit_manifest(folder, lambda m: m.update(world_size="2"))
        self.assertIn('MANIFEST.json: world_size must be an integer from 1 to 2147483647, not "2"',
                      self.damage_newest_and_resume(mistype))

    def test_manifest_name_leaving_the_folder_falls_back(self):
        # The name leads to a valid copy of the file outside the folder: never opened.
        def escape(folder):
            outside = os.path.join(self.tmp, "x")
            os.makedirs(outside)
            shutil.copy(os.path.join(folder, "rank-00001.h5"), outside)
            edit_manifest(folder, lambda m: m["files"][1].update(name="../../x/rank-00001.h5"))
        self.assertIn("files[1].name must be a plain file name",
                      self.damage_newest_and_resume(escape))

    def test_folder_holding_another_steps_checkpoint_falls_back(self):
        def swap(folder):
            shutil.rmtree(folder)
            shutil.copytree(self.folder(4), folder)
        self.assertIn("MANIFEST.json says step 4; the folder is step-00000008",
                      self.damage_newest_and_resume(swap))

    def test_retention_keeps_exactly_n(self):
        run = mpirun(1, f"--checkpoint.dir={self.dir}", "--checkpoint.every=2",
                     "--checkpoint.keep=3")
        self.assertEqual(run.returncode, 0, run)
        self.assertEqual(sorted(os.listdir(self.dir)),
                         ["step-00000008", "step-00000010", "step-00000012", "trainproof.lock"])
        self.assertEqual(len(run.report["checkpoint"]["saves"]), 6)

    def test_checkpoint_is_readable_hdf5(self):
        import h5py  # installed by scripts/setup.sh (python3-h5py)
        self.stopped_after(1, 4)
        with h5py.File(os.path.join(self.folder(4), "rank-00000.h5"), "r") as f:
            self.assertEqual(int(f.attrs["step"]), 4)
            self.assertEqual(f["params"].shape, (3 * 32 * 32,))
            self.assertEqual(f["moment1"].shape, (3 * 32 * 32,))

    def test_world_size_mismatch_is_exit_2_where_no_resize_is_allowed(self):
        # --resume auto restores at another size (test_resize.py); require, or allow_resize=false,
        # keeps the world size an error.
        self.stopped_after(2, 4)
        for args in (("--resume", "require"),
                     ("--resume", "auto", "--checkpoint.allow_resize=false")):
            run = self.train(1, *args)
            self.assertEqual(run.returncode, 2, (args, run))
            self.assertIn("written by 2 ranks; this run has 1", run.stderr)

    def test_scenario_mismatch_is_exit_2_but_run_length_may_change(self):
        self.stopped_after(1, 4)
        run = self.train(1, "--resume", "auto", "--model.hidden=48")
        self.assertEqual(run.returncode, 2, run)
        self.assertIn("scenario hash", run.stderr)
        longer = mpirun(1, f"--checkpoint.dir={self.dir}", "--checkpoint.every=8", "--resume",
                        "auto", "--train.steps=16")
        self.assertEqual(longer.returncode, 0, longer)
        self.assertEqual(longer.report["train"]["restored_step"], 4)

    def test_unwritable_folder_is_exit_2_before_any_step(self):
        run = mpirun(2, "--checkpoint.dir=/proc/trainproof-ckpt", f"--checkpoint.every={EVERY}")
        self.assertEqual(run.returncode, 2, run)
        self.assertIn("checkpoint.dir", run.stderr)
        self.assertIsNone(run.report)

    def test_node_local_folder_warns_when_the_run_spans_nodes(self):
        fs = mpirun(2, f"--checkpoint.dir={self.dir}", f"--checkpoint.every={EVERY}")
        self.assertEqual(fs.returncode, 0, fs)
        facts = fs.report["context"]["checkpoint_filesystem"]
        if not facts["node_local"]:
            self.skipTest(f"the test folder is on {facts['type']}, not a node-local filesystem")
        self.assertFalse(any("node-local" in w for w in fs.report["context"]["warnings"]))
        # The same folder, with the two ranks on two (pretend) nodes: warned before step 1.
        run = mpirun(2, f"--checkpoint.dir={self.dir}", f"--checkpoint.every={EVERY}",
                     "--test.split_hosts=2")
        self.assertEqual(run.returncode, 0, run)
        warnings = run.report["context"]["warnings"]
        self.assertTrue(any("node-local filesystem" in w and "2 nodes" in w for w in warnings),
                        warnings)

    def test_a_folder_some_host_does_not_share_is_exit_2_naming_the_host(self):
        run = mpirun(2, f"--checkpoint.dir={self.dir}", f"--checkpoint.every={EVERY}",
                     "--test.split_hosts=2", "--test.unshared_checkpoint_rank=1")
        self.assertEqual(run.returncode, 2, run)
        self.assertIn("on host", run.stderr)
        self.assertIn("is not the folder rank 0 sees", run.stderr)
        self.assertIsNone(run.report)

    def test_resume_require_without_a_checkpoint_is_exit_2(self):
        run = self.train(1, "--resume", "require")
        self.assertEqual(run.returncode, 2, run)
        self.assertIn("no valid checkpoint", run.stderr)

    @timing
    def test_preemption_signal_checkpoints_and_stops_every_rank(self):
        self.preempt_and_resume()

    @timing
    def test_preemption_with_async_shared_file_checkpoints(self):
        self.preempt_and_resume("--checkpoint.async=true", "--checkpoint.layout=shared-file")

    def preempt_and_resume(self, *layout):
        # SIGUSR1 to one rank only (as Slurm's --signal would reach a task): every rank must stop
        # at the same step, with that step's checkpoint committed, and exit 4.
        report = os.path.join(self.tmp, "preempted.json")
        args = [f"--checkpoint.dir={self.dir}", f"--checkpoint.every={EVERY}", *layout,
                "--train.steps=60", "--fault", "slow:rank=0,ms=20"]
        proc = subprocess.Popen(
            [MPIEXEC, "-np", "2", "--oversubscribe", BIN, "train", "--scenario", TINY,
             "--report", report, "--log.level=warn", *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.time() + 60
        while not os.path.isdir(self.folder(EVERY)) and time.time() < deadline:
            time.sleep(0.05)
        ranks = subprocess.run(["pgrep", "-f", f"^{BIN} train .*{self.dir}"],
                               capture_output=True, text=True).stdout.split()
        self.assertEqual(len(ranks), 2, ranks)
        os.kill(int(ranks[-1]), signal.SIGUSR1)
        output, _ = proc.communicate(timeout=120)
        self.assertEqual(proc.returncode, 4, output)
        with open(report) as f:
            train = json.load(f)["train"]
        stopped = train["preempted"]["after_step"]
        self.assertEqual(train["preempted"]["signal"], "SIGUSR1")
        self.assertLess(stopped, 60)
        self.assertEqual(train["steps_completed"], stopped)
        self.assertTrue(os.path.isdir(self.folder(stopped)), os.listdir(self.dir))

        resumed = mpirun(2, *args[:-2], "--resume", "auto")
        self.assertEqual(resumed.returncode, 0, resumed)
        self.assertEqual(resumed.report["train"]["restored_step"], stopped)
        self.assertEqual(resumed.report["train"]["final_digest"],
                         self.uninterrupted(2, "--train.steps=60"))


if __name__ == "__main__":
    main()
