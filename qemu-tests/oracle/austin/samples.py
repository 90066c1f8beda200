"""Dumps what austin-python 2.4.0's MojoStreamReader yields for a MOJO file, one JSON line
per metadata item or sample, in the order it yields them:

  {"kind": "metadata", "key": K, "value": V}
  {"kind": "sample", "pid", "iid", "tid", "frames": [{filename, scope, line, line_end,
   column, column_end}], "time", "memory", "idle", "gc", "running_task"}

(frames [] where the reader gives None; metrics, idle and gc null where it does). A file the
reader fails on ends with {"kind": "error", "error": "..."}.
Usage (in austin-python 2.4.0's venv):
  python samples.py FILE.mojo > FILE.samples.jsonl
  python samples.py --batch MANIFEST     each line: FILE.mojo<TAB>OUTPUT.jsonl
In batch mode with TACHYON_ORACLE_MEMO set, each file's lines are kept and reused
(../memo.py: keyed by the file's bytes and austin-python's code); a file the reader fails on
is read again every time.
"""
import json
import os
import sys

import austin
from austin.events import AustinMetadata, AustinSample
from austin.format.mojo import MojoStreamReader

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import memo  # noqa: E402


def frame(f):
    return {
        "filename": f.filename,
        "scope": f.function,
        "line": f.line,
        "line_end": f.line_end,
        "column": f.column,
        "column_end": f.column_end,
    }


def main(path, out):
    with open(path, "rb") as mojo:
        try:
            for e in MojoStreamReader(mojo):
                if isinstance(e, AustinMetadata):
                    line = {"kind": "metadata", "key": e.name, "value": e.value}
                elif isinstance(e, AustinSample):
                    line = {
                        "kind": "sample",
                        "pid": e.pid,
                        "iid": e.iid,
                        "tid": e.thread,
                        "frames": [frame(f) for f in e.frames or ()],
                        "time": e.metrics.time,
                        "memory": e.metrics.memory,
                        "idle": e.idle,
                        "gc": e.gc,
                        "running_task": e.running_task,
                    }
                else:
                    continue
                out.write(json.dumps(line) + "\n")
        except Exception as exc:  # the reader's failure is part of the record
            out.write(json.dumps({"kind": "error", "error": f"{type(exc).__name__}: {exc}"}) + "\n")


if __name__ == "__main__":
    if sys.argv[1] == "--batch":
        start = memo.base("samples", *memo.package_files(austin))
        with open(sys.argv[2]) as manifest:
            for line in manifest:
                line = line.rstrip("\n")
                if line:
                    src, dst = line.split("\t")
                    kept = memo.key(start, src)
                    if memo.fetch(kept, dst):
                        continue
                    with open(dst, "w") as out:
                        main(src, out)
                    with open(dst, "rb") as out:
                        failed = b'"kind": "error"' in out.read()
                    if not failed:
                        memo.keep(kept, dst)
    else:
        main(sys.argv[1], sys.stdout)
