//! The receiving side's rules, frame by frame.

use super::{Frame, Record, MAGIC, VERSION};

/// Why a stream of frames is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum StreamError {
    /// Frames are missing: `expected` was due, `got` came.
    Gap {
        /// The sequence number due.
        expected: u32,
        /// The one that came.
        got: u32,
    },
    /// The first frame is not `Begin`, or `Begin` comes again.
    NoBegin,
    /// `Begin` of another magic or version.
    NotOurs {
        /// Its magic.
        magic: [u8; 4],
        /// Its version.
        version: u8,
    },
    /// A write starting past the end of the file so far (a hole no writer leaves).
    Hole {
        /// Its offset.
        offset: u64,
        /// The file's length before it.
        length: u64,
    },
    /// A frame after `End`.
    AfterEnd,
    /// `End` says a length other than the writes made.
    Length {
        /// What `End` says.
        said: u64,
        /// What the writes made.
        made: u64,
    },
}

impl core::fmt::Display for StreamError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            StreamError::Gap { expected, got } => {
                write!(f, "frames {expected} to {} are missing (frame {got} came)", got.wrapping_sub(1))
            }
            StreamError::NoBegin => f.write_str("the stream does not begin with one Begin frame"),
            StreamError::NotOurs { magic, version } => write!(f, "Begin of magic {magic:?} version {version}"),
            StreamError::Hole { offset, length } => write!(f, "a write at {offset} past the end ({length})"),
            StreamError::AfterEnd => f.write_str("a frame after End"),
            StreamError::Length { said, made } => write!(f, "End says {said} bytes, the writes made {made}"),
        }
    }
}

impl core::error::Error for StreamError {}

/// What an accepted frame asks of the receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepted<'f> {
    /// Nothing (`Begin`, `End`).
    Nothing,
    /// Write `bytes` at `offset` of the file.
    Write {
        /// File offset.
        offset: u64,
        /// The bytes.
        bytes: &'f [u8],
    },
    /// A journal record (`Header`, `String`, `Frame`, `Stats`, `Tables`): what rebuilds the
    /// tables of a stream cut before `End`.
    Journal(Record<'f>),
}

/// The rules of a stream, frame by frame: [`Receiver::accept`] says which bytes a frame
/// writes where, and the caller writes them into its own storage.
#[derive(Debug, Default, Clone, Copy)]
pub struct Receiver {
    next: u32,
    length: u64,
    ended: bool,
}

impl Receiver {
    /// A stream not yet begun.
    pub fn new() -> Self {
        Receiver::default()
    }

    /// Checks `frame` against the frames before it; returns the bytes it writes and where.
    pub fn accept<'f>(&mut self, frame: &Frame<'f>) -> Result<Accepted<'f>, StreamError> {
        if self.ended {
            return Err(StreamError::AfterEnd);
        }
        if frame.seq != self.next {
            return Err(StreamError::Gap { expected: self.next, got: frame.seq });
        }
        let write = match frame.record {
            Record::Begin { magic, version } if self.next == 0 => {
                if (magic, version) != (MAGIC, VERSION) {
                    return Err(StreamError::NotOurs { magic, version });
                }
                Accepted::Nothing
            }
            _ if self.next == 0 => return Err(StreamError::NoBegin),
            Record::Begin { .. } => return Err(StreamError::NoBegin),
            Record::Write { offset, bytes } => {
                if offset > self.length {
                    return Err(StreamError::Hole { offset, length: self.length });
                }
                self.length = self.length.max(offset.saturating_add(bytes.len() as u64));
                Accepted::Write { offset, bytes }
            }
            Record::End { length } => {
                if length != self.length {
                    return Err(StreamError::Length { said: length, made: self.length });
                }
                self.ended = true;
                Accepted::Nothing
            }
            journal @ (Record::Header { .. }
            | Record::String { .. }
            | Record::Frame { .. }
            | Record::Stats { .. }
            | Record::Tables { .. }) => Accepted::Journal(journal),
        };
        self.next = self.next.wrapping_add(1);
        Ok(write)
    }

    /// `End` came: the file is whole.
    pub fn complete(&self) -> bool {
        self.ended
    }

    /// The file's length so far.
    pub fn length(&self) -> u64 {
        self.length
    }
}
