"""What a run records is always writable and never leaks a secret: bytes that are not UTF-8 (in an
environment value, a scenario comment, checkpoint.dir) are escaped reversibly and listed, the
report is written after a complete run, and secrets inside values, command lines and a drill's
launcher are redacted, in the report and in the drill's files, which only their owner can read."""
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
import unittest

from harness import BIN, MPIEXEC, TINY, main

LATIN1 = b"r\xe9sum\xe9"  # "résumé" in Latin-1: not UTF-8


def unescape(text):
    """The bytes a string listed in context.escaped_strings stands for (docs/report.md)."""
    out = bytearray()
    i = 0
    while i < len(text):
        if text.startswith("\\\\", i):
            out += b"\\"
            i += 2
        elif re.match(r"\\x[0-9A-F]{2}", text[i:i + 4]):
            out.append(int(text[i + 2:i + 4], 16))
            i += 4
        else:
            out += text[i].encode()
            i += 1
    return bytes(out)


def scenario_with(tmp, extra):
    """tiny.ini with `extra` (bytes) appended."""
    path = os.path.join(tmp, b"scenario.ini")
    with open(TINY, "rb") as f, open(path, "wb") as out:
        out.write(f.read() + extra)
    return path


def train(tmp, *args, env=None, ranks=2):
    report = os.path.join(tmp, b"report.json")
    cmd = [os.fsencode(MPIEXEC), b"-np", str(ranks).encode(), b"--oversubscribe",
           os.fsencode(BIN), b"train", b"--report", report, b"--log.level=warn", *args]
    proc = subprocess.run(cmd, capture_output=True, timeout=240,
                          env={**os.environb, **(env or {})})
    text = None
    if os.path.exists(report):
        with open(report, "rb") as f:
            text = f.read()
    return proc, text


class Hardening(unittest.TestCase):
    def setUp(self):
        self.tmp = os.fsencode(tempfile.mkdtemp(prefix="trainproof-hardening-"))

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_bytes_that_are_not_utf8_are_escaped_and_the_report_is_written(self):
        scenario = scenario_with(self.tmp, b"# " + LATIN1 + b" \\ comment\n")
        ckpt = os.path.join(self.tmp, b"ckpt-" + LATIN1)
        proc, text = train(self.tmp, b"--scenario", scenario, b"--checkpoint.dir=" + ckpt,
                           b"--checkpoint.every=4",
                           env={b"SLURM_JOB_NAME": LATIN1, b"SLURM_TP_" + LATIN1: b"key"})
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIsNotNone(text, "no report after a complete run")
        report = json.loads(text)
        c = report["context"]
        self.assertEqual(c["environment"]["SLURM_JOB_NAME"], "r\\xE9sum\\xE9")
        self.assertEqual(unescape(c["environment"]["SLURM_JOB_NAME"]), LATIN1)
        # The escaped path names the real folder, which holds the checkpoints.
        real = unescape(report["checkpoint"]["dir"])
        self.assertEqual(real, ckpt)
        self.assertTrue(os.path.isdir(os.path.join(real, b"step-00000012")))
        self.assertEqual(unescape(c["checkpoint_filesystem"]["path"]), ckpt)
        # A backslash in an escaped string is doubled, so the scenario text reads back exactly.
        with open(scenario, "rb") as f:
            self.assertEqual(unescape(c["scenario_text"]), f.read())
        for pointer in ("/context/environment/SLURM_JOB_NAME", "/checkpoint/dir",
                        "/context/scenario_text", "/context/options/checkpoint.dir",
                        "/context/checkpoint_filesystem/path"):
            self.assertIn(pointer, c["escaped_strings"])
        self.assertIn("/context/environment/SLURM_TP_r\\xE9sum\\xE9", c["escaped_keys"])
        self.assertTrue(any("not UTF-8" in w for w in c["warnings"]), c["warnings"])
        # Every listed pointer resolves to an escaped string.
        for pointer in c["escaped_strings"]:
            node = report
            for part in pointer.split("/")[1:]:
                part = part.replace("~1", "/").replace("~0", "~")
                node = node[int(part)] if isinstance(node, list) else node[part]
            self.assertIsInstance(node, str)

    def test_secrets_in_values_and_command_lines_are_redacted(self):
        secrets = {
            b"OMPI_MCA_tp_url": b"https://alice:tp-url-pass@example.org/repo",
            b"UCX_TP_HEADER": b"Bearer tp-bearer-0123456789",
            b"FI_TP_OPTIONS": b"mode=fast,token=tp-pair-token,level=2",
            b"OMPI_MCA_tp_hf": b"hf_Qm7XpL2vKd9RtY4wZs8NbJ3cHf6GaE1uVo",
            b"OMPI_MCA_tp_tag": b"5f2a9c81d04e7b36a1c9e8f20b7d4c53",
        }
        kept = {
            b"SLURM_TP_TAG": b"5f2a9c81d04e7b36a1c9e8f20b7d4c53",
            b"NCCL_TP_TAG": b"5f2a9c81d04e7b36a1c9e8f20b7d4c53",
            b"CUDA_VISIBLE_DEVICES": b"GPU-8f6c9b1e-3a2d-4c5b-9e8f-1a2b3c4d5e6f",
            b"SLURM_JOB_ID": b"4242",
        }
        scenario = scenario_with(self.tmp, b"# password = tp-scenario-pass\n"
                                           b"# see https://bob:tp-scenario-url@host/x\n")
        watchdog = os.path.join(self.tmp, b"hb-secret=tp-argv-secret")
        proc, text = train(self.tmp, b"--scenario", scenario, b"--watchdog.dir=" + watchdog,
                           env={**secrets, **kept})
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        for leaked in (b"tp-url-pass", b"tp-bearer-0123456789", b"tp-pair-token",
                       b"Qm7XpL2vKd9RtY4wZs8NbJ3cHf6GaE1uVo", b"tp-scenario-pass",
                       b"tp-scenario-url", b"tp-argv-secret"):
            self.assertNotIn(leaked, text)
        env = json.loads(text)["context"]["environment"]
        self.assertEqual(env["OMPI_MCA_tp_url"], "https://<redacted>@example.org/repo")
        self.assertEqual(env["UCX_TP_HEADER"], "Bearer <redacted>")
        self.assertEqual(env["FI_TP_OPTIONS"], "mode=fast,token=<redacted>,level=2")
        self.assertEqual(env["OMPI_MCA_tp_hf"], "<redacted>")
        self.assertEqual(env["OMPI_MCA_tp_tag"], "<redacted>")
        # mpirun's own transport key is a secret by name.
        if "OMPI_MCA_orte_precondition_transports" in env:
            self.assertEqual(env["OMPI_MCA_orte_precondition_transports"], "<redacted>")
        for name, value in kept.items():
            self.assertEqual(env[name.decode()], value.decode(), name)
        c = json.loads(text)["context"]
        self.assertIn("password = <redacted>", c["scenario_text"])
        self.assertIn("[model]", c["scenario_text"])
        self.assertTrue(c["options"]["watchdog.dir"].endswith("hb-secret=<redacted>"))

    def test_drill_files_are_private_and_hold_no_secret(self):
        ckpt = os.path.join(self.tmp, b"ckpt-" + LATIN1)
        report = os.path.join(self.tmp, b"drill.json")
        launcher = f"env TP_API_TOKEN=tp-drill-token-77 {MPIEXEC} -np 2 --oversubscribe"
        cmd = [os.fsencode(BIN), b"drill", b"--launcher", launcher.encode(), b"--scenario",
               os.fsencode(TINY), b"--checkpoint.dir=" + ckpt, b"--checkpoint.every=4",
               b"--train.steps=4", b"--log.level=warn", b"--report", report]
        proc = subprocess.run(cmd, capture_output=True, timeout=240)
        self.assertNotIn(b"tp-drill-token-77", proc.stdout + proc.stderr)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        with open(report, "rb") as f:
            text = f.read()
        self.assertNotIn(b"tp-drill-token-77", text)
        drill = json.loads(text)
        self.assertIn("TP_API_TOKEN=<redacted>", drill["drill"]["launcher"])
        self.assertIn("/drill/folder", drill["context"]["escaped_strings"])
        folder = unescape(drill["drill"]["folder"])
        self.assertTrue(folder.startswith(ckpt))
        self.assertEqual(stat.S_IMODE(os.stat(folder).st_mode), 0o700)
        self.assertEqual(stat.S_IMODE(os.stat(report).st_mode), 0o600)
        files = 0
        for root, dirs, names in os.walk(folder):
            for name in names:
                path = os.path.join(root, name)
                self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600, path)
                with open(path, "rb") as f:
                    self.assertNotIn(b"tp-drill-token-77", f.read(), path)
                files += 1
        self.assertGreater(files, 0)
        with open(os.path.join(folder, b"run-0", b"command.txt"), "rb") as f:
            self.assertIn(b"TP_API_TOKEN=<redacted>", f.read())


if __name__ == "__main__":
    main()
