"""`report`, `report compare` and `report merge` fed random mutations of real reports:
truncations, type swaps, deep nesting, huge numbers, control bytes and missing keys. Every
outcome is exit 0, 1 or 2, and a 2 says why in one line; never a signal, never exit 3, never a
raw control byte on the terminal. Bounded: TRAINPROOF_FUZZ_CASES cases (default 120) or
TRAINPROOF_FUZZ_SECONDS (default 60), whichever ends first. The seed is fixed (24), so the suite
repeats itself; TRAINPROOF_FUZZ_SEED=random explores (the seed is printed, and a number repeats
it)."""
import copy
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from harness import BIN, main

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
SOURCES = ["report.golden.json", "report-checkpoints.golden.json"]


def nodes(value, path=()):
    """Every (path, value) in a JSON document, the root included."""
    yield path, value
    if isinstance(value, dict):
        for key, child in value.items():
            yield from nodes(child, path + (key,))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from nodes(child, path + (i,))


def replaced(doc, path, value):
    if not path:
        return value
    doc = copy.deepcopy(doc)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return doc


class Mutator:
    def __init__(self, rng):
        self.rng = rng

    def __call__(self, doc):
        kind = self.rng.choice(["truncate", "type", "deep", "number", "control", "drop"])
        path, value = self.rng.choice(list(nodes(doc)))
        r = self.rng
        if kind == "truncate":
            text = json.dumps(doc).encode()
            return kind, text[:r.randrange(len(text))]
        if kind == "type":
            other = r.choice(["text", 7, -1.5, [], {}, None, True, [1, "x"], {"a": {}}])
            return kind, json.dumps(replaced(doc, path, other)).encode()
        if kind == "deep":
            depth = r.choice([200, 300, 5000, 100000])
            text = json.dumps(replaced(doc, path, "@DEEP@"))
            return kind, text.replace('"@DEEP@"', "[" * depth + "]" * depth).encode()
        if kind == "number":
            huge = r.choice(["1e308", "-1e308", "1e999", "18446744073709551616", "-0", "1e-400"])
            text = json.dumps(replaced(doc, path, "@NUM@"))
            return kind, text.replace('"@NUM@"', huge).encode()
        if kind == "control":
            bad = r.choice(["\x1b[2J", "\x00", "\x07", "\u202e"])
            text = json.dumps(replaced(doc, path, f"a{bad}b")).encode()
            return kind, (text.replace(b"a\\u001b", b"a\x1b") if r.random() < 0.5 else text)
        if isinstance(value, dict) and value:  # drop
            key = r.choice(list(value))
            smaller = {k: v for k, v in value.items() if k != key}
            return kind, json.dumps(replaced(doc, path, smaller)).encode()
        return kind, json.dumps(doc).encode()


class ReportFuzz(unittest.TestCase):
    def test_mutated_reports_end_in_0_1_or_2_with_one_line(self):
        chosen = os.environ.get("TRAINPROOF_FUZZ_SEED", "24")
        seed = random.randrange(1 << 30) if chosen == "random" else int(chosen)
        cases = int(os.environ.get("TRAINPROOF_FUZZ_CASES", 120))
        budget = float(os.environ.get("TRAINPROOF_FUZZ_SECONDS", 60))
        print(f"fuzz seed {seed} (TRAINPROOF_FUZZ_SEED repeats it)", file=sys.stderr)
        rng = random.Random(seed)
        mutate = Mutator(rng)
        docs = []
        for name in SOURCES:
            with open(os.path.join(DATA, name)) as f:
                docs.append(json.load(f))
        tmp = tempfile.mkdtemp(prefix="trainproof-fuzz-")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        good = os.path.join(tmp, "good.json")
        with open(good, "w") as f:
            json.dump(docs[0], f)
        start = time.monotonic()
        ran = 0
        for case in range(cases):
            if time.monotonic() - start > budget:
                break
            kind, text = mutate(rng.choice(docs))
            path = os.path.join(tmp, f"case-{case}.json")
            with open(path, "wb") as f:
                f.write(text)
            out = os.path.join(tmp, f"merged-{case}.json")
            for args in (["report", path], ["report", "compare", good, path],
                         ["report", "compare", path, good],
                         ["report", "merge", path, good, "--report", out]):
                proc = subprocess.run([BIN, *args], capture_output=True, timeout=60)
                what = f"seed {seed} case {case} ({kind}): trainproof {' '.join(args)}"
                self.assertIn(proc.returncode, (0, 1, 2), f"{what}\n{proc.stderr[-2000:]!r}")
                self.assertNotIn(b"\x1b", proc.stdout + proc.stderr, what)
                if proc.returncode == 2:
                    errors = [line for line in proc.stderr.splitlines()
                              if line.startswith(b"trainproof: error: ")]
                    self.assertEqual(len(errors), 1, f"{what}\n{proc.stderr!r}")
            ran += 1
        print(f"fuzz: {ran} cases in {time.monotonic() - start:.1f} s", file=sys.stderr)
        self.assertGreater(ran, 0)


if __name__ == "__main__":
    main()
