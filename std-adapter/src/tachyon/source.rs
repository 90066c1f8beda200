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

use std::sync::Arc;

use embedded_io::{Read, Seek};
use tachyon_core::header::ProfilingMode;
use tachyon_core::kind::FileKind;
use tachyon_core::reader::{Record, RunEntry, Tables};
use tachyon_core::tables::Location;
use tachyon_core::{BigEndian, Compression, LittleEndian, ReadError, Reader, RunTimeEndian};

use crate::model::{
    Call, Clock, Collector, FrameInfo, FrameTable, Naming, Source, SourceInfo, Ticker, Times, CALL_PART,
};
use crate::output::{ConvertError, Destination, Output};
use crate::tachyon::write::reencode;

/// Where CPython's profiler leaves its own frames; they are never shown.
const INTERNAL_FRAME_SUFFIXES: [&[u8]; 1] = [b"_sync_coordinator.py"];

/// The frame table of a Tachyon file, decoded once: names as lossy UTF-8, the profiler's own
/// frames hidden.
pub fn frame_table(tables: &Tables<'_>) -> FrameTable {
    let mut table = FrameTable::default();
    for id in 0..tables.frame_count() {
        // A frame naming a missing string keeps its slot, so that ids stay positions; the
        // reader rejects any sample that uses it (CPython checks lazily too).
        let resolved = u32::try_from(id).ok().and_then(|id| tables.frame(id));
        let (filename, funcname, location, opcode) =
            resolved.map_or((&b""[..], &b""[..], None, None), |f| (f.filename, f.funcname, f.location, f.opcode));
        table.push(FrameInfo {
            filename: String::from_utf8_lossy(filename).into_owned(),
            funcname: String::from_utf8_lossy(funcname).into_owned(),
            location,
            opcode,
            hidden: INTERNAL_FRAME_SUFFIXES.iter().any(|s| filename.ends_with(s)),
            ..FrameInfo::default()
        });
    }
    table
}

/// A Tachyon file as a [`Source`]: CPython's replay over a [`Reader`], borrowed
/// ([`TachyonSource::new`]) or owned ([`TachyonSource::owning`]).
pub struct TachyonSource<'a, 's, R: Read + Seek> {
    reader: HeldReader<'a, 's, R>,
    info: SourceInfo,
    frames: FrameTable,
}

/// The reader a [`TachyonSource`] replays.
enum HeldReader<'a, 's, R: Read + Seek> {
    Borrowed(&'a mut Reader<'s, R>),
    Owned(Box<Reader<'s, R>>),
}

impl<'s, R: Read + Seek> HeldReader<'_, 's, R> {
    fn get(&mut self) -> &mut Reader<'s, R> {
        match self {
            HeldReader::Borrowed(r) => r,
            HeldReader::Owned(r) => r,
        }
    }
}

impl<'s, R: Read + Seek> TachyonSource<'s, 's, R> {
    /// The source of the samples `reader` has left, holding the reader.
    pub fn owning(reader: Reader<'s, R>) -> Self {
        let (info, frames) = Self::facts(&reader);
        TachyonSource { reader: HeldReader::Owned(Box::new(reader)), info, frames }
    }
}

impl<'a, 's, R: Read + Seek> TachyonSource<'a, 's, R> {
    /// The source of `reader`'s remaining samples.
    pub fn new(reader: &'a mut Reader<'s, R>) -> Self {
        let (info, frames) = Self::facts(reader);
        TachyonSource { reader: HeldReader::Borrowed(reader), info, frames }
    }

    /// The profile's facts and frame table, from the reader's metadata and tables.
    fn facts(reader: &Reader<'s, R>) -> (SourceInfo, FrameTable) {
        let header = reader.metadata().header;
        let cpython_mode = header.config.mode;
        let info = SourceInfo {
            kind: FileKind::Tachyon,
            start_time_us: header.start_time_us,
            sample_interval_us: header.sample_interval_us,
            mode: cpython_mode.unwrap_or(ProfilingMode::Wall).name().into(),
            cpython_mode,
            expected_samples: header.sample_count,
            timestamps: true,
            threads: true,
            naming: Naming::Python,
            clock: Clock::Monotonic,
        };
        (info, frame_table(reader.tables()))
    }

    /// Re-encodes into `sink`, big- or little-endian.
    fn reencode_into<W>(
        &mut self,
        sink: W,
        big: bool,
        compression: Option<Compression>,
        progress: &mut dyn FnMut(u64),
    ) -> Result<W, ConvertError<ReadError<R::Error>>>
    where
        W: embedded_io::Write + Seek,
        W::Error: std::fmt::Debug,
    {
        if big {
            reencode(self.reader.get(), sink, BigEndian, compression, progress)
        } else {
            reencode(self.reader.get(), sink, LittleEndian, compression, progress)
        }
    }
}

impl<R: Read + Seek> Source for TachyonSource<'_, '_, R> {
    type Error = ReadError<R::Error>;

    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn frames(&self) -> &FrameTable {
        &self.frames
    }

    /// Replays what the reader has left; then the reader's thread table is given back
    /// ([`Reader::release_threads`]): the collector is written after this, and a file of many
    /// threads need not hold both at once.
    fn replay(&mut self, collector: &mut dyn Collector, progress: &mut dyn FnMut(u64)) -> Result<u64, Self::Error> {
        let reader = self.reader.get();
        let replayed = replay(reader, &self.frames, collector, progress);
        reader.release_threads();
        replayed
    }

    /// `--to tachyon` re-encodes record for record ([`reencode`]), so that CPython's files
    /// come back byte for byte; a file is written in place, a stream (which cannot seek)
    /// through memory.
    fn pass_through(
        &mut self,
        output: &Output,
        dest: &mut Destination<'_>,
        progress: &mut dyn FnMut(u64),
    ) -> Option<Result<u64, ConvertError<Self::Error>>> {
        let Output::Tachyon { big_endian, compression } = *output else { return None };
        let big = big_endian.unwrap_or(self.reader.get().metadata().endian == RunTimeEndian::Big);
        let written = dest
            .seekable()
            .map_err(ConvertError::Write)
            .and_then(|sink| self.reencode_into(sink, big, compression, progress))
            .and_then(|sink| sink.finish());
        Some(written.map(|()| self.reader.get().samples_decoded()))
    }
}

/// Feeds every remaining sample of `reader` to `collector` as CPython's replay does, a
/// record at a time: the stack of a REPEAT run is filtered once and handed over with its
/// timestamps, so a run costs what one sample costs plus a timestamp each. Calls `progress`
/// with the number of samples so far about every
/// [`PROGRESS_EVERY`](crate::model::PROGRESS_EVERY) samples. Returns the number of samples.
pub fn replay<R: Read + Seek>(
    reader: &mut Reader<'_, R>,
    frames: &FrameTable,
    collector: &mut dyn Collector,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, ReadError<R::Error>> {
    let mut filtered: Vec<u32> = Vec::new();
    let mut times: Vec<u64> = Vec::with_capacity(CALL_PART);
    let mut batch = vec![RunEntry { timestamp_us: 0, status: 0 }; CALL_PART];
    let mut ticker = Ticker::default();
    while let Some(record) = reader.next_item()? {
        match record {
            Record::Sample(s) => {
                let one = [s.timestamp_us];
                let call = Call {
                    times: Times::Stamped(&one),
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
                let mut emit = |times: &[u64], status: u8, continued: bool| {
                    let call =
                        Call { times: Times::Stamped(times), interpreter_id, thread_id, status, stack, continued };
                    collector.collect(frames, &call);
                };
                let mut status = None;
                let mut continued = false;
                loop {
                    let n = run.read_entries(&mut batch)?;
                    let mut rest = &batch[..n];
                    while let Some(first) = rest.first() {
                        if let Some(s) = status {
                            if s != first.status || times.len() == CALL_PART {
                                emit(&times, s, continued);
                                times.clear();
                                // A full part of the same status goes on in the next one.
                                continued = first.status == s;
                            }
                        }
                        status = Some(first.status);
                        // The entries of this status that fit in the part, taken at once.
                        let room = (CALL_PART - times.len()).min(rest.len());
                        let same = rest[..room].iter().position(|e| e.status != first.status).unwrap_or(room);
                        times.extend(rest[..same].iter().map(|e| e.timestamp_us));
                        rest = &rest[same..];
                    }
                    if n == 0 {
                        if let (Some(s), false) = (status, times.is_empty()) {
                            emit(&times, s, continued);
                            times.clear();
                        }
                        break;
                    }
                }
            }
        }
        ticker.tick(reader.samples_decoded(), progress);
    }
    let done = reader.samples_decoded();
    progress(done);
    Ok(done)
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
    let table = frame_table(reader.tables());
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

/// A Tachyon file by its path, replayable any number of times (each replay opens it again):
/// for outputs that read the samples twice, where a [`TachyonSource`] reads them once, and
/// for several files replayed in turn ([`crate::model::chain::Chain`], `tachyon merge`).
pub struct TachyonFile {
    path: std::path::PathBuf,
    info: SourceInfo,
    frames: FrameTable,
}

/// The reader of the file at `path`, over `storage` (sized from its metadata).
pub fn open_path<'s>(
    path: &std::path::Path,
    storage: &'s mut Option<crate::tachyon::storage::OwnedReaderStorage>,
) -> Result<Reader<'s, crate::file::FileSource>, ReadError<std::io::Error>> {
    let io = |error| ReadError::Io { position: tachyon_core::Position::File(0), error };
    let mut src = crate::file::FileSource::open(path).map_err(io)?;
    let meta = tachyon_core::Metadata::read(&mut src)?;
    let owned =
        crate::tachyon::storage::OwnedReaderStorage::for_metadata(&meta, crate::tachyon::storage::Limits::default())
            .map_err(|e| io(std::io::Error::other(e.to_string())))?;
    storage.insert(owned).open_file(src)
}

impl TachyonFile {
    /// Opens the file once for its facts and frames.
    pub fn open(path: &std::path::Path) -> Result<Self, ReadError<std::io::Error>> {
        let mut storage = None;
        let mut reader = open_path(path, &mut storage)?;
        let source = TachyonSource::new(&mut reader);
        Ok(TachyonFile { path: path.to_owned(), info: source.info.clone(), frames: source.frames.clone() })
    }
}

impl Source for TachyonFile {
    type Error = ReadError<std::io::Error>;

    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn frames(&self) -> &FrameTable {
        &self.frames
    }

    fn replay(&mut self, collector: &mut dyn Collector, progress: &mut dyn FnMut(u64)) -> Result<u64, Self::Error> {
        let mut storage = None;
        let mut reader = open_path(&self.path, &mut storage)?;
        replay(&mut reader, &self.frames, collector, progress)
    }
}
