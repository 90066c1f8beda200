# Three worker threads and the main thread computing for about a second.
import os
import threading
import time

SECONDS = float(os.environ.get("WORKLOAD_SECONDS", "1"))


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def spin(k, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        fib(16 + k % 4)


workers = [threading.Thread(target=spin, args=(i, 1.0)) for i in range(3)]
for w in workers:
    w.start()
spin(0, SECONDS)
for w in workers:
    w.join()
