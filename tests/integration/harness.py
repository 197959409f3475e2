"""Runs build/trainproof under mpirun for the MPI tests and reads back its JSON report."""
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest

BIN = os.environ.get("TRAINPROOF_BIN", "build/trainproof")
MPIEXEC = os.environ.get("TRAINPROOF_MPIEXEC", "mpirun")
SCENARIOS = os.environ.get("TRAINPROOF_SCENARIOS", "scenarios")
TINY = os.path.join(SCENARIOS, "tiny.ini")


class Run:
    def __init__(self, returncode, stdout, stderr, report):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.report = report

    def __repr__(self):
        return f"exit {self.returncode}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


def mpirun(ranks, *args, scenario=TINY, timeout=240, bind="core:overload-allowed",
           subcommand="train"):
    """Runs `trainproof SUBCOMMAND` on `ranks` local ranks; returns a Run with the parsed
    report."""
    with tempfile.TemporaryDirectory() as tmp:
        report_path = os.path.join(tmp, "report.json")
        # Ranks pinned round-robin to cores, as a real launch would pin them; on a 2-core machine
        # several share a core, which the report's context warns about.
        cmd = [MPIEXEC, "-np", str(ranks), "--oversubscribe", "--map-by", "core",
               "--bind-to", bind, BIN, subcommand]
        if scenario:
            cmd += ["--scenario", scenario]
        if "--report" not in args:
            cmd += ["--report", report_path]
        cmd += ["--log.level=warn", *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        report = None
        if os.path.exists(report_path):
            with open(report_path) as f:
                report = json.load(f)
        return Run(proc.returncode, proc.stdout, proc.stderr, report)


class CheckpointCase(unittest.TestCase):
    """A temporary checkpoint folder per test, runs that checkpoint every EVERY (4) steps, and
    the digest of an uninterrupted run, computed once per (ranks, options)."""
    EVERY = 4
    reference = {}

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="trainproof-ckpt-")
        self.dir = os.path.join(self.tmp, "ckpt")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def train(self, ranks, *args):
        return mpirun(ranks, f"--checkpoint.dir={self.dir}", f"--checkpoint.every={self.EVERY}",
                      *args)

    def uninterrupted(self, ranks, *args):
        key = (ranks, args)
        if key not in self.reference:
            run = mpirun(ranks, *args)
            self.assertEqual(run.returncode, 0, run)
            self.reference[key] = run.report["train"]["final_digest"]
        return self.reference[key]

    def folder(self, step):
        return os.path.join(self.dir, f"step-{step:08d}")


def flip_byte(path, offset=None, mask=0x01):
    """Flips bits of one byte in place: at `offset`, or in the middle of the file."""
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2 if offset is None else offset)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ mask]))


def edit_manifest(folder, change):
    """Applies `change` to the parsed MANIFEST.json of a step folder and writes it back."""
    path = os.path.join(folder, "MANIFEST.json")
    with open(path) as f:
        manifest = json.load(f)
    change(manifest)
    with open(path, "w") as f:
        json.dump(manifest, f)


def truncate_tail(path, count=100):
    os.truncate(path, os.path.getsize(path) - count)


def direct(*args, timeout=60):
    """Runs the binary without a launcher (help, report, usage errors)."""
    proc = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout)
    return Run(proc.returncode, proc.stdout, proc.stderr, None)


def check_by_name(report, name):
    for check in report["gate"]["checks"]:
        if check["name"] == name:
            return check
    raise KeyError(name)


def main():
    print("trainproof:", BIN, "launcher:", shlex.join([MPIEXEC]), file=sys.stderr)
    unittest.main(verbosity=2)
