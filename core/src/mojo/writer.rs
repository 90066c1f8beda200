//! Append-only writer: `"MOJ"`, the version, then each event once, in Austin's shortest
//! varints, so any `embedded_io::Write` sink will do (a UART, a pipe) — no seek.
//!
//! An event is staged whole in the caller's buffer before it goes out. When the sink fails,
//! an event of which nothing went out is dropped (not accepted); one that went out in part is
//! accepted and its remaining bytes go out first on the next call, so once the sink recovers
//! the file never holds half an event, and every prefix of accepted events is a valid file
//! (MOJO has no end marker).

use embedded_io::Write;

use super::varint::{self, MAX_LEN};
use super::{Event, LATEST_VERSION, MAGIC};
use crate::outbox::{Failure, Outbox};

/// What went wrong in a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum WriteError<E> {
    /// The sink failed. `accepted` says whether the call's event is in the file (part of it
    /// went out, the rest goes out on the next call) or not (none of it went out).
    Sink {
        /// The sink's error.
        error: E,
        /// Whether the event of this call was accepted.
        accepted: bool,
    },
    /// The sink took no bytes of a non-empty write (which `embedded_io::Write` forbids);
    /// `accepted` as for [`WriteError::Sink`].
    SinkWroteZero {
        /// Whether the event of this call was accepted.
        accepted: bool,
    },
    /// An event longer than the staging buffer (its strings are).
    TooLarge {
        /// The staging buffer's length.
        staging: usize,
    },
    /// A string holding a NUL byte, which would end it early for every reader.
    NulInString,
    /// A version outside 1..=4.
    Version {
        /// The version.
        version: u8,
    },
    /// An event this file's version cannot hold (the v4 events before version 4).
    NotInVersion {
        /// The event's id.
        id: u8,
        /// The file's version.
        version: u8,
    },
    /// [`Writer::finish`] succeeded: no more events.
    Finished,
}

impl<E: core::fmt::Debug> core::fmt::Display for WriteError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let accepted = |a: &bool| if *a { "accepted" } else { "not written" };
        match self {
            WriteError::Sink { error, accepted: a } => write!(f, "sink error: {error:?} (event {})", accepted(a)),
            WriteError::SinkWroteZero { accepted: a } => write!(f, "the sink took no bytes (event {})", accepted(a)),
            WriteError::TooLarge { staging } => write!(f, "an event longer than the {staging}-byte staging buffer"),
            WriteError::NulInString => f.write_str("a string with a NUL byte"),
            WriteError::Version { version } => write!(f, "MOJO version {version}: versions 1 to 4 are written"),
            WriteError::NotInVersion { id, version } => {
                write!(f, "event {id} does not exist in MOJO version {version}")
            }
            WriteError::Finished => f.write_str("the profile is finished"),
        }
    }
}

impl<E: core::fmt::Debug> core::error::Error for WriteError<E> {}

/// Writes a MOJO file of one version.
pub struct Writer<'b, S: Write> {
    sink: S,
    staging: &'b mut [u8],
    outbox: Outbox,
    version: u8,
    events: u64,
    finished: bool,
}

impl<'b, S: Write> Writer<'b, S> {
    /// A file of `version` (Austin writes 3, [`super::AUSTIN_VERSION`]); writes the header.
    /// `staging` holds one event: 64 bytes plus the longest strings of one event.
    pub fn new(sink: S, staging: &'b mut [u8], version: u8) -> Result<Self, WriteError<S::Error>> {
        if !(1..=LATEST_VERSION).contains(&version) {
            return Err(WriteError::Version { version });
        }
        let mut w = Writer { sink, staging, outbox: Outbox::default(), version, events: 0, finished: false };
        let mut stage = Stage::new(w.staging);
        stage.bytes(MAGIC)?;
        stage.unsigned(u64::from(version))?;
        w.outbox.staged = stage.len;
        w.send(false)?;
        Ok(w)
    }

    /// Appends one event, with the fields this version has: a FRAME's `line_end`, `column`
    /// and `column_end` only from version 2, a STACK's `iid` only from version 3.
    pub fn write(&mut self, event: &Event<&[u8]>) -> Result<(), WriteError<S::Error>> {
        if self.finished {
            return Err(WriteError::Finished);
        }
        if self.outbox.pending() {
            self.send(false)?;
        }
        let id = event.id();
        if id >= 13 && self.version < 4 {
            return Err(WriteError::NotInVersion { id, version: self.version });
        }
        let mut stage = Stage::new(self.staging);
        stage.bytes(&[id])?;
        match *event {
            Event::Metadata { key, value } => {
                stage.string(key)?;
                stage.string(value)?;
            }
            Event::Stack { pid, iid, tid } => {
                stage.unsigned(pid)?;
                if self.version >= 3 {
                    stage.unsigned(iid)?;
                }
                stage.string(tid)?;
            }
            Event::Frame(d) => {
                for v in [d.key, d.filename, d.scope, d.line] {
                    stage.unsigned(v)?;
                }
                if self.version >= 2 {
                    for v in [d.line_end, d.column, d.column_end] {
                        stage.unsigned(v)?;
                    }
                }
            }
            Event::FrameInvalid | Event::Gc | Event::Idle | Event::StackRepeat => {}
            Event::FrameRef { key } | Event::StringRef { key } | Event::TaskRunning { task: key } => {
                stage.unsigned(key)?
            }
            Event::FrameKernel { symbol } => stage.string(symbol)?,
            Event::Time(v) | Event::Memory(v) => stage.signed(v)?,
            Event::String { key, value } => {
                stage.unsigned(key)?;
                stage.string(value)?;
            }
            Event::TaskStack { task, name, frames } => {
                stage.unsigned(task)?;
                stage.unsigned(name)?;
                stage.unsigned(frames)?;
            }
            Event::TaskWaiter { task, waiter } => {
                stage.unsigned(task)?;
                stage.unsigned(waiter)?;
            }
        }
        self.outbox.staged = stage.len;
        self.send(true)?;
        self.events += 1;
        Ok(())
    }

    /// Sends what a failed call left staged, then flushes the sink.
    pub fn flush(&mut self) -> Result<(), WriteError<S::Error>> {
        if self.outbox.pending() {
            self.send(false)?;
        }
        self.sink.flush().map_err(|error| WriteError::Sink { error, accepted: true })
    }

    /// Ends the file: sends what a failed call left staged and flushes the sink (MOJO has
    /// no trailer: every accepted event is already a valid file). After a failure it can be
    /// called again; after success events are refused with [`WriteError::Finished`].
    pub fn finish(&mut self) -> Result<(), WriteError<S::Error>> {
        self.flush()?;
        self.finished = true;
        Ok(())
    }

    /// Events accepted.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// The file's version.
    pub fn version(&self) -> u8 {
        self.version
    }

    /// The sink.
    pub fn get_ref(&self) -> &S {
        &self.sink
    }

    /// The sink, for example after [`Self::flush`].
    pub fn into_inner(self) -> S {
        self.sink
    }

    /// Sends the staged event ([`Outbox::send`]; `droppable`: the call may be refused).
    fn send(&mut self, droppable: bool) -> Result<(), WriteError<S::Error>> {
        self.outbox.send(&mut self.sink, self.staging, droppable).map_err(|(failure, accepted)| match failure {
            Failure::Sink(error) => WriteError::Sink { error, accepted },
            Failure::WroteZero => WriteError::SinkWroteZero { accepted },
        })
    }
}

/// An event being staged; nothing is kept of it unless it fits whole.
struct Stage<'s> {
    buf: &'s mut [u8],
    len: usize,
}

impl<'s> Stage<'s> {
    fn new(buf: &'s mut [u8]) -> Self {
        Stage { buf, len: 0 }
    }

    fn bytes<E>(&mut self, bytes: &[u8]) -> Result<(), WriteError<E>> {
        let staging = self.buf.len();
        let dst = self.buf.get_mut(self.len..self.len + bytes.len()).ok_or(WriteError::TooLarge { staging })?;
        dst.copy_from_slice(bytes);
        self.len += bytes.len();
        Ok(())
    }

    fn unsigned<E>(&mut self, value: u64) -> Result<(), WriteError<E>> {
        let mut out = [0; MAX_LEN];
        let n = varint::encode(false, value, &mut out);
        self.bytes(&out[..n])
    }

    fn signed<E>(&mut self, value: i64) -> Result<(), WriteError<E>> {
        let mut out = [0; MAX_LEN];
        let n = varint::encode_signed(value, &mut out);
        self.bytes(&out[..n])
    }

    fn string<E>(&mut self, s: &[u8]) -> Result<(), WriteError<E>> {
        if s.contains(&0) {
            return Err(WriteError::NulInString);
        }
        self.bytes(s)?;
        self.bytes(&[0])
    }
}
