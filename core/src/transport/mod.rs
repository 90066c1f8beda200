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
//! | `record` | enum tag varint, then its fields | one of the records below |
//! | `crc` | 4 bytes | CRC-32 (IEEE, as zlib's `crc32`) of the postcard bytes of `seq` and `record`, little-endian |
//!
//! | record | fields | meaning |
//! |---|---|---|
//! | `Begin` (0) | `magic: [u8; 4]` = `TCHF`, `version: u8` = 1 | the first frame of a stream |
//! | `Write` (1) | `offset: u64` varint, `bytes` length-prefixed | the writer wrote `bytes` at `offset` |
//! | `End` (2) | `length: u64` varint | the file is complete and `length` bytes long |
//! | `Header` (3) | `bytes` length-prefixed | the 64-byte header the file would have with no samples (byte order, version, times, compression, configuration) |
//! | `String` (4) | `bytes` length-prefixed, `continues: bool` | the next string of the string table (or its next part, when the one before said `continues`) |
//! | `Frame` (5) | `bytes` length-prefixed | the next frame table entry, as the table encodes it |
//! | `Stats` (6) | `bytes` length-prefixed | the 56-byte stats trailer as it stands |
//! | `Tables` (7) | `offset: u64` varint | the sample region is complete and ends at `offset`; the writes after this record are the tables, trailer, footer and header `finish` writes |
//!
//! Records 3–7 are the journal a [`JournalWriter`] adds: Tachyon's tables come at the end
//! of the file, so a stream cut before `End` would hold samples naming strings and frames
//! it never carried. The journal sends each new string and frame ahead of the first
//! sample bytes that use them; a receiver of a cut stream rebuilds the tables from it and
//! keeps every sample record that arrived whole (std's `tachyon receive`), and never reads
//! past a `Tables` offset for samples, however the cut falls in `finish`. A complete stream
//! is replayed from its writes alone: the journal does not change the file. (`Tables` came
//! after version 1's first release; a stream without it is read as before.)
//!
//! A receiver that finds a frame that does not decode, a CRC that does not match, a gap in
//! `seq`, or a write leaving a hole refuses the stream: it never makes a file that differs
//! from what the device wrote. Only a stream cut at its tail, journal and all, can be
//! salvaged.

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
    /// The header the file would have with no samples.
    Header {
        /// Its 64 bytes.
        #[serde(borrow)]
        bytes: &'a [u8],
    },
    /// The next string of the string table, or the next part of one.
    String {
        /// Its bytes (or this part's).
        #[serde(borrow)]
        bytes: &'a [u8],
        /// The next `String` record goes on with this string.
        continues: bool,
    },
    /// The next frame table entry, encoded.
    Frame {
        /// Its bytes.
        #[serde(borrow)]
        bytes: &'a [u8],
    },
    /// The stats trailer as it stands.
    Stats {
        /// Its 56 bytes.
        #[serde(borrow)]
        bytes: &'a [u8],
    },
    /// The sample region is complete and ends at `offset`: what follows is `finish`'s.
    Tables {
        /// The file offset where the string table starts.
        offset: u64,
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

pub use crate::framing::crc32;

/// The most file bytes one frame carries with a scratch buffer of `scratch` bytes: the
/// frame's fixed fields take at most 26 bytes (tags, `seq`, `offset`, the length, the CRC),
/// and COBS adds one byte per 254 and two more.
pub const fn chunk_for(scratch: usize) -> usize {
    let payload = scratch.saturating_sub(2) * 254 / 255;
    payload.saturating_sub(26)
}

mod journal;
mod receiver;
mod sink;

pub use journal::{FlushPolicy, JournalWriter, JOURNAL_MIN_SCRATCH};
pub use receiver::{Accepted, Receiver, StreamError};
pub use sink::{FramedSink, SinkError};

#[cfg(test)]
mod tests {
    use super::*;

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
