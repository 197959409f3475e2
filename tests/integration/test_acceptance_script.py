"""scripts/acceptance.sh as a hostile or unlucky user meets it: every option is checked before
anything runs (exit 2), a launch that fails without writing this run's report is exit 3 and never a
verdict, and the reports of an earlier run in the output folder are moved aside, never merged
(docs/acceptance.md, "One command")."""
import glob
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from harness import BIN, SCENARIOS, main

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "acceptance.sh")
SMOKE = os.path.join(SCENARIOS, "accept-smoke.ini")


class AcceptanceScript(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="trainproof-acceptance-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.out = os.path.join(self.tmp, "out")

    def script(self, *args, launcher=None):
        env = dict(os.environ, TRAINPROOF=os.path.abspath(BIN))
        if launcher:
            env["LAUNCHER"] = launcher
        return subprocess.run([SCRIPT, *args], capture_output=True, text=True, env=env,
                              timeout=300)

    def test_every_option_is_checked_before_anything_runs(self):
        touched = os.path.join(self.tmp, "touched")
        a_file = os.path.join(self.tmp, "a-file")
        open(a_file, "w").close()
        for args, named in [(["-n", f"2; touch {touched} #"], "-n"), (["-n", "abc"], "-n"),
                            (["-n", "0"], "-n"), (["-o", a_file], "is a file, not a folder"),
                            (["-s", os.path.join(self.tmp, "none.ini")], "-s"),
                            (["-g", os.path.join(self.tmp, "none.ini")], "-g"), (["-f", ""], "-f")]:
            run = self.script(*args)
            self.assertEqual(run.returncode, 2, (args, run.stdout, run.stderr))
            self.assertIn(named, run.stderr, args)
            self.assertNotIn("== 1/3", run.stdout, "nothing ran")
        self.assertFalse(os.path.exists(touched), "the value never reaches a shell")

    def test_a_launcher_that_fails_is_no_verdict_and_an_earlier_pass_is_never_merged(self):
        # An earlier run's reports, all PASS, left in the output folder.
        os.makedirs(self.out)
        for name in ("accept.json", "drill.json", "acceptance.json"):
            with open(os.path.join(self.out, name), "w") as f:
                json.dump({"schema": "trainproof.report/2", "verdict": "PASS"}, f)
        # srun's way of failing a step it cannot start: exit 1, as a FAIL verdict would be.
        launcher = os.path.join(self.tmp, "failing-launcher")
        with open(launcher, "w") as f:
            f.write("#!/bin/sh\necho 'srun: error: Unable to create step for job 42' >&2\n"
                    "exit 1\n")
        os.chmod(launcher, 0o755)
        run = self.script("-s", SMOKE, "-o", self.out, launcher=launcher)
        self.assertEqual(run.returncode, 3, (run.stdout, run.stderr))
        self.assertIn("wrote no report of this run", run.stdout)
        self.assertNotIn("== 2/3", run.stdout, "no drill after a failed launch")
        self.assertNotIn("PASS", run.stdout)
        self.assertFalse(os.path.exists(os.path.join(self.out, "acceptance.json")))
        aside = glob.glob(os.path.join(self.out, "earlier-*"))
        self.assertEqual(len(aside), 1, os.listdir(self.out))
        self.assertEqual(sorted(os.listdir(aside[0])),
                         ["accept.json", "acceptance.json", "drill.json"])
        self.assertIn(f"earlier reports moved to {aside[0]}", run.stdout)


if __name__ == "__main__":
    main()
