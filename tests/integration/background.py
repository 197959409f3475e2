"""Helpers for tests that start `trainproof train` in the background (to act on it while it runs,
or to end it when it hangs) and for tests that need a small filesystem of their own."""
import contextlib
import os
import signal
import subprocess
import tempfile
import time
import unittest

from harness import BIN, MPIEXEC, TINY, Run


@contextlib.contextmanager
def small_tmpfs(size="20m"):
    """A tmpfs of `size` mounted on a fresh folder; always unmounted on the way out."""
    if os.geteuid() != 0:
        raise unittest.SkipTest("mounting a tmpfs needs root")
    mount_point = tempfile.mkdtemp(prefix="trainproof-tmpfs-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", mount_point],
                   check=True)
    try:
        yield mount_point
    finally:
        # A rank still exiting may hold a file open for a moment.
        for _ in range(100):
            if subprocess.run(["umount", mount_point], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        else:
            subprocess.run(["umount", "-l", mount_point])
        os.rmdir(mount_point)


class Launch:
    """`trainproof train` under mpirun in its own process group, so a hang can be ended."""

    def __init__(self, ranks, *args, beats):
        self.beats = beats
        cmd = [MPIEXEC, "-np", str(ranks), "--oversubscribe", BIN, "train", "--scenario", TINY,
               "--report", os.path.join(beats, "report.json"), f"--watchdog.dir={beats}",
               "--log.level=warn", *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)
        self.outcome = None

    def wait_for_progress(self, timeout=120):
        """Until rank 0 has written progress.json: the checkpoint preflight is behind it."""
        deadline = time.time() + timeout
        while not os.path.exists(os.path.join(self.beats, "progress.json")):
            if self.proc.poll() is not None or time.time() > deadline:
                raise AssertionError("the run never started its steps:\n" + repr(self.finish()))
            time.sleep(0.05)

    def finish(self, timeout=120):
        """The run's outcome; a run still going after `timeout` s is killed and None returned."""
        if self.proc.returncode is not None:
            return self.outcome
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.communicate()
            return None
        self.outcome = Run(self.proc.returncode, out, err, None)
        return self.outcome
