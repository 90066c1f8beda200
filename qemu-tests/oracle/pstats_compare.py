"""Checks tachyon's pstats files against CPython's, with whatever Python runs this.

usage: python3 pstats_compare.py MANIFEST

MANIFEST lines: `cpython.marshal<TAB>ours.marshal<TAB>ours-compat.marshal`.
- Ours must unmarshal to the same dictionary as CPython's (keys, counts, times, callers).
- The compat file must equal CPython's minus the ("__sampled__",) marker key.
- pstats.Stats must load every file this Python can load: on 3.15 ours prints exactly
  what CPython's prints; on any version the compat file loads and prints.
- An empty profile is only compared (pstats.Stats refuses those, CPython's included).
- Before 3.15, loading a file with the marker must fail (the reason compat exists).
Prints one line per failure; exit status 1 if there was any.
"""

import io
import marshal
import pstats
import sys

MARKER = ("__sampled__",)
failures = []


def printed(path):
    out = io.StringIO()
    stats = pstats.Stats(path, stream=out)
    stats.strip_dirs().sort_stats("cumulative").print_stats()
    stats.print_callers()
    # The first line names the file and its modification time.
    return out.getvalue().split("\n", 2)[2]


with open(sys.argv[1], encoding="utf-8") as f:
    rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
for cpython, ours, compat in rows:
    with open(cpython, "rb") as f:
        want = marshal.load(f)
    with open(ours, "rb") as f:
        got = marshal.load(f)
    with open(compat, "rb") as f:
        got_compat = marshal.load(f)
    if got != want:
        failures.append(f"{ours}: unmarshals to a different dictionary than {cpython}")
    want_compat = {k: v for k, v in want.items() if k != MARKER}
    if got_compat != want_compat:
        failures.append(f"{compat}: differs from {cpython} without the marker")
    if not want_compat:
        continue  # no samples: pstats.Stats refuses an empty profile, CPython's too
    if sys.version_info >= (3, 15):
        try:
            if printed(ours) != printed(cpython):
                failures.append(f"{ours}: pstats.Stats prints differently from {cpython}")
        except Exception as e:
            failures.append(f"{ours}: pstats.Stats failed: {e!r}")
    elif MARKER in got:
        try:
            pstats.Stats(ours, stream=io.StringIO())
            failures.append(f"{ours}: loaded on {sys.version.split()[0]} despite the marker")
        except Exception:
            pass
    try:
        printed(compat)
    except Exception as e:
        failures.append(f"{compat}: pstats.Stats failed on {sys.version.split()[0]}: {e!r}")

for line in failures:
    print(line)
print(f"{len(rows)} pstats files checked with Python {sys.version.split()[0]}, {len(failures)} failures")
sys.exit(1 if failures else 0)
