//! Append-only writer: header, records, trailer, maps text, each written once in order, so
//! any `embedded_io::Write` sink will do (a UART, a socket) — no seek.
//!
//! A record is staged whole in the caller's buffer before it goes out. When the sink fails,
//! a record of which nothing went out is dropped (not accepted); one that went out in part is
//! accepted and its remaining bytes go out first on the next call, so the file never holds
//! half a record once the sink recovers, and [`Writer::finish`] still makes a valid file of
//! everything accepted.

use embedded_io::Write;

use super::word::{NativeWord, Word};
use super::{Header, MAX_DEPTH};
use crate::endian::{Endianity, NativeEndian};
use crate::outbox::{Failure, Outbox};

/// Slots the staging buffer holds at least: the header's five.
const MIN_STAGING: usize = 5;

/// What went wrong in a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum WriteError<E> {
    /// The sink failed. `accepted` says whether the call's record is in the file (part of it
    /// went out, the rest goes out on the next call) or not (none of it went out).
    Sink {
        /// The sink's error.
        error: E,
        /// Whether the record of this call was accepted.
        accepted: bool,
    },
    /// The sink took no bytes of a non-empty write (which `embedded_io::Write` forbids);
    /// `accepted` as for [`WriteError::Sink`].
    SinkWroteZero {
        /// Whether the record of this call was accepted.
        accepted: bool,
    },
    /// A value does not fit a 4-byte slot.
    TooWide {
        /// The value.
        value: u64,
    },
    /// A record deeper than the staging buffer holds, or than readers accept ([`MAX_DEPTH`]).
    TooDeep {
        /// The record's depth.
        depth: usize,
        /// The most this writer takes.
        max: usize,
    },
    /// A staging buffer of fewer than five slots (the header; a record of three).
    StagingTooSmall {
        /// Its length.
        len: usize,
        /// The least it must have.
        needed: usize,
    },
    /// A sample without program counters: readers would take the next slot for its first
    /// program counter.
    EmptyStack,
    /// A first program counter of 0, which ends the data for google-pprof.
    ZeroPc,
    /// The header announced extra words that were not all written before the first record.
    HeaderWordsMissing {
        /// Extra header words still expected.
        missing: u64,
    },
    /// More extra header words than the header announced, or after the first record.
    UnexpectedHeaderWord,
    /// The data has ended (trailer or tail begun): no more header words or records.
    Finished,
}

impl<E: core::fmt::Debug> core::fmt::Display for WriteError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            WriteError::Sink { error, accepted } => {
                write!(f, "sink error: {error:?} (record {})", if *accepted { "accepted" } else { "not written" })
            }
            WriteError::SinkWroteZero { accepted } => {
                write!(f, "the sink took no bytes (record {})", if *accepted { "accepted" } else { "not written" })
            }
            WriteError::TooWide { value } => write!(f, "{value:#x} does not fit a 4-byte slot"),
            WriteError::TooDeep { depth, max } => write!(f, "a record of {depth} program counters; at most {max}"),
            WriteError::StagingTooSmall { len, needed } => write!(f, "staging of {len} bytes; at least {needed}"),
            WriteError::EmptyStack => f.write_str("a record needs at least one program counter"),
            WriteError::ZeroPc => f.write_str("a first program counter of 0 would end the profile's data"),
            WriteError::HeaderWordsMissing { missing } => write!(f, "{missing} extra header words not written"),
            WriteError::UnexpectedHeaderWord => f.write_str("no extra header word expected here"),
            WriteError::Finished => f.write_str("the profile is finished"),
        }
    }
}

impl<E: core::fmt::Debug> core::error::Error for WriteError<E> {}

/// Writes a gperftools CPU profile. `W` and `E` are the slot width and byte order,
/// libprofiler's ([`NativeWord`], [`NativeEndian`]) unless chosen.
pub struct Writer<'b, S: Write, W: Word = NativeWord, E: Endianity = NativeEndian> {
    sink: S,
    word: W,
    endian: E,
    staging: &'b mut [u8],
    outbox: Outbox,
    extra_words_left: u64,
    records: u64,
    /// The trailer or the raw tail has begun: no more records.
    data_ended: bool,
    /// Bytes of the tail written.
    tail_sent: usize,
    finished: bool,
}

impl<'b, S: Write> Writer<'b, S> {
    /// A profile as libprofiler writes it on this target: header `0, 3, 0, period_us, 0`.
    pub fn new(sink: S, staging: &'b mut [u8], period_us: u64) -> Result<Self, WriteError<S::Error>> {
        Writer::with_format(
            sink,
            staging,
            NativeWord::default(),
            NativeEndian::default(),
            &Header::libprofiler(period_us),
        )
    }
}

impl<'b, S: Write, W: Word, E: Endianity> Writer<'b, S, W, E> {
    /// A profile of the given slot width, byte order and header (`header.words` over 3
    /// announces extra header words, written next with [`Self::extra_header_word`]).
    /// `staging` holds one record: `(2 + depth) × slot` bytes for the deepest one
    /// (2,048 for libprofiler's 254 program counters in 8-byte slots).
    pub fn with_format(
        sink: S,
        staging: &'b mut [u8],
        word: W,
        endian: E,
        header: &Header,
    ) -> Result<Self, WriteError<S::Error>> {
        let mut w = Writer {
            sink,
            word,
            endian,
            staging,
            outbox: Outbox::default(),
            extra_words_left: header.words.saturating_sub(3),
            records: 0,
            data_ended: false,
            tail_sent: 0,
            finished: false,
        };
        if header.words < 3 {
            return Err(WriteError::HeaderWordsMissing { missing: 3 - header.words });
        }
        if w.staging.len() < MIN_STAGING * word.bytes() {
            return Err(WriteError::StagingTooSmall { len: w.staging.len(), needed: MIN_STAGING * word.bytes() });
        }
        w.stage_slots([0, header.words, header.version, header.period_us, header.padding])?;
        w.send(false)?;
        Ok(w)
    }

    /// One of the extra header words the header announced.
    pub fn extra_header_word(&mut self, value: u64) -> Result<(), WriteError<S::Error>> {
        self.not_ended()?;
        self.ready()?;
        if self.extra_words_left == 0 || self.records > 0 {
            return Err(WriteError::UnexpectedHeaderWord);
        }
        self.stage_slots([value])?;
        self.extra_words_left -= 1;
        self.send(false)
    }

    /// `count` samples of one stack: program counters innermost first, as libprofiler
    /// records them (the first from the signal context, then return addresses).
    pub fn write_record(&mut self, count: u64, pcs: &[u64]) -> Result<(), WriteError<S::Error>> {
        match pcs.first() {
            None => return Err(WriteError::EmptyStack),
            Some(0) => return Err(WriteError::ZeroPc),
            Some(_) => {}
        }
        self.write_raw_record(count, Some(pcs.len() as u64), pcs)
    }

    /// A record written exactly as given, for re-encoding what a reader read: `depth`
    /// `None` writes the count alone, and fewer program counters than `depth` a record cut
    /// short (both only as the file's last record, followed by [`Self::finish_raw`] with a
    /// partial slot or nothing). An end marker is `count, depth` and no program counters,
    /// followed by [`Self::finish_raw`] with the tail from its first program counter.
    pub fn write_raw_record(
        &mut self,
        count: u64,
        depth: Option<u64>,
        pcs: &[u64],
    ) -> Result<(), WriteError<S::Error>> {
        self.not_ended()?;
        self.ready()?;
        if self.extra_words_left > 0 {
            return Err(WriteError::HeaderWordsMissing { missing: self.extra_words_left });
        }
        let w = self.word.bytes();
        let max = (self.staging.len() / w).saturating_sub(2).min(MAX_DEPTH as usize);
        if pcs.len() > max {
            return Err(WriteError::TooDeep { depth: pcs.len(), max });
        }
        let staged = self.stage_slots(core::iter::once(count).chain(depth).chain(pcs.iter().copied()));
        staged?;
        self.records += 1;
        self.send(true)
    }

    /// Ends the data with libprofiler's trailer `0, 1, 0`, then writes `maps_text` (the
    /// `/proc/self/maps` lines readers symbolise with) and flushes. After a sink error, call
    /// it again with the same text: it goes on where it stopped.
    pub fn finish(&mut self, maps_text: &[u8]) -> Result<(), WriteError<S::Error>> {
        if !self.data_ended {
            self.ready()?;
            self.stage_slots([0, 1, 0])?;
            self.data_ended = true;
            self.send(false)?;
        }
        self.finish_raw(maps_text)
    }

    /// Writes `tail` as it is and flushes: after an end marker written with
    /// [`Self::write_raw_record`], the marker's program counters and the maps text as a
    /// reader's tail holds them; after the last record with no trailer, a partial slot or
    /// nothing. After a sink error, call it again with the same tail.
    pub fn finish_raw(&mut self, tail: &[u8]) -> Result<(), WriteError<S::Error>> {
        if self.finished {
            return Err(WriteError::Finished);
        }
        self.data_ended = true;
        self.ready()?;
        while let Some(rest) = tail.get(self.tail_sent..).filter(|r| !r.is_empty()) {
            match self.sink.write(rest) {
                Ok(n) if n > 0 => self.tail_sent += n.min(rest.len()),
                Ok(_) => return Err(WriteError::SinkWroteZero { accepted: true }),
                Err(error) => return Err(WriteError::Sink { error, accepted: true }),
            }
        }
        self.sink.flush().map_err(|error| WriteError::Sink { error, accepted: true })?;
        self.finished = true;
        Ok(())
    }

    /// The sink, for example after [`Self::finish`].
    pub fn into_inner(self) -> S {
        self.sink
    }

    /// Records written.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The sink.
    pub fn get_ref(&self) -> &S {
        &self.sink
    }

    fn not_ended(&self) -> Result<(), WriteError<S::Error>> {
        if self.data_ended || self.finished {
            Err(WriteError::Finished)
        } else {
            Ok(())
        }
    }

    /// Sends what an earlier failed call left staged; refuses calls after the end.
    fn ready(&mut self) -> Result<(), WriteError<S::Error>> {
        if self.finished {
            return Err(WriteError::Finished);
        }
        if self.outbox.pending() {
            self.send(false)?;
        }
        Ok(())
    }

    fn stage_slots(&mut self, values: impl IntoIterator<Item = u64>) -> Result<(), WriteError<S::Error>> {
        let w = self.word.bytes();
        let start = self.outbox.staged;
        for value in values {
            let Some(slot) = self.word.encode(self.endian, value) else {
                self.outbox.staged = start;
                return Err(WriteError::TooWide { value });
            };
            let at = self.outbox.staged;
            let Some(dst) = self.staging.get_mut(at..at + w) else {
                self.outbox.staged = start;
                return Err(WriteError::TooDeep { depth: 0, max: 0 });
            };
            dst.copy_from_slice(slot.as_slice());
            self.outbox.staged += w;
        }
        Ok(())
    }

    /// Sends the staged record ([`Outbox::send`]; `droppable`: the call may be refused).
    fn send(&mut self, droppable: bool) -> Result<(), WriteError<S::Error>> {
        self.outbox.send(&mut self.sink, self.staging, droppable).map_err(|(failure, accepted)| match failure {
            Failure::Sink(error) => WriteError::Sink { error, accepted },
            Failure::WroteZero => WriteError::SinkWroteZero { accepted },
        })
    }
}
