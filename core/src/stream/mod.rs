//! A profile streamed from a device too small to hold its tables: the device sends each
//! frame's definition once, the first time a sample uses it, and every sample by the ids its
//! runtime already has; the host (`tachyon receive`) keeps the tables and writes the Tachyon
//! file — the file a [`Writer`](crate::Writer) makes of the same samples.
//!
//! The device keeps a bit per id it may send ([`StreamWriter`]'s `sent`, the caller's
//! storage: a firmware's function table is the id space), one frame of items in the caller's
//! transmit buffer, and a few counters. It needs no allocator, no tables, no stack history.
//!
//! # Wire format
//!
//! Frames as the `transport` module frames them: COBS-encoded, each ended by `0x00`, so a
//! receiver finds the next frame after any damage. Inside:
//!
//! | field | encoding | meaning |
//! |---|---|---|
//! | `seq` | varint u32 (LEB128) | 0 for the first frame, then +1 each, wrapping from 2^32 − 1 to 0 |
//! | `kind` | byte | one of the kinds below |
//! | body | per kind | |
//! | `crc` | 4 bytes | CRC-32 (zlib's) of `seq`, `kind` and the body, little-endian |
//!
//! | kind | body | meaning |
//! |---|---|---|
//! | `Begin` (0) | `TCHS`, version byte 1 | the first frame (the transport's `Begin`, by its magic a stream) |
//! | `Header` (1) | 64 bytes | the file's header before anything is counted ([`WriterConfig::header_template`](crate::WriterConfig::header_template), in the device's byte order) |
//! | `Items` (2) | items to the body's end | definitions, samples and counts, below |
//! | `End` (3) | varint u64 | the stream is complete and carried this many samples |
//!
//! | item | fields | meaning |
//! |---|---|---|
//! | `Define` (1) | id varint u32; file name and function name, each a varint length and its bytes; line, end line, column, end column, each a zigzag varint i32 (−1: none); opcode byte (255: none) | id names this frame from here on |
//! | `Thread` (2) | interpreter id varint u32, thread id varint u64 | the samples after it are this thread's |
//! | `Sample` (3) | time delta varint u64 (µs after the time base), status byte, depth varint, then that many ids varint u32, innermost first | a sample; the time base becomes its timestamp |
//! | `Time` (4) | timestamp varint u64 | the time base becomes this (before a sample earlier than the one before it) |
//! | `Counts` (5) | dropped varint u64, refused varint u64 | the totals so far of samples that never reached the stream and that it refused: the file's stats |
//!
//! Each `Items` frame starts with no thread and a time base of 0, so it reads on its own: a
//! frame lost does not change how the next one reads. A `Sample` names ids a `Define` came
//! for in this frame or an earlier one (a later `Define` of an id replaces it), at most 256.
//!
//! # What the receiver accepts
//!
//! Frames in sequence from `Begin`, one `Header`, then `Items`, then `End`. A frame the
//! sender's link failed to take whole leaves bytes that do not decode; the sender then sends
//! a `0x00` and its next frame with the same `seq`, so damage followed by the very frame due
//! is the sender's own failed send (its samples counted dropped in `Counts`), and is
//! skipped. Any other damage, gap or misplaced frame refuses the stream; a stream cut
//! anywhere gives the file of every sample in the frames that arrived whole.

mod decode;
mod writer;

pub use decode::{decode, Body, DecodeError, Ids, Item, ItemError, ItemRule, Items, StreamFrame};
pub use writer::{ids_words, StreamWriter, WriteError, MIN_BUFFER};

/// The `Begin` frame's magic.
pub const MAGIC: [u8; 4] = *b"TCHS";

/// The stream format's version.
pub const VERSION: u8 = 1;

/// Frame kinds.
pub(crate) mod kind {
    pub const BEGIN: u8 = 0;
    pub const HEADER: u8 = 1;
    pub const ITEMS: u8 = 2;
    pub const END: u8 = 3;
}

/// Item tags.
pub(crate) mod item {
    pub const DEFINE: u8 = 1;
    pub const THREAD: u8 = 2;
    pub const SAMPLE: u8 = 3;
    pub const TIME: u8 = 4;
    pub const COUNTS: u8 = 5;
}

/// The CRC's bytes at a frame's end.
pub(crate) const CRC_LEN: usize = 4;
