"""What CPython 3.15.2's own reader sees in the capture proofs' files (scripts/capture.sh).

    python3.15 capture_check.py native FILE DROPPED THREADS
        every thread present; the samples the rings dropped, recovered from the stats
        trailer's percentages (missed_samples, error_rate) and sample_count, equal DROPPED.
    python3.15 capture_check.py split FILE THREADS WRITTEN HEAVY LIGHT RATIO TOLERANCE
        (a profile sampled by work: lua_timer --every) every thread present, with samples in
        both functions; the replay and the header hold WRITTEN samples; samples whose innermost
        frame is HEAVY against those whose innermost frame is LIGHT are within TOLERANCE (a
        fraction) of RATIO overall. Each thread's ratio is printed.
    python3.15 capture_check.py timed FILE THREADS WRITTEN SOURCE HEAVY LIGHT MEASURED
        (a profile sampled by time: lua_timer's CPU-time timers) every thread present; the
        replay and the header hold WRITTEN samples; every frame is a function of the script
        SOURCE (a file name), and some samples end in HEAVY and some in LIGHT. The split
        between them is printed beside MEASURED (the threads' own CPU clocks' split) and not
        checked: where a timer sample lands depends on the machine's clocks, scheduler and
        load, so no bound on it holds for every run.
    python3.15 capture_check.py salvaged FILE AT_LEAST
        the file reads, and holds at least AT_LEAST samples.
    python3.15 capture_check.py cuts COMPLETE FILE...
        every FILE, cut-CUT-SAMPLES.pyb (what `tachyon receive` salvaged from a stream cut at
        byte CUT), reads, holding SAMPLES samples by the header and by the replay, which are
        the first SAMPLES of the COMPLETE file's in replay order.
    python3.15 capture_check.py counts FILE:SAMPLES...
        each FILE reads, holding SAMPLES samples by the header and by the replay.
    python3.15 capture_check.py rotated SALVAGED EXPECTED THREADS LATE_US PERIOD...
        each PERIOD file (PREFIX.SEQUENCE.START.pyb, in order) reads on its own, its header's
        start time is START, its samples lie before START + 1 s and no earlier than LATE_US +
        20 ms before START, and come from at most THREADS threads; the SALVAGED file of the
        killed period reads too; the samples of all of them add up to EXPECTED exactly. A ring
        drained after the one whose sample began the period brings samples from before its
        start: LATE_US is the longest two drain rounds in a row took in the run (a sample
        taken in a round was pushed after the round before read its ring); the 20 ms are for
        a handler's own time between reading the clock and pushing.
    python3.15 capture_check.py killed PERIOD_US RUN...
        for each RUN folder (a native_sigprof --rotate --ledger run killed from outside at a
        random instant, then `tachyon receive`d): every period file RUN/run.SEQUENCE.START.pyb
        reads on its own, in sequence from 0, its header starting at START, its samples before
        START + PERIOD_US; each period the writer told holds exactly the samples told for it
        (RUN/ledger), and the untold follow every told one (periods are told once the call
        that ended them returns: the killed call's and the live one are not); the period of
        the last flush that returned holds at least what that flush had written; and all of
        them hold no more than the handlers pushed and the rings kept.
    python3.15 capture_check.py addresses RAW NAMED WRITTEN SOURCE_DIR MODULE...
        (native_addresses' run, then `tachyon symbolize RAW -o NAMED`) both read, with
        WRITTEN samples each, in the same order with the same threads and times; every frame
        of RAW is a native frame (`BASE+0xADDRESS` in `PATH (build id HEX)`, or `0xADDRESS`
        in `[unknown]`); NAMED keeps none of the MODULEs' frames unnamed, and the frames
        NAMED has from them are exactly those binutils' `addr2line -f -i` gives for RAW's
        addresses in them; and the sample the probe raised is, innermost first, probe,
        mix_round inlined into hash_block, walk_blocks, native_lib_run and main, each at the
        line native_lib.c's PROBE marks (and native_addresses.c's) name.
    python3.15 capture_check.py same A B
        A and B read to the same samples: threads, times and frames.
    python3.15 capture_check.py unnamed FILE BASE
        FILE reads, and still has frames `BASE+0xADDRESS` (a module that was not found).

Prints one line of what it saw; exits 1 with the reason when a check fails.
"""
import collections
import os
import re
import subprocess
import sys

import _remote_debugging as rd


class Count:
    def __init__(self):
        self.threads = collections.Counter()
        self.leaf = collections.Counter()
        self.samples = 0

    def collect(self, stack_frames, timestamps_us=None):
        n = len(timestamps_us)
        for interp in stack_frames:
            for thread in interp.threads:
                self.samples += n
                self.threads[thread.thread_id] += n
                if thread.frame_info:
                    self.leaf[(thread.thread_id, thread.frame_info[0].funcname)] += n


def read(path):
    reader = rd.BinaryReader(path)
    count = Count()
    reader.replay(count, None)
    return reader.get_info(), count


def fail(why):
    print(f"FAILED: {why}")
    sys.exit(1)


def native(path, dropped, threads):
    info, count = read(path)
    if sorted(count.threads) != list(range(1, threads + 1)):
        fail(f"threads {sorted(count.threads)}, not 1..{threads}")
    written = info["sample_count"]
    error, missed = info["error_rate"], info["missed_samples"]
    if error is None or missed is None:
        fail(f"no stats trailer: {info}")
    # The drain's definitions (Drain::stats): error = refused / taken, missed = dropped / all.
    taken = round(written / (1 - error / 100))
    everything = round(taken / (1 - missed / 100))
    recovered = everything - taken
    print(f"{path}: {written} samples in {len(count.threads)} threads; missed_samples {missed:.4f} % "
          f"and error_rate {error:.4f} % of {written} written = {recovered} dropped (the program counted {dropped})")
    if recovered != dropped:
        fail(f"the file says {recovered} samples were dropped, the program counted {dropped}")
    if dropped == 0:
        fail("nothing was dropped: the ring was meant to overflow")


def leaf_split(count, threads, heavy, light):
    """The samples ending in HEAVY and in LIGHT overall, and each thread's split as text."""
    total_h = sum(n for (t, f), n in count.leaf.items() if f == heavy)
    total_l = sum(n for (t, f), n in count.leaf.items() if f == light)
    parts = []
    for t in range(1, threads + 1):
        h, l = count.leaf[(t, heavy)], count.leaf[(t, light)]
        parts.append(f"thread {t} {h}:{l}" + (f" = {h / l:.3f}" if l else ""))
    return total_h, total_l, "; ".join(parts)


def read_all(path, threads, written):
    """The file read by CPython, every thread 1..THREADS present and WRITTEN samples in it."""
    info, count = read(path)
    if sorted(count.threads) != list(range(1, threads + 1)):
        fail(f"threads {sorted(count.threads)}, not 1..{threads}")
    if count.samples != written or info["sample_count"] != written:
        fail(f"replay {count.samples}, header {info['sample_count']}, the writer wrote {written}")
    return count


def split(path, threads, written, heavy, light, ratio, tolerance):
    count = read_all(path, threads, written)
    total_h, total_l, parts = leaf_split(count, threads, heavy, light)
    for t in range(1, threads + 1):
        if count.leaf[(t, heavy)] == 0 or count.leaf[(t, light)] == 0:
            fail(f"thread {t}: no sample in {heavy} or in {light}")
    print(f"{path}: {count.samples} samples; {heavy}:{light} overall {total_h}:{total_l} = "
          f"{total_h / total_l:.4f} (want {ratio} ± {tolerance:.1%}); {parts}")
    if abs(total_h / total_l / ratio - 1) > tolerance:
        fail(f"the overall split is not within {tolerance:.1%} of {ratio}")


def timed(path, threads, written, source, heavy, light, measured):
    count = read_all(path, threads, written)
    _, samples = stacks(path)
    foreign = {(f[0], f[1]) for _, _, frames in samples for f in frames if os.path.basename(f[1]) != source}
    if foreign:
        fail(f"frames not of {source}: {sorted(foreign)[:5]}")
    total_h, total_l, parts = leaf_split(count, threads, heavy, light)
    if total_h == 0 or total_l == 0:
        fail(f"{heavy} {total_h} samples, {light} {total_l}: both run in every round")
    print(f"{path}: {count.samples} samples, every frame of {source}; {heavy}:{light} {total_h}:{total_l} = "
          f"{total_h / total_l:.3f}, the threads' CPU clocks {measured:.3f} (not checked: it depends on "
          f"the machine); {parts}")


def salvaged(path, at_least):
    info, count = read(path)
    print(f"{path}: CPython reads {count.samples} samples in {len(count.threads)} threads "
          f"(header says {info['sample_count']}); at least {at_least} were flushed before the kill")
    if count.samples != info["sample_count"]:
        fail("the replay and the header disagree")
    if count.samples < at_least:
        fail(f"{count.samples} < {at_least}")


class Sequence:
    def __init__(self):
        self.samples = []

    def collect(self, stack_frames, timestamps_us=None):
        for interp in stack_frames:
            for thread in interp.threads:
                stack = tuple(f.funcname for f in thread.frame_info)
                self.samples.extend((thread.thread_id, t, stack) for t in timestamps_us)


def sequence(path):
    """The file's header info and its samples, (thread, timestamp, stack) in replay order."""
    reader = rd.BinaryReader(path)
    seq = Sequence()
    reader.replay(seq, None)
    return reader.get_info(), seq.samples


def period(path, seq, period_us):
    """A period file PREFIX.SEQUENCE.START.pyb read on its own: its SEQUENCE is `seq`, its
    header starts at START, replay and header count alike, and no sample is at or past START +
    `period_us` (the writer's rule). Its start and samples."""
    _, number, start, _ = path.rsplit(".", 3)
    if int(number) != seq:
        fail(f"{path}: period {seq} expected")
    info, samples = sequence(path)
    if info["start_time_us"] != int(start):
        fail(f"{path}: the header starts at {info['start_time_us']}")
    if len(samples) != info["sample_count"]:
        fail(f"{path}: replay {len(samples)}, header {info['sample_count']}")
    if samples and max(t for _, t, _ in samples) >= int(start) + period_us:
        fail(f"{path}: a sample at {max(t for _, t, _ in samples)}, past its period")
    return int(start), samples


def rotated(salvaged_path, expected, threads, late_us, periods):
    total = 0
    seen = set()
    early = 0
    for seq, path in enumerate(periods):
        start, samples = period(path, seq, 1_000_000)
        if not samples:
            fail(f"{path}: no samples")
        first = min(t for _, t, _ in samples)
        if first < start - late_us - 20_000:
            fail(f"{path}: a sample at {first}, {(start - first) / 1000:.1f} ms before its start: more than "
                 f"the {late_us / 1000:.1f} ms two drain rounds took, and 20 ms")
        early = max(early, start - first)
        in_file = {thread for thread, _, _ in samples}
        if len(in_file) > threads:
            fail(f"{path}: {len(in_file)} threads")
        seen |= in_file
        total += len(samples)
    info, count = read(salvaged_path)
    total += count.samples
    print(f"{len(periods)} rotated periods and the salvaged one read on their own: {total} samples "
          f"({count.samples} salvaged), {len(seen)} threads, the earliest sample {early / 1000:.1f} ms "
          f"before its period's start (two drain rounds took at most {late_us / 1000:.1f} ms); want {expected}")
    if total != expected:
        fail(f"{total} samples in the files, {expected} pushed, kept and flushed")


def ledger(path):
    """native_sigprof's ledger: threads, pushes, refusals, the last flush, the told periods."""
    import struct
    raw = open(path, "rb").read()
    words = struct.unpack(f"<{len(raw) // 8}Q", raw)
    if raw[:8] != b"TACHLEDG":
        fail(f"{path}: not a ledger")
    threads = words[1]
    attempts, full = sum(words[2:10]), sum(words[10:18])
    flushed = words[18] - 1 if words[18] else None
    told = words[19:]
    return threads, attempts, full, flushed, told


def killed(period_us, runs):
    import os
    periods_all = told_all = 0
    for run in runs:
        threads, attempts, full, flushed, told = ledger(os.path.join(run, "ledger"))
        paths = sorted(p for p in os.listdir(run) if p.startswith("run.") and p.endswith(".pyb"))
        if not paths:
            fail(f"{run}: no period files")
        total = 0
        untold = []
        for seq, name in enumerate(paths):
            path = os.path.join(run, name)
            # (How much earlier than START a sample can be depends on when the drain ran,
            # which no machine promises: not checked here.)
            _, samples = period(path, seq, period_us)
            if told[seq]:
                told_all += 1
                if untold:
                    fail(f"{path}: told, after period {untold[0]} was not")
                if len(samples) != told[seq] - 1:
                    fail(f"{path}: {len(samples)} samples, the writer told {told[seq] - 1}")
            else:
                # Periods are told in order once the call that ended them is done: those the
                # kill's call ended, and the live one, are not.
                untold.append(seq)
            if flushed is not None and flushed >> 32 == seq and len(samples) < (flushed & 0xFFFF_FFFF):
                fail(f"{path}: {len(samples)} samples, fewer than its last flush wrote ({flushed & 0xFFFF_FFFF})")
            total += len(samples)
        if total > attempts - full:
            fail(f"{run}: {total} samples in the files, more than the {attempts - full} pushed and kept")
        periods_all += len(paths)
    print(f"{len(runs)} killed runs: {periods_all} period files read on their own, {told_all} of them ended and "
          f"holding exactly the samples told, the last flushed at least what was flushed; no run "
          f"holds more samples than its handlers pushed and its rings kept")


def cuts(complete, paths):
    _, whole = sequence(complete)
    counts = []
    for path in paths:
        samples = int(path.rsplit("-", 1)[1].split(".")[0])
        info, got = sequence(path)
        if len(got) != samples or info["sample_count"] != samples:
            fail(f"{path}: replay {len(got)}, header {info['sample_count']}, want {samples}")
        if got != whole[:samples]:
            fail(f"{path}: not the first {samples} samples of the complete file")
        counts.append(samples)
    print(f"{len(paths)} distinct files salvaged from cuts each read, holding the first "
          f"{min(counts)} to {max(counts)} of the complete file's {len(whole)} samples")


def counts(pairs):
    for pair in pairs:
        path, want = pair.rsplit(":", 1)
        info, count = read(path)
        if count.samples != int(want) or info["sample_count"] != int(want):
            fail(f"{path}: replay {count.samples}, header {info['sample_count']}, want {want}")
    print(f"{len(pairs)} files read, each with the samples it should hold")


class Stacks:
    """Every sample as (thread, timestamp, frames), frames innermost first as
    (funcname, filename, lineno)."""

    def __init__(self):
        self.samples = []

    def collect(self, stack_frames, timestamps_us=None):
        for interp in stack_frames:
            for thread in interp.threads:
                frames = tuple((f.funcname, f.filename, max(f.location[0], 0) if f.location else 0)
                               for f in thread.frame_info)
                for t in timestamps_us:
                    self.samples.append((thread.thread_id, t, frames))


def stacks(path):
    reader = rd.BinaryReader(path)
    out = Stacks()
    reader.replay(out, None)
    return reader.get_info(), out.samples


NATIVE = re.compile(r"^(?P<base>[^/]+)\+0x(?P<address>[0-9a-f]+)$")
IN_FILE = re.compile(r"^(?P<path>/.*?)(?: \(build id (?P<id>[0-9a-f]+)\))?$")


def native_frame(funcname, filename):
    """(module path, address) of a native frame, (None, address) for one in no module."""
    if filename == "[unknown]" and re.fullmatch(r"0x[0-9a-f]+", funcname):
        return None, int(funcname, 16)
    m, f = NATIVE.match(funcname), IN_FILE.match(filename)
    if not m or not f or os.path.basename(f["path"]) != m["base"]:
        fail(f"not a native frame: {funcname} in {filename}")
    return f["path"], int(m["address"], 16)


def addr2line(module, addresses):
    """binutils' frames for each address: (function, file, line), innermost first; a function
    without debugging information (file `??`) is in the module, line 0."""
    out = subprocess.run(["addr2line", "-f", "-i", "-a", "-e", module] + [hex(a) for a in addresses],
                         check=True, capture_output=True, text=True).stdout.splitlines()
    frames, current = {}, None
    i = 0
    while i < len(out):
        if out[i].startswith("0x") and i + 1 < len(out) and not out[i + 1].startswith("0x"):
            current = int(out[i], 16)
            frames[current] = []
            i += 1
            continue
        function, where = out[i], out[i + 1]
        file, _, line = where.split(" (discriminator")[0].rpartition(":")
        if function != "??":
            file = module if file == "??" else file
            frames[current].append((function, file, int(line) if line.isdigit() else 0))
        i += 2
    return frames


def marked_lines(path):
    """Line of each `PROBE: NAME` mark in a source file."""
    lines = {}
    with open(path) as f:
        for number, text in enumerate(f, 1):
            m = re.search(r"PROBE: (\w+)", text)
            if m:
                lines[m[1]] = number
    return lines


def addresses(raw, named, written, source_dir, modules):
    # The frames name each module as /proc/self/maps does: its path with links resolved (the
    # test command's target/ may be a link into its build cache).
    modules = [os.path.realpath(m) for m in modules]
    raw_info, raw_samples = stacks(raw)
    _, named_samples = stacks(named)
    if not (len(raw_samples) == len(named_samples) == written == raw_info["sample_count"]):
        fail(f"{len(raw_samples)} samples raw, {len(named_samples)} named, {written} written")
    if [s[:2] for s in raw_samples] != [s[:2] for s in named_samples]:
        fail("the named file's threads or times differ from the raw file's")
    wanted = collections.defaultdict(set)
    for _, _, frames in raw_samples:
        for funcname, filename, _ in frames:
            module, address = native_frame(funcname, filename)
            if module in modules:
                wanted[module].add(address)
    if set(wanted) != set(modules):
        fail(f"no frame of {sorted(set(modules) - set(wanted))} sampled")
    # Compared: the frames of the test's own C sources (built with debugging information).
    # Where else a sample lands is up to the machine's timing (the statically linked C
    # library's Rust, named by symbol: demangled by us, not by addr2line), so frames outside
    # those sources are only required to be named (below).
    expected = set()
    for module, found in wanted.items():
        for chain in addr2line(module, sorted(found)).values():
            expected.update((f, os.path.basename(file), line) for f, file, line in chain
                            if os.path.dirname(file) == source_dir)
    sources = {os.path.basename(m) for m in modules}
    ours = set()
    for _, _, frames in named_samples:
        for funcname, filename, lineno in frames:
            base = NATIVE.match(funcname)
            if base and base["base"] in sources:
                fail(f"{funcname} left unnamed")
            if os.path.dirname(filename) == source_dir:
                ours.add((funcname, os.path.basename(filename), lineno))
    if ours != expected:
        fail(f"named frames differ from addr2line's: ours only {sorted(ours - expected)[:5]}, "
             f"addr2line's only {sorted(expected - ours)[:5]}")
    lib = marked_lines(os.path.join(source_dir, "native_lib.c"))
    want = [("mix_round", lib["mix_round"]), ("hash_block", lib["hash_block"]),
            ("walk_blocks", lib["walk_blocks"]), ("native_lib_run", lib["native_lib_run"])]
    probed = 0
    for _, _, frames in named_samples:
        names = [f[0] for f in frames]
        if "probe" not in names:
            continue
        at = names.index("probe")
        got = [(f[0], f[2]) for f in frames[at + 1:at + 5]]
        if got != want or frames[at + 5][0] != "main":
            fail(f"the probe's stack is {frames[at:at + 6]}, not probe, {want}, main")
        probed += 1
    if probed != 1:
        fail(f"{probed} samples hold the probe, not 1")
    print(f"{written} samples, {sum(len(a) for a in wanted.values())} addresses in {len(modules)} modules named "
          f"as addr2line names them ({len(expected)} distinct frames); the probe's stack: probe, "
          + ", ".join(f"{n}:{line}" for n, line in want) + ", main")


def same(a, b):
    _, first = stacks(a)
    _, second = stacks(b)
    if first != second:
        diff = next(i for i, (x, y) in enumerate(zip(first + [None], second + [None])) if x != y)
        fail(f"{a} and {b} differ from sample {diff}")
    print(f"{len(first)} samples alike")


def unnamed(path, base):
    _, samples = stacks(path)
    left = {f[0] for _, _, frames in samples for f in frames if f[0].startswith(base + "+0x")}
    if not left:
        fail(f"no {base}+0x… frame left in {path}")
    print(f"{len(samples)} samples; {len(left)} distinct {base}+0x… frames kept")


def main():
    what, path, *rest = sys.argv[1:]
    if what == "native":
        native(path, int(rest[0]), int(rest[1]))
    elif what == "split":
        split(path, int(rest[0]), int(rest[1]), rest[2], rest[3], float(rest[4]), float(rest[5]))
    elif what == "timed":
        timed(path, int(rest[0]), int(rest[1]), rest[2], rest[3], rest[4], float(rest[5]))
    elif what == "salvaged":
        salvaged(path, int(rest[0]))
    elif what == "counts":
        counts([path] + rest)
    elif what == "cuts":
        cuts(path, rest)
    elif what == "killed":
        killed(int(path), rest)
    elif what == "addresses":
        addresses(path, rest[0], int(rest[1]), rest[2], rest[3:])
    elif what == "same":
        same(path, rest[0])
    elif what == "unnamed":
        unnamed(path, rest[0])
    elif what == "rotated":
        rotated(path, int(rest[0]), int(rest[1]), int(rest[2]), rest[3:])
    else:
        fail(f"unknown check {what}")


if __name__ == "__main__":
    main()
