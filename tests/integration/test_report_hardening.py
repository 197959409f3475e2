"""What a run records is always writable: bytes that are not UTF-8 (in an environment value, a
scenario comment, checkpoint.dir) are escaped reversibly and listed, and the report is written
after a complete run."""
import json
import os
import re
import shutil
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


if __name__ == "__main__":
    main()
