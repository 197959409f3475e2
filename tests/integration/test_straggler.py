"""A slow rank (--fault slow, 100x the tiny step) is flagged with its node, and nothing else is."""
import unittest

from harness import check_by_name, main, mpirun


class Straggler(unittest.TestCase):
    def test_slow_rank_and_its_node_are_flagged(self):
        # Three ranks over two pretend hosts: ranks 0,1 on vnode0 and rank 2 on vnode1. With three
        # ranks the median is a healthy rank's own time, so two healthy ranks that share a core
        # (one may finish first) still score >= 1: the test cannot flake on scheduler noise, and
        # still fails if the wrong rank, or more than one, is flagged.
        run = mpirun(3, "--fault", "slow:rank=1,ms=20", "--test.split_hosts=2",
                     "--train.steps=22", "--train.warmup_steps=2",
                     "--model.hidden=96", "--model.seq=32")
        self.assertEqual(run.returncode, 0, run)  # WARN still exits 0
        report = run.report
        self.assertEqual(report["verdict"], "WARN")
        flagged = [r["rank"] for r in report["ranks"] if r["flagged"]]
        self.assertEqual(flagged, [1], [(r["rank"], r["straggler_score"]) for r in report["ranks"]])
        self.assertLess(report["ranks"][1]["straggler_score"], 0.8)
        nodes = {n["host"]: n for n in report["nodes"]}
        self.assertEqual(len(nodes), 2)
        slow_host = report["ranks"][1]["host"]
        self.assertTrue(slow_host.endswith("-vnode0"))
        for host, node in nodes.items():
            self.assertEqual(node["flagged"], host == slow_host, node)
        self.assertTrue(any("rank 1" in reason for reason in nodes[slow_host]["reasons"]))
        self.assertEqual(check_by_name(report, "min_straggler_score")["status"], "warn")
        self.assertIn("FLAGGED", run.stdout)
        # The delay is in compute, where the fault puts it, not in data or optimizer.
        self.assertGreater(report["ranks"][1]["p50"]["compute"], 0.019)
        self.assertLess(report["ranks"][1]["p50"]["data"], 0.019)
        # Stragglers make WARN, never FAIL: the state is still correct.
        self.assertEqual(check_by_name(report, "replica_digest")["status"], "pass")

    def test_slow_fault_on_one_step_only(self):
        # Only measured step 5 is slow: it shows in the maximum, and the median absorbs it.
        run = mpirun(2, "--fault", "slow:rank=1,ms=20,step=5")
        self.assertEqual(run.returncode, 0, run)
        self.assertGreater(run.report["train"]["phases"]["compute"]["max"], 0.019)
        self.assertLess(run.report["ranks"][1]["p50"]["compute"], 0.019)


if __name__ == "__main__":
    main()
