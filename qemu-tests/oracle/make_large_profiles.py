"""Large Tachyon files for the read benchmarks, written by CPython 3.15.2's own BinaryWriter:
the samples of a real recording (one the test command made with CPython's sampler), replayed
by CPython's BinaryReader and written TIMES times end to end, each copy's timestamps moved
past the one before. The files are made, not committed: they are tens of megabytes.

    python3.15 make_large_profiles.py IN.pyb OUT.pyb TIMES COMPRESSION   (0 raw, 1 zstd)

Prints one JSON object: the samples written and the bytes of OUT. From the committed
recording, the same file on every machine (scripts/oracle-python.sh runs the oracle's
python3.15): `IN = qemu-tests/fixtures/recorded/cpython-3.15.2/deep_varied_zstd.pyb`, TIMES
20 gives 6,932,820 samples in 29,766,648 bytes raw (16 s, 2026-12-06).
"""
import json
import os
import sys

import _remote_debugging as rd


class Keep:
    """Every call replay makes: (interpreters, timestamps), in the file's order."""

    def __init__(self):
        self.calls = []

    def collect(self, stack_frames, timestamps_us=None):
        self.calls.append((stack_frames, list(timestamps_us or ())))


def main(src, out, times, compression):
    reader = rd.BinaryReader(src)
    info = reader.get_info()
    keep = Keep()
    reader.replay(keep, None)
    stamps = [ts for _, tss in keep.calls for ts in tss]
    if not stamps:
        raise SystemExit(f"{src}: no samples")
    interval = info["sample_interval_us"]
    span = max(stamps) - min(stamps) + interval
    writer = rd.BinaryWriter(out, interval, info["start_time_us"], compression=compression)
    written = 0
    for k in range(times):
        shift = k * span
        for interpreters, tss in keep.calls:
            for ts in tss:
                writer.write_sample(interpreters, ts + shift)
                written += sum(len(i.threads) for i in interpreters)
    writer.finalize()
    print(json.dumps({"samples": written, "bytes": os.path.getsize(out)}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
