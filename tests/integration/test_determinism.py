"""The final digest: equal on every rank, across repeated runs, and across world sizes."""
import unittest

from harness import main, mpirun


class Determinism(unittest.TestCase):
    digests = {}

    @classmethod
    def setUpClass(cls):
        for ranks in (1, 2, 4):
            run = mpirun(ranks)
            assert run.returncode == 0, run
            cls.digests[ranks] = run.report

    def test_every_rank_holds_the_same_digest(self):
        for ranks, report in self.digests.items():
            per_rank = {r["digest"] for r in report["ranks"]}
            self.assertEqual(len(report["ranks"]), ranks)
            self.assertEqual(per_rank, {report["train"]["final_digest"]})

    def test_digest_repeats_across_runs(self):
        again = mpirun(2)
        self.assertEqual(again.returncode, 0, again)
        self.assertEqual(again.report["train"]["final_digest"],
                         self.digests[2]["train"]["final_digest"])

    def test_digest_is_independent_of_world_size(self):
        finals = {ranks: r["train"]["final_digest"] for ranks, r in self.digests.items()}
        self.assertEqual(len(set(finals.values())), 1, finals)

    def test_uneven_shares_and_blocking_mode_agree(self):
        # 3 ranks split 8 samples 2/3/3; blocking reductions take another code path.
        run = mpirun(3, "--comm.overlap=false")
        self.assertEqual(run.returncode, 0, run)
        self.assertEqual(run.report["train"]["final_digest"],
                         self.digests[1]["train"]["final_digest"])

    def test_digest_depends_on_state_deciding_options(self):
        # Negative control: the digest must move when the state does, or equality proves nothing.
        base = self.digests[2]["train"]["final_digest"]
        for option in ("--train.steps=11", "--train.seed=8", "--train.optimizer=adam"):
            run = mpirun(2, option)
            self.assertEqual(run.returncode, 0, run)
            self.assertNotEqual(run.report["train"]["final_digest"], base, option)


if __name__ == "__main__":
    main()
