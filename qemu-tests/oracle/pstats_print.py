"""Prints pstats files as pstats.Stats prints them, for the tests to set tachyon's
`--to pstats-text` beside, with whatever Python runs this (3.11, CPython 3.15.2).

usage: python pstats_print.py MANIFEST

MANIFEST lines: FILE<TAB>SORT<TAB>LIMIT<TAB>STRIP<TAB>WHAT<TAB>OUT — FILE one path or several
joined by `|` (then Stats(A, B, …), which adds them), SORT comma-separated
keys or empty (no sort_stats), LIMIT print_WHAT's arguments joined by \x1f, each an int, else
a float, else a str (a pattern), or empty, STRIP 1 for strip_dirs(), WHAT
stats|callers|callees. OUT gets what Stats(FILE) prints after
[strip_dirs()] [sort_stats(*SORT)] then print_WHAT([LIMIT]), or a line
`EXCEPTION AT LOAD: <type name>` if Stats(FILE) raises, `EXCEPTION: <type name>` if a later
step does. A code object's
address in its repr is written as 0x000000000000 (no file records it; tachyon prints that).
"""
import io
import pstats
import re
import sys

ADDRESS = re.compile(r" at 0x[0-9a-f]+,")


def restriction(text):
    """An int, else a float, else the str itself: as tachyon reads `--restrict`."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


for line in open(sys.argv[1], encoding="utf-8"):
    path, sort, limit, strip, what, out = line.rstrip("\n").split("\t")
    buf = io.StringIO()
    try:
        stats = pstats.Stats(*path.split("|"), stream=buf)
    except Exception as e:  # noqa: BLE001 - the type is the result
        with open(out, "w", encoding="utf-8") as f:
            f.write("EXCEPTION AT LOAD: %s\n" % type(e).__name__)
        continue
    try:
        if strip == "1":
            stats.strip_dirs()
        if sort:
            stats.sort_stats(*sort.split(","))
        amount = tuple(restriction(r) for r in limit.split("\x1f")) if limit else ()
        getattr(stats, "print_" + what)(*amount)
        text = ADDRESS.sub(" at 0x000000000000,", buf.getvalue())
    except Exception as e:  # noqa: BLE001 - the type is the result
        text = "EXCEPTION: %s\n" % type(e).__name__
    with open(out, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write(text)
