"""Negative controls: the replica check and the collective self-check must fire."""
import unittest

from harness import check_by_name, main, mpirun


class ReplicaCheck(unittest.TestCase):
    def test_perturbed_rank_fails_and_is_named(self):
        run = mpirun(4, "--test.perturb_state_rank=2")
        self.assertEqual(run.returncode, 1, run)
        self.assertEqual(run.report["verdict"], "FAIL")
        check = check_by_name(run.report, "replica_digest")
        self.assertEqual(check["status"], "fail")
        self.assertEqual(check["value"], 1)
        self.assertIn("ranks 2 ", check["reason"])
        self.assertIn("FAIL  replica_digest", run.stdout)
        digests = [r["digest"] for r in run.report["ranks"]]
        self.assertNotEqual(digests[2], digests[0])
        self.assertEqual(run.report["train"]["final_digest"], digests[0])

    def test_healthy_run_passes_the_same_check(self):
        run = mpirun(4)
        self.assertEqual(run.returncode, 0, run)
        self.assertEqual(check_by_name(run.report, "replica_digest")["status"], "pass")

    def test_wrong_collective_result_fails(self):
        run = mpirun(2, "--test.corrupt_collective_rank=1")
        self.assertEqual(run.returncode, 1, run)
        check = check_by_name(run.report, "collective_correctness")
        self.assertEqual(check["status"], "fail")
        self.assertEqual(check["value"], 1)
        self.assertIn("rank 1", check["reason"])


if __name__ == "__main__":
    main()
