"""An MPI failure on one rank is exit 3, names that rank and its host, and aborts the others."""
import socket
import unittest

from harness import main, mpirun


class RuntimeErrors(unittest.TestCase):
    def test_mpi_failure_is_exit_3_naming_rank_and_host(self):
        run = mpirun(2, "--test.mpi_error_rank=1", timeout=120)
        self.assertEqual(run.returncode, 3, run)
        self.assertIsNone(run.report)
        line = next(l for l in run.stderr.splitlines() if "runtime error" in l)
        self.assertIn("rank 1 on host " + socket.gethostname(), line)
        self.assertIn("MPI_ERR_COUNT", line)
        self.assertNotIn("terminate called", run.stderr)


if __name__ == "__main__":
    main()
