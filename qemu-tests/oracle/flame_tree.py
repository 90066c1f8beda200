"""The call tree of CPython's flame graph page, flattened for comparison with ours.

    python3.15 flame_tree.py MANIFEST          each line: INPUT.pyb<TAB>OUTPUT.jsonl
    python3.15 flame_tree.py --diff MANIFEST   each line: BASE.pyb<TAB>NEW.pyb<TAB>OUTPUT.jsonl
    python3.15 flame_tree.py --heatmap MANIFEST   each line: INPUT.pyb<TAB>OUTPUT.jsonl

runs CPython's own `profiling.sampling replay --flamegraph` in-process on each input and
writes the tree its page embeds (`const EMBEDDED_DATA = {...}`) as JSON lines, the root first
and every node after its parent:

    [parent, filename, lineno, funcname, value, self, {"tid": [value, self], ...}]

(`parent` is the line number of the parent, 0-based; the root's is -1 and its names null).
CPython makes a profile's only outermost function the page's root ("Program Root: ...") when
it covers every sample; here that node is put back under a root of its own, with the same
value and threads, so that every flattened tree has the same shape. When CPython writes no
page (it finds no function to draw), OUTPUT holds the single line `null`.

With --diff, the page of `replay --diff-flamegraph BASE NEW`: a first line of its
differential stats, then the tree's lines, each with the node's
`[..., baseline, baseline_total, diff, diff_pct]` added (nulls at a root CPython did not
annotate), then a line `"elided"` and the lines of the tree of the paths only BASE has, if
CPython made one, as `[parent, filename, lineno, funcname, value, self, baseline,
baseline_total, diff, diff_pct]`. A replay CPython refuses (profiles of different modes)
writes `{"error": MESSAGE}`.

With --heatmap, the numbers of each page of `replay --heatmap`, one line per source file in
the order of CPython's index: `[filename, total_samples, total_self_samples, lines_hit,
max_samples, max_self_samples, [[line, self, total], ...]]`, lines ascending. They are taken
where CPython renders each file's page (the arguments of `_generate_file_html`: the counts
the page prints beside each line), because the pages print a line's counts only beside its
source text, and the sources a recording names are not on the machine that checks it.
`null` when CPython writes no heatmap.

cpython_replay.py calls `flatten` for the pages it makes. With TACHYON_ORACLE_MEMO set,
answers are kept (memo.py), keyed by the input's bytes, this driver and profiling.sampling.
"""
import contextlib
import io
import json
import os
import sys
import tempfile

MARK = "const EMBEDDED_DATA = "


DIFF_FIELDS = ("baseline", "baseline_total", "diff", "diff_pct")


def tree_rows(data, strings, with_threads=True, with_diff=False):
    """The rows of one tree (see the module's docs), the root first."""
    extra = (lambda node: [node.get(k) for k in DIFF_FIELDS]) if with_diff else (lambda node: [])
    threads = (lambda node: [node.get("thread_values", {})]) if with_threads else (lambda node: [])
    rows = []
    if "funcname" in data:  # a sole outermost function made the root: put a root above it
        rows.append([-1, None, None, None, data["value"], 0]
                    + ([{t: [v[0], 0] for t, v in data.get("thread_values", {}).items()}] if with_threads else [])
                    + ([None] * len(DIFF_FIELDS) if with_diff else []))
        stack = [(data, 0)]
    else:
        rows.append([-1, None, None, None, data["value"], data.get("self", 0)] + threads(data) + extra(data))
        stack = [(child, 0) for child in reversed(data.get("children", []))]
    while stack:
        node, parent = stack.pop()
        rows.append([parent, strings[node["filename"]], node["lineno"], strings[node["funcname"]],
                     node["value"], node["self"]] + threads(node) + extra(node))
        me = len(rows) - 1
        stack.extend((child, me) for child in reversed(node["children"]))
    return rows


def page_data(html_path):
    with open(html_path, encoding="utf-8") as f:
        text = f.read()
    # The tree nests as deep as the deepest stack; the decoder recurses once a level.
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 100_000))
    data, _ = json.JSONDecoder().raw_decode(text, text.index(MARK) + len(MARK))
    return data


def flatten(html_path, out_path, diff=False):
    """Writes the tree of CPython's page `html_path` (or `null` if it does not exist)."""
    if not os.path.exists(html_path):
        with open(out_path, "w", encoding="utf-8") as out:
            out.write("null\n")
        return
    data = page_data(html_path)
    lines = []
    if diff:
        stats = data["stats"]
        lines.append({k: stats.get(k) for k in ("baseline_samples", "current_samples", "baseline_scale",
                                                 "elided_count")})
    lines += tree_rows(data, data["strings"], with_diff=diff)
    if diff and "elided_flamegraph" in data["stats"]:
        elided = data["stats"]["elided_flamegraph"]
        lines.append("elided")
        lines += tree_rows(elided, elided["strings"], with_threads=False, with_diff=True)
    with open(out_path, "w", encoding="utf-8") as out:
        for row in lines:
            out.write(json.dumps(row) + "\n")


def replay(args):
    """Runs CPython's `replay ARGS` in this process, its printing swallowed; an error message
    if it failed."""
    from profiling.sampling.cli import main
    argv = sys.argv
    sys.argv = ["profiling.sampling", "replay", *args]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            main()
    except SystemExit as e:
        if e.code:
            return str(e.code)
    except Exception as e:  # the replay itself failed: report it
        return f"{type(e).__name__}: {e}"
    finally:
        sys.argv = argv
    return None


def replay_flamegraph(source, out_path, base=None):
    """CPython's flame graph of `source` (against `base`: its differential one), flattened
    into `out_path`; an error message if the replay failed."""
    with tempfile.TemporaryDirectory() as tmp:
        html = os.path.join(tmp, "flamegraph.html")
        what = ["--flamegraph"] if base is None else ["--diff-flamegraph", base]
        error = replay([*what, "-o", html, source])
        if error is None:
            flatten(html, out_path, diff=base is not None)
    return error


def replay_heatmap(source, out_path):
    """The per-file, per-line numbers of CPython's heatmap of `source` (see the module's
    docs); an error message if the replay failed."""
    from profiling.sampling.heatmap_collector import HeatmapCollector
    pages = []
    original = HeatmapCollector._generate_file_html

    def record(self, output_path, filename, line_counts, self_counts, file_stat):
        lines = sorted(set(line_counts) | set(self_counts))
        pages.append([filename, file_stat.total_samples, file_stat.total_self_samples, file_stat.num_lines,
                      file_stat.max_samples, file_stat.max_self_samples,
                      [[line, self_counts.get(line, 0), line_counts.get(line, 0)] for line in lines]])
        return original(self, output_path, filename, line_counts, self_counts, file_stat)

    HeatmapCollector._generate_file_html = record
    try:
        with tempfile.TemporaryDirectory() as tmp:
            error = replay(["--heatmap", "-o", os.path.join(tmp, "heatmap"), source])
            if error is not None:
                return error
            written = os.path.exists(os.path.join(tmp, "heatmap", "index.html"))
    finally:
        HeatmapCollector._generate_file_html = original
    with open(out_path, "w", encoding="utf-8") as out:
        if not written:
            out.write("null\n")
        for page in pages:
            out.write(json.dumps(page) + "\n")
    return None


def main_driver(manifest, diff=False, heatmap=False):
    import profiling.sampling
    import memo
    with open(manifest, encoding="utf-8") as f:
        jobs = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    question = "heatmap" if heatmap else "diff-flamegraph" if diff else "flamegraph"
    start = memo.base(question, *memo.package_files(profiling.sampling))
    failed = False
    for job in jobs:
        base, source, out_path = job if diff else (None, *job)
        question = start
        if base is not None and start is not None:
            question = start.copy()
            with open(base, "rb") as f:
                question.update(f.read() + b"\0")
        kept = memo.key(question, source)
        if memo.fetch(kept, out_path):
            continue
        error = replay_heatmap(source, out_path) if heatmap else replay_flamegraph(source, out_path, base)
        if error is not None and diff:
            # CPython refuses some pairs (different modes): that is its answer.
            with open(out_path, "w", encoding="utf-8") as out:
                out.write(json.dumps({"error": error}) + "\n")
        elif error is not None:
            print(f"{source}: {error}", file=sys.stderr)
            failed = True
            continue
        memo.keep(kept, out_path)
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1] == "--diff":
        sys.exit(main_driver(sys.argv[2], diff=True))
    if sys.argv[1] == "--heatmap":
        sys.exit(main_driver(sys.argv[2], heatmap=True))
    sys.exit(main_driver(sys.argv[1]))
