"""The virtual Slurm cluster (scripts/vcluster.sh) for a test file: started once per file with
its node count, always stopped (tearDownClass, at exit, on SIGTERM; and by the ctest fixture
slurm.vcluster_teardown if the test process is killed). main() exits 77 (ctest: skipped, with
the reason printed) where this host cannot run the cluster."""
import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import unittest

from harness import BIN, TINY, Run

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")
VCLUSTER = os.path.join(SCRIPTS, "vcluster.sh")
STATE = os.environ.get("VC_STATE", "/var/lib/trainproof-vcluster")
# Everything the nodes must see lives under the state folder: the build may sit in /tmp, which
# each node replaces with its own.
WORK = os.path.join(STATE, "test-work")
ENV = dict(os.environ, SLURM_CONF=os.path.join(STATE, "slurm.conf"), VC_STATE=STATE)


def stop_cluster():
    subprocess.run([VCLUSTER, "stop"], env=ENV, capture_output=True, timeout=120)


def vcluster(*args):
    return subprocess.run([VCLUSTER, *args], env=ENV, capture_output=True, text=True,
                          timeout=180)


def run(cmd, report=None, timeout=180):
    proc = subprocess.run(cmd, cwd=WORK, env=ENV, capture_output=True, text=True,
                          timeout=timeout)
    parsed = None
    if report and os.path.exists(report):
        with open(report) as f:
            parsed = json.load(f)
    return Run(proc.returncode, proc.stdout, proc.stderr, parsed)


class ClusterCase(unittest.TestCase):
    """NODES nodes for the whole class, with trainproof (and its plot script) and the tiny scenario
    copied to WORK."""
    NODES = 2

    @classmethod
    def setUpClass(cls):
        atexit.register(stop_cluster)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        started = vcluster("start", str(cls.NODES))
        assert started.returncode == 0, started.stdout + started.stderr
        shutil.rmtree(WORK, ignore_errors=True)
        os.makedirs(WORK)
        cls.bin = os.path.join(WORK, "trainproof")
        shutil.copy2(BIN, cls.bin)
        # report plot finds its script beside the executable, as in the device bundle.
        shutil.copytree(os.path.join(os.path.dirname(BIN), "viz"), os.path.join(WORK, "viz"))
        cls.tiny = os.path.join(WORK, "tiny.ini")
        shutil.copy2(TINY, cls.tiny)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(WORK, ignore_errors=True)
        stop_cluster()


def main(launcher):
    check = subprocess.run([VCLUSTER, "check"], env=ENV, capture_output=True, text=True)
    if check.returncode != 0:
        print("skipped:", (check.stdout + check.stderr).strip())
        sys.exit(77)
    print("trainproof:", BIN, "launcher:", " ".join(launcher), file=sys.stderr)
    unittest.main(verbosity=2)
