"""The package on a Python without CPython's reader (Debian's 3.11), against CPython 3.15.2.

    python3.11 test_package.py        (the package installed; run by scripts/python.sh)

Environment: TACHYON_ORACLE (scripts/oracle-python.sh), TACHYON_CLI (the `tachyon`
command), TACHYON_REAL_PROFILES, TACHYON_GPERFTOOLS_PROFILES, TACHYON_MOJO_PROFILES,
TACHYON_PSTATS_PROFILES (the recorded real profiles, when the test command made them).

CPython's views come from running CPython 3.15.2 itself (qemu-tests/oracle/cpython_batch.py)
on the same files; ours from the very same script on 3.11 with this package standing in for
_remote_debugging (it has the same names), so both sides run identical Python.
"""
import glob
import importlib
import itertools
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import unittest

import tachyon_profiles as tp

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
VECTORS = os.path.join(ROOT, "qemu-tests", "vectors", "cpython-3.15.2")
FIXTURES = os.path.join(ROOT, "qemu-tests", "fixtures", "real-3.15.2")
ORACLE = os.environ.get("TACHYON_ORACLE", os.path.join(ROOT, "scripts", "oracle-python.sh"))
CLI = os.environ.get("TACHYON_CLI", os.path.join(ROOT, "target", "release", "tachyon"))
BATCH = os.path.join(ROOT, "qemu-tests", "oracle", "cpython_batch.py")

# The batch script imports _remote_debugging; here it gets this package.
sys.modules["_remote_debugging"] = tp
sys.path.insert(0, os.path.dirname(BATCH))
sys.path.insert(0, HERE)
batch = importlib.import_module("cpython_batch")


def cpython(action, pairs, tmp):
    """Runs cpython_batch.py ACTION over (src, dst) pairs in CPython 3.15.2."""
    manifest = os.path.join(tmp, f"{action}.manifest")
    with open(manifest, "w") as f:
        for src, dst in pairs:
            f.write(f"{src}\t{dst}\n")
    subprocess.run([ORACLE, "amd64", BATCH, action, manifest], check=True)


def real_profiles():
    files = sorted(glob.glob(os.path.join(FIXTURES, "*.pyb")))
    for var in ("TACHYON_REAL_PROFILES",):
        if os.environ.get(var):
            files += sorted(glob.glob(os.path.join(os.environ[var], "*.pyb")))
    files += sorted(glob.glob(os.path.join(VECTORS, "*.bin")))
    assert len(files) >= 20, files
    return files


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


class ReadsAsCPythonReads(unittest.TestCase):
    def test_every_real_profile_and_vector_replays_as_in_cpython(self):
        files = real_profiles()
        with tempfile.TemporaryDirectory() as tmp:
            pairs = [(f, os.path.join(tmp, f"{i}.cpython.jsonl")) for i, f in enumerate(files)]
            cpython("dump", pairs, tmp)
            for i, (src, theirs) in enumerate(pairs):
                ours = os.path.join(tmp, f"{i}.ours.jsonl")
                batch.dump(src, ours)
                with self.subTest(file=os.path.basename(src)):
                    a, b = read(ours), read(theirs)
                    self.assertNotIn('"error"', b, "CPython refused a real file")
                    self.assertEqual(a, b)

    def test_hostile_files_raise_and_never_crash(self):
        # Cuts and flipped bytes of real files: CPython's reader and ours must agree on the
        # error (its message) or on the samples, and nothing may crash the interpreter.
        rng = random.Random(20261126)
        sources = [f for f in real_profiles() if os.path.getsize(f) < 200_000][:8]
        with tempfile.TemporaryDirectory() as tmp:
            pairs = []
            for n, src in enumerate(sources):
                data = read(src, "rb")
                for k in range(12):
                    bad = bytearray(data)
                    if k % 3 == 0:
                        bad = bad[: rng.randrange(len(bad))]
                    else:
                        for _ in range(rng.randrange(1, 4)):
                            bad[rng.randrange(len(bad))] = rng.randrange(256)
                    path = os.path.join(tmp, f"bad{n}_{k}.pyb")
                    with open(path, "wb") as f:
                        f.write(bad)
                    pairs.append((path, path + ".cpython.jsonl"))
            cpython("dump", pairs, tmp)
            errors = late_zstd = 0
            for src, theirs in pairs:
                ours = src + ".ours.jsonl"
                batch.dump(src, ours)
                a, b = read(ours).splitlines(), read(theirs).splitlines()
                errors += '"error"' in b[-1]
                with self.subTest(file=os.path.basename(src)):
                    if len(b) == 1 and "zstd" in b[0] and '"error"' in a[-1]:
                        # CPython decompresses the whole zstd region when it opens a file;
                        # we decompress as we replay: the same file is refused, later.
                        late_zstd += 1
                        continue
                    self.assertEqual(a[:-1], b[:-1])
                    if '"error"' in b[-1]:
                        # Our message is CPython's, sometimes with the value that broke the
                        # rule after it ("File too small for header (27 bytes)").
                        theirs_msg, ours_msg = json.loads(b[-1])["error"], json.loads(a[-1]).get("error", "")
                        self.assertTrue(ours_msg.startswith(theirs_msg), (ours_msg, theirs_msg))
                    else:
                        self.assertEqual(a[-1], b[-1])
            print(f"hostile files: {len(pairs)}, refused by CPython {errors}, of which zstd refused later by us {late_zstd}")
            self.assertGreater(errors, len(pairs) // 3, "too few of the damaged files were refused")

    def test_bad_input_of_every_format_raises_under_a_memory_limit(self):
        # As std-adapter/tests/bad_input.rs sweeps the library: truncations and single-byte
        # corruptions of a Tachyon, a zstd Tachyon, a MOJO and a pstats vector, and the fuzz
        # regression that claims two million threads, through BinaryReader and convert(), in a
        # child interpreter limited to 1 GiB of address space: each must raise ValueError or
        # OSError (or read), never crash, never run out of memory.
        files = [os.path.join(VECTORS, "05_two_threads.x86_64.bin"), os.path.join(VECTORS, "09_zstd.x86_64.bin"),
                 os.path.join(ROOT, "qemu-tests", "vectors", "mojo-austin-3.7", "a37_gc_small_py311.mojo"),
                 os.path.join(ROOT, "qemu-tests", "vectors", "pstats", "contract_big_int_calls.pstats")]
        regression = os.path.join(ROOT, "fuzz", "regressions", "tachyon_replay", "oom-2097192-threads-claimed")
        child = r'''
import os, resource, sys, tempfile
import tachyon_profiles as tp
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
class Nothing:
    def collect(self, s, t): pass
files, regression = sys.argv[1:-1], sys.argv[-1]
tmp = tempfile.mkdtemp()
cases = [(regression, open(regression, "rb").read())]
for f in files:
    data = open(f, "rb").read()
    step = max(1, len(data) // 60)
    cases += [(f, data[:n]) for n in range(0, len(data), step)]
    for i in range(0, len(data), step):
        for v in (0x00, 0xff, 0x80):
            bad = bytearray(data); bad[i] = v; cases.append((f, bytes(bad)))
refused = 0
for n, (origin, data) in enumerate(cases):
    path = os.path.join(tmp, f"case{n}" + os.path.splitext(origin)[1])
    with open(path, "wb") as out:
        out.write(data)
    for act in (lambda: tp.BinaryReader(path).replay(Nothing()), lambda: tp.convert(path, to="collapsed"),
                lambda: tp.convert(path, to="pstats-text")):
        try:
            act()
        except (ValueError, OSError):
            refused += 1
print(len(cases), refused)
'''
        r = subprocess.run([sys.executable, "-c", child, *files, regression], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        cases, refused = map(int, r.stdout.split())
        print(f"bad input: {cases} files, {refused} refusals")
        self.assertGreater(cases, 700)
        self.assertGreater(refused, cases)

    def test_a_format_error_names_file_offset_and_rule(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "bad.pyb")
            data = bytearray(read(os.path.join(VECTORS, "01_single_sample.x86_64.bin"), "rb"))
            data[0:4] = b"XXXX"
            with open(path, "wb") as f:
                f.write(data)
            with self.assertRaises(tp.FormatError) as cm:
                tp.BinaryReader(path)
            e = cm.exception
            self.assertIsInstance(e, ValueError)
            self.assertEqual(str(e), "Invalid magic number: 0x58585858")
            self.assertEqual((e.filename, e.format, e.offset, e.offset_in, e.rule), (path, "tachyon", 0, "file", "BadMagic"))
            with self.assertRaises(FileNotFoundError) as cm:
                tp.BinaryReader(os.path.join(tmp, "missing.pyb"))
            self.assertEqual(cm.exception.filename, os.path.join(tmp, "missing.pyb"))
            # Another format through convert(): a pstats file cut in half.
            cut = os.path.join(tmp, "cut.pstats")
            data = read(os.path.join(ROOT, "qemu-tests", "vectors", "pstats", "contract_big_int_calls.pstats"), "rb")
            with open(cut, "wb") as f:
                f.write(data[: len(data) // 2])
            with self.assertRaises(tp.FormatError) as cm:
                tp.convert(cut, to="pstats-text")
            e = cm.exception
            self.assertIn("bad marshal data at offset 19", str(e))
            self.assertEqual((e.filename, e.format, e.offset, e.offset_in, e.rule), (cut, "pstats", 19, "file", "BadLength"))


class WritesAsCPythonWrites(unittest.TestCase):
    def test_writer_documents_are_byte_identical_to_cpythons(self):
        inputs = sorted(glob.glob(os.path.join(VECTORS, "*.input.json")))
        self.assertGreaterEqual(len(inputs), 14)
        with tempfile.TemporaryDirectory() as tmp:
            pairs = [(src, os.path.join(tmp, f"{i}.cpython.bin")) for i, src in enumerate(inputs)]
            cpython("write", pairs, tmp)
            ours = []
            for i, (src, theirs) in enumerate(pairs):
                mine = os.path.join(tmp, f"{i}.ours.bin")
                batch.write(src, mine)
                ours.append(mine)
                with self.subTest(input=os.path.basename(src)):
                    self.assertEqual(read(mine, "rb"), read(theirs, "rb"))
            # CPython 3.15.2 reads what we wrote on 3.11 to what its writer's file gives.
            dumps = [(f, f + ".jsonl") for f in ours + [t for _, t in pairs]]
            cpython("dump", dumps, tmp)
            for mine, (_, theirs) in zip(ours, pairs):
                self.assertEqual(read(mine + ".jsonl"), read(theirs + ".jsonl"))

    def test_big_endian_from_this_machine_reads_the_same(self):
        src = os.path.join(VECTORS, "05_two_threads.input.json")
        doc = json.loads(read(src))
        with tempfile.TemporaryDirectory() as tmp:
            big = os.path.join(tmp, "big.bin")
            w = tp.BinaryWriter(big, doc["sample_interval_us"], doc["start_time_us"], byte_order="big")
            for call in doc["samples"]:
                w.write_sample([tp.InterpreterInfo((it["iid"], [tp.ThreadInfo((th["tid"], th["status"], batch.frames_of(th["frames"]))) for th in it["threads"]])) for it in call["interpreters"]], call["ts"])
            w.finalize()
            self.assertEqual(read(big, "rb")[:4], b"TACH")
            # The s390x file CPython wrote for the same calls.
            self.assertEqual(read(big, "rb"), read(os.path.join(VECTORS, "05_two_threads.s390x.bin"), "rb"))


class CachesFrameObjectsByIdentity(unittest.TestCase):
    """The writer keeps the frame objects it is given in a cache of 32,768 slots by identity
    (python/src/frames.rs); a slot confused with another would write another frame's id."""

    def write(self, path, *parts):
        w = tp.BinaryWriter(path, 1000, 1_000_000)
        for ts, frames in itertools.chain(*parts):
            w.write_sample([tp.InterpreterInfo((0, [tp.ThreadInfo((7, 0, frames))]))], ts)
        w.finalize()

    def test_more_objects_than_slots_and_reused_addresses_write_what_their_contents_write(self):
        # 40,000 distinct frames under two shared ones, walked three times: the cache fills,
        # evicts in every set and hits. Then frames made for one sample as it is written (a
        # generator) and let go after it: only the cache's reference keeps one alive, else
        # the allocator would hand its address to the next sample's frame, of other contents.
        many = [tp.FrameInfo((f"m{i % 89}.py", tp.LocationInfo((i, i + 1, i % 7, 9)), f"f{i}", i % 3 or None))
                for i in range(40_000)]
        hot = [tp.FrameInfo(("main.py", tp.LocationInfo((1, 1, 0, 4)), "main", None)),
               tp.FrameInfo(("run.py", None, "run", 5))]
        stacks = [hot + many[4 * k:4 * k + 4] for _ in range(3) for k in range(10_000)]

        def fresh(k):
            return [tp.FrameInfo((f"t{k % 5}.py", tp.LocationInfo((k % 11, k % 13, 0, 1)), f"g{k % 17}", None))]

        as_lists = [[list(f) for f in s] for s in stacks]
        with tempfile.TemporaryDirectory() as tmp:
            cached, plain = os.path.join(tmp, "cached.pyb"), os.path.join(tmp, "lists.pyb")
            # Each object's fields as a list, which the cache never holds, give the reference.
            self.write(cached, [(2_000_000 + 1000 * k, s) for k, s in enumerate(stacks)],
                       ((100_000_000 + 1000 * k, hot + fresh(k)) for k in range(3_000)))
            self.write(plain, [(2_000_000 + 1000 * k, s) for k, s in enumerate(as_lists)],
                       ((100_000_000 + 1000 * k, [list(f) for f in hot + fresh(k)]) for k in range(3_000)))
            self.assertEqual(read(cached, "rb"), read(plain, "rb"))
            reader = tp.BinaryReader(cached)
            self.assertEqual(reader.get_info()["sample_count"], 33_000)
            reader.close()


class ConvertsAsTheCommandConverts(unittest.TestCase):
    def inputs(self):
        files = [os.path.join(ROOT, "examples", "stdlib_work.pyb")]
        files += sorted(glob.glob(os.path.join(FIXTURES, "*.pyb")))[:2]
        vectors = os.path.join(ROOT, "qemu-tests", "vectors")
        for pattern in ("gperftools-2.10/**/*.prof", "mojo-austin-3.7/**/*.mojo", "pstats/**/*.pstats", "pstats/**/*.prof"):
            files += sorted(glob.glob(os.path.join(vectors, pattern), recursive=True))[:1]
        for var, pattern in (("TACHYON_GPERFTOOLS_PROFILES", "**/*.prof"), ("TACHYON_MOJO_PROFILES", "**/*.mojo"),
                             ("TACHYON_PSTATS_PROFILES", "**/*.pstats")):
            if os.environ.get(var):
                files += sorted(glob.glob(os.path.join(os.environ[var], pattern), recursive=True))[:1]
        return files

    def test_every_output_equals_the_commands(self):
        compared = 0
        for src in self.inputs():
            for to in tp.OUTPUTS:
                if to == "jsonl":
                    continue  # a random run id per conversion
                cmd = subprocess.run([CLI, "--quiet", "convert", src, "--to", to], capture_output=True)
                with self.subTest(input=os.path.basename(src), to=to):
                    if cmd.returncode != 0:
                        with self.assertRaises((ValueError, OSError)):
                            tp.convert(src, to=to)
                        continue
                    ours = tp.convert(src, to=to)
                    self.assertEqual(ours.encode() if isinstance(ours, str) else ours, cmd.stdout)
                    compared += 1
        self.assertGreater(compared, 40)

    def test_options_reach_the_pipeline(self):
        src = os.path.join(ROOT, "examples", "stdlib_work.pyb")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "big.pyb")
            n = tp.convert(src, to="tachyon", output=out, byte_order="big", compression="zstd")
            cmd = subprocess.run([CLI, "--quiet", "convert", src, "--to", "tachyon", "--byte-order", "big", "--compression", "zstd"], capture_output=True, check=True)
            self.assertEqual(read(out, "rb"), cmd.stdout)
            self.assertEqual(n, tp.BinaryReader(out).sample_count)
            self.assertEqual(tp.convert(src, to="flamegraph", title="T").encode(),
                             subprocess.run([CLI, "--quiet", "convert", src, "--to", "flamegraph", "--title", "T"], capture_output=True, check=True).stdout)
        # A heatmap is a folder: the same pages as the command's, --source-root given as a list.
        with tempfile.TemporaryDirectory() as tmp:
            ours, theirs = os.path.join(tmp, "ours"), os.path.join(tmp, "theirs")
            n = tp.convert(src, to="heatmap", output=ours, source_root=["/nowhere/=/also-nowhere/"])
            subprocess.run([CLI, "--quiet", "convert", src, "--to", "heatmap", "-o", theirs,
                            "--source-root", "/nowhere/=/also-nowhere/"], check=True)
            self.assertEqual(n, tp.BinaryReader(src).sample_count)
            self.assertEqual(sorted(os.listdir(ours)), sorted(os.listdir(theirs)))
            self.assertIn("index.html", os.listdir(ours))
            for name in os.listdir(ours):
                self.assertEqual(read(os.path.join(ours, name), "rb"), read(os.path.join(theirs, name), "rb"), name)
        with self.assertRaisesRegex(ValueError, "folder"):
            tp.convert(src, to="heatmap")
        with self.assertRaisesRegex(ValueError, "title only applies to --to flamegraph"):
            tp.convert(src, to="collapsed", title="T")
        with self.assertRaisesRegex(TypeError, "unexpected keyword argument .colour."):
            tp.convert(src, to="collapsed", colour="red")


class ReadsEveryInput(unittest.TestCase):
    def test_read_samples_counts_what_collapsed_counts(self):
        src = os.path.join(ROOT, "examples", "stdlib_work.pyb")
        seen = []

        class Count:
            def collect(self, stack_frames, timestamps_us):
                seen.append(len(timestamps_us))

        n = tp.read_samples(src, Count())
        self.assertEqual(n, sum(seen))
        collapsed = tp.convert(src, to="collapsed")
        self.assertEqual(n, sum(int(line.rsplit(" ", 1)[1]) for line in collapsed.splitlines()))
        self.assertEqual(tp.detect(src), "tachyon")


class BadCalls(unittest.TestCase):
    def test_bad_calls_raise_cpythons_types_and_messages(self):
        bad_calls = importlib.import_module("bad_calls")
        theirs = json.loads(subprocess.run([ORACLE, "amd64", os.path.join(HERE, "bad_calls.py")], check=True,
                                           capture_output=True, text=True).stdout)
        ours = bad_calls.answers(tp)
        self.assertGreaterEqual(len(theirs), 20)
        for name, answer in theirs.items():
            with self.subTest(name):
                self.assertEqual(ours[name], answer)
        for name, expected in bad_calls.CRASHES_CPYTHON.items():
            with self.subTest(name):
                kind, message = ours[name]
                self.assertEqual(kind, "TypeError", message)
                self.assertTrue(message.startswith(f"{expected} must be a "), message)


class Compression(unittest.TestCase):
    def test_compression_takes_the_same_values_everywhere(self):
        src = os.path.join(ROOT, "examples", "stdlib_work.pyb")
        for names, number in (("zstd", 1), ("none", 0)):
            with self.subTest(names):
                self.assertEqual(tp.convert(src, to="tachyon", compression=names),
                                 tp.convert(src, to="tachyon", compression=number))
                with tempfile.TemporaryDirectory() as tmp:
                    files = []
                    for value in (names, number):
                        path = os.path.join(tmp, f"{value}.pyb")
                        with tp.BinaryWriter(path, 1000, 5, compression=value) as w:
                            frame = tp.FrameInfo(("a.py", tp.LocationInfo((1, 1, 0, 2)), "f", None))
                            w.write_sample([tp.InterpreterInfo((0, [tp.ThreadInfo((7, 0, [frame]))]))], 6)
                        files.append(read(path, "rb"))
                        self.assertEqual(tp.BinaryReader(path).get_info()["compression_type"], number)
                    self.assertEqual(files[0], files[1])
        for bad in ("gzip", 1.0, b"zstd", 2):
            with self.subTest(bad=bad), self.assertRaises((TypeError, ValueError)):
                tp.convert(src, to="tachyon", compression=bad)


class Help(unittest.TestCase):
    def test_the_module_and_every_public_class_function_and_method_have_help(self):
        self.assertIn("BinaryWriter", tp.__doc__ or "")
        missing = []
        for name in dir(tp):
            if name.startswith("_"):
                continue
            obj = getattr(tp, name)
            if not callable(obj):
                continue
            if not (obj.__doc__ or "").strip():
                missing.append(name)
            if isinstance(obj, type):
                for attr, member in vars(obj).items():
                    if attr.startswith("_") and attr not in ("__enter__", "__exit__", "__init__", "__new__"):
                        continue
                    if callable(member) or isinstance(member, property) or type(member).__name__ == "getset_descriptor":
                        if not (getattr(member, "__doc__", None) or "").strip():
                            missing.append(f"{name}.{attr}")
        self.assertEqual(missing, [])


class ReadmeExample(unittest.TestCase):
    def test_the_readmes_python_example_runs(self):
        readme = read(os.path.join(ROOT, "README.md"))
        m = re.search(r"<!-- python example -->\s*```python\n(.*?)```", readme, re.S)
        self.assertIsNotNone(m, "README has no marked Python example")
        with tempfile.TemporaryDirectory() as tmp:
            cwd = os.getcwd()
            os.chdir(ROOT)
            try:
                code = m.group(1).replace("profile.speedscope.json", os.path.join(tmp, "profile.speedscope.json"))
                exec(compile(code, "README.md", "exec"), {})
            finally:
                os.chdir(cwd)
            doc = json.loads(read(os.path.join(tmp, "profile.speedscope.json")))
            self.assertEqual(doc["$schema"], "https://www.speedscope.app/file-format-schema.json")


if __name__ == "__main__":
    unittest.main(verbosity=2)
