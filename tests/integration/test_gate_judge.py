"""One judge in every subcommand (docs/acceptance.md, "Checks"): `train` and `sweep` judge the
gate.* thresholds whose figures they measure, through the same code as `accept`. A threshold given
on the command line that none of their stages measures is exit 2, naming the metric and the stage
that would; one set in a gate file is n/a."""
import os
import tempfile
import unittest

from harness import mpirun, main


def check(run, name):
    found = [c for c in run.report["gate"]["checks"] if c["name"] == name]
    return found[0] if found else None


class GateInEverySubcommand(unittest.TestCase):
    def test_train_fails_a_utilisation_it_does_not_reach(self):
        run = mpirun(2, "--gate.min_au=0.99")
        self.assertEqual(run.returncode, 1, run)
        au = check(run, "min_au")
        self.assertEqual(au["status"], "fail", au)
        self.assertIn("is below 0.99 (limit from --gate.min_au on the command line)", au["reason"])
        self.assertEqual(run.report["verdict"], "FAIL")
        self.assertEqual(run.report["gate"]["thresholds"][0]["check"], "min_au")

    def test_sweep_fails_a_bus_bandwidth_it_does_not_reach(self):
        run = mpirun(2, "--gate.min_busbw_gbps=1000", "--sweep.max_bytes=1048576",
                     "--sweep.ops=allreduce", subcommand="sweep", scenario=None)
        self.assertEqual(run.returncode, 1, run)
        busbw = check(run, "min_busbw_gbps.allreduce")
        self.assertEqual(busbw["status"], "fail", busbw)
        self.assertEqual(run.report["verdict"], "FAIL")

    def test_a_threshold_no_stage_of_train_measures_is_exit_2(self):
        run = mpirun(2, "--gate.min_pair_gbps=1")
        self.assertEqual(run.returncode, 2, run)
        self.assertIn("--gate.min_pair_gbps on the command line judges the bandwidth of every "
                      "pair of nodes, which only stage pairwise measures, and trainproof train "
                      "does not run it", run.stderr)

    def test_a_host_files_threshold_train_cannot_measure_is_not_applicable(self):
        with tempfile.TemporaryDirectory() as tmp:
            host = os.path.join(tmp, "host.ini")
            with open(host, "w") as f:
                f.write("[gate]\nmin_pair_gbps = 10\nmin_au = 0.001\n")
            run = mpirun(2, f"--gate.file={host}")
        self.assertEqual(run.returncode, 0, run)
        self.assertEqual(check(run, "min_pair_gbps")["status"], "n/a")
        self.assertEqual(check(run, "min_au")["status"], "pass")


if __name__ == "__main__":
    main()
