//! The consumer's side: entries out of rings, samples into a [`Writer`], and what was lost
//! into CPython's stats trailer.

use embedded_io::{Seek, Write};

use super::entry::{Entry, Stack, Taken};
use super::ring::Capture;
use crate::endian::Endianity;
use crate::error::WriteError;
use crate::header::Stats;
use crate::writer::{Frame, FrameId, Writer};

/// Turns a runtime's `(code id, offset)` pair into a frame, on the drain's side (where names
/// can be looked up; a signal handler cannot).
pub trait Resolver {
    /// The frame for `offset` in code object `code`. A runtime that does not know the code
    /// (unloaded since) can answer with a placeholder such as `Frame::new(b"~", b"<unknown>")`.
    fn resolve(&self, code: u64, offset: u32) -> Frame<'_>;
}

impl<F: Fn(u64, u32) -> Frame<'static>> Resolver for F {
    fn resolve(&self, code: u64, offset: u32) -> Frame<'_> {
        self(code, offset)
    }
}

/// For rings that carry frame ids only: a `(code id, offset)` entry resolves to
/// `<unresolved>` in `~`.
#[derive(Debug, Clone, Copy, Default)]
pub struct IdsOnly;

impl Resolver for IdsOnly {
    fn resolve(&self, _code: u64, _offset: u32) -> Frame<'_> {
        Frame::new(b"~", b"<unresolved>")
    }
}

/// What a [`Drain`] writes into: a [`Writer`], or a journaled stream
/// (`transport::JournalWriter`, feature `transport`).
pub trait Target {
    /// The sink's error.
    type Error;

    /// Writes a sample whose stack is interned frame ids, innermost first.
    fn write_ids<I: IntoIterator<Item = FrameId>>(
        &mut self,
        taken: Taken,
        frames: I,
    ) -> Result<(), WriteError<Self::Error>>;

    /// Writes a sample whose stack is frames, innermost first.
    fn write_frames<'f, I: IntoIterator<Item = Frame<'f>>>(
        &mut self,
        taken: Taken,
        frames: I,
    ) -> Result<(), WriteError<Self::Error>>;

    /// Records the stats trailer.
    fn set_stats(&mut self, stats: Stats) -> Result<(), WriteError<Self::Error>>;
}

impl<W: Write + Seek, E: Endianity> Target for Writer<'_, W, E> {
    type Error = W::Error;

    fn write_ids<I: IntoIterator<Item = FrameId>>(&mut self, t: Taken, frames: I) -> Result<(), WriteError<W::Error>> {
        self.write_thread_sample_ids_from(t.timestamp_us, t.interpreter_id, t.thread_id, t.status, frames)
    }

    fn write_frames<'f, I: IntoIterator<Item = Frame<'f>>>(
        &mut self,
        t: Taken,
        frames: I,
    ) -> Result<(), WriteError<W::Error>> {
        self.write_thread_sample(t.timestamp_us, t.interpreter_id, t.thread_id, t.status, frames)
    }

    fn set_stats(&mut self, stats: Stats) -> Result<(), WriteError<W::Error>> {
        Writer::set_stats(self, stats)
    }
}

/// Feeds entries from any number of rings into one writer and keeps the counts CPython's
/// stats trailer reports: samples written, entries the writer refused (its storage full, an
/// id it never gave out), the span of timestamps.
#[derive(Debug, Clone, Copy, Default)]
pub struct Drain {
    written: u64,
    refused: u64,
    last_timestamp_us: Option<u64>,
}

impl Drain {
    /// A drain that has taken nothing.
    pub const fn new() -> Self {
        Drain { written: 0, refused: 0, last_timestamp_us: None }
    }

    /// Moves up to `max` entries from `ring` into `writer`; returns how many it took. A
    /// sample the writer refuses for a limit (storage full, format limit, unknown frame id)
    /// is counted and the drain goes on; a sink error stops it and is returned (that entry
    /// is lost and counted as refused; the writer itself stays usable as its docs say).
    pub fn drain<T, R>(
        &mut self,
        ring: &Capture<'_>,
        writer: &mut T,
        resolver: &R,
        max: usize,
    ) -> Result<usize, WriteError<T::Error>>
    where
        T: Target + ?Sized,
        R: Resolver + ?Sized,
    {
        let mut taken = 0;
        while taken < max {
            let Some(result) = ring.pop(|entry| write_entry(writer, resolver, &entry)) else {
                break;
            };
            taken += 1;
            match result {
                Ok(timestamp_us) => {
                    self.written += 1;
                    self.last_timestamp_us = Some(self.last_timestamp_us.map_or(timestamp_us, |t| t.max(timestamp_us)));
                }
                Err(e) => {
                    self.refused += 1;
                    if !(e.is_limit() || matches!(e, WriteError::UnknownFrameId { .. })) {
                        return Err(e);
                    }
                }
            }
        }
        Ok(taken)
    }

    /// Samples written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Entries taken that the writer refused.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// The stats trailer for what was drained, given the samples the rings dropped
    /// (the sum of their [`Capture::dropped`] and [`Capture::garbled`]), in the meanings
    /// CPython's own profiler gives the fields (`profiling.sampling` 3.15.2):
    /// `duration_sec` from `start_time_us` to the last sample's timestamp, `sample_rate`
    /// samples written a second, `error_rate` the percentage of taken samples the writer
    /// refused, and `missed_samples` the percentage of all samples taken that never reached
    /// the writer. The dropped count is recovered exactly from the file:
    /// `dropped = round(written / (1 - e/100) / (1 - m/100)) - round(written / (1 - e/100))`.
    pub fn stats(&self, start_time_us: u64, dropped: u64) -> Stats {
        Stats::of_counts(start_time_us, self.last_timestamp_us, self.written, self.refused, dropped)
    }

    /// Sets the writer's stats trailer to [`Drain::stats`] for `rings` (call it before
    /// `finish`; a later call replaces it, as CPython's `set_stats`).
    pub fn set_stats<'r, T: Target + ?Sized>(
        &self,
        writer: &mut T,
        start_time_us: u64,
        rings: impl IntoIterator<Item = &'r Capture<'r>>,
    ) -> Result<(), WriteError<T::Error>> {
        let dropped = rings.into_iter().map(|r| r.dropped().wrapping_add(r.garbled())).fold(0, u64::wrapping_add);
        writer.set_stats(self.stats(start_time_us, dropped))
    }
}

/// Writes one entry; its timestamp on success.
fn write_entry<T, R>(writer: &mut T, resolver: &R, entry: &Entry<'_>) -> Result<u64, WriteError<T::Error>>
where
    T: Target + ?Sized,
    R: Resolver + ?Sized,
{
    let t = entry.taken();
    match entry.stack() {
        Stack::Ids(ids) => writer.write_ids(t, ids)?,
        Stack::Code(pairs) => writer.write_frames(t, pairs.map(|(code, offset)| resolver.resolve(code, offset)))?,
    }
    Ok(t.timestamp_us)
}
