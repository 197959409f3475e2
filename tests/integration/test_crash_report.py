"""The crash report (docs/crash-report.md): a rank of a running job that receives SIGSEGV, SIGBUS,
SIGFPE, SIGILL or SIGABRT prints `trainproof: rank R on HOST (SUBCOMMAND): SIGNAME at 0xADDR`
and a stack holding trainproof's own frames, leaves crash-rank<R>.json beside the heartbeats,
and still ends by that signal, so the launcher's exit status is 128 + N. An uncaught exception
and a call through a null function pointer are reported the same way, and `trainproof report`
prints what a crashed run left."""
import json
import os
import re
import signal
import subprocess
import tempfile
import time
import unittest

from harness import BIN, MPIEXEC, TINY, main, mpirun

SIGNALS = ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT")
LINE = re.compile(r"^trainproof: rank (\d+) on (\S+) \(([\w-]+)\): (SIG[A-Z]+) at (0x[0-9a-f]+) "
                  r"\(([^)]*)\)", re.M)
OWN_FRAME = re.compile(r"^  #\d+ 0x[0-9a-f]+ _ZN2tp\w+\+0x[0-9a-f]+ \(trainproof\+0x[0-9a-f]+\)$",
                       re.M)
START_TIMEOUT_S = 120


def launch(*args, subcommand="train"):
    cmd = [MPIEXEC, "-np", "2", "--oversubscribe", BIN, subcommand, "--scenario", TINY,
           "--log.level=warn", *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_pid(beats, rank, launcher):
    """The pid rank `rank` wrote into its heartbeat folder ("host pid")."""
    path = os.path.join(beats, f"pid-rank-{rank}")
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if launcher.poll() is not None:
            raise AssertionError(f"the job ended ({launcher.returncode}) before rank {rank} ran: "
                                 + launcher.communicate()[1][-2000:])
        try:
            with open(path) as f:
                fields = f.read().split()
            if len(fields) == 2:
                return int(fields[1])
        except OSError:
            pass
        time.sleep(0.1)
    launcher.kill()
    raise AssertionError(f"no {path} after {START_TIMEOUT_S} s")


def finish(launcher):
    try:
        out, err = launcher.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        launcher.kill()
        out, err = launcher.communicate()
        raise AssertionError("the job did not end after a rank crashed:\n" + err[-3000:])
    return launcher.returncode, out, err


def crash_by_hook(tmp, beats, rank, crash):
    """train on 2 ranks with rank `rank` crashing as test.crash=`crash` says."""
    launcher = launch(f"--test.crash_rank={rank}", f"--test.crash={crash}",
                      f"--watchdog.dir={beats}", "--report", os.path.join(tmp, "report.json"))
    code, _, err = finish(launcher)
    return code, err


class CrashReport(unittest.TestCase):
    def check_crash(self, err, beats, rank, signal_name, subcommand="train"):
        """The line, an own frame, and the record agree; returns the record."""
        lines = [m for m in LINE.finditer(err) if int(m.group(1)) == rank]
        self.assertEqual(len(lines), 1, err[-3000:])
        line = lines[0]
        self.assertEqual(line.group(3), subcommand, line.group(0))
        self.assertEqual(line.group(4), signal_name, line.group(0))
        # trainproof's lines name the signal, never its number (mpirun's own lines may).
        own = "\n".join(l for l in err.splitlines() if l.startswith(("trainproof:", "  #")))
        self.assertNotRegex(own, r"signal \d+\b")
        self.assertRegex(err, OWN_FRAME, err[-3000:])
        self.assertIn("_ZN2tp15on_fatal_signal", err)
        record_path = os.path.join(beats, f"crash-rank{rank}.json")
        self.assertIn(f"trainproof: crash record {record_path}", err)
        with open(record_path) as f:
            record = json.load(f)
        self.assertEqual(record["format"], "trainproof-crash/1")
        self.assertEqual(record["signal"], signal_name)
        self.assertEqual(record["signal_number"], getattr(signal, signal_name).value)
        self.assertEqual(record["rank"], rank)
        self.assertEqual(record["host"], line.group(2))
        self.assertEqual(record["subcommand"], subcommand)
        self.assertEqual(record["address"], line.group(5))
        functions = [frame["function"] for frame in record["frames"]]
        self.assertTrue(any(f.startswith("_ZN2tp") for f in functions), functions)
        self.assertFalse(os.path.exists(record_path + ".part"))
        return record

    def test_each_signal_to_one_rank_of_a_running_job(self):
        for name in SIGNALS:
            with self.subTest(signal=name), tempfile.TemporaryDirectory() as tmp:
                beats = os.path.join(tmp, "beats")
                launcher = launch("--train.steps=1000000", f"--watchdog.dir={beats}",
                                  "--report", os.path.join(tmp, "report.json"))
                pid = wait_for_pid(beats, 1, launcher)
                number = getattr(signal, name).value
                os.kill(pid, number)
                code, _, err = finish(launcher)
                self.assertEqual(code, 128 + number, err[-3000:])
                record = self.check_crash(err, beats, 1, name)
                self.assertEqual(record["sent_by_pid"], os.getpid())
                self.assertIn(f"sent by pid {os.getpid()}", err)
                # The watchdog's own verdict file is never the crash record's place.
                abort = os.path.join(beats, "abort.json")
                if os.path.exists(abort):
                    with open(abort) as f:
                        self.assertNotIn("trainproof-crash", f.read())
                self.crashed_folder_reads_back(beats, name)

    def crashed_folder_reads_back(self, beats, name):
        shown = subprocess.run([BIN, "report", beats], capture_output=True, text=True,
                               timeout=60)
        self.assertEqual(shown.returncode, 3, shown.stderr)
        self.assertIn("crashed: 1 rank", shown.stdout)
        self.assertRegex(shown.stdout, rf"rank 1 on \S+ \(train\): {name} at 0x")
        self.assertIn("tp::on_fatal_signal(int, siginfo_t*, void*)", shown.stdout)

    def test_a_call_through_a_null_pointer_names_its_caller(self):
        with tempfile.TemporaryDirectory() as tmp:
            beats = os.path.join(tmp, "beats")
            code, err = crash_by_hook(tmp, beats, 1, "null_call")
            self.assertEqual(code, 128 + signal.SIGSEGV, err[-3000:])
            record = self.check_crash(err, beats, 1, "SIGSEGV")
            self.assertEqual(record["address"], "0x0")
            self.assertEqual(record["code"], "address not mapped")
            # Past the jump to 0, the stack goes on from the call that made it.
            self.assertIn("_ZN2tp15run_mpi_command", err)
            self.assertIn("main+", err)

    def test_an_uncaught_exception_in_a_thread(self):
        with tempfile.TemporaryDirectory() as tmp:
            beats = os.path.join(tmp, "beats")
            code, err = crash_by_hook(tmp, beats, 0, "uncaught_exception")
            self.assertEqual(code, 128 + signal.SIGABRT, err[-3000:])
            record = self.check_crash(err, beats, 0, "SIGABRT")
            expected = "std::runtime_error: test.crash=uncaught_exception on rank 0"
            self.assertEqual(record["uncaught_exception"], expected)
            self.assertIn(f"; uncaught exception: {expected}", err)

    def test_prepare_data_crash_leaves_its_record_beside_the_report(self):
        with tempfile.TemporaryDirectory() as tmp:
            data = os.path.join(tmp, "data")
            launcher = launch(f"--data.dir={data}", "--data.format=raw", "--data.files=4",
                              "--data.samples=16", "--data.sample_bytes=1024",
                              "--test.crash_rank=0", "--test.crash=null_call", "--report",
                              os.path.join(tmp, "report.json"), subcommand="prepare-data")
            code, _, err = finish(launcher)
            self.assertEqual(code, 128 + signal.SIGSEGV, err[-3000:])
            beats = os.path.join(tmp, "trainproof-heartbeats")
            self.check_crash(err, beats, 0, "SIGSEGV", subcommand="prepare-data")

    def test_a_clean_run_leaves_no_record_and_removes_a_stale_one(self):
        with tempfile.TemporaryDirectory() as tmp:
            beats = os.path.join(tmp, "beats")
            os.makedirs(beats)
            stale = os.path.join(beats, "crash-rank1.json")
            with open(stale, "w") as f:
                f.write('{"format": "trainproof-crash/1"}')
            launcher = launch("--train.steps=4", f"--watchdog.dir={beats}", "--report",
                              os.path.join(tmp, "report.json"))
            code, _, err = finish(launcher)
            self.assertEqual(code, 0, err[-3000:])
            self.assertNotRegex(err, LINE)
            self.assertFalse(os.path.exists(stale))



class HangInTheSuite(unittest.TestCase):
    """A run that outlives its test's timeout fails with where every process was: the state and
    kernel wait channel of mpirun and each rank, the launcher's stack and each rank's, and each
    rank's own crash report on SIGABRT (tests/integration/harness.py, docs/crash-report.md)."""

    def test_a_hung_run_past_its_timeout_names_every_process_and_its_frames(self):
        with self.assertRaises(AssertionError) as caught:
            mpirun(2, "--fault", "hang:rank=1,step=3", "--watchdog.timeout_s=600",
                   "--train.steps=50", timeout=15)
        text = str(caught.exception)
        self.assertIn("still ran after 15 s", text)
        self.assertRegex(text, r"=== processes\n\d+ \S+ \w wchan=")  # the launcher
        self.assertRegex(text, r"\n\d+ trainproof \w wchan=")
        self.assertIn("=== launcher pid", text)
        self.assertRegex(text, r"=== pid \d+\n(Thread|#)")
        self.assertRegex(text, LINE)


if __name__ == "__main__":
    main()
