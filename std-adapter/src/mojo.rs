//! Austin's MOJO files on std: a file's facts for `tachyon info`, and re-encoding (`--to mojo`).
//! Austin's text (`--to austin`) is [`crate::convert::austin`].

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::io;

use serde_json::{json, Value};
use tachyon_core::mojo::{Event, ReadError, Reader, WriteError, Writer};

use crate::memory::IoSink;

/// Window for events: Austin's longest are file paths and kernel symbols.
pub const WINDOW: usize = 1 << 20;

/// What `info` shows of a MOJO file: the version, the metadata (a key written twice shows
/// its last value, as the readers keep it), and from one pass over the events their count
/// by kind, the samples (STACK events), the processes and threads, and the definitions.
/// Memory grows with the threads only.
pub fn info<R: embedded_io::Read>(source: R, file_bytes: u64) -> Result<Value, ReadError<R::Error>> {
    let mut window = vec![0u8; WINDOW];
    let mut reader = Reader::open(source, &mut window)?;
    let version = reader.version();
    let mut metadata = serde_json::Map::new();
    let mut events: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut threads: HashSet<(u64, Vec<u8>)> = HashSet::new();
    let mut pids: HashSet<u64> = HashSet::new();
    while let Some((_, event)) = reader.next_event()? {
        *events.entry(name(&event)).or_insert(0) += 1;
        match event {
            Event::Metadata { key, value } => {
                let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                metadata.insert(text(key), json!(text(value)));
            }
            Event::Stack { pid, tid, .. } => {
                pids.insert(pid);
                threads.insert((pid, tid.to_vec()));
            }
            _ => {}
        }
    }
    Ok(json!({
        "file_bytes": file_bytes,
        "version": version,
        "metadata": metadata,
        "events": events,
        "samples": events.get("stack").copied().unwrap_or(0),
        "processes": pids.len(),
        "threads": threads.len(),
        "strings_defined": events.get("string").copied().unwrap_or(0),
        "frames_defined": events.get("frame").copied().unwrap_or(0),
    }))
}

/// The name `info` counts an event under.
fn name<S>(event: &Event<S>) -> &'static str {
    match event {
        Event::Metadata { .. } => "metadata",
        Event::Stack { .. } => "stack",
        Event::Frame(_) => "frame",
        Event::FrameInvalid => "frame_invalid",
        Event::FrameRef { .. } => "frame_ref",
        Event::FrameKernel { .. } => "frame_kernel",
        Event::Gc => "gc",
        Event::Idle => "idle",
        Event::Time(_) => "metric_time",
        Event::Memory(_) => "metric_memory",
        Event::String { .. } => "string",
        Event::StringRef { .. } => "string_ref",
        Event::StackRepeat => "stack_repeat",
        Event::TaskStack { .. } => "task_stack",
        Event::TaskWaiter { .. } => "task_waiter",
        Event::TaskRunning { .. } => "task_running",
    }
}

/// Why re-encoding failed.
#[derive(Debug)]
pub enum ReencodeError<E> {
    /// Reading the input failed.
    Read(ReadError<E>),
    /// The event at this input offset could not be written (a version 4 event into an older
    /// version), or the sink failed.
    Write {
        /// Input offset of the event.
        offset: u64,
        /// Why.
        error: WriteError<io::Error>,
    },
}

impl<E: fmt::Debug> fmt::Display for ReencodeError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReencodeError::Read(e) => write!(f, "{e}"),
            ReencodeError::Write { offset, error } => write!(f, "the event at input offset {offset}: {error}"),
        }
    }
}

impl<E: fmt::Debug> std::error::Error for ReencodeError<E> {}

/// Copies a MOJO file's events into `sink` in `version` (default: the input's): the input's
/// own bytes when the version is its own and it was written as Austin writes (shortest
/// varints); a FRAME keeps the fields the version has. Returns the events written.
pub fn reencode<R: embedded_io::Read, W: io::Write + ?Sized>(
    source: R,
    sink: &mut W,
    version: Option<u8>,
) -> Result<u64, ReencodeError<R::Error>> {
    let mut window = vec![0u8; WINDOW];
    let mut reader = Reader::open(source, &mut window).map_err(ReencodeError::Read)?;
    let version = version.unwrap_or(reader.version());
    let mut staging = vec![0u8; WINDOW + 64];
    let mut buffered = io::BufWriter::with_capacity(1 << 16, sink);
    let out = IoSink(&mut buffered);
    let mut writer =
        Writer::new(out, &mut staging, version).map_err(|error| ReencodeError::Write { offset: 0, error })?;
    while let Some((offset, event)) = reader.next_event().map_err(ReencodeError::Read)? {
        writer.write(&event).map_err(|error| ReencodeError::Write { offset, error })?;
    }
    writer.flush().map_err(|error| ReencodeError::Write { offset: reader.offset(), error })?;
    Ok(writer.events())
}
