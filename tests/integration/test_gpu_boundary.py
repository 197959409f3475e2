"""The GPU boundary: build/trainproof links no CUDA or NCCL library (the GPU library is dlopened
only when a GPU backend is asked for), and the plugin's entry table never changes without a bump
of kGpuApiVersion, which is how a library left over from another build is refused."""
import hashlib
import os
import re
import subprocess
import sys
import unittest

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEADER = os.environ.get("TRAINPROOF_GPU_API_HEADER", os.path.join(SOURCE, "gpu", "gpu_api.h"))
BIN = os.environ.get("TRAINPROOF_BIN", os.path.join(SOURCE, "build", "trainproof"))

# (kGpuApiVersion, digest of the table and the types it uses). Change both together, and only
# after bumping kGpuApiVersion: the test prints the new digest.
RECORDED = (5, "e7eb0f6281e528b7d87077034f980b6c10243009f96c2604bb873d2d5dfdae26")

GPU_LIBRARIES = re.compile(r"^lib(cudart|cuda|cublas|cublasLt|nccl)\.so(\.|$)")


def strip_comments(text):
    """C++ text without its comments; string and character literals are kept as they are."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            out.append(" ")
        elif text[i] in "\"'":
            quote, j = text[i], i + 1
            while j < n and text[j] != quote:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def normalise(code):
    """Whitespace only where two words would otherwise run together, so that reformatting the
    header (line breaks, alignment, spaces around operators) never changes the digest."""
    code = re.sub(r"\s+", " ", code).strip()
    return re.sub(r"(?<=\W) | (?=\W)", "", code)


def structs(code):
    """{name: normalised `struct name { ... };`} for every struct defined in `code`."""
    found = {}
    for match in re.finditer(r"\bstruct\s+(\w+)\s*\{", code):
        depth, i = 1, match.end()
        while depth and i < len(code):
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            i += 1
        found[match.group(1)] = normalise(code[match.start():i] + ";")
    return found


def table_digest(text):
    """sha256 of struct GpuApi and, in order of first use, every struct of the header it uses,
    directly or through another."""
    defined = structs(strip_comments(text))
    if "GpuApi" not in defined:
        raise AssertionError(f"{HEADER} defines no struct GpuApi")
    order, queue = [], ["GpuApi"]
    while queue:
        name = queue.pop(0)
        if name in order:
            continue
        order.append(name)
        body = defined[name]
        queue += [t for t in re.findall(r"\w+", body) if t in defined and t != name]
    digest = hashlib.sha256("\n".join(defined[name] for name in order).encode()).hexdigest()
    return digest, order


def api_version(text):
    match = re.search(r"\bkGpuApiVersion\s*=\s*(\d+)\s*;", strip_comments(text))
    if not match:
        raise AssertionError(f"{HEADER} declares no kGpuApiVersion")
    return int(match.group(1))


def table_problem(text, recorded=RECORDED):
    """None when the header's (version, digest) is the recorded pair; else what to do."""
    version = api_version(text)
    digest, types = table_digest(text)
    if (version, digest) == recorded:
        return None
    uses = ", ".join(types)
    if version == recorded[0]:
        return (f"the GPU plugin's table ({uses} in gpu/gpu_api.h) changed but kGpuApiVersion is "
                f"still {version}: bump kGpuApiVersion, then record the new pair in "
                f"tests/integration/test_gpu_boundary.py as RECORDED = ({version + 1}, "
                f"\"{digest}\")")
    return (f"kGpuApiVersion is {version} but tests/integration/test_gpu_boundary.py records "
            f"{recorded[0]}: record the new pair as RECORDED = ({version}, \"{digest}\")")


def needed(path):
    """The NEEDED entries of an ELF file's dynamic section."""
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def ldd(path):
    """Every library the loader would map for `path`, direct or not, found or not."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def gpu_libraries(names):
    return sorted({os.path.basename(n) for n in names if GPU_LIBRARIES.match(os.path.basename(n))})


class GpuBoundary(unittest.TestCase):

    def setUp(self):
        if not os.path.isfile(BIN):
            self.fail(f"{BIN} does not exist: build it first (scripts/build.sh)")

    def test_trainproof_needs_no_cuda_or_nccl_library(self):
        direct = needed(BIN)
        # Not vacuous: the parse must see the libraries trainproof does link.
        self.assertTrue(any(n.startswith("libmpi.so") for n in direct), direct)
        self.assertEqual(gpu_libraries(direct), [],
                         f"{BIN} has a NEEDED entry for a GPU library; only "
                         f"libtrainproof_gpu.so may link CUDA or NCCL")

    def test_trainproof_loads_no_cuda_or_nccl_library_through_another(self):
        mapped = ldd(BIN)
        self.assertTrue(any(n.startswith("libmpi.so") for n in mapped), mapped)
        self.assertEqual(gpu_libraries(mapped), [],
                         f"ldd {BIN} maps a GPU library through one of its dependencies")

    def test_the_gpu_library_beside_it_is_what_links_cuda(self):
        # Where the GPU library was built, the same check must find CUDA in it: the patterns
        # match the libraries as they are really named.
        library = os.path.join(os.path.dirname(BIN), "libtrainproof_gpu.so")
        if not os.path.isfile(library):
            self.skipTest("no GPU library in this build (TRAINPROOF_CUDA=OFF or no toolchain)")
        self.assertIn("libcudart", " ".join(gpu_libraries(needed(library))))

    def test_the_plugin_table_changes_only_with_its_version(self):
        with open(HEADER) as f:
            problem = table_problem(f.read())
        self.assertIsNone(problem, problem)


class TableDigest(unittest.TestCase):
    """The digest check itself: it must see a change to the table, and only such a change."""

    def setUp(self):
        with open(HEADER) as f:
            self.text = f.read()
        self.digest, self.types = table_digest(self.text)

    def recorded_now(self):
        return (api_version(self.text), self.digest)

    def test_covers_the_table_and_the_types_it_uses(self):
        self.assertEqual(self.types[0], "GpuApi")
        self.assertIn("GpuDevice", self.types)
        self.assertIn("GpuVersions", self.types)

    def test_a_new_entry_without_a_bump_fails_asking_for_one(self):
        edited = self.text.replace("  GpuVersions (*versions)();",
                                   "  GpuVersions (*versions)();\n  int (*reset)(int device);")
        self.assertNotEqual(edited, self.text)
        problem = table_problem(edited, self.recorded_now())
        self.assertIsNotNone(problem)
        self.assertIn("bump kGpuApiVersion", problem)

    def test_a_changed_field_of_a_used_type_fails(self):
        edited = self.text.replace("int sm_count = 0;", "int64_t sm_count = 0;")
        self.assertNotEqual(edited, self.text)
        self.assertIn("bump kGpuApiVersion", table_problem(edited, self.recorded_now()))

    def test_a_bump_without_a_new_record_fails_asking_for_one(self):
        version = api_version(self.text)
        edited = self.text.replace(f"kGpuApiVersion = {version};",
                                   f"kGpuApiVersion = {version + 1};")
        self.assertIn(f"RECORDED = ({version + 1}, ", table_problem(edited, self.recorded_now()))

    def test_comments_and_layout_do_not_count(self):
        edited = self.text.replace("struct GpuApi {", "struct GpuApi {  // the entry table\n")
        edited = edited.replace("int version;", "int   version ;  /* checked by the loader */")
        edited = edited.replace(" = 0;", "=0;")
        self.assertNotEqual(edited, self.text)
        self.assertEqual(table_digest(edited)[0], self.digest)
        self.assertIsNone(table_problem(edited, self.recorded_now()))


if __name__ == "__main__":
    unittest.main(verbosity=2)
