"""Our callgrind files as valgrind's callgrind_annotate reads them, against Python's pstats.

usage: callgrind_check.py MANIFEST
       callgrind_check.py --self-test     (the collapsed stacks' frames read both ways)

Each manifest line is `NAME<TAB>CALLGRIND<TAB>PSTATS<TAB>COLLAPSED<TAB>FRAMES`: our `--to
callgrind`, `--to pstats --pstats-compat` and `--to collapsed` of one profile, and how its
collapsed stacks name a frame — `files` (`file:function:line`, as CPython's `replay
--collapsed`) or `names` (the function alone, as google-pprof names native frames; a C++ name
holds colons of its own, `CpuProfiler::Stop()`, so the input's kind says which, not the text). For every function
callgrind_annotate lists (Debian's valgrind), its self samples must equal the direct samples
`pstats.Stats` loads for that function's keys (a pstats key is a function at one line: they
are added up), and with `--inclusive=yes` its inclusive samples must equal the samples whose
collapsed stack holds the function (CPython's `replay --collapsed` format, each stack
counted once however often the function recurses in it). `(root)`'s inclusive samples must
be every sample. Where the collapsed stacks name frames by the function alone, functions are
matched by name. Functions the collapsed stacks
cannot tell apart (two `__init__.py:<module>` of different folders: the stacks name files by
their base name) are left out of the inclusive check, and counted. Prints a line per file and
exits 1 if any differs.

A line of three fields, `NAME<TAB>CALLGRIND<TAB>PSTATS`, is a pstats input's callgrind
(`check_pstats`): there the costs are nanoseconds and the reference is the file's own `tt`
and `ct` as `pstats.Stats` loads them.
"""

import marshal
import math
import os
import pstats
import re
import subprocess
import sys
import tempfile

import manifest_checks


def annotate(path, inclusive):
    """{"file:function": samples} as callgrind_annotate prints them."""
    out = subprocess.run(
        ["callgrind_annotate", "--threshold=100", "--show-percs=no", "--auto=no",
         f"--inclusive={'yes' if inclusive else 'no'}", path],
        capture_output=True, text=True, check=True,
        # It strips the working directory from file names: one no profile's file is under.
        cwd=tempfile.gettempdir() + "/callgrind-check-cwd",
    ).stdout
    lines = out.splitlines()
    start = next(i for i, l in enumerate(lines) if l.strip().endswith("file:function")) + 2
    totals = {}
    for line in lines[start:]:
        if not line.strip():
            break
        number, label = line.strip().split(None, 1)
        # A zero prints as ".".
        totals[label] = 0 if number == "." else int(number.replace(",", ""))
    if "WARNING" in out:
        raise ValueError("callgrind_annotate warned: " + out)
    return totals


def basename(path):
    return path.rsplit("/", 1)[-1]


def collapsed_inclusive(path, by_name):
    """{(basename, function): samples whose stack holds it}, and the samples in all; with
    `by_name`, each frame is a function's name alone, under the file `~`."""
    counts, total = {}, 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            stack, n = line.rstrip("\n").rsplit(" ", 1)
            n = int(n)
            total += n
            seen = set()
            for frame in stack.split(";"):
                if frame.startswith("tid:"):
                    continue
                if not by_name and ":" in frame:
                    name, _line = frame.rsplit(":", 1)
                    file, func = name.split(":", 1)
                    # A frame without a file or name is callgrind's "???".
                    file, func = file or "???", func or "???"
                else:
                    file, func = "~", frame or "???"
                seen.add((file, func))
            for key in seen:
                counts[key] = counts.get(key, 0) + n
    return counts, total


def check(name, callgrind, pstats_file, collapsed, frames):
    own = annotate(callgrind, False)
    inclusive = annotate(callgrind, True)
    direct = {}
    for (file, _line, func), (cc, _nc, _tt, _ct, _callers) in pstats.Stats(pstats_file).stats.items():
        label = f"{file or '???'}:{func or '???'}"
        direct[label] = direct.get(label, 0) + cc
    problems = []
    for label in sorted(set(own) | {k for k, v in direct.items() if v}):
        if own.get(label, 0) != direct.get(label, 0):
            problems.append(f"{label}: self {own.get(label, 0)}, pstats direct {direct.get(label, 0)}")
    if frames not in ("files", "names"):
        return [f"{name}: frames named '{frames}', not files or names"]
    by_name = frames == "names"
    stacks, total = collapsed_inclusive(collapsed, by_name)
    by_short = {}
    for label in inclusive:
        if label == "???:(root)":
            continue
        file, func = next((f, label[len(f) + 1:]) for f in files_of(label, direct))
        by_short.setdefault(("~" if by_name else basename(file), func), []).append(label)
    ambiguous = 0
    for short, labels in by_short.items():
        if len(labels) > 1:
            ambiguous += len(labels)
            continue
        got, want = inclusive[labels[0]], stacks.get(short, 0)
        if got != want:
            problems.append(f"{labels[0]}: inclusive {got}, collapsed stacks holding it {want}")
    missing = set(stacks) - set(by_short)
    if missing:
        problems.append(f"functions of the collapsed stacks callgrind_annotate does not list: {sorted(missing)[:5]}")
    if inclusive.get("???:(root)") != total:
        problems.append(f"(root): inclusive {inclusive.get('???:(root)')}, samples {total}")
    if not problems:
        print(f"ok {name}: {len(own)} functions with samples of their own, {len(inclusive)} in all "
              f"({ambiguous} of one name in the collapsed stacks left out of the inclusive check), {total} samples")
    return [f"{name}: {p}" for p in problems]


def ns(seconds):
    """Seconds as whole nanoseconds, halves away from zero (Rust's `f64::round`)."""
    v = seconds * 1e9
    return max(0, math.floor(v) + (1 if v - math.floor(v) >= 0.5 else 0))


def pstats_label(file, func):
    # A `profile` key's code object: its repr with the address our writer zeroes.
    return f"{file or '???'}:{re.sub(r' at 0x[0-9a-f]+,', ' at 0x000000000000,', str(func)) or '???'}"


def check_pstats(name, callgrind, pstats_file):
    """A pstats input's callgrind: every function's self time is its keys' `tt`; its inclusive
    time is, for a function with callers, the times of the calls from them (cProfile's
    per-caller `ct`, or for a plain count its share of the callee's `ct` among the callers
    other than itself), and for one without, its own time and its calls' — calls of a
    function by itself left out. Each to within a nanosecond per term (times are rounded to
    ns one by one). And it reports for how many functions that is the file's own `ct`: every
    function whose calls do not run through other functions back to it, where the profiler's
    per-caller times add up to its `ct` (3.15's tracer records a thread's start with callees
    but an untimed caller, and `profile` its own `profiler` entry untimed)."""
    own = annotate(callgrind, False)
    inclusive = annotate(callgrind, True)
    # The dictionary as pstats.Stats loads it, less 3.15's `("__sampled__",)` marker (which
    # this Python's pstats refuses).
    with open(pstats_file, "rb") as f:
        stats = {k: v for k, v in marshal.load(f).items() if isinstance(k, tuple) and len(k) == 3}
    label_of = lambda key: pstats_label(key[0], key[2])  # noqa: E731
    tt, ct, calls_in, calls_out, terms, callers_of = {}, {}, {}, {}, {}, {}
    for key, (_cc, _nc, t, c, callers) in stats.items():
        label = label_of(key)
        tt[label] = tt.get(label, 0) + ns(t)
        ct[label] = ct.get(label, 0) + ns(c)
        others = [(k, v) for k, v in callers.items() if k != key]
        shared = sum(v for _, v in others if not isinstance(v, tuple))
        for caller, v in others:
            if isinstance(v, tuple):
                time = ns(sum(v[3::4]))
            else:
                time = ns(c * v / shared) if shared > 0 else 0
            calls_in[label] = calls_in.get(label, 0) + time
            calls_out[label_of(caller)] = calls_out.get(label_of(caller), 0) + time
            terms[label] = terms.get(label, 0) + 1
            terms[label_of(caller)] = terms.get(label_of(caller), 0) + 1
            callers_of.setdefault(label, set()).add(label_of(caller))
    problems = []
    for label in sorted(set(own) | {k for k, v in tt.items() if v}):
        if own.get(label, 0) != tt.get(label, 0):
            problems.append(f"{label}: self {own.get(label, 0)} ns, pstats tt {tt.get(label, 0)} ns")
    labels = set(tt) | set(calls_out)
    for label in sorted(labels):
        want = calls_in[label] if label in calls_in else tt.get(label, 0) + calls_out.get(label, 0)
        if abs(inclusive.get(label, 0) - want) > terms.get(label, 0) + 1:
            problems.append(f"{label}: inclusive {inclusive.get(label, 0)} ns, its calls' times {want} ns")
    if set(inclusive) - labels:
        problems.append(f"functions not in the file: {sorted(set(inclusive) - labels)[:5]}")
    # Labels on a cycle of calls (another key of the same name counts as another function).
    on_cycle = set()
    for label in callers_of:
        seen, todo = set(), list(callers_of[label])
        while todo:
            c = todo.pop()
            if c == label:
                on_cycle.add(label)
                break
            if c not in seen:
                seen.add(c)
                todo.extend(callers_of.get(c, ()))
    equal = sum(1 for label in ct if abs(inclusive.get(label, 0) - ct[label]) <= terms.get(label, 0) + 1)
    # The exceptions above are few in every real file: a writer that lost the rule loses more.
    if equal < 0.9 * len(ct):
        problems.append(f"inclusive = ct for only {equal} of {len(ct)} functions")
    if not problems:
        print(f"ok {name}: {len(own)} functions, self = tt; inclusive = the calls' times, and = ct for "
              f"{equal} of {len(ct)} ({len(on_cycle)} on cycles of calls)")
    return [f"{name}: {p}" for p in problems]


def check_any(name, callgrind, pstats_file, collapsed=None, frames=None):
    """A sampled profile's line has its collapsed stacks; a pstats input's has none."""
    if collapsed is None:
        return check_pstats(name, callgrind, pstats_file)
    return check(name, callgrind, pstats_file, collapsed, frames)


def files_of(label, direct):
    """The file part of `file:function` labels (a function name may hold colons, a file name
    too): the longest prefix that is a file of the pstats keys, else up to the first colon."""
    known = {l.split(":", 1)[0] for l in direct}
    candidates = [label[:i] for i, c in enumerate(label) if c == ":" and label[:i] in known]
    if candidates:
        yield max(candidates, key=len)
    yield label.split(":", 1)[0]


def self_test():
    """Frames read both ways, on stacks where a native name holds colons and a Python frame's
    file and function do."""
    with tempfile.NamedTemporaryFile("w", suffix=".collapsed", delete=False) as f:
        f.write("main;CpuProfiler::Stop() 3\nmain;work 2\n")
        native = f.name
    with tempfile.NamedTemporaryFile("w", suffix=".collapsed", delete=False) as f:
        f.write("tid:1;app.py:main:3;a.py:A.run:10 4\ntid:1;app.py:main:3 1\n")
        python = f.name
    got = [collapsed_inclusive(native, True), collapsed_inclusive(python, False)]
    os.unlink(native)
    os.unlink(python)
    want = [({("~", "main"): 5, ("~", "CpuProfiler::Stop()"): 3, ("~", "work"): 2}, 5),
            ({("app.py", "main"): 5, ("a.py", "A.run"): 4}, 5)]
    if got != want:
        print(f"self-test failed: {got}")
        return 1
    print("self-test: frames by name and by file read as expected")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    os.makedirs(tempfile.gettempdir() + "/callgrind-check-cwd", exist_ok=True)
    return manifest_checks.run(sys.argv[1], check_any)


if __name__ == "__main__":
    sys.exit(main())
