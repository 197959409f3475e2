"""Multi-node runs on the virtual Slurm cluster (scripts/vcluster.sh): two nodes with their own
hostnames, private /tmp and /dev/shm, ranks launched by srun through PMIx, as on a real cluster.

Exits 77 (ctest: skipped, with the reason printed) where this host cannot run the cluster: not
root, no network namespaces, or Slurm missing. The cluster is always stopped: in tearDownClass,
at exit, on SIGTERM, and by the ctest fixture slurm.vcluster_teardown if this process is killed."""
import json
import os
import re
import shutil
import signal
import subprocess
import time

from harness import TINY, mpirun
from vcluster_harness import ENV, SCRIPTS, WORK, ClusterCase, Run, main, run

SRUN = ["srun", "-N2", "-n4", "--mpi=pmix", "-K1"]


def squeue(job):
    """The job's state and reason; "" once Slurm no longer lists it, None when squeue failed
    (a busy controller answers with an error, which must not read as "the job has ended")."""
    listed = run(["squeue", "-h", "-j", job, "-o", "%T %r"])
    if listed.returncode != 0:
        return None if "Invalid job id" not in listed.stderr else ""
    return listed.stdout.strip()


def job_record(job):
    """What Slurm says of the job, for a failure message."""
    shown = run(["scontrol", "show", "job", job])
    return shown.stdout + shown.stderr


def wait_for(condition, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(1)
    return False


def crash_records(folder):
    """Every crash-rank*.json in `folder`, as text."""
    found = []
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.startswith("crash-rank"):
            with open(os.path.join(folder, name), errors="replace") as f:
                found.append(f"\n--- {name}\n{f.read()[-4000:]}")
    return "".join(found)


class VirtualCluster(ClusterCase):
    NODES = 2

    def train(self, name, *args, launcher=SRUN):
        report = os.path.join(WORK, f"{name}.json")
        return run([*launcher, self.bin, "train", "--scenario", self.tiny, "--report", report,
                    "--log.level=warn", *args], report)

    def test_two_nodes_train_to_the_one_rank_digest(self):
        multi = self.train("multi")
        self.assertIn(multi.returncode, (0, 1), multi)
        self.assertNotEqual(multi.report["verdict"], "FAIL", multi)
        hosts = [r["host"] for r in multi.report["ranks"]]
        self.assertEqual(hosts, ["vc-n1", "vc-n1", "vc-n2", "vc-n2"])
        self.assertEqual([n["host"] for n in multi.report["nodes"]], ["vc-n1", "vc-n2"])
        self.assertEqual([r["local_rank"] for r in multi.report["ranks"]], [0, 1, 0, 1])
        # The cluster's task prolog keeps MPI off Open MPI 4.1's TCP BTL (docs/crash-report.md),
        # and the report's recorded stack says which transport the run had.
        environment = multi.report["context"]["environment"]
        self.assertEqual((environment.get("OMPI_MCA_pml"), environment.get("FI_PROVIDER")),
                         ("cm", "tcp;ofi_rxm"), environment)
        # The state is a function of the scenario alone: one rank on one node ends on it too.
        single = self.train("single", launcher=["srun", "-N1", "-n1", "--mpi=pmix"])
        self.assertEqual(single.returncode, 0, single)
        self.assertEqual(multi.report["train"]["final_digest"],
                         single.report["train"]["final_digest"])

    def test_each_node_has_its_own_scratch_and_shared_memory(self):
        # As on a real cluster, and so that no node maps another's (or an earlier cluster's)
        # Open MPI segments.
        probe = "trainproof-vc-probe"
        listing = run(["srun", "-N2", "-n2", "sh", "-c",
                       f"touch /tmp/{probe}-$(hostname) /dev/shm/{probe}-$(hostname) && "
                       f"sleep 1 && echo $(hostname): $(ls /tmp /dev/shm | grep {probe})"])
        self.assertEqual(listing.returncode, 0, listing)
        self.assertEqual(sorted(listing.stdout.splitlines()),
                         [f"vc-n{i}: {probe}-vc-n{i} {probe}-vc-n{i}" for i in (1, 2)])
        self.assertEqual([f for f in os.listdir("/dev/shm") if f.startswith(probe)], [])

    def test_srun_ports_are_the_kernels(self):
        # A narrow SrunPortRange lets a queued srun take a just-ended srun's late SRUN_JOB_COMPLETE
        # as its own and cancel its job before it runs (docs/slurm.md, "An srun cancelled before
        # it ran"): the cluster leaves srun's ports to the kernel.
        config = run(["scontrol", "show", "config"])
        self.assertEqual(config.returncode, 0, config)
        ports = re.search(r"^SrunPortRange\s*=\s*(\S+)", config.stdout, re.M)
        self.assertIsNotNone(ports, config.stdout[-2000:])
        self.assertEqual(ports.group(1), "0-0")

    def test_node_local_checkpoint_folder_is_refused_naming_the_node(self):
        # /tmp is each node's own: rank 0's probe file is not there on vc-n2.
        local = self.train("local", "--checkpoint.dir=/tmp/trainproof-ckpt",
                           "--checkpoint.every=4")
        self.assertEqual(local.returncode, 2, local)
        self.assertIn("on host vc-n2 is not the folder rank 0 sees", local.stderr)

    def test_shared_checkpoints_resume_bit_exact_across_nodes(self):
        ckpt = os.path.join(WORK, "ckpt")
        whole = self.train("whole")
        first = self.train("first", f"--checkpoint.dir={ckpt}", "--checkpoint.every=4",
                           "--train.steps=8")
        self.assertEqual(first.returncode, 0, first)
        resumed = self.train("resumed", f"--checkpoint.dir={ckpt}", "--resume=auto")
        self.assertIn(resumed.returncode, (0, 1), resumed)
        self.assertEqual(resumed.report["train"]["restored_step"], 8)
        self.assertEqual(resumed.report["train"]["final_digest"],
                         whole.report["train"]["final_digest"])

    def test_rank_shift_reads_the_other_nodes_shards(self):
        data = os.path.join(WORK, "dataset")
        shape = [f"--data.dir={data}", "--data.format=raw", "--data.files=8",
                 "--data.samples=64", "--data.sample_bytes=4096"]
        prepared = run([*SRUN, self.bin, "prepare-data", "--scenario", self.tiny, *shape])
        self.assertEqual(prepared.returncode, 0, prepared)
        # Shard f is written by rank f mod 4: ranks 0,1 sit on vc-n1, ranks 2,3 on vc-n2.
        shifted = self.train("shifted", *shape, "--data.rank_shift=1", "--data.verify=true")
        self.assertIn(shifted.returncode, (0, 1), shifted)
        self.assertEqual(shifted.report["data"]["rank_shards_read"], ["2,6", "3,7", "0,4", "1,5"])
        own = self.train("own", *shape, "--data.rank_shift=0", "--data.verify=true")
        self.assertEqual(own.report["data"]["rank_shards_read"], ["0,4", "1,5", "2,6", "3,7"])

    def test_a_crashed_rank_on_the_second_node_is_named_with_its_record(self):
        # docs/crash-report.md under srun: each signal sent to rank 2 (on vc-n2) of a running job,
        # then a call through a null pointer and an uncaught exception; the line names the rank
        # and the node, the record lies in the shared heartbeat folder, and srun's exit status
        # is the signal's.
        line = re.compile(r"^trainproof: rank 2 on vc-n2 \(train\): (SIG[A-Z]+) at 0x[0-9a-f]+",
                          re.M)
        for case in ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT", "null_call",
                     "uncaught_exception"):
            with self.subTest(case=case):
                beats = os.path.join(WORK, f"crash-{case}")
                expected = {"null_call": "SIGSEGV", "uncaught_exception": "SIGABRT"}.get(case, case)
                args = [*SRUN, self.bin, "train", "--scenario", self.tiny, "--log.level=warn",
                        f"--watchdog.dir={beats}", "--report", os.path.join(WORK, "crash.json")]
                if case in ("null_call", "uncaught_exception"):
                    ended = run([*args, "--test.crash_rank=2", f"--test.crash={case}"])
                else:
                    ended = self.signal_rank_of_running_job(
                        [*args, "--train.steps=1000000"], beats, 2, getattr(signal, case))
                self.assertEqual(line.findall(ended.stderr), [expected],
                                 ended.stderr[-3000:] + crash_records(beats))
                # srun exits with its tasks' largest raw wait status, where an exit code outranks
                # a signal: the signal's, 143 when -K's SIGTERM ended another task first, or 3
                # when a surviving rank saw its peer's death as an MPI error first and ended the
                # job (docs/crash-report.md); its own line names the signal whichever it is.
                number = getattr(signal, expected)
                survivor_first = re.search(r"runtime error on rank \d+ .*MPI_", ended.stderr)
                self.assertIn(ended.returncode,
                              (128 + number, 143, *((3,) if survivor_first else ())), ended)
                self.assertIn(f"srun: error: vc-n2: task 2: {signal.strsignal(number)}",
                              ended.stderr)
                self.assertRegex(ended.stderr, r"_ZN2tp15on_fatal_signal")
                with open(os.path.join(beats, "crash-rank2.json")) as f:
                    record = json.load(f)
                self.assertEqual((record["signal"], record["host"]), (expected, "vc-n2"))
                shown = run([self.bin, "report", beats])
                self.assertEqual(shown.returncode, 3, shown)
                self.assertIn(f"rank 2 on vc-n2 (train): {expected}", shown.stdout)

    def signal_rank_of_running_job(self, cmd, beats, rank, number):
        job = subprocess.Popen(cmd, cwd=WORK, env=ENV, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        pid_file = os.path.join(beats, f"pid-rank-{rank}")

        def started():
            try:
                with open(pid_file) as f:
                    return len(f.read().split()) == 2
            except OSError:
                return job.poll() is not None
        try:
            self.assertTrue(wait_for(started, 120), f"no {pid_file}")
            # A job that ended before the signal was sent: its output and every crash record its
            # ranks left say why (the cluster's folder goes with the cluster).
            self.assertIsNone(job.poll(), (job.communicate()[1][-2000:] + crash_records(beats))
                              if job.poll() is not None else "")
            with open(pid_file) as f:
                os.kill(int(f.read().split()[1]), number)  # the nodes share the host's pids
            out, err = job.communicate(timeout=120)
        finally:
            if job.poll() is None:
                job.kill()
                job.communicate()
        return Run(job.returncode, out, err, None)

    def test_sbatch_template_is_preempted_requeued_and_resumes_bit_exact(self):
        # slurm/train.sbatch as shipped, sized to the 2-CPU nodes from the command line. USR1
        # (what its --signal=USR1@90 sends before the time limit) makes the run checkpoint and
        # exit 4; the template requeues the job, and the requeued run resumes from it.
        # Rank 0 sleeps 10 ms a step (a timing-only fault: the digest is unchanged), so the run
        # lasts 8 s or more however fast the host, and the signal lands mid-run.
        long, reference = os.path.join(WORK, "long.ini"), os.path.join(WORK, "reference.ini")
        with open(TINY) as src:
            text = src.read().replace("steps = 12", "steps = 800")
        with open(reference, "w") as dst:
            dst.write(text)
        with open(long, "w") as dst:
            dst.write("fault = slow:rank=0,ms=10\n" + text)
        report, ckpt = os.path.join(WORK, "sbatch.json"), os.path.join(WORK, "sbatch-ckpt")
        template = os.path.join(SCRIPTS, "..", "slurm", "train.sbatch")
        submit = run(["sbatch", "--parsable", "-N2", "--ntasks-per-node=2", "--cpus-per-task=1",
                      "--time=10", f"--export=ALL,TRAINPROOF={self.bin},SCENARIO={long},"
                      f"REPORT={report},CKPT={ckpt}", template])
        self.assertEqual(submit.returncode, 0, submit)
        job = submit.stdout.strip().split(";")[0]
        self.addCleanup(run, ["scancel", job])
        log = os.path.join(WORK, f"trainproof-{job}.out")
        self.assertTrue(wait_for(lambda: os.path.isdir(ckpt) and any(
            n.startswith("step-") for n in os.listdir(ckpt)), 90), "no checkpoint committed")
        run(["scancel", "--signal=USR1", job])
        # Slurm holds a requeued job until its old credentials expire (AuthInfo=cred_expire, 30 s
        # on the virtual cluster); started sooner, it is killed as "Job credential revoked".
        self.assertTrue(wait_for(lambda: "BeginTime" in (squeue(job) or ""), 90), squeue(job))
        self.assertTrue(wait_for(lambda: squeue(job) == "", 180), job_record(job))
        with open(log) as f:
            text = f.read()
        stopped = re.search(r"SIGUSR1 received: stopped after step (\d+)", text)
        self.assertIsNotNone(stopped, text[-3000:])
        # The requeued run appends to the same log: it must have restored the stopped run's step.
        self.assertIn(f"restored step {stopped.group(1)}", text[stopped.end():],
                      text[-3000:] + job_record(job))
        with open(report) as f:
            resumed = json.load(f)
        # The report is the requeued run's only when that run ended with one: say what it did.
        self.assertEqual(resumed["train"]["restored_step"], int(stopped.group(1)), text[-3000:])
        whole = mpirun(1, scenario=reference)
        self.assertEqual(whole.returncode, 0, whole)
        self.assertEqual(resumed["train"]["final_digest"], whole.report["train"]["final_digest"])

    def test_acceptance_template_runs_accept_the_drill_and_the_merge(self):
        # slurm/acceptance.sbatch as shipped, on the small scenario, without a host file: accept
        # (one rank per node), the drill under the same srun, and report merge.
        # The nodes see the state folder, not a checkout under /tmp: the pieces the template
        # runs are copied there, laid out as in the repository.
        source = os.path.abspath(os.path.join(SCRIPTS, ".."))
        repo = os.path.join(WORK, "repo")
        for part in ("scripts/acceptance.sh", "slurm/acceptance.sbatch",
                     "scenarios/accept-smoke.ini"):
            os.makedirs(os.path.dirname(os.path.join(repo, part)), exist_ok=True)
            shutil.copy2(os.path.join(source, part), os.path.join(repo, part))
        out = os.path.join(WORK, "acceptance")
        template = os.path.join(repo, "slurm", "acceptance.sbatch")
        # The cluster has no GPUs: the template's variables make it a CPU run, nothing else.
        submit = run(["env", "SBATCH_GPUS_PER_NODE=0", "sbatch", "--parsable", "-N2",
                      "--ntasks-per-node=1", "--cpus-per-task=1", "--time=10",
                      f"--export=ALL,TRAINPROOF={self.bin},TRAINPROOF_HOME={repo},"
                      f"OUT={out},SCENARIO=scenarios/accept-smoke.ini,GATE_FILE=,"
                      "COMPUTE_BACKEND=cpu,COMM_BACKEND=mpi", template,
                      # A short sweep: every row costs milliseconds of veth latency here.
                      "--sweep.ops=allreduce", "--sweep.max_bytes=65536", "--sweep.iters=3",
                      "--sweep.warmup=1", "--sweep.pair_bytes=1048576", "--sweep.pair_iters=2"])
        self.assertEqual(submit.returncode, 0, submit)
        job = submit.stdout.strip().split(";")[0]
        self.addCleanup(run, ["scancel", job])
        finished = wait_for(lambda: squeue(job) == "", 300)
        with open(os.path.join(WORK, f"trainproof-accept-{job}.out")) as f:
            log = f.read()
        self.assertTrue(finished, log[-4000:])
        self.assertIn("== 3/3 trainproof report merge", log)
        with open(os.path.join(out, "acceptance.json")) as f:
            merged = json.load(f)
        self.assertIn(merged["verdict"], ("PASS", "WARN"), log[-4000:])
        self.assertEqual(merged["drill"]["verdict"], "PASS")
        self.assertEqual([m["kind"] for m in merged["merged_from"]], ["accept", "drill"])
        self.assertEqual(merged["context"]["hosts"], ["vc-n1", "vc-n2"])
        checks = {c["name"]: c["status"] for c in merged["gate"]["checks"]}
        self.assertEqual(checks["restore_digest"], "pass")
        self.assertEqual(checks["drill"], "pass")
        self.assertEqual(checks["pairwise_flags"], "n/a")
        self.assertEqual(merged["context"]["backends"]["compute"], "cpu")

        # Without the CPU variables the template asks for the GPU backends, which a job without
        # GPUs cannot give: it says so and stops before anything runs.
        gpu_default = run(["env", "SBATCH_GPUS_PER_NODE=0", "sbatch", "--parsable", "-N1",
                           "--ntasks-per-node=1", "--cpus-per-task=1", "--time=2",
                           f"--export=ALL,TRAINPROOF={self.bin},TRAINPROOF_HOME={repo},"
                           f"OUT={out}-gpu", template])
        self.assertEqual(gpu_default.returncode, 0, gpu_default)
        job = gpu_default.stdout.strip().split(";")[0]
        self.addCleanup(run, ["scancel", job])
        self.assertTrue(wait_for(lambda: squeue(job) == "", 60))
        with open(os.path.join(WORK, f"trainproof-accept-{job}.out")) as f:
            self.assertIn("COMPUTE_BACKEND=cuda, but this job has no GPUs", f.read())
        self.assertFalse(os.path.exists(f"{out}-gpu"))


if __name__ == "__main__":
    main(SRUN)
