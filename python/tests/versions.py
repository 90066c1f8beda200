"""The package on one more Python version, against CPython 3.15.2's committed outputs only
(no second interpreter needed):

    pythonX.Y versions.py        (tachyon_profiles importable)

Every writer vector (qemu-tests/vectors/cpython-3.15.2) written as CPython 3.15.2 wrote it,
byte for byte; every vector file, little- and big-endian, replayed to the view CPython's own
reader gave (`*.expected.jsonl`); `examples/stdlib_work.pyb` converted to collapsed stacks
equal to CPython's `replay --collapsed` output committed beside it; the sample types behave
as struct sequences. Exits 1 on the first difference.
"""
import glob
import importlib
import os
import sys
import tempfile

import tachyon_profiles as tp

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VECTORS = os.path.join(ROOT, "qemu-tests", "vectors", "cpython-3.15.2")
sys.modules["_remote_debugging"] = tp
sys.path.insert(0, os.path.join(ROOT, "qemu-tests", "oracle"))
batch = importlib.import_module("cpython_batch")


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def main():
    checked = 0
    with tempfile.TemporaryDirectory() as tmp:
        for src in sorted(glob.glob(os.path.join(VECTORS, "*.input.json"))):
            stem = src[: -len(".input.json")]
            out = os.path.join(tmp, "w.bin")
            batch.write(src, out)
            assert read(out, "rb") == read(stem + ".x86_64.bin", "rb"), f"{stem}: written bytes differ"
            for arch in ("x86_64", "s390x"):
                view = os.path.join(tmp, "v.jsonl")
                batch.dump(f"{stem}.{arch}.bin", view)
                assert read(view) == read(stem + ".expected.jsonl"), f"{stem}.{arch}.bin: replay differs"
            checked += 1
    assert checked == 14, checked
    example = os.path.join(ROOT, "examples", "stdlib_work.pyb")
    collapsed = tp.convert(example, to="collapsed")
    assert collapsed == read(os.path.join(ROOT, "examples", "stdlib_work.cpython-collapsed.txt")), "collapsed differs"
    frame = tp.FrameInfo(("a.py", tp.LocationInfo((1, 2, 3, 4)), "f", None))
    assert (frame[0], frame.funcname, frame.location.end_col_offset, len(frame)) == ("a.py", "f", 4, 4)
    assert tuple(frame) == ("a.py", (1, 2, 3, 4), "f", None) and isinstance(frame, tuple)
    try:
        frame.filename = "b.py"
    except AttributeError:
        pass
    else:
        raise AssertionError("FrameInfo is mutable")
    assert tp.USES_CPYTHON_TYPES == (sys.version_info >= (3, 15))
    print(f"Python {sys.version.split()[0]}: {checked} writer vectors byte-identical, {2 * checked} files "
          f"replayed as CPython 3.15.2, collapsed stacks equal, struct sequences as CPython's")


if __name__ == "__main__":
    main()
