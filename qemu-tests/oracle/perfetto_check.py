"""Our Perfetto traces decoded with the trace protos the `perfetto` package ships.

usage: perfetto_check.py MANIFEST

Each manifest line is `NAME<TAB>TRACE<TAB>DUMP`: our `--to perfetto` of a profile and
`tachyon dump`'s JSON lines of it (one per sample, as CPython's reader returns them). The
trace must parse as `perfetto.protos.Trace`; its first packet must clear the sequence's
incremental state and carry the stack samples' defaults; every interned id must be defined
once, before its first use, on the one sequence; and the samples, in order, must be the
dump's: the same time (µs as ns), thread (its low 32 bits) and call stack (outermost frame
first: file, function, line), leaving out what every conversion leaves out (the profiler's
own `_sync_coordinator.py` frames, samples whose stack is then empty). Prints a line per
file and exits 1 if any differs.
"""

import json
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

import manifest_checks

CLEARED = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
NEEDS = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
HIDDEN_SUFFIX = "_sync_coordinator.py"


def expected(dump_path):
    """[(ns, tid, ((file, function, line), … outermost first))] of the dump."""
    samples = []
    with open(dump_path, encoding="utf-8") as f:
        for line in f:
            s = json.loads(line)
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
    return samples


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
    return samples


def check(name, trace_path, dump_path):
    want = expected(dump_path)
    try:
        got = decoded(trace_path)
    except Problem as e:
        return [f"{name}: {e}"]
    if got == want:
        print(f"ok {name}: {len(got)} samples")
        return []
    if len(got) != len(want):
        return [f"{name}: {len(got)} samples, the dump has {len(want)}"]
    i = next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)
    return [f"{name}: sample {i}: {got[i]} where the dump has {want[i]}"]


def main():
    return manifest_checks.run(sys.argv[1], check)


if __name__ == "__main__":
    sys.exit(main())
