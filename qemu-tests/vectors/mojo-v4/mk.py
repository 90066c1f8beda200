"""Writes hand-made MOJO version 4 files exercising STACK_REPEAT and the task events, as
austin-python 2.4.0 reads them (no released Austin writes version 4). Run: python3 mk.py"""


def varint(n):
    out = bytearray()
    sign = 0x40 if n < 0 else 0
    n = abs(n)
    b = sign | (n & 0x3F)
    n >>= 6
    out.append(b | (0x80 if n else 0))
    while n:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
    return bytes(out)


def s(text):
    return text.encode() + b"\0"


class File:
    def __init__(self):
        self.b = bytearray(b"MOJ" + varint(4))

    def meta(self, k, v):
        self.b += b"\x01" + s(k) + s(v)

    def stack(self, pid, tid, iid=0):
        self.b += b"\x02" + varint(pid) + varint(iid) + s(tid)

    def string(self, key, value):
        self.b += b"\x0b" + varint(key) + s(value)

    def frame(self, key, fn, sc, line):
        self.b += b"\x03" + b"".join(varint(x) for x in (key, fn, sc, line, line, 1, 5))

    def ref(self, key):
        self.b += b"\x05" + varint(key)

    def repeat(self):
        self.b += b"\x0d"

    def time(self, t):
        self.b += b"\x09" + varint(t)

    def task_stack(self, task, name, frames):
        self.b += b"\x0e" + varint(task) + varint(name) + varint(frames)

    def task_waiter(self, task, waiter):
        self.b += b"\x0f" + varint(task) + varint(waiter)

    def task_running(self, task):
        self.b += b"\x10" + varint(task)

    def kernel(self, sym):
        self.b += b"\x06" + s(sym)

    def invalid(self):
        self.b += b"\x04"

    def save(self, name):
        open(name, "wb").write(self.b)


# STACK_REPEAT: per thread (pid and tid), innermost native frames of the previous sample
# dropped, native frames deeper in kept, chains of repeats, a thread without a previous
# sample, the same tid in another process, markers before the repeat.
f = File()
f.meta("mode", "wall")
f.stack(10, "a")
f.string(2, "main.py"); f.string(3, "main"); f.string(4, "libpython.so"); f.string(5, "PyEval")
f.string(6, "<frozen abc>"); f.string(7, "work"); f.string(8, "libc.so.6"); f.string(9, "read")
f.frame(100, 2, 3, 1)      # main.py:main
f.frame(101, 4, 5, 0)      # native, deep
f.frame(102, 6, 7, 9)      # <frozen abc>:work
f.frame(103, 8, 9, 0)      # native, innermost
f.ref(100); f.ref(101); f.ref(102); f.ref(103); f.time(10)
f.stack(10, "a"); f.string(10, "leaf"); f.frame(104, 2, 10, 3); f.ref(104); f.repeat(); f.time(11)
f.stack(10, "a"); f.repeat(); f.time(12)
f.stack(10, "a"); f.invalid(); f.repeat(); f.ref(103); f.time(13)
f.stack(10, "b"); f.repeat(); f.ref(100); f.time(14)
f.stack(11, "a"); f.string(2, "other.py"); f.string(3, "go"); f.frame(100, 2, 3, 7); f.ref(100); f.time(15)
f.stack(10, "a"); f.repeat(); f.kernel("do_syscall_64"); f.time(16)
f.stack(11, "a"); f.repeat(); f.repeat(); f.time(17)
f.meta("duration", "93")
f.save("stack_repeat.mojo")

# Tasks: a TASK_STACK's frame references are the task's, not the sample's; TASK_RUNNING
# names the running task; TASK_WAITER and a frameless TASK_STACK change no sample.
f = File()
f.meta("mode", "wall")
f.stack(20, "t")
f.string(2, "app.py"); f.string(3, "main"); f.string(4, "worker"); f.string(5, "Task-1")
f.frame(1, 2, 3, 1); f.frame(2, 2, 4, 5)
f.ref(1); f.task_stack(7, 5, 2); f.ref(2); f.ref(1); f.ref(2); f.task_running(7); f.task_waiter(7, 0); f.time(30)
f.stack(20, "t"); f.task_stack(7, 0, 0); f.ref(1); f.time(31)
f.stack(20, "t"); f.ref(1); f.task_stack(8, 0, 1); f.ref(2); f.task_waiter(8, 7); f.task_running(8); f.time(32)
f.save("tasks.mojo")
