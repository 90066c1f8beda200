//! What a writer handle writes with: the core's writer over the caller's callbacks, or (host
//! builds) a journaled stream into a file that survives the process being killed, or a
//! series of period files (`tachyon::tachyon::rotate`).

use core::fmt;

use tachyon_core::capture::{Capture, Drain, Resolver, Taken, Target};
use tachyon_core::{Frame, FrameId, RunTimeEndian, Stats, WriteError, Writer};

use crate::sink::{CallbackSink, SinkError};
use crate::*;

/// The journaled stream's link: a buffered file, flushed to the kernel on every flush.
#[cfg(feature = "std")]
pub(crate) type FileLink = tachyon::file::StdIo<std::io::BufWriter<std::fs::File>>;

#[cfg(feature = "std")]
type Journal = tachyon_core::transport::JournalWriter<'static, 'static, FileLink, RunTimeEndian>;

#[cfg(feature = "std")]
type Rotating = tachyon::tachyon::rotate::RotatingWriter<'static, 'static, RunTimeEndian>;

pub(crate) enum Inner {
    Plain(Writer<'static, CallbackSink, RunTimeEndian>),
    #[cfg(feature = "std")]
    Journal(Journal),
    #[cfg(feature = "std")]
    Rotating(Rotating),
}

/// A failure of any kind, with the status it maps to.
#[derive(Debug)]
pub(crate) enum Failure {
    Plain(WriteError<SinkError>),
    /// A journal's or a rotating writer's: the file's or the stream's.
    #[cfg(feature = "std")]
    File(tachyon::tachyon::rotate::RotateError),
}

fn status_of<E>(e: &WriteError<E>) -> i32 {
    match e {
        WriteError::Sink { .. } | WriteError::SinkWroteZero { .. } => TACHYON_E_IO,
        WriteError::Capacity { .. } => TACHYON_E_CAPACITY,
        WriteError::Limit(_) => TACHYON_E_LIMIT,
        WriteError::InvalidStats => TACHYON_E_ARGUMENT,
        WriteError::UnknownFrameId { .. } => TACHYON_E_UNKNOWN_FRAME,
        WriteError::Zstd { .. } | WriteError::CompressorMissing => TACHYON_E_ZSTD,
        WriteError::Finished => TACHYON_E_FINALIZED,
        WriteError::NotFinished => TACHYON_E_ARGUMENT,
    }
}

impl Failure {
    pub(crate) fn status(&self) -> i32 {
        match self {
            Failure::Plain(e) => status_of(e),
            #[cfg(feature = "std")]
            Failure::File(e) => status_of(e),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Plain(e) => e.fmt(f),
            #[cfg(feature = "std")]
            Failure::File(e) => e.fmt(f),
        }
    }
}

/// Runs the same call on any writer.
macro_rules! any {
    ($self:expr, $w:ident => $call:expr) => {
        match $self {
            Inner::Plain($w) => $call.map_err(Failure::Plain),
            #[cfg(feature = "std")]
            Inner::Journal($w) => $call.map_err(Failure::File),
            #[cfg(feature = "std")]
            Inner::Rotating($w) => $call.map_err(Failure::File),
        }
    };
}

/// Reads a count from any writer.
macro_rules! count {
    ($self:expr, $w:ident => $read:expr) => {
        match $self {
            Inner::Plain($w) => $read,
            #[cfg(feature = "std")]
            Inner::Journal(j) => {
                let $w = j.writer();
                $read
            }
            #[cfg(feature = "std")]
            Inner::Rotating($w) => $read,
        }
    };
}

impl Inner {
    /// Drains up to `max` entries of `ring` into whichever writer this is (`Drain::drain`:
    /// samples refused for a limit are counted there and the drain goes on).
    pub(crate) fn drain(
        &mut self,
        drain: &mut Drain,
        ring: &Capture<'_>,
        resolver: &impl Resolver,
        max: usize,
    ) -> Result<usize, Failure> {
        any!(self, w => drain.drain(ring, w, resolver, max))
    }

    pub(crate) fn intern_frame(&mut self, frame: Frame<'_>) -> Result<FrameId, Failure> {
        any!(self, w => w.intern_frame(frame))
    }

    pub(crate) fn write_frames<'f>(
        &mut self,
        taken: Taken,
        frames: impl IntoIterator<Item = Frame<'f>>,
    ) -> Result<(), Failure> {
        any!(self, w => w.write_frames(taken, frames))
    }

    pub(crate) fn write_ids(&mut self, taken: Taken, frames: &[FrameId]) -> Result<(), Failure> {
        any!(self, w => w.write_ids(taken, frames.iter().copied()))
    }

    pub(crate) fn set_stats(&mut self, stats: Stats) -> Result<(), Failure> {
        any!(self, w => Target::set_stats(w, stats))
    }

    pub(crate) fn flush(&mut self) -> Result<(), Failure> {
        any!(self, w => w.flush())
    }

    pub(crate) fn finish(&mut self) -> Result<u64, Failure> {
        any!(self, w => w.finish())
    }

    /// Ends a rotating writer's period now (`TACHYON_E_UNSUPPORTED` for any other writer).
    #[cfg(feature = "std")]
    pub(crate) fn rotate(&mut self) -> Result<(), Result<Failure, i32>> {
        match self {
            Inner::Rotating(r) => r.rotate().map_err(|e| Ok(Failure::File(e))),
            _ => Err(Err(TACHYON_E_UNSUPPORTED)),
        }
    }

    /// Tells `tell` each period a rotating writer ends (false for any other writer).
    #[cfg(feature = "std")]
    pub(crate) fn on_period_end(
        &mut self,
        tell: impl FnMut(&tachyon::tachyon::rotate::EndedPeriod) + Send + 'static,
    ) -> bool {
        match self {
            Inner::Rotating(r) => {
                r.on_period_end(tell);
                true
            }
            _ => false,
        }
    }

    /// The current period's sequence number and start (0 and the start time for a writer
    /// that does not rotate).
    pub(crate) fn period(&self) -> (u64, u64) {
        match self {
            #[cfg(feature = "std")]
            Inner::Rotating(r) => (r.sequence(), r.start_time_us()),
            _ => (0, count!(self, w => w.start_time_us())),
        }
    }

    pub(crate) fn sample_count(&self) -> u64 {
        count!(self, w => w.sample_count())
    }

    pub(crate) fn thread_count(&self) -> usize {
        count!(self, w => w.thread_count())
    }

    pub(crate) fn string_count(&self) -> usize {
        count!(self, w => w.string_count())
    }

    pub(crate) fn frame_count(&self) -> usize {
        count!(self, w => w.frame_count())
    }

    pub(crate) fn limit_reached(&self) -> bool {
        count!(self, w => w.limit_reached())
    }
}
