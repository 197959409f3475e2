"""trainproof node-check on this machine (docs/node-check.md): no launcher, the shipped dev-VM host
file ends `| Healthy` with exit 0; a host file that expects 8 GPUs ends `| ERROR: ...` naming the
8 expected and the 0 found, exit 1; a fixture sysfs tree (test.sysfs_root) with InfiniBand ports
gives each port's finding, in the report, the drain line and the JUnit file; bad input is exit 2
naming the file, line and key."""
import json
import os
import subprocess
import tempfile
import time
import unittest
import xml.etree.ElementTree as ET

from harness import BIN, SCENARIOS, TINY, main, mpirun

DEV_VM = os.path.join(SCENARIOS, "hosts", "dev-vm-2core.ini")
FAKE_NVML_DIR = os.environ.get("TRAINPROOF_FAKE_NVML_DIR", "build/tests/fake_nvml")
H200 = os.path.join(SCENARIOS, "hosts", "h200-nvlink-ndr400.ini")


def fake_nvml_env(tmp, nvml):
    """The environment in which the fake libnvidia-ml.so.1 answers from `nvml` (its JSON)."""
    env = dict(os.environ)
    if nvml is not None:
        fake = os.path.join(tmp, "nvml.json")
        with open(fake, "w") as f:
            json.dump(nvml, f)
        env.update(LD_LIBRARY_PATH=os.path.abspath(FAKE_NVML_DIR), FAKE_NVML_FILE=fake)
    return env


def node_check(tmp, *args, nvml=None):
    """Runs node-check; with `nvml` (the fake's JSON), the fake libnvidia-ml.so.1 answers."""
    report = os.path.join(tmp, "node.json")
    env = fake_nvml_env(tmp, nvml)
    proc = subprocess.run([BIN, "node-check", "--report", report, *args], capture_output=True,
                          text=True, timeout=60, env=env)
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


def gpu_address(i):
    return f"0000:{0x18 + 0x10 * i:02x}:00.0"


def gpu_tree(root, count):
    """`count` H200s on the PCI bus."""
    for i in range(count):
        pci = os.path.join(root, "bus", "pci", "devices", gpu_address(i))
        for name, value in (("vendor", "0x10de"), ("device", "0x2335"), ("class", "0x030200"),
                            ("max_link_speed", "32.0 GT/s PCIe"), ("max_link_width", "16"),
                            ("current_link_speed", "2.5 GT/s PCIe"), ("current_link_width", "16"),
                            ("numa_node", str(i // 4))):
            write(os.path.join(pci, name), value)


def healthy_h200s(count=8):
    """What NVML says of `count` healthy H200s, as the fake's file gives it."""
    return {"driver_version": "550.90.07", "cuda_driver_version": 12040,
            "gpus": [{"name": "NVIDIA H200", "uuid": f"GPU-{1000 + i}",
                      "pci_bus_id": "0000" + gpu_address(i).upper(), "device_id": 0x2335,
                      "memory_mib": 143771, "vbios": "96.00.99.00.01", "ecc": [1, 1],
                      "mig": [0, 0], "persistence": 1, "nvlinks_up": 18, "max_pcie": [5, 16],
                      "health": {"ecc": {"corrected_aggregate": 12}, "retired": [0, 0],
                                 "retired_pending": 0, "remapped_rows": [2, 0, 0, 0],
                                 "clock_event_reasons": 1, "temperature_c": 33,
                                 "power_mw": 88000, "power_limit_mw": 700000,
                                 "sm_clock_mhz": 345, "max_sm_clock_mhz": 1980,
                                 "pcie": [1, 16], "pcie_replays": 0,
                                 "nvlink_errors": [0, 0, 0, 0]},
                      "nvlink_peers": [j for j in range(count) if j != i]}
                     for i in range(count)]}


def h200_node(tmp):
    """A fixture 8x H200 node with eight NDR ports, and the shipped H200 host file's inventory
    less what this VM cannot fake (its CPUs and memory)."""
    root = os.path.join(tmp, "sys")
    gpu_tree(root, 8)
    ib_tree(root, [(f"mlx5_{i}", "400 Gb/sec (4X NDR)", "4: ACTIVE") for i in range(8)])
    hosts = os.path.join(tmp, "h200.ini")
    with open(H200) as f:
        kept = [line for line in f.read().splitlines()
                if not line.startswith(("min_cpus", "min_host_memory_gb", "min_nccl_version"))]
    write(hosts, "\n".join(kept))
    return [f"--gate.file={hosts}", f"--test.sysfs_root={root}"]


class FakeNvml(unittest.TestCase):
    """The GPU scenarios through the fake libnvidia-ml.so.1: each gives exactly its finding,
    named with its GPU, and the healthy node none."""

    def findings(self, report):
        return [f["reason"].split(": ", 1)[1] for f in report["nodes"][0]["findings"]]

    def test_a_healthy_eight_gpu_node_is_healthy(self):
        with tempfile.TemporaryDirectory() as tmp:
            proc, report = node_check(tmp, *h200_node(tmp), nvml=healthy_h200s())
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertTrue(proc.stdout.endswith(" | Healthy\n"), proc.stdout)
        items = {i["key"]: i["status"] for i in report["node_check"]["inventory"]}
        self.assertNotIn("fail", items.values(), items)
        for key in ("gpus", "gpu_device_id", "nvlinks_per_gpu", "ecc", "min_driver_version",
                    "min_cuda_driver_version", "nics", "ib_ports_active"):
            self.assertEqual(items[key], "pass", (key, items))
        driver = report["node_check"]["driver"]
        self.assertEqual((driver["driver_version"], driver["cuda_driver_version"]),
                         ("550.90.07", "12.4"))
        self.assertEqual(driver["gpus"][3]["pci_address"], "0000:48:00.0")

    def test_a_gpu_the_driver_lost_is_named_by_its_bus_address(self):
        nvml = healthy_h200s()
        del nvml["gpus"][3]
        with tempfile.TemporaryDirectory() as tmp:
            proc, report = node_check(tmp, *h200_node(tmp), nvml=nvml)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertEqual(self.findings(report), [
            "7 GPUs, expected 8 (missing 0000:48:00.0, seen on the PCI bus but not by the "
            "driver)"])
        self.assertIn("| ERROR: trainproof: inventory: 7 GPUs, expected 8", proc.stdout)

    def test_a_link_down_a_pending_ecc_change_and_mig_on_are_each_named(self):
        nvml = healthy_h200s()
        nvml["gpus"][2]["nvlinks_up"] = 17
        nvml["gpus"][5]["ecc"] = [1, 0]
        nvml["gpus"][6]["mig"] = [1, 1]
        with tempfile.TemporaryDirectory() as tmp:
            proc, report = node_check(tmp, *h200_node(tmp), nvml=nvml)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertEqual(self.findings(report), [
            "GPU 2 (GPU-1002, 0000:38:00.0) has 17 links up; expected 18",
            "GPU 5 (GPU-1005, 0000:68:00.0) turns off at the next reset; expected on",
            "GPU 6 (GPU-1006, 0000:78:00.0) is on; expected off"])

    def test_each_health_fault_gives_exactly_its_finding_named_with_its_gpu(self):
        # (GPU, its health field, the value, the finding): DCGM's quick-diagnostic rules.
        cases = [
            (1, "remapped_rows", [2, 0, 1, 0], "fail",
             "a row remap is pending (it takes effect at the next reset)"),
            (2, "remapped_rows", [2, 3, 0, 1], "fail",
             "a row remap failed (the memory has no spare row left)"),
            (3, "ecc", {"uncorrected_volatile": 2}, "fail",
             "2 uncorrectable ECC error(s) since the last reset"),
            (4, "retired_pending", 1, "fail",
             "a page retirement is pending (it takes effect at the next reset)"),
            (5, "clock_event_reasons", 0x8 | 0x4, "fail", "clocks held down by HW slowdown"),
            (6, "clock_event_reasons", 0x20, "warn",
             "clocks held down by SW thermal slowdown (33 C)"),
        ]
        for index, field, value, status, finding in cases:
            nvml = healthy_h200s()
            nvml["gpus"][index]["health"][field] = value
            with self.subTest(field=field, value=value), tempfile.TemporaryDirectory() as tmp:
                proc, report = node_check(tmp, *h200_node(tmp), nvml=nvml)
                self.assertEqual(proc.returncode, 1 if status == "fail" else 0, proc.stdout)
                found = [(f["check"], f["status"], f["reason"].split(": ", 1)[1])
                         for f in report["nodes"][0]["findings"]]
                self.assertEqual(found, [("gpu_health", status,
                                          f"GPU {index} (GPU-{1000 + index}, "
                                          f"{gpu_address(index)}): {finding}")])
                check = [c for c in report["gate"]["checks"] if c["name"] == "gpu_health"][0]
                self.assertEqual(check["status"], status, check)
                last = proc.stdout.splitlines()[-1]
                if status == "fail":
                    self.assertIn("| ERROR: trainproof: gpu_health: GPU", last)
                else:
                    self.assertTrue(last.endswith("| Healthy"), last)

    def test_the_healthy_nodes_figures_at_rest_are_recorded(self):
        with tempfile.TemporaryDirectory() as tmp:
            proc, report = node_check(tmp, *h200_node(tmp), nvml=healthy_h200s())
        self.assertEqual(proc.returncode, 0, proc.stdout)
        health = report["node_check"]["driver"]["gpus"][0]["health"]
        self.assertEqual((health["temperature_c"], health["power_w"], health["pcie_gen"],
                          health["remapped_correctable"], health["ecc_corrected_aggregate"]),
                         (33, 88.0, 1, 2, 12))
        check = [c for c in report["gate"]["checks"] if c["name"] == "gpu_health"][0]
        self.assertEqual(check["status"], "pass", check)
        # NVLink between every pair of the 8 (an NVSwitch baseboard): the pairs' copies are
        # judged against each other.
        self.assertEqual(report["node_check"]["driver"]["nvlink_pairs"], 28)

    def test_nvlink_pairs_as_the_driver_reports_them(self):
        # GPU 3 reaches no peer over NVLink (7 of the 28 pairs), and a driver that cannot say.
        lost = healthy_h200s()
        lost["gpus"][3]["nvlink_peers"] = []
        silent = healthy_h200s()
        for g in silent["gpus"]:
            del g["nvlink_peers"]
        for nvml, pairs in ((lost, 21), (silent, None)):
            with tempfile.TemporaryDirectory() as tmp:
                proc, report = node_check(tmp, *h200_node(tmp), nvml=nvml)
            self.assertEqual(report["node_check"]["driver"]["nvlink_pairs"], pairs, proc.stdout)

    def test_a_driver_that_does_not_answer_is_named(self):
        with tempfile.TemporaryDirectory() as tmp:
            proc, report = node_check(tmp, *h200_node(tmp), nvml={"init_error": 9})
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertEqual(self.findings(report), [
            "0 GPUs, expected 8 (8 on the PCI bus; the driver could not be asked: nvmlInit_v2: "
            "Driver Not Loaded)"])
        self.assertEqual(report["node_check"]["driver"]["unavailable"],
                         "nvmlInit_v2: Driver Not Loaded")


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
            again = subprocess.run([BIN, "report", os.path.join(tmp, "node.json")],
                                   capture_output=True, text=True)
            junit = ET.parse(os.path.join(tmp, "node.xml")).getroot()
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        host = report["nodes"][0]["host"]
        last = proc.stdout.splitlines()[-1]
        self.assertTrue(last.startswith(f"{host} | ERROR: trainproof: inventory: 0 GPUs, "
                                        "expected 8 (none on the PCI bus"), last)
        self.assertIn(f"FAIL inventory: {host}: 0 GPUs, expected 8", proc.stdout)
        self.assertEqual(report["verdict"], "FAIL")
        # `report FILE` reprints it as a node-check's, with its exit code.
        self.assertEqual(again.returncode, 1, again.stderr)
        self.assertTrue(again.stdout.startswith(f"trainproof node-check of {host}\n"), again.stdout)
        self.assertIn("FAIL  inventory", again.stdout)
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


def busy_h200s(count=8):
    """Healthy H200s that, once a load starts (the watch's own NVML session is the process's
    second read), run at their full PCIe link and are capped by SW power only, as under a burn."""
    nvml = healthy_h200s(count)
    for g in nvml["gpus"]:
        g["later"] = {"health": {"pcie": [5, 16], "clock_event_reasons": 0x4, "utilization_pct": 100,
                                 "sm_clock_mhz": 1980, "temperature_c": 64,
                                 "power_mw": 690000}}
    return nvml


def kmsg(*records):
    """/dev/kmsg records stamped `age` seconds before now on CLOCK_MONOTONIC, the clock the kernel
    stamps its log with: (age, message) pairs."""
    now_us = int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6)
    return "\n".join(f"4,{900 + i},{now_us - int(age * 1e6)},-;{message}"
                     for i, (age, message) in enumerate(records))


FULL = ["--level=full", "--health.burn_s=1.5", "--health.sample_s=0.1"]


class UnderLoad(unittest.TestCase):
    """node-check --level=full: a burn (on the CPU here, with the fake driver's GPUs watched
    beside it), each GPU's clock reasons and PCIe link while busy, NVML's XID events during the
    load and the kernel log's before it, each named with its GPU, and the healthy node none."""

    def findings(self, report):
        return [(f["check"], f["status"], f["reason"].split(": ", 1)[1])
                for f in report["nodes"][0]["findings"]]

    def check(self, report, name):
        return [c for c in report["gate"]["checks"] if c["name"] == name][0]

    def test_a_healthy_node_under_load_is_healthy_with_its_figures(self):
        with tempfile.TemporaryDirectory() as tmp:
            proc, report = node_check(tmp, *h200_node(tmp), *FULL, nvml=busy_h200s())
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertTrue(proc.stdout.endswith(" | Healthy\n"), proc.stdout)
        self.assertIn("node-check: burning for 1.5 s", proc.stdout)
        self.assertRegex(proc.stdout, r"the CPU: [0-9.]+ GFLOP/s fp32 GEMM")
        load = report["node_check"]["load"]
        self.assertEqual(len(load["gpus"]), 8)
        for g in load["gpus"]:
            self.assertGreaterEqual(g["samples"], 2, g)
            self.assertEqual(g["busy_pcie"], {"gen": 5, "width": 16}, g)
            self.assertEqual(g["clock_event_samples"]["sw_power_cap"], g["samples"], g)
            self.assertEqual(g["clock_event_samples"]["hw_slowdown"], 0, g)
        self.assertTrue(load["watch_stopped"])
        burn = report["node_check"]["burn"]
        self.assertEqual((burn["backend"], burn["dtype"]), ("cpu", "fp32"))
        self.assertGreater(burn["devices"][0]["tflops"], 0)
        self.assertIn("no NVIDIA driver", burn["why_cpu"])
        self.assertEqual(report["node_check"]["xids"]["during_load"], [])
        self.assertIsNone(report["node_check"]["xids"]["events_unavailable"])
        copies = report["node_check"]["copies"]
        self.assertEqual(copies["backend"], "cpu")
        self.assertGreater(copies["devices"][0]["device_gbps"], 0)
        self.assertRegex(proc.stdout, r"the CPU: memory copy [0-9.]+ GB/s")
        for name in ("load_health", "gpu_burn", "gpu_copies", "xid"):
            self.assertEqual(self.check(report, name)["status"], "pass", self.check(report, name))

    def test_each_fault_under_load_gives_exactly_its_finding_named_with_its_gpu(self):
        # (GPU, what its "later" adds, the check, the status, the finding)
        cases = [
            (5, {"health": {"clock_event_reasons": 0x8 | 0x4}}, "load_health", "fail",
             "clocks held down by HW slowdown in {n} of {n} samples (100%) of the load"),
            (2, {"health": {"pcie": [4, 8]}}, "load_health", "fail",
             "PCIe link at Gen4 x8 while busy (its maximum: Gen5 x16)"),
            (3, {"xid_events": [79]}, "xid", "fail", "XID 79, GPU has fallen off the bus (once, "
             "nvml)"),
            (6, {"health": {"clock_event_reasons": 0x20}}, "load_health", "warn",
             "clocks held down by SW thermal slowdown in {n} of {n} samples (100%) of the load "
             "(hottest 64 C)"),
            (1, {"health": {"ecc": {"uncorrected_volatile": 1}}}, "load_health", "fail",
             "uncorrectable ECC errors rose by 1 (0 -> 1) during the load"),
        ]
        for index, later, check, status, finding in cases:
            nvml = busy_h200s()
            g = nvml["gpus"][index]
            for key, value in later.items():
                if key == "health":
                    g["later"]["health"].update(value)
                else:
                    g["later"][key] = value
            with self.subTest(later=later), tempfile.TemporaryDirectory() as tmp:
                proc, report = node_check(tmp, *h200_node(tmp), *FULL, nvml=nvml)
                self.assertEqual(proc.returncode, 1 if status == "fail" else 0,
                                 proc.stdout + proc.stderr)
                n = report["node_check"]["load"]["gpus"][index]["samples"]
                found = self.findings(report)
                self.assertEqual(len(found), 1, found)
                self.assertEqual(found[0][:2], (check, status), found)
                self.assertIn(f"GPU {index} (GPU-{1000 + index}, {gpu_address(index)}): "
                              + finding.format(n=n), found[0][2])
                self.assertEqual(self.check(report, check)["status"], status)
                if status == "fail":
                    self.assertIn(f"| ERROR: trainproof: {check}: GPU {index}",
                                  proc.stdout.splitlines()[-1])

    def test_a_watch_stuck_in_the_driver_is_named_and_node_check_still_ends(self):
        # GPU 6's driver stops answering once the load starts: the watch is left behind inside it,
        # the driver is not asked again, and node-check ends long before the 300 s read would
        # (node_check's own limit is 60 s).
        nvml = busy_h200s()
        nvml["gpus"][6]["later"]["hang_s"] = 300
        with tempfile.TemporaryDirectory() as tmp:
            proc, report = node_check(tmp, *h200_node(tmp), *FULL, nvml=nvml)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertEqual(self.findings(report), [(
            "load_health", "fail", "the GPU driver: the NVML watch did not come back within its "
            "deadline (the driver may be hung)")])
        self.assertFalse(report["node_check"]["load"]["watch_stopped"])
        after = report["node_check"]["driver_after_load"]
        self.assertIn("not asked again: the NVML watch is stuck in the driver",
                      json.dumps(after))

    def test_the_kernel_logs_xids_of_the_window_are_named_and_a_host_file_moves_them(self):
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "kmsg")
            write(log, kmsg(
                (120, "NVRM: Xid (PCI:0000:28:00): 79, pid='<unknown>', GPU has fallen off"),
                (60, "NVRM: Xid (PCI:0000:28:00): 48, pid=1234, name=python, An uncorrectable "
                     "double bit error (DBE) has been detected"),
                (50, "mlx5_core 0000:1a:00.0: Port module event: module 0, Cable plugged"),
                (40, "NVRM: Xid (PCI:0000:58:00): 13, Graphics Exception: ESR 0x405840")))
            # The kernel's clock starts at boot: ages stay well under the uptime of any test host.
            args = [*h200_node(tmp), f"--test.kernel_log={log}"]
            proc, report = node_check(tmp, *args, "--health.xid_lookback_s=90",
                                      nvml=healthy_h200s())
            self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
            self.assertEqual(self.findings(report), [(
                "xid", "fail", f"GPU 1 (GPU-1001, {gpu_address(1)}): XID 48, double-bit ECC "
                "error (once, kernel log)")])
            xids = report["node_check"]["xids"]
            self.assertEqual([x["xid"] for x in xids["kernel_log"]], [48, 13])
            self.assertEqual(xids["lookback_s"], 90)
            # A site that has seen XID 13 from a bad GPU makes it fatal; the default window reads
            # the 79 too.
            hosts = args[0].split("=", 1)[1]
            with open(hosts, "a") as f:
                f.write("[health]\nfatal_xids = 13\n")
            proc, report = node_check(tmp, *args, nvml=healthy_h200s())
            self.assertEqual([(c, s, r.split(":")[0]) for c, s, r in self.findings(report)],
                             [("xid", "fail", "GPU 1 (GPU-1001, 0000"),
                              ("xid", "fail", "GPU 1 (GPU-1001, 0000"),
                              ("xid", "fail", "GPU 4 (GPU-1004, 0000")])
            with open(hosts, "a") as f:
                f.write("fatal_xid = 13\n")
            proc, _ = node_check(tmp, *args, nvml=healthy_h200s())
            self.assertEqual(proc.returncode, 2, proc.stderr)
            self.assertIn("unknown [health] key 'fatal_xid'", proc.stderr)

    def test_an_unreadable_kernel_log_makes_the_xid_check_na_with_the_reason(self):
        with tempfile.TemporaryDirectory() as tmp:
            proc, report = node_check(tmp, f"--gate.file={DEV_VM}",
                                      f"--test.kernel_log={tmp}/absent")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        check = self.check(report, "xid")
        self.assertEqual(check["status"], "n/a", check)
        self.assertIn("absent: No such file or directory", check["reason"])

    def test_a_host_files_floor_fails_a_device_below_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            hosts = os.path.join(tmp, "vm.ini")
            with open(DEV_VM) as f:
                write(hosts, f.read() + "\n[health]\nmin_gemm_tflops = 1000\n"
                      "min_memory_copy_gbps = 100000\n")
            proc, report = node_check(tmp, f"--gate.file={hosts}", *FULL)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        found = self.findings(report)
        self.assertEqual([(c, s) for c, s, _ in found], [("gpu_burn", "fail"),
                                                        ("gpu_copies", "fail")], found)
        self.assertRegex(found[0][2], r"^the CPU: GEMM [0-9.]+ TFLOP/s, .*below the host file's "
                                      r"floor of 1000 TFLOP/s")
        self.assertIn("below the host file's floor of 100000 GB/s", found[1][2])

    def test_this_vm_under_load_is_healthy(self):
        with tempfile.TemporaryDirectory() as tmp:
            proc, report = node_check(tmp, f"--gate.file={DEV_VM}", *FULL)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertTrue(proc.stdout.endswith(" | Healthy\n"), proc.stdout)
        self.assertEqual(self.check(report, "load_health")["status"], "n/a")
        self.assertEqual(self.check(report, "gpu_burn")["status"], "pass")


class InAcceptsPreflight(unittest.TestCase):
    """accept judges the same inventory on every node in its preflight: on 3 pretend nodes, the
    third reads a fixture tree with an InfiniBand port where the host file expects none, and that
    node alone carries the finding, in its findings, its drain line and the JUnit file."""

    def test_the_node_that_misses_its_inventory_is_named_by_the_preflight(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "sys")
            ib_tree(root, [("mlx5_0", "400 Gb/sec (4X NDR)", "4: ACTIVE")])
            hosts = os.path.join(tmp, "cpu.ini")
            write(hosts, "[inventory]\nnics = 0\nmin_cpus = 1")
            junit = os.path.join(tmp, "accept.xml")
            run = mpirun(3, "--accept.stages=preflight", f"--gate.file={hosts}",
                         "--test.split_hosts=3", f"--test.sysfs_root={root}",
                         "--test.sysfs_root_rank=2", f"--junit={junit}", subcommand="accept",
                         scenario=TINY)
            suite = ET.parse(junit).getroot()
        self.assertEqual(run.returncode, 1, run)
        check = [c for c in run.report["gate"]["checks"] if c["name"] == "inventory"][0]
        self.assertEqual(check["status"], "fail", check)
        host = run.report["context"]["nodes"][2]["host"]
        self.assertIn(f"1 of 3 node(s) against gate.file '{hosts}' miss their inventory",
                      check["reason"])
        flagged = {n["host"]: n["findings"] for n in run.report["nodes"] if n["flagged"]}
        inventory = {h: [f["reason"] for f in found if f["check"] == "inventory"]
                     for h, found in flagged.items()}
        inventory = {h: why for h, why in inventory.items() if why}
        self.assertEqual(inventory, {host: [
            f"{host}: 1 InfiniBand port(s), expected 0 (found mlx5_0 port 1)"]})
        failures = [f.get("message", "") + (f.text or "") for f in suite.iter("failure")]
        self.assertTrue(any("1 InfiniBand port(s), expected 0" in f for f in failures), failures)
        # The topology preflight's reasons follow, each with its check's name once.
        topology = [f["reason"] for f in flagged[host] if f["check"] == "topology"]
        self.assertTrue(topology and all(r.startswith("topology: ") and
                                         not r.startswith("topology: topology: ")
                                         for r in topology), topology)



def drain_lines(report_path, min_status="fail"):
    proc = subprocess.run([BIN, "report", "nodes", report_path, "--format=drain",
                           f"--min-status={min_status}"], capture_output=True, text=True,
                          timeout=60)
    return proc.stdout


class AroundAcceptsLoad(unittest.TestCase):
    """accept reads each node in its preflight and again after its last stage: a GPU's health at
    rest is the preflight's `gpu_health`, and what rose in between is `health_change`, each
    finding its node's alone, in the report, the drain line and the JUnit file. On 3 pretend
    nodes, only the third node's first rank (rank 2) sees the fake GPUs or the fixture tree."""

    def accept(self, tmp, *args, stages="preflight", nvml=None):
        self.report = os.path.join(tmp, "accept.json")
        self.junit = os.path.join(tmp, "accept.xml")
        run = mpirun(3, f"--accept.stages={stages}", "--test.split_hosts=3",
                     f"--junit={self.junit}", "--report", self.report, *args,
                     subcommand="accept", scenario=TINY, env=fake_nvml_env(tmp, nvml))
        with open(self.report) as f:
            run.report = json.load(f)
        self.failures = [f.get("message", "") + (f.text or "")
                         for f in ET.parse(self.junit).getroot().iter("failure")]
        self.drain = drain_lines(self.report)
        self.drain_on_warn = drain_lines(self.report, "warn")
        return run

    def findings(self, run, check):
        return {n["host"]: [f["reason"] for f in n["findings"] if f["check"] == check]
                for n in run.report["nodes"]
                if any(f["check"] == check for f in n.get("findings", []))}

    def check(self, run, name):
        return [c for c in run.report["gate"]["checks"] if c["name"] == name][0]

    def test_a_gpu_error_at_rest_and_one_that_appears_during_the_load_are_each_named(self):
        # Rank 2's reads of its node: the preflight's (1), the watch's own (2), the preflight's
        # end (3), the train stage's end (4): GPU 5's errors appear in the train stage.
        nvml = healthy_h200s()
        nvml["ranks"] = [2]
        nvml["later_from_read"] = 4
        nvml["gpus"][1]["health"]["remapped_rows"] = [2, 0, 1, 0]
        nvml["gpus"][5]["later"] = {"health": {"ecc": {"uncorrected_volatile": 2}}}
        with tempfile.TemporaryDirectory() as tmp:
            run = self.accept(tmp, stages="preflight,train", nvml=nvml)
        self.assertEqual(run.returncode, 1, run)
        host = run.report["context"]["nodes"][2]["host"]
        self.assertEqual(self.findings(run, "gpu_health"), {host: [
            f"{host}: GPU 1 (GPU-1001, 0000:28:00.0): a row remap is pending (it takes effect "
            "at the next reset)"]})
        self.assertEqual(self.findings(run, "health_change"), {host: [
            f"{host}: GPU 5 (GPU-1005, 0000:68:00.0): uncorrectable ECC errors rose by 2 (0 -> 2) "
            "during the train stage"]})
        self.assertEqual(self.check(run, "gpu_health")["status"], "fail")
        self.assertIn("(1 of 3 node(s) judged)", self.check(run, "gpu_health")["reason"])
        self.assertEqual(self.check(run, "health_change")["stage"], "preflight")
        self.assertIn(host, self.drain)
        self.assertEqual(len([line for line in self.drain.splitlines() if "State=DRAIN" in line]),
                         1, self.drain)
        for what in ("a row remap is pending", "uncorrectable ECC errors rose by 2"):
            self.assertTrue(any(what in f for f in self.failures), (what, self.failures))

    def test_a_gpu_that_leaves_the_driver_and_a_link_that_goes_down_are_named(self):
        nvml = healthy_h200s()
        nvml["ranks"] = [2]
        nvml["gpus"][2]["later"] = {"missing": True}
        nvml["gpus"][6]["later"] = {"nvlinks_up": 17}
        with tempfile.TemporaryDirectory() as tmp:
            run = self.accept(tmp, nvml=nvml)
        host = run.report["context"]["nodes"][2]["host"]
        self.assertEqual(self.findings(run, "health_change"), {host: [
            f"{host}: GPU 2 (GPU-1002, 0000:38:00.0): left the driver during the preflight stage",
            f"{host}: GPU 6 (GPU-1006, 0000:78:00.0): 1 NVLink link(s) went down (18 -> 17 up) "
            "during the preflight stage"]})
        self.assertEqual(self.findings(run, "gpu_health"), {})
        self.assertEqual(self.check(run, "gpu_health")["status"], "pass")

    def test_a_throttle_a_narrow_link_while_busy_and_a_fatal_xid_are_named(self):
        # What the watch reads from the preflight to the last stage's end (the process's second
        # NVML session): GPU 5 held down by HW slowdown, GPU 2 busy on a Gen4 x8 link, an XID 79
        # on GPU 3, and GPU 0 at Gen1 while idle, which says nothing of its link.
        nvml = healthy_h200s()
        nvml["ranks"] = [2]
        nvml["gpus"][5]["later"] = {"health": {"clock_event_reasons": 0x8 | 0x4}}
        nvml["gpus"][2]["later"] = {"health": {"pcie": [4, 8], "utilization_pct": 100}}
        nvml["gpus"][3]["later"] = {"xid_events": [79]}
        nvml["gpus"][0]["later"] = {"health": {"pcie": [1, 16], "utilization_pct": 0}}
        with tempfile.TemporaryDirectory() as tmp:
            run = self.accept(tmp, stages="preflight,train", nvml=nvml)
        self.assertEqual(run.returncode, 1, run)
        host = run.report["context"]["nodes"][2]["host"]
        load = self.findings(run, "load_health")
        self.assertEqual(list(load), [host], load)
        self.assertEqual(len(load[host]), 2, load)
        self.assertEqual(load[host][0], f"{host}: GPU 2 (GPU-1002, 0000:38:00.0): PCIe link at "
                                        "Gen4 x8 while busy (its maximum: Gen5 x16)")
        self.assertRegex(load[host][1], rf"^{host}: GPU 5 \(GPU-1005, 0000:68:00.0\): clocks "
                                        r"held down by HW slowdown in (\d+) of \1 samples")
        self.assertEqual(self.findings(run, "xid"), {host: [
            f"{host}: GPU 3 (GPU-1003, 0000:48:00.0): XID 79, GPU has fallen off the bus (once, "
            "nvml)"]})
        for name in ("load_health", "xid"):
            check = self.check(run, name)
            self.assertEqual((check["status"], check["stage"]), ("fail", "preflight"), check)
            self.assertIn("(1 of 3 node(s) judged)", check["reason"])
        self.assertEqual(len([line for line in self.drain.splitlines() if "State=DRAIN" in line]),
                         1, self.drain)
        self.assertIn(host, self.drain)
        # Each failed check's case names its count and first finding.
        for what in ("2 finding(s) on 1 node(s)", "Gen4 x8 while busy", "XID 79"):
            self.assertTrue(any(what in f for f in self.failures), (what, self.failures))

    def test_rdma_port_counters_that_rise_name_their_port(self):
        with tempfile.TemporaryDirectory() as tmp:
            before, after = os.path.join(tmp, "before"), os.path.join(tmp, "after")
            for root in (before, after):
                ib_tree(root, [("mlx5_0", "400 Gb/sec (4X NDR)", "4: ACTIVE"),
                               ("mlx5_1", "400 Gb/sec (4X NDR)", "4: ACTIVE")])
            write(os.path.join(after, "class", "infiniband", "mlx5_1", "ports", "1", "counters",
                               "symbol_error"), "250")
            run = self.accept(tmp, f"--test.sysfs_root={before}",
                              f"--test.sysfs_root_after={after}", "--test.sysfs_root_rank=2")
        host = run.report["context"]["nodes"][2]["host"]
        self.assertEqual(self.findings(run, "health_change"), {host: [
            f"{host}: mlx5_1 port 1: symbol_error rose by 250 (0 -> 250) during the preflight "
            "stage"]})
        change = self.check(run, "health_change")
        self.assertEqual(change["status"], "warn", change)
        self.assertIn("(1 of 3 node(s) judged)", change["reason"])
        # A WARN finding: its node is drained only when asked to drain on WARN.
        self.assertNotIn(host, self.drain)
        self.assertIn(host, self.drain_on_warn)

    def test_a_ports_findings_name_the_rail_whose_ranks_use_it(self):
        # Two ranks on each of 3 pretend nodes: on the third, local rank 0's traffic leaves by
        # mlx5_0 and local rank 1's by mlx5_1 (fabric/rank_nic.h), so each port is its rail's.
        with tempfile.TemporaryDirectory() as tmp:
            before, after = os.path.join(tmp, "before"), os.path.join(tmp, "after")
            for root in (before, after):
                ib_tree(root, [("mlx5_0", "400 Gb/sec (4X NDR)", "4: ACTIVE"),
                               ("mlx5_1", "400 Gb/sec (4X NDR)", "4: ACTIVE")])
            for device, count in (("mlx5_0", "7"), ("mlx5_1", "250")):
                write(os.path.join(after, "class", "infiniband", device, "ports", "1", "counters",
                                   "symbol_error"), count)
            report = os.path.join(tmp, "accept.json")
            run = mpirun(6, "--accept.stages=preflight", "--test.split_hosts=3",
                         f"--test.sysfs_root={before}", f"--test.sysfs_root_after={after}",
                         "--test.sysfs_root_rank=4", "--report", report, subcommand="accept",
                         scenario=TINY)
            with open(report) as f:
                run.report = json.load(f)
        host = run.report["context"]["nodes"][2]["host"]
        self.assertEqual(self.findings(run, "health_change"), {host: [
            f"{host}: mlx5_0 port 1 (rail 0): symbol_error rose by 7 (0 -> 7) during the "
            "preflight stage",
            f"{host}: mlx5_1 port 1 (rail 1): symbol_error rose by 250 (0 -> 250) during the "
            "preflight stage"]})

    def test_level_full_burns_each_node_once_in_the_preflight_beside_the_watch(self):
        # Three pretend nodes: each node's first rank burns (the CPU here), the others wait; the
        # third node's fake GPUs are watched through the burn, GPU 4 held down by HW slowdown
        # from the first read on, which the watch started before the burn names.
        nvml = healthy_h200s()
        nvml["ranks"] = [2]
        nvml["gpus"][4]["later"] = {"health": {"clock_event_reasons": 0x8}}
        with tempfile.TemporaryDirectory() as tmp:
            run = self.accept(tmp, *FULL, nvml=nvml)
        self.assertEqual(run.returncode, 1, run)
        burn = run.report["preflight"]["burn"]
        hosts = [n["host"] for n in run.report["context"]["nodes"]]
        self.assertEqual([n["host"] for n in burn["nodes"]], hosts)
        for node in burn["nodes"]:
            self.assertEqual(node["backend"], "cpu", node)
            self.assertEqual([d["gpu"] for d in node["devices"]], [-1], node)
            self.assertGreater(node["devices"][0]["gemm_tflops"], 0, node)
            self.assertGreater(node["devices"][0]["memory_copy_gbps"], 0, node)
            self.assertIsNone(node["devices"][0]["h2d_gbps"], node)  # a CPU has no host copy
        self.assertEqual(burn["measured_again"], [])
        self.assertEqual(burn["seconds"], 1.5)
        for name in ("gpu_burn", "gpu_copies"):
            check = self.check(run, name)
            self.assertEqual((check["status"], check["stage"]), ("pass", "preflight"), check)
            self.assertIn("on 3 of 3 node(s)", check["reason"])
        load = self.findings(run, "load_health")
        self.assertEqual(list(load), [hosts[2]], load)
        self.assertRegex(load[hosts[2]][0], r"GPU 4 \(GPU-1004, [0-9a-f:.]+\): clocks held down by "
                                            r"HW slowdown")

    def test_level_full_needs_the_preflight_and_a_known_level(self):
        for args, named in ((["--level=full", "--accept.stages=sweep"], "--level=full"),
                            (["--level=medium", "--accept.stages=preflight"], "medium")):
            with tempfile.TemporaryDirectory() as tmp:
                run = mpirun(2, *args, subcommand="accept", scenario=TINY,
                             env=fake_nvml_env(tmp, None))
            self.assertEqual(run.returncode, 2, run)
            self.assertIn(named, run.stdout + run.stderr)

    def test_a_healthy_job_has_nothing_to_compare_on_this_vm_and_says_so(self):
        with tempfile.TemporaryDirectory() as tmp:
            run = self.accept(tmp)
        self.assertEqual(self.check(run, "gpu_health")["status"], "n/a")
        self.assertIn("the GPU driver could not be asked", self.check(run, "gpu_health")["reason"])
        self.assertEqual(self.check(run, "health_change")["status"], "n/a")
        self.assertEqual(self.findings(run, "health_change"), {})
        for name in ("load_health", "xid"):
            self.assertEqual(self.check(run, name)["status"], "n/a")
            self.assertIn("the GPU driver could not be asked", self.check(run, name)["reason"])


SMALL_SWEEP = ["--sweep.max_bytes=65536", "--sweep.iters=3"]


class ReportHostfile(unittest.TestCase):
    """`report hostfile` end to end on this VM: two golden accept runs and a node-check report
    become a host file whose [gate], [reference] and [inventory] a later run reads as its
    --gate.file (docs/acceptance.md, "A host file from golden runs")."""

    def test_golden_runs_and_a_node_check_become_a_host_file_a_run_reads(self):
        with tempfile.TemporaryDirectory() as tmp:
            golden = []
            for i in (1, 2):
                report = os.path.join(tmp, f"golden-{i}.json")
                run = mpirun(2, "--accept.stages=sweep,train", *SMALL_SWEEP, "--report", report,
                             subcommand="accept", scenario=TINY)
                self.assertIn(run.returncode, (0, 1), run)
                golden.append(report)
            proc, _ = node_check(tmp)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            drafted = subprocess.run([BIN, "report", "hostfile", *golden,
                                      os.path.join(tmp, "node.json")],
                                     capture_output=True, text=True, timeout=60)
            self.assertEqual(drafted.returncode, 0, drafted.stderr)
            text = drafted.stdout
            for line in ("[gate]", "[reference]", "[inventory]", "nodes = 1",
                         "ranks_per_node = 2", "gpus = 0", "min_cpus = "):
                self.assertIn(line, text)
            self.assertRegex(text, r"# The worst golden figure, [0-9.]+ \(.*golden-[12]\.json\), "
                                   r"x 0\.8\nmin_busbw_gbps = [0-9.]+\n")
            hosts = os.path.join(tmp, "drafted.ini")
            with open(hosts, "w") as f:
                f.write(text)
            # A run reads it as its gate file: its thresholds name the file as their source,
            # and the node meets the inventory it was drafted from.
            run = mpirun(2, "--accept.stages=preflight,sweep,train", *SMALL_SWEEP,
                         f"--gate.file={hosts}", subcommand="accept", scenario=TINY)
            self.assertIn(run.returncode, (0, 1), run)
            sources = {t["check"]: t["source"] for t in run.report["gate"]["thresholds"]}
            self.assertIn(hosts, sources.get("min_busbw_gbps", ""), sources)
            inventory = [c for c in run.report["gate"]["checks"] if c["name"] == "inventory"][0]
            self.assertEqual(inventory["status"], "pass", inventory)
            # Bad input names what is wrong: a share out of range, a file of other work.
            bad = subprocess.run([BIN, "report", "hostfile", golden[0], "--share=0.5"],
                                 capture_output=True, text=True, timeout=60)
            self.assertEqual(bad.returncode, 2, bad.stderr)
            self.assertIn("--share must lie in (0.6, 0.95), got 0.5", bad.stderr)


if __name__ == "__main__":
    main()
