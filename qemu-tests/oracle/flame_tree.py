"""The call tree of CPython's flame graph page, flattened for comparison with ours.

    python3.15 flame_tree.py MANIFEST     each line: INPUT.pyb<TAB>OUTPUT.jsonl

runs CPython's own `profiling.sampling replay --flamegraph` in-process on each input and
writes the tree its page embeds (`const EMBEDDED_DATA = {...}`) as JSON lines, the root first
and every node after its parent:

    [parent, filename, lineno, funcname, value, self, {"tid": [value, self], ...}]

(`parent` is the line number of the parent, 0-based; the root's is -1 and its names null).
CPython makes a profile's only outermost function the page's root ("Program Root: ...") when
it covers every sample; here that node is put back under a root of its own, with the same
value and threads, so that every flattened tree has the same shape. When CPython writes no
page (it finds no function to draw), OUTPUT holds the single line `null`.

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


def flatten(html_path, out_path):
    """Writes the tree of CPython's page `html_path` (or `null` if it does not exist)."""
    if not os.path.exists(html_path):
        with open(out_path, "w", encoding="utf-8") as out:
            out.write("null\n")
        return
    with open(html_path, encoding="utf-8") as f:
        text = f.read()
    # The tree nests as deep as the deepest stack; the decoder recurses once a level.
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 100_000))
    data, _ = json.JSONDecoder().raw_decode(text, text.index(MARK) + len(MARK))
    strings = data["strings"]
    rows = []
    promoted = "funcname" in data
    if promoted:
        rows.append([-1, None, None, None, data["value"], 0,
                     {t: [v[0], 0] for t, v in data.get("thread_values", {}).items()}])
        stack = [(data, 0)]
    else:
        rows.append([-1, None, None, None, data["value"], 0, data.get("thread_values", {})])
        stack = [(child, 0) for child in reversed(data.get("children", []))]
    while stack:
        node, parent = stack.pop()
        rows.append([parent, strings[node["filename"]], node["lineno"], strings[node["funcname"]],
                     node["value"], node["self"], node["thread_values"]])
        me = len(rows) - 1
        stack.extend((child, me) for child in reversed(node["children"]))
    with open(out_path, "w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row) + "\n")


def replay_flamegraph(source, out_path):
    """CPython's flame graph of `source`, flattened into `out_path`; an error message if
    the replay failed."""
    from profiling.sampling.cli import main
    with tempfile.TemporaryDirectory() as tmp:
        html = os.path.join(tmp, "flamegraph.html")
        argv = sys.argv
        sys.argv = ["profiling.sampling", "replay", "--flamegraph", "-o", html, source]
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
        flatten(html, out_path)
    return None


def main_driver(manifest):
    import profiling.sampling
    import memo
    with open(manifest, encoding="utf-8") as f:
        jobs = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    start = memo.base("flamegraph", *memo.package_files(profiling.sampling))
    failed = False
    for source, out_path in jobs:
        kept = memo.key(start, source)
        if memo.fetch(kept, out_path):
            continue
        error = replay_flamegraph(source, out_path)
        if error is not None:
            print(f"{source}: {error}", file=sys.stderr)
            failed = True
            continue
        memo.keep(kept, out_path)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main_driver(sys.argv[1]))
