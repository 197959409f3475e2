"""Bad input is exit 2 with one line naming the culprit, printed once, and nothing runs."""
import os
import socket
import subprocess
import tempfile
import unittest

from harness import BIN, MPIEXEC, TINY, Run, direct, main, mpirun


class CliErrors(unittest.TestCase):
    def expect_usage_error(self, run, *must_name):
        self.assertEqual(run.returncode, 2, run)
        self.assertIsNone(run.report, "a report was written although nothing should have run")
        lines = [l for l in run.stderr.splitlines() if l.startswith("trainproof: error:")]
        self.assertEqual(len(lines), 1, run)  # one line, from one rank
        for name in must_name:
            self.assertIn(name, lines[0])
        self.assertNotIn("terminate called", run.stderr)

    def test_every_exit_2_prints_its_line_though_rank_0_is_the_slowest(self):
        # A launcher ends the whole job as soon as one rank exits with an error. The ranks that
        # found the error first used to exit at once, and rank 0 was killed before it printed:
        # exit 2 without a word. Here rank 0 starts last, on 4 ranks.
        with tempfile.TemporaryDirectory() as tmp:
            slow = os.path.join(tmp, "slow-rank-0")
            with open(slow, "w") as f:
                f.write('#!/bin/sh\n[ "$OMPI_COMM_WORLD_RANK" = 0 ] && sleep 2\n'
                        f'exec {os.path.abspath(BIN)} "$@"\n')
            os.chmod(slow, 0o755)
            for args, named in [(["train", "--scenario", TINY, "--train.steps=30",
                                  "--train.steps=20"], "train.steps"),
                                (["sweep", "--sweep.min_bytes=0", "--sweep.max_bytes=1024"],
                                 "sweep.min_bytes=0"),
                                (["train", "--scenario", TINY, "--model.batch=2"], "model.batch")]:
                proc = subprocess.run([MPIEXEC, "-np", "4", "--oversubscribe", slow, *args,
                                       "--report", os.path.join(tmp, "r.json")],
                                      capture_output=True, text=True, timeout=180)
                self.expect_usage_error(Run(proc.returncode, proc.stdout, proc.stderr, None),
                                        named)

    def test_unknown_option(self):
        self.expect_usage_error(mpirun(2, "--train.stepz=3"), "train.stepz")

    def test_option_names_are_never_guessed_from_a_prefix(self):
        # Boost's default took --train.step for train.steps and --gate.min_p for
        # gate.min_pair_gbps; the command line now reads names as exactly as scenario files.
        self.expect_usage_error(direct("train", "--train.step=5"), "unknown option '--train.step'",
                                "did you mean --train.steps?")
        self.expect_usage_error(direct("train", "--gate.min_p=3"), "unknown option '--gate.min_p'")

    def test_unknown_option_in_scenario(self):
        with tempfile.NamedTemporaryFile("w", suffix=".ini", delete=False) as f:
            f.write("[model]\nwidth = 3\n")
        try:
            self.expect_usage_error(mpirun(2, scenario=f.name), "model.width", f.name)
        finally:
            os.unlink(f.name)

    def test_malformed_value(self):
        self.expect_usage_error(mpirun(2, "--model.hidden=abc"), "model.hidden")

    def test_missing_scenario(self):
        self.expect_usage_error(mpirun(2, scenario="/nonexistent/scenario.ini"),
                                "/nonexistent/scenario.ini")

    def test_non_positive_size(self):
        self.expect_usage_error(mpirun(2, "--model.batch=0"), "model.batch")
        self.expect_usage_error(mpirun(2, "--model.seq=-4"), "model.seq")

    def test_model_too_large_for_memory(self):
        run = mpirun(2, "--model.hidden=100000", "--model.layers=200")
        self.expect_usage_error(run, "too large", "model.hidden=100000")

    def test_checkpoints_that_do_not_fit_in_memory(self):
        # 4 x 1024 x 1024 parameters: the model takes about 58 MB on the host; the host is made to
        # have room for it and half a state more (16 MB), less than the async snapshot needs. A
        # synchronous save on the cpu backend writes from the model's own state and needs nothing.
        layers, hidden, tokens = 4, 1024, 8 * 8 * 1024
        params = layers * hidden * hidden
        model = 4 * (3 * params + tokens * (layers + 7) + hidden * hidden) + 2 * 4 * tokens
        available = int((model + 4 * params) / 0.9)
        shape = ("--model.layers=4", "--model.hidden=1024", "--train.steps=2",
                 "--train.warmup_steps=0", f"--test.host_memory_bytes={available}")
        with tempfile.TemporaryDirectory() as tmp:
            run = mpirun(1, *shape, f"--checkpoint.dir={tmp}/async", "--checkpoint.every=1",
                         "--checkpoint.async=true")
            self.expect_usage_error(run, "checkpoints do not fit in memory",
                                    "checkpoint.async=true", "checkpoint.layout=file-per-rank",
                                    "bytes needed", f"{available} bytes available")
            run = mpirun(1, *shape, f"--checkpoint.dir={tmp}/sync", "--checkpoint.every=1")
            self.assertEqual(run.returncode, 0, run)

    def test_batch_smaller_than_world(self):
        self.expect_usage_error(mpirun(4, "--model.batch=2"), "model.batch=2")

    def test_fault_that_can_never_fire(self):
        self.expect_usage_error(mpirun(2, "--fault", "slow:rank=7,ms=5"), "slow:rank=7,ms=5")
        self.expect_usage_error(mpirun(2, "--fault", "slow:rank=0,ms=5,step=99"), "step 99")

    def test_nccl_without_cuda_compute_is_bad_input(self):
        self.expect_usage_error(mpirun(1, "--compute.backend=cpu", "--comm.backend=nccl"),
                                "comm.backend=nccl")

    def test_gpu_backend_requested_without_a_gpu_is_exit_3(self):
        # This suite runs where no GPU is usable; GPU hosts run scripts/device-check.sh instead.
        for option in ("--compute.backend=cuda", "--comm.backend=nccl"):
            run = mpirun(2, option)
            self.assertEqual(run.returncode, 3, run)
            self.assertIsNone(run.report)
            lines = [l for l in run.stderr.splitlines() if l.startswith("trainproof: error:")]
            self.assertEqual(len(lines), 1, run)  # one clear line, from one rank
            self.assertIn(option[2:], lines[0])
            self.assertIn("no usable GPU on host " + socket.gethostname(), lines[0])

    def test_auto_falls_back_to_cpu_and_mpi_with_a_note(self):
        run = mpirun(1)
        self.assertEqual(run.returncode, 0, run)
        backends = run.report["context"]["backends"]
        self.assertEqual((backends["compute"], backends["comm"]), ("cpu", "mpi"))
        self.assertTrue(any("auto chose cpu" in n for n in backends["notes"]), backends)

    def test_report_directory_missing(self):
        # Checked on rank 0 only, yet every rank must stop (not hang in the next collective).
        run = mpirun(2, "--report", "/nonexistent/dir/r.json", timeout=60)
        self.assertEqual(run.returncode, 2, run)
        self.assertIn("/nonexistent/dir", run.stderr)

    def test_report_naming_a_directory_is_refused_before_step_1(self):
        with tempfile.TemporaryDirectory() as tmp:
            target = os.path.join(tmp, "out")
            os.mkdir(target)
            self.expect_usage_error(mpirun(2, "--report", target, timeout=60),
                                    "--report", "is a folder")
            self.assertEqual(os.listdir(tmp), ["out"])  # no out.tmp left behind
            run = direct("drill", "--launcher", "mpirun -np 2", "--checkpoint.dir", tmp,
                         "--checkpoint.every=2", "--report", target)
            self.assertEqual(run.returncode, 2, run)
            self.assertIn("is a folder", run.stderr)
            self.assertEqual(os.listdir(tmp), ["out"])  # no drill folder: nothing ran

    def test_watchdog_dir_unwritable(self):
        self.expect_usage_error(mpirun(2, "--watchdog.dir=/proc/trainproof", timeout=60),
                                "watchdog.dir")

    def test_subcommand_errors(self):
        self.assertEqual(direct().returncode, 2)
        run = direct("trian")
        self.assertEqual(run.returncode, 2)
        self.assertIn("'trian'", run.stderr)

    def test_help_lists_every_option_with_defaults(self):
        for args in (["--help-all"], ["train", "--help"]):
            run = direct(*args)
            self.assertEqual(run.returncode, 0, run)
            for option in ("--model.layers", "--train.steps", "--comm.bucket_mb", "--comm.overlap",
                           "--compute.backend", "--comm.backend", "--fault", "--report",
                           "--scenario", "slow:rank=R,ms=M"):
                self.assertIn(option, run.stdout)
            self.assertIn("(=50)", run.stdout)

    def test_a_subcommands_help_lists_its_own_options_and_help_all_every_one(self):
        sweep, every = direct("sweep", "--help"), direct("sweep", "--help-all")
        self.assertEqual((sweep.returncode, every.returncode), (0, 0), sweep)
        own = [line for line in sweep.stdout.splitlines() if line.startswith("  --")]
        self.assertFalse([line for line in own if line.startswith(
            ("  --checkpoint.", "  --drill.", "  --cost.", "  --model.", "  --data."))], own)
        self.assertIn("  --sweep.ops", sweep.stdout)
        self.assertLess(len(sweep.stdout.splitlines()), len(every.stdout.splitlines()) / 2)
        for option in ("--checkpoint.dir", "--drill.max_restarts", "--cost.node_hour",
                       "--test.split_hosts", "--sweep.ops"):
            self.assertIn(option, every.stdout)
        top = direct("--help")
        self.assertIn("trainproof SUBCOMMAND --help lists", top.stdout)
        self.assertNotIn("--checkpoint.dir", top.stdout)


if __name__ == "__main__":
    main()
