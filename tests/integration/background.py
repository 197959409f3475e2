"""Helpers for tests that start `trainproof train` in the background (to act on it while it runs,
or to end it when it hangs) and for tests that need a small filesystem of their own."""
import contextlib
import os
import signal
import subprocess
import tempfile
import threading
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
        # Both pipes are drained as the run goes, so a test can wait for a line while it runs.
        self.out, self.err = [], []
        self.readers = [threading.Thread(target=self._drain, args=(pipe, into), daemon=True)
                        for pipe, into in ((self.proc.stdout, self.out),
                                           (self.proc.stderr, self.err))]
        for reader in self.readers:
            reader.start()

    @staticmethod
    def _drain(pipe, into):
        for line in pipe:
            into.append(line)

    def wait_for_stderr(self, text, timeout=120):
        """Until `text` appears in the run's stderr; True when it did, False when the run ended
        or `timeout` s passed first."""
        deadline = time.time() + timeout
        while text not in "".join(self.err):
            if self.proc.poll() is not None or time.time() > deadline:
                for reader in self.readers:
                    reader.join(1)
                return text in "".join(self.err)
            time.sleep(0.05)
        return True

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
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            return None
        for reader in self.readers:
            reader.join()
        self.outcome = Run(self.proc.returncode, "".join(self.out), "".join(self.err), None)
        return self.outcome
