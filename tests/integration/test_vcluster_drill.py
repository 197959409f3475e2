"""The batch templates operators copy (slurm/drill.sbatch, slurm/sweep.sbatch), run as shipped on
a 3-node virtual Slurm cluster with only their variables changed: a node lost inside one
allocation, with the drill relaunching srun steps on a spare node or on the surviving nodes and
ending on the reference digest; and the sweep with the pairwise matrix, one task per rail of every
node, its task counts and cores taken from the allocation (submitted, as an operator does on CPU
nodes, with no task count at all, it must start rather than wait for cores no node has).

Exits 77 (ctest: skipped, with the reason printed) where this host cannot run the cluster. The
cluster is always stopped (vcluster_harness.py)."""
import glob
import json
import os
import time

from harness import TINY, mpirun
from vcluster_harness import SCRIPTS, WORK, ClusterCase, main, run

TEMPLATES = os.path.abspath(os.path.join(SCRIPTS, "..", "slurm"))


def wait_to_start(job, seconds):
    """The job's state once it left PENDING, or "PENDING (reason)" if it is still waiting."""
    deadline = time.monotonic() + seconds
    state = ""
    while time.monotonic() < deadline:
        listed = run(["squeue", "-h", "-j", job, "-o", "%T %r"])
        state = listed.stdout.strip()
        if not state.startswith("PENDING"):
            return state or "finished"
        time.sleep(1)
    return state


def wait_for_job(job, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        listed = run(["squeue", "-h", "-j", job, "-o", "%T"])
        if listed.returncode == 0 and not listed.stdout.strip():
            return True
        if listed.returncode != 0 and "Invalid job id" in listed.stderr:
            return True
        time.sleep(1)
    return False


class Templates(ClusterCase):
    NODES = 3
    reference = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # The digest is the scenario's at any world size and checkpoint interval: one rank here
        # gives the drills their reference (REFERENCE_DIGEST), so they skip their own run.
        whole = mpirun(1)
        assert whole.returncode == 0, whole
        cls.reference = whole.report["train"]["final_digest"]

    def scenario(self, name, every):
        """tiny.ini with checkpoints every `every` steps: the drill restores from them."""
        path = os.path.join(WORK, f"{name}.ini")
        with open(TINY) as src, open(path, "w") as dst:
            dst.write(src.read() + f"\n[checkpoint]\nevery = {every}\n")
        return path

    def submit(self, template, variables, seconds=300,
               size=("--ntasks-per-node=2", "--cpus-per-task=1")):
        """sbatch the template on all three nodes (`size`: the tasks asked beyond the nodes, two
        ranks each by default), on CPUs; returns the job's log."""
        exported = ",".join(f"{k}={v}" for k, v in variables.items())
        submitted = run(["env", "SBATCH_GPUS_PER_NODE=0", "sbatch", "--parsable", "-N3", *size,
                         "--time=10", f"--export=ALL,TRAINPROOF={self.bin},{exported}",
                         os.path.join(TEMPLATES, template)])
        self.assertEqual(submitted.returncode, 0, submitted)
        job = submitted.stdout.strip().split(";")[0]
        self.addCleanup(run, ["scancel", job])
        # Three idle nodes start any job they can hold within seconds: one still pending after a
        # minute asks for what no node has.
        started = wait_to_start(job, 60)
        self.assertFalse(started.startswith("PENDING"), f"job {job} still {started} after 60 s")
        finished = wait_for_job(job, seconds)
        log_name = {"drill.sbatch": "trainproof-drill", "sweep.sbatch": "trainproof-sweep"}
        with open(os.path.join(WORK, f"{log_name[template]}-{job}.out")) as f:
            log = f.read()
        self.assertTrue(finished, log[-4000:])
        return log

    def drill_report(self, out, log):
        path = os.path.join(out, "drill.json")
        self.assertTrue(os.path.exists(path), log[-4000:])
        with open(path) as f:
            return json.load(f)

    @staticmethod
    def runs_output(out):
        """The end of each run's output and every crash record the runs left, so a run that
        failed without an injected fault names its cause in the failure message (the vcluster's
        folder is removed with the cluster)."""
        parts = []
        for path in sorted(glob.glob(os.path.join(out, "checkpoints", "drill-*", "run-*", "*"))):
            if path.endswith("output.log") or os.path.basename(path).startswith("crash-rank"):
                with open(path, errors="replace") as f:
                    parts.append(f"--- {path}\n{f.read()[-2000:]}")
        for path in sorted(glob.glob(os.path.join(out, "checkpoints", "drill-*", "run-*",
                                                  "heartbeats", "crash-rank*.json"))):
            with open(path, errors="replace") as f:
                parts.append(f"--- {path}\n{f.read()[-2000:]}")
        return "\n".join(parts)

    def test_drill_template_relaunches_on_the_spare_node(self):
        # Two of the three nodes run the job; vc-n2 dies while checkpoint 8 is written, and the
        # relaunch takes the spare, vc-n3, at the same size.
        out = os.path.join(WORK, "drill-spare")
        log = self.submit("drill.sbatch", {
            "SCENARIO": self.scenario("spare", 4), "OUT": out, "COMPUTE_BACKEND": "cpu",
            "COMM_BACKEND": "mpi", "LOSE_AT": "step=8,phase=ckpt-write",
            "REFERENCE_DIGEST": self.reference})
        report = self.drill_report(out, log)
        drill = report["drill"]
        self.assertEqual(drill["verdict"], "PASS",
                         (drill["problems"], log[-3000:], self.runs_output(out)))
        self.assertTrue(drill["digest_match"])
        self.assertEqual(drill["reference_digest"], self.reference)
        (failure,) = drill["failures"]
        self.assertEqual((failure["kind"], failure["host"], failure["lost_ranks"]),
                         ("node", "vc-n2", [2, 3]))
        loss = failure["node_loss"]
        self.assertEqual((loss["action"], loss["world_size_before"], loss["world_size_after"],
                          loss["excluded"]), ("spare", 4, 4, ["vc-n2"]))
        self.assertEqual(failure["restored_step"], 4)
        self.assertEqual([r["host"] for r in report["ranks"]], ["vc-n1", "vc-n1", "vc-n3", "vc-n3"])
        self.assertIn("spare 4 -> 4 ranks; restored 4", log)

    def test_drill_template_shrinks_after_the_drill_kills_a_node_from_outside(self):
        # Every node runs the job, a checkpoint every step: the drill SIGKILLs one node's ranks
        # from outside, mid-checkpoint, and the run continues on the two nodes left, 4 ranks.
        out = os.path.join(WORK, "drill-shrink")
        log = self.submit("drill.sbatch", {
            "SCENARIO": self.scenario("shrink", 1), "OUT": out, "COMPUTE_BACKEND": "cpu",
            "COMM_BACKEND": "mpi", "ON_NODE_LOSS": "shrink", "LOSE_BY": "outside",
            "REFERENCE_DIGEST": self.reference})
        report = self.drill_report(out, log)
        drill = report["drill"]
        self.assertEqual(drill["verdict"], "PASS",
                         (drill["problems"], log[-3000:], self.runs_output(out)))
        self.assertTrue(drill["digest_match"])
        (failure,) = drill["failures"]
        self.assertEqual(failure["kind"], "external-node")
        self.assertEqual(len(failure["lost_ranks"]), 2)
        loss = failure["node_loss"]
        self.assertEqual((loss["action"], loss["world_size_before"], loss["world_size_after"]),
                         ("shrink", 6, 4))
        hosts = {r["host"] for r in report["ranks"]}
        self.assertEqual(len(hosts), 2)
        self.assertNotIn(failure["host"], hosts)
        self.assertEqual(report["checkpoint"]["restore"]["written_world_size"], 6)

    def sweep_template(self, name, variables):
        """The sweep template as an operator submits it to CPU nodes: the nodes, no task count."""
        out = os.path.join(WORK, name)
        log = self.submit("sweep.sbatch", {
            "OUT": out, "COMM_BACKEND": "mpi",
            "SWEEP_OPTIONS": "--sweep.ops=allreduce --sweep.max_bytes=65536 --sweep.iters=3 "
                             "--sweep.warmup=1",
            "PAIRWISE_OPTIONS": "--sweep.pair_bytes=1048576 --sweep.pair_iters=2", **variables},
            size=())
        reports = []
        for name in ("sweep.json", "pairwise.json"):
            path = os.path.join(out, name)
            self.assertTrue(os.path.exists(path), log[-3000:])
            with open(path) as f:
                reports.append(json.load(f))
        self.assertIn("trainproof-sweep: sweep exit", log)
        # The healthy test bed's noise may flag a pair (docs/sweep.md); the rows must be right.
        self.assertNotEqual(reports[0]["verdict"], "FAIL", log[-3000:])
        return log, reports[0], reports[1]

    def test_sweep_template_takes_its_tasks_from_the_allocation(self):
        # No GPU and no InfiniBand device on these nodes: one rail, and the cores of a node (2)
        # for its one task.
        log, sweep, pairwise = self.sweep_template("sweep", {})
        self.assertIn("3 node(s) x 1 rail(s), 2 CPU(s) per task", log)
        self.assertEqual(sweep["context"]["world_size"], 3, log[-3000:])
        self.assertEqual(pairwise["context"]["world_size"], 3, log[-3000:])
        self.assertEqual(pairwise["context"]["hosts"], ["vc-n1", "vc-n2", "vc-n3"])

    def test_sweep_template_measures_every_rail(self):
        # Two rails on each 2-core node: two tasks of one core, and a matrix per rail.
        log, sweep, pairwise = self.sweep_template("sweep-rails", {"RAILS": "2"})
        self.assertIn("3 node(s) x 2 rail(s), 1 CPU(s) per task", log)
        self.assertEqual(sweep["context"]["world_size"], 6, log[-3000:])
        rails = pairwise["sweep"]["pairwise"]["rails"]
        self.assertEqual([(r["rail"], r["world_ranks"], r["hosts"]) for r in rails],
                         [(0, [0, 2, 4], ["vc-n1", "vc-n2", "vc-n3"]),
                          (1, [1, 3, 5], ["vc-n1", "vc-n2", "vc-n3"])], log[-3000:])

if __name__ == "__main__":
    main(["sbatch", "slurm/drill.sbatch", "slurm/sweep.sbatch"])
