//! The messages of Perfetto's trace format this crate writes, as prost encodes them
//! (`protos/perfetto/trace/trace_packet.proto`, `profiling/profile_common.proto`,
//! `profiling/stack_sample.proto`, `track_event/track_descriptor.proto`,
//! `track_event/track_event.proto` and the files they import; field numbers as the
//! `perfetto` package 0.59.1 on the Python index compiles them). Fields this crate never
//! sets are left out; a oneof member is an optional field of its own on the wire. Perfetto
//! writes proto2: repeated numbers are unpacked, as its decoders read them.

use prost::Message;

/// `TracePacket.sequence_flags`: the packet starts the sequence's interned state afresh.
pub const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
/// `TracePacket.sequence_flags`: the packet uses the sequence's interned state.
pub const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;

/// `Frame.Kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum FrameKind {
    /// Machine code.
    Native = 1,
    /// An interpreter's frame (Python).
    Interpreted = 3,
    /// The garbage collector.
    Gc = 5,
}

/// `StackSample.Unit.UNIT_NANOSECONDS`.
pub const UNIT_NANOSECONDS: i32 = 1;

/// `TrackEvent.Type.TYPE_SLICE_BEGIN`.
pub const SLICE_BEGIN: i32 = 1;
/// `TrackEvent.Type.TYPE_SLICE_END`.
pub const SLICE_END: i32 = 2;

/// `Trace`'s one field: each packet is written as this field, one after another.
pub const TRACE_PACKET_FIELD: u32 = 1;

/// `TracePacket`.
#[derive(Clone, PartialEq, Message)]
pub struct TracePacket {
    /// Nanoseconds, on the trace's default clock.
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    /// The sequence the packet belongs to (interned ids are per sequence).
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    /// A slice's beginning or end on a track.
    #[prost(message, optional, tag = "11")]
    pub track_event: Option<TrackEvent>,
    /// Interned entries defined by this packet.
    #[prost(message, optional, tag = "12")]
    pub interned_data: Option<InternedData>,
    /// `SEQ_*` flags.
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
    /// Defaults for the sequence's later packets.
    #[prost(message, optional, tag = "59")]
    pub trace_packet_defaults: Option<TracePacketDefaults>,
    /// A track, described before its first event.
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
    /// The first packet the writer put on its sequence.
    #[prost(bool, optional, tag = "87")]
    pub first_packet_on_sequence: Option<bool>,
    /// A sampled call stack.
    #[prost(message, optional, tag = "135")]
    pub stack_sample: Option<StackSample>,
}

/// `TracePacketDefaults`.
#[derive(Clone, PartialEq, Message)]
pub struct TracePacketDefaults {
    /// Defaults of the stack samples.
    #[prost(message, optional, tag = "100")]
    pub stack_sample_defaults: Option<StackSampleDefaults>,
}

/// `StackSampleDefaults`.
#[derive(Clone, PartialEq, Message)]
pub struct StackSampleDefaults {
    /// What took the samples.
    #[prost(string, optional, tag = "1")]
    pub source: Option<String>,
    /// What a sample's `primary_weight` counts.
    #[prost(message, optional, tag = "2")]
    pub primary_descriptor: Option<CounterDescriptor>,
}

/// `StackSample.CounterDescriptor`.
#[derive(Clone, PartialEq, Message)]
pub struct CounterDescriptor {
    /// Its name.
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    /// Its unit (`UNIT_*`).
    #[prost(int32, optional, tag = "3")]
    pub unit: Option<i32>,
}

/// `StackSample`.
#[derive(Clone, PartialEq, Message)]
pub struct StackSample {
    /// The thread sampled.
    #[prost(message, optional, tag = "1")]
    pub task_context: Option<TaskContext>,
    /// The interned call stack.
    #[prost(uint64, optional, tag = "6")]
    pub callstack_iid: Option<u64>,
    /// The primary counter's value for this sample.
    #[prost(uint64, optional, tag = "11")]
    pub primary_weight: Option<u64>,
}

/// `StackSample.TaskContext`.
#[derive(Clone, PartialEq, Message)]
pub struct TaskContext {
    /// Process id.
    #[prost(uint32, optional, tag = "2")]
    pub pid: Option<u32>,
    /// Thread id.
    #[prost(uint32, optional, tag = "3")]
    pub tid: Option<u32>,
}

/// `InternedData`: entries a packet defines for its sequence, each with its own id.
#[derive(Clone, PartialEq, Message)]
pub struct InternedData {
    /// Function names.
    #[prost(message, repeated, tag = "5")]
    pub function_names: Vec<InternedString>,
    /// Frames.
    #[prost(message, repeated, tag = "6")]
    pub frames: Vec<Frame>,
    /// Call stacks.
    #[prost(message, repeated, tag = "7")]
    pub callstacks: Vec<Callstack>,
    /// Paths of mapped files.
    #[prost(message, repeated, tag = "17")]
    pub mapping_paths: Vec<InternedString>,
    /// Source file paths.
    #[prost(message, repeated, tag = "18")]
    pub source_paths: Vec<InternedString>,
    /// Mapped files.
    #[prost(message, repeated, tag = "19")]
    pub mappings: Vec<Mapping>,
}

/// `InternedString`.
#[derive(Clone, PartialEq, Message)]
pub struct InternedString {
    /// Its id.
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    /// Its bytes.
    #[prost(bytes = "vec", optional, tag = "2")]
    pub str: Option<Vec<u8>>,
}

/// `Frame`.
#[derive(Clone, PartialEq, Message)]
pub struct Frame {
    /// Its id.
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    /// Interned function name.
    #[prost(uint64, optional, tag = "2")]
    pub function_name_id: Option<u64>,
    /// Interned mapping (native frames).
    #[prost(uint64, optional, tag = "3")]
    pub mapping_id: Option<u64>,
    /// Offset of the address in its mapping.
    #[prost(uint64, optional, tag = "4")]
    pub rel_pc: Option<u64>,
    /// Interned source path.
    #[prost(uint64, optional, tag = "5")]
    pub source_path_iid: Option<u64>,
    /// Line in the source.
    #[prost(uint32, optional, tag = "6")]
    pub line_number: Option<u32>,
    /// [`FrameKind`].
    #[prost(int32, optional, tag = "7")]
    pub kind: Option<i32>,
}

/// `Callstack`.
#[derive(Clone, PartialEq, Message)]
pub struct Callstack {
    /// Its id.
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    /// Interned frames, outermost first ("bottom frame first").
    #[prost(uint64, repeated, packed = "false", tag = "2")]
    pub frame_ids: Vec<u64>,
}

/// `Mapping`.
#[derive(Clone, PartialEq, Message)]
pub struct Mapping {
    /// Its id.
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    /// Offset in the file of `start`.
    #[prost(uint64, optional, tag = "3")]
    pub start_offset: Option<u64>,
    /// First address.
    #[prost(uint64, optional, tag = "4")]
    pub start: Option<u64>,
    /// One past the last address.
    #[prost(uint64, optional, tag = "5")]
    pub end: Option<u64>,
    /// Interned path components (`mapping_paths`).
    #[prost(uint64, repeated, packed = "false", tag = "7")]
    pub path_string_ids: Vec<u64>,
}

/// `TrackDescriptor`: a track of slices, here one thread's state.
#[derive(Clone, PartialEq, Message)]
pub struct TrackDescriptor {
    /// Its id, which events name.
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    /// Its name.
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    /// The thread it belongs to.
    #[prost(message, optional, tag = "4")]
    pub thread: Option<ThreadDescriptor>,
}

/// `ThreadDescriptor`.
#[derive(Clone, PartialEq, Message)]
pub struct ThreadDescriptor {
    /// Process id.
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// Thread id.
    #[prost(int64, optional, tag = "2")]
    pub tid: Option<i64>,
}

/// `TrackEvent`: here, a slice's beginning (with its name) or end.
#[derive(Clone, PartialEq, Message)]
pub struct TrackEvent {
    /// `SLICE_BEGIN` or `SLICE_END`.
    #[prost(int32, optional, tag = "9")]
    pub r#type: Option<i32>,
    /// The track.
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    /// The slice's name.
    #[prost(string, optional, tag = "23")]
    pub name: Option<String>,
}
