"""Set-up's file opens on the shared folder grow with the ranks, never with their square
(docs/acceptance.md, "The job's timeline, and goodput"): a train run's opens in its heartbeat
folder (watchdog.dir), counted with inotify while it runs, at 8 and at 32 ranks over the same 8
pretend nodes (test.split_hosts). The heartbeat visibility check reads one heartbeat per node, in
a ring; it used to read every rank's on every rank (32 x 32 opens at 32 ranks). The writes are
counted and printed, not judged: each rank still rewrites its own heartbeat on every tick of its
watchdog, so they follow the run's length as well as the ranks. Each run also starts from a fresh
checkpoint folder, whose preflight must find nothing of an earlier run to remove."""
import ctypes
import os
import struct
import subprocess
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import BIN, MPIEXEC, TINY  # noqa: E402

IN_MODIFY, IN_OPEN, IN_Q_OVERFLOW = 0x2, 0x20, 0x4000
NODES = 8


class FolderEvents:
    """Counts inotify events on the files of one folder until stopped."""

    def __init__(self, folder):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init()
        if self.fd < 0 or self.libc.inotify_add_watch(self.fd, folder.encode(),
                                                      IN_OPEN | IN_MODIFY) < 0:
            raise OSError(ctypes.get_errno(), "inotify")
        self.opens = self.modifies = 0
        self.overflowed = False
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self):
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except OSError:
                return
            offset = 0
            while offset < len(data):
                _, mask, _, length = struct.unpack_from("iIII", data, offset)
                offset += 16 + length
                self.opens += bool(mask & IN_OPEN)
                self.modifies += bool(mask & IN_MODIFY)
                self.overflowed = self.overflowed or bool(mask & IN_Q_OVERFLOW)

    def stop(self):
        os.close(self.fd)


class SetUpGrowsWithTheRanks(unittest.TestCase):
    def counted_run(self, ranks):
        with tempfile.TemporaryDirectory(prefix="trainproof-setup-scale-") as tmp:
            folder = os.path.join(tmp, "heartbeats")
            os.mkdir(folder)
            events = FolderEvents(folder)
            # The checkpoint folder is another folder: its traffic is not counted here.
            cmd = [MPIEXEC, "-np", str(ranks), "--oversubscribe", BIN, "train", "--scenario", TINY,
                   "--report", os.path.join(tmp, "run.json"), "--log.level=info",
                   f"--watchdog.dir={folder}", f"--test.split_hosts={NODES}",
                   f"--checkpoint.dir={os.path.join(tmp, 'ckpt')}", "--checkpoint.every=2",
                   "--train.steps=2", "--train.warmup_steps=1", f"--model.batch={ranks}"]
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
            events.stop()
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            self.assertFalse(events.overflowed, "inotify dropped events: the counts are short")
            # A fresh checkpoint folder holds nothing of an earlier run. Rank 0 removes such
            # leftovers before any other rank writes its probe file there; removed later, it raced
            # the ranks writing theirs and deleted them as an earlier run's (16 ranks did it every
            # time).
            self.assertNotIn("left behind", run.stdout + run.stderr)
            return events.opens, events.modifies

    def test_opens_grow_linearly_from_8_to_32_ranks(self):
        small_opens, small_writes = self.counted_run(8)
        large_opens, large_writes = self.counted_run(32)
        print(f"opens {small_opens} -> {large_opens}, writes {small_writes} -> {large_writes}")
        # Per rank: its own heartbeat and pid file; per node: one ring read; rank 0: the progress
        # record. Quadratic reads would be 32 x 32 = 1,024 at 32 ranks.
        self.assertLessEqual(large_opens, 4 * 32 + 2 * NODES + 16, (small_opens, large_opens))
        self.assertLessEqual(large_opens, 4.5 * small_opens, (small_opens, large_opens))


if __name__ == "__main__":
    unittest.main(verbosity=2)
