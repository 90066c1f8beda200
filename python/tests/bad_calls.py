"""Bad calls of BinaryWriter, run on both sides: `_remote_debugging` (CPython 3.15.2) and this
package. test_package.py runs each case here on 3.11 and, in a CPython 3.15.2 child,
`python bad_calls.py` (which prints CPython's answers as JSON), and compares.

CRASHES_CPYTHON lists the cases on which CPython 3.15.2's writer crashes the interpreter
(segmentation fault) or raises SystemError (seen 2026-11-27, each case alone in a child);
there CPython has no type or message to match, and ours must raise TypeError naming the type
that was expected.
"""
import json
import os
import sys
import tempfile


def cases(rd, d):
    def fresh():
        return rd.BinaryWriter(os.path.join(d, "x.pyb"), 1000, 0)

    F = rd.FrameInfo(("a.py", rd.LocationInfo((1, 1, 0, 1)), "f", None))

    def thread(frame_info, tid=1, status=0):
        return [rd.InterpreterInfo((0, [rd.ThreadInfo((tid, status, frame_info))]))]

    return {
        "timestamp -1": lambda: fresh().write_sample(thread([F]), -1),
        "timestamp 2**64": lambda: fresh().write_sample(thread([F]), 2**64),
        "timestamp str": lambda: fresh().write_sample(thread([F]), "1"),
        "timestamp float": lambda: fresh().write_sample(thread([F]), 1.5),
        "sample_interval_us -1": lambda: rd.BinaryWriter(os.path.join(d, "y.pyb"), -1, 0),
        "start_time_us -1": lambda: rd.BinaryWriter(os.path.join(d, "y.pyb"), 1000, -1),
        "sample_interval_us 2**64": lambda: rd.BinaryWriter(os.path.join(d, "y.pyb"), 2**64, 0),
        "sample_interval_us str": lambda: rd.BinaryWriter(os.path.join(d, "y.pyb"), "a", 0),
        "thread_id -1": lambda: fresh().write_sample(thread([F], tid=-1), 1),
        "thread_id str": lambda: fresh().write_sample(thread([F], tid="a"), 1),
        "interpreter_id -1": lambda: fresh().write_sample([rd.InterpreterInfo((-1, []))], 1),
        "status str": lambda: fresh().write_sample(thread([F], status="a"), 1),
        "status 2**70": lambda: fresh().write_sample(thread([F], status=2**70), 1),
        "filename int": lambda: fresh().write_sample(thread([rd.FrameInfo((1, None, "f", None))]), 1),
        "funcname bytes": lambda: fresh().write_sample(thread([rd.FrameInfo(("a", None, b"f", None))]), 1),
        "stack_frames None": lambda: fresh().write_sample(None, 1),
        "stack_frames tuple": lambda: fresh().write_sample((), 1),
        "get_stats after finalize": lambda: (lambda w: (w.finalize(), w.get_stats()))(fresh()),
        "write_sample after finalize": lambda: (lambda w: (w.finalize(), w.write_sample(thread([F]), 1)))(fresh()),
        "finalize twice": lambda: (lambda w: (w.finalize(), w.finalize()))(fresh()),
        # CPython crashes on these (CRASHES_CPYTHON).
        "frame_info str": lambda: fresh().write_sample(thread("abc"), 1),
        "frame_info int": lambda: fresh().write_sample(thread(5), 1),
        "frame_info None": lambda: fresh().write_sample(thread(None), 1),
        "frame str": lambda: fresh().write_sample(thread(["abcd"]), 1),
        "frame int": lambda: fresh().write_sample(thread([1]), 1),
        "frame short": lambda: fresh().write_sample(thread([(1,)]), 1),
        "interpreters [1, 2, 3]": lambda: fresh().write_sample([1, 2, 3], 1),
        "interpreter (0,)": lambda: fresh().write_sample([(0,)], 1),
        "interpreter ()": lambda: fresh().write_sample([()], 1),
        "interpreter str": lambda: fresh().write_sample(["ab"], 1),
        "threads int": lambda: fresh().write_sample([(0, 5)], 1),
        "threads str": lambda: fresh().write_sample([(0, "ab")], 1),
        "thread int": lambda: fresh().write_sample([(0, [1])], 1),
        "thread short": lambda: fresh().write_sample([(0, [(1, 0)])], 1),
    }


CRASHES_CPYTHON = {
    "frame_info str": "ThreadInfo.frame_info",
    "frame_info int": "ThreadInfo.frame_info",
    "frame_info None": "ThreadInfo.frame_info",
    "frame str": "FrameInfo",
    "frame int": "FrameInfo",
    "frame short": "FrameInfo",
    "interpreters [1, 2, 3]": "InterpreterInfo",
    "interpreter (0,)": "InterpreterInfo",
    "interpreter ()": "InterpreterInfo",
    "interpreter str": "InterpreterInfo",
    "threads int": "InterpreterInfo.threads",
    "threads str": "InterpreterInfo.threads",
    "thread int": "ThreadInfo",
    "thread short": "ThreadInfo",
}


def answers(rd, names=None):
    """{case: [exception type, message]} ("OK" and the result's repr when nothing raised)."""
    out = {}
    with tempfile.TemporaryDirectory() as d:
        for name, call in cases(rd, d).items():
            if names is not None and name not in names:
                continue
            try:
                out[name] = ["OK", repr(call())]
            except Exception as e:
                out[name] = [type(e).__name__, str(e)]
    return out


if __name__ == "__main__":
    import _remote_debugging

    every = cases(_remote_debugging, tempfile.gettempdir())
    json.dump(answers(_remote_debugging, [n for n in every if n not in CRASHES_CPYTHON]), sys.stdout)
