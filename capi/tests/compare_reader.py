"""Sets reader_test's output (the C API's reading of a file) beside CPython 3.15.2's own
reading of the same file (a vector's *.expected.jsonl): the metadata line and every sample
with its frames must agree. Exit status 1 with the first difference.

usage: compare_reader.py EXPECTED.jsonl ACTUAL.txt
"""
import json
import sys


def expected_lines(path):
    with open(path, encoding="utf-8") as f:
        lines = [json.loads(line) for line in f if line.strip()]
    meta, samples = lines[0], lines[1:]
    v = meta["python_version"]
    yield "M %d.%d.%d %d %d %d %d %d %d %d" % (
        v[0], v[1], v[2], meta["start_time_us"], meta["sample_interval_us"], meta["sample_count"],
        meta["thread_count"], meta["string_count"], meta["frame_count"], meta["compression_type"])
    hexed = lambda s: s.encode("utf-8", "surrogateescape").hex() or "-"
    for s in samples:
        yield "S %d %d %d %d %d" % (s["ts"], s["iid"], s["tid"], s["status"], len(s["frames"]))
        for filename, funcname, location, opcode in s["frames"]:
            loc = location if location is not None else [-1, -1, -1, -1]
            op = opcode if opcode is not None else -1
            yield "F %s %s %d %d %d %d %d" % (hexed(filename), hexed(funcname), *loc, op)


def main():
    expected = list(expected_lines(sys.argv[1]))
    with open(sys.argv[2], encoding="ascii") as f:
        actual = [line.rstrip("\n") for line in f]
    for i, (e, a) in enumerate(zip(expected, actual)):
        if e != a:
            sys.exit(f"{sys.argv[2]}: line {i + 1}: C API reads {a!r}, CPython {e!r}")
    if len(expected) != len(actual):
        sys.exit(f"{sys.argv[2]}: {len(actual)} lines, CPython's reading has {len(expected)}")
    samples = sum(line.startswith("S ") for line in expected)
    print(f"{sys.argv[2]}: metadata and {samples} samples with their frames as CPython reads them")


main()
