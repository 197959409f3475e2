"""Set-up's file traffic on the shared folder grows with the ranks, never with their square, and
the heartbeats' writes grow with the nodes (docs/acceptance.md, "The job's timeline, and
goodput"; docs/drills.md, "Heartbeats"): a train run's opens and writes in its heartbeat folder
(watchdog.dir), counted with inotify while it runs, at 16 and at 64 ranks over the same 16
pretend nodes (test.split_hosts).

- Opens: per watched phase (training, then the trace's write, app/stages/run_trace.h) per rank
  its node's heartbeat file and its pid file, per node one read of the next node's file (the
  visibility ring), rank 0 the progress record. Every rank used to read every rank's
  heartbeat (64 x 64 opens at 64 ranks).
- Writes: per rank its pid file once; per node its heartbeat file, rewritten at most once a second
  by whichever of its ranks finds it due, and by each rank once as its watchdog ends (in each
  watched phase: the ranks of a node end a few milliseconds apart, so their last publishes
  rarely coalesce, and inotify merges some of them: at 4 ranks a node the busiest node
  counted 10 writes in one run and 6 in another). Every rank used to rewrite its own file every 50 ms
  (about 20 writes a second per rank: 4,000 at 64 ranks in these runs).

Each run also starts from a fresh checkpoint folder, whose preflight must find nothing of an
earlier run to remove."""
import ctypes
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import BIN, MPIEXEC, TINY  # noqa: E402

IN_MODIFY, IN_OPEN, IN_Q_OVERFLOW = 0x2, 0x20, 0x4000
NODES = 16


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
            started = time.monotonic()
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
            wall_s = time.monotonic() - started
            events.stop()
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            self.assertFalse(events.overflowed, "inotify dropped events: the counts are short")
            # A fresh checkpoint folder holds nothing of an earlier run. Rank 0 removes such
            # leftovers before any other rank writes its probe file there; removed later, it raced
            # the ranks writing theirs and deleted them as an earlier run's (16 ranks did it every
            # time).
            self.assertNotIn("left behind", run.stdout + run.stderr)
            return events.opens, events.modifies, wall_s

    def assert_writes_bounded_per_node(self, ranks, writes, wall_s):
        # A pid file per rank (a write or two); each rank's last publish as its watchdog ends, in
        # each of the two watched phases; and per node its file made once, published at set-up
        # and then at most once a second. The run's own length enters only through the
        # once-a-second bound.
        bound = 2 * ranks + 2 * ranks + NODES * (wall_s + 4) + 16
        self.assertLessEqual(writes, bound, f"{writes} writes at {ranks} ranks in {wall_s:.0f} s")

    def test_set_up_traffic_grows_linearly_from_16_to_64_ranks(self):
        small_opens, small_writes, small_s = self.counted_run(16)
        large_opens, large_writes, large_s = self.counted_run(64)
        print(f"opens {small_opens} -> {large_opens}, writes {small_writes} -> {large_writes} "
              f"(runs of {small_s:.0f} s and {large_s:.0f} s)")
        # Quadratic reads would be 64 x 64 = 4,096 at 64 ranks. Two watched phases.
        self.assertLessEqual(large_opens, 2 * (2 * 64 + NODES) + 16, (small_opens, large_opens))
        self.assertLessEqual(large_opens, 4.5 * small_opens, (small_opens, large_opens))
        self.assert_writes_bounded_per_node(16, small_writes, small_s)
        self.assert_writes_bounded_per_node(64, large_writes, large_s)


if __name__ == "__main__":
    unittest.main(verbosity=2)
