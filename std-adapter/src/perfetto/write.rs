//! The trace made of the hub, packet by packet as the samples arrive (see the module's docs
//! for what it holds).

use std::io::{self, Write};

use prost::Message;

use super::proto::{
    Callstack, CounterDescriptor, Frame, FrameKind, InternedData, InternedString, Mapping, StackSample,
    StackSampleDefaults, TaskContext, TracePacket, TracePacketDefaults, SEQ_INCREMENTAL_STATE_CLEARED,
    SEQ_NEEDS_INCREMENTAL_STATE, TRACE_PACKET_FIELD, UNIT_NANOSECONDS,
};
use crate::hash::{SequenceIndex, StringIndex};
use crate::model::{Call, Collector, FrameTable, SourceInfo};

/// The one sequence every packet is on.
const SEQUENCE: u32 = 1;
/// `StackSampleDefaults.source`.
const SOURCE: &str = "tachyon";

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

    /// Flushes; the first I/O error met, if any.
    pub fn finish(mut self) -> io::Result<()> {
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
        }
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
