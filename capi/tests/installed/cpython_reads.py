"""CPython 3.15.2 reads each consumer's file: 1,000 samples on two threads, 600 in leaf.

    scripts/oracle-python.sh amd64 capi/tests/installed/cpython_reads.py FILE...
"""
import sys

import _remote_debugging as rd


class Count:
    def __init__(self):
        self.samples = 0
        self.in_leaf = 0
        self.threads = set()

    def collect(self, stack_frames, timestamps_us=None):
        n = len(timestamps_us) if timestamps_us else 1
        for interpreter in stack_frames:
            for thread in interpreter.threads:
                self.samples += n
                self.threads.add(thread.thread_id)
                if thread.frame_info[0].funcname == "leaf":
                    self.in_leaf += n


bad = 0
for path in sys.argv[1:]:
    count = Count()
    with rd.BinaryReader(path) as reader:
        reader.replay(count)
        info = reader.get_info()
    got = (count.samples, count.in_leaf, len(count.threads), info["sample_count"])
    ok = got == (1000, 600, 2, 1000)
    bad += not ok
    print(f"{'ok ' if ok else 'BAD'} {path}: {count.samples} samples, {count.in_leaf} in leaf, "
          f"{len(count.threads)} threads, header {info['sample_count']}")
sys.exit(1 if bad or len(sys.argv) < 2 else 0)
