"""The real tools' answers kept across runs, for the oracle drivers (cpython_batch.py,
cpython_replay.py, austin/samples.py, austin/mojo2austin_batch.py).

With TACHYON_ORACLE_MEMO naming a folder (the test command sets it), each answer is kept
there under a key of everything it depends on: the driver, the interpreter (its version and
machine, and the code that answers — a module's bytes), the question and the input's bytes
(and, where the answer may name it, the input's path). An input seen before is answered
from there, so a run whose files did not change asks CPython nothing; a file our code writes
differently is a new key, and CPython is asked. Only whole answers are kept (an answer with
an error is asked again every time), and none above MOST_BYTES (a dump of a long recording
is hundreds of MB). Without the variable nothing is kept. Each use of an answer renews its
modification time: the test command removes the least recently used beyond 3 GB. This
module is not part of the key: it decides what is kept, not what an answer is.
"""
import hashlib
import os
import platform
import shutil
import sys

MOST_BYTES = 64 << 20


def folder():
    return os.environ.get("TACHYON_ORACLE_MEMO") or None


def base(question, *code_files):
    """The key's start: interpreter, driver and the code that answers, and the question;
    None without a memo folder (then nothing is kept or fetched)."""
    if not folder():
        return None
    h = hashlib.sha256()
    for part in (sys.version, platform.machine(), question):
        h.update(part.encode() + b"\0")
    for path in (sys.argv[0], *code_files):
        if path:
            with open(path, "rb") as f:
                h.update(f.read())
    return h


def package_files(module):
    """Every Python file of the package `module` belongs to (the code that answers)."""
    top = os.path.dirname(module.__file__)
    found = []
    for folder_, _, names in os.walk(top):
        found += [os.path.join(folder_, n) for n in names if n.endswith(".py")]
    return sorted(found)


def key(start, src, with_path=False):
    """The full key for input `src`, or None without a memo or when `src` cannot be read
    (the driver reports that as the tool does)."""
    if start is None:
        return None
    h = start.copy()
    if with_path:
        h.update(os.fsencode(os.path.abspath(src)) + b"\0")
    try:
        with open(src, "rb") as f:
            h.update(f.read())
    except OSError:
        return None
    return os.path.join(folder(), h.hexdigest())


def fetch(kept, dst):
    """Copies the kept answer to dst — a file, or for a folder's answer the folder dst's
    files; False if there is none."""
    if kept is None or not os.path.exists(kept):
        return False
    if os.path.isdir(kept):
        os.makedirs(dst, exist_ok=True)
        for name in os.listdir(kept):
            shutil.copyfile(os.path.join(kept, name), os.path.join(dst, name))
    else:
        shutil.copyfile(kept, dst)
    os.utime(kept)  # the least recently used go first (scripts/test-all.sh)
    return True


def keep(kept, answer):
    """Keeps `answer` under `kept`, whole or not at all: a file's path, or a list of the
    files a folder's answer is made of (kept as a folder of their names)."""
    if kept is None:
        return
    files = answer if isinstance(answer, list) else [answer]
    if sum(os.path.getsize(f) for f in files) > MOST_BYTES:
        return
    os.makedirs(folder(), exist_ok=True)
    partial = "%s.%d" % (kept, os.getpid())
    if isinstance(answer, list):
        os.makedirs(partial)
        for f in files:
            shutil.copyfile(f, os.path.join(partial, os.path.basename(f)))
    else:
        shutil.copyfile(answer, partial)
    try:
        os.rename(partial, kept)
    except OSError:  # another process kept the same answer first
        if os.path.isdir(partial):
            shutil.rmtree(partial, ignore_errors=True)
        else:
            os.remove(partial)
