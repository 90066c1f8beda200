"""Writes hand-made MOJO version 3 files whose lines, once mojo2austin (austin-python 1.7.1)
has written them as text, exercise how austin2speedscope reads them: names holding `;`, a
line end, `:` or a space; a file name beginning with `L` and a digit; GC, INVALID and
kernel frames; a string reference and a frame defined again inside a line; lines that run
into the next; processes and threads; full mode's held back metrics; a blank line.
Run: python3 mk_mojo.py (then the recipe in README.md)."""


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
        self.b = bytearray(b"MOJ" + varint(3))

    def meta(self, k, v):
        self.b += b"\x01" + s(k) + s(v)

    def stack(self, pid, tid, iid=0):
        self.b += b"\x02" + varint(pid) + varint(iid) + s(tid)

    def string(self, key, value):
        self.b += b"\x0b" + varint(key) + s(value)

    def frame(self, key, fn, sc, line):
        self.b += b"\x03" + b"".join(varint(x) for x in (key, fn, sc, line, line + 1, 1, 9))

    def ref(self, *keys):
        for key in keys:
            self.b += b"\x05" + varint(key)

    def string_ref(self, key):
        self.b += b"\x0c" + varint(key)

    def kernel(self, sym):
        self.b += b"\x06" + s(sym)

    def invalid(self):
        self.b += b"\x04"

    def gc(self):
        self.b += b"\x07"

    def idle(self):
        self.b += b"\x08"

    def time(self, t):
        self.b += b"\x09" + varint(t)

    def memory(self, m):
        self.b += b"\x0a" + varint(m)

    def sample(self, *keys, time=None, memory=None, pid=10, tid="7f01"):
        self.stack(pid, tid)
        self.ref(*keys)
        if time is not None:
            self.time(time)
        if memory is not None:
            self.memory(memory)

    def save(self, name):
        open(name, "wb").write(self.b)


def names(f):
    """Strings and frames of pid 10, defined inside the first sample (as Austin does)."""
    for key, value in enumerate(
        ["app.py", "main", "work", "semi;colon.py", "new\nline", "L12.py", "scope:with:colons",
         "sp ace.py", "\u00fcn\u00efcode.py", "other.py"],
        start=2,
    ):
        f.string(key, value)
    f.frame(1, 2, 3, 1)    # app.py:main:1
    f.frame(2, 2, 4, 5)    # app.py:work:5
    f.frame(3, 5, 3, 2)    # semi;colon.py:main:2
    f.frame(4, 2, 6, 3)    # app.py:new\nline:3
    f.frame(5, 7, 3, 4)    # L12.py:main:4
    f.frame(6, 2, 8, 6)    # app.py:scope:with:colons:6
    f.frame(7, 9, 3, 7)    # sp ace.py:main:7
    f.frame(8, 10, 4, 8)   # ünïcode.py:work:8


# Wall mode: one metric per line, written when its METRIC_TIME comes.
f = File()
f.meta("austin", "3.7.0")
f.meta("interval", "1000")
f.meta("mode", "wall")
f.stack(10, "7f01")
names(f)
f.ref(1, 2); f.time(10)                 # the header's closing line: dropped
f.sample(1, 2, time=20)
f.sample(1, 2, time=21)                 # the same stack again
f.sample(1, 3, time=30)                 # `;` in a file name
f.sample(1, 4, time=40)                 # a line end in a scope
f.sample(1, 5, time=50)                 # `;L12.py:...` rewritten as `:12.py:...`
f.sample(5, 1, time=51)                 # ... but not as the first frame
f.sample(1, 6, time=60)                 # `:` in a scope: split at the last two
f.sample(1, 7, time=70)                 # a space in a file name
f.sample(1, 8, time=75)                 # non-ASCII
f.stack(10, "7f01"); f.ref(1); f.gc(); f.ref(2); f.time(80)
f.stack(10, "7f01"); f.ref(1); f.invalid(); f.time(90)
f.stack(10, "7f01"); f.ref(1); f.kernel("do_syscall_64"); f.time(100)
f.stack(10, "7f01"); f.ref(1); f.string_ref(3); f.time(110)
f.stack(10, "7f01"); f.ref(1, 2); f.frame(2, 2, 4, 99); f.ref(2); f.time(120)   # defined again
f.sample(1, 2, time=130)                # the new definition
f.sample(1, 2, time=140, tid="7f02")    # another thread
f.stack(11, "7f01"); f.string(2, "other.py"); f.string(3, "go"); f.frame(1, 2, 3, 1); f.ref(1); f.time(150)
f.sample(1, time=151, pid=11)           # another process, its own key 1
f.sample(1, time=152)                   # back to the first
f.sample(1, time=160, tid="ab;cd")      # `;` in a thread id
f.sample(1, time=170, tid="a b")        # a space in a thread id
f.sample(1, time=0)                     # weight 0
f.sample(1, time=-5)                    # a negative time
f.sample(time=5)                        # no frames
f.sample(1)                             # no metric: runs into the next line
f.sample(2, time=180)
f.meta("note", "mid-file")
f.sample(1, 2, time=190)
f.meta("mode", "full")                  # mojo2austin holds metrics back from now on
f.sample(1, 2, time=200, memory=7)
f.stack(10, "7f01"); f.ref(2); f.time(210); f.idle(); f.memory(-3)
f.sample(1, 2, time=220, memory=0)
f.meta("note", "a blank line next\n")  # ends the samples for austin2speedscope
f.sample(1, 2, time=230, memory=23)
f.meta("duration", "2000")
f.save("quirks_wall.mojo")

# Full mode: time, idle and memory held back until the next STACK or METADATA (in the order
# Austin writes them: mojo2austin fails on others, and on a missing one).
f = File()
f.meta("austin", "3.7.0")
f.meta("interval", "1000")
f.meta("mode", "full")
f.stack(10, "7f01")
names(f)
f.ref(1, 2); f.time(10); f.memory(1)    # the header's closing line: dropped
f.sample(1, 2, time=20, memory=100)
f.sample(1, 2, time=21, memory=-100)    # a deallocation
f.stack(10, "7f01"); f.ref(1, 2); f.time(22); f.idle(); f.memory(0)    # idle: no CPU time
f.sample(1, 3, time=30, memory=3)       # `;` in a file name
f.sample(1, 5, time=50, memory=5)       # `;L12.py:...`
f.stack(10, "7f01"); f.ref(1); f.gc(); f.time(80); f.memory(8)
f.stack(10, "7f01"); f.ref(1, 2); f.frame(2, 2, 4, 99); f.ref(2); f.time(120); f.memory(12)
f.sample(1, 2, time=130, memory=13)
f.sample(1, 2, time=140, memory=14, tid="7f02")
f.sample(1)                             # no metrics: runs into the next line
f.sample(2, time=180, memory=18)
f.meta("note", "ends the line before")
f.sample(1, 2, time=190, memory=-19)
f.sample(1, 2, time=200, memory=20)     # the last: its held back metrics are dropped
f.save("quirks_full.mojo")
