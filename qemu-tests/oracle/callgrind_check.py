"""Our callgrind files as valgrind's callgrind_annotate reads them, against Python's pstats.

usage: callgrind_check.py MANIFEST

Each manifest line is `NAME<TAB>CALLGRIND<TAB>PSTATS<TAB>COLLAPSED`: our `--to callgrind`,
`--to pstats --pstats-compat` and `--to collapsed` of one profile. For every function
callgrind_annotate lists (Debian's valgrind), its self samples must equal the direct samples
`pstats.Stats` loads for that function's keys (a pstats key is a function at one line: they
are added up), and with `--inclusive=yes` its inclusive samples must equal the samples whose
collapsed stack holds the function (CPython's `replay --collapsed` format, each stack
counted once however often the function recurses in it). `(root)`'s inclusive samples must
be every sample. Native profiles' collapsed stacks name a frame by its function alone (as
google-pprof's do): there functions are matched by name. Functions the collapsed stacks
cannot tell apart (two `__init__.py:<module>` of different folders: the stacks name files by
their base name) are left out of the inclusive check, and counted. Prints a line per file and
exits 1 if any differs.
"""

import os
import pstats
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


def collapsed_inclusive(path):
    """{(basename, function): samples whose stack holds it}, and the samples in all."""
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
                if ":" in frame:
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


def check(name, callgrind, pstats_file, collapsed):
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
    stacks, total = collapsed_inclusive(collapsed)
    # Name-only frames (a native profile's): every key's file is "~".
    by_name = bool(stacks) and all(file == "~" for file, _ in stacks)
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


def files_of(label, direct):
    """The file part of `file:function` labels (a function name may hold colons, a file name
    too): the longest prefix that is a file of the pstats keys, else up to the first colon."""
    known = {l.split(":", 1)[0] for l in direct}
    candidates = [label[:i] for i, c in enumerate(label) if c == ":" and label[:i] in known]
    if candidates:
        yield max(candidates, key=len)
    yield label.split(":", 1)[0]


def main():
    os.makedirs(tempfile.gettempdir() + "/callgrind-check-cwd", exist_ok=True)
    return manifest_checks.run(sys.argv[1], check)


if __name__ == "__main__":
    sys.exit(main())
