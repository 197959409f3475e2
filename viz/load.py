"""Reading a trainproof report and the HDF5 traces beside it (docs/report.md).

Nothing here imports matplotlib, so the HTML page can be written from the report alone when
the plotting packages are missing. h5py and numpy are imported only when a trace is opened.
"""
import json
import os
import re

# Which report section each `accept` stage leaves behind (docs/acceptance.md, "Stages").
STAGE_SECTIONS = {
    "preflight": ("preflight",),
    "sweep": ("sweep", "results"),
    "pairwise": ("sweep", "pairwise"),
    "train": ("train",),
    "restore": ("restore",),
}

DEBIAN_PACKAGES = {"numpy": "python3-numpy", "matplotlib": "python3-matplotlib",
                   "h5py": "python3-h5py"}


class ReportError(Exception):
    """A report that cannot be read: the message names the file."""


class Omitted(Exception):
    """A plot that is not drawn, and why: its stage did not run, or its data is absent."""


def missing_plot_packages():
    """[(Debian package, error text)] for each plotting module that cannot be imported."""
    import importlib
    missing = []
    for module, package in DEBIAN_PACKAGES.items():
        try:
            importlib.import_module(module)
        except ImportError as error:
            missing.append((package, str(error)))
    return missing


def missing_packages_text(missing):
    names = ", ".join(package for package, _ in missing)
    why = "; ".join(f"{package}: {error}" for package, error in missing)
    return (f"missing {names} ({why}); install them with: apt-get install python3-matplotlib "
            f"python3-numpy python3-h5py")


def read_report(path):
    try:
        with open(path, "rb") as f:
            report = json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        raise ReportError(f"report '{path}' does not exist")
    except IsADirectoryError:
        raise ReportError(f"report '{path}' is a directory, not a report")
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ReportError(f"report '{path}' is not readable JSON: {error}")
    if not isinstance(report, dict):
        raise ReportError(f"report '{path}' is not a JSON object")
    return report


def natural_key(name):
    """gpu-node-2 before gpu-node-10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(name))]


def sibling_path(report_path, suffix):
    """The report's path with `suffix` in place of `.json` (run.json -> run.trace.h5)."""
    root, ext = os.path.splitext(report_path)
    return (root if ext == ".json" else report_path) + suffix


def default_trace_path(report_path):
    return sibling_path(report_path, ".trace.h5")


def merged_trace_candidates(report, report_path):
    """For each merged file, the places its trace may be: relative to the report's folder
    first, then as written (`report merge` records the paths it was given, relative to where
    it ran), then by name beside the report."""
    folder = os.path.dirname(os.path.abspath(report_path))
    found = []
    for entry in report.get("merged_from") or []:
        name = entry.get("file") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            continue
        places = [name] if os.path.isabs(name) else [
            os.path.join(folder, name), name, os.path.join(folder, os.path.basename(name))]
        unique = []
        for place in places:
            trace = default_trace_path(os.path.normpath(place))
            if trace not in unique:
                unique.append(trace)
        found.append(unique)
    return found


class TraceSet:
    """The traces of one report: its own and, for a merged report, those of the merged runs.
    A dataset is taken from the first trace that holds it."""

    def __init__(self, alternatives, report):
        """`alternatives`: for each trace, the paths it may have, the likeliest first; the
        report's own first, then the merged runs'."""
        self.files = []
        self.notes = []
        self.refused = {}  # dataset name -> why a trace's dataset of that name is not used
        opened = set()
        for k, places in enumerate(alternatives):
            existing = [p for p in places if os.path.exists(p)]
            if not existing:
                self.notes.append(f"no trace at {places[0]}" + (
                    f" (nor {', '.join(places[1:])})" if len(places) > 1 else ""))
            elif os.path.realpath(existing[0]) not in opened:
                opened.add(os.path.realpath(existing[0]))
                self._open(existing[0], report)
            if k == 0 and report.get("merged_from") and not existing:
                # `report merge` writes no trace of its own: the merged runs' traces stand in.
                self.notes.pop()

    def _open(self, path, report):
        try:
            import h5py
            handle = h5py.File(path, "r")
        except (OSError, ImportError) as error:
            self.notes.append(f"trace {path} cannot be read: {error}")
            return
        if not self._same_run(handle, path, report):
            handle.close()
            return
        self.files.append((path, handle))

    def _same_run(self, handle, path, report):
        # A stale trace beside a newer report would draw another run's samples under this
        # report's title; a merged report's traces carry their own runs' ids, so only an
        # unmerged report is held to it.
        trace_run = _text(handle.attrs.get("run_id"))
        report_run = (report.get("context") or {}).get("run_id")
        if report.get("merged_from") or not trace_run or not report_run:
            return True
        if trace_run != report_run:
            self.notes.append(f"trace {path} is of run {trace_run}, not this report's "
                              f"{report_run}: not used")
            return False
        return True

    def find(self, name):
        for path, handle in self.files:
            if name in handle:
                problem = _layout_problem(handle, name)
                if problem is None:
                    return handle[name]
                note = f"trace {path}: {name} {problem}: not used"
                if note not in self.notes:
                    self.notes.append(note)
                self.refused[name] = note
        return None

    def need(self, *names):
        """The named datasets, or Omitted saying which is missing and where it was looked for."""
        found = [self.find(name) for name in names]
        absent = [name for name, d in zip(names, found) if d is None]
        if absent:
            raise Omitted(self.why_absent(absent))
        return found

    def why_absent(self, names):
        wanted = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        if not self.files:
            where = self.notes[0] if self.notes else "no trace given"
            if len(self.notes) > 1:
                where += f", nor {len(self.notes) - 1} more (the notes list them)"
            return f"needs the trace ({wanted}): {where}"
        refused = [self.refused[name] for name in names if name in self.refused]
        if refused:
            return f"needs {wanted} from the trace; " + refused[0]
        held = ", ".join(path for path, _ in self.files)
        return f"needs {wanted} from the trace; {held} does not hold it"

    def hosts(self):
        data = self.find("ranks/host")
        return None if data is None else [_text(h) for h in data[:]]

    def close(self):
        for _, handle in self.files:
            handle.close()
        self.files = []


# The documented layout (docs/report.md, "The trace"): each dataset's kind (f float, i integer,
# S bytes) and dimensions by name. A crafted or damaged trace (a link out of the file, a group
# where a dataset should be, the wrong type, dimensions that disagree or would not fit in memory)
# leaves its plots omitted with the reason, never a traceback or a read of terabytes.
_PHASES = ("start", "arrival", "data", "compute", "comm_exposed", "optimizer", "checkpoint",
           "comm", "step")
TRACE_LAYOUT = {
    "ranks/host": ("S", ("R",)),
    "train/step_number": ("i", ("S",)),
    **{f"train/{p}": ("f", ("R", "S")) for p in _PHASES},
    "train/bucket_start": ("f", ("R", "S", "B")),
    "train/bucket_end": ("f", ("R", "S", "B")),
    "checkpoints/step": ("i", ("C",)),
    "checkpoints/bytes": ("i", ("C",)),
    **{f"checkpoints/{t}": ("f", ("C",)) for t in (
        "serialize_s", "write_s", "fsync_s", "commit_s", "total_s", "stall_s")},
    "checkpoints/rank_write_gbps": ("f", ("R", "C")),
    "checkpoints/rank_stall_s": ("f", ("R", "C")),
    "sweep/op": ("S", ("W",)),
    "sweep/bytes": ("i", ("W",)),
    "sweep/in_place": ("i", ("W",)),
    "sweep/iteration_s": ("f", ("W", "I")),
    "sweep/rank_iteration_s": ("f", ("R", "W", "I")),
    "drill/time_unix": ("f", ("E",)),
    "drill/event": ("S", ("E",)),
    "drill/launch": ("i", ("E",)),
    "drill/failure": ("i", ("E",)),
    "drill/detail": ("S", ("E",)),
}
# The dataset that sets each dimension; the others must agree with it.
_DIMENSION_OWNERS = {"R": "ranks/host", "S": "train/step_number", "C": "checkpoints/step",
                     "W": "sweep/op", "E": "drill/event"}
# 4,096 ranks x 10,000 steps x 8 buckets; a larger dataset is not a trace this tool wrote.
MAX_TRACE_ELEMENTS = 2 ** 29
MAX_STRING_BYTES = 256


def _layout_problem(handle, name, checking=()):
    """Why `name` in this trace is not the documented dataset, or None when it is."""
    import h5py
    parts = name.split("/")
    for depth in range(1, len(parts) + 1):
        link = handle.get("/".join(parts[:depth]), getlink=True)
        if not isinstance(link, h5py.HardLink):
            return f"is a {type(link).__name__} (a link), not the file's own data"
    item = handle.get(name)
    if not isinstance(item, h5py.Dataset):
        return "is not a dataset"
    kind, dims = TRACE_LAYOUT.get(name, (None, None))
    if kind is None:
        return None
    if item.dtype.kind != kind and not (kind == "f" and item.dtype.kind == "i"):
        documented = {"f": "float", "i": "integer", "S": "string"}[kind]
        return f"has type {item.dtype}, not the documented {documented}"
    if kind == "S" and item.dtype.itemsize > MAX_STRING_BYTES:
        return f"holds strings of {item.dtype.itemsize} bytes"
    if len(item.shape) != len(dims):
        return f"has {len(item.shape)} dimensions, not {len(dims)}"
    if item.size > MAX_TRACE_ELEMENTS:
        return f"holds {item.size} values, more than a trace of this layout can"
    for size, dim in zip(item.shape, dims):
        owner = _DIMENSION_OWNERS.get(dim)
        if owner and owner != name and owner not in checking:
            if _layout_problem(handle, owner, checking + (name,)) is not None:
                return f"cannot be checked against {owner}"
            if handle[owner].shape[0] != size:
                return f"has {size} along {dim}, where {owner} has {handle[owner].shape[0]}"
    return None


def _text(value):
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace").rstrip("\0")
    if hasattr(value, "tolist") and not isinstance(value, str):
        return _text(value.tolist())
    return str(value)


class Run:
    """One report, its folder, its traces and its baseline."""

    def __init__(self, path, trace=None, baseline=None, open_traces=True):
        self.path = path
        self.report = read_report(path)
        self.folder = os.path.dirname(os.path.abspath(path))
        self.stem = _stem(path)
        self.traces = TraceSet(self._trace_paths(trace), self.report) if open_traces else None
        self.baseline_path, self.baseline, self.baseline_note = self._baseline(baseline)

    def _trace_paths(self, trace):
        own = [trace] if trace else []
        recorded = self.context.get("trace")
        if not trace and isinstance(recorded, str) and recorded and recorded != "none":
            # context.trace is the path as the run was given it, relative to where it ran.
            own += [recorded] if os.path.isabs(recorded) else [
                recorded, os.path.join(self.folder, os.path.basename(recorded))]
        if not trace:
            own.append(default_trace_path(self.path))
        unique = list(dict.fromkeys(own))
        return [unique] + merged_trace_candidates(self.report, self.path)

    def _baseline(self, given):
        named = given or (self.report.get("accept") or {}).get("baseline")
        if not isinstance(named, str) or not named:
            return None, None, None
        candidates = [named] if os.path.isabs(named) or given else [
            named, os.path.join(self.folder, named)]
        for candidate in candidates:
            if os.path.exists(candidate):
                try:
                    return candidate, read_report(candidate), None
                except ReportError as error:
                    return candidate, None, f"baseline not drawn: {error}"
        return named, None, f"baseline not drawn: report '{named}' was not found"

    def section(self, name):
        value = self.report.get(name)
        return value if isinstance(value, dict) else None

    @property
    def context(self):
        return self.section("context") or {}

    def world_size(self):
        size = self.context.get("world_size")
        return size if isinstance(size, int) else len(self.report.get("ranks") or [])

    def hosts(self):
        hosts = self.context.get("hosts")
        if isinstance(hosts, list) and hosts:
            return [str(h) for h in hosts]
        return sorted({str(r.get("host")) for r in self.report.get("ranks") or []},
                      key=natural_key)

    def rank_hosts(self):
        """Host of each rank, by rank, from the report or the trace."""
        ranks = [r for r in self.report.get("ranks") or []
                 if isinstance(r, dict) and isinstance(r.get("rank"), int) and r["rank"] >= 0]
        if ranks:
            hosts = {r["rank"]: str(r.get("host", "?")) for r in ranks}
            return [hosts.get(i, "?") for i in range(max(hosts) + 1)]
        traced = self.traces.hosts() if self.traces else None
        return traced or []

    def subcommand(self):
        line = self.context.get("command_line")
        if isinstance(line, list) and len(line) > 1 and not str(line[1]).startswith("-"):
            return str(line[1])
        if self.section("accept"):
            return "accept"
        if self.section("sweep") and not self.section("train"):
            return "sweep"
        if self.section("drill") and not self.section("train"):
            return "drill"
        return "train"

    def scenario(self):
        name = self.context.get("scenario_file")
        if name:
            return os.path.basename(str(name))
        digest = self.context.get("scenario_hash")
        return f"scenario {str(digest)[:12]}" if digest else "no scenario file"

    def what_ran(self):
        """One line naming the run: subcommand, scenario, hosts and ranks."""
        hosts, ranks = len(self.hosts()), self.world_size()
        return (f"trainproof {self.subcommand()} {self.scenario()}: {hosts:,} "
                f"host{'s' if hosts != 1 else ''}, {ranks:,} rank{'s' if ranks != 1 else ''}")

    def selected_stages(self):
        stages = (self.section("accept") or {}).get("stages")
        return [str(s) for s in stages] if isinstance(stages, list) else []

    def has_stage(self, stage):
        node = self.report
        for key in STAGE_SECTIONS.get(stage, (stage,)):
            node = node.get(key) if isinstance(node, dict) else None
        return bool(node)

    def stage_attempts(self, stage):
        attempts = (self.section("accept") or {}).get("attempts") or []
        return [a for a in attempts if isinstance(a, dict) and a.get("stage") == stage]

    def lacking_stages(self):
        """Selected stages without their section that did not run to their end: a stage that
        ran and measured nothing (pairwise on one node) is not lacking."""
        lacking = []
        for stage in self.selected_stages():
            if stage not in STAGE_SECTIONS or self.has_stage(stage):
                continue
            attempts = self.stage_attempts(stage)
            if not attempts or attempts[-1].get("stopped"):
                lacking.append(stage)
        return lacking

    def why_no_stage(self, stage, what):
        """Why the report has no `what` for `stage`: not selected, ran and measured nothing,
        stopped, or never reached."""
        if self.has_stage(stage):
            return f"stage {stage} ran, but the report has no {what}"
        if stage not in STAGE_SECTIONS:
            return f"the report has no {what}: this run had no {stage}"
        if stage not in self.selected_stages():
            return f"stage {stage} did not run: the report has no {what}"
        attempts = self.stage_attempts(stage)
        if not attempts:
            return (f"stage {stage} was selected but never ran: the report has no {what} "
                    f"(verdict {self.report.get('verdict')})")
        last = attempts[-1]
        if last.get("stopped"):
            return f"stage {stage} was stopped before its end: the report has no {what}"
        reasons = [c.get("reason") for c in last.get("checks") or []
                   if isinstance(c, dict) and c.get("status") == "n/a" and c.get("reason")]
        return f"stage {stage} ran but measured nothing" + (f": {reasons[0]}" if reasons else "")

    def require_section(self, name, stage=None):
        """The section, or Omitted saying why its stage left none."""
        section = self.section(name)
        if section:
            return section
        raise Omitted(self.why_no_stage(stage or name, f"{name} section"))

    def close(self):
        if self.traces:
            self.traces.close()


def _stem(path):
    name = os.path.basename(path)
    return name[:-5] if name.endswith(".json") else name
