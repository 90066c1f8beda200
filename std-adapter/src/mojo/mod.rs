//! Austin's MOJO files on std: a file's facts for `tachyon info`, its samples for `tachyon
//! dump`, and re-encoding (`--to mojo`) (here); the file as an input of the hub
//! ([`source`]); Austin's text written from MOJO events ([`austin`]); the hub's samples as
//! MOJO events, into a file or into Austin's text ([`write`](mod@write)); and speedscope JSON as Austin's
//! own pipeline makes it, which reads Austin's text ([`speedscope`]); a file read while
//! Austin writes it ([`growing`]).

pub mod austin;
pub mod growing;
pub mod source;
pub mod speedscope;
pub mod write;

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::io;

use serde_json::{json, Value};
use tachyon_core::mojo::{
    Event, Frame, Limits, ReadError, Reader, Sample, SampleError, SampleLimits, SampleStorage, Samples, Tables,
    WriteError, Writer,
};

use crate::memory::IoSink;

/// Window for events: Austin's longest are file paths and kernel symbols.
pub const WINDOW: usize = 1 << 20;

/// Most definitions and name bytes held ([`Tables::growable`]'s limits): a file defining
/// more is refused with a capacity error, in memory bounded by these.
pub const TABLE_LIMITS: Limits = Limits { string_slots: 1 << 26, frame_slots: 1 << 26, name_bytes: 1 << 30 };

/// Most a sample may hold ([`SampleStorage::growable`]'s limits).
pub const SAMPLE_LIMITS: SampleLimits =
    SampleLimits { frames: 1 << 20, text: 1 << 24, threads: 1 << 16, history_depth: 1024 };

/// Samples over storage that grows to [`TABLE_LIMITS`] and [`SAMPLE_LIMITS`], hashed with a
/// per-process key.
pub fn samples() -> Samples<'static> {
    Samples::new(
        Tables::growable(TABLE_LIMITS, crate::hash::IdHash::default().key()),
        SampleStorage::growable(SAMPLE_LIMITS),
    )
}

/// Why a MOJO file's samples could not be read.
#[derive(Debug)]
pub enum SamplesError<E> {
    /// The file broke a rule of the format, or reading it failed.
    Read(ReadError<E>),
    /// An event could not be part of a sample.
    Sample(SampleError),
    /// Writing failed.
    Write(io::Error),
}

impl<E: fmt::Debug> fmt::Display for SamplesError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SamplesError::Read(e) => write!(f, "{e}"),
            SamplesError::Sample(e) => write!(f, "{e}"),
            SamplesError::Write(e) => write!(f, "writing the output: {e}"),
        }
    }
}

impl<E: fmt::Debug> std::error::Error for SamplesError<E> {}

/// Calls `on` with each metadata item and finished sample of a MOJO file, in the order
/// austin-python 2.4.0's reader yields them (a sample when the next STACK or the end of the
/// file finishes it, so metadata between two STACKs comes before the first one's sample).
/// `on` is also given the file's version. Returns the samples.
pub fn for_each<R: embedded_io::Read, E>(
    source: R,
    on: impl FnMut(u8, Item<'_, '_>) -> Result<(), E>,
) -> Result<u64, Either<SamplesError<R::Error>, E>> {
    let mut window = vec![0u8; WINDOW];
    let mut reader = Reader::open(source, &mut window).map_err(|e| Either::Ours(SamplesError::Read(e)))?;
    for_each_in(&mut reader, on)
}

/// [`for_each`] over the events `reader` has left.
pub fn for_each_in<R: embedded_io::Read, E>(
    reader: &mut Reader<'_, R>,
    mut on: impl FnMut(u8, Item<'_, '_>) -> Result<(), E>,
) -> Result<u64, Either<SamplesError<R::Error>, E>> {
    let version = reader.version();
    let mut samples = samples();
    let mut count = 0u64;
    while let Some((offset, event)) = reader.next_item().map_err(|e| Either::Ours(SamplesError::Read(e)))? {
        if let Event::Metadata { key, value } = event {
            on(version, Item::Metadata { key, value }).map_err(Either::Theirs)?;
        }
        if samples.push(offset, &event).map_err(|e| Either::Ours(SamplesError::Sample(e)))? {
            count += 1;
            on(version, Item::Sample(samples.sample().expect("a finished sample"))).map_err(Either::Theirs)?;
        }
    }
    if samples.finish() {
        count += 1;
        on(version, Item::Sample(samples.sample().expect("a finished sample"))).map_err(Either::Theirs)?;
    }
    Ok(count)
}

/// What [`for_each`] hands over.
pub enum Item<'a, 's> {
    /// A metadata item.
    Metadata {
        /// Key.
        key: &'a [u8],
        /// Value.
        value: &'a [u8],
    },
    /// A finished sample.
    Sample(Sample<'s>),
}

/// An error of the reading, or of the caller's callback.
#[derive(Debug)]
pub enum Either<A, B> {
    /// Reading the file failed.
    Ours(A),
    /// The callback failed.
    Theirs(B),
}

/// `tachyon dump` for MOJO: one JSON line per metadata item and sample, in
/// [`for_each`]'s order, shaped as the project's dumps of austin-python 2.4.0's reader
/// (`qemu-tests/oracle/austin/samples.py`): `{"kind": "metadata", key, value}` and
/// `{"kind": "sample", pid, iid, tid, frames, time, memory, idle, gc, running_task}`, `iid`
/// null before version 3 and a frame's `line_end`, `column`, `column_end` null in version 1,
/// as that reader has them. Unlike that reader's samples, frames also hold the INVALID and
/// kernel markers where they came (`{"invalid": true}`, `{"kernel": symbol}`), as Austin's
/// text shows them. Returns the samples.
pub fn dump<R: embedded_io::Read, W: io::Write + ?Sized>(
    source: R,
    out: &mut W,
) -> Result<u64, SamplesError<R::Error>> {
    let mut out = io::BufWriter::with_capacity(1 << 16, out);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let result = for_each(source, |version, item| {
        let since = |min: u8, x: u64| (version >= min).then_some(x);
        let line = match item {
            Item::Metadata { key, value } => json!({"kind": "metadata", "key": text(key), "value": text(value)}),
            Item::Sample(s) => {
                let frames: Vec<Value> = s
                    .frames()
                    .map(|f| match f {
                        Frame::Defined(f) => json!({
                            "filename": text(f.filename), "scope": text(f.scope), "line": f.def.line,
                            "line_end": since(2, f.def.line_end), "column": since(2, f.def.column),
                            "column_end": since(2, f.def.column_end),
                        }),
                        Frame::Invalid => json!({"invalid": true}),
                        Frame::Kernel(k) => json!({"kernel": text(k)}),
                    })
                    .collect();
                json!({
                    "kind": "sample", "pid": s.pid, "iid": since(3, s.iid), "tid": text(s.tid), "frames": frames,
                    "time": s.time, "memory": s.memory, "idle": s.idle, "gc": s.gc, "running_task": s.running_task,
                })
            }
        };
        serde_json::to_writer(&mut out, &line).map_err(io::Error::from)?;
        io::Write::write_all(&mut out, b"\n")
    });
    let n = result.map_err(|e| match e {
        Either::Ours(e) => e,
        Either::Theirs(e) => SamplesError::Write(e),
    })?;
    io::Write::flush(&mut out).map_err(SamplesError::Write)?;
    Ok(n)
}

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
    while let Some((_, event)) = reader.next_item()? {
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
    while let Some((offset, event)) = reader.next_item().map_err(ReencodeError::Read)? {
        writer.write(&event).map_err(|error| ReencodeError::Write { offset, error })?;
    }
    writer.finish().map_err(|error| ReencodeError::Write { offset: reader.offset(), error })?;
    Ok(writer.events())
}
