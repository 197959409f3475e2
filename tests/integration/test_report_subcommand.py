"""`trainproof report FILE` reprints the run's summary and exits with its verdict."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from harness import direct, main, mpirun


class ReportSubcommand(unittest.TestCase):
    def test_reprints_summary_and_follows_verdict(self):
        run = mpirun(2)
        self.assertEqual(run.returncode, 0, run)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "r.json")
            with open(path, "w") as f:
                json.dump(run.report, f)
            again = direct("report", path)
            self.assertEqual(again.returncode, 0, again)
            self.assertIn(again.stdout, run.stdout)  # the run adds only the report path

            run.report["verdict"] = "FAIL"
            with open(path, "w") as f:
                json.dump(run.report, f)
            self.assertEqual(direct("report", path).returncode, 1)

            with open(path, "w") as f:
                f.write("{not json")
            bad = direct("report", path)
            self.assertEqual(bad.returncode, 2)
            self.assertIn(path, bad.stderr)
        self.assertEqual(direct("report", "/nonexistent.json").returncode, 2)

    def test_compare_names_the_metric_that_fell(self):
        run = mpirun(2)
        self.assertEqual(run.returncode, 0, run)
        with tempfile.TemporaryDirectory() as tmp:
            golden, fresh = os.path.join(tmp, "golden.json"), os.path.join(tmp, "new.json")
            with open(golden, "w") as f:
                json.dump(run.report, f)
            same = direct("report", "compare", golden, golden)
            self.assertEqual(same.returncode, 0, same)
            self.assertIn("verdict: PASS", same.stdout)
            slower = json.loads(json.dumps(run.report))
            slower["train"]["samples_per_s"] *= 0.5
            slower["context"]["world_size"] = 4
            with open(fresh, "w") as f:
                json.dump(slower, f)
            fell = direct("report", "compare", golden, fresh)
            self.assertEqual(fell.returncode, 1, fell)
            line = next(l for l in fell.stdout.splitlines() if l.startswith("samples/s"))
            self.assertIn("FAIL: fell to 50% of golden", line)
            self.assertIn("note: world sizes differ: golden 2, new 4", fell.stdout)
            self.assertEqual(direct("report", "compare", golden, fresh, "--tolerance", "0.4")
                             .returncode, 0)
            bad = direct("report", "compare", golden, fresh, "--tolerance", "0")
            self.assertEqual(bad.returncode, 2, bad)
            self.assertIn("--tolerance", bad.stderr)
            self.assertEqual(direct("report", "compare", golden).returncode, 2)
            # Each row carries its unit, times in milliseconds as the summary shows them.
            step = next(l for l in same.stdout.splitlines() if l.startswith("step p50"))
            self.assertIn(" ms ", step)
            # A training report against a sweep's has nothing to compare: exit 2, naming both.
            sweep_report = os.path.join(tmp, "sweep.json")
            swept = mpirun(2, "--sweep.ops=allreduce", "--sweep.max_bytes=4096",
                           subcommand="sweep")
            self.assertEqual(swept.returncode, 0, swept)
            with open(sweep_report, "w") as f:
                json.dump(swept.report, f)
            unrelated = direct("report", "compare", golden, sweep_report)
            self.assertEqual(unrelated.returncode, 2, unrelated)
            self.assertIn("is a train report and", unrelated.stderr)
            self.assertIn("a sweep report, with no metric that both hold", unrelated.stderr)

    def test_merge_judges_the_drill_against_the_accept_gate(self):
        run = mpirun(2)
        self.assertEqual(run.returncode, 0, run)
        limit = {"check": "max_rto_s", "direction": "at_most", "limit": 60,
                 "source": "command line", "stage": "drill"}
        accept = json.loads(json.dumps(run.report))
        accept["accept"] = {"stages": ["train"]}
        accept["gate"]["thresholds"] = [limit]
        accept["gate"]["warn_margin"] = 0.05
        accept["gate"]["checks"].append({
            "name": "max_rto_s", "value": None, "threshold": 60, "status": "n/a",
            "reason": "not measured: stage drill did not run", "direction": "at_most",
            "source": "command line"})

        def drill(rto_s):
            # The drill's final run trained with faults: its train section must not win.
            report = json.loads(json.dumps(run.report))
            report["train"]["final_digest"] = "faulted"
            report["drill"] = {"verdict": "PASS", "rto_s": rto_s, "rpo_steps": 2,
                               "redone_step_seconds": 0.5, "failures": [{"rto_s": rto_s}]}
            report["gate"]["checks"].append({
                "name": "drill", "value": "PASS", "threshold": "digest match",
                "status": "pass", "reason": "final digest matches the reference"})
            return report

        with tempfile.TemporaryDirectory() as tmp:
            paths = {name: os.path.join(tmp, name + ".json")
                     for name in ("accept", "drill", "slow", "merged")}
            for name, report in (("accept", accept), ("drill", drill(30.0)),
                                 ("slow", drill(90.0))):
                with open(paths[name], "w") as f:
                    json.dump(report, f)

            ok = direct("report", "merge", paths["accept"], paths["drill"],
                        "--report", paths["merged"])
            self.assertEqual(ok.returncode, 0, ok)
            with open(paths["merged"]) as f:
                merged = json.load(f)
            # A passing RTO leaves the run's own verdict (WARN on a crowded machine).
            self.assertEqual(merged["verdict"], run.report["verdict"])
            self.assertEqual(merged["train"]["final_digest"], run.report["train"]["final_digest"])
            self.assertEqual(merged["drill"]["rto_s"], 30.0)
            rto = next(c for c in merged["gate"]["checks"] if c["name"] == "max_rto_s")
            self.assertEqual(rto["status"], "pass", rto)
            self.assertEqual([m["kind"] for m in merged["merged_from"]], ["accept", "drill"])
            self.assertIn("verdict: " + run.report["verdict"], ok.stdout)
            self.assertIn("report: " + paths["merged"], ok.stdout)

            slow = direct("report", "merge", paths["accept"], paths["slow"],
                          "--report", paths["merged"])
            self.assertEqual(slow.returncode, 1, slow)
            self.assertIn("90 s is above 60 s", slow.stdout)
            with open(paths["merged"]) as f:
                self.assertEqual(json.load(f)["verdict"], "FAIL")

            twice = direct("report", "merge", paths["accept"], paths["accept"],
                           "--report", paths["merged"])
            self.assertEqual(twice.returncode, 2, twice)
            self.assertIn("are all accept reports", twice.stderr)
            self.assertEqual(direct("report", "merge", paths["accept"], paths["drill"])
                             .returncode, 2)  # no --report
            over = direct("report", "merge", paths["accept"], paths["drill"],
                          "--report", paths["accept"])
            self.assertEqual(over.returncode, 2, over)  # never over an input

    def test_reads_the_previous_schema_and_refuses_others(self):
        run = mpirun(2)
        self.assertEqual(run.returncode, 0, run)
        self.assertEqual(run.report["schema"], "trainproof.report/3")
        # A /1 report: no context.nodes, rank 0's nvidia_smi_topo in the context.
        old = dict(run.report, schema="trainproof.report/1")
        old["context"] = dict(old["context"], nvidia_smi_topo=None)
        del old["context"]["nodes"]
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "r.json")
            with open(path, "w") as f:
                json.dump(old, f)
            again = direct("report", path)
            self.assertEqual(again.returncode, 0, again)
            self.assertIn(again.stdout, run.stdout)
            with open(path, "w") as f:
                json.dump(dict(old, schema="trainproof.report/4"), f)
            bad = direct("report", path)
            self.assertEqual(bad.returncode, 2, bad)
            self.assertIn("schema is not one of trainproof.report/3, trainproof.report/2, "
                          "trainproof.report/1", bad.stderr)

    def test_hostile_reports_are_refused_or_shown_inert(self):
        run = mpirun(2)
        self.assertEqual(run.returncode, 0, run)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "r.json")
            run.report["ranks"][0]["host"] = "\x1b[2Jnode\nverdict: FORGED"
            run.report["verdict"] = "NONE"
            with open(path, "w") as f:
                json.dump(run.report, f)
            shown = direct("report", path)
            self.assertEqual(shown.returncode, 0, shown)  # NONE: nothing ran, not a failure
            self.assertNotIn("\x1b", shown.stdout)
            self.assertNotIn("\nverdict: FORGED", shown.stdout)
            self.assertIn("\\x1B[2Jnode\\nverdict: FORGED", shown.stdout)

            for verdict in (42, None, "MAYBE"):
                run.report["verdict"] = verdict
                with open(path, "w") as f:
                    json.dump(run.report, f)
                bad = direct("report", path)
                self.assertEqual(bad.returncode, 2, bad)
                self.assertIn("verdict", bad.stderr)

            fifo = os.path.join(tmp, "fifo.json")
            os.mkfifo(fifo)
            for target in (fifo, tmp):  # neither may block or read as an empty report
                bad = direct("report", target, timeout=20)
                self.assertEqual(bad.returncode, 2, bad)
                self.assertIn("not a regular file", bad.stderr)

    def test_node_lines_name_the_verdict_first_and_run_nothing_when_pasted(self):
        """`report nodes` on a report whose names and reasons hold shell syntax: the drain line
        for the FAIL node starts with its check and verdict and ends with the run id, the WARN
        node is drained only with --min-status=warn, and the lines, run by sh with scontrol and
        sinfo stubbed, call scontrol with the reason as one word and run nothing else."""
        hostile = "$(touch pwned) `touch pwned` '; touch pwned; ' \"; touch pwned"
        report = {
            "schema": "trainproof.report/3", "verdict": "FAIL",
            "context": {"run_id": "accept-1", "hosts": ["n1", "n2", "n3"], "world_size": 3,
                        "warnings": []},
            "gate": {"checks": [
                {"name": "pairwise_flags", "status": "fail", "reason": "1 flag(s)",
                 "value": 1, "threshold": 0},
                {"name": "min_straggler_score", "status": "warn", "reason": "stragglers",
                 "value": 0.5, "threshold": 0.8}]},
            "nodes": [
                {"host": "n1", "flagged": False, "reasons": []},
                {"host": "n2", "flagged": True, "reasons": ["rank 1 is a straggler " + hostile],
                 "findings": [{"check": "min_straggler_score",
                               "reason": "rank 1 is a straggler " + hostile}]},
                {"host": "n3", "flagged": True, "reasons": ["n3: send direction " + hostile],
                 "findings": [{"check": "pairwise_flags", "status": "fail",
                               "reason": "n3: send direction " + hostile,
                               "summary": "send 36 MB/s = 2.8% of control"}]}]}
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "r.json")
            with open(path, "w") as f:
                json.dump(report, f)
            lines = {}
            for args in (("drain",), ("drain", "--min-status=warn"), ("resume",)):
                out = direct("report", "nodes", path, f"--format={args[0]}", *args[1:])
                self.assertEqual(out.returncode, 0, out)
                lines[args] = out.stdout
            stubs = ("scontrol() { printf '%s\\n' \"$@\" >> args; }\n"
                     "sinfo() { echo 'trainproof: pairwise_flags FAIL: earlier'; }\n")
            called = {}
            for args, text in lines.items():
                work = os.path.join(tmp, "-".join(args))
                os.mkdir(work)
                subprocess.run(["sh", "-c", stubs + text], cwd=work, check=True)
                self.assertFalse(os.path.exists(os.path.join(work, "pwned")), text)
                with open(os.path.join(work, "args")) as f:
                    called[args] = f.read().splitlines()
        drain = called[("drain",)]
        self.assertEqual(drain[:3], ["update", "NodeName=n3", "State=DRAIN"], lines)
        self.assertEqual(len(drain), 4, drain)
        self.assertTrue(drain[3].startswith(
            "Reason=trainproof: pairwise_flags FAIL: send 36 MB/s = 2.8% of control; send "), drain)
        self.assertTrue(drain[3].endswith(" run=accept-1"), drain)
        self.assertLessEqual(len(drain[3]) - len("Reason="), 128)
        both = called[("drain", "--min-status=warn")]
        self.assertEqual([w for w in both if w.startswith("NodeName=")],
                         ["NodeName=n2", "NodeName=n3"], both)
        self.assertTrue(both[3].startswith("Reason=trainproof: min_straggler_score WARN: "), both)
        self.assertEqual(called[("resume",)], ["update", "NodeName=n1", "State=RESUME"], lines)

    def test_junit_marks_a_warn_and_metrics_carry_the_drills_figures(self):
        """`report junit` and `report metrics` on a drill report with a WARN: the XML is
        well-formed (xml.etree) and python3-junitparser reads the WARN as a passing case that
        says WARN, every case and suite timed and the suites stamped; the metrics hold the
        drill's RTO, RPO and detection time, and promtool accepts them (each node's pairwise
        bandwidth: tests/unit/test_ci_outputs.cpp and test_accept.py's pretend nodes)."""
        import xml.etree.ElementTree as ET
        report = {
            "schema": "trainproof.report/3", "verdict": "WARN",
            "context": {"run_id": "r<1>&'", "start_time": "2026-12-03T10:15:00.000Z",
                        "end_time": "2026-12-03T10:16:40.500Z", "hosts": ["n1", "n2"],
                        "world_size": 2, "warnings": []},
            "drill": {"rto_s": 12.5, "rpo_steps": 3, "rpo_s": 0.75,
                      "failures": [{"kind": "kill", "detected": True, "detected_after_s": 1.5}]},
            "nodes": [],
            "gate": {"checks": [
                {"name": "drill", "status": "pass", "reason": "ok", "value": 0, "threshold": 0},
                {"name": "max_rto_s", "status": "warn", "reason": "RTO 12.5 s <near> 13 s",
                 "value": 12.5, "threshold": 13}]}}
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "r.json")
            with open(path, "w") as f:
                json.dump(report, f)
            xml_path, prom_path = os.path.join(tmp, "r.xml"), os.path.join(tmp, "r.prom")
            for what, out in (("junit", xml_path), ("metrics", prom_path)):
                done = direct("report", what, path, out)
                self.assertEqual(done.returncode, 0, done)
            root = ET.parse(xml_path).getroot()  # raises on XML that is not well-formed
            with open(prom_path) as f:
                exposition = f.read()
            try:
                from junitparser import JUnitXml
            except ImportError:
                JUnitXml = None
            suites = list(JUnitXml.fromfile(xml_path)) if JUnitXml else []
        self.assertEqual(root.get("time"), "100.500")
        for suite in root.iter("testsuite"):
            self.assertEqual(suite.get("timestamp"), "2026-12-03T10:15:00")
            self.assertIsNotNone(suite.get("time"))
            for case in suite.iter("testcase"):
                self.assertIsNotNone(case.get("time"), ET.tostring(case))
        cases = {c.get("name"): c for c in root.iter("testcase")}
        warn = cases["max_rto_s"]
        self.assertEqual([(p.get("name"), p.get("value")) for p in warn.iter("property")],
                         [("status", "WARN")])
        self.assertEqual(warn.find("system-err").text, "WARN: RTO 12.5 s <near> 13 s")
        self.assertIsNone(warn.find("skipped"))
        self.assertIsNone(cases["drill"].find("system-err"))
        if JUnitXml is None:
            self.skipTest("python3-junitparser is not installed (scripts/setup.sh installs it)")
        read = {case.name: case for suite in suites for case in suite}
        self.assertTrue(read["max_rto_s"].is_passed, read["max_rto_s"])
        self.assertEqual(read["max_rto_s"].system_err, "WARN: RTO 12.5 s <near> 13 s")
        for line in ("trainproof_drill_rto_seconds 12.5\n", "trainproof_drill_rpo_steps 3\n",
                     "trainproof_drill_rpo_seconds 0.75\n",
                     'trainproof_drill_detection_seconds{failure="0",kind="kill"} 1.5\n'):
            self.assertIn(line, exposition)
        if shutil.which("promtool") is None:
            self.skipTest("promtool is not installed (Debian's prometheus package)")
        checked = subprocess.run(["promtool", "check", "metrics"], input=exposition,
                                 capture_output=True, text=True)
        self.assertEqual((checked.returncode, checked.stdout + checked.stderr), (0, ""))


if __name__ == "__main__":
    main()
