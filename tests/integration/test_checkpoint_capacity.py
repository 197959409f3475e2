"""A checkpoint folder that runs out of space: a full disk during a save is exit 3 on every rank,
naming the host, the file and the error, for both layouts and within a bounded time; a folder too
small for the checkpoints a run keeps is exit 2 before step 1; and a failed save leaves nothing
behind that would stop the next run. Needs root (the tests mount a small tmpfs)."""
import errno
import os
import re
import shutil
import socket
import tempfile
import time
import unittest

from background import Launch, small_tmpfs
from harness import main

# The state of tiny.ini at this width: 3 * 256^2 fp32 values per tensor, about 1.5 MiB per replica
# with SGD-momentum. A few checkpoints fit in 20 MiB.
FITS = "--model.hidden=256"
# 3 * 1024^2 values: 24 MiB per checkpoint, more than the whole tmpfs.
TOO_BIG = "--model.hidden=1024"


def fill(folder, leave=0):
    """Writes a file into `folder` until its filesystem has no space left, then frees `leave`
    bytes of it."""
    chunk = b"\0" * (1 << 16)
    with open(os.path.join(folder, "filler"), "wb", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
    for size in (4096, 512, 1):  # the last partial blocks
        try:
            with open(os.path.join(folder, "filler"), "ab", buffering=0) as f:
                while True:
                    f.write(b"\0" * size)
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
    path = os.path.join(folder, "filler")
    os.truncate(path, os.path.getsize(path) - leave)


class Capacity(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="trainproof-capacity-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def beats(self, name):
        path = os.path.join(self.tmp, name)
        os.makedirs(path)
        return path

    def disk_full_during_a_save(self, *layout):
        with small_tmpfs() as mount:
            ckpt = os.path.join(mount, "ckpt")
            # Step 2 is slow on rank 0: time to fill the disk after the preflight, before the
            # first checkpoint (step 4).
            run = Launch(2, FITS, f"--checkpoint.dir={ckpt}", "--checkpoint.every=4",
                         "--fault", "slow:rank=0,ms=4000,step=2", *layout,
                         beats=self.beats("full"))
            run.wait_for_progress()
            # Space for part of the checkpoint: some writes succeed and some fail, on one rank
            # and not another, inside collective calls.
            fill(mount, leave=1_000_000)
            started = time.time()
            outcome = run.finish(timeout=90)
            self.assertIsNotNone(outcome, f"{layout}: the job hung on a full disk")
            self.assertEqual(outcome.returncode, 3, outcome)
            message = next((l for l in outcome.stderr.splitlines() if "trainproof: " in l), "")
            self.assertIn("on host " + socket.gethostname(), message, outcome)
            self.assertRegex(message, re.escape(ckpt) + r"/step-00000004\.partial/\S+\.h5",
                             outcome)
            self.assertIn("No space left on device", message, outcome)
            self.assertLess(time.time() - started, 60, "the failure took too long to agree on")
            # What the failed save wrote is gone, so the space is free again for the next run.
            self.assertEqual([n for n in os.listdir(ckpt) if n.startswith("step-")], [])

            os.remove(os.path.join(mount, "filler"))
            again = Launch(2, FITS, f"--checkpoint.dir={ckpt}", "--checkpoint.every=4",
                           *layout, beats=self.beats("again")).finish()
            self.assertIsNotNone(again)
            self.assertEqual(again.returncode, 0, again)

    def test_disk_full_during_a_file_per_rank_save_is_exit_3(self):
        self.disk_full_during_a_save("--checkpoint.layout=file-per-rank")

    def test_disk_full_during_a_shared_file_save_is_exit_3(self):
        self.disk_full_during_a_save("--checkpoint.layout=shared-file")

    def test_disk_full_during_an_async_shared_file_save_is_exit_3(self):
        self.disk_full_during_a_save("--checkpoint.layout=shared-file", "--checkpoint.async=true")

    def test_a_folder_too_small_for_the_kept_checkpoints_is_exit_2_before_step_1(self):
        with small_tmpfs() as mount:
            ckpt = os.path.join(mount, "ckpt")
            for layout in ("file-per-rank", "shared-file"):
                outcome = Launch(2, TOO_BIG, f"--checkpoint.dir={ckpt}", "--checkpoint.every=4",
                                 f"--checkpoint.layout={layout}", "--checkpoint.keep=2",
                                 beats=self.beats(layout)).finish()
                self.assertIsNotNone(outcome, "the job hung")
                self.assertEqual(outcome.returncode, 2, outcome)
                found = re.search(r"has (\d+) bytes \([^)]*\) free; this run needs (\d+) bytes",
                                  outcome.stderr)
                self.assertIsNotNone(found, outcome)
                free, needed = int(found.group(1)), int(found.group(2))
                # Three checkpoints (keep 2, and the one being written) of 2 tensors of 3M fp32.
                one = 3 * 1024 * 1024 * 4 * 2 * (2 if layout == "file-per-rank" else 1)
                self.assertGreaterEqual(needed, 3 * one, outcome)
                self.assertLess(needed, 3 * one * 1.01, outcome)
                self.assertLessEqual(free, 20 << 20, outcome)
                self.assertGreater(free, 19 << 20, outcome)
                self.assertIn(ckpt, outcome.stderr)
                self.assertIn("checkpoint.keep", outcome.stderr)
                self.assertEqual([n for n in os.listdir(ckpt) if n.startswith("step-")], [])


if __name__ == "__main__":
    main()
