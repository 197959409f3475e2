"""A lost node in the drill (docs/drills.md, "Losing a node"): every rank of one host dies at
once, and the drill relaunches as drill.on_node_loss says: shrink continues on the surviving
nodes at the smaller world size, wait relaunches at the same size. Either way the run ends on the
reference digest, because a restore at another world size keeps the checkpoint's global batch.
Nodes are pretend hosts (test.split_hosts) on this machine; the virtual cluster's test
(test_vcluster_drill.py) loses real ones under srun."""
import json
import os
import shutil
import socket
import subprocess
import tempfile
import unittest

from harness import BIN, MPIEXEC, TINY, main, mpirun

EVERY = 4  # tiny.ini runs 12 steps: checkpoints at 4, 8, 12
LAUNCHER = f"{MPIEXEC} -np {{ranks}} --oversubscribe"
# test.split_hosts=2 at 4 ranks: ranks 0,1 on <host>-vnode0, ranks 2,3 on <host>-vnode1.
SECOND = socket.gethostname() + "-vnode1"


class NodeLoss(unittest.TestCase):
    reference = None

    @classmethod
    def setUpClass(cls):
        run = mpirun(4)
        assert run.returncode == 0, run
        cls.reference = run.report["train"]["final_digest"]

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="trainproof-node-loss-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def drill(self, *args, reference=True, expect=0):
        report = os.path.join(self.tmp, "drill.json")
        cmd = [BIN, "drill", "--launcher", LAUNCHER, "--drill.ranks=4", "--scenario", TINY,
               "--test.split_hosts=2", f"--checkpoint.dir={self.tmp}/ckpt",
               f"--checkpoint.every={EVERY}", "--log.level=warn", "--report", report, *args]
        if reference:
            cmd.append(f"--drill.reference_digest={self.reference}")
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
        self.output = proc.stdout + proc.stderr
        self.assertEqual(proc.returncode, expect, self.output)
        if not os.path.exists(report):
            return None
        with open(report) as f:
            return json.load(f)

    def lost_node(self, report, kind, action, after, restored, host=SECOND):
        drill = report["drill"]
        self.assertEqual(drill["verdict"], "PASS", drill["problems"])
        self.assertTrue(drill["digest_match"])
        self.assertIsNone(drill["proof_not_applicable"])
        (failure,) = drill["failures"]
        self.assertEqual(failure["kind"], kind)
        self.assertEqual(failure["host"], host)
        self.assertEqual(failure["lost_ranks"], [2, 3] if host == SECOND else [0, 1])
        self.assertTrue(failure["detected"])
        loss = failure["node_loss"]
        self.assertEqual((loss["action"], loss["world_size_before"], loss["world_size_after"]),
                         (action, 4, after))
        self.assertEqual(failure["restored_step"], restored)
        self.assertEqual(failure["restored_step"], failure["expected_restored_step"])
        self.assertGreater(failure["rto_s"], 0)
        self.assertEqual(report["context"]["world_size"], after)
        return failure

    def test_shrink_continues_on_the_surviving_node_to_the_reference_digest(self):
        # Lost in the middle of writing checkpoint 8: it never commits, so 4 is restored, by 2 ranks.
        # mpirun cannot leave a host out, and pretend hosts are dealt out again at 2 ranks: the
        # exclusion itself is checked under srun (test_vcluster_drill.py).
        report = self.drill("--fault", f"node:host={SECOND},step=8,phase=ckpt-write")
        failure = self.lost_node(report, "node", "shrink", after=2, restored=4)
        self.assertEqual(failure["rpo_steps"], 4)
        self.assertEqual(failure["node_loss"]["excluded"], [SECOND])
        self.assertEqual(report["checkpoint"]["restore"]["written_world_size"], 4)
        with open(os.path.join(report["drill"]["folder"], "run-1", "command.txt")) as f:
            self.assertIn(f"{MPIEXEC} -np 2 --oversubscribe", f.read())
        self.assertIn(f"node         host {SECOND} (2 ranks), step 8 ckpt-write: detected",
                      self.output)
        self.assertIn("shrink 4 -> 2 ranks; restored 4", self.output)

    def test_damage_to_one_replica_and_faults_beyond_the_smaller_world(self):
        # Checkpoint 8's rank-1 replica is damaged before the relaunch; at 2 ranks any one valid
        # replica restores it, so 8 (not 4) is expected. The kill aimed at rank 3 can never fire
        # at 2 ranks: the drill drops it and says so, instead of a relaunch refusing it.
        report = self.drill("--fault", f"node:host={SECOND},step=10,phase=compute", "--fault",
                            "corrupt:rank=1,mode=flip", "--fault", "kill:rank=3,step=11")
        self.lost_node(report, "node", "shrink", after=2, restored=8)
        (damaged,) = report["checkpoint"]["restore"]["damaged_replicas"]
        self.assertIn("step-00000008/rank-00001.h5", damaged)
        self.assertIn("drill: kill:rank=3,step=11 is dropped: the relaunch has 2 ranks",
                      self.output)

    def test_wait_relaunches_at_the_same_size(self):
        report = self.drill("--fault", f"node:host={SECOND},step=10,phase=comm",
                            "--drill.on_node_loss=wait")
        self.lost_node(report, "node", "wait", after=4, restored=8)

    def test_the_drill_kills_a_node_from_outside(self):
        # Steps slowed to 40 ms, so the supervisor's 20 ms polling sees the chosen step begin.
        report = self.drill("--drill.external_kill=node", "--drill.seed=2", "--fault",
                            "slow:rank=0,ms=40")
        (failure,) = report["drill"]["failures"]
        self.lost_node(report, "external-node", "shrink", after=2,
                       restored=failure["expected_restored_step"], host=failure["host"])

    def test_random_draws_a_node_when_asked(self):
        report = self.drill("--fault", "random:seed=4,kinds=node")
        drill = report["drill"]
        self.assertEqual(drill["verdict"], "PASS", drill["problems"])
        (failure,) = drill["failures"]
        self.assertIn("random:seed=4,kinds=node -> node:host=", failure["fault"])
        self.assertEqual(failure["node_loss"]["world_size_after"], 2)

    def test_a_per_rank_batch_started_over_at_another_size_is_not_a_bit_exact_proof(self):
        # Lost before the first checkpoint: the relaunch starts over at 2 ranks, and a per-rank
        # batch then makes a global batch of 4, not 8. The drill says the proof does not apply.
        report = self.drill("--model.batch_per_rank=2", "--fault",
                            f"node:host={SECOND},step=2,phase=compute", reference=False)
        drill = report["drill"]
        self.assertEqual(drill["verdict"], "WARN", drill["problems"])
        self.assertFalse(drill["digest_match"])
        self.assertIn("the global batch followed the world size: 8 samples, then 4",
                      drill["proof_not_applicable"])
        self.assertIn("the bit-exact proof does not apply", self.output)
        checks = {c["name"]: c["status"] for c in report["gate"]["checks"]}
        self.assertEqual(checks["drill"], "warn")

    def test_a_launcher_that_cannot_shrink_is_refused_before_anything_runs(self):
        report = os.path.join(self.tmp, "refused.json")
        proc = subprocess.run(
            [BIN, "drill", "--launcher", f"{MPIEXEC} -np 4", "--scenario", TINY,
             f"--checkpoint.dir={self.tmp}/ckpt", f"--checkpoint.every={EVERY}", "--fault",
             f"node:host={SECOND},step=8", "--report", report],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        self.assertIn("drill.on_node_loss=shrink", proc.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "ckpt")))
        # A host the job does not run on can never fire: the run says so (exit 2).
        run = mpirun(2, "--fault", "node:host=no-such-host,step=3")
        self.assertEqual(run.returncode, 2, run)
        self.assertIn("'no-such-host' runs none of this job's ranks", run.stderr)


if __name__ == "__main__":
    main()
