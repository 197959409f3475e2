"""The device check's readers (scripts/device-check/results.py) on fixtures: what the multi-GPU and
watchdog stages conclude from a report, NCCL's log and abort.json must not wait for a GPU machine
to be found wrong."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                       "device-check", "results.py")


def results(*args):
    return subprocess.run([sys.executable, RESULTS, *args], check=True, capture_output=True,
                          text=True).stdout.strip()


class DeviceCheckResults(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_gpu_uuids_counts_ranks_and_distinct_gpus(self):
        ranks = [{"gpu": {"uuid": "GPU-a"}}, {"gpu": {"uuid": "GPU-b"}}, {"gpu": {"uuid": "GPU-a"}},
                 {"gpu": None}]
        path = self.write("report.json", json.dumps({"ranks": ranks}))
        self.assertEqual(results("gpu-uuids", path), "4 2")

    def test_nccl_transports_reads_every_file_once_each(self):
        a = self.write("nccl.a.1", "h:1 NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
                                   "h:1 NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/IPC/read\n")
        b = self.write("nccl.b.2", "g:2 NCCL INFO Channel 00/0 : 1[0] -> 2[0] [send] via "
                                   "NET/IB/0/GDRDMA\ng:2 NCCL INFO NVLS multicast support is "
                                   "enabled\n")
        self.assertEqual(results("nccl-transports", a, b, a + ".missing"), "NET/IB,NVLS,P2P/IPC")

    def test_abort_names_lists_the_missing_ranks(self):
        path = self.write("abort.json", json.dumps({"missing": [{"rank": 1}, {"rank": 5}]}))
        self.assertEqual(results("abort-names", path), "1,5")
        self.assertEqual(results("abort-names", self.write("none.json", "{")), "")
        deep = self.write("deep.json", "[" * 50000 + "]" * 50000)
        self.assertEqual(results("abort-names", deep), "", "too deep reads as no record")


if __name__ == "__main__":
    unittest.main(verbosity=2)
