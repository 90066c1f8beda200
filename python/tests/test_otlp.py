"""`tachyon convert --to otlp` / `--to otlp-json` read by OpenTelemetry's own Python messages.

    python test_otlp.py      (opentelemetry-proto and tachyon_profiles installed; run by
                              scripts/fleet.sh)

Every committed real profile of every format (and the ones the test command recorded, named
by TACHYON_*_PROFILES), plus a pprof file written by `go tool pprof -proto`, is converted to
OTLP in both encodings. The official `opentelemetry-proto` package decodes the protobuf; the
stacks and values it shows, named as collapsed stacks name frames, must equal `tachyon
convert --to collapsed` of the same input; the JSON must parse (protobuf's json_format) to
the very same message.
"""
import glob
import os
import subprocess
import sys
import tempfile
import unittest
from collections import Counter

from google.protobuf import json_format
from opentelemetry.proto.collector.profiles.v1development.profiles_service_pb2 import (
    ExportProfilesServiceRequest,
)

import tachyon_profiles as tp

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.environ.get("TACHYON_CLI", os.path.join(ROOT, "target", "release", "tachyon"))
V = os.path.join(ROOT, "qemu-tests", "vectors")


def recorded(var, pattern):
    d = os.environ.get(var)
    return sorted(glob.glob(os.path.join(d, "**", pattern), recursive=True)) if d else []


def inputs(tmp):
    """(format, path) of every committed real profile, the recorded ones, and go pprof's."""
    files = []
    files += [("tachyon", f) for f in sorted(glob.glob(os.path.join(ROOT, "qemu-tests", "fixtures", "real-3.15.2", "*.pyb")))]
    files += [("tachyon", f) for f in sorted(glob.glob(os.path.join(V, "cpython-3.15.2", "*.x86_64.bin")))]
    files += [("tachyon", os.path.join(ROOT, "examples", "stdlib_work.pyb"))]
    files += [("tachyon", f) for f in recorded("TACHYON_REAL_PROFILES", "*.pyb")]
    gperftools = sorted(glob.glob(os.path.join(V, "gperftools-2.10", "*", "burn-*.prof")))
    files += [("gperftools", f) for f in gperftools + recorded("TACHYON_GPERFTOOLS_PROFILES", "*.prof")]
    files += [("mojo", f) for f in sorted(glob.glob(os.path.join(V, "mojo-austin-3.7", "*.mojo")))]
    files += [("mojo", f) for f in sorted(glob.glob(os.path.join(V, "mojo-v4", "*.mojo")))]
    files += [("mojo", f) for f in recorded("TACHYON_MOJO_PROFILES", "*.mojo")]
    real_pstats = [f for f in sorted(glob.glob(os.path.join(V, "pstats", "*.pstats"))) if not os.path.basename(f).startswith("contract_")]
    files += [("pstats", f) for f in real_pstats + recorded("TACHYON_PSTATS_PROFILES", "*.pstats")]
    # pprof as go pprof writes it, of a real gperftools profile.
    x86 = [f for f in gperftools if f.endswith("burn-x86_64.prof")][0]
    pb = os.path.join(tmp, "go-pprof.pb.gz")
    subprocess.run(["go", "tool", "pprof", "-proto", "-output", pb, x86], check=True, capture_output=True)
    files.append(("pprof", pb))
    return files


def run(*args):
    return subprocess.run([CLI, *args], check=True, capture_output=True)


def decoded(path):
    req = ExportProfilesServiceRequest()
    with open(path, "rb") as f:
        req.ParseFromString(f.read())
    return req


def collapsed_of(req):
    """The count profile's samples as collapsed lines: name → samples."""
    d = req.dictionary
    s = d.string_table
    [rp] = req.resource_profiles
    [sp] = rp.scope_profiles
    scope = {kv.key: kv.value.string_value for kv in sp.scope.attributes}
    native = scope["tachyon.input.format"] in ("gperftools", "pprof")
    count, time = sp.profiles
    assert (s[count.sample_type.type_strindex], s[count.sample_type.unit_strindex]) == ("samples", "count")
    assert s[time.sample_type.unit_strindex] == "nanoseconds"
    assert s[time.sample_type.type_strindex] == scope["tachyon.profiling.mode"]
    assert s[time.period_type.type_strindex] == scope["tachyon.profiling.mode"]

    def name(line, address):
        f = d.function_table[line.function_index]
        func, filename = s[f.name_strindex], s[f.filename_strindex]
        if native:
            return func
        if filename == "~" and line.line == 0:
            return func
        return f"{os.path.basename(filename)}:{func}:{line.line}"

    lines = Counter()
    assert len(count.samples) == len(time.samples)
    for c, t in zip(count.samples, time.samples):
        assert (c.stack_index, list(c.attribute_indices)) == (t.stack_index, list(t.attribute_indices))
        assert list(c.timestamps_unix_nano) == list(t.timestamps_unix_nano)
        if c.timestamps_unix_nano:
            assert len(c.values) == len(c.timestamps_unix_nano) and set(c.values) == {1}, c
            assert list(t.values) == [time.period] * len(c.values)
            assert all(count.time_unix_nano <= ts <= count.time_unix_nano + count.duration_nano for ts in c.timestamps_unix_nano)
        else:
            assert len(c.values) == 1 and list(t.values) == [c.values[0] * time.period], (c, t)
        names = []
        for i in d.stack_table[c.stack_index].location_indices:
            loc = d.location_table[i]
            if not loc.lines:
                names.append(hex(loc.address))
            names += [name(line, loc.address) for line in loc.lines]
        frames = ";".join(reversed(names))
        attrs = {s[d.attribute_table[a].key_strindex]: d.attribute_table[a].value for a in c.attribute_indices}
        if "thread.id" in attrs:
            # An int64 attribute: a thread id above 2^63 (MOJO's) wraps, as in two's complement.
            frames = f"tid:{attrs['thread.id'].int_value % 2**64};{frames}"
        lines[frames] += sum(c.values)
    return lines, scope


def read_collapsed(path):
    lines = Counter()
    with open(path) as f:
        for line in f:
            stack, n = line.rstrip("\n").rsplit(" ", 1)
            lines[stack] += int(n)
    return lines


class OtlpTest(unittest.TestCase):
    def test_every_input_decodes_to_its_collapsed_stacks(self):
        with tempfile.TemporaryDirectory() as tmp:
            files = inputs(tmp)
            seen = Counter()
            for i, (fmt, f) in enumerate(files):
                with self.subTest(file=f):
                    if fmt == "pstats":
                        # pstats keeps caller→callee edges, not stacks: refused as --to pprof is.
                        for to in ("otlp", "otlp-json", "pprof"):
                            r = subprocess.run([CLI, "convert", f, "--to", to], capture_output=True, text=True)
                            self.assertEqual(r.returncode, 1, r)
                            self.assertIn(f"cannot convert a pstats file --to {to}: pstats keeps only caller", r.stderr)
                        seen[fmt] += 1
                        continue
                    pb, js, txt = (os.path.join(tmp, f"{i}.{ext}") for ext in ("otlp", "json", "txt"))
                    run("convert", f, "--to", "otlp", "--service-name", "fleet-test", "-o", pb)
                    run("convert", f, "--to", "otlp-json", "--service-name", "fleet-test", "-o", js)
                    run("convert", f, "--to", "collapsed", "-o", txt)
                    req = decoded(pb)
                    with open(js) as j:
                        self.assertEqual(json_format.Parse(j.read(), ExportProfilesServiceRequest()), req)
                    # The package writes the same bytes.
                    with open(pb, "rb") as p:
                        self.assertEqual(tp.convert(f, "otlp", service_name="fleet-test"), p.read())
                    [rp] = req.resource_profiles
                    self.assertEqual(
                        {kv.key: kv.value.string_value for kv in rp.resource.attributes}, {"service.name": "fleet-test"}
                    )
                    got, scope = collapsed_of(req)
                    self.assertEqual(scope["tachyon.input.format"], {"pstats": "marshal"}.get(fmt, fmt))
                    want = read_collapsed(txt)
                    self.assertEqual(got, want)
                    self.assertTrue(sum(want.values()) > 0 or fmt == "tachyon", f)
                    seen[fmt] += 1
            print(f"OTLP decoded by opentelemetry-proto equal to collapsed stacks: {dict(seen)}")
            self.assertTrue(all(seen[k] > 0 for k in ("tachyon", "gperftools", "mojo", "pstats", "pprof")), seen)

    def test_unnamed_service_and_native_frames(self):
        """Without --service-name the service is OpenTelemetry's unknown_service; a native
        profile's locations carry addresses in mappings, its frames say they are native."""
        f = glob.glob(os.path.join(V, "gperftools-2.10", "x86_64-le64-gperftools2.10", "burn-x86_64.prof"))[0]
        req = ExportProfilesServiceRequest()
        req.ParseFromString(run("convert", f, "--to", "otlp").stdout)
        [rp] = req.resource_profiles
        self.assertEqual(rp.resource.attributes[0].value.string_value, "unknown_service")
        d = req.dictionary
        s = d.string_table
        self.assertEqual(s[0], "")
        for table in (d.mapping_table, d.location_table, d.function_table, d.attribute_table, d.stack_table):
            self.assertEqual(table[0].ByteSize(), 0)
        used = [d.location_table[i] for st in d.stack_table for i in st.location_indices]
        self.assertTrue(used and all(loc.address != 0 and loc.mapping_index != 0 for loc in used))
        for loc in used:
            m = d.mapping_table[loc.mapping_index]
            self.assertTrue(m.memory_start <= loc.address < m.memory_limit)
            [kind] = [d.attribute_table[a] for a in loc.attribute_indices]
            self.assertEqual((s[kind.key_strindex], kind.value.string_value), ("profile.frame.type", "native"))
        self.assertIn("libc.so.6", {os.path.basename(s[m.filename_strindex]) for m in d.mapping_table[1:]})

    def test_monotonic_times_end_when_the_file_was_written(self):
        """CPython's timestamps are time.monotonic(): the OTLP times are Unix time with the
        last sample at the file's modification time, the samples' spacing kept."""
        src = os.path.join(ROOT, "qemu-tests", "fixtures", "real-3.15.2", "threads_cpu_raw.pyb")
        with tempfile.TemporaryDirectory() as tmp:
            f = os.path.join(tmp, "p.pyb")
            with open(src, "rb") as a, open(f, "wb") as b:
                b.write(a.read())
            written_ns = 1_700_000_000_123_456_000
            os.utime(f, ns=(written_ns, written_ns))
            req = ExportProfilesServiceRequest()
            req.ParseFromString(run("convert", f, "--to", "otlp").stdout)
            count = req.resource_profiles[0].scope_profiles[0].profiles[0]
            stamps = sorted(t for smp in count.samples for t in smp.timestamps_unix_nano)
            self.assertEqual(stamps[-1], written_ns)
            self.assertEqual(count.time_unix_nano + count.duration_nano, written_ns)
            # The first sample's distance from the last, as the file has it (µs → ns).
            samples = []
            tp.BinaryReader(f).replay(Times(samples))
            self.assertEqual(stamps[-1] - stamps[0], (max(samples) - min(samples)) * 1000)
            self.assertEqual(len(stamps), len(samples))


class Times:
    """A CPython collector keeping every timestamp."""

    def __init__(self, out):
        self.out = out

    def collect(self, stack_frames, timestamps_us):
        self.out.extend(timestamps_us)


if __name__ == "__main__":
    unittest.main(verbosity=2)
