"""The data path: prepare-data, the loader (readers, prefetch, shuffle, verify), its measured
stall, and bit-exact resume with the loader in the middle of an epoch."""
import json
import os
import resource
import shutil
import struct
import subprocess
import tempfile
import time
import unittest

from harness import BIN, MPIEXEC, TINY, flip_byte, main, mpirun, timing

SHAPE = {"data.samples": "64", "data.sample_bytes": "4096", "data.spread": "0.25",
         "data.files": "3"}


def prepare(ranks, folder, *args, preexec_fn=None, **shape):
    options = dict(SHAPE, **{f"data.{k}": str(v) for k, v in shape.items()})
    return subprocess.run([MPIEXEC, "-np", str(ranks), "--oversubscribe", BIN, "prepare-data",
                           "--scenario", TINY, f"--data.dir={folder}",
                           *[f"--{k}={v}" for k, v in options.items()], *args],
                          capture_output=True, text=True, timeout=120, preexec_fn=preexec_fn)


def limit_file_size():
    """No file the process writes grows past 16 MiB (SIGXFSZ): a request that prepare-data
    should refuse then fails the test at once instead of filling the disk."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (16 << 20, 16 << 20))


class Data(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="trainproof-data-")
        cls.raw = os.path.join(cls.tmp, "raw")
        cls.hdf5 = os.path.join(cls.tmp, "hdf5")
        for folder, fmt in ((cls.raw, "raw"), (cls.hdf5, "hdf5")):
            run = prepare(2, folder, f"--data.format={fmt}")
            assert run.returncode == 0, run.stdout + run.stderr

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def train(self, ranks, folder, *args):
        run = mpirun(ranks, f"--data.dir={folder}", *args)
        return run

    def test_every_sample_reads_back_and_verifies_in_both_formats(self):
        digests = set()
        for folder in (self.raw, self.hdf5):
            run = self.train(2, folder, "--data.verify=true", "--train.epochs=2")
            self.assertEqual(run.returncode, 0, run)
            data = run.report["data"]
            self.assertEqual(run.report["train"]["steps_completed"], 16)  # 2 * 64 / 8
            self.assertEqual(data["samples_read"], 128)  # every sample, exactly twice
            self.assertGreater(data["bytes_read"], 0)
            digests.add(run.report["train"]["final_digest"])
        # The content is the same whatever the format: so is the trained state.
        self.assertEqual(len(digests), 1)
        synthetic = mpirun(2, "--train.steps=16").report["train"]["final_digest"]
        self.assertNotIn(synthetic, digests, "the samples read must feed the compute")

    def test_flipped_byte_is_detected_naming_file_and_sample(self):
        damaged = os.path.join(self.tmp, "damaged")
        shutil.copytree(self.raw, damaged)
        # Sample 5 of shard 1: its offset and length from the shard's index (u64 triplets).
        with open(os.path.join(damaged, "shard-00001.idx"), "rb") as f:
            offset, length, _ = struct.unpack_from("<QQQ", f.read(), 5 * 24)
        index = json.load(open(os.path.join(damaged, "index.json")))
        sample = index["shards"][1]["first_sample"] + 5
        path = os.path.join(damaged, "shard-00001.bin")
        flip_byte(path, offset + length // 2, mask=0x10)
        run = self.train(2, damaged, "--data.verify=true", "--train.epochs=1")
        self.assertEqual(run.returncode, 3, run)
        self.assertIn(f"sample {sample} in {path}", run.stderr)
        # Without verification the damage goes unnoticed by the loader but not by the digest.
        quiet = self.train(2, damaged, "--train.epochs=1")
        self.assertEqual(quiet.returncode, 0, quiet)
        clean = self.train(2, self.raw, "--train.epochs=1")
        self.assertNotEqual(quiet.report["train"]["final_digest"],
                            clean.report["train"]["final_digest"])

    def test_resume_mid_epoch_is_bit_exact(self):
        ckpt = os.path.join(self.tmp, "ckpt")
        common = [f"--checkpoint.dir={ckpt}", "--checkpoint.every=3"]
        first = self.train(2, self.raw, *common, "--train.steps=10")
        self.assertEqual(first.returncode, 0, first)
        resumed = self.train(2, self.raw, *common, "--resume", "auto")
        self.assertEqual(resumed.returncode, 0, resumed)
        self.assertEqual(resumed.report["train"]["restored_step"], 9)  # epoch 1, sample 8 of 64
        manifest = json.load(open(os.path.join(ckpt, "step-00000009", "MANIFEST.json")))
        self.assertEqual(manifest["data_loader"], {"epoch": 1, "cursor": 8})
        whole = self.train(2, self.raw)
        self.assertEqual(resumed.report["train"]["final_digest"],
                         whole.report["train"]["final_digest"])
        shutil.rmtree(ckpt)

    def test_readers_and_prefetch_change_timings_never_the_digest(self):
        digests = set()
        for readers, prefetch, direct in ((1, 0, "false"), (4, 6, "false"), (2, 1, "true")):
            run = self.train(2, self.hdf5, f"--data.readers={readers}",
                             f"--data.prefetch={prefetch}", "--data.cache=drop",
                             f"--data.direct={direct}")
            self.assertEqual(run.returncode, 0, run)
            self.assertEqual(run.report["data"]["readers"], readers)
            digests.add(run.report["train"]["final_digest"])
        self.assertEqual(len(digests), 1)

    def test_direct_reads_of_aligned_samples_land_in_place_and_verify(self):
        # Page-sized samples at page-aligned offsets skip the bounce buffer; verify checks that
        # every byte still lands where it belongs.
        aligned = os.path.join(self.tmp, "aligned")
        run = prepare(2, aligned, "--data.format=raw", spread=0)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        digests = set()
        for direct in ("true", "false"):
            run = self.train(2, aligned, f"--data.direct={direct}", "--data.verify=true",
                             "--train.epochs=1", "--data.readers=3")
            self.assertEqual(run.returncode, 0, run)
            self.assertEqual(run.report["data"]["samples_read"], 64)
            digests.add(run.report["train"]["final_digest"])
        self.assertEqual(len(digests), 1)

    @timing
    def test_more_readers_really_read_in_parallel(self):
        # With every read slowed by 20 ms, one reader caps the rate at 50 samples/s; four that
        # overlap their reads go well past it, and their busy time exceeds the reading window.
        rates = {}
        for readers in (1, 4):
            run = self.train(1, self.raw, f"--data.readers={readers}", "--data.prefetch=8",
                             "--test.read_delay_ms=20", "--train.steps=6")
            self.assertEqual(run.returncode, 0, run)
            data = run.report["data"]
            rates[readers] = data["samples_per_s"]
            window = data["samples_read"] / data["samples_per_s"]
            if readers == 4:
                self.assertGreater(data["reader_busy_s"], 2 * window)
        self.assertLess(rates[1], 50)
        self.assertGreater(rates[4], 2.5 * rates[1])

    @timing
    def test_readers_without_cpus_of_their_own_are_warned_about(self):
        # Bound to one core, 3 readers and the step thread take turns on it.
        bound = self.train(1, self.raw, "--data.readers=3")
        self.assertEqual(bound.returncode, 0, bound)
        data = bound.report["data"]
        self.assertEqual(data["cpus_per_rank_min"], 1)
        self.assertIn("rank 0 has 1 CPU(s) of its own", data["cpu_warning"])
        self.assertIn("for 3 reader thread(s)", data["cpu_warning"])
        self.assertIn(data["cpu_warning"], bound.report["context"]["warnings"])
        if len(os.sched_getaffinity(0)) < 2:
            self.skipTest("the unbound half needs 2 CPUs")
        free = mpirun(1, f"--data.dir={self.raw}", "--data.readers=1", bind="none")
        self.assertEqual(free.returncode, 0, free)
        self.assertGreaterEqual(free.report["data"]["cpus_per_rank_min"], 2)
        self.assertEqual(free.report["data"]["cpu_warning"], "")
        # Unbound, two ranks on one host share its CPUs: each has half of them.
        shared = mpirun(2, f"--data.dir={self.raw}", "--data.readers=1", bind="none")
        self.assertEqual(shared.returncode, 0, shared)
        cpus = len(os.sched_getaffinity(0))
        self.assertAlmostEqual(shared.report["data"]["cpus_per_rank_min"], cpus / 2)
        self.assertEqual(shared.report["data"]["cpu_warning"] == "", cpus >= 4)

    @timing
    def test_slowed_reads_raise_the_stall_and_lower_au(self):
        fast = self.train(2, self.raw, "--data.prefetch=0")
        slow = self.train(2, self.raw, "--data.prefetch=0", "--test.read_delay_ms=30")
        self.assertEqual(slow.returncode, 0, slow)
        self.assertGreater(slow.report["data"]["stall"]["p50"],
                           10 * fast.report["data"]["stall"]["p50"] + 0.01)
        self.assertLess(slow.report["train"]["au"], fast.report["train"]["au"])
        self.assertEqual(slow.report["train"]["final_digest"], fast.report["train"]["final_digest"])

    def test_prepare_is_idempotent_and_refuses_other_parameters(self):
        again = prepare(2, self.raw, "--data.format=raw")
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertIn("nothing to do", again.stdout)
        other = prepare(1, self.raw, "--data.format=raw", samples=65)
        self.assertEqual(other.returncode, 2, other.stderr)
        self.assertIn("data.samples 64 vs 65", other.stderr)
        copy = os.path.join(self.tmp, "forced")
        shutil.copytree(self.raw, copy)
        forced = prepare(1, copy, "--data.format=raw", "--force", samples=80)
        self.assertEqual(forced.returncode, 0, forced.stderr)
        self.assertEqual(json.load(open(os.path.join(copy, "index.json")))["samples"], 80)

    def test_a_shard_that_cannot_be_written_ends_prepare_cleanly_with_exit_3(self):
        # Every rank agrees on the failure, so the job ends with exit 3 and one message, as
        # train does, not with MPI_Abort.
        blocked = os.path.join(self.tmp, "blocked")
        os.makedirs(os.path.join(blocked, "shard-00001.bin"))
        run = prepare(2, blocked, "--data.format=raw")
        self.assertEqual(run.returncode, 3, run.stdout + run.stderr)
        errors = [l for l in run.stderr.splitlines() if l.startswith("trainproof: error:")]
        self.assertEqual(len(errors), 1, run.stderr)
        self.assertIn("shard-00001.bin", errors[0])
        self.assertNotIn("MPI_ABORT", run.stdout + run.stderr)
        self.assertFalse(os.path.exists(os.path.join(blocked, "index.json")))

    @timing
    def test_out_of_range_sizes_are_refused_before_anything_starts(self):
        # 100000 readers once aborted the rank (std::terminate) after 20 s of thread creation.
        start = time.monotonic()
        run = self.train(1, self.raw, "--data.readers=100000")
        self.assertEqual(run.returncode, 2, run)
        self.assertLess(time.monotonic() - start, 15)
        self.assertIn("data.readers=100000 is out of range [1, 1024]", run.stderr)
        # 10^18 bytes: refused, naming the folder and the bytes needed and free, before the
        # folder is even made.
        huge = os.path.join(self.tmp, "huge", "dataset")
        run = prepare(1, huge, "--data.format=raw", samples=10**9, sample_bytes=10**9,
                      preexec_fn=limit_file_size)
        self.assertEqual(run.returncode, 2, run.stdout + run.stderr)
        self.assertIn(f"data.dir '{huge}': the dataset needs about 1000000", run.stderr)
        self.assertRegex(run.stderr, rf"but {self.tmp} has [0-9]+ bytes \(.*\) free")
        self.assertFalse(os.path.exists(os.path.dirname(huge)))

    def test_train_refuses_a_dataset_that_is_not_the_one_asked_for(self):
        run = self.train(1, self.raw, "--data.samples=99")
        self.assertEqual(run.returncode, 2, run)
        self.assertIn("holds a different dataset", run.stderr)
        missing = self.train(1, os.path.join(self.tmp, "nothing-here"))
        self.assertEqual(missing.returncode, 2, missing)
        self.assertIn("run trainproof prepare-data first", missing.stderr)

    def test_rank_shift_reads_the_shards_written_a_node_away(self):
        # prepare-data on 2 ranks wrote shards 0 and 2 on rank 0, shard 1 on rank 1. With the two
        # ranks on two (pretend) nodes and a shift of one node, each reads the other's shards.
        run = self.train(2, self.raw, "--data.rank_shift=1", "--test.split_hosts=2",
                         "--data.verify=true")
        self.assertEqual(run.returncode, 0, run)
        self.assertEqual(run.report["data"]["rank_shards_read"], ["1", "0,2"])
        unshifted = self.train(2, self.raw, "--data.rank_shift=0", "--test.split_hosts=2")
        self.assertEqual(unshifted.report["data"]["rank_shards_read"], ["0,2", "1"])
        default = self.train(2, self.raw)
        self.assertEqual(default.report["data"]["rank_shards_read"], ["0,1,2", "0,1,2"])

    def test_small_dataset_warns_that_the_page_cache_can_hold_it(self):
        run = self.train(1, self.raw)
        self.assertTrue(any("5x the RAM" in w for w in run.report["context"]["warnings"]))


if __name__ == "__main__":
    main()
