"""BinaryWriter and BinaryReader under threads and fork (issue 40); any Python with the package.

    python test_threads.py          (scripts/python.sh: on 3.11 and on CPython 3.15.2)

Environment: TACHYON_CHILD_PYTHON, the command that runs this same Python for the scenarios
(default: sys.executable; the oracle's CPython needs `scripts/oracle-python.sh amd64`).

Each scenario runs in a child interpreter with a time-out, so a deadlock fails the test (with
the child's thread dump) instead of hanging the test command. What is checked is what the
threads saw against what the file holds, read back with the package's own reader (CPython's
reading of the package's files is test_package.py's and versions.py's subject).
"""
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

# Far above what a scenario takes (about a second); what a deadlock reaches.
TIME_OUT_S = 120

PRELUDE = """
import faulthandler, os, signal, sys, threading, time
import tachyon_profiles as tp
# The threads' stacks when the test gives up (SIGUSR1). Not dump_traceback_later: its watchdog
# thread is not in a forked child, whose exit then waits for it forever (CPython's, not ours).
faulthandler.register(signal.SIGUSR1, all_threads=True)

def sample(i, depth=12):
    frames = [tp.FrameInfo(("/srv/app/mod%d.py" % (k % 5), tp.LocationInfo((k + 1, k + 1, 0, 4)),
                            "f%d_%d" % (k, i % 7), None)) for k in range(depth)]
    thread = tp.ThreadInfo((1000 + i % 8, 1, frames))
    return [tp.InterpreterInfo((0, [thread]))]

def count(path):
    class Count:
        n = 0
        def collect(self, stack_frames, timestamps_us=None):
            self.n += len(timestamps_us) if timestamps_us else 1
    c = Count()
    with tp.BinaryReader(path) as r:
        replayed = r.replay(c)
        assert replayed == c.n == r.sample_count, (replayed, c.n, r.sample_count)
    return c.n
"""


def run(body):
    """Runs PRELUDE + body in a child interpreter, with a new folder as sys.argv[1]; its
    stdout's last line is the result."""
    with tempfile.TemporaryDirectory() as tmp:
        return run_in(body, tmp)


def run_in(body, tmp):
    script = os.path.join(tmp, "scenario.py")
    with open(script, "w") as f:
        f.write(PRELUDE + textwrap.dedent(body))
    python = os.environ.get("TACHYON_CHILD_PYTHON", "").split() or [sys.executable]
    p = subprocess.Popen([*python, script, tmp], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=TIME_OUT_S)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGUSR1)
        time.sleep(1)
        p.kill()
        out, err = p.communicate()
        raise AssertionError(f"no end within {TIME_OUT_S} s (a deadlock?); its threads:\n{err}") from None
    assert p.returncode == 0, f"exit {p.returncode}\n{out}\n{err}"
    return out.strip().splitlines()[-1]


class Threads(unittest.TestCase):
    def test_eight_writers_and_a_finalize_end_and_the_file_holds_every_accepted_sample(self):
        for compression in (0, 1):
            with self.subTest(compression=compression):
                out = run(f"""
                    path = os.path.join(sys.argv[1], "w.pyb")
                    w = tp.BinaryWriter(path, 1000, 1, compression={compression})
                    accepted = [0] * 8
                    refused = []
                    go = threading.Event()
                    def writer(k):
                        go.wait()
                        i = 0
                        while True:
                            i += 1
                            try:
                                w.write_sample(sample(k * 100000 + i), 10 + i)
                            except ValueError as e:
                                refused.append(str(e))
                                return
                            accepted[k] += 1
                    threads = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
                    for t in threads:
                        t.start()
                    go.set()
                    # Long enough for thousands of samples, so finalize has tables to write
                    # while the writers keep calling.
                    time.sleep(0.5)
                    w.finalize()
                    for t in threads:
                        t.join()
                    assert w.total_samples == sum(accepted), (w.total_samples, sum(accepted))
                    assert set(refused) == {{"Writer is closed"}}, set(refused)
                    print(sum(accepted), count(path))
                """)
                accepted, read = map(int, out.split())
                self.assertGreater(accepted, 1000)
                self.assertEqual(read, accepted)

    def test_calls_of_every_kind_from_threads_while_finalize_runs(self):
        out = run("""
            path = os.path.join(sys.argv[1], "w.pyb")
            w = tp.BinaryWriter(path, 1000, 1, compression=1)
            for i in range(20000):
                w.write_sample(sample(i, depth=30), i)
            errors = []
            def poke(what):
                for _ in range(2000):
                    try:
                        what()
                    except ValueError as e:
                        errors.append(str(e))
            calls = [lambda: w.get_stats(), lambda: w.total_samples, lambda: w.limit_reached,
                     lambda: w.set_stats(1.0, 1000.0), lambda: w.write_sample(sample(1), 1)]
            threads = [threading.Thread(target=poke, args=(c,)) for c in calls]
            for t in threads:
                t.start()
            w.finalize()
            for t in threads:
                t.join()
            try:
                w.finalize()
            except ValueError as e:
                errors.append(str(e))
            assert set(errors) <= {"Writer is closed", "Writer is already closed"}, set(errors)
            assert "Writer is already closed" in errors
            print(w.total_samples, count(path))
        """)
        total, read = map(int, out.split())
        self.assertGreaterEqual(total, 20000)
        self.assertEqual(read, total)

    def test_threads_replaying_one_reader_each_get_every_sample(self):
        out = run("""
            path = os.path.join(sys.argv[1], "r.pyb")
            with tp.BinaryWriter(path, 1000, 1, compression=1) as w:
                for i in range(30000):
                    w.write_sample(sample(i % 300), i)
            r = tp.BinaryReader(path)
            results = []
            class Collector:
                def __init__(self):
                    self.n = 0
                    self.names = set()
                def collect(self, stack_frames, timestamps_us=None):
                    self.n += len(timestamps_us)
                    # Python work in the callback, so threads switch mid-replay.
                    for f in stack_frames[0].threads[0].frame_info:
                        self.names.add(f.funcname)
            def replay():
                c = Collector()
                n = r.replay(c)
                results.append((n, c.n, len(c.names)))
            def query():
                for _ in range(3000):
                    r.get_info()
                    r.get_stats()
                    r.sample_count
            threads = [threading.Thread(target=replay) for _ in range(8)] + [threading.Thread(target=query)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert len(results) == 8
            assert len(set(results)) == 1, results
            stats = r.get_stats()
            assert stats["total_samples"] == 8 * 30000, stats
            r.close()
            print(*results[0])
        """)
        n, collected, names = map(int, out.split())
        self.assertEqual((n, collected, names), (30000, 30000, 12 * 7))


@unittest.skipUnless(hasattr(os, "fork"), "fork() is POSIX")
class Fork(unittest.TestCase):
    def test_an_inherited_writer_raises_in_the_child_and_a_new_one_works(self):
        for compression in (0, 1):
            with self.subTest(compression=compression):
                out = run(f"""
                    d = sys.argv[1]
                    parent = tp.BinaryWriter(os.path.join(d, "parent.pyb"), 1000, 1, compression={compression})
                    for i in range(5000):
                        parent.write_sample(sample(i), i)
                    r, wfd = os.pipe()
                    pid = os.fork()
                    if pid == 0:
                        os.close(r)
                        report = []
                        for call in (lambda: parent.write_sample(sample(1), 1), parent.finalize, parent.close,
                                     parent.get_stats, lambda: parent.total_samples):
                            try:
                                call()
                                report.append("no error")
                            except RuntimeError as e:
                                report.append("fork" if "before fork()" in str(e) and str(os.getpid()) in str(e)
                                              else repr(e))
                        child = tp.BinaryWriter(os.path.join(d, "child.pyb"), 1000, 1, compression={compression})
                        for i in range(3000):
                            child.write_sample(sample(i), i)
                        child.finalize()
                        report.append(str(count(os.path.join(d, "child.pyb"))))
                        os.write(wfd, " ".join(report).encode())
                        # A normal exit: the inherited writer is dropped with the interpreter,
                        # which must neither hang nor write the parent's buffer into its file.
                        sys.exit(0)
                    os.close(wfd)
                    report = os.read(r, 4096).decode()
                    _, status = os.waitpid(pid, 0)
                    assert os.waitstatus_to_exitcode(status) == 0, status
                    for i in range(5000, 8000):
                        parent.write_sample(sample(i), i)
                    parent.finalize()
                    print(report, count(os.path.join(d, "parent.pyb")))
                """)
                self.assertEqual(out.split(), ["fork"] * 5 + ["3000", "8000"])

    def test_a_reader_works_in_the_child(self):
        out = run("""
            path = os.path.join(sys.argv[1], "r.pyb")
            with tp.BinaryWriter(path, 1000, 1, compression=1) as w:
                for i in range(4000):
                    w.write_sample(sample(i), i)
            reader = tp.BinaryReader(path)
            class Count:
                n = 0
                def collect(self, stack_frames, timestamps_us=None):
                    self.n += len(timestamps_us)
            r, wfd = os.pipe()
            pid = os.fork()
            if pid == 0:
                c = Count()
                reader.replay(c)
                os.write(wfd, str(c.n).encode())
                os._exit(0)
            os.close(wfd)
            child = int(os.read(r, 100))
            os.waitpid(pid, 0)
            c = Count()
            reader.replay(c)
            print(child, c.n)
        """)
        self.assertEqual(out.split(), ["4000", "4000"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
