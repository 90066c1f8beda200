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
//! Tachyon file ([`receive_in_place`]); after a kill `tachyon receive` salvages every sample
//! up to its last flush, and every earlier period is already complete.

use std::io;
use std::path::{Path, PathBuf};

use tachyon_core::capture::{Taken, Target};
use tachyon_core::storage::WriterStorage;
use tachyon_core::transport::{FlushPolicy, JournalWriter, SinkError};
use tachyon_core::{Endianity, Frame, FrameId, Stats, WriteError, Writer, WriterConfig};

use crate::file::FileSink;
use crate::tachyon::receive::receive_in_place;

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
        })
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
        self.convert(&self.path)?;
        Ok(size)
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

    /// A journaled period's complete stream replaced by its Tachyon file.
    fn convert(&self, path: &Path) -> Result<(), RotateError> {
        if let Current::Journal(_) = self.current {
            receive_in_place(path).map_err(|error| WriteError::Sink { offset: 0, error: SinkError::Link(error) })?;
        }
        Ok(())
    }

    fn begin_period(&mut self, start_us: u64) -> Result<(), RotateError> {
        self.finish_file()?;
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
        let finished = std::mem::replace(&mut self.path, next);
        self.sequence += 1;
        self.latest_us = start_us;
        // The new period is under way whatever happens to the old one's conversion (a
        // complete stream that `tachyon receive` still turns into the file).
        self.convert(&finished)
    }
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
