"""The JSON report carries every field of its contract (docs/report.md), with sane values."""
import os
import re
import unittest

from harness import CheckpointCase, main, mpirun

PHASES = ("data", "compute", "comm", "comm_exposed", "optimizer", "checkpoint", "step")
STATS = ("min", "p50", "p99", "max", "mean")


class ReportContract(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.environ["NCCL_DEBUG"] = "WARN"
        os.environ["SLURM_FAKE_AUTH_TOKEN"] = "do-not-leak"
        try:
            cls.result = mpirun(2, "--test.split_hosts=2")
        finally:
            del os.environ["NCCL_DEBUG"], os.environ["SLURM_FAKE_AUTH_TOKEN"]
        assert cls.result.returncode == 0, cls.result
        cls.report = cls.result.report

    def test_top_level(self):
        r = self.report
        self.assertEqual(r["schema"], "trainproof.report/3")
        self.assertIn(r["verdict"], ("PASS", "WARN", "FAIL"))
        for key in ("context", "ranks", "nodes", "train", "gate"):
            self.assertIn(key, r)

    def test_context(self):
        c = self.report["context"]
        self.assertRegex(c["tool"]["version"], r"^\d+\.\d+\.\d+$")
        self.assertTrue(c["tool"]["git_revision"])
        for key in ("start_time", "end_time"):
            self.assertRegex(c[key], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        self.assertLessEqual(c["start_time"], c["end_time"])
        self.assertIn("train", c["command_line"])
        self.assertIn("[model]", c["scenario_text"])
        self.assertRegex(c["scenario_hash"], r"^[0-9a-f]{32}$")
        self.assertEqual(c["world_size"], 2)
        self.assertEqual(len(c["hosts"]), 2)
        self.assertEqual(sorted(c["ranks_per_host"].values()), [1, 1])
        for lib in ("mpi", "nccl", "cuda", "driver", "hdf5"):
            self.assertIn(lib, c["versions"])
        self.assertIn("Open MPI", c["versions"]["mpi"])
        self.assertNotIn("\x00", c["versions"]["mpi"])
        self.assertRegex(c["versions"]["hdf5"], r"^1\.\d+\.\d+")
        self.assertIsInstance(c["gpus"], list)
        # One entry per node, with what its own first rank read (docs/report.md).
        self.assertEqual([n["host"] for n in c["nodes"]], c["hosts"])
        for node in c["nodes"]:
            self.assertIn("nvidia_smi_topo", node)
            self.assertGreater(node["cpu"]["cores"], 0)
            self.assertGreater(node["memory_bytes"], 0)
            self.assertIn("Open MPI", node["versions"]["mpi"])
            for key in ("nics", "ib_ports", "pcie_links"):
                self.assertIsInstance(node[key], list)
        self.assertNotIn("nvidia_smi_topo", c)
        self.assertIn("checkpoint_filesystem", c)
        self.assertEqual(c["environment"].get("NCCL_DEBUG"), "WARN")
        self.assertEqual(c["environment"].get("SLURM_FAKE_AUTH_TOKEN"), "<redacted>")
        self.assertNotIn("do-not-leak", str(self.report))
        self.assertEqual(c["backends"]["compute"], "cpu")
        self.assertEqual(c["backends"]["comm"], "mpi")
        self.assertIsInstance(c["warnings"], list)
        self.assertEqual(c["escaped_strings"], [])
        self.assertEqual(c["escaped_keys"], [])
        self.assertEqual(c["options"]["train.steps"], 12)

    def test_communicators(self):
        # Set-up, first and steady collectives per communicator, over every rank
        # (docs/report.md, "Communicators").
        comms = {c["comm"]: c for c in self.report["context"]["communicators"]}
        world = comms["world"]
        self.assertEqual(world["backend"], "mpi")
        for spread in (world["set_up_s"], world["first_s"]["allreduce"],
                       world["steady_s"]["allreduce"]):
            self.assertEqual(spread["ranks"], 2)
            self.assertLessEqual(spread["min"], spread["p50"])
            self.assertLessEqual(spread["p50"], spread["max"])
            self.assertIn(spread["slowest_rank"], (0, 1))
            self.assertEqual(spread["slowest_host"],
                             self.report["context"]["hosts"][spread["slowest_rank"]])

    def test_train(self):
        t = self.report["train"]
        self.assertEqual(t["steps_completed"], 12)
        self.assertEqual(t["steps_run"], 12)
        self.assertIsNone(t["restored_step"])
        self.assertRegex(t["final_digest"], r"^[0-9a-f]{32}$")
        self.assertEqual(t["measured_steps"], 10)  # warm-up excluded
        for phase in PHASES:
            s = t["phases"][phase]
            for stat in STATS:
                self.assertGreaterEqual(s[stat], 0.0, (phase, stat))
            self.assertLessEqual(s["min"], s["p50"])
            self.assertLessEqual(s["p50"], s["p99"])
            self.assertLessEqual(s["p99"], s["max"])
        self.assertGreater(t["phases"]["compute"]["p50"], 0)
        self.assertGreater(t["phases"]["step"]["p50"], t["phases"]["compute"]["p50"] * 0.99)
        self.assertGreater(t["au"], 0)
        self.assertLessEqual(t["au"], 1)
        for key in ("samples_per_s", "tokens_per_s", "achieved_flops", "gemm_rate_flops"):
            self.assertGreater(t[key], 0, key)
        self.assertAlmostEqual(t["tokens_per_s"] / t["samples_per_s"], 8.0, places=6)
        self.assertIn("comm", t["timing"])

    def test_ranks_and_nodes(self):
        ranks = self.report["ranks"]
        self.assertEqual([r["rank"] for r in ranks], [0, 1])
        for r in ranks:
            for key in ("host", "local_rank", "device", "cpu_affinity", "numa_nodes", "p50",
                        "straggler_score", "arrival_skew", "flagged"):
                self.assertIn(key, r)
            self.assertRegex(r["cpu_affinity"], r"^[0-9,\-]+$")
            self.assertEqual(set(r["p50"]), set(PHASES))
        nodes = self.report["nodes"]
        self.assertEqual(sorted(n["ranks"] for n in nodes), [[0], [1]])
        for n in nodes:
            self.assertIn("flagged", n)
            self.assertIsInstance(n["reasons"], list)

    def test_gate(self):
        checks = self.report["gate"]["checks"]
        self.assertGreaterEqual(len(checks), 2)
        for c in checks:
            self.assertEqual(set(c), {"name", "value", "threshold", "status", "reason"})
            self.assertIn(c["status"], ("pass", "warn", "fail", "n/a", "none"))

    def test_summary_printed(self):
        out = self.result.stdout
        for word in ("phase (ms)", "compute", "comm_exposed", "slowest ranks", "flagged nodes",
                     "verdict:", "report:"):
            self.assertIn(word, out)


class CheckpointContract(CheckpointCase):
    """What a checkpoint costs the user: the stall's share of training, each save's parts, and
    the bandwidth training saw (sync) or the time until the checkpoint was durable (async)."""

    def test_checkpoint_section_sync_and_async(self):
        for mode, args in (("sync", ()), ("async", ("--checkpoint.async=true",)),
                           ("shared", ("--checkpoint.layout=shared-file",))):
            run = mpirun(2, f"--checkpoint.dir={self.tmp}/{mode}", "--checkpoint.every=4", *args)
            self.assertEqual(run.returncode, 0, run)
            c = run.report["checkpoint"]
            self.assertGreater(c["overhead"], 0, mode)
            self.assertLess(c["overhead"], 1, mode)
            self.assertGreater(c["training_between_s"], 0, mode)
            self.assertEqual([s["step"] for s in c["saves"]], [4, 8, 12], mode)
            for save in c["saves"]:
                # Every part is timed, in both layouts: none is left at 0.
                for key in ("serialize_s", "write_s", "fsync_s", "commit_s", "total_s",
                            "stall_s"):
                    self.assertGreater(save[key], 0, (mode, key))
                if mode != "async":
                    self.assertGreater(save["effective_gbps"], 0, save)
                    self.assertNotIn("time_to_durable_s", save)
                else:
                    self.assertGreaterEqual(save["time_to_durable_s"], 0, save)
                    self.assertNotIn("effective_gbps", save)
            self.assertRegex(run.stdout,
                             r"checkpoints took [0-9.]+% of training time: a stall of [0-9.]+ s "
                             r"a save against [0-9.]+ s of training between saves")


if __name__ == "__main__":
    main()
