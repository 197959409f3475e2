"""trainproof node-check on this machine (docs/node-check.md): no launcher, the shipped dev-VM host
file ends `| Healthy` with exit 0; a host file that expects 8 GPUs ends `| ERROR: ...` naming the
8 expected and the 0 found, exit 1; a fixture sysfs tree (test.sysfs_root) with InfiniBand ports
gives each port's finding, in the report, the drain line and the JUnit file; bad input is exit 2
naming the file, line and key."""
import json
import os
import subprocess
import tempfile
import unittest
import xml.etree.ElementTree as ET

from harness import BIN, SCENARIOS, main

DEV_VM = os.path.join(SCENARIOS, "hosts", "dev-vm-2core.ini")
H200 = os.path.join(SCENARIOS, "hosts", "h200-nvlink-ndr400.ini")


def node_check(tmp, *args):
    report = os.path.join(tmp, "node.json")
    proc = subprocess.run([BIN, "node-check", "--report", report, *args], capture_output=True,
                          text=True, timeout=60)
    data = None
    if os.path.exists(report):
        with open(report) as f:
            data = json.load(f)
    return proc, data


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text + "\n")


def ib_tree(root, ports):
    """class/infiniband with one port per (device, rate, state) and its NIC on the PCI bus."""
    for i, (device, rate, state) in enumerate(ports):
        address = f"0000:{0x1a + 0x10 * i:02x}:00.0"
        pci = os.path.join(root, "bus", "pci", "devices", address)
        for name, value in (("class", "0x020700"), ("max_link_speed", "32.0 GT/s PCIe"),
                            ("current_link_speed", "32.0 GT/s PCIe"), ("max_link_width", "16"),
                            ("current_link_width", "16"), ("numa_node", "0")):
            write(os.path.join(pci, name), value)
        port = os.path.join(root, "class", "infiniband", device, "ports", "1")
        write(os.path.join(port, "rate"), rate)
        write(os.path.join(port, "state"), state)
        write(os.path.join(port, "phys_state"), "5: LinkUp" if "ACTIVE" in state else "2: Polling")
        write(os.path.join(port, "link_layer"), "InfiniBand")
        write(os.path.join(port, "counters", "symbol_error"), "0")
        os.symlink(pci, os.path.join(root, "class", "infiniband", device, "device"))


class NodeCheck(unittest.TestCase):
    def test_this_vm_against_its_host_file_is_healthy(self):
        with tempfile.TemporaryDirectory() as tmp:
            proc, report = node_check(tmp, f"--gate.file={DEV_VM}")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertRegex(proc.stdout, r"^\S+ \| Healthy\n$")
        self.assertEqual(report["verdict"], "PASS")
        items = {i["key"]: i["status"] for i in report["node_check"]["inventory"]}
        self.assertEqual(items, {"gpus": "pass", "min_cpus": "pass",
                                 "min_host_memory_gb": "pass", "min_network_interfaces": "pass"})
        self.assertEqual(report["nodes"][0]["flagged"], False)

    def test_a_host_file_that_expects_eight_gpus_names_the_eight_and_the_none_found(self):
        with tempfile.TemporaryDirectory() as tmp:
            proc, report = node_check(tmp, f"--gate.file={H200}", "--junit",
                                      os.path.join(tmp, "node.xml"))
            drain = subprocess.run([BIN, "report", "nodes", os.path.join(tmp, "node.json"),
                                    "--format=drain"], capture_output=True, text=True)
            junit = ET.parse(os.path.join(tmp, "node.xml")).getroot()
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        host = report["nodes"][0]["host"]
        last = proc.stdout.splitlines()[-1]
        self.assertTrue(last.startswith(f"{host} | ERROR: trainproof: inventory: 0 GPUs, "
                                        "expected 8 (none on the PCI bus"), last)
        self.assertIn("FAIL gpus: ", proc.stdout)
        self.assertEqual(report["verdict"], "FAIL")
        self.assertIn(f"scontrol update NodeName={host} State=DRAIN Reason='trainproof: "
                      "inventory FAIL: gpus: 0, expected 8", drain.stdout)
        failures = [f.get("message", "") + (f.text or "") for f in junit.iter("failure")]
        self.assertTrue(any("0 GPUs, expected 8" in f for f in failures), failures)

    def test_each_port_of_a_fixture_tree_is_judged_and_named(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "sys")
            ib_tree(root, [("mlx5_0", "400 Gb/sec (4X NDR)", "4: ACTIVE"),
                           ("mlx5_1", "200 Gb/sec (4X HDR)", "4: ACTIVE"),
                           ("mlx5_2", "400 Gb/sec (4X NDR)", "1: DOWN")])
            hosts = os.path.join(tmp, "ib.ini")
            write(hosts, "[inventory]\nnics = 4\nmin_nic_rate_gbps = 400\nib_ports_active = true")
            proc, report = node_check(tmp, f"--gate.file={hosts}", f"--test.sysfs_root={root}")
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        reasons = [f["reason"] for f in report["nodes"][0]["findings"]]
        host = report["nodes"][0]["host"]
        self.assertEqual(reasons, [
            f"{host}: 3 InfiniBand port(s), expected 4 (found mlx5_0 port 1, mlx5_1 port 1, "
            "mlx5_2 port 1)",
            f"{host}: mlx5_1 port 1 at 200 Gb/sec (4X HDR); expected 400 Gb/s",
            f"{host}: mlx5_2 port 1 is DOWN, Polling; expected ACTIVE, LinkUp"])
        ports = report["node_check"]["machine"]["rdma_ports"]
        self.assertEqual([p["counters"] for p in ports], [{"symbol_error": 0}] * 3)
        self.assertIn("test hooks", json.dumps(report["context"]))

    def test_bad_input_names_the_file_line_and_key(self):
        with tempfile.TemporaryDirectory() as tmp:
            hosts = os.path.join(tmp, "bad.ini")
            write(hosts, "[inventory]\ngpus = 8\ngpu_count = 8")
            proc, report = node_check(tmp, f"--gate.file={hosts}")
            self.assertEqual(proc.returncode, 2, proc.stderr)
            self.assertIn(f"gate.file '{hosts}', line 3: unknown inventory key 'gpu_count'",
                          proc.stderr)
            self.assertIsNone(report)
            proc, _ = node_check(tmp, "--level=slow")
            self.assertEqual(proc.returncode, 2, proc.stderr)
            self.assertIn("level", proc.stderr)
            proc, _ = node_check(tmp, "--report")
            self.assertEqual(proc.returncode, 2, proc.stderr)


if __name__ == "__main__":
    main()
