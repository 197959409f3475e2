"""Restore at another world size (docs/checkpoint.md, "Restore at another world size"): a
checkpoint written by N ranks restores on M, in every layout, sync and async, and the run ends on
the digest of the run that was never interrupted, because the global batch (and so every optimizer
step's samples) is the checkpoint's at any size. A checkpoint of another size is refused where the
resize is not allowed, and damage that a resized restore reads falls back, naming it."""
import os
import shutil
import subprocess

from harness import BIN, MPIEXEC, TINY, CheckpointCase, flip_byte, main, mpirun

LAYOUTS = {
    "file-per-rank": (),
    "file-per-rank+shard_optimizer": ("--checkpoint.shard_optimizer=true",),
    "shared-file": ("--checkpoint.layout=shared-file",),
}
MODES = {"sync": (), "async": ("--checkpoint.async=true",)}
RESIZES = ((4, 2), (2, 3), (3, 4))


class Resize(CheckpointCase):

    def written(self, ranks, *args, steps=10):
        """A folder with a checkpoint every 4 steps (4 and 8 by default) written by `ranks` ranks, shared by every case of the
        test that resumes from it (each resumes from a copy)."""
        key = (ranks, args, steps)
        if key not in self.folders:
            folder = os.path.join(self.tmp, f"written-{len(self.folders)}")
            run = mpirun(ranks, f"--checkpoint.dir={folder}", f"--checkpoint.every={self.EVERY}",
                         f"--train.steps={steps}", *args)  # the steps after the last are lost
            self.assertEqual(run.returncode, 0, run)
            self.folders[key] = folder
        return self.folders[key]

    def resume(self, folder, ranks, *args):
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.copytree(folder, self.dir)
        return self.train(ranks, "--resume", "auto", *args)

    def setUp(self):
        super().setUp()
        self.folders = {}  # the written folders of this test, in self.tmp

    def test_every_layout_sync_and_async_ends_on_the_uninterrupted_digest(self):
        reference = self.uninterrupted(2)
        for layout, layout_args in LAYOUTS.items():
            for mode, mode_args in MODES.items():
                for before, after in RESIZES:
                    case = (layout, mode, before, after)
                    folder = self.written(before, *layout_args, *mode_args)
                    run = self.resume(folder, after, *layout_args, *mode_args)
                    self.assertEqual(run.returncode, 0, (case, run))
                    restore = run.report["checkpoint"]["restore"]
                    self.assertEqual(run.report["train"]["restored_step"], 8, case)
                    self.assertEqual((restore["written_world_size"], restore["world_size"]),
                                     (before, after), case)
                    self.assertEqual(run.report["train"]["final_digest"], reference, case)

    def test_a_resize_is_refused_where_it_is_not_allowed(self):
        folder = self.written(2)
        for args in (("--resume", "require"),
                     ("--resume", "auto", "--checkpoint.allow_resize=false")):
            shutil.rmtree(self.dir, ignore_errors=True)
            shutil.copytree(folder, self.dir)
            run = self.train(3, *args)
            self.assertEqual(run.returncode, 2, (args, run))
            self.assertIn("written by 2 ranks; this run has 3", run.stderr)
            self.assertIn("checkpoint.allow_resize", run.stderr)
        run = self.train(3, "--resume", "require", "--checkpoint.allow_resize=true")
        self.assertEqual(run.returncode, 0, run)

    def test_damage_a_resized_restore_reads_falls_back_naming_it(self):
        folder = self.written(4, "--checkpoint.shard_optimizer=true")
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.copytree(folder, self.dir)
        shard = os.path.join(self.folder(8), "rank-00001.h5")
        with open(shard, "r+b") as f:
            f.seek(os.path.getsize(shard) // 2)
            byte = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte[0] ^ 0x01]))
        run = self.train(2, "--resume", "auto", "--checkpoint.shard_optimizer=true")
        self.assertEqual(run.returncode, 0, run)
        restore = run.report["checkpoint"]["restore"]
        self.assertEqual(restore["step"], 4, "the previous checkpoint")
        self.assertEqual(len(restore["rejected"]), 1, restore)
        self.assertIn("rank-00001.h5 fails its xxh3-128 checksum", restore["rejected"][0])
        self.assertEqual(run.report["train"]["final_digest"], self.uninterrupted(2))

    def test_any_one_valid_replica_restores_and_the_damaged_ones_are_named(self):
        # Full replicas, 4 -> 2: new rank 1 reads old files 1 and 3, and both are damaged; rank
        # 0's valid replica is the whole state, so checkpoint 8 still counts.
        folder = self.written(4)
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.copytree(folder, self.dir)
        for rank in (1, 3):
            flip_byte(os.path.join(self.folder(8), f"rank-0000{rank}.h5"))
        run = self.train(2, "--resume", "auto")
        self.assertEqual(run.returncode, 0, run)
        restore = run.report["checkpoint"]["restore"]
        self.assertEqual(restore["step"], 8)
        self.assertEqual(restore["rejected"], [])
        self.assertEqual(len(restore["damaged_replicas"]), 2, restore)
        self.assertIn("rank-00001.h5 fails its xxh3-128 checksum", restore["damaged_replicas"][0])
        self.assertIn("rank-00003.h5", restore["damaged_replicas"][1])
        self.assertIn("damaged replica, another restored", run.stdout)
        self.assertEqual(run.report["train"]["final_digest"], self.uninterrupted(2))
        # With every replica damaged nothing is left to restore from: the previous checkpoint.
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.copytree(folder, self.dir)
        for rank in range(4):
            flip_byte(os.path.join(self.folder(8), f"rank-0000{rank}.h5"))
        run = self.train(2, "--resume", "auto")
        self.assertEqual(run.returncode, 0, run)
        self.assertEqual(run.report["checkpoint"]["restore"]["step"], 4)

    def test_a_damaged_slab_of_the_shared_file_falls_back_naming_the_slab(self):
        import h5py
        import json
        folder = self.written(4, *LAYOUTS["shared-file"])
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.copytree(folder, self.dir)
        with open(os.path.join(self.folder(8), "MANIFEST.json")) as f:
            slab = json.load(f)["files"][0]["slabs"][1]
        path = os.path.join(self.folder(8), "state.h5")
        with h5py.File(path, "r") as f:
            offset = f["params"].id.get_offset() + 4 * slab["elements"][0]
        with open(path, "r+b") as f:
            f.seek(offset)
            byte = f.read(1)
            f.seek(offset)
            f.write(bytes([byte[0] ^ 0x40]))
        # At 2 ranks, new rank 0 reads old slabs 0 and 1.
        run = self.train(2, "--resume", "auto", *LAYOUTS["shared-file"])
        self.assertEqual(run.returncode, 0, run)
        restore = run.report["checkpoint"]["restore"]
        self.assertEqual(restore["step"], 4, "the previous checkpoint")
        self.assertIn("the slab written by rank 1", restore["rejected"][0])
        self.assertEqual(run.report["train"]["final_digest"], self.uninterrupted(2))

    def test_a_per_rank_batch_keeps_the_checkpoints_global_batch(self):
        per_rank = ("--model.batch_per_rank=4",)  # the scenario's model.batch gives way
        folder = self.written(2, *per_rank)  # a global batch of 8
        run = self.resume(folder, 4, *per_rank)
        self.assertEqual(run.returncode, 0, run)
        model = run.report["train"]["model"]
        self.assertEqual(model["global_batch"], 8)
        self.assertIn("the 2 ranks that wrote it", model["batch_set_by"])
        self.assertEqual(run.report["train"]["final_digest"], self.uninterrupted(2, *per_rank))

    def test_a_dataset_resized_mid_epoch_reads_the_rest_of_each_epoch_once(self):
        # 64 samples in batches of 8: an epoch is 8 steps, and step 4's checkpoint is mid-epoch.
        data = os.path.join(self.tmp, "data")
        prepared = subprocess.run(
            [MPIEXEC, "-np", "2", "--oversubscribe", BIN, "prepare-data", "--scenario", TINY,
             f"--data.dir={data}", "--data.samples=64", "--data.sample_bytes=4096",
             "--data.spread=0.25", "--data.files=3"], capture_output=True, text=True, timeout=120)
        self.assertEqual(prepared.returncode, 0, prepared.stdout + prepared.stderr)
        reading = (f"--data.dir={data}", "--data.verify=true")
        folder = self.written(4, *reading, steps=6)  # step 4 committed, 5 and 6 lost
        run = self.resume(folder, 2, *reading, "--train.steps=16")
        self.assertEqual(run.returncode, 0, run)
        self.assertEqual(run.report["train"]["restored_step"], 4)
        # Steps 5 to 16: the second half of epoch 1 and all of epoch 2, every sample checked
        # against its position (data.verify), none twice.
        self.assertEqual(run.report["data"]["samples_read"], 12 * 8)
        self.assertEqual(run.report["train"]["final_digest"],
                         self.uninterrupted(2, *reading, "--train.steps=16"))


if __name__ == "__main__":
    main()
