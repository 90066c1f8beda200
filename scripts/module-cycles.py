#!/usr/bin/env python3
"""Finds import cycles between the modules of the workspace's crates, and arrows that run back
up a crate's declared layers; exits 1 if any.

A module is a file (`mod.rs` and `lib.rs` stand for their folder). Module `a` depends on
`b` when `a`'s code names `b` by `crate::b`, `super::…` or a relative path to a child
(`child::item`, `self::child`). Not counted: comments, inline test modules (their `super` is
the file itself, and tests may use anything), and a parent's `pub use child::…` re-exports,
which are the parent's public face rather than code of its own that needs the child. A cycle
is a strongly connected set of two or more modules; each is printed with the edges that
close it.

A crate with declared layers (LAYERS: its top-level modules, from the top down) may only
depend downwards: an arrow from a top-level module to one in its own layer or above is
reported with the files' modules that make it, and so is a top-level module no layer names.

Usage: module-cycles.py [CRATE_SRC_DIR ...]   (default: every crate of the workspace)
       module-cycles.py --self-test               (the check finds a planted cycle)
"""

import os
import re
import sys

# The std layer's order, as its lib.rs says: each layer uses only the layers below it.
LAYERS = {
    "std-adapter/src": [
        ["cli"],
        ["push"],
        ["request", "top"],
        ["profile"],
        ["convert"],
        # The format folders and the pages and traces the hub's outputs draw.
        ["tachyon", "gperftools", "pprof", "mojo", "pstats", "otlp", "html", "perfetto", "native"],
        # What several formats share.
        ["callgrind", "symbolize"],
        ["model"],
        ["output"],
        ["choice", "civil", "file", "memory", "hash", "pyfmt"],
    ],
}

DEFAULT_ROOTS = ["core/src", "std-adapter/src", "capi/src", "qemu-tests/src", "qemu-tests/kit/src", "fuzz/src", "python/src"]


def module_name(root, path):
    parts = os.path.relpath(path, root)[:-3].split("/")
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return "::".join(parts) or "crate"


def code_of(path):
    src = open(path, encoding="utf-8").read()
    cut = re.search(r"#\[cfg\(test\)\]\s*mod \w+\s*\{", src)
    if cut:
        src = src[: cut.start()]
    src = re.sub(r"//[^\n]*", "", src)
    src = re.sub(r'"(?:\\.|[^"\\])*"', '""', src)
    return src


def edges_of(name, src, modules):
    deps = set()
    parent = "::".join(name.split("::")[:-1]) or "crate"
    if name == "crate":
        parent = None

    def longest_module(segments):
        for i in range(len(segments), 0, -1):
            candidate = "::".join(segments[:i])
            if candidate in modules:
                return candidate
        return None

    for m in re.finditer(r"\bcrate::((?:\w+::)*)(\{[^}]*\}|\w+)", src):
        base = [s for s in m.group(1).split("::") if s]
        tail = m.group(2)
        items = [t.strip().split("::")[0] for t in tail[1:-1].split(",")] if tail.startswith("{") else [tail]
        for item in items:
            target = longest_module(base + [item]) if item else longest_module(base)
            if target:
                deps.add(target)
        if not base and not tail.startswith("{"):
            pass
    if parent is not None:
        for m in re.finditer(r"\bsuper::(\{|\w+)", src):
            sibling = (parent + "::" + m.group(1)) if parent != "crate" else m.group(1)
            deps.add(sibling if sibling in modules else parent)
    body = re.sub(r"(?m)^\s*pub(?:\([^)]*\))? use [^;]*;", "", src)
    prefix = "" if name == "crate" else name + "::"
    for child in modules:
        rest = child[len(prefix):]
        if child.startswith(prefix) and child != name and rest and "::" not in rest:
            if re.search(r"(?<![:\w])(?:self::)?" + re.escape(rest) + r"::", body):
                deps.add(child)
    deps.discard(name)
    deps.discard(None)
    return deps


def module_edges(root):
    """Every module of the crate at `root` and the modules it depends on."""
    modules = {}
    for folder, _, files in os.walk(root):
        if os.sep + "bin" in folder[len(root):]:
            continue
        for f in files:
            if f.endswith(".rs") and not (f == "main.rs" and folder == root):
                path = os.path.join(folder, f)
                modules[module_name(root, path)] = path
    return {name: edges_of(name, code_of(path), modules) for name, path in modules.items()}


def upward(root, layers):
    """The arrows between top-level modules that do not point to a lower layer, each with the
    modules that make it; and the top-level modules no layer names."""
    rank = {m: i for i, layer in enumerate(layers) for m in layer}
    edges = module_edges(root)
    top = lambda m: m.split("::")[0]
    unplaced = sorted({top(m) for m in edges if m != "crate" and top(m) not in rank})
    bad = {}
    for a, targets in edges.items():
        for b in targets:
            ta, tb = top(a), top(b)
            if a == "crate" or b == "crate" or ta == tb or ta not in rank or tb not in rank:
                continue
            if rank[tb] <= rank[ta]:
                bad.setdefault((ta, tb), []).append(f"{a} -> {b}")
    return sorted(bad.items()), unplaced


def cycles(root):
    edges = module_edges(root)
    # Tarjan's strongly connected components, iteratively.
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return [(c, [(a, b) for a in c for b in sorted(edges[a]) if b in c]) for c in found]


def self_test():
    """Plants modules in a scratch crate: each case's files and whether a cycle must be found."""
    import tempfile

    cases = [
        ("siblings", {"lib.rs": "mod a; mod b;", "a.rs": "use crate::b::B;", "b.rs": "use crate::a::A;"}, True),
        ("grouped", {"lib.rs": "mod a; mod b;", "a.rs": "use crate::{b::B};", "b.rs": "pub fn f() { crate::a::g() }"}, True),
        ("parent calls child, child uses parent",
         {"lib.rs": "mod p;", "p/mod.rs": "mod c; fn f() { c::g() }", "p/c.rs": "use super::{T};"}, True),
        ("re-export only", {"lib.rs": "mod p;", "p/mod.rs": "mod c;\npub use c::C;", "p/c.rs": "use super::T;"}, False),
        ("test module", {"lib.rs": "mod a; mod b;", "a.rs": "use crate::b::B;",
                         "b.rs": "#[cfg(test)]\nmod tests { use crate::a::A; }"}, False),
        ("one way", {"lib.rs": "mod a; mod b;", "a.rs": "use crate::b::B;", "b.rs": "// crate::a::A in a comment"}, False),
    ]
    layered = [["top"], ["middle", "beside"], ["bottom"]]
    layer_cases = [
        ("down", {"lib.rs": "mod top; mod middle; mod bottom;", "top.rs": "use crate::middle::M;",
                  "middle/mod.rs": "mod part;", "middle/part.rs": "use crate::bottom::B;", "bottom.rs": ""}, False),
        ("up from a submodule", {"lib.rs": "mod top; mod middle; mod bottom;", "top.rs": "",
                                 "middle/mod.rs": "mod part;", "middle/part.rs": "use crate::top::T;",
                                 "bottom.rs": ""}, True),
        ("sideways", {"lib.rs": "mod top; mod middle; mod beside; mod bottom;", "top.rs": "",
                      "middle.rs": "fn f() { crate::beside::g() }", "beside.rs": "", "bottom.rs": ""}, True),
        ("unplaced", {"lib.rs": "mod top; mod other;", "top.rs": "", "other.rs": ""}, True),
    ]

    def planted(files):
        """A scratch crate holding `files` (path: text); removed when the block ends."""
        root = tempfile.TemporaryDirectory()
        for path, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root.name, path)), exist_ok=True)
            with open(os.path.join(root.name, path), "w", encoding="utf-8") as f:
                f.write(text)
        return root

    failed = 0
    for name, files, bad in layer_cases:
        with planted(files) as root:
            arrows, unplaced = upward(root, layered)
            if bool(arrows or unplaced) != bad:
                failed += 1
                print(f"self-test {name!r}: {'found' if arrows or unplaced else 'missed'} an arrow up or an unplaced module")
    for name, files, cyclic in cases:
        with planted(files) as root:
            found = bool(cycles(root))
            if found != cyclic:
                failed += 1
                print(f"self-test {name!r}: {'found' if found else 'missed'} a cycle")
    print("self-test: " + ("failed" if failed else f"{len(cases) + len(layer_cases)} cases as expected"))
    return 1 if failed else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    roots = sys.argv[1:] or DEFAULT_ROOTS
    bad = 0
    for root in roots:
        for members, links in cycles(root):
            bad += 1
            print(f"{root}: import cycle between {', '.join(members)}:")
            for a, b in links:
                print(f"  {a} -> {b}")
    for root in roots:
        layers = LAYERS.get(root.rstrip("/"))
        if layers is None:
            continue
        arrows, unplaced = upward(root, layers)
        for (a, b), made_by in arrows:
            bad += 1
            print(f"{root}: {a} uses {b}, a layer not below its own ({', '.join(made_by[:3])})")
        for m in unplaced:
            bad += 1
            print(f"{root}: module {m} is in no layer of scripts/module-cycles.py's LAYERS")
    if bad:
        print(f"{bad} import cycle(s) or arrows up")
        return 1
    print(f"no import cycles in {', '.join(roots)}; the layers of {', '.join(LAYERS)} point down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
