"""trainproof accept on one host (docs/acceptance.md): the shipped small scenario with this
machine's host thresholds PASSes; an impossible threshold FAILs (exit 1) with that check's
reason; a threshold inside the WARN band WARNs (exit 0); a threshold no selected stage measures
is exit 2 before anything runs; the job timeline adds up to the wall time within 1% on every
rank; and report merge joins a real drill's report and judges it against the gate."""
import json
import os
import shlex
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from harness import BIN, MPIEXEC, SCENARIOS, TINY, check_by_name, direct, mpirun  # noqa: E402

SMOKE = os.path.join(SCENARIOS, "accept-smoke.ini")


def junit_cases(path):
    """{suite name: {case name: TestCase}} as python3-junitparser reads the file."""
    from junitparser import JUnitXml
    xml = JUnitXml.fromfile(path)
    return {suite.name: {case.name: case for case in suite} for suite in xml}
DEV_HOST = os.path.join(SCENARIOS, "hosts", "dev-vm-2core.ini")


def accept(ranks, *args, scenario=SMOKE, bind="core:overload-allowed"):
    with tempfile.TemporaryDirectory() as ckpt:
        return mpirun(ranks, f"--checkpoint.dir={ckpt}", *args, scenario=scenario,
                      subcommand="accept", bind=bind)


class RailsOnPretendNodes(unittest.TestCase):
    """2 ranks on each of 3 pretend nodes: accept measures every rail by default, and a fault on
    one rail (test.slow_pair_rank paces rank 3, local rank 1 of the second node, to 20 MB/s) is
    named with its node, its rail and its NIC, and on no other rail.

    The ranks are not bound to cores: bound round-robin to two cores, a rail's three ranks (0, 2,
    4) would share one core, every transfer of the rail would wait on time slices, and a healthy
    pair was once flagged at 37% of its control (CI). Unbound, the two ranks a transfer uses run
    on both cores while the others wait asleep, as ranks on separate nodes would."""

    def test_every_rail_gets_a_matrix_and_a_slow_rail_is_named_with_it(self):
        with tempfile.TemporaryDirectory() as outputs:
            junit = os.path.join(outputs, "accept.xml")
            metrics = os.path.join(outputs, "accept.prom")
            run = accept(6, "--test.split_hosts=3", "--accept.stages=pairwise",
                         "--sweep.pair_bytes=4194304", "--sweep.pair_iters=3",
                         "--test.slow_pair_rank=3", "--test.slow_pair_gbps=0.02",
                         f"--junit={junit}", f"--metrics={metrics}", bind="none")
            suites = junit_cases(junit)
            with open(metrics) as f:
                exposition = f.read()
            promtool = subprocess.run(["promtool", "check", "metrics"], input=exposition,
                                      capture_output=True, text=True)
        self.assertEqual(run.returncode, 1, run)  # 20 MB/s is below sweep.fail_fraction
        rails = run.report["sweep"]["pairwise"]["rails"]
        self.assertEqual([(r["rail"], r["world_ranks"]) for r in rails],
                         [(0, [0, 2, 4]), (1, [1, 3, 5])])
        for rail in rails:
            self.assertEqual(len(rail["nics"]), 3, rail)
            for a in range(3):
                for b in range(3):
                    cell = rail["one_way_gbps"][a][b]
                    self.assertEqual(cell is None, a == b, rail)
        slow_host = rails[1]["hosts"][1]
        flagged = [n for n in run.report["nodes"] if n["flagged"]]
        self.assertEqual([n["host"] for n in flagged], [slow_host], run.stdout)
        nic = rails[1]["nics"][1]
        where = f"{slow_host} rail 1" + (f" ({nic})" if nic else "")
        for reason in flagged[0]["reasons"]:
            self.assertTrue(reason.startswith(where + ": "), reason)
        self.assertFalse(any(c["outcome"] != "transient" for c in rails[0]["confirmations"]),
                         rails[0]["confirmations"])
        self.assertIn(where, check_by_name(run.report, "pairwise_flags")["reason"])
        self.assert_node_actions(run, slow_host, where)
        # What CI and monitoring read: the FAIL by name in a real JUnit reader, and metrics that
        # promtool accepts, with the flagged node's series.
        flags = suites["pairwise"]["pairwise_flags"]
        self.assertEqual([type(r).__name__ for r in flags.result], ["Failure"], flags)
        self.assertIn(where, flags.result[0].message)
        self.assertEqual(promtool.returncode, 0, promtool)
        self.assertIn(f'trainproof_node_flagged{{host="{slow_host}"}} 1\n', exposition)
        self.assertIn(f'trainproof_pairwise_node_bytes_per_second{{host="{slow_host}",rail="1",'
                      'direction="send",mode="one_way"}', exposition)
        self.assertIn('trainproof_verdict{verdict="FAIL"} 1\n', exposition)
        # Pretend nodes and a paced rank: the report and its summary say the run is a test's.
        hooks = [w for w in run.report["context"]["warnings"] if w.startswith("test hooks active")]
        self.assertEqual(len(hooks), 1, run.report["context"]["warnings"])
        self.assertIn("--test.split_hosts", hooks[0])
        self.assertIn(hooks[0], run.stdout)

    def assert_node_actions(self, run, slow_host, where):
        """`report nodes` names the flagged node, and only it, in every format."""
        self.assertIn(f"nodes to act on (1): {slow_host}\n", run.stdout)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "accept.json")
            with open(path, "w") as f:
                json.dump(run.report, f)
            printed = {fmt: direct("report", "nodes", path, f"--format={fmt}")
                       for fmt in ("list", "hostlist", "drain", "json")}
            self.assertEqual(direct("report", "nodes", path, "--format=csv").returncode, 2)
        for fmt, out in printed.items():
            self.assertEqual(out.returncode, 0, (fmt, out))
        self.assertEqual(printed["hostlist"].stdout, slow_host + "\n")
        drain = printed["drain"].stdout.splitlines()
        self.assertEqual(len(drain), 1, drain)
        words = shlex.split(drain[0])
        self.assertEqual(words[:4], ["scontrol", "update", f"NodeName={slow_host}", "State=DRAIN"],
                         drain)
        reason = words[4].split("Reason=", 1)[1]
        # The check and verdict first, the figures, never the node's name; the run id last.
        self.assertTrue(reason.startswith("trainproof: pairwise_flags FAIL: rail 1 "), reason)
        self.assertRegex(reason, r" = [0-9.]+% of control")
        self.assertNotIn(slow_host, reason)
        self.assertTrue(reason.endswith(" run=" + run.report["context"]["run_id"]), reason)
        self.assertLessEqual(len(reason), 128)
        self.assertEqual([n["host"] for n in json.loads(printed["json"].stdout)["flagged"]],
                         [slow_host])
        self.assertTrue(printed["list"].stdout.startswith(
            slow_host + ": FAIL\n  - pairwise_flags FAIL: " + where), printed["list"].stdout)


class OnThisMachine(unittest.TestCase):
    def test_the_host_file_for_this_machine_passes_every_check(self):
        run = accept(2, f"--gate.file={DEV_HOST}")
        self.assertEqual(run.returncode, 0, run)
        report = run.report
        self.assertEqual(report["verdict"], "PASS", run)
        for key in ("preflight", "sweep", "train", "checkpoint", "restore", "job", "cost"):
            self.assertIn(key, report)
        self.assertEqual([a["stage"] for a in report["accept"]["attempts"]],
                         ["preflight", "sweep", "pairwise", "train", "restore"])
        self.assertEqual(check_by_name(report, "restore_digest")["status"], "pass")
        self.assertEqual(check_by_name(report, "inventory")["status"], "pass")
        self.assertEqual(check_by_name(report, "pairwise")["status"], "n/a")
        for name in ("min_au", "min_busbw_gbps.allreduce", "min_busbw_gbps.reducescatter"):
            check = check_by_name(report, name)
            self.assertEqual(check["status"], "pass", check)
            self.assertIn("dev-vm-2core.ini", check["source"])
        # 2 ranks: no straggler can be named, and the check says so instead of passing.
        self.assertEqual(check_by_name(report, "min_straggler_score")["status"], "n/a")
        self.assertIn("verdict: PASS", run.stdout)
        self.assertIn("accept stages: preflight PASS", run.stdout)

    def test_the_job_timeline_adds_up_to_the_wall_time_on_every_rank(self):
        run = accept(2, "--accept.stages=train,restore")
        self.assertEqual(run.returncode, 0, run)
        job = run.report["job"]
        self.assertEqual(len(job["ranks"]), 2)
        for rank in job["ranks"]:
            total = sum(rank["categories"].values())
            self.assertAlmostEqual(total / rank["wall_s"], 1.0, delta=0.01, msg=rank)
        names = [c["name"] for c in job["categories"]]
        for name in ("launch", "setup", "warmup_steps", "productive", "cold_restore", "teardown"):
            self.assertIn(name, names)
        self.assertGreater(job["goodput"], 0)
        self.assertLess(job["goodput"], 1)
        self.assertIn("job: ", run.stdout)
        # The summary leads with the verdict and the stages, then both goodputs, each named: the
        # job's alone counts the other stages as lost time.
        summary = run.stdout[run.stdout.index("acceptance verdict: "):].splitlines()
        self.assertEqual(summary[0], f"acceptance verdict: {run.report['verdict']}")
        self.assertTrue(summary[1].startswith("accept stages: train "), summary[:3])
        self.assertEqual(summary[2], f"goodput: training stage {job['train_goodput']:.2f}, whole "
                         f"job {job['goodput']:.2f} (launch and cold_restore are not training)")
        self.assertGreater(job["train_goodput"], job["goodput"])

    def test_an_impossible_threshold_fails_with_its_reason(self):
        run = accept(2, "--accept.stages=train", "--gate.min_au=0.999", scenario=TINY)
        self.assertEqual(run.returncode, 1, run)
        self.assertEqual(run.report["verdict"], "FAIL")
        check = check_by_name(run.report, "min_au")
        self.assertEqual(check["status"], "fail")
        self.assertIn("is below 0.999", check["reason"])
        self.assertIn("--gate.min_au on the command line", check["reason"])
        self.assertIn("FAIL  min_au", run.stdout)

    def test_a_default_threshold_missed_warns_and_strict_makes_it_exit_1(self):
        # Rank 1 of 3 computes 20 ms longer every step: its straggler score is far below the
        # default gate.min_straggler_score, which nobody set, so it is advice: WARN, which exits
        # 0, or 1 under --strict, the verdict staying WARN. (The WARN band of a threshold that was
        # set is unit-tested: a figure that lands inside it on this machine depends on its load;
        # one rank alone, whose score was exactly 1, now has no ranks to compare against.)
        with tempfile.TemporaryDirectory() as outputs:
            metrics = os.path.join(outputs, "train.prom")
            run = accept(3, "--accept.stages=train", "--fault=slow:rank=1,ms=20",
                         "--test.split_hosts=2", "--strict", f"--metrics={metrics}",
                         scenario=TINY)
            with open(metrics) as f:
                promtool = subprocess.run(["promtool", "check", "metrics"], stdin=f,
                                          capture_output=True, text=True)
        # A training report's phases, goodput and checkpoint figures pass promtool's lint too.
        self.assertEqual(promtool.returncode, 0, promtool)
        self.assertEqual(run.returncode, 1, run)
        self.assertEqual(run.report["verdict"], "WARN", run)
        self.assertIs(run.report["context"]["strict"], True)
        check = check_by_name(run.report, "min_straggler_score")
        self.assertEqual(check["status"], "warn")
        self.assertIn("a default, so WARN", check["reason"])
        self.assertIn("rank 1", check["reason"])
        # The WARN by name in a real JUnit reader: a passing case that says it warned.
        with tempfile.TemporaryDirectory() as tmp:
            report, junit = os.path.join(tmp, "r.json"), os.path.join(tmp, "r.xml")
            with open(report, "w") as f:
                json.dump(run.report, f)
            self.assertEqual(direct("report", "junit", report, junit).returncode, 0)
            case = junit_cases(junit)["train"]["min_straggler_score"]
        self.assertEqual(case.result, [], case)
        self.assertIn("status: warn", case.system_out)

    def test_a_failing_stage_is_retried_and_every_attempt_kept(self):
        run = accept(1, "--accept.stages=train", "--gate.min_au=0.999", "--gate.retries=1",
                     scenario=TINY)
        self.assertEqual(run.returncode, 1, run)
        attempts = run.report["accept"]["attempts"]
        self.assertEqual([(a["stage"], a["attempt"]) for a in attempts],
                         [("train", 1), ("train", 2)])

    def test_a_skipped_stage_makes_its_checks_na(self):
        run = accept(2, "--accept.stages=sweep", f"--gate.file={DEV_HOST}",
                     "--sweep.max_bytes=1048576", scenario=TINY)
        self.assertEqual(run.returncode, 0, run)
        self.assertEqual(check_by_name(run.report, "stage_train")["status"], "n/a")
        check = check_by_name(run.report, "min_au")
        self.assertEqual(check["status"], "n/a")
        self.assertIn("stage train did not run", check["reason"])


class RefusedBeforeAnythingRuns(unittest.TestCase):
    def test_a_threshold_no_selected_stage_measures_is_exit_2(self):
        run = accept(2, "--accept.stages=sweep", "--gate.min_restore_gbps=1", scenario=TINY)
        self.assertEqual(run.returncode, 2, run)
        self.assertIn("gate.min_restore_gbps", run.stderr)
        self.assertIn("stage restore", run.stderr)
        self.assertIsNone(run.report)

    def test_an_unknown_stage_and_a_restore_without_its_checkpoint_are_exit_2(self):
        run = direct("accept", "--accept.stages=train,warmup")
        self.assertEqual(run.returncode, 2, run)
        self.assertIn("unknown stage 'warmup'", run.stderr)
        run = direct("accept", "--scenario", TINY, "--accept.stages=train,restore")
        self.assertEqual(run.returncode, 2, run)
        self.assertIn("restore needs checkpoint.dir", run.stderr)

    def test_a_gate_file_holds_gate_options_only(self):
        with tempfile.NamedTemporaryFile("w", suffix=".ini") as f:
            f.write("[train]\nsteps = 3\n")
            f.flush()
            run = direct("accept", f"--gate.file={f.name}")
        self.assertEqual(run.returncode, 2, run)
        self.assertIn("train.steps is not a [gate] threshold", run.stderr)


class MergedWithADrill(unittest.TestCase):
    def test_merge_judges_a_real_drill_against_the_gate(self):
        with tempfile.TemporaryDirectory() as tmp:
            accepted = os.path.join(tmp, "accept.json")
            drilled = os.path.join(tmp, "drill.json")
            merged = os.path.join(tmp, "acceptance.json")
            run = accept(2, "--accept.stages=train", "--gate.drill=true",
                         "--gate.max_rpo_steps=100", "--report", accepted, scenario=TINY)
            self.assertEqual(run.returncode, 0, run)
            with open(accepted) as f:
                accepted_report = json.load(f)
            self.assertEqual(check_by_name(accepted_report, "max_rpo_steps")["status"], "n/a")
            launcher = f"{MPIEXEC} -np 2 --oversubscribe"
            drill = subprocess.run(
                [BIN, "drill", "--launcher", launcher, "--scenario", TINY,
                 f"--checkpoint.dir={os.path.join(tmp, 'ckpt')}", "--checkpoint.every=4",
                 "--fault", "kill:rank=1,step=6", "--report", drilled, "--log.level=warn"],
                capture_output=True, text=True, timeout=300)
            self.assertEqual(drill.returncode, 0, drill.stdout + drill.stderr)
            out = direct("report", "merge", accepted, drilled, "--report", merged)
            self.assertEqual(out.returncode, 0, out)
            with open(merged) as f:
                report = json.load(f)
            self.assertEqual(check_by_name(report, "drill")["status"], "pass")
            self.assertEqual(check_by_name(report, "max_rpo_steps")["status"], "pass")
            self.assertIn("drill", report)
            self.assertEqual(report["train"], accepted_report["train"])

class TheSameWorkAtAnySize(unittest.TestCase):
    """The shipped scenarios set a batch per rank and save the state once across the job (the
    shared file): at 2 and 4 ranks each rank gets the same samples and a save the same bytes."""

    def test_the_per_rank_batch_and_the_save_do_not_grow_with_the_world(self):
        saves = {}
        for ranks in (2, 4):
            run = accept(ranks, "--accept.stages=train,restore")
            self.assertEqual(run.returncode, 0, run)
            model = run.report["train"]["model"]
            self.assertEqual(model["batch_set_by"], "model.batch_per_rank")
            self.assertEqual(model["global_batch"], 4 * ranks)
            self.assertEqual(run.report["checkpoint"]["layout"], "shared-file")
            saves[ranks] = run.report["checkpoint"]["bytes"]
            self.assertEqual(check_by_name(run.report, "restore_digest")["status"], "pass")
        self.assertEqual(saves[2], saves[4], saves)

    def test_a_global_batch_on_the_command_line_replaces_the_scenarios_per_rank_one(self):
        run = accept(2, "--accept.stages=train", "--model.batch=6")
        self.assertEqual(run.returncode, 0, run)
        model = run.report["train"]["model"]
        self.assertEqual((model["batch_set_by"], model["global_batch"], model["batch_per_rank"]),
                         ("model.batch", 6, None))


if __name__ == "__main__":
    unittest.main(verbosity=2)
