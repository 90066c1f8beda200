"""Runs CPython's own `profiling.sampling replay` in-process over many files.

usage: python3.15 cpython_replay.py MANIFEST

MANIFEST has one `input<TAB>output-directory` per line. For each input this writes, into its
directory, what `replay` produces for every conversion the tachyon command reproduces:
collapsed.txt, pstats.marshal, jsonl.jsonl, gecko.json, flamegraph-tree.jsonl (the tree of
the `--flamegraph` page, flattened by flame_tree.py), and text-<variant>.txt holding
everything `replay` printed for a pstats table (the driver's caller cuts the table out).
A failing replay writes error-<what>.txt with the message instead.

With TACHYON_ORACLE_MEMO set, each input's outputs are kept and reused (memo.py), keyed by
the input's bytes and its path (what `replay` prints may name it) and the code of
profiling.sampling; an input any of whose replays failed is replayed again.
"""

import contextlib
import io
import os
import sys

import profiling.sampling
from profiling.sampling.cli import main

import flame_tree
import memo

TEXT_VARIANTS = {
    "default": [],
    "tottime": ["--sort", "tottime"],
    "cumtime-all": ["--sort", "cumtime", "--limit", "100000"],
    "sample-pct": ["--sort", "sample-pct", "--limit", "7"],
    "cumul-pct": ["--sort", "cumul-pct"],
    "nsamples-cumul": ["--sort", "nsamples-cumul", "--no-summary"],
    "name": ["--sort", "name", "--limit", "100000"],
}


def replay(args, stdout_path=None):
    argv = sys.argv
    sys.argv = ["profiling.sampling", "replay", *args]
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer):
            main()
        error = None
    except SystemExit as e:
        error = str(e.code)
    except Exception as e:  # the replay itself failed: record it
        error = f"{type(e).__name__}: {e}"
    finally:
        sys.argv = argv
    if stdout_path is not None:
        with open(stdout_path, "w", encoding="utf-8") as f:
            f.write(buffer.getvalue())
    return error


def main_driver(manifest):
    with open(manifest, encoding="utf-8") as f:
        jobs = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    start = memo.base("replay", flame_tree.__file__, *memo.package_files(profiling.sampling))
    for source, outdir in jobs:
        os.makedirs(outdir, exist_ok=True)
        kept = memo.key(start, source, with_path=True)
        if memo.fetch(kept, outdir):
            continue
        runs = [
            ("collapsed", ["--collapsed", "-o", os.path.join(outdir, "collapsed.txt"), source], None),
            ("pstats", ["--pstats", "-o", os.path.join(outdir, "pstats.marshal"), source], None),
            ("jsonl", ["--jsonl", "-o", os.path.join(outdir, "jsonl.jsonl"), source], None),
            ("gecko", ["--gecko", "-o", os.path.join(outdir, "gecko.json"), source], None),
            ("flamegraph", ["--flamegraph", "-o", os.path.join(outdir, "flamegraph.html"), source], None),
        ]
        for name, extra in TEXT_VARIANTS.items():
            runs.append((f"text-{name}", [*extra, source], os.path.join(outdir, f"text-{name}.txt")))
        failed = False
        for what, args, stdout_path in runs:
            error = replay(args, stdout_path)
            if error is not None:
                failed = True
                with open(os.path.join(outdir, f"error-{what}.txt"), "w", encoding="utf-8") as f:
                    f.write(error + "\n")
        # The page is 300 KB of scripts around the tree: only the tree is kept.
        html = os.path.join(outdir, "flamegraph.html")
        if not os.path.exists(os.path.join(outdir, "error-flamegraph.txt")):
            flame_tree.flatten(html, os.path.join(outdir, "flamegraph-tree.jsonl"))
        if os.path.exists(html):
            os.remove(html)
        if not failed:
            written = [stdout_path or args[args.index("-o") + 1] for _, args, stdout_path in runs]
            written = [os.path.join(outdir, "flamegraph-tree.jsonl") if p == html else p for p in written]
            memo.keep(kept, [p for p in written if os.path.exists(p)])


if __name__ == "__main__":
    main_driver(sys.argv[1])
