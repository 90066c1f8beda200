"""Runs austin-python 1.7.1's `mojo2austin` over many files in one process: the function its
console script calls (`austin.format.mojo.main`), with the arguments the script would get.

Usage (in austin-python 1.7.1's venv, austin-3.7):
  python mojo2austin_batch.py MANIFEST     each line: FILE.mojo<TAB>OUTPUT.austin

A file it fails on ends the run with its error, as the script's exit status would. With
TACHYON_ORACLE_MEMO set, each output is kept and reused (../memo.py: keyed by the file's
bytes and austin-python's code).
"""
import os
import sys

import austin
import austin.format.mojo

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import memo  # noqa: E402


def main(manifest):
    start = memo.base("mojo2austin", *memo.package_files(austin))
    with open(manifest) as f:
        jobs = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    for src, dst in jobs:
        kept = memo.key(start, src)
        if memo.fetch(kept, dst):
            continue
        sys.argv = ["mojo2austin", src, dst]
        try:
            austin.format.mojo.main()
        except SystemExit as e:
            if e.code:
                sys.exit(f"mojo2austin failed on {src}: {e.code}")
        memo.keep(kept, dst)


if __name__ == "__main__":
    main(sys.argv[1])
