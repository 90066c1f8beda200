#!/usr/bin/env python3
"""Everything the C API's async-signal-safe functions can reach, from the machine code.

    scripts/signal-safety.py LIBRARY.so FUNCTION...

Disassembles the library (objdump), follows every call from each FUNCTION — direct calls and
calls through the GOT, resolved with the dynamic relocations — to every function they can
reach, and fails if any of them is outside the library (a PLT entry: libc, the allocator,
pthreads), allocates, or can panic (anything in core::panicking, std's panic machinery, the
allocator shims). One exception is named and explained: `core::panicking::panic_cannot_unwind`
is the landing pad every `extern "C"` function gets (Rust aborts rather than unwind into
C); it runs only if a callee unwinds, and the walk has shown that none can.

Prints the reachable set; exit status 1 on a finding.
"""
import re
import subprocess
import sys

FORBIDDEN = re.compile(r"panic|alloc|__rust|std::|@plt|malloc|free|pthread|memcpy|memset|memmove|abort|unwind",
                       re.IGNORECASE)
LANDING_PAD = "core::panicking::panic_cannot_unwind"


def main():
    lib, roots = sys.argv[1], sys.argv[2:]
    text = subprocess.run(["objdump", "-d", "-C", "--no-show-raw-insn", lib], check=True,
                          capture_output=True, text=True).stdout
    relocs = subprocess.run(["objdump", "-R", lib], check=True, capture_output=True, text=True).stdout
    got = {}
    for line in relocs.splitlines():
        m = re.match(r"([0-9a-f]+) R_X86_64_RELATIVE\s+\*ABS\*\+0x([0-9a-f]+)", line)
        if m:
            got[int(m.group(1), 16)] = int(m.group(2), 16)
    names, calls, current = {}, {}, None
    for line in text.splitlines():
        m = re.match(r"([0-9a-f]+) <(.*)>:$", line)
        if m:
            current = m.group(2)
            names[int(m.group(1), 16)] = current
            calls[current] = set()
            continue
        if current is None:
            continue
        m = re.search(r"\bcall\s+([0-9a-f]+) <([^>]*)>", line)
        if m:
            calls[current].add(m.group(2).split("+")[0])
            continue
        m = re.search(r"\bcall\s+\*0x[0-9a-f]+\(%rip\)\s+# ([0-9a-f]+)", line)
        if m:
            calls[current].add(f"GOT {m.group(1)}")
            continue
        if re.search(r"\b(call|jmp)\s+\*%", line):
            calls[current].add("<indirect call through a register>")
        m = re.search(r"\bjmp\s+([0-9a-f]+) <([^>+]*)>", line)
        if m and m.group(2) != current:
            calls[current].add(m.group(2))  # a tail call
    # Calls through the GOT, resolved once every function's address is known.
    for f, callees in calls.items():
        for c in [c for c in callees if c.startswith("GOT ")]:
            callees.discard(c)
            slot = c.split()[1]
            callees.add(names.get(got.get(int(slot, 16)), f"<unresolved GOT slot {slot}>"))
    findings, seen, todo = [], set(), list(roots)
    for root in roots:
        if root not in calls:
            findings.append(f"{root}: not in {lib}")
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        for callee in sorted(calls.get(f, ())):
            if callee == LANDING_PAD:
                continue
            if FORBIDDEN.search(callee) or callee.startswith("<") or callee not in calls:
                findings.append(f"{f} calls {callee}")
            todo.append(callee)
    if findings:
        for finding in findings:
            print(f"FORBIDDEN: {finding}")
    else:
        print(f"{', '.join(roots)} reach only: " + "; ".join(sorted(seen - set(roots))))
    sys.exit(1 if findings else 0)


if __name__ == "__main__":
    main()
