"""trainproof drill: every fault kind recovers to the reference digest, with the restored step and
RPO each fault implies; a hang is named from heartbeats; the broken-restore control FAILs."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from harness import BIN, MPIEXEC, TINY, assert_readable, main, mpirun, timing

EVERY = 4  # tiny.ini runs 12 steps: checkpoints at 4, 8, 12


def launcher(ranks):
    return f"{MPIEXEC} -np {ranks} --oversubscribe"


class Drill(unittest.TestCase):
    reference = None

    @classmethod
    def setUpClass(cls):
        run = mpirun(2)
        assert run.returncode == 0, run
        cls.reference = run.report["train"]["final_digest"]

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="trainproof-drill-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def drill(self, *args, ranks=2, reference=True, expect=0):
        report = os.path.join(self.tmp, "drill.json")
        cmd = [BIN, "drill", "--launcher", launcher(ranks), "--scenario", TINY,
               f"--checkpoint.dir={self.tmp}/ckpt", f"--checkpoint.every={EVERY}",
               "--log.level=warn", "--report", report, *args]
        if reference:
            cmd.append(f"--drill.reference_digest={self.reference}")
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
        self.assertEqual(proc.returncode, expect, proc.stdout + proc.stderr)
        self.output = proc.stdout + proc.stderr
        # The drill summary is held to docs/report.md, "Numbers in text", as every summary is.
        assert_readable(proc.stdout, "drill summary")
        if not os.path.exists(report):
            return None
        with open(report) as f:
            return json.load(f)

    def one_failure(self, report, kind, restored, rpo):
        drill = report["drill"]
        self.assertEqual(drill["verdict"], "PASS", drill["problems"])
        self.assertTrue(drill["digest_match"])
        (failure,) = drill["failures"]
        self.assertEqual(failure["kind"], kind)
        self.assertTrue(failure["detected"])
        self.assertEqual(failure["restored_step"], restored)
        self.assertEqual(failure["rpo_steps"], rpo)
        self.assertEqual(drill["restarts"], 1)
        self.assertGreater(failure["rto_s"], 0)
        self.assertGreaterEqual(failure["detected_after_s"], 0)
        return failure

    def test_kill_in_every_step_phase(self):
        # Killed in step 10: step 9 is the last complete, step 8 the newest checkpoint.
        for phase in ("data", "compute", "comm", "optimizer"):
            report = self.drill("--fault", f"kill:rank=1,step=10,phase={phase}")
            failure = self.one_failure(report, "kill", restored=8, rpo=1)
            self.assertEqual((failure["rank"], failure["step"], failure["phase"]), (1, 10, phase))

    def test_kill_in_the_checkpoint_write_and_commit(self):
        # Step 8 completed, but its checkpoint never committed: the relaunch restores step 4.
        for rank, phase in ((1, "ckpt-write"), (1, "ckpt-commit"), (0, "ckpt-commit")):
            report = self.drill("--fault", f"kill:rank={rank},step=8,phase={phase}")
            failure = self.one_failure(report, "kill", restored=4, rpo=4)
            self.assertEqual(failure["phase"], phase)

    def test_checkpoint_kills_with_async_shared_file_and_sharded_layouts_at_4_ranks(self):
        for layout in (("--checkpoint.layout=shared-file", "--checkpoint.async=true"),
                       ("--checkpoint.shard_optimizer=true",)):
            report = self.drill("--fault", "kill:rank=3,step=8,phase=ckpt-commit", *layout,
                                ranks=4)
            drill = report["drill"]
            self.assertEqual(drill["verdict"], "PASS", drill["problems"])
            self.assertEqual(drill["failures"][0]["restored_step"], 4)

    @timing
    def test_hang_is_detected_and_named_from_heartbeats(self):
        report = self.drill("--fault", "hang:rank=1,step=6", "--watchdog.timeout_s=2")
        failure = self.one_failure(report, "hang", restored=4, rpo=1)
        self.assertEqual([m["rank"] for m in failure["named_by_watchdog"]], [1])
        self.assertEqual(failure["rank"], 1)
        self.assertIsNotNone(failure["host"])
        self.assertLess(failure["detected_after_s"], 60)

    @timing
    def test_hang_nothing_detects_is_a_failed_drill(self):
        # Negative control of detection: a watchdog far slower than the drill's own timeout
        # leaves the drill to end the launch, which must count as NOT detected, and FAIL.
        report = self.drill("--fault", "hang:rank=1,step=6", "--watchdog.timeout_s=300",
                            "--drill.run_timeout_s=6", expect=1)
        drill = report["drill"]
        self.assertEqual(drill["verdict"], "FAIL")
        (failure,) = drill["failures"]
        self.assertTrue(failure["timed_out"])
        self.assertFalse(failure["detected"])
        self.assertIn("hang was not detected", drill["problems"])

    @timing
    def test_slow_rank_is_flagged_and_no_other(self):
        report = self.drill("--fault", "slow:rank=1,ms=25", ranks=3)
        self.assertEqual(report["drill"]["verdict"], "PASS")
        self.assertEqual(report["drill"]["failures"], [])
        self.assertEqual([r["rank"] for r in report["ranks"] if r["flagged"]], [1])

    def test_corrupted_newest_checkpoint_falls_back(self):
        # Killed in step 10; step 8 is then damaged, so the relaunch must restore step 4.
        report = self.drill("--fault", "kill:rank=1,step=10", "--fault",
                            "corrupt:shard=0,mode=flip")
        self.one_failure(report, "kill", restored=4, rpo=5)
        (damage,) = report["drill"]["corruptions"]
        self.assertTrue(damage["file"].endswith("step-00000008/rank-00000.h5"))
        self.assertTrue(os.path.isdir(damage["folder"] + ".corrupt"))

    @timing
    def test_external_kill(self):
        # Steps slowed to 40 ms, so the supervisor's 20 ms polling sees the chosen step begin.
        report = self.drill("--drill.external_kill=true", "--drill.seed=5", "--fault",
                            "slow:rank=0,ms=40")
        drill = report["drill"]
        self.assertEqual(drill["verdict"], "PASS", drill["problems"])
        (failure,) = drill["failures"]
        self.assertEqual(failure["kind"], "external-kill")
        self.assertEqual(failure["restored_step"], failure["expected_restored_step"])

    def test_random_faults_replay_from_five_seeds(self):
        for seed in (1, 2, 3, 4, 5):
            report = self.drill("--fault", f"random:seed={seed}")
            drill = report["drill"]
            self.assertEqual(drill["verdict"], "PASS", (seed, drill["problems"]))
            (failure,) = drill["failures"]
            self.assertIn(f"random:seed={seed} -> kill:", failure["fault"])
            self.assertEqual(failure["restored_step"], failure["expected_restored_step"])
            self.assertEqual(failure["rpo_steps"],
                             failure["last_completed_step"] - (failure["restored_step"] or 0))

    def test_broken_restore_makes_the_drill_fail(self):
        # Negative control: the restore skips the momentum, so the digests must differ.
        report = self.drill("--fault", "kill:rank=1,step=10", "--test.skip_restore=moment1",
                            expect=1)
        self.assertEqual(report["drill"]["verdict"], "FAIL")
        self.assertFalse(report["drill"]["digest_match"])
        self.assertEqual(report["verdict"], "FAIL")

    def test_reference_run_by_the_drill_itself(self):
        report = self.drill("--fault", "kill:rank=0,step=6", reference=False)
        self.assertEqual(report["drill"]["reference_digest"], self.reference)
        self.one_failure(report, "kill", restored=4, rpo=1)

    def test_bad_input_is_never_relaunched(self):
        report = self.drill("--fault", "kill:rank=5,step=3", expect=2)
        self.assertEqual([r["name"] for r in report["drill"]["runs"]], ["run-0"])
        self.assertIn("rejected its input", " ".join(report["drill"]["problems"]))

    @timing
    def test_drill_matrix_runs_every_fault_kind_to_one_verdict(self):
        report = os.path.join(self.tmp, "matrix.json")
        matrix = os.path.join(os.path.dirname(TINY), "drill-matrix.ini")
        proc = subprocess.run([BIN, "drill", "--launcher", launcher(2), "--scenario", matrix,
                               f"--checkpoint.dir={self.tmp}/ckpt", "--log.level=warn",
                               "--report", report], capture_output=True, text=True, timeout=240)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        with open(report) as f:
            result = json.load(f)
        drill = result["drill"]
        self.assertEqual(drill["verdict"], "PASS", drill["problems"])
        kinds = sorted({f["kind"] for f in drill["failures"]})
        self.assertEqual(kinds, ["external-kill", "hang", "kill"])
        self.assertEqual(len(drill["failures"]), 5)  # 3 kills (one drawn), a hang, an external kill
        self.assertEqual(len(drill["corruptions"]), 1)
        for failure in drill["failures"]:
            self.assertEqual(failure["restored_step"], failure["expected_restored_step"], failure)
        self.assertEqual(drill["failures"][0]["restored_step"], 5)  # step 10 was corrupted
        # Two ranks: no straggler can be named (docs/report.md, "Numbers in text"), but the
        # slowed rank is the one with the lower score.
        self.assertEqual([r["rank"] for r in result["ranks"] if r["flagged"]], [])
        self.assertEqual(min(result["ranks"], key=lambda r: r["straggler_score"])["rank"], 1)
        self.assertIn("drill verdict: PASS", proc.stdout)

    def test_usage_errors(self):
        for args, says in (((), "--launcher"),
                           (("--launcher", "mpirun"), "checkpoint.dir"),
                           (("--launcher", "mpirun", "--checkpoint.dir=x", "--checkpoint.every=2",
                             "--fault", "corrupt:shard=0"), "needs a failure")):
            proc = subprocess.run([BIN, "drill", "--scenario", TINY, *args],
                                  capture_output=True, text=True, timeout=30)
            self.assertEqual(proc.returncode, 2, proc.stderr)
            self.assertIn(says, proc.stderr)


if __name__ == "__main__":
    main()
