# Recursion 300-450 deep, so stacks exceed the format's 256 kept frames.
import os
import sys
import time

SECONDS = float(os.environ.get("WORKLOAD_SECONDS", "1"))

sys.setrecursionlimit(5000)


def dive(depth, target):
    if depth < target:
        return dive(depth + 1, target)
    total = 0
    for i in range(2000):
        total += i * i
    return total


end = time.monotonic() + SECONDS
n = 0
while time.monotonic() < end:
    dive(0, 300 + n % 150)
    n += 1
