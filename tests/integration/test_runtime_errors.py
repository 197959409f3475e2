"""An MPI failure on one rank is exit 3, names that rank and its host, and aborts the others; a
job that ends cleanly leaves no heartbeat folder behind."""
import os
import socket
import subprocess
import tempfile
import unittest

from harness import BIN, MPIEXEC, TINY, main, mpirun


class RuntimeErrors(unittest.TestCase):
    def test_mpi_failure_is_exit_3_naming_rank_and_host(self):
        run = mpirun(2, "--test.mpi_error_rank=1", timeout=120)
        self.assertEqual(run.returncode, 3, run)
        self.assertIsNone(run.report)
        line = next(l for l in run.stderr.splitlines() if "runtime error" in l)
        self.assertIn("rank 1 on host " + socket.gethostname(), line)
        self.assertIn("MPI_ERR_COUNT", line)
        self.assertNotIn("terminate called", run.stderr)


    def run_in(self, folder, *args):
        return subprocess.run([MPIEXEC, "-np", "2", "--oversubscribe", BIN, "train", "--scenario",
                               TINY, "--log.level=warn", "--report",
                               os.path.join(folder, "report.json"), *args],
                              capture_output=True, text=True, timeout=120)

    def test_clean_exits_leave_no_heartbeat_folder(self):
        for args, code in ((["--fault=slow:rank=1,ms=1"], 0), (["--model.batch=1"], 2)):
            with tempfile.TemporaryDirectory() as folder:
                run = self.run_in(folder, *args)
                self.assertEqual(run.returncode, code, run.stderr)
                # A clean run leaves its report and its trace (docs/report.md, "The trace").
                self.assertEqual(sorted(os.listdir(folder)),
                                 ["report.json", "report.trace.h5"] if code == 0 else [])

    def test_a_named_heartbeat_folder_keeps_the_progress_record(self):
        # A drill names the folder and reads progress.json there after the run.
        with tempfile.TemporaryDirectory() as folder:
            beats = os.path.join(folder, "beats")
            run = self.run_in(folder, f"--watchdog.dir={beats}")
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertEqual(os.listdir(beats), ["progress.json"])


if __name__ == "__main__":
    main()
