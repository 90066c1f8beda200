"""Drive CPython 3.15's own Tachyon writer and reader over many files in one process.

    python3.15 cpython_batch.py write MANIFEST   each line: INPUT.json<TAB>OUTPUT.bin
    python3.15 cpython_batch.py dump MANIFEST    each line: FILE.bin<TAB>OUTPUT.jsonl

`write` feeds a writer-input document (constructor arguments, optional stats, one entry per
write_sample call) to _remote_debugging.BinaryWriter. An OverflowError that sets
limit_reached ends that call and writing goes on, as the profiler does; any other error is a
failure.

`dump` writes what _remote_debugging.BinaryReader returns: get_info() on the first line, then
one line per thread sample in replay order; a reader error becomes a last line
{"error": "<message>"}.

With TACHYON_ORACLE_MEMO set, answers are kept and reused (memo.py): both actions are
functions of the input's bytes alone; a dump that ends in an error is asked again.
"""
import json
import os
import sys

import _remote_debugging as rd

import memo


def frames_of(raw):
    out = []
    for filename, funcname, loc, opcode in raw:
        location = rd.LocationInfo(tuple(loc)) if loc is not None else None
        out.append(rd.FrameInfo((filename, location, funcname, opcode)))
    return out


def write(src, dst):
    with open(src) as f:
        doc = json.load(f)
    writer = rd.BinaryWriter(
        dst,
        doc["sample_interval_us"],
        doc["start_time_us"],
        compression=doc.get("compression", 0),
        mode=doc.get("mode", -1),
        capture_features=doc.get("capture_features", -1),
    )
    for call in doc["samples"]:
        interpreters = [
            rd.InterpreterInfo((it["iid"], [rd.ThreadInfo((th["tid"], th["status"], frames_of(th["frames"])))
                                            for th in it["threads"]]))
            for it in call["interpreters"]
        ]
        try:
            writer.write_sample(interpreters, call["ts"])
        except OverflowError:
            if not writer.limit_reached:
                raise
    if doc.get("stats") is not None:
        writer.set_stats(*doc["stats"])
    writer.finalize()


class Collect:
    def __init__(self, out):
        self.out = out

    def collect(self, stack_frames, timestamps_us=None):
        for interp in stack_frames:
            for thread in interp.threads:
                frames = [[f.filename, f.funcname, list(f.location) if f.location is not None else None, f.opcode]
                          for f in thread.frame_info]
                for ts in timestamps_us:
                    self.out.write(json.dumps({"ts": ts, "iid": interp.interpreter_id, "tid": thread.thread_id,
                                               "status": thread.status, "frames": frames},
                                              separators=(",", ":")) + "\n")


def dump(src, dst):
    with open(dst, "w") as out:
        try:
            reader = rd.BinaryReader(src)
            out.write(json.dumps(reader.get_info(), separators=(",", ":")) + "\n")
            reader.replay(Collect(out), None)
        except (ValueError, OSError, OverflowError) as e:
            out.write(json.dumps({"error": str(e)}) + "\n")


def whole(action, dst):
    """A dump that ends in an error is not kept: its message may name the path."""
    if action != "dump":
        return True
    with open(dst, "rb") as f:
        f.seek(max(0, os.path.getsize(dst) - 4096))
        last = f.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    return not last.startswith(b'{"error"')


def main():
    action, manifest = sys.argv[1], sys.argv[2]
    step = {"write": write, "dump": dump}[action]
    start = memo.base(action, getattr(rd, "__file__", None))
    with open(manifest) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            src, dst = line.split("\t")
            kept = memo.key(start, src)
            if memo.fetch(kept, dst):
                continue
            step(src, dst)
            if whole(action, dst):
                memo.keep(kept, dst)


if __name__ == "__main__":
    main()
