//! A profile over a link that cannot seek (a UART, a pipe): the writer's sink becomes a
//! stream of frames, each carrying one write with its file offset, so the header the writer
//! rewrites at the end travels like any other bytes; the receiver replays the writes.
//!
//! # Wire format
//!
//! The stream is a sequence of frames, each COBS-encoded and ended by a `0x00` byte (so a
//! receiver finds the next frame after any damage). Inside, postcard encodes [`Frame`]:
//!
//! | field | postcard | meaning |
//! |---|---|---|
//! | `seq` | varint u32 | 0 for the first frame, then +1 each: a gap names the frames lost |
//! | `record` | enum tag varint, then its fields | [`Record::Begin`], [`Record::Write`] or [`Record::End`] |
//! | `crc` | 4 bytes | CRC-32 (IEEE, as zlib's `crc32`) of the postcard bytes of `seq` and `record`, little-endian |
//!
//! | record | fields | meaning |
//! |---|---|---|
//! | `Begin` (0) | `magic: [u8; 4]` = `TCHF`, `version: u8` = 1 | the first frame of a stream |
//! | `Write` (1) | `offset: u64` varint, `bytes` length-prefixed | the writer wrote `bytes` at `offset` |
//! | `End` (2) | `length: u64` varint | the file is complete and `length` bytes long |
//!
//! A receiver that finds a frame that does not decode, a CRC that does not match, a gap in
//! `seq`, a write leaving a hole, or no `End`, refuses the stream: it never makes a file
//! that differs from what the device wrote.

use embedded_io::{ErrorType, Seek, SeekFrom, Write};
use serde::{Deserialize, Serialize};

/// The `Begin` record's magic.
pub const MAGIC: [u8; 4] = *b"TCHF";

/// The framing version this module writes and reads.
pub const VERSION: u8 = 1;

/// The least scratch buffer [`FramedSink`] takes: a frame of a few bytes of file fits.
pub const MIN_SCRATCH: usize = 64;

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Record<'a> {
    /// The stream begins.
    Begin {
        /// [`MAGIC`].
        magic: [u8; 4],
        /// [`VERSION`].
        version: u8,
    },
    /// The writer wrote `bytes` at `offset`.
    Write {
        /// File offset.
        offset: u64,
        /// The bytes.
        #[serde(borrow)]
        bytes: &'a [u8],
    },
    /// The file is complete.
    End {
        /// Its length.
        length: u64,
    },
}

/// One frame, as postcard encodes it inside COBS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame<'a> {
    /// Sequence number, from 0.
    pub seq: u32,
    /// What it carries.
    #[serde(borrow)]
    pub record: Record<'a>,
    /// CRC-32 of the postcard bytes of `seq` and `record`, little-endian.
    pub crc: [u8; 4],
}

/// Why a frame could not be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum FrameError {
    /// The buffer is too small for the frame.
    BufferTooSmall,
}

/// The postcard bytes of `seq` and `record` (the part the CRC covers) into `buf`.
fn covered<'b>(seq: u32, record: &Record<'_>, buf: &'b mut [u8]) -> Result<&'b mut [u8], FrameError> {
    postcard::to_slice(&(seq, record), buf).map_err(|_| FrameError::BufferTooSmall)
}

/// Encodes frame `seq` carrying `record` into `buf`: COBS bytes and the closing `0x00`.
pub fn encode<'b>(seq: u32, record: &Record<'_>, buf: &'b mut [u8]) -> Result<&'b mut [u8], FrameError> {
    // The CRC is of the bytes postcard writes for `seq` and `record`; `buf` holds them
    // first, then the whole frame.
    let crc = crc32(covered(seq, record, buf)?).to_le_bytes();
    postcard::to_slice_cobs(&Frame { seq, record: *record, crc }, buf).map_err(|_| FrameError::BufferTooSmall)
}

/// Why bytes between two `0x00` are not a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DecodeError {
    /// Not COBS, or not postcard's encoding of a [`Frame`].
    Malformed,
    /// The CRC does not match: the frame was damaged.
    Crc,
}

/// Decodes one frame from `bytes`, its COBS bytes without the closing `0x00` (decoded in
/// place); `scratch` holds the bytes the CRC is checked over (as long as the frame).
pub fn decode<'b>(bytes: &'b mut [u8], scratch: &mut [u8]) -> Result<Frame<'b>, DecodeError> {
    let frame: Frame<'b> = postcard::from_bytes_cobs(bytes).map_err(|_| DecodeError::Malformed)?;
    let covered = covered(frame.seq, &frame.record, scratch).map_err(|_| DecodeError::Malformed)?;
    if crc32(covered).to_le_bytes() != frame.crc {
        return Err(DecodeError::Crc);
    }
    Ok(frame)
}

/// CRC-32 as zlib computes it (reflected, polynomial 0xEDB88320), bit by bit: frames are
/// small and a table would cost a kilobyte of flash.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

/// The most file bytes one frame carries with a scratch buffer of `scratch` bytes: the
/// frame's fixed fields take at most 26 bytes (tags, `seq`, `offset`, the length, the CRC),
/// and COBS adds one byte per 254 and two more.
pub const fn chunk_for(scratch: usize) -> usize {
    let payload = scratch.saturating_sub(2) * 254 / 255;
    payload.saturating_sub(26)
}

/// A `Write + Seek` sink for the Tachyon writer over a link that can only write: every
/// write goes out as a [`Record::Write`] frame with its offset (split to fit `scratch`), a
/// seek only moves the offset. [`FramedSink::new`] sends `Begin`, [`FramedSink::finish`] `End`.
///
/// A frame is sent whole or the write fails; the sequence number moves on only when it was
/// sent, so a write the Tachyon writer retries after a link error goes out with the number
/// the failed one had (the receiver refuses the damaged frame in between).
pub struct FramedSink<'b, L: Write> {
    link: L,
    scratch: &'b mut [u8],
    seq: u32,
    position: u64,
    length: u64,
    /// `End` went out (a retried [`FramedSink::finish`] then only flushes: a second `End`
    /// would make the receiver refuse the stream).
    ended: bool,
}

/// Errors of [`FramedSink`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SinkError<E> {
    /// The link failed.
    Link(E),
    /// The scratch buffer is shorter than [`MIN_SCRATCH`].
    ScratchTooSmall,
    /// A seek before the start or past `u64`.
    InvalidSeek,
    /// Past `u32::MAX` frames.
    TooManyFrames,
}

impl<E: core::fmt::Debug> core::fmt::Display for SinkError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SinkError::Link(e) => write!(f, "link: {e:?}"),
            SinkError::ScratchTooSmall => write!(f, "scratch buffer shorter than {MIN_SCRATCH} bytes"),
            SinkError::InvalidSeek => f.write_str("seek to a negative or overflowing position"),
            SinkError::TooManyFrames => f.write_str("more than 2^32 frames"),
        }
    }
}

impl<E: core::fmt::Debug> core::error::Error for SinkError<E> {}

impl<E: embedded_io::Error> embedded_io::Error for SinkError<E> {
    fn kind(&self) -> embedded_io::ErrorKind {
        match self {
            SinkError::Link(e) => e.kind(),
            SinkError::ScratchTooSmall | SinkError::InvalidSeek => embedded_io::ErrorKind::InvalidInput,
            SinkError::TooManyFrames => embedded_io::ErrorKind::OutOfMemory,
        }
    }
}

impl<'b, L: Write> FramedSink<'b, L> {
    /// Sends `Begin` on `link`; frames are staged in `scratch` (at least [`MIN_SCRATCH`]
    /// bytes; [`chunk_for`] says how many file bytes a frame then carries).
    pub fn new(link: L, scratch: &'b mut [u8]) -> Result<Self, SinkError<L::Error>> {
        if scratch.len() < MIN_SCRATCH {
            return Err(SinkError::ScratchTooSmall);
        }
        let mut sink = FramedSink { link, scratch, seq: 0, position: 0, length: 0, ended: false };
        sink.send(&Record::Begin { magic: MAGIC, version: VERSION })?;
        Ok(sink)
    }

    /// Sends `End` with the file's length (one past the highest byte written) and flushes;
    /// after a failure it can be called again (`End` goes out once).
    pub fn finish(&mut self) -> Result<u64, SinkError<L::Error>> {
        if !self.ended {
            self.send(&Record::End { length: self.length })?;
            self.ended = true;
        }
        self.link.flush().map_err(SinkError::Link)?;
        Ok(self.length)
    }

    /// Frames sent so far.
    pub fn frames(&self) -> u32 {
        self.seq
    }

    /// The link.
    pub fn into_inner(self) -> L {
        self.link
    }

    fn send(&mut self, record: &Record<'_>) -> Result<(), SinkError<L::Error>> {
        let next = self.seq.checked_add(1).ok_or(SinkError::TooManyFrames)?;
        // `chunk_for` keeps every record within the scratch buffer.
        let frame = encode(self.seq, record, self.scratch).map_err(|_| SinkError::ScratchTooSmall)?;
        self.link.write_all(frame).map_err(SinkError::Link)?;
        self.seq = next;
        Ok(())
    }
}

impl<L: Write> ErrorType for FramedSink<'_, L> {
    type Error = SinkError<L::Error>;
}

impl<L: Write> Write for FramedSink<'_, L> {
    fn write(&mut self, buf: &[u8]) -> Result<usize, Self::Error> {
        let n = buf.len().min(chunk_for(self.scratch.len()));
        if n == 0 {
            return Ok(0);
        }
        let end = self.position.checked_add(n as u64).ok_or(SinkError::InvalidSeek)?;
        self.send(&Record::Write { offset: self.position, bytes: &buf[..n] })?;
        self.position = end;
        self.length = self.length.max(end);
        Ok(n)
    }

    fn flush(&mut self) -> Result<(), Self::Error> {
        self.link.flush().map_err(SinkError::Link)
    }
}

impl<L: Write> Seek for FramedSink<'_, L> {
    fn seek(&mut self, pos: SeekFrom) -> Result<u64, Self::Error> {
        let to = match pos {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::Current(d) => self.position.checked_add_signed(d),
            SeekFrom::End(d) => self.length.checked_add_signed(d),
        };
        self.position = to.ok_or(SinkError::InvalidSeek)?;
        Ok(self.position)
    }
}

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
    pub fn accept<'f>(&mut self, frame: &Frame<'f>) -> Result<Option<(u64, &'f [u8])>, StreamError> {
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
                None
            }
            _ if self.next == 0 => return Err(StreamError::NoBegin),
            Record::Begin { .. } => return Err(StreamError::NoBegin),
            Record::Write { offset, bytes } => {
                if offset > self.length {
                    return Err(StreamError::Hole { offset, length: self.length });
                }
                self.length = self.length.max(offset.saturating_add(bytes.len() as u64));
                Some((offset, bytes))
            }
            Record::End { length } => {
                if length != self.length {
                    return Err(StreamError::Length { said: length, made: self.length });
                }
                self.ended = true;
                None
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_is_zlibs() {
        // zlib.crc32(b"123456789") and of nothing.
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn every_chunk_fits_its_scratch() {
        // The worst case: the largest offset and sequence number, bytes COBS cannot shorten.
        let bytes = [0x5au8; 4096];
        for scratch_len in MIN_SCRATCH..1200 {
            let mut scratch = [0u8; 1200];
            let n = chunk_for(scratch_len);
            assert!(n > 0, "{scratch_len}");
            let record = Record::Write { offset: u64::MAX, bytes: &bytes[..n] };
            assert!(encode(u32::MAX, &record, &mut scratch[..scratch_len]).is_ok(), "{scratch_len}: {n}");
        }
    }

    #[test]
    fn frames_decode_to_what_was_encoded_and_damage_is_found() {
        let mut buf = [0u8; 256];
        let mut scratch = [0u8; 256];
        let record = Record::Write { offset: 300, bytes: b"\x00\x01tachyon\x00" };
        let wire = encode(7, &record, &mut buf).unwrap();
        // The wire table by hand, the CRC by Python's `zlib.crc32`, COBS by a separate
        // encoder (the same bytes on every host, whatever its byte order).
        let want = [
            0x06, 0x07, 0x01, 0xac, 0x02, 0x0a, 0x09, 0x01, 0x74, 0x61, 0x63, 0x68, 0x79, 0x6f, 0x6e, 0x05, 0xab, 0x54,
            0xa7, 0xcd, 0x00,
        ];
        assert_eq!(wire, &want[..]);
        let len = wire.len();
        assert_eq!(wire[len - 1], 0);
        assert!(!wire[..len - 1].contains(&0));
        let mut copy = [0u8; 256];
        copy[..len - 1].copy_from_slice(&wire[..len - 1]);
        let frame = decode(&mut copy[..len - 1], &mut scratch).unwrap();
        assert_eq!((frame.seq, frame.record), (7, record));
        // Any one bit flipped anywhere is found (CRC or malformed), or is a zero byte the
        // receiver splits on.
        for at in 0..len - 1 {
            for bit in 0..8 {
                let mut bad = [0u8; 256];
                bad[..len - 1].copy_from_slice(&wire[..len - 1]);
                bad[at] ^= 1 << bit;
                if bad[at] == 0 {
                    continue;
                }
                assert!(decode(&mut bad[..len - 1], &mut scratch).is_err(), "byte {at} bit {bit}");
            }
        }
    }
}
