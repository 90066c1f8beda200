"""Checks speedscope and Firefox-profiler files the way their viewers would need them.

usage: python viewer_formats.py SPEEDSCOPE_SCHEMA MANIFEST

MANIFEST lines: `speedscope<TAB>file` or `gecko<TAB>file`.
- speedscope: valid against speedscope's published JSON schema (draft 7), and every frame
  index in range, one weight per sample, endValue = startValue + sum of weights.
- gecko (the processed format, which has no published schema): every table's columns as
  long as its `length`, and every index in range: samples → stackTable, stack prefixes
  earlier stacks, stackTable → frameTable → funcTable → resourceTable, all names →
  shared.stringArray, markers → stringArray; categories → meta.categories.
Prints one line per failure; exit status 1 if there was any.
"""

import json
import sys

import jsonschema

failures = []


def fail(path, msg):
    failures.append(f"{path}: {msg}")


def check_speedscope(path, validator):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    for error in validator.iter_errors(doc):
        fail(path, f"schema: {error.message} at {list(error.absolute_path)}")
        return
    nframes = len(doc["shared"]["frames"])
    for p in doc["profiles"]:
        if len(p["samples"]) != len(p["weights"]):
            fail(path, f"profile {p['name']}: {len(p['samples'])} samples, {len(p['weights'])} weights")
        if any(not (0 <= i < nframes) for s in p["samples"] for i in s):
            fail(path, f"profile {p['name']}: frame index out of range")
        if p["endValue"] != p["startValue"] + sum(p["weights"]):
            fail(path, f"profile {p['name']}: endValue is not startValue + weights")


def table(path, where, t, columns):
    n = t.get("length")
    if not isinstance(n, int):
        fail(path, f"{where}: no integer length")
        return 0
    for c in columns:
        if not isinstance(t.get(c), list) or len(t[c]) != n:
            fail(path, f"{where}.{c}: not a list of {n}")
    return n


def in_range(path, where, values, n, nullable=False):
    for i, v in enumerate(values):
        if v is None and nullable:
            continue
        if not isinstance(v, int) or not (0 <= v < n):
            fail(path, f"{where}[{i}] = {v!r} not in 0..{n}")
            return


def check_gecko(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    meta = doc["meta"]
    ncat = len(meta["categories"])
    nstr = len(doc["shared"]["stringArray"])
    if not isinstance(meta.get("interval"), (int, float)) or "version" not in meta:
        fail(path, "meta lacks interval or version")
    for t in doc["threads"]:
        w = f"thread {t.get('tid')}"
        ns = table(path, f"{w}.samples", t["samples"], ["stack", "time"])
        nstack = table(path, f"{w}.stackTable", t["stackTable"], ["frame", "category", "subcategory", "prefix"])
        nframe = table(path, f"{w}.frameTable", t["frameTable"],
                       ["address", "category", "subcategory", "func", "line", "column", "inlineDepth"])
        nfunc = table(path, f"{w}.funcTable", t["funcTable"],
                      ["name", "isJS", "relevantForJS", "resource", "fileName", "lineNumber", "columnNumber"])
        nres = table(path, f"{w}.resourceTable", t["resourceTable"], ["lib", "name", "host", "type"])
        nmark = table(path, f"{w}.markers", t["markers"], ["data", "name", "startTime", "endTime", "phase", "category"])
        in_range(path, f"{w}.samples.stack", t["samples"]["stack"], nstack, nullable=True)
        st = t["stackTable"]
        in_range(path, f"{w}.stackTable.frame", st["frame"], nframe)
        in_range(path, f"{w}.stackTable.category", st["category"], ncat)
        for i, p in enumerate(st["prefix"]):
            if p is not None and not (isinstance(p, int) and 0 <= p < i):
                fail(path, f"{w}.stackTable.prefix[{i}] = {p!r} is not an earlier stack")
                break
        ft = t["frameTable"]
        in_range(path, f"{w}.frameTable.func", ft["func"], nfunc)
        in_range(path, f"{w}.frameTable.category", ft["category"], ncat)
        fn = t["funcTable"]
        in_range(path, f"{w}.funcTable.name", fn["name"], nstr)
        in_range(path, f"{w}.funcTable.fileName", fn["fileName"], nstr, nullable=True)
        in_range(path, f"{w}.funcTable.resource", fn["resource"], nres)
        in_range(path, f"{w}.resourceTable.name", t["resourceTable"]["name"], nstr)
        in_range(path, f"{w}.markers.name", t["markers"]["name"], nstr)
        in_range(path, f"{w}.markers.category", t["markers"]["category"], ncat)
        times = t["samples"]["time"]
        if any(not isinstance(x, (int, float)) for x in times):
            fail(path, f"{w}.samples.time: not all numbers")


schema_path, manifest = sys.argv[1], sys.argv[2]
with open(schema_path, encoding="utf-8") as f:
    schema = json.load(f)
validator = jsonschema.Draft7Validator(schema, format_checker=None)
# The schema's root is a $ref to FileFormat.File.
with open(manifest, encoding="utf-8") as f:
    rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
for kind, path in rows:
    try:
        if kind == "speedscope":
            check_speedscope(path, validator)
        elif kind == "gecko":
            check_gecko(path)
        else:
            fail(path, f"unknown kind {kind}")
    except Exception as e:
        fail(path, f"{type(e).__name__}: {e}")
for line in failures:
    print(line)
print(f"{len(rows)} files checked, {len(failures)} failures")
sys.exit(1 if failures else 0)
