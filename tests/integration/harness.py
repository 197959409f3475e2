"""Runs build/trainproof under mpirun for the MPI tests and reads back its JSON report."""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

BIN = os.environ.get("TRAINPROOF_BIN", "build/trainproof")
MPIEXEC = os.environ.get("TRAINPROOF_MPIEXEC", "mpirun")
SCENARIOS = os.environ.get("TRAINPROOF_SCENARIOS", "scenarios")
TINY = os.path.join(SCENARIOS, "tiny.ini")


class Run:
    def __init__(self, returncode, stdout, stderr, report):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.report = report

    def __repr__(self):
        return f"exit {self.returncode}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


# Text for a person is never in e-notation, never a float with every digit a double holds, never
# a share too small to read as a percentage (it says <0.1%), and a share above 100% comes with
# words that say why it can be (a figure against another measurement, not a share of a whole).
E_NOTATION = re.compile(r"(?<![\w.])\d+(\.\d+)?e[+-]?\d+(?![\w.])")
PERCENT = re.compile(r"(\d+(\.\d+)?)%")
DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.])")
# Three significant digits, or a fixed-decimal table column (112.500 ms, 4999.998 ms: three
# decimals whatever the magnitude): never more than six significant digits with more than three
# decimals, which is a double printed whole (6.231903791427612).
MAX_SIGNIFICANT_DIGITS = 6
MAX_TABLE_DECIMALS = 3
ABOVE_100_EXPLAINED = ("of the sweep's", "of golden", "of the control", "of the GEMM-alone rate",
                       "not 100%")


def significant_digits(number):
    return len(number.replace(".", "").lstrip("0"))


def unreadable_numbers(text):
    """Lines of `text` with a number in e-notation, a float of more than six significant digits
    and more than three decimals,
    a share below 0.1% other than 0, or a percentage above 100 without a note."""
    found = []
    for line in text.splitlines():
        percents = [float(m.group(1)) for m in PERCENT.finditer(line)]
        if E_NOTATION.search(line):
            found.append(line)
        elif any(significant_digits(m.group(0)) > MAX_SIGNIFICANT_DIGITS
                 and len(m.group(0).split(".")[1]) > MAX_TABLE_DECIMALS
                 for m in DECIMAL.finditer(line)):
            found.append(line)
        elif any(0 < p < 0.1 for p in percents):
            found.append(line)
        elif any(p > 100 for p in percents) and not any(
                note in line for note in ABOVE_100_EXPLAINED):
            found.append(line)
    return found


def assert_readable(text, what="summary"):
    """Raises naming every line of `text` a person would misread (docs/report.md, "Numbers in
    text")."""
    unreadable = unreadable_numbers(text)
    if unreadable:
        raise AssertionError(f"{what} lines with e-notation, too many digits, an unreadably "
                             "small share or an unexplained percentage above 100:\n"
                             + "\n".join(unreadable))


def descendants(pid):
    """Every process under `pid` (mpirun's daemons and ranks), read from /proc."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def process_state(pid):
    """`pid NAME STATE wchan=WHERE`: a process blocked in the kernel (state D, an fsync waiting on
    the journal) shows where; one that spins in user space shows R."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        state = stat[stat.rindex(")") + 2:].split()[0]
        with open(f"/proc/{pid}/wchan") as f:
            wchan = f.read().strip() or "-"
        return f"{pid} {name} {state} wchan={wchan}"
    except (OSError, ValueError, IndexError):
        return f"{pid} (gone)"


def gdb_stacks(pid):
    if not shutil.which("gdb"):
        return "(no gdb)"
    try:
        bt = subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex", "thread apply all bt 30"],
                            capture_output=True, text=True, timeout=30).stdout
    except subprocess.TimeoutExpired:
        return "(gdb did not answer in 30 s)"
    return "\n".join(line for line in bt.splitlines() if line.startswith(("#", "Thread")))


def stacks_of_hung_ranks(pid, most=8):
    """The state and kernel wait channel of the launcher and every process under it, every
    thread's stack of the launcher and of each trainproof rank under `pid` (gdb, where
    installed), then SIGABRT to each rank, whose crash report (docs/crash-report.md) names the
    rank, host and frames: a hang in CI leaves where every process was, not only "timed out",
    even when every rank has already left and the launcher is what waits."""
    ranks, others = [], []
    for child in descendants(pid):
        try:
            with open(f"/proc/{child}/comm") as f:
                (ranks if f.read().strip() == "trainproof" else others).append(child)
        except OSError:
            pass
    text = ["=== processes"] + [process_state(p) for p in [pid, *others, *ranks]]
    text.append(f"=== launcher pid {pid}\n" + gdb_stacks(pid))
    for rank in ranks[:most]:
        text.append(f"=== pid {rank}\n" + gdb_stacks(rank))
    for rank in ranks:
        try:
            os.kill(rank, signal.SIGABRT)
        except OSError:
            pass
    return "\n".join(text)


def run_bounded(cmd, timeout, env=None):
    """subprocess.run(cmd) within `timeout`; past it, an AssertionError holding the command, what
    it printed so far and every rank's stacks."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stacks = stacks_of_hung_ranks(proc.pid)
        try:
            stdout, stderr = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
        raise AssertionError(f"{shlex.join(cmd)} still ran after {timeout} s\n"
                             f"stdout (end):\n{stdout[-3000:]}\nstderr (end):\n{stderr[-6000:]}"
                             f"\nstacks:\n{stacks}")
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def mpirun(ranks, *args, scenario=TINY, timeout=240, bind="core:overload-allowed",
           subcommand="train", env=None):
    """Runs `trainproof SUBCOMMAND` on `ranks` local ranks (with `env`, the ranks' environment);
    returns a Run with the parsed report."""
    with tempfile.TemporaryDirectory() as tmp:
        report_path = os.path.join(tmp, "report.json")
        # Ranks pinned round-robin to cores, as a real launch would pin them; on a 2-core machine
        # several share a core, which the report's context warns about.
        cmd = [MPIEXEC, "-np", str(ranks), "--oversubscribe", "--map-by", "core",
               "--bind-to", bind, BIN, subcommand]
        if scenario:
            cmd += ["--scenario", scenario]
        if "--report" not in args:
            cmd += ["--report", report_path]
        cmd += ["--log.level=warn", *args]
        proc = run_bounded(cmd, timeout, env)
        report = None
        if os.path.exists(report_path):
            with open(report_path) as f:
                report = json.load(f)
        # Every integration test's summary is held to it (docs/report.md, "Numbers in text").
        assert_readable(proc.stdout)
        return Run(proc.returncode, proc.stdout, proc.stderr, report)


def accept_command(report, checkpoint_dir, *args, ranks=2,
                   scenario=os.path.join(SCENARIOS, "accept-smoke.ini")):
    """`trainproof accept` on local ranks at log level info, so that its `accept: stage NAME`
    lines show when each stage starts, for tests that watch them."""
    return [MPIEXEC, "-np", str(ranks), "--oversubscribe", BIN, "accept", "--scenario", scenario,
            "--report", report, "--log.level=info", f"--checkpoint.dir={checkpoint_dir}", *args]


class CheckpointCase(unittest.TestCase):
    """A temporary checkpoint folder per test, runs that checkpoint every EVERY (4) steps, and
    the digest of an uninterrupted run, computed once per (ranks, options)."""
    EVERY = 4
    reference = {}

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="trainproof-ckpt-")
        self.dir = os.path.join(self.tmp, "ckpt")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def train(self, ranks, *args):
        return mpirun(ranks, f"--checkpoint.dir={self.dir}", f"--checkpoint.every={self.EVERY}",
                      *args)

    def uninterrupted(self, ranks, *args):
        key = (ranks, args)
        if key not in self.reference:
            run = mpirun(ranks, *args)
            self.assertEqual(run.returncode, 0, run)
            self.reference[key] = run.report["train"]["final_digest"]
        return self.reference[key]

    def folder(self, step):
        return os.path.join(self.dir, f"step-{step:08d}")


def flip_byte(path, offset=None, mask=0x01):
    """Flips bits of one byte in place: at `offset`, or in the middle of the file."""
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2 if offset is None else offset)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ mask]))


def edit_manifest(folder, change):
    """Applies `change` to the parsed MANIFEST.json of a step folder and writes it back."""
    path = os.path.join(folder, "MANIFEST.json")
    with open(path) as f:
        manifest = json.load(f)
    change(manifest)
    with open(path, "w") as f:
        json.dump(manifest, f)


def truncate_tail(path, count=100):
    os.truncate(path, os.path.getsize(path) - count)


def direct(*args, timeout=60):
    """Runs the binary without a launcher (help, report, usage errors)."""
    proc = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout)
    return Run(proc.returncode, proc.stdout, proc.stderr, None)


def check_by_name(report, name):
    for check in report["gate"]["checks"]:
        if check["name"] == name:
            return check
    raise KeyError(name)


def timing(test):
    """Marks a test whose outcome rests on measured time: a rate, a deadline, a straggler, a
    signal sent while the run is at a given step. Another test's load on the same cores would
    move what it measures, so ctest runs these alone (the `.timing` entries in
    tests/CMakeLists.txt) and the rest of the file beside other tests."""
    test.trainproof_timing = True
    return test


def _tests_of(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from _tests_of(item)
        else:
            yield item


def main():
    """Runs the file's tests. TRAINPROOF_TESTS=timing runs only those marked @timing,
    TRAINPROOF_TESTS=untimed only the others; unset (or `all`), every test."""
    print("trainproof:", BIN, "launcher:", shlex.join([MPIEXEC]), file=sys.stderr)
    select = os.environ.get("TRAINPROOF_TESTS", "all")
    if select == "all" or len(sys.argv) > 1:  # a test named on the command line runs as asked
        unittest.main(verbosity=2)
        return
    if select not in ("timing", "untimed"):
        sys.exit(f"TRAINPROOF_TESTS={select}: expected timing, untimed or all")
    loaded = unittest.defaultTestLoader.loadTestsFromModule(sys.modules["__main__"])
    chosen = [test for test in _tests_of(loaded)
              if getattr(getattr(test, test._testMethodName, None), "trainproof_timing", False)
              == (select == "timing")]
    if not chosen:  # a selection that lost its tests must not pass silently
        sys.exit(f"TRAINPROOF_TESTS={select}: no test of this file is selected")
    result = unittest.TextTestRunner(verbosity=2).run(unittest.TestSuite(chosen))
    sys.exit(0 if result.wasSuccessful() else 1)
