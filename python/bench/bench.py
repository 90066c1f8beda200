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
    ap.add_argument("--python", default=sys.executable, help="command that runs this CPython (split on spaces)")
    ap.add_argument("profiles", nargs="+")
    args = ap.parse_args()
    ok = True
    rows_replay, rows_collapsed = [], []
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
    print("| profile | samples | collect calls | CPython `BinaryReader.replay` | `tachyon_profiles.BinaryReader.replay` | speed-up |")
    print("|---|---:|---:|---:|---:|---:|")
    print("\n".join(rows_replay))
    print()
    print("| profile | `python -m profiling.sampling replay --collapsed` | `python -c \"tachyon_profiles.convert(…, to='collapsed')\"` | speed-up | `convert()` in-process | same output |")
    print("|---|---:|---:|---:|---:|---|")
    print("\n".join(rows_collapsed))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
