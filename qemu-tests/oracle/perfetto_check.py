"""Our Perfetto traces decoded with the trace protos the `perfetto` package ships.

usage: perfetto_check.py MANIFEST

Each manifest line is `NAME<TAB>TRACE<TAB>DUMP`: our `--to perfetto` of a profile and
`tachyon dump`'s JSON lines of it (one per sample, as CPython's reader returns them). The
trace must parse as `perfetto.protos.Trace`; its first packet must clear the sequence's
incremental state and carry the stack samples' defaults; every interned id must be defined
once, before its first use, on the one sequence; and the samples, in order, must be the
dump's: the same time (µs as ns), thread (its low 32 bits) and call stack (outermost frame
first: file, function, line), leaving out what every conversion leaves out (the profiler's
own `_sync_coordinator.py` frames, samples whose stack is then empty). And the thread
states' slices must be the dump's: every track described (a thread's `tid`, a state's name)
before its first event, and on it one slice per stretch of that thread's samples in the
state — from its first sample in it to its first sample out of it, or to its last sample and
one interval — for CPython's status bits (GIL held 1, on CPU 2, GIL wanted 8, exception 16)
and for a stack in the collector (a frame `<GC>` or `gc_collect…`). Prints a line per file
and exits 1 if any differs.

A MOJO file's dump (lines with a `kind`: austin-python 2.4.0's samples, which the MOJO tests
show equal to it, plus the INVALID and kernel frames it leaves out) is put on the timeline as
`std-adapter/src/mojo/source.rs` documents: each thread (pid, iid, tid) has a clock from 0
that a sample advances by its time metric (by the `interval` metadata where it has none, as
in memory mode; never below 0) and the sample is at the clock's new time; its thread is the
tid read as hex; its frames are Austin's (outermost first; an INVALID frame `~:<invalid>`, a
kernel one of file `kernel`, a GC sample's `~:<GC>` innermost, as is a frame `~:<GC>` of
line 0); it is on CPU in `cpu` mode, and in `full` mode unless idle; each sample weighs the
`interval` metadata.
"""

import json
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

import manifest_checks

CLEARED = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
NEEDS = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
HIDDEN_SUFFIX = "_sync_coordinator.py"
# (bit, track name): the writer's STATES (std-adapter/src/perfetto/write.rs); 128 is a stack
# in the collector.
STATES = [(1, "holding the GIL"), (2, "on CPU"), (8, "waiting for the GIL"), (16, "handling an exception"),
          (128, "collecting garbage")]


def expected(lines):
    """[(ns, tid, ((file, function, line), … outermost first))] of a Tachyon file's dump
    lines, and each sample's state bits."""
    samples, states = [], []
    for s in lines:
        frames = []
        for filename, funcname, location, _opcode in s["frames"]:
            if filename.endswith(HIDDEN_SUFFIX):
                continue
            lineno = location[0] if location and location[0] > 0 else 0
            frames.append((filename, funcname, lineno))
        if frames:
            # Nanoseconds as a u64, saturated as our writer saturates them.
            ns = min(s["ts"] * 1000, 2**64 - 1)
            samples.append((ns, s["tid"] & 0xFFFFFFFF, tuple(reversed(frames))))
            gc = any("<GC>" in f[1] or "gc_collect" in f[1] for f in frames)
            states.append((s["status"] & 27) | (128 if gc else 0))
    return samples, states


def fnv1a(data):
    """A tid that is not hex, as `mojo::source::thread_id` hashes it."""
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) % 2**64
    return h


def mojo_thread(tid):
    if 0 < len(tid) <= 16:
        try:
            return int(tid, 16)
        except ValueError:
            pass
    return fnv1a(tid.encode())


def mojo_frame(f):
    """A dump frame as (file, function, line) in the trace."""
    if "invalid" in f:
        return ("~", "<invalid>", 0)
    if "kernel" in f:
        return ("kernel", f["kernel"], 0)
    if (f["filename"], f["scope"], f["line"]) == ("~", "<GC>", 0):
        return ("~", "<GC>", 0)
    return (f["filename"], f["scope"], min(f["line"], 2**31 - 1))


def expected_mojo(lines):
    """`expected` for a MOJO dump's lines; also the trace's sample weight (ns)."""
    samples, states, clocks = [], [], {}
    mode, interval = "", 0
    for s in lines:
        if s["kind"] == "metadata":
            if s["key"] == "mode":
                mode = s["value"]
            elif s["key"] == "interval":
                interval = int(s["value"].strip() or 0)
            continue
        tid = mojo_thread(s["tid"])
        key = (s["pid"], s["iid"] or 0, tid)
        step = s["time"] if s["time"] is not None else interval
        clocks[key] = max(clocks.get(key, 0) + step, 0)
        frames = [mojo_frame(f) for f in s["frames"]]
        if s["gc"]:
            frames.append(("~", "<GC>", 0))
        if not frames:
            continue
        samples.append((min(clocks[key] * 1000, 2**64 - 1), tid & 0xFFFFFFFF, tuple(frames)))
        on_cpu = mode == "cpu" or (mode == "full" and not s["idle"])
        gc = any("<GC>" in f[1] or "gc_collect" in f[1] for f in frames)
        states.append((2 if on_cpu else 0) | (128 if gc else 0))
    return samples, states, interval * 1000


def expected_slices(samples, states, interval_ns):
    """{(tid, state name): [(begin ns, end ns), …]} as the module's docs say."""
    open_at, last, slices = {}, {}, {}
    for (ns, tid, _), state in zip(samples, states):
        for bit, name in STATES:
            key = (tid, name)
            if state & bit and key not in open_at:
                open_at[key] = ns
            elif not state & bit and key in open_at:
                slices.setdefault(key, []).append((open_at.pop(key), ns))
        last[tid] = ns
    for (tid, name), begin in open_at.items():
        slices.setdefault((tid, name), []).append((begin, min(last[tid] + interval_ns, 2**64 - 1)))
    return slices


class Problem(Exception):
    pass


def decoded(trace_path):
    """The trace's samples as `expected` gives them, after checking its interning."""
    trace = pb.Trace()
    with open(trace_path, "rb") as f:
        trace.ParseFromString(f.read())
    packets = trace.packet
    if not packets:
        raise Problem("no packets")
    first = packets[0]
    if not (first.sequence_flags & CLEARED and first.first_packet_on_sequence):
        raise Problem("the first packet does not clear the sequence's incremental state")
    defaults = first.trace_packet_defaults.stack_sample_defaults
    if not (defaults.source and defaults.primary_descriptor.name
            and defaults.primary_descriptor.unit == pb.StackSample.UNIT_NANOSECONDS):
        raise Problem(f"no stack sample defaults: {first}")
    tables = {k: {} for k in ("function_names", "source_paths", "mapping_paths", "mappings", "frames", "callstacks")}
    samples, weights = [], set()
    tracks, slices, open_at = {}, {}, {}
    for n, packet in enumerate(packets):
        if packet.trusted_packet_sequence_id != 1:
            raise Problem(f"packet {n}: sequence {packet.trusted_packet_sequence_id}")
        if n and packet.sequence_flags != NEEDS:
            raise Problem(f"packet {n}: sequence flags {packet.sequence_flags}")
        for table, entries in tables.items():
            for entry in getattr(packet.interned_data, table):
                if entry.iid == 0 or entry.iid in entries:
                    raise Problem(f"packet {n}: {table} id {entry.iid} defined again or zero")
                entries[entry.iid] = entry

        def known(table, iid, what):
            if iid not in tables[table]:
                raise Problem(f"packet {n}: {what} uses {table} id {iid}, not defined before")
            return tables[table][iid]

        if packet.HasField("track_descriptor"):
            d = packet.track_descriptor
            if d.uuid in tracks:
                raise Problem(f"packet {n}: track {d.uuid} described again")
            tracks[d.uuid] = (d.thread.tid & 0xFFFFFFFF, d.name)
            continue
        if packet.HasField("track_event"):
            e = packet.track_event
            if e.track_uuid not in tracks:
                raise Problem(f"packet {n}: an event on track {e.track_uuid}, not described before")
            key = tracks[e.track_uuid]
            if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN and key not in open_at and e.name == key[1]:
                open_at[key] = packet.timestamp
            elif e.type == pb.TrackEvent.TYPE_SLICE_END and key in open_at:
                slices.setdefault(key, []).append((open_at.pop(key), packet.timestamp))
            else:
                raise Problem(f"packet {n}: {e} on {key}, open: {key in open_at}")
            continue
        if not packet.HasField("stack_sample"):
            if n:
                raise Problem(f"packet {n}: not a stack sample")
            continue
        sample = packet.stack_sample
        frames = []
        for frame_id in known("callstacks", sample.callstack_iid, "a sample").frame_ids:
            frame = known("frames", frame_id, "a call stack")
            name = known("function_names", frame.function_name_id, "a frame").str.decode()
            path = known("source_paths", frame.source_path_iid, "a frame").str.decode() if frame.source_path_iid else ""
            if frame.mapping_id:
                mapping = known("mappings", frame.mapping_id, "a frame")
                for p in mapping.path_string_ids:
                    known("mapping_paths", p, "a mapping")
            frames.append((path, name, frame.line_number))
        weights.add(sample.primary_weight)
        samples.append((packet.timestamp, sample.task_context.tid, tuple(frames)))
    if len(weights) > 1 or 0 in weights:
        raise Problem(f"sample weights {sorted(weights)[:5]}")
    if open_at:
        raise Problem(f"slices never ended: {sorted(open_at)[:3]}")
    return samples, slices, (weights.pop() if weights else 0)


def check(name, trace_path, dump_path):
    with open(dump_path, encoding="utf-8") as f:
        lines = [json.loads(line) for line in f]
    # A MOJO dump's lines have a `kind` (metadata or sample); a Tachyon dump's do not.
    if lines and "kind" in lines[0]:
        want, states, weight_ns = expected_mojo(lines)
    else:
        (want, states), weight_ns = expected(lines), None
    try:
        got, slices, interval_ns = decoded(trace_path)
    except Problem as e:
        return [f"{name}: {e}"]
    if weight_ns is not None and got and interval_ns != weight_ns:
        return [f"{name}: samples weigh {interval_ns} ns, the interval is {weight_ns} ns"]
    if got == want:
        want_slices = expected_slices(want, states, interval_ns)
        if slices != want_slices:
            keys = sorted(set(slices) | set(want_slices))
            k = next(k for k in keys if slices.get(k) != want_slices.get(k))
            return [f"{name}: slices of {k}: {slices.get(k, [])[:4]}…, the dump's {want_slices.get(k, [])[:4]}…"]
        print(f"ok {name}: {len(got)} samples, {sum(map(len, slices.values()))} state slices on {len(slices)} tracks")
        return []
    if len(got) != len(want):
        return [f"{name}: {len(got)} samples, the dump has {len(want)}"]
    i = next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)
    return [f"{name}: sample {i}: {got[i]} where the dump has {want[i]}"]


def main():
    return manifest_checks.run(sys.argv[1], check)


if __name__ == "__main__":
    sys.exit(main())
