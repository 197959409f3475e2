"""Arrival skew is measured on clocks aligned to rank 0: a raw clock offset must not show."""
import unittest

from harness import main, mpirun

OFFSET_S = 5.0


def max_skew(report):
    return report["train"]["arrival_skew"]["max"]


class ClockAlignment(unittest.TestCase):
    def test_offset_clock_leaves_skew_unchanged(self):
        run = mpirun(2, "--test.clock_offset_rank=1", f"--test.clock_offset_s={OFFSET_S}")
        self.assertEqual(run.returncode, 0, run)
        # Skew on two local ranks is milliseconds; an unaligned 5 s offset would show as 5 s.
        self.assertLess(max_skew(run.report), OFFSET_S / 10, run.report["train"]["arrival_skew"])
        negative = mpirun(2, "--test.clock_offset_rank=1", f"--test.clock_offset_s={-OFFSET_S}")
        self.assertLess(max_skew(negative.report), OFFSET_S / 10)

    def test_without_alignment_the_offset_shows(self):
        # Negative control: proves the test above could fail.
        run = mpirun(2, "--test.clock_offset_rank=1", f"--test.clock_offset_s={OFFSET_S}",
                     "--test.skip_clock_alignment=true")
        self.assertEqual(run.returncode, 0, run)
        self.assertGreater(max_skew(run.report), OFFSET_S * 0.9)
        self.assertGreater(run.report["ranks"][1]["arrival_skew"]["p50"], OFFSET_S * 0.9)


if __name__ == "__main__":
    main()
