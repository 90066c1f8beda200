"""CPython 3.15's side of the side-by-side benchmark; prints one JSON object.

    python3.15 cpython_bench.py write STREAM.json OUT.bin COMPRESSION   (0 raw, 1 zstd)
    python3.15 cpython_bench.py read FILE

STREAM.json: {"start": us, "interval": us, "frames": [[file, func, [l, el, c, ec]], ...],
"ticks": [[ts, [[tid, status, [frame index, ...]], ...]], ...]}. `write` builds every
InterpreterInfo first and times only the write_sample loop and finalize. `read` times
BinaryReader.replay into a collector that does nothing; maxrss_kb is the process's peak RSS
(VmHWM). The benchmark also runs this whole script as a process and times that.
"""
import json
import sys
import time

import _remote_debugging as rd


class Nothing:
    def collect(self, stack_frames, timestamps_us=None):
        pass


def write(stream_path, out, compression):
    with open(stream_path) as f:
        stream = json.load(f)
    frames = [rd.FrameInfo((fn, rd.LocationInfo(tuple(loc)), func, None)) for fn, func, loc in stream["frames"]]
    calls = []
    samples = 0
    for ts, threads in stream["ticks"]:
        infos = [rd.ThreadInfo((tid, status, [frames[i] for i in stack])) for tid, status, stack in threads]
        calls.append(([rd.InterpreterInfo((0, infos))], ts))
        samples += len(infos)
    start, interval = stream["start"], stream["interval"]
    del stream
    writer = rd.BinaryWriter(out, interval, start, compression=compression)
    t0 = time.perf_counter()
    for interpreters, ts in calls:
        writer.write_sample(interpreters, ts)
    writer.finalize()
    seconds = time.perf_counter() - t0
    print(json.dumps({"seconds": seconds, "samples": samples}))


def read(path):
    t0 = time.perf_counter()
    reader = rd.BinaryReader(path)
    samples = reader.get_info()["sample_count"]
    reader.replay(Nothing(), None)
    seconds = time.perf_counter() - t0
    print(json.dumps({"seconds": seconds, "samples": samples, "maxrss_kb": peak_rss_kb()}))


def peak_rss_kb():
    # VmHWM is this process's own peak; ru_maxrss would include the parent's peak, which
    # Linux carries over fork and exec.
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        read(sys.argv[2])
