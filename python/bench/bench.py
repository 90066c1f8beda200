"""The Python package against CPython 3.15.2's own reader, in one CPython 3.15.2 process.

    python3.15 bench.py [--runs N] [--python CMD] PROFILE...     (tachyon_profiles importable)

CMD runs the same CPython as a command (default: this interpreter; the oracle's needs
`scripts/oracle-python.sh amd64`, which sets its loader).

For each profile (real files written by CPython's sampler):

1. `replay` into a collector whose `collect` does nothing: `_remote_debugging.BinaryReader`
   against `tachyon_profiles.BinaryReader`, each opening the file and replaying it, timed in
   this process, runs interleaved, median of N. Both must make the same number of `collect`
   calls with the same number of timestamps (counted once, beforehand), so the collector's
   own cost is the same on both sides.
2. Collapsed stacks: `python3.15 -m profiling.sampling replay --collapsed` against
   `python3.15 -c "tachyon_profiles.convert(..., to='collapsed', output=...)"`, both whole
   processes (start-up included), median of N (of 3 at most for CPython's: it is slow);
   the two outputs must be identical. The in-process time of `convert()` is shown beside.
3. Writing: the profile's samples as a profiler hands them over — one `write_sample` call per
   sample, the calls CPython's own reader made of the file (the first --write-samples, the
   file's calls repeated with later timestamps where it has fewer) — then `finalize()`, into
   `_remote_debugging.BinaryWriter` and `tachyon_profiles.BinaryWriter`, raw and zstd, runs
   interleaved, median of N. The two files must be byte-identical.

Prints a Markdown table; exits 1 if an output or a call count differs.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import _remote_debugging as rd
import tachyon_profiles as tp


class Nothing:
    def collect(self, stack_frames, timestamps_us):
        pass


class Calls:
    """Every sample as a `write_sample` call: (stack_frames, timestamp_us)."""

    def __init__(self):
        self.calls = []

    def collect(self, stack_frames, timestamps_us):
        for ts in timestamps_us:
            self.calls.append((stack_frames, ts))


def write_calls(path, n):
    """The first n samples of `path` as calls (repeated with later timestamps if fewer)."""
    c = Calls()
    replay(rd.BinaryReader, path, c)
    calls = c.calls[:n]
    if not calls:
        return []
    span = calls[-1][1] - calls[0][1] + 1
    base = list(calls)
    while len(calls) < n:
        shift = span * (len(calls) // len(base))
        calls.extend((frames, ts + shift) for frames, ts in base[: n - len(calls)])
    return calls


def write(cls, out, calls, compression):
    w = cls(out, 1000, calls[0][1], compression=compression)
    for frames, ts in calls:
        w.write_sample(frames, ts)
    w.finalize()


class Count:
    def __init__(self):
        self.calls = self.samples = 0

    def collect(self, stack_frames, timestamps_us):
        self.calls += 1
        self.samples += len(timestamps_us)


def replay(cls, path, collector):
    reader = cls(path)
    n = reader.replay(collector, None)
    reader.close()
    return n


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def whole(argv):
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def ms(s):
    return f"{s * 1000:.1f} ms" if s < 1 else f"{s:.2f} s"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--write-samples", type=int, default=240000, help="write_sample calls per written file")
    ap.add_argument("--python", default=sys.executable, help="command that runs this CPython (split on spaces)")
    ap.add_argument("profiles", nargs="+")
    args = ap.parse_args()
    ok = True
    rows_replay, rows_collapsed, rows_write = [], [], []
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp:
        for path in args.profiles:
            name = os.path.basename(path)
            theirs, ours = Count(), Count()
            replay(rd.BinaryReader, path, theirs)
            replay(tp.BinaryReader, path, ours)
            if (theirs.calls, theirs.samples) != (ours.calls, ours.samples):
                print(f"{name}: collect calls differ: CPython {theirs.calls}/{theirs.samples}, ours {ours.calls}/{ours.samples}", file=sys.stderr)
                ok = False
            t_cp, t_us = [], []
            for _ in range(args.runs):
                t_cp.append(timed(lambda: replay(rd.BinaryReader, path, Nothing())))
                t_us.append(timed(lambda: replay(tp.BinaryReader, path, Nothing())))
            a, b = statistics.median(t_cp), statistics.median(t_us)
            rows_replay.append(f"| {name} | {ours.samples} | {ours.calls} | {ms(a)} | {ms(b)} | {a / b:.1f}× |")

            out_cp, out_us = os.path.join(tmp, "cpython.txt"), os.path.join(tmp, "ours.txt")
            py = args.python.split()
            cp_cmd = [*py, "-m", "profiling.sampling", "replay", "--collapsed", "-o", out_cp, path]
            us_cmd = [*py, "-c",
                      "import sys, tachyon_profiles as tp; tp.convert(sys.argv[1], to='collapsed', output=sys.argv[2])",
                      path, out_us]
            t_cp = [whole(cp_cmd) for _ in range(min(args.runs, 3))]
            t_us = [whole(us_cmd) for _ in range(args.runs)]
            t_in = [timed(lambda: tp.convert(path, to="collapsed", output=out_us)) for _ in range(args.runs)]
            with open(out_cp, "rb") as f1, open(out_us, "rb") as f2:
                same = f1.read() == f2.read()
            ok &= same
            a, b, c = statistics.median(t_cp), statistics.median(t_us), statistics.median(t_in)
            rows_collapsed.append(f"| {name} | {ms(a)} | {ms(b)} | {a / b:.1f}× | {ms(c)} | {'yes' if same else 'NO'} |")

            calls = write_calls(path, args.write_samples)
            frames = sum(len(t.frame_info) for f, _ in calls[:1000] for i in f for t in i.threads)
            for compression in (0, 1):
                w_cp, w_us = os.path.join(tmp, "cpython.pyb"), os.path.join(tmp, "ours.pyb")
                t_cp, t_us = [], []
                for _ in range(args.runs):
                    t_cp.append(timed(lambda: write(rd.BinaryWriter, w_cp, calls, compression)))
                    t_us.append(timed(lambda: write(tp.BinaryWriter, w_us, calls, compression)))
                with open(w_cp, "rb") as f1, open(w_us, "rb") as f2:
                    same = f1.read() == f2.read()
                ok &= same
                a, b = statistics.median(t_cp), statistics.median(t_us)
                rows_write.append(f"| {name} | {len(calls)} | {frames / min(len(calls), 1000):.0f} | "
                                  f"{('raw', 'zstd')[compression]} | {ms(a)} | {ms(b)} | {a / b:.2f}× | "
                                  f"{'yes' if same else 'NO'} |")
    print("| profile | samples | collect calls | CPython `BinaryReader.replay` | `tachyon_profiles.BinaryReader.replay` | speed-up |")
    print("|---|---:|---:|---:|---:|---:|")
    print("\n".join(rows_replay))
    print()
    print("| profile | `python -m profiling.sampling replay --collapsed` | `python -c \"tachyon_profiles.convert(…, to='collapsed')\"` | speed-up | `convert()` in-process | same output |")
    print("|---|---:|---:|---:|---:|---|")
    print("\n".join(rows_collapsed))
    print()
    print("| profile | `write_sample` calls | frames a sample | compression | CPython `BinaryWriter` | `tachyon_profiles.BinaryWriter` | speed-up | same bytes |")
    print("|---|---:|---:|---|---:|---:|---:|---|")
    print("\n".join(rows_write))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
