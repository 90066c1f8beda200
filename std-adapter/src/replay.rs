//! Replays a file's samples the way CPython 3.15.2's `BinaryReader.replay` feeds its
//! collectors, so that every conversion sees what CPython's `replay` command sees:
//!
//! - samples in file order, names decoded with `errors='replace'`;
//! - frames of the profiler's own `_sync_coordinator.py` removed (CPython's
//!   `filter_internal_frames`);
//! - grouped into *calls*: each FULL, SUFFIX or POP_PUSH record is one call, a REPEAT record one
//!   call per run of consecutive equal status bytes (spec 9.4), each with its stack once and
//!   the list of its timestamps. Counting collectors add the list's length; the Firefox
//!   profiler's state markers are taken once per call.
//!
//! Per-frame facts are computed once from the tables, which are complete before the first
//! sample, so the per-call work is on frame ids only, the per-sample work is decoding a
//! timestamp, and memory does not grow with the number of samples.

use std::collections::HashMap;
use std::sync::Arc;

use embedded_io::{Read, Seek};
use tachyon_core::reader::{Record, RunEntry, Tables};
use tachyon_core::tables::Location;
use tachyon_core::{ReadError, Reader};

/// Where CPython's profiler leaves its own frames; they are never shown.
const INTERNAL_FRAME_SUFFIXES: [&[u8]; 1] = [b"_sync_coordinator.py"];

/// One frame of the table, decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameInfo {
    /// File name (lossy UTF-8).
    pub filename: String,
    /// Function name (lossy UTF-8).
    pub funcname: String,
    /// Source span, `None` for synthetic frames.
    pub location: Option<Location>,
    /// Opcode, if captured.
    pub opcode: Option<u8>,
    /// Index into [`FrameTable::functions`]: frames with equal `(filename, lineno, funcname)`.
    pub function: u32,
    internal: bool,
}

/// First line, 0 when there is no location (CPython's `extract_lineno`).
pub fn extract_lineno(location: Option<Location>) -> i32 {
    location.map_or(0, |l| l.lineno)
}

/// Replays and re-encodes report progress every this many samples.
pub const PROGRESS_EVERY: u64 = 65_536;

/// The `(filename, lineno, funcname)` triple CPython's pstats, collapsed and flame-graph
/// collectors aggregate on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FunctionKey {
    /// File name.
    pub filename: String,
    /// First line (0 without a location).
    pub lineno: i32,
    /// Function name.
    pub funcname: String,
}

/// The frame table of a file, decoded once.
#[derive(Debug, Clone, Default)]
pub struct FrameTable {
    /// Indexed by frame id.
    pub frames: Vec<FrameInfo>,
    /// Distinct `(filename, lineno, funcname)` keys, in frame-table order.
    pub functions: Vec<FunctionKey>,
    any_internal: bool,
}

impl FrameTable {
    /// Decodes every frame of `tables`.
    pub fn new(tables: &Tables<'_>) -> FrameTable {
        let mut table = FrameTable::default();
        let mut index: HashMap<FunctionKey, u32> = HashMap::new();
        for id in 0..tables.frame_count() {
            // A frame naming a missing string keeps its slot, so that ids stay positions;
            // the reader rejects any sample that uses it (CPython checks lazily too).
            let resolved = u32::try_from(id).ok().and_then(|id| tables.frame(id));
            let (filename, funcname, location, opcode) =
                resolved.map_or((&b""[..], &b""[..], None, None), |f| (f.filename, f.funcname, f.location, f.opcode));
            let internal = INTERNAL_FRAME_SUFFIXES.iter().any(|s| filename.ends_with(s));
            let key = FunctionKey {
                filename: String::from_utf8_lossy(filename).into_owned(),
                lineno: extract_lineno(location),
                funcname: String::from_utf8_lossy(funcname).into_owned(),
            };
            let next = table.functions.len() as u32;
            let function = *index.entry(key.clone()).or_insert_with(|| {
                table.functions.push(key.clone());
                next
            });
            table.any_internal |= internal;
            table.frames.push(FrameInfo {
                filename: key.filename,
                funcname: key.funcname,
                location,
                opcode,
                function,
                internal,
            });
        }
        table
    }

    /// The frame of `id`.
    pub fn frame(&self, id: u32) -> &FrameInfo {
        &self.frames[id as usize]
    }

    /// `stack` without the profiler's own frames (copied into `scratch` only if it has any).
    pub fn visible<'a>(&self, stack: &'a [u32], scratch: &'a mut Vec<u32>) -> &'a [u32] {
        if !self.any_internal {
            return stack;
        }
        scratch.clear();
        scratch.extend(stack.iter().copied().filter(|&id| !self.frame(id).internal));
        scratch
    }
}

/// One CPython `collect()` call as a collector sees it: one thread with one status and one
/// stack, standing for the samples at `timestamps_us`. A FULL, SUFFIX or POP_PUSH record is a
/// call of one sample; a REPEAT record is one call per run of equal statuses (spec 9.4),
/// handed over in parts of at most [`CALL_PART`] timestamps so that memory stays bounded
/// whatever count a record declares.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// Timestamps of the samples, µs, in file order; never empty.
    pub timestamps_us: &'a [u64],
    /// Interpreter id.
    pub interpreter_id: u32,
    /// Thread id.
    pub thread_id: u64,
    /// Status flags.
    pub status: u8,
    /// Frame ids, innermost first, internal frames removed; may be empty.
    pub stack: &'a [u32],
    /// A further part of the call before it (same thread, status and stack): collectors
    /// that act once per call (the Firefox profiler's state markers) act on the first part.
    pub continued: bool,
}

impl Call<'_> {
    /// Samples this call stands for.
    pub fn samples(&self) -> u64 {
        self.timestamps_us.len() as u64
    }
}

/// Most timestamps in one part of a call.
pub const CALL_PART: usize = 4096;

/// Something that consumes replayed samples, a call at a time.
pub trait Collector {
    /// One call, or a further part of one.
    fn collect(&mut self, frames: &FrameTable, call: &Call<'_>);
}

/// Feeds every remaining sample of `reader` to `collector` as CPython's replay does, a
/// record at a time: the stack of a REPEAT run is filtered once and handed over with its
/// timestamps, so a run costs what one sample costs plus a timestamp each. Calls `progress`
/// with the number of samples so far about every [`PROGRESS_EVERY`] samples. Returns the
/// number of samples.
pub fn replay<R: Read + Seek>(
    reader: &mut Reader<'_, R>,
    frames: &FrameTable,
    collector: &mut dyn Collector,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, ReadError<R::Error>> {
    let mut filtered: Vec<u32> = Vec::new();
    let mut times: Vec<u64> = Vec::with_capacity(CALL_PART);
    let mut batch = vec![RunEntry { timestamp_us: 0, status: 0 }; CALL_PART];
    let mut next_report = PROGRESS_EVERY;
    while let Some(record) = reader.next_record()? {
        match record {
            Record::Sample(s) => {
                let call = Call {
                    timestamps_us: &[s.timestamp_us],
                    interpreter_id: s.interpreter_id,
                    thread_id: s.thread_id,
                    status: s.status,
                    stack: frames.visible(s.stack, &mut filtered),
                    continued: false,
                };
                collector.collect(frames, &call);
            }
            Record::Repeat(mut run) => {
                let stack = frames.visible(run.stack, &mut filtered);
                let (interpreter_id, thread_id) = (run.interpreter_id, run.thread_id);
                let mut status = None;
                let mut continued = false;
                loop {
                    let n = run.read_entries(&mut batch)?;
                    for e in &batch[..n] {
                        if let Some(s) = status {
                            if s != e.status || times.len() == CALL_PART {
                                let call = Call {
                                    timestamps_us: &times,
                                    interpreter_id,
                                    thread_id,
                                    status: s,
                                    stack,
                                    continued,
                                };
                                collector.collect(frames, &call);
                                times.clear();
                                // A full part of the same status goes on in the next one.
                                continued = e.status == s;
                            }
                        }
                        status = Some(e.status);
                        times.push(e.timestamp_us);
                    }
                    if n == 0 {
                        if let (Some(s), false) = (status, times.is_empty()) {
                            let call =
                                Call { timestamps_us: &times, interpreter_id, thread_id, status: s, stack, continued };
                            collector.collect(frames, &call);
                            times.clear();
                        }
                        break;
                    }
                }
            }
        }
        let done = reader.samples_decoded();
        if done >= next_report {
            progress(done);
            next_report = done + PROGRESS_EVERY;
        }
    }
    let done = reader.samples_decoded();
    progress(done);
    Ok(done)
}

/// Python's `os.path.basename` on a POSIX path: everything after the last `/`.
pub fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A frame with its names, shared between all samples that use it.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedFrame {
    /// File name (lossy UTF-8).
    pub filename: Arc<str>,
    /// Function name (lossy UTF-8).
    pub funcname: Arc<str>,
    /// Source span, `None` for synthetic frames.
    pub location: Option<Location>,
    /// Opcode, if captured.
    pub opcode: Option<u8>,
}

/// One thread sample with its frames resolved, innermost first.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadSample {
    /// Timestamp, µs.
    pub timestamp_us: u64,
    /// Interpreter id.
    pub interpreter_id: u32,
    /// Thread id.
    pub thread_id: u64,
    /// Status flags.
    pub status: u8,
    /// Frames, innermost first (all of them: nothing is filtered).
    pub frames: Vec<NamedFrame>,
}

/// Iterates over a file's samples with names and locations instead of ids (see [`samples`]).
pub struct Samples<'a, 's, R: Read + Seek> {
    reader: &'a mut Reader<'s, R>,
    frames: Vec<NamedFrame>,
    failed: bool,
}

/// The remaining samples of `reader`, resolved. Names are decoded once per frame and shared
/// (`Arc<str>`), so a sample costs one vector of its depth. After an error the iteration ends.
pub fn samples<'a, 's, R: Read + Seek>(reader: &'a mut Reader<'s, R>) -> Samples<'a, 's, R> {
    let table = FrameTable::new(reader.tables());
    let frames = table
        .frames
        .into_iter()
        .map(|f| NamedFrame {
            filename: f.filename.into(),
            funcname: f.funcname.into(),
            location: f.location,
            opcode: f.opcode,
        })
        .collect();
    Samples { reader, frames, failed: false }
}

impl<R: Read + Seek> Iterator for Samples<'_, '_, R> {
    type Item = Result<ThreadSample, ReadError<R::Error>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        match self.reader.next_sample() {
            Ok(Some(s)) => Some(Ok(ThreadSample {
                timestamp_us: s.timestamp_us,
                interpreter_id: s.interpreter_id,
                thread_id: s.thread_id,
                status: s.status,
                frames: s.stack.iter().map(|&id| self.frames[id as usize].clone()).collect(),
            })),
            Ok(None) => None,
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}
