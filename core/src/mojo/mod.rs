//! Austin's MOJO format, as Austin 3.7 and 4.0 write it and austin-python reads it
//! (feature `mojo`).
//!
//! # Wire format
//!
//! `"MOJ"`, a [`varint`] version, then events to the end of the file: an event id byte and
//! its fields, varints and NUL-terminated strings. No lengths, no index, no end marker, so a
//! writer only appends (a pipe, a UART) and a reader streams.
//!
//! | id | event | fields |
//! |---|---|---|
//! | 1 | METADATA | key string, value string |
//! | 2 | STACK | pid, iid (v3+), tid string: a sample of this thread begins |
//! | 3 | FRAME | key, filename key, scope key, line (v2+: line_end, column, column_end) |
//! | 4 | FRAME_INVALID | — |
//! | 5 | FRAME_REF | frame key: the sample's next frame, root first |
//! | 6 | FRAME_KERNEL | symbol string |
//! | 7 | GC | — |
//! | 8 | IDLE | — |
//! | 9 | METRIC_TIME | µs |
//! | 10 | METRIC_MEMORY | signed bytes |
//! | 11 | STRING | key, value string |
//! | 12 | STRING_REF | key (defined, never written by Austin 3.7/4.0) |
//! | 13 | STACK_REPEAT (v4) | — : the Python frames of the thread's previous sample |
//! | 14 | TASK_STACK (v4) | task key, name key, frame count: the next that many FRAME_REFs are an asyncio task's coroutine stack, not the sample's |
//! | 15 | TASK_WAITER (v4) | task key, waiter key |
//! | 16 | TASK_RUNNING (v4) | task key: the task the sample's thread runs |
//!
//! Versions 1 to 4 are read (v4 is upstream Austin's current one); the events of v4 are
//! accepted in any version, as austin-python 2.4.0 accepts them. The task events are as
//! austin-python 2.4.0, the current reader, reads them: TASK_STACK has a third field, the
//! count of frame references that follow it, and event 16 names the running task (the
//! format research described TASK_STACK with two fields and no event 16; the real reader
//! wins). Keys are u64: frame keys use
//! all 64 bits (`u64::MAX` for an instruction offset of −1). String and frame keys belong to
//! the pid of the last STACK. [`Reader`] yields events as they are; [`Tables`] holds the
//! string and frame definitions per pid in the caller's storage, as the real readers resolve
//! them. [`Writer`] appends events in Austin's shortest varints, so a real file re-encodes to
//! its own bytes.

mod reader;
pub mod samples;
pub mod tables;
pub mod varint;
mod writer;

pub use reader::{Reader, MIN_WINDOW};
pub use samples::{
    Frame, ItemSlot, Problem, Sample, SampleError, SampleLimits, SampleResource, SampleStorage, Samples, ThreadSlot,
};
pub use tables::{FrameNames, FrameSlot, Limits, StringSlot, TableError, TableResource, Tables};
pub use writer::{WriteError, Writer};

/// The version Austin 3.7 and 4.0 write.
pub const AUSTIN_VERSION: u8 = 3;

/// The newest version read and written (upstream Austin's: STACK_REPEAT and task events).
pub const LATEST_VERSION: u8 = 4;

/// The file's magic.
pub const MAGIC: &[u8; 3] = b"MOJ";

/// String key 1 stands for `"<unknown>"` without a definition (both real readers say so).
pub const UNKNOWN_STRING_KEY: u64 = 1;

/// A FRAME's fields: string keys for its file and scope, and its source span (version 1
/// files have no `line_end`, `column`, `column_end`: read as 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FrameDef {
    /// The frame's key.
    pub key: u64,
    /// String key of its file name.
    pub filename: u64,
    /// String key of its scope (function) name.
    pub scope: u64,
    /// First line.
    pub line: u64,
    /// Last line (v2+).
    pub line_end: u64,
    /// First column (v2+).
    pub column: u64,
    /// Column after the last (v2+).
    pub column_end: u64,
}

/// One event; `S` is how its strings are held (`&[u8]` from [`Reader`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Event<S> {
    /// 1: a `key: value` fact about the run.
    Metadata {
        /// Key.
        key: S,
        /// Value.
        value: S,
    },
    /// 2: a sample of this thread begins.
    Stack {
        /// Process id.
        pid: u64,
        /// Interpreter id (0 before version 3).
        iid: u64,
        /// Thread id: Austin writes the native id in lowercase hex.
        tid: S,
    },
    /// 3: a frame's definition.
    Frame(FrameDef),
    /// 4: a frame Austin could not read.
    FrameInvalid,
    /// 5: the sample's next frame, by key, root first.
    FrameRef {
        /// Frame key.
        key: u64,
    },
    /// 6: a kernel frame (austinp `-k`), innermost last.
    FrameKernel {
        /// Symbol.
        symbol: S,
    },
    /// 7: the sample was taken during garbage collection.
    Gc,
    /// 8: the thread was idle (full mode).
    Idle,
    /// 9: the sample's time, µs (Austin never writes a negative one; readers accept it).
    Time(i64),
    /// 10: the sample's memory delta, bytes.
    Memory(i64),
    /// 11: a string's definition.
    String {
        /// Key.
        key: u64,
        /// Value.
        value: S,
    },
    /// 12: a string by key.
    StringRef {
        /// Key.
        key: u64,
    },
    /// 13 (v4): the Python frames of this thread's previous sample.
    StackRepeat,
    /// 14 (v4): an asyncio task's coroutine stack follows: the next `frames` FRAME_REFs
    /// (none: the task is gone).
    TaskStack {
        /// Task key.
        task: u64,
        /// String key of its name (0: unresolved, or the name given before).
        name: u64,
        /// How many FRAME_REFs that follow are the task's.
        frames: u64,
    },
    /// 15 (v4): a task waits on another.
    TaskWaiter {
        /// Task key.
        task: u64,
        /// The waiting task's key (0: none).
        waiter: u64,
    },
    /// 16 (v4): the task the sample's thread was running.
    TaskRunning {
        /// Task key.
        task: u64,
    },
}

impl<S> Event<S> {
    /// The event id byte.
    pub fn id(&self) -> u8 {
        match self {
            Event::Metadata { .. } => 1,
            Event::Stack { .. } => 2,
            Event::Frame(_) => 3,
            Event::FrameInvalid => 4,
            Event::FrameRef { .. } => 5,
            Event::FrameKernel { .. } => 6,
            Event::Gc => 7,
            Event::Idle => 8,
            Event::Time(_) => 9,
            Event::Memory(_) => 10,
            Event::String { .. } => 11,
            Event::StringRef { .. } => 12,
            Event::StackRepeat => 13,
            Event::TaskStack { .. } => 14,
            Event::TaskWaiter { .. } => 15,
            Event::TaskRunning { .. } => 16,
        }
    }

    /// The same event borrowing its strings.
    pub fn as_ref(&self) -> Event<&S> {
        match self {
            Event::Metadata { key, value } => Event::Metadata { key, value },
            Event::Stack { pid, iid, tid } => Event::Stack { pid: *pid, iid: *iid, tid },
            Event::Frame(d) => Event::Frame(*d),
            Event::FrameInvalid => Event::FrameInvalid,
            Event::FrameRef { key } => Event::FrameRef { key: *key },
            Event::FrameKernel { symbol } => Event::FrameKernel { symbol },
            Event::Gc => Event::Gc,
            Event::Idle => Event::Idle,
            Event::Time(t) => Event::Time(*t),
            Event::Memory(m) => Event::Memory(*m),
            Event::String { key, value } => Event::String { key: *key, value },
            Event::StringRef { key } => Event::StringRef { key: *key },
            Event::StackRepeat => Event::StackRepeat,
            Event::TaskStack { task, name, frames } => Event::TaskStack { task: *task, name: *name, frames: *frames },
            Event::TaskWaiter { task, waiter } => Event::TaskWaiter { task: *task, waiter: *waiter },
            Event::TaskRunning { task } => Event::TaskRunning { task: *task },
        }
    }

    /// The same event with its strings held another way.
    pub fn map<T>(self, mut f: impl FnMut(S) -> T) -> Event<T> {
        match self {
            Event::Metadata { key, value } => Event::Metadata { key: f(key), value: f(value) },
            Event::Stack { pid, iid, tid } => Event::Stack { pid, iid, tid: f(tid) },
            Event::Frame(d) => Event::Frame(d),
            Event::FrameInvalid => Event::FrameInvalid,
            Event::FrameRef { key } => Event::FrameRef { key },
            Event::FrameKernel { symbol } => Event::FrameKernel { symbol: f(symbol) },
            Event::Gc => Event::Gc,
            Event::Idle => Event::Idle,
            Event::Time(t) => Event::Time(t),
            Event::Memory(m) => Event::Memory(m),
            Event::String { key, value } => Event::String { key, value: f(value) },
            Event::StringRef { key } => Event::StringRef { key },
            Event::StackRepeat => Event::StackRepeat,
            Event::TaskStack { task, name, frames } => Event::TaskStack { task, name, frames },
            Event::TaskWaiter { task, waiter } => Event::TaskWaiter { task, waiter },
            Event::TaskRunning { task } => Event::TaskRunning { task },
        }
    }
}

impl<S: AsRef<[u8]>> Event<S> {
    /// The same event with its strings as bytes (to write one held with owned strings).
    pub fn as_bytes(&self) -> Event<&[u8]> {
        self.as_ref().map(|s| s.as_ref())
    }
}

/// A rule of the format a file broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Rule {
    /// The file does not start with `"MOJ"`.
    NotMojo,
    /// A version outside 1..=4 (austin-python misreads version 0 as 2).
    Version {
        /// The version.
        version: u64,
    },
    /// An event id outside 1..=16.
    UnknownEvent {
        /// The id byte.
        id: u8,
    },
    /// A varint of more than 64 bits, or longer than ten bytes.
    VarintOverflow,
    /// A negative value where Austin writes only non-negative ones (keys, pids, lines), or a
    /// metric beyond ±2^63.
    OutOfRange,
    /// The file ends inside an event.
    Truncated,
}

impl core::fmt::Display for Rule {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Rule::NotMojo => f.write_str("not a MOJO file (no \"MOJ\" magic)"),
            Rule::Version { version } => write!(f, "MOJO version {version}: versions 1 to 4 are read"),
            Rule::UnknownEvent { id } => write!(f, "unknown event id {id}"),
            Rule::VarintOverflow => f.write_str("a varint of more than 64 bits"),
            Rule::OutOfRange => f.write_str("a value out of its field's range"),
            Rule::Truncated => f.write_str("the file ends inside an event"),
        }
    }
}

/// A read failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ReadError<E> {
    /// The source failed at this file offset.
    Io {
        /// File offset.
        offset: u64,
        /// The source's error.
        error: E,
    },
    /// The event at this offset broke a rule.
    Format {
        /// File offset of the event (of the header for header rules).
        offset: u64,
        /// The rule.
        rule: Rule,
    },
    /// An event longer than the caller's window (a capacity, not a format, limit: its
    /// strings are that long).
    TooLarge {
        /// File offset of the event.
        offset: u64,
        /// The window's length.
        window: usize,
    },
    /// A window shorter than [`MIN_WINDOW`].
    WindowTooSmall {
        /// Its length.
        len: usize,
        /// The least it must have.
        needed: usize,
    },
}

impl<E> From<crate::inbox::SourceError<E>> for ReadError<E> {
    fn from(e: crate::inbox::SourceError<E>) -> Self {
        ReadError::Io { offset: e.offset, error: e.error }
    }
}

impl<E: core::fmt::Debug> core::fmt::Display for ReadError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ReadError::Io { offset, error } => write!(f, "read error at offset {offset}: {error:?}"),
            ReadError::Format { offset, rule } => write!(f, "offset {offset}: {rule}"),
            ReadError::TooLarge { offset, window } => {
                write!(f, "offset {offset}: an event longer than the {window}-byte window")
            }
            ReadError::WindowTooSmall { len, needed } => write!(f, "a window of {len} bytes; at least {needed}"),
        }
    }
}

impl<E: core::fmt::Debug> core::error::Error for ReadError<E> {}
