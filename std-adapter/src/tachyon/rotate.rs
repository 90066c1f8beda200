//! Rotation: a run that lasts days written as a series of complete profiles, one per period
//! of sample time or of bytes, as continuous profilers hand them over.
//!
//! Each period is its own file, `PREFIX.SEQUENCE.START.pyb` ([`period_path`]): the sequence
//! number from 0 (eight digits, so names sort in order), and the period's start on the
//! samples' clock in µs, which is also its header's `start_time_us`. Every file holds the
//! tables of every frame interned so far, in the same order ([`Writer::restart`]), so a frame
//! id stays valid across periods (a capture ring's entries hold ids) and each file reads on
//! its own, in CPython too.
//!
//! A period ends before the first sample that falls past it: by time, a sample whose
//! timestamp is `every_us` or more past the period's start (the next period starts at the
//! last boundary before that sample, so starts stay on the grid `start + k·every_us` and a
//! quiet stretch makes no empty files); by size, once the period's records reach
//! `every_bytes` (uncompressed record bytes, the tables come on top). Samples go to the
//! period in which they are written: a drain that takes one ring after another can put a
//! sample of one thread a little before its file's start (its first delta then wraps, which
//! readers undo: deltas are modulo 2^64).
//!
//! Plain periods are `Writer`s into the file: a process killed mid-period leaves that
//! period's file incomplete. Journaled periods ([`JournalWriter`]) survive it: the current
//! period's file is the framed stream until the period ends, when it is replaced by the
//! Tachyon file ([`receive_in_place`]: written beside it and renamed over it) — and only then
//! is the next period's file created. So at every instant each period but the newest is a
//! complete file; the newest is the stream (or, killed in the hand-over, the ended period's
//! complete stream, with at most a `.PID.receiving` file beside it), which [`recover`] (`tachyon
//! receive` of the prefix) turns into a profile of every sample up to its last flush.

use std::io;
use std::path::{Path, PathBuf};

use tachyon_core::capture::{Taken, Target};
use tachyon_core::storage::WriterStorage;
use tachyon_core::transport::{FlushPolicy, JournalWriter, SinkError};
use tachyon_core::{Endianity, Frame, FrameId, Stats, WriteError, Writer, WriterConfig};

use crate::file::FileSink;
use crate::tachyon::receive::{receive_in_place, salvage_read, InPlace, ReceiveError, RECEIVING_SUFFIX};

/// When a [`RotatingWriter`] starts a new file (each `0` means never by that measure).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rotation {
    /// Microseconds of sample time a period spans.
    pub every_us: u64,
    /// Record bytes (before compression) after which the period ends.
    pub every_bytes: u64,
}

/// The errors of a [`RotatingWriter`]: the file's, or the stream's of a journaled one.
pub type RotateError = WriteError<SinkError<io::Error>>;

/// The file of period `sequence` starting at `start_us`: `PREFIX.SEQUENCE.START.pyb` beside
/// `prefix` (whose file name is the name's first part).
pub fn period_path(prefix: &Path, sequence: u64, start_us: u64) -> PathBuf {
    let mut name = prefix.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{sequence:08}.{start_us}.pyb"));
    prefix.with_file_name(name)
}

/// A period that ended, its file complete: what the callback of
/// [`RotatingWriter::on_period_end`] is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndedPeriod {
    /// Its sequence number (from 0).
    pub sequence: u64,
    /// Its start (its header's `start_time_us`, the START of its name).
    pub start_time_us: u64,
    /// Its file.
    pub path: PathBuf,
    /// Samples in it.
    pub samples: u64,
    /// Threads in it.
    pub threads: usize,
    /// The file's size in bytes.
    pub size: u64,
}

/// What is told each ended period.
type PeriodCallback = Box<dyn FnMut(&EndedPeriod) + Send>;

enum Current<'s, 'b, E: Endianity> {
    Plain(Writer<'s, FileSink, E>),
    Journal(JournalWriter<'s, 'b, FileSink, E>),
}

/// Runs the same call on either kind of period, with one error type.
macro_rules! either {
    ($self:expr, $w:ident => $call:expr) => {
        match $self {
            Current::Plain($w) => $call.map_err(|e| e.map_sink(SinkError::Link)),
            Current::Journal($w) => $call,
        }
    };
}

/// Reads from the core writer of either kind.
macro_rules! read {
    ($self:expr, $w:ident => $read:expr) => {
        match $self {
            Current::Plain($w) => $read,
            Current::Journal(j) => {
                let $w = j.writer();
                $read
            }
        }
    };
}

/// A writer into a series of period files (see the module's docs). Storage and the journal's
/// scratch are the caller's, as for [`Writer`] and [`JournalWriter`].
pub struct RotatingWriter<'s, 'b, E: Endianity> {
    current: Current<'s, 'b, E>,
    prefix: PathBuf,
    rotation: Rotation,
    sequence: u64,
    path: PathBuf,
    /// The latest sample timestamp of the period (its start before the first).
    latest_us: u64,
    /// Set once the current period's file is complete and told (a retry does not tell it
    /// twice); cleared when the next period starts.
    ended: bool,
    on_period_end: Option<PeriodCallback>,
}

fn create(path: &Path) -> Result<FileSink, RotateError> {
    crate::file::create(path).map_err(|error| WriteError::Sink { offset: 0, error: SinkError::Link(error) })
}

impl<'s, 'b, E: Endianity> RotatingWriter<'s, 'b, E> {
    /// Creates period 0's file (at `config.start_time_us`) and a writer into it; journaled
    /// when `journal` gives the stream's scratch (at least
    /// [`tachyon_core::transport::JOURNAL_MIN_SCRATCH`] bytes) and flush policy.
    pub fn create(
        prefix: &Path,
        storage: WriterStorage<'s>,
        config: WriterConfig,
        endian: E,
        rotation: Rotation,
        journal: Option<(&'b mut [u8], FlushPolicy)>,
    ) -> Result<Self, RotateError> {
        let path = period_path(prefix, 0, config.start_time_us);
        let sink = create(&path)?;
        let current = match journal {
            None => Current::Plain(
                Writer::with_endian(sink, storage, config, endian).map_err(|e| e.map_sink(SinkError::Link))?,
            ),
            Some((scratch, policy)) => {
                let mut j = JournalWriter::with_endian(sink, scratch, storage, config, policy, endian)?;
                // As every later period: the header on disk at once, so a kill before the
                // first flush salvages to an empty profile.
                j.flush()?;
                Current::Journal(j)
            }
        };
        Ok(RotatingWriter {
            current,
            prefix: prefix.to_path_buf(),
            rotation,
            sequence: 0,
            path,
            latest_us: config.start_time_us,
            ended: false,
            on_period_end: None,
        })
    }

    /// Calls `callback` with each period's final counts once its file is complete (a
    /// journaled one: replaced by the Tachyon file), on the thread whose call ended it —
    /// [`rotate`](Self::rotate), [`finish`](Self::finish) or a sample's write — before that
    /// call returns; the last period at `finish`. Replaces any earlier callback.
    pub fn on_period_end(&mut self, callback: impl FnMut(&EndedPeriod) + Send + 'static) {
        self.on_period_end = Some(Box::new(callback));
    }

    /// The current period's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The current period's sequence number (from 0).
    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    /// Samples in the current period's file.
    pub fn sample_count(&self) -> u64 {
        read!(&self.current, w => w.sample_count())
    }

    /// Threads in the current period's file.
    pub fn thread_count(&self) -> usize {
        read!(&self.current, w => w.thread_count())
    }

    /// Strings interned so far (every period's files hold them all).
    pub fn string_count(&self) -> usize {
        read!(&self.current, w => w.string_count())
    }

    /// Frames interned so far (every period's files hold them all).
    pub fn frame_count(&self) -> usize {
        read!(&self.current, w => w.frame_count())
    }

    /// True once a limit refused a sample of the current period.
    pub fn limit_reached(&self) -> bool {
        read!(&self.current, w => w.limit_reached())
    }

    /// The current period's start (its header's `start_time_us`).
    pub fn start_time_us(&self) -> u64 {
        read!(&self.current, w => w.start_time_us())
    }

    /// Interns a frame (see [`Writer::intern_frame`]); its id holds in every later period.
    pub fn intern_frame(&mut self, frame: Frame<'_>) -> Result<FrameId, RotateError> {
        either!(&mut self.current, w => w.intern_frame(frame))
    }

    /// Writes a sample from frames, in a new period first if it falls past this one.
    pub fn write_thread_sample<'f>(
        &mut self,
        taken: Taken,
        frames: impl IntoIterator<Item = Frame<'f>>,
    ) -> Result<(), RotateError> {
        self.write_sample(taken, |current| either!(current, w => Target::write_frames(w, taken, frames)))
    }

    /// Writes a sample from frame ids, in a new period first if it falls past this one.
    pub fn write_thread_sample_ids(
        &mut self,
        taken: Taken,
        frames: impl IntoIterator<Item = FrameId>,
    ) -> Result<(), RotateError> {
        self.write_sample(taken, |current| either!(current, w => Target::write_ids(w, taken, frames)))
    }

    /// What every sample goes through: the period it falls in, then `write`.
    fn write_sample(
        &mut self,
        taken: Taken,
        write: impl FnOnce(&mut Current<'s, 'b, E>) -> Result<(), RotateError>,
    ) -> Result<(), RotateError> {
        self.rotate_if_due(taken.timestamp_us)?;
        write(&mut self.current)?;
        self.latest_us = self.latest_us.max(taken.timestamp_us);
        Ok(())
    }

    /// Records the current period's stats trailer.
    pub fn set_stats(&mut self, stats: Stats) -> Result<(), RotateError> {
        either!(&mut self.current, w => Target::set_stats(w, stats))
    }

    /// Hands every sample written so far to the file (a journaled period's flush: what a
    /// kill keeps).
    pub fn flush(&mut self) -> Result<(), RotateError> {
        either!(&mut self.current, w => w.flush())
    }

    /// Ends the current period now and starts the next at the latest sample's timestamp
    /// (a hand-over the caller decides: at a signal, before an upload). A retry after an
    /// error goes on where it stopped.
    pub fn rotate(&mut self) -> Result<(), RotateError> {
        self.begin_period(self.latest_us)
    }

    /// Finishes the last period: its file complete (a journaled one replaced by the
    /// Tachyon file). Returns its size. Can be called again after an error.
    pub fn finish(&mut self) -> Result<u64, RotateError> {
        let size = self.finish_file()?;
        self.complete_period(size)
    }

    fn rotate_if_due(&mut self, timestamp_us: u64) -> Result<(), RotateError> {
        let (start, every) = (self.start_time_us(), self.rotation.every_us);
        // Whole periods since the start: none while the sample is inside this one, or when
        // periods are not timed (`every_us` 0).
        if let Some(periods) = timestamp_us.saturating_sub(start).checked_div(every).filter(|&n| n > 0) {
            return self.begin_period(start + periods * every);
        }
        let limit = self.rotation.every_bytes;
        if limit > 0 && read!(&self.current, w => w.write_counts().bytes_written >= limit && w.sample_count() > 0) {
            return self.begin_period(timestamp_us);
        }
        Ok(())
    }

    /// The current file finished (once: a retry finds it so).
    fn finish_file(&mut self) -> Result<u64, RotateError> {
        match &mut self.current {
            Current::Plain(w) => {
                // A retry after the buffer's flush failed finds the file finished.
                let size = match w.finish() {
                    Err(WriteError::Finished) => None,
                    other => Some(other.map_err(|e| e.map_sink(SinkError::Link))?),
                };
                let io = |error| WriteError::Sink { offset: size.unwrap_or(0), error: SinkError::Link(error) };
                let file = &mut w.get_mut().0;
                std::io::Write::flush(file).map_err(io)?;
                match size {
                    Some(size) => Ok(size),
                    None => file.get_ref().metadata().map(|m| m.len()).map_err(io),
                }
            }
            Current::Journal(j) => j.finish(),
        }
    }

    /// The current period's finished file made complete — a journaled one's stream replaced
    /// by its Tachyon file — and told to the callback, once. Returns the file's size.
    fn complete_period(&mut self, mut size: u64) -> Result<u64, RotateError> {
        if let Current::Journal(_) = self.current {
            size = receive_in_place(&self.path)
                .map_err(|error| WriteError::Sink { offset: 0, error: SinkError::Link(error) })?;
        }
        if !self.ended {
            self.ended = true;
            if let Some(callback) = self.on_period_end.as_mut() {
                let period = EndedPeriod {
                    sequence: self.sequence,
                    start_time_us: read!(&self.current, w => w.start_time_us()),
                    path: self.path.clone(),
                    samples: read!(&self.current, w => w.sample_count()),
                    threads: read!(&self.current, w => w.thread_count()),
                    size,
                };
                callback(&period);
            }
        }
        Ok(size)
    }

    fn begin_period(&mut self, start_us: u64) -> Result<(), RotateError> {
        // The ended period complete before the next one's file exists: a kill at any instant
        // leaves every period but the newest complete. A stream that could not be replaced
        // (the disk full) stays the complete stream `recover` makes a file of: the run goes
        // on, and the error is returned once the next period is under way.
        let size = self.finish_file()?;
        let completed = self.complete_period(size);
        let next = period_path(&self.prefix, self.sequence + 1, start_us);
        let sink = create(&next)?;
        let old = match &mut self.current {
            Current::Plain(w) => {
                let old = std::mem::replace(w.get_mut(), sink);
                w.restart(start_us).map_err(|e| e.map_sink(SinkError::Link))?;
                old
            }
            Current::Journal(j) => {
                let old = j.restart(sink, start_us)?;
                // The new stream's header and tables now: a kill before its first flush
                // then salvages to an empty period, not an empty file.
                j.flush()?;
                old
            }
        };
        drop(old);
        self.path = next;
        self.sequence += 1;
        self.latest_us = start_us;
        self.ended = false;
        completed.map(drop)
    }
}

/// What [`recover`] did with one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// The file.
    pub path: PathBuf,
    /// What it was, and what it is now.
    pub outcome: Recovery,
}

/// What [`recover`] found a file to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// A period's file: a Tachyon file already, or a stream (complete or cut) now its Tachyon
    /// file (see [`InPlace`]).
    Period(InPlace),
    /// A `.PID.receiving` file a process killed while replacing a stream left: removed (the
    /// stream it was made from is still there, and recovered in its turn).
    LeftoverRemoved,
    /// The newest period's file, killed before its stream's header reached it (empty, or only
    /// its first frame): no sample of it was written, and it is removed.
    EmptyRemoved,
}

/// Makes every period of a rotating run whose process is gone a profile: each journaled
/// stream among the files of `prefix` (`PREFIX.SEQUENCE.START.pyb`) — or of every period
/// file in it, when `prefix` is a folder — is replaced by its Tachyon file (a cut one
/// salvaged up to its last flush), and the `.receiving` files of an interrupted hand-over
/// are removed; complete files are left as they are. Every period file found is reported, in
/// order, after the leftovers removed. Run it once the writing process has ended: a live
/// period's stream replaced under its writer would lose what it writes next.
pub fn recover(prefix: &Path) -> io::Result<Vec<Recovered>> {
    let (periods, leftovers) = period_files(prefix)?;
    let mut done = Vec::new();
    for path in leftovers {
        std::fs::remove_file(&path)?;
        done.push(Recovered { path, outcome: Recovery::LeftoverRemoved });
    }
    let last = periods.len().saturating_sub(1);
    for (i, path) in periods.into_iter().enumerate() {
        let in_path = |e: io::Error| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        let capture = std::fs::read(&path).map_err(in_path)?;
        let outcome = match salvage_read(&path, &capture).map_err(in_path)? {
            Ok(outcome) => Recovery::Period(outcome),
            // Only the newest can have no header: every earlier period's stream got its header
            // before the next period's file was made.
            Err(ReceiveError::NoEnd { .. }) if i == last => {
                std::fs::remove_file(&path).map_err(in_path)?;
                Recovery::EmptyRemoved
            }
            Err(e) => return Err(in_path(io::Error::new(io::ErrorKind::InvalidData, e.to_string()))),
        };
        done.push(Recovered { path, outcome });
    }
    Ok(done)
}

/// The period files of a rotating writer's prefix (or of every prefix in a folder), in
/// order, and the `.receiving` files an interrupted hand-over left.
pub fn period_files(prefix: &Path) -> io::Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let (folder, stem) = if prefix.is_dir() {
        (prefix.to_path_buf(), None)
    } else {
        let folder = prefix.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let stem = prefix.file_name().and_then(|n| n.to_str()).map(str::to_owned);
        let stem =
            stem.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "a prefix whose name is not UTF-8"))?;
        (folder.to_path_buf(), Some(stem))
    };
    let mut periods = Vec::new();
    let mut leftovers = Vec::new();
    for entry in std::fs::read_dir(&folder)? {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else { continue };
        let Some(rest) = (match &stem {
            Some(stem) => name.strip_prefix(stem.as_str()).and_then(|r| r.strip_prefix('.')),
            None => name.split_once('.').map(|(_, r)| r),
        }) else {
            continue;
        };
        if let Some(period) = rest.strip_suffix(RECEIVING_SUFFIX) {
            // SEQUENCE.START.pyb.PID
            if period.rsplit_once('.').is_some_and(|(p, pid)| is_period_name(p) && is_digits(pid)) {
                leftovers.push(entry.path());
            }
        } else if is_period_name(rest) {
            periods.push(entry.path());
        }
    }
    periods.sort();
    leftovers.sort();
    Ok((periods, leftovers))
}

/// `SEQUENCE.START.pyb`, as [`period_path`] names a period.
fn is_period_name(rest: &str) -> bool {
    let mut parts = rest.split('.');
    matches!(
        (parts.next(), parts.next(), parts.next(), parts.next()),
        (Some(seq), Some(start), Some("pyb"), None) if seq.len() >= 8 && is_digits(seq) && is_digits(start)
    )
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

impl<E: Endianity> Target for RotatingWriter<'_, '_, E> {
    type Error = SinkError<io::Error>;

    fn write_ids<I: IntoIterator<Item = FrameId>>(&mut self, taken: Taken, frames: I) -> Result<(), RotateError> {
        self.write_thread_sample_ids(taken, frames)
    }

    fn write_frames<'f, I: IntoIterator<Item = Frame<'f>>>(
        &mut self,
        taken: Taken,
        frames: I,
    ) -> Result<(), RotateError> {
        self.write_thread_sample(taken, frames)
    }

    fn set_stats(&mut self, stats: Stats) -> Result<(), RotateError> {
        RotatingWriter::set_stats(self, stats)
    }
}
