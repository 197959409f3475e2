"""Checkpoint layouts and async writes: bit-exact resume in every combination, what each layout
puts on disk, and damage detection where a layout differs from the default one."""
import json
import os
import shutil
import subprocess

from harness import CheckpointCase, edit_manifest, flip_byte, main, mpirun, truncate_tail

EVERY = CheckpointCase.EVERY
LAYOUTS = {
    "file-per-rank": (),
    "file-per-rank+shard_optimizer": ("--checkpoint.shard_optimizer=true",),
    "shared-file": ("--checkpoint.layout=shared-file",),
}
MODES = {"sync": (), "async": ("--checkpoint.async=true",)}
STATE_ELEMENTS = 3 * 32 * 32  # tiny.ini: 3 layers of 32x32


class CheckpointLayouts(CheckpointCase):

    def stop_and_resume(self, ranks, *args):
        shutil.rmtree(self.dir, ignore_errors=True)
        first = self.train(ranks, "--train.steps=10", *args)  # step 10's work is lost
        self.assertEqual(first.returncode, 0, first)
        run = self.train(ranks, "--resume", "auto", *args)
        self.assertEqual(run.returncode, 0, run)
        return first, run

    def test_resume_is_bit_exact_in_every_layout_sync_and_async_at_1_2_and_4_ranks(self):
        for ranks in (1, 2, 4):
            for layout, layout_args in LAYOUTS.items():
                for mode, mode_args in MODES.items():
                    # Adam at 2 ranks, so a second moment is sliced and restored too.
                    optimizer = ("--train.optimizer=adam",) if ranks == 2 else ()
                    case = (ranks, layout, mode, optimizer)
                    first, run = self.stop_and_resume(ranks, *layout_args, *mode_args, *optimizer)
                    train = run.report["train"]
                    self.assertEqual(train["restored_step"], 8, case)
                    self.assertEqual(train["steps_run"], 4, case)
                    self.assertEqual(train["final_digest"], self.uninterrupted(ranks, *optimizer),
                                     case)
                    checkpoint = run.report["checkpoint"]
                    self.assertEqual(checkpoint["layout"], layout.split("+")[0], case)
                    self.assertEqual(checkpoint["async"], mode == "async", case)
                    self.assertGreater(checkpoint["restore"]["bytes"], 0, case)
                    # Both checkpoints of the first run were committed, async ones included.
                    saves = first.report["checkpoint"]["saves"]
                    self.assertEqual([s["step"] for s in saves], [4, 8], case)
                    for save in saves:
                        self.assertGreater(save["total_s"], 0, case)
                        self.assertGreaterEqual(save["stall_s"], 0, case)

    def test_skipping_part_of_the_state_breaks_equality_in_sliced_layouts(self):
        # Negative control for the slice-and-assemble restore path.
        for layout_args in (LAYOUTS["shared-file"], LAYOUTS["file-per-rank+shard_optimizer"]):
            _, run = self.stop_and_resume(2, *layout_args, "--test.skip_restore=moment1")
            self.assertEqual(run.report["train"]["restored_step"], 8)
            self.assertNotEqual(run.report["train"]["final_digest"], self.uninterrupted(2))

    def test_sharded_files_partition_the_state_without_duplicate_bytes(self):
        import h5py  # installed by scripts/setup.sh (python3-h5py)
        self.stop_and_resume(4, *LAYOUTS["file-per-rank+shard_optimizer"])
        manifest = json.load(open(os.path.join(self.folder(8), "MANIFEST.json")))
        self.assertTrue(manifest["shard_optimizer"])
        covered = 0
        for rank, entry in enumerate(manifest["files"]):
            begin, end = entry["elements"]
            self.assertEqual(begin, covered, "slices must be contiguous in rank order")
            covered = end
            with h5py.File(os.path.join(self.folder(8), entry["name"]), "r") as f:
                self.assertEqual(f["params"].shape, (end - begin,))
                self.assertEqual(f["moment1"].shape, (end - begin,))
                self.assertEqual(int(f.attrs["slice_begin"]), begin)
                self.assertEqual(int(f.attrs["total_elements"]), STATE_ELEMENTS)
        self.assertEqual(covered, STATE_ELEMENTS)

    def test_sharded_restore_needs_every_ranks_file(self):
        self.stop_and_resume(2, *LAYOUTS["file-per-rank+shard_optimizer"])  # leaves 8 and 12
        os.remove(os.path.join(self.folder(12), "rank-00001.h5"))
        run = self.train(2, "--resume", "auto", *LAYOUTS["file-per-rank+shard_optimizer"])
        self.assertEqual(run.returncode, 0, run)
        self.assertEqual(run.report["train"]["restored_step"], 8)
        self.assertIn("rank-00001.h5", run.report["checkpoint"]["restore"]["rejected"][0])

    def test_shared_file_is_one_hdf5_file_with_a_checksum_per_slab(self):
        import h5py
        self.stop_and_resume(4, *LAYOUTS["shared-file"])
        self.assertEqual(sorted(os.listdir(self.folder(8))), ["MANIFEST.json", "state.h5"])
        manifest = json.load(open(os.path.join(self.folder(8), "MANIFEST.json")))
        self.assertEqual(manifest["layout"], "shared-file")
        (entry,) = manifest["files"]
        self.assertEqual(entry["bytes"], os.path.getsize(os.path.join(self.folder(8), "state.h5")))
        self.assertEqual([s["rank"] for s in entry["slabs"]], [0, 1, 2, 3])
        self.assertEqual(entry["slabs"][-1]["elements"][1], STATE_ELEMENTS)
        self.assertEqual(len({s["xxh3_128"] for s in entry["slabs"]}), 4)
        with h5py.File(os.path.join(self.folder(8), "state.h5"), "r") as f:
            self.assertEqual(int(f.attrs["step"]), 8)
            self.assertEqual(f["params"].shape, (STATE_ELEMENTS,))
            self.assertEqual(f["moment2"].shape, (0,))  # sgd-momentum has no second moment
        if shutil.which("h5dump"):
            dump = subprocess.run(["h5dump", "-A", os.path.join(self.folder(8), "state.h5")],
                                  capture_output=True, text=True)
            self.assertEqual(dump.returncode, 0, dump.stderr)
            self.assertIn("scenario_hash", dump.stdout)

    def damage_shared_file_and_resume(self, damage):
        self.stop_and_resume(2, *LAYOUTS["shared-file"])  # leaves 8 and 12
        damage(self.folder(12))
        run = self.train(2, "--resume", "auto", *LAYOUTS["shared-file"])
        self.assertEqual(run.returncode, 0, run)
        self.assertEqual(run.report["train"]["restored_step"], 8)
        self.assertTrue(os.path.isdir(self.folder(12) + ".corrupt"))
        # Resumed from 8 with 4 steps to go: the same end state as the uninterrupted run.
        self.assertEqual(run.report["train"]["final_digest"], self.uninterrupted(2))
        return run.report["checkpoint"]["restore"]["rejected"][0]

    def edit_manifest_and_resume(self, change):
        return self.damage_shared_file_and_resume(lambda folder: edit_manifest(folder, change))

    def test_shared_file_flipped_byte_falls_back(self):
        def flip(folder):
            flip_byte(os.path.join(folder, "state.h5"))
        self.assertIn("checksum", self.damage_shared_file_and_resume(flip))

    def test_shared_file_truncated_falls_back(self):
        def truncate(folder):
            truncate_tail(os.path.join(folder, "state.h5"))
        self.assertIn("bytes", self.damage_shared_file_and_resume(truncate))

    def test_shared_file_wrong_slab_checksum_falls_back(self):
        def lie(manifest):
            manifest["files"][0]["slabs"][1]["xxh3_128"] = "0" * 32
        self.assertIn("slab of rank 1", self.edit_manifest_and_resume(lie))

    def test_shared_file_manifest_missing_a_slab_falls_back(self):
        reason = self.edit_manifest_and_resume(lambda m: m["files"][0]["slabs"].pop())
        self.assertIn("does not list one slab per rank", reason)

    def test_shared_file_manifest_with_wrong_slab_bounds_falls_back(self):
        def shift(manifest):
            manifest["files"][0]["slabs"][1]["elements"][0] += 1
        self.assertIn("is not elements", self.edit_manifest_and_resume(shift))

    def test_layout_mismatch_is_exit_2_naming_both(self):
        self.stop_and_resume(2, *LAYOUTS["shared-file"])
        run = self.train(2, "--resume", "auto")
        self.assertEqual(run.returncode, 2, run)
        self.assertIn("layout shared-file; this run asks for file-per-rank", run.stderr)


if __name__ == "__main__":
    main()
