"""The pairwise pass's promise on the 3-node virtual Slurm cluster, at trainproof's DEFAULT options
(no flag or fail fraction, byte count or iteration count is set): a healthy fabric flags nothing,
and one node throttled with tc tbf is flagged alone; at 300 Mbit/s (a few percent of its control)
it is a FAIL, exit 1, in every run, however noisy the measurement (sweep.fail_floor). Each case runs 3 times, alone on the host
(RUN_SERIAL), because the promise is that the verdict reproduces; docs/sweep.md ("How often a flag
reproduces") records 20 runs of each case made with scripts/pairwise-record.sh.

Assertions are about what is flagged and how many bytes moved, never about seconds: the
300 Mbit/s case shows its time bound by every transfer of the throttled node moving fewer bytes
than sweep.pair_bytes."""
import os

from vcluster_harness import WORK, ClusterCase, main, run, vcluster

SRUN_NODES = ["srun", "-N3", "-n3", "--mpi=pmix", "-K1"]
RUNS = 3
PAIR_BYTES = 64 << 20  # the default of sweep.pair_bytes, which every run here keeps


class PairwiseFlags(ClusterCase):
    NODES = 3

    def sweep(self, name):
        report = os.path.join(WORK, f"{name}.json")
        return run([*SRUN_NODES, self.bin, "sweep", "--sweep.mode=pairwise", "--report", report,
                    "--log.level=warn"], report, timeout=300)

    def throttle(self, rate):
        degraded = vcluster("degrade", "vc-n3", rate, "both")
        self.addCleanup(vcluster, "restore", "vc-n3")
        self.assertEqual(degraded.returncode, 0, degraded.stderr)

    def flags(self, run_):
        """(flagged nodes, confirmed link flags) of a finished run."""
        self.assertIsNotNone(run_.report, run_)
        nodes = [n["host"] for n in run_.report["nodes"] if n["flagged"]]
        links = [c for rail in run_.report["sweep"]["pairwise"]["rails"]
                 for c in rail["confirmations"]
                 if c["kind"] == "link" and c["outcome"] != "transient"]
        return nodes, links

    def test_a_healthy_fabric_flags_nothing(self):
        for i in range(RUNS):
            healthy = self.sweep(f"healthy-{i}")
            self.assertEqual(healthy.returncode, 0, healthy)
            self.assertEqual(self.flags(healthy), ([], []), healthy.stdout)
            self.assertEqual(healthy.report["sweep"]["pairwise"]["wrong"], 0)
            checks = {c["name"]: c["status"] for c in healthy.report["gate"]["checks"]}
            self.assertEqual(checks["pairwise_flags"], "pass", checks)
            self.assertIn(checks["pairwise_noise"], ("pass", "n/a"), healthy.stdout)

    def assert_flagged_alone(self, rate, at_least, fails=False):
        flagged = 0
        for i in range(RUNS):
            slow = self.sweep(f"{rate}-{i}")
            checks = {c["name"]: c for c in slow.report["gate"]["checks"]} if slow.report else {}
            if fails:
                # A node at a few percent of its control fails whatever the noise; a noise too large
                # to judge by is its own finding (pairwise_noise), never a softer verdict.
                self.assertEqual(slow.returncode, 1, (slow, checks.get("pairwise_noise")))
                self.assertEqual(slow.report["verdict"], "FAIL")
                self.assertEqual(checks["pairwise_flags"]["status"], "fail", checks)
                self.assertIn(checks["pairwise_noise"]["status"], ("pass", "warn"), checks)
            self.assertIn(slow.returncode, (0, 1), slow)
            nodes, links = self.flags(slow)
            self.assertIn(nodes, ([], ["vc-n3"]), f"another node flagged at {rate}: {nodes}")
            self.assertEqual(links, [], f"a link flagged beside the throttled node at {rate}")
            if nodes == ["vc-n3"]:
                flagged += 1
                reasons = [n["reasons"] for n in slow.report["nodes"] if n["host"] == "vc-n3"][0]
                self.assertTrue(all("measured again at" in r and "of the control" in r
                                    for r in reasons), reasons)
        self.assertGreaterEqual(flagged, at_least, f"vc-n3 at {rate} flagged in {flagged}/{RUNS}")
        return slow

    def test_a_node_at_1_gbit_is_flagged_alone_every_time(self):
        self.throttle("1gbit")
        self.assert_flagged_alone("1gbit", RUNS)

    def test_a_node_at_4_gbit_is_flagged_alone(self):
        # docs/sweep.md asks 18 of 20; 2 of 3 here keeps a 1-in-10 miss from failing CI while no
        # other node may be flagged in any run.
        self.throttle("4gbit")
        self.assert_flagged_alone("4gbit", RUNS - 1)

    def test_a_node_at_300_mbit_fails_alone_and_its_transfers_are_bounded(self):
        self.throttle("300mbit")
        last = self.assert_flagged_alone("300mbit", RUNS, fails=True)
        rail = last.report["sweep"]["pairwise"]["rails"][0]
        slow_cells = [(a, b) for a in rail["hosts"] for b in rail["hosts"]
                      if a != b and "vc-n3" in (a, b)]
        reduced = {(r["from"], r["to"]) for r in rail["reduced"] if not r["both_ways"]}
        self.assertEqual(reduced & set(slow_cells), set(slow_cells), rail["reduced"])
        self.assertTrue(all(r["bytes"] < PAIR_BYTES for r in rail["reduced"]), rail["reduced"])


if __name__ == "__main__":
    main(SRUN_NODES)
