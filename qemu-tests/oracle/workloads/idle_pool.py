# A service with a pool of idle workers: most threads wait on a queue for the whole run, the
# main thread wakes up every few milliseconds; with -a nearly every sample repeats its
# thread's previous stack (long REPEAT runs).
import os
import queue
import threading
import time

SECONDS = float(os.environ.get("WORKLOAD_SECONDS", "1"))
WORKERS = 24

jobs = queue.Queue()


def worker():
    while True:
        item = jobs.get()
        if item is None:
            return
        sum(range(item))


def housekeeping(deadline):
    ticks = 0
    while time.monotonic() < deadline:
        time.sleep(0.005)
        ticks += 1
        if ticks % 200 == 0:
            jobs.put(1000)
    return ticks


pool = [threading.Thread(target=worker, name=f"worker-{i}") for i in range(WORKERS)]
for t in pool:
    t.start()
housekeeping(time.monotonic() + SECONDS)
for _ in pool:
    jobs.put(None)
for t in pool:
    t.join()
