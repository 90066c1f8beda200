# Computation, sleeping, exceptions and garbage, so wall, CPU, GIL and exception modes differ.
import os
import gc
import threading
import time

SECONDS = float(os.environ.get("WORKLOAD_SECONDS", "1"))


def raises(i):
    try:
        raise ValueError(i)
    except ValueError:
        return i


def churn():
    junk = [[object() for _ in range(50)] for _ in range(200)]
    gc.collect()
    return len(junk)


def sleeper():
    end = time.monotonic() + SECONDS
    while time.monotonic() < end:
        time.sleep(0.01)


t = threading.Thread(target=sleeper)
t.start()
end = time.monotonic() + SECONDS
while time.monotonic() < end:
    sum(raises(i) for i in range(200))
    churn()
t.join()
