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

With TACHYON_ORACLE_MEMO naming a folder (the test command sets it), each output is kept
there under a key of everything it depends on — this script, the interpreter (its version,
machine and the _remote_debugging module's bytes), the action and the input's bytes — and an
input seen before is answered from there: both actions are functions of those alone. A run
whose files did not change asks CPython nothing (an emulated s390x CPython takes minutes).
Only whole answers are kept: a dump that ends in an error (whose message may name the path)
is asked again every time.
"""
import hashlib
import json
import os
import platform
import shutil
import sys

import _remote_debugging as rd


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


# Outputs above this size are not kept (a dump of a long recording is hundreds of MB).
MEMO_MOST_BYTES = 64 << 20


def interpreter_key(action):
    h = hashlib.sha256()
    for part in (sys.version, platform.machine(), action):
        h.update(part.encode() + b"\0")
    for path in (__file__, getattr(rd, "__file__", None)):
        if path:
            with open(path, "rb") as f:
                h.update(f.read())
    return h


def whole(action, dst):
    if os.path.getsize(dst) > MEMO_MOST_BYTES:
        return False
    if action == "dump":
        with open(dst, "rb") as f:
            f.seek(max(0, os.path.getsize(dst) - 4096))
            last = f.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
        return not last.startswith(b'{"error"')
    return True


def main():
    action, manifest = sys.argv[1], sys.argv[2]
    step = {"write": write, "dump": dump}[action]
    memo = os.environ.get("TACHYON_ORACLE_MEMO")
    base = interpreter_key(action) if memo else None
    if memo:
        os.makedirs(memo, exist_ok=True)
    with open(manifest) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            src, dst = line.split("\t")
            if not memo:
                step(src, dst)
                continue
            h = base.copy()
            try:
                with open(src, "rb") as data:
                    h.update(data.read())
            except OSError:  # the step reports it as CPython does
                step(src, dst)
                continue
            kept = os.path.join(memo, h.hexdigest())
            if os.path.exists(kept):
                shutil.copyfile(kept, dst)
                os.utime(kept)  # the test command removes what no run has used for weeks
                continue
            step(src, dst)
            if whole(action, dst):
                partial = "%s.%d" % (kept, os.getpid())
                shutil.copyfile(dst, partial)
                os.replace(partial, kept)


if __name__ == "__main__":
    main()
