"""trainproof sweep and accept on a 3-node virtual Slurm cluster (scripts/vcluster.sh): accept
fails on a throttled node (tc tbf, both directions) and passes without the throttle, with the
same options; split groups and rails get their own rows and matrices; a failing job ends with its
verdict. Every run keeps the default flag and fail fractions (docs/sweep.md, "Confirming a
flag"); what the pairwise pass flags, run after run, is test_pairwise_flags.py's."""
import os

from vcluster_harness import WORK, ClusterCase, main, run, vcluster

SRUN_NODES = ["srun", "-N3", "-n3", "--mpi=pmix", "-K1"]
SRUN_TWO_PER_NODE = ["srun", "-N3", "-n6", "--mpi=pmix", "-K1"]
# The pairwise pass at its default bytes and transfers, as docs/sweep.md's record measured it:
# with 2 MiB transfers (1 MiB in a trial), 3 or 6 ranks on this host's 2 cores were twice judged a
# healthy node at 9% to 14% of its control, the transfers then timing the ranks' scheduling rather
# than the link.
PAIRWISE = ["--sweep.mode=pairwise"]
# Rows large enough that a 100 Mbit/s link shows: smaller ones take milliseconds of latency on this
# fabric whatever the link's rate.
ACCEPT_SWEEP = ["--sweep.min_bytes=1048576", "--sweep.max_bytes=2097152", "--sweep.iters=3",
                "--sweep.warmup=1", "--sweep.ops=allreduce"]
SMALL = ["--sweep.min_bytes=1024", "--sweep.max_bytes=16384", "--sweep.iters=3",
         "--sweep.warmup=1", "--sweep.ops=allreduce,sendrecv"]


class FabricCluster(ClusterCase):
    NODES = 3

    def sweep(self, name, launcher, *args):
        report = os.path.join(WORK, f"{name}.json")
        return run([*launcher, self.bin, "sweep", "--report", report, "--log.level=warn",
                    *args], report, timeout=300)

    def flagged(self, run_):
        return [n["host"] for n in run_.report["nodes"] if n["flagged"]]

    def test_a_failing_job_ends_with_its_verdict_when_rank_0_is_last(self):
        # srun -K1 ends the step as soon as one task exits non-zero, and MPI_Finalize does not
        # wait for the other ranks: without leaving together, the ranks that finished first kill
        # rank 0 and the job ends 143 (SIGTERM) instead of its verdict.
        failing = self.sweep("linger", SRUN_NODES, *SMALL, "--test.corrupt_sweep_rank=1",
                             "--test.linger_rank=0", "--test.linger_s=2")
        self.assertEqual(failing.returncode, 1, failing)
        self.assertEqual(failing.report["verdict"], "FAIL")
        self.assertNotIn("Terminated", failing.stderr)

    def accept(self, name):
        report = os.path.join(WORK, f"{name}.json")
        return run([*SRUN_NODES, self.bin, "accept", "--scenario", self.tiny, "--report", report,
                    "--log.level=warn", "--accept.stages=sweep,pairwise,train", *PAIRWISE,
                    *ACCEPT_SWEEP], report, timeout=300)

    def test_accept_fails_on_the_throttled_node_and_compare_names_what_fell(self):
        degraded = vcluster("degrade", "vc-n3", "100mbit", "both")
        self.addCleanup(vcluster, "restore", "vc-n3")
        self.assertEqual(degraded.returncode, 0, degraded.stderr)
        slow = self.accept("accept-throttled")
        self.assertEqual(slow.returncode, 1, slow)
        self.assertEqual(slow.report["verdict"], "FAIL")
        flags = [c for c in slow.report["gate"]["checks"] if c["name"] == "pairwise_flags"][0]
        self.assertEqual(flags["status"], "fail", flags)
        self.assertIn("vc-n3", flags["reason"])
        self.assertIn("measured again at", flags["reason"])
        self.assertIn("train", slow.report)
        # The host list an operator passes to --exclude expands, in Slurm's own hands, to exactly
        # the flagged nodes.
        hostlist = run([self.bin, "report", "nodes", os.path.join(WORK, "accept-throttled.json"),
                        "--format=hostlist"])
        self.assertEqual(hostlist.returncode, 0, hostlist)
        expanded = run(["scontrol", "show", "hostnames", hostlist.stdout.strip()])
        flagged = sorted(n["host"] for n in slow.report["nodes"] if n["flagged"])
        self.assertIn("vc-n3", flagged)
        self.assertEqual(sorted(expanded.stdout.split()), flagged, (hostlist, expanded))
        self.assert_matrix_is_drawn(os.path.join(WORK, "accept-throttled.json"))

        restored = vcluster("restore", "vc-n3")
        self.assertEqual(restored.returncode, 0, restored.stderr)
        control = self.accept("accept-control")
        self.assertEqual(control.returncode, 0, control)
        compare = run([self.bin, "report", "compare", os.path.join(WORK, "accept-control.json"),
                       os.path.join(WORK, "accept-throttled.json")])
        self.assertEqual(compare.returncode, 1, compare)
        fell = [line.split("  ")[0] for line in compare.stdout.splitlines() if "FAIL:" in line]
        self.assertTrue(any(line.startswith("sweep avg busbw") for line in fell), compare.stdout)

    def assert_matrix_is_drawn(self, report):
        """report plot draws the real run's matrix (docs/report.md, "Pictures"), and the PNG
        decodes."""
        import matplotlib.image
        plotted = run([self.bin, "report", "plot", report])
        self.assertEqual(plotted.returncode, 0, plotted)
        matrices = [line for line in plotted.stdout.splitlines()
                    if ".pairwise" in line and line.endswith(".png")]
        self.assertTrue(matrices, plotted.stdout)
        for png in matrices:
            self.assertGreater(matplotlib.image.imread(png).shape[0], 100, png)

    def test_every_rail_gets_its_own_matrix(self):
        both = self.sweep("rails", SRUN_TWO_PER_NODE, *PAIRWISE, "--sweep.pair_ranks=rail")
        self.assertEqual(both.returncode, 0, both)
        rails = both.report["sweep"]["pairwise"]["rails"]
        self.assertEqual([(r["rail"], r["world_ranks"]) for r in rails],
                         [(0, [0, 2, 4]), (1, [1, 3, 5])])
        for r in rails:
            for a in range(3):
                for b in range(3):
                    cell = r["one_way_gbps"][a][b]
                    self.assertEqual(cell is None, a == b, r)

    def test_split_by_node_and_by_rail(self):
        for split, expected in [("node", {"node vc-n1": [0, 1], "node vc-n2": [2, 3],
                                          "node vc-n3": [4, 5]}),
                                ("rail", {"rail 0": [0, 2, 4], "rail 1": [1, 3, 5]})]:
            s = self.sweep(f"split-{split}", SRUN_TWO_PER_NODE, *SMALL, f"--sweep.split={split}")
            self.assertEqual(s.returncode, 0, s)
            groups = {g["name"]: g["world_ranks"] for g in s.report["sweep"]["groups"]}
            self.assertEqual(groups, expected)
            for name in groups:
                rows = [r for r in s.report["sweep"]["results"] if r["group"] == name]
                self.assertEqual(len(rows), 2 * 5 * 2, name)
                self.assertTrue(all(r["wrong"] == 0 for r in rows), rows)
            self.assertIn(s.report["sweep"]["slowest_group"], groups)


if __name__ == "__main__":
    main(SRUN_NODES)
