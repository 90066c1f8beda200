#!/usr/bin/env python3
"""Core-minutes of compiling and of running, from the kernel's process accounting.

The test command's wall time hides what its two cores did: a step that waits on an emulator
and one that compiles on both cores can take the same minutes. With process accounting on
(acct(2), as root), the kernel writes a record for every process that ends: its name, parent,
start, and user and system time. A process is *compiling* when it is a compiler, assembler,
linker, archiver, build script, cargo or the compiler cache, or runs under one (the compiler
cache's server starts the compilers); every other process is *running* (tests, emulators,
interpreters, browsers, recorders). Each is counted in the step during which it ended.

Usage: cpu-account.py on FILE           start writing records to FILE
       cpu-account.py off               stop
       cpu-account.py report FILE STEPS print the table; STEPS has "EPOCH<TAB>NAME" per step
       cpu-account.py --self-test       the record decoder and the classification on made-up records
"""

import ctypes
import os
import re
import struct
import sys

RECORD = 64  # struct acct_v3 (linux/acct.h)
AHZ = 100  # the ticks of ac_utime, ac_stime and ac_etime

COMPILERS = {
    "rustc", "rustdoc", "clippy-driver", "cc", "c++", "gcc", "g++", "cc1", "cc1plus", "as",
    "ld", "ld.bfd", "ld.gold", "ld.lld", "lld", "collect2", "clang", "clang++", "ar", "ranlib",
    "sccache", "cbindgen", "lto-wrapper",
}
# Compiling themselves, but what they start is judged on its own: cargo runs the tests it built.
BUILD_DRIVERS = {"cargo", "maturin"}
# Cross toolchains (names cut to 15 characters: "powerpc64-linux"), clang's versioned name, and
# build scripts ("build-script-build", "build_script_build-…").
COMPILER_PATTERN = re.compile(r"^(s390x|powerpc|powerpc64|i686|arm|x86_64|aarch64)-|^clang-\d|^build.script")


def comp_t(value):
    """The kernel's 16-bit float: a 13-bit mantissa and a base-8 exponent."""
    return (value & 0x1FFF) << (3 * ((value >> 13) & 7))


def records(data):
    """(pid, ppid, start second, end second, cpu seconds, name) of each v3 record."""
    out = []
    for at in range(0, len(data) - RECORD + 1, RECORD):
        r = data[at : at + RECORD]
        if r[1] != 3:
            continue
        pid, ppid, btime = struct.unpack_from("<III", r, 16)
        (etime,) = struct.unpack_from("<f", r, 28)
        utime, stime = struct.unpack_from("<HH", r, 32)
        name = r[48:64].split(b"\0")[0].decode("latin-1")
        out.append((pid, ppid, btime, btime + etime / AHZ, (comp_t(utime) + comp_t(stime)) / AHZ, name))
    return out


def classify(recs):
    """For each record, whether it was compiling: a compiler by name, or a descendant of one
    (the parent found by pid among the records alive when the child started)."""
    by_pid = {}
    for i, (pid, _, start, end, _, _) in enumerate(recs):
        by_pid.setdefault(pid, []).append(i)

    def parent(i):
        _, ppid, start, _, _, _ = recs[i]
        best = None
        for j in by_pid.get(ppid, ()):
            if recs[j][2] <= start + 1 and recs[j][3] >= start - 1 and (best is None or recs[j][2] > recs[best][2]):
                best = j
        return best

    compiling = [None] * len(recs)
    for i in range(len(recs)):
        if recs[i][5] in BUILD_DRIVERS:
            compiling[i] = True
            continue
        chain, j, verdict = [], i, False
        while j is not None and len(chain) < 64:
            name = recs[j][5]
            if name in BUILD_DRIVERS:
                break
            if compiling[j] is not None and j != i:
                verdict = compiling[j]
                break
            if name in COMPILERS or COMPILER_PATTERN.match(name):
                verdict = True
                break
            chain.append(j)
            j = parent(j)
        for k in chain:
            compiling[k] = verdict
        if compiling[i] is None:
            compiling[i] = verdict
    return compiling


def report(path, steps_path):
    with open(path, "rb") as f:
        recs = records(f.read())
    steps = []
    with open(steps_path, encoding="utf-8") as f:
        for line in f:
            epoch, _, name = line.rstrip("\n").partition("\t")
            steps.append((int(epoch), name))
    compiling = classify(recs)
    per_step = [[0.0, 0.0] for _ in steps]
    for (_, _, _, end, cpu, _), compile_ in zip(recs, compiling):
        k = 0
        while k + 1 < len(steps) and steps[k + 1][0] <= end:
            k += 1
        per_step[k][0 if compile_ else 1] += cpu
    print("\nCore-minutes per step (process accounting: every process that ended, by the step it ended in):")
    print(f"  {'compiling':>9} {'running':>8}  step")
    for (c, r), (_, name) in zip(per_step, steps):
        print(f"  {c / 60:9.1f} {r / 60:8.1f}  {name[:90]}")
    c = sum(s[0] for s in per_step)
    r = sum(s[1] for s in per_step)
    print(f"  {c / 60:9.1f} {r / 60:8.1f}  in all ({len(recs)} processes)")


def self_test():
    def rec(pid, ppid, btime, etime, cpu, name):
        data = bytearray(RECORD)
        data[1] = 3
        struct.pack_into("<III", data, 16, pid, ppid, btime)
        struct.pack_into("<f", data, 28, etime * AHZ)
        struct.pack_into("<HH", data, 32, cpu * AHZ, 0)
        data[48 : 48 + len(name)] = name.encode()
        return bytes(data)

    data = b"".join(
        [
            rec(10, 1, 100, 50, 1, "sccache"),  # the compiler cache's server
            rec(11, 10, 110, 5, 3, "ctrl-c"),  # a compiler it started, renamed
            rec(20, 1, 100, 60, 2, "cargo"),
            rec(21, 20, 120, 5, 4, "suite-0123abcd"),  # a test cargo ran
            rec(22, 21, 121, 1, 1, "python3"),  # and what the test ran
            rec(11, 1, 200, 5, 7, "qemu-s390x"),  # pid 11 again, later: not the compiler
            rec(30, 1, 100, 5, 2, "powerpc64-linux"),
            rec(31, 1, 100, 5, 1, "build-script-bu"),
        ]
    )
    recs = records(data)
    got = [(r[5], c) for r, c in zip(recs, classify(recs))]
    want = [("sccache", True), ("ctrl-c", True), ("cargo", True), ("suite-0123abcd", False), ("python3", False),
            ("qemu-s390x", False), ("powerpc64-linux", True), ("build-script-bu", True)]
    if got != want or comp_t(0x2001) != 8 or abs(recs[0][4] - 1) > 1e-9:
        print(f"self-test failed: {got}")
        return 1
    print(f"self-test: {len(want)} records classified as expected")
    return 0


def main():
    args = sys.argv[1:]
    if args == ["--self-test"]:
        return self_test()
    libc = ctypes.CDLL(None, use_errno=True)
    if len(args) == 2 and args[0] == "on":
        open(args[1], "ab").close()
        if libc.acct(args[1].encode()) != 0:
            print(f"process accounting unavailable: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
            return 1
        return 0
    if args == ["off"]:
        return 0 if libc.acct(None) == 0 else 1
    if len(args) == 3 and args[0] == "report":
        report(args[1], args[2])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
