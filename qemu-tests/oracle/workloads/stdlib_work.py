"""A real-code workload for the profile in the box: the standard library's own sources read,
tokenized, parsed, compiled, diffed, searched and compressed, across three threads, for
WORKLOAD_SECONDS (default 3) seconds."""

import ast
import difflib
import io
import json
import os
import re
import threading
import time
import tokenize
import zlib

SECONDS = float(os.environ.get("WORKLOAD_SECONDS", "3"))
LIB = os.path.dirname(os.__file__)
SOURCES = sorted(os.path.join(LIB, n) for n in os.listdir(LIB) if n.endswith(".py"))


_CACHE = {}


def read(path):
    if path not in _CACHE:
        with open(path, encoding="utf-8", errors="replace") as f:
            _CACHE[path] = f.read()
    return _CACHE[path]


def summarize(tree):
    kinds = {}
    for node in ast.walk(tree):
        kinds[type(node).__name__] = kinds.get(type(node).__name__, 0) + 1
    return kinds


def parse_and_compile(deadline):
    i = 0
    while time.monotonic() < deadline:
        text = read(SOURCES[i % len(SOURCES)])
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
        tree = ast.parse(text)
        compile(tree, SOURCES[i % len(SOURCES)], "exec")
        json.loads(json.dumps({"tokens": len(tokens), "nodes": summarize(tree)}))
        i += 1


def diff_and_search(deadline):
    pattern = re.compile(r"def (\w+)\(self(?:, (\w+))*")
    i = 0
    while time.monotonic() < deadline:
        a = read(SOURCES[i % len(SOURCES)]).splitlines()[:400]
        b = read(SOURCES[(i + 1) % len(SOURCES)]).splitlines()[:400]
        list(difflib.unified_diff(a, b, lineterm=""))
        sum(1 for line in a + b if pattern.search(line))
        i += 1


def compress(deadline):
    i = 0
    while time.monotonic() < deadline:
        data = read(SOURCES[i % len(SOURCES)]).encode()
        assert zlib.decompress(zlib.compress(data, 9)) == data
        time.sleep(0.002)
        i += 1


def main():
    deadline = time.monotonic() + SECONDS
    workers = [threading.Thread(target=f, args=(deadline,), name=f.__name__) for f in (diff_and_search, compress)]
    for w in workers:
        w.start()
    parse_and_compile(deadline)
    for w in workers:
        w.join()


if __name__ == "__main__":
    main()
