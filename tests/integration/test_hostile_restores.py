"""Restores at another world size from tampered checkpoints (docs/promises.md, "Hostile input";
docs/checkpoint.md, "What counts as damage"). A checkpoint of 4 ranks is tampered with as an
attacker or a broken filesystem would (manifest sizes, element ranges, names with `..`, absolute
paths and links out of the folder, missing and truncated replicas) and restored on 2 or 3 ranks.

Every case ends with exit 0 on the digest of the uninterrupted run: either the tampering is
harmless (one damaged full replica, named in `damaged_replicas`) and step 8 restores, or step 8 is
set aside as `.corrupt` with its reason in `restore.rejected` and step 4 restores. Never a crash,
a read outside the folder, or a restore of the tampered bytes."""
import os
import shutil
import sys

from harness import CheckpointCase, edit_manifest, main, mpirun, truncate_tail


def entry(index, field, value):
    def change(manifest):
        manifest["files"][index][field] = value
    return change


def top(field, value):
    def change(manifest):
        manifest[field] = value
    return change


def drop_entry(manifest):
    del manifest["files"][1]


def duplicate_entry(manifest):
    manifest["files"][1] = dict(manifest["files"][0])


def extra_entry(manifest):
    manifest["files"].append(dict(manifest["files"][0], name="rank-00004.h5", rank=4))


# name: (change to MANIFEST.json, or to the files; expected restored step). A size that one file
# does not have is that replica's damage (another restores); a field of the wrong type or range,
# or a manifest that disagrees with itself, is the whole checkpoint's.
MANIFEST_CASES = {
    "bytes +1": (entry(1, "bytes", 90113), 8),
    "bytes -1": (entry(1, "bytes", 90111), 8),
    "bytes 0": (entry(1, "bytes", 0), 8),
    "bytes negative": (entry(1, "bytes", -90112), 4),
    "bytes 2^63": (entry(1, "bytes", 2 ** 63), 4),
    "bytes a string": (entry(1, "bytes", "90112"), 4),
    "elements beyond the state": (entry(1, "elements", [0, 10 ** 12]), 4),
    "elements reversed": (entry(1, "elements", [3072, 0]), 4),
    "elements negative": (entry(1, "elements", [-1, 3072]), 4),
    "elements short": (entry(1, "elements", [0, 3071]), 4),
    "elements three": (entry(1, "elements", [0, 1, 3072]), 4),
    "total_elements -1": (top("total_elements", -1), 4),
    "total_elements 2^62": (top("total_elements", 2 ** 62), 4),
    "total_elements 3073": (top("total_elements", 3073), 4),
    "world_size 0": (top("world_size", 0), 4),
    "world_size 100000": (top("world_size", 100000), 4),
    "world_size 3": (top("world_size", 3), 4),
    "step 9": (top("step", 9), 4),
    "layout unknown": (top("layout", "../shared-file"), 4),
    "layout shared-file": (top("layout", "shared-file"), 4),
    "name up and over": (entry(1, "name", "../step-00000004/rank-00001.h5"), 4),
    "name absolute": (entry(1, "name", "/etc/hostname"), 4),
    "name dot-dot": (entry(1, "name", ".."), 4),
    "name empty": (entry(1, "name", ""), 4),
    "name with a slash": (entry(1, "name", "sub/rank-00001.h5"), 4),
    "name with a newline": (entry(1, "name", "rank-00001.h5\n"), 4),
    "rank out of range": (entry(1, "rank", 7), 4),
    "rank negative": (entry(1, "rank", -1), 4),
    "rank repeated": (entry(1, "rank", 0), 4),
    "entry dropped": (drop_entry, 4),
    "entry duplicated": (duplicate_entry, 4),
    "entry extra": (extra_entry, 4),
    "checksum not hex": (entry(1, "xxh3_128", "zz" * 16), 4),
    "checksum short": (entry(1, "xxh3_128", "17fe"), 4),
}


def remove_replica(folder):
    os.remove(os.path.join(folder, "rank-00001.h5"))


def truncate_replica(count):
    return lambda folder: truncate_tail(os.path.join(folder, "rank-00001.h5"), count)


def empty_replica(folder):
    os.truncate(os.path.join(folder, "rank-00001.h5"), 0)


def link_replica(target):
    def change(folder):
        path = os.path.join(folder, "rank-00001.h5")
        os.remove(path)
        os.symlink(target(folder), path)
    return change


def replica_is_folder(folder):
    path = os.path.join(folder, "rank-00001.h5")
    os.remove(path)
    os.mkdir(path)


def replica_is_fifo(folder):
    path = os.path.join(folder, "rank-00001.h5")
    os.remove(path)
    os.mkfifo(path)


def manifest_link(folder):
    path = os.path.join(folder, "MANIFEST.json")
    moved = os.path.join(os.path.dirname(folder), "elsewhere-MANIFEST.json")
    os.replace(path, moved)
    os.symlink(moved, path)


def all_replicas_truncated(folder):
    for rank in range(4):
        truncate_tail(os.path.join(folder, f"rank-0000{rank}.h5"), 1)


# A full replica of the state is in every file-per-rank file: one damaged replica is named and
# another restores step 8; damage to the manifest or to every replica sets step 8 aside.
FILE_CASES = {
    "replica missing": (remove_replica, 8),
    "replica one byte short": (truncate_replica(1), 8),
    "replica half": (truncate_replica(45056), 8),
    "replica empty": (empty_replica, 8),
    "replica links to the older step": (
        link_replica(lambda f: os.path.join(os.path.dirname(f), "step-00000004",
                                            "rank-00001.h5")), 8),
    "replica links out of the folder": (link_replica(lambda f: "/etc/hostname"), 8),
    "replica links to itself": (link_replica(lambda f: os.path.join(f, "rank-00001.h5")), 8),
    "replica is a folder": (replica_is_folder, 8),
    "replica is a FIFO": (replica_is_fifo, 8),
    "manifest is a link": (manifest_link, 4),
    "every replica truncated": (all_replicas_truncated, 4),
}


class HostileRestores(CheckpointCase):
    cases = 0

    @classmethod
    def tearDownClass(cls):
        print("hostile restore cases:", cls.cases, file=sys.stderr)

    def setUp(self):
        super().setUp()
        self.written = os.path.join(self.tmp, "written")
        run = mpirun(4, f"--checkpoint.dir={self.written}", f"--checkpoint.every={self.EVERY}",
                     "--train.steps=10")
        self.assertEqual(run.returncode, 0, run)

    def restore_tampered(self, name, tamper, expected_step, ranks):
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.copytree(self.written, self.dir, symlinks=True)
        tamper(self.folder(8))
        run = self.train(ranks, "--resume", "auto")
        self.assertEqual(run.returncode, 0, (name, run))
        restore = run.report["checkpoint"]["restore"]
        self.assertEqual(restore["step"], expected_step, (name, restore))
        self.assertEqual(run.report["train"]["final_digest"], self.uninterrupted(ranks), name)
        if expected_step == 4:
            self.assertEqual(len(restore["rejected"]), 1, (name, restore))
            self.assertTrue(os.path.isdir(self.folder(8) + ".corrupt"), name)
        else:
            self.assertEqual(restore["rejected"], [], (name, restore))
            self.assertEqual(len(restore["damaged_replicas"]), 1, (name, restore))
            self.assertIn("rank-00001.h5", restore["damaged_replicas"][0], name)
        self.assertTrue(os.path.exists("/etc/hostname"))
        type(self).cases += 1

    def test_tampered_manifests(self):
        for index, (name, (change, step)) in enumerate(MANIFEST_CASES.items()):
            with self.subTest(case=name):
                self.restore_tampered(name, lambda folder: edit_manifest(folder, change), step,
                                      2 + index % 2)

    def test_tampered_replicas(self):
        for index, (name, (tamper, step)) in enumerate(FILE_CASES.items()):
            with self.subTest(case=name):
                self.restore_tampered(name, tamper, step, 2 + index % 2)


if __name__ == "__main__":
    main()
