//! The trace made of the hub, packet by packet as the samples arrive (see the module's docs
//! for what it holds).

use std::io::{self, Write};

use prost::Message;

use super::proto::{
    Callstack, CounterDescriptor, Frame, FrameKind, InternedData, InternedString, Mapping, StackSample,
    StackSampleDefaults, TaskContext, ThreadDescriptor, TracePacket, TracePacketDefaults, TrackDescriptor, TrackEvent,
    SEQ_INCREMENTAL_STATE_CLEARED, SEQ_NEEDS_INCREMENTAL_STATE, SLICE_BEGIN, SLICE_END, TRACE_PACKET_FIELD,
    UNIT_NANOSECONDS,
};
use crate::hash::{IdMap, SequenceIndex, StringIndex};
use crate::model::{Call, Collector, FrameTable, SourceInfo};

/// The one sequence every packet is on.
const SEQUENCE: u32 = 1;
/// `StackSampleDefaults.source`.
const SOURCE: &str = "tachyon";

/// The thread states drawn as slices: CPython's `THREAD_STATUS_*` bits, and a bit of this
/// writer's own for a stack in the garbage collector (a frame `<GC>` or `gc_collect…`, as
/// CPython's collectors tell one).
pub const STATES: [(u8, &str); 5] = [
    (1 << 0, "holding the GIL"),
    (1 << 1, "on CPU"),
    (1 << 3, "waiting for the GIL"),
    (1 << 4, "handling an exception"),
    (GC, "collecting garbage"),
];
const GC: u8 = 1 << 7;
/// The status bits that are states.
const STATE_BITS: u8 = 1 | 2 | 8 | 16;
/// Track ids: this, the thread's number (first seen) and the state's.
const TRACK_UUID: u64 = 0x7ac4_0000_0000_0000;

/// A thread's slices so far: 16 bytes, as a profile may have a million threads.
#[derive(Debug, Clone, Copy)]
struct Thread {
    /// Its last sample's time, ns.
    last_ns: u64,
    /// The thread id's low 32 bits, all that Perfetto's `tid` of a sample holds.
    tid: u32,
    /// States whose slice is open, and states whose track is described.
    open: u8,
    described: u8,
}

/// Writes a Perfetto trace of the samples a source replays into it; [`PerfettoWriter::finish`]
/// ends it (an I/O error stops the writing and comes back there).
pub struct PerfettoWriter<W: Write> {
    out: W,
    error: Option<io::Error>,
    /// Each sample's weight: the sampling interval, ns.
    weight_ns: u64,
    /// Per frame of the hub's table: its interned frame (0: not yet).
    frames: Vec<u64>,
    frame_count: u64,
    /// Per mapping of the hub's table: its interned mapping (0: not yet).
    mappings: Vec<u64>,
    mapping_count: u64,
    // Interned ids are these indexes' numbers + 1 (0 is "none" in Perfetto's messages).
    function_names: StringIndex,
    source_paths: StringIndex,
    mapping_paths: StringIndex,
    /// Call stacks by the hub's frame ids, innermost first.
    callstacks: SequenceIndex,
    /// Threads, first seen first, and their numbers by `tid` (a thread is its id's low 32
    /// bits, as the samples' `tid` is); per interned call stack, whether it is in the
    /// collector (decided once, when the stack is first met).
    threads: Vec<Thread>,
    thread_of: IdMap<u32, u32>,
    stack_in_gc: Vec<bool>,
    /// What the next packet defines.
    pending: InternedData,
    packet: Vec<u8>,
}

impl<W: Write> PerfettoWriter<W> {
    /// A trace of `info`'s samples into `out`, its first packet written: a clean sequence,
    /// and the samples' defaults.
    pub fn new(out: W, info: &SourceInfo) -> Self {
        let mut writer = PerfettoWriter {
            out,
            error: None,
            weight_ns: info.sample_interval_us.saturating_mul(1000),
            frames: Vec::new(),
            frame_count: 0,
            mappings: Vec::new(),
            mapping_count: 0,
            function_names: StringIndex::default(),
            source_paths: StringIndex::default(),
            mapping_paths: StringIndex::default(),
            callstacks: SequenceIndex::new(),
            threads: Vec::new(),
            thread_of: IdMap::default(),
            stack_in_gc: Vec::new(),
            pending: InternedData::default(),
            packet: Vec::new(),
        };
        let defaults = StackSampleDefaults {
            source: Some(SOURCE.to_owned()),
            primary_descriptor: Some(CounterDescriptor {
                name: Some(format!("{} time", info.mode)),
                unit: Some(UNIT_NANOSECONDS),
            }),
        };
        writer.write(&TracePacket {
            trusted_packet_sequence_id: Some(SEQUENCE),
            sequence_flags: Some(SEQ_INCREMENTAL_STATE_CLEARED),
            first_packet_on_sequence: Some(true),
            trace_packet_defaults: Some(TracePacketDefaults { stack_sample_defaults: Some(defaults) }),
            ..TracePacket::default()
        });
        writer
    }

    /// Ends the slices still open (at each thread's last sample and one interval), flushes;
    /// the first I/O error met, if any.
    pub fn finish(mut self) -> io::Result<()> {
        for number in 0..self.threads.len() {
            let t = self.threads[number];
            let end = t.last_ns.saturating_add(self.weight_ns);
            for (k, &(bit, _)) in STATES.iter().enumerate() {
                if t.open & bit != 0 {
                    self.slice(number as u64, &t, k, SLICE_END, end);
                }
            }
        }
        match self.error.take() {
            Some(e) => Err(e),
            None => self.out.flush(),
        }
    }

    /// Writes `packet` as the `Trace` message's next `packet` field.
    fn write(&mut self, packet: &TracePacket) {
        if self.error.is_some() {
            return;
        }
        self.packet.clear();
        prost::encoding::encode_key(TRACE_PACKET_FIELD, prost::encoding::WireType::LengthDelimited, &mut self.packet);
        prost::encoding::encode_varint(packet.encoded_len() as u64, &mut self.packet);
        packet.encode_raw(&mut self.packet);
        if let Err(e) = self.out.write_all(&self.packet) {
            self.error = Some(e);
        }
    }

    /// A slice's beginning or end on thread `t`'s track of state `k`, the track described
    /// first if it is the first event on it.
    fn slice(&mut self, number: u64, t: &Thread, k: usize, kind: i32, ns: u64) {
        let (bit, name) = STATES[k];
        let uuid = TRACK_UUID | number << 3 | k as u64;
        if kind == SLICE_BEGIN && t.described & bit == 0 {
            self.write(&TracePacket {
                trusted_packet_sequence_id: Some(SEQUENCE),
                sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
                track_descriptor: Some(TrackDescriptor {
                    uuid: Some(uuid),
                    name: Some(name.to_owned()),
                    thread: Some(ThreadDescriptor { pid: None, tid: Some(i64::from(t.tid)) }),
                }),
                ..TracePacket::default()
            });
        }
        self.write(&TracePacket {
            timestamp: Some(ns),
            trusted_packet_sequence_id: Some(SEQUENCE),
            sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
            track_event: Some(TrackEvent {
                r#type: Some(kind),
                track_uuid: Some(uuid),
                name: (kind == SLICE_BEGIN).then(|| name.to_owned()),
            }),
            ..TracePacket::default()
        });
    }

    /// Opens and closes thread states' slices at the call's first sample (`in_gc`: its stack
    /// is in the collector).
    fn states(&mut self, call: &Call<'_>, in_gc: bool) {
        let (Some(&first), Some(&last)) = (call.timestamps_us().first(), call.timestamps_us().last()) else {
            return;
        };
        let state = (call.status & STATE_BITS) | if in_gc { GC } else { 0 };
        let tid = call.thread_id as u32;
        let next = self.threads.len() as u32;
        let number = *self.thread_of.entry(tid).or_insert(next);
        if number == next {
            self.threads.push(Thread { last_ns: 0, tid, open: 0, described: 0 });
        }
        let mut t = self.threads[number as usize];
        let at = first.saturating_mul(1000);
        for (k, &(bit, _)) in STATES.iter().enumerate() {
            if (t.open ^ state) & bit != 0 {
                let kind = if state & bit != 0 { SLICE_BEGIN } else { SLICE_END };
                self.slice(u64::from(number), &t, k, kind, at);
                if kind == SLICE_BEGIN {
                    t.described |= bit;
                }
            }
        }
        t.open = state;
        t.last_ns = last.saturating_mul(1000);
        self.threads[number as usize] = t;
    }

    /// A string's interned id in `table`, defined in the next packet if new.
    fn string(table: &mut StringIndex, pending: &mut Vec<InternedString>, s: &str) -> u64 {
        let known = table.strings().len();
        let id = table.id(s);
        let iid = u64::from(id) + 1;
        if id as usize == known {
            pending.push(InternedString { iid: Some(iid), str: Some(s.as_bytes().to_vec()) });
        }
        iid
    }

    /// Frame `id`'s interned frame.
    fn frame(&mut self, frames: &FrameTable, id: u32) -> u64 {
        let i = id as usize;
        if self.frames.len() <= i {
            self.frames.resize(frames.frames.len().max(i + 1), 0);
        }
        if self.frames[i] != 0 {
            return self.frames[i];
        }
        let frame = frames.frame(id);
        let name = Self::string(&mut self.function_names, &mut self.pending.function_names, &frame.funcname);
        let path = (!frame.filename.is_empty())
            .then(|| Self::string(&mut self.source_paths, &mut self.pending.source_paths, &frame.filename));
        let line = frame.location.map(|l| l.lineno).filter(|&l| l > 0).map(|l| l as u32);
        let kind = if frame.address.is_some() || frame.funcname == "<native>" {
            FrameKind::Native
        } else if frame.funcname == "<GC>" {
            FrameKind::Gc
        } else {
            FrameKind::Interpreted
        };
        let (mapping_id, rel_pc) = match (frame.address, frame.mapping) {
            (Some(address), Some(m)) => match frames.mappings.get(m as usize) {
                Some(mapping) => (
                    Some(self.mapping(frames, m)),
                    Some(address.wrapping_sub(mapping.start).wrapping_add(mapping.offset)),
                ),
                None => (None, None),
            },
            _ => (None, None),
        };
        self.frame_count += 1;
        let iid = self.frame_count;
        self.pending.frames.push(Frame {
            iid: Some(iid),
            function_name_id: Some(name),
            mapping_id,
            rel_pc,
            source_path_iid: path,
            line_number: line,
            kind: Some(kind as i32),
        });
        self.frames[i] = iid;
        iid
    }

    /// Mapping `m`'s interned mapping (`m` is an index into the table's mappings).
    fn mapping(&mut self, frames: &FrameTable, m: u32) -> u64 {
        let i = m as usize;
        if self.mappings.len() <= i {
            self.mappings.resize(frames.mappings.len().max(i + 1), 0);
        }
        if self.mappings[i] == 0 {
            let mapping = &frames.mappings[i];
            let path = Self::string(&mut self.mapping_paths, &mut self.pending.mapping_paths, &mapping.file);
            self.mapping_count += 1;
            self.pending.mappings.push(Mapping {
                iid: Some(self.mapping_count),
                start_offset: Some(mapping.offset),
                start: Some(mapping.start),
                end: Some(mapping.limit),
                path_string_ids: vec![path],
            });
            self.mappings[i] = self.mapping_count;
        }
        self.mappings[i]
    }
}

impl<W: Write> Collector for PerfettoWriter<W> {
    fn collect(&mut self, frames: &FrameTable, call: &Call<'_>) {
        if call.stack.is_empty() || self.error.is_some() {
            return;
        }
        let known = self.callstacks.len();
        let id = self.callstacks.id(call.stack);
        let stack = u64::from(id) + 1;
        if id as usize == known {
            let frame_ids = call.stack.iter().rev().map(|&id| self.frame(frames, id)).collect();
            self.pending.callstacks.push(Callstack { iid: Some(stack), frame_ids });
            // A `<GC>` frame, or `gc_collect…`, as CPython's collectors tell one.
            self.stack_in_gc.push(call.stack.iter().any(|&f| {
                let name = &frames.frame(f).funcname;
                name.contains("<GC>") || name.contains("gc_collect")
            }));
        }
        self.states(call, self.stack_in_gc[id as usize]);
        // What this call is the first to use rides in its first sample's packet.
        let mut interned = Some(std::mem::take(&mut self.pending)).filter(|d| *d != InternedData::default());
        for &t in call.timestamps_us() {
            self.write(&TracePacket {
                timestamp: Some(t.saturating_mul(1000)),
                trusted_packet_sequence_id: Some(SEQUENCE),
                sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
                interned_data: interned.take(),
                stack_sample: Some(StackSample {
                    task_context: Some(TaskContext { pid: None, tid: Some(call.thread_id as u32) }),
                    callstack_iid: Some(stack),
                    primary_weight: Some(self.weight_ns),
                }),
                ..TracePacket::default()
            });
        }
        // (A call without times writes no packet: its definitions wait for the next.)
        if let Some(unused) = interned {
            self.pending = unused;
        }
    }
}
