//! The receiving side: a frame's bytes decoded and checked, its items read one at a time.
//! Every count is checked against the bytes there are before it is trusted.

use super::{item, kind, CRC_LEN};
use crate::capture::Taken;
use crate::framing::{crc32, decode_cobs};
use crate::header::HEADER_SIZE;
use crate::records::MAX_STACK_DEPTH;
use crate::tables::Location;
use crate::varint::{self, Scanner};
use crate::writer::Frame;

/// Why bytes between two `0x00` are not a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DecodeError {
    /// Not COBS, too short, an unknown kind, or a body its kind does not allow.
    Malformed,
    /// The CRC does not match: the frame was damaged (or the sender's link failed in it).
    Crc,
}

impl core::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            DecodeError::Malformed => "bytes that are not a stream frame",
            DecodeError::Crc => "a damaged frame (its CRC does not match)",
        })
    }
}

/// One frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamFrame<'a> {
    /// Its sequence number.
    pub seq: u32,
    /// What it carries.
    pub body: Body<'a>,
}

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body<'a> {
    /// The stream begins (the caller checks the magic and version: a stream of another
    /// kind is refused by name, not as damage).
    Begin {
        /// [`MAGIC`](super::MAGIC) for this format.
        magic: [u8; 4],
        /// Its version.
        version: u8,
    },
    /// The file's header before anything is counted.
    Header(&'a [u8; HEADER_SIZE]),
    /// Items, read with [`Items`].
    Items(Items<'a>),
    /// The stream is complete.
    End {
        /// The samples it carried.
        samples: u64,
    },
}

/// Decodes the COBS bytes of one frame (without its closing `0x00`) in place and checks it.
pub fn decode(bytes: &mut [u8]) -> Result<StreamFrame<'_>, DecodeError> {
    let len = decode_cobs(bytes).ok_or(DecodeError::Malformed)?;
    let frame = bytes.get(..len).ok_or(DecodeError::Malformed)?;
    let crc_at = len.checked_sub(CRC_LEN).ok_or(DecodeError::Malformed)?;
    let (covered, crc) = frame.split_at(crc_at);
    if crc32(covered).to_le_bytes() != crc {
        return Err(DecodeError::Crc);
    }
    let (seq, n) = varint::decode_u32(covered).map_err(|_| DecodeError::Malformed)?;
    let (&kind, body) = covered.get(n..).and_then(<[u8]>::split_first).ok_or(DecodeError::Malformed)?;
    let body = match kind {
        kind::BEGIN => match *body {
            [a, b, c, d, version] => Body::Begin { magic: [a, b, c, d], version },
            _ => return Err(DecodeError::Malformed),
        },
        kind::HEADER => Body::Header(body.try_into().map_err(|_| DecodeError::Malformed)?),
        kind::ITEMS => Body::Items(Items::new(body)),
        kind::END => match varint::decode_u64(body) {
            Ok((samples, n)) if n == body.len() => Body::End { samples },
            _ => return Err(DecodeError::Malformed),
        },
        _ => return Err(DecodeError::Malformed),
    };
    Ok(StreamFrame { seq, body })
}

/// An item of an `Items` frame (`Thread` and `Time` are read into the samples after them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item<'a> {
    /// Id `id` names `frame` from here on.
    Define {
        /// The id.
        id: u32,
        /// The frame.
        frame: Frame<'a>,
    },
    /// A sample.
    Sample {
        /// Its time, thread and status.
        taken: Taken,
        /// Its frames' ids, innermost first.
        ids: Ids<'a>,
    },
    /// The sender's totals so far.
    Counts {
        /// Samples that never reached the stream.
        dropped: u64,
        /// Samples the stream refused.
        refused: u64,
    },
}

/// Why an item does not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ItemError {
    /// Offset of the item in the frame's body.
    pub offset: usize,
    /// The rule it breaks.
    pub rule: ItemRule,
}

/// The rules an item can break.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ItemRule {
    /// It ends past the body's end (or a varint is not one).
    Cut,
    /// An unknown item tag.
    UnknownItem(u8),
    /// A sample before any `Thread` item of its frame.
    NoThread,
    /// A sample of more than 256 frames.
    TooDeep,
    /// A sample's time past 2^64 − 1 µs.
    TimeOverflow,
}

impl core::fmt::Display for ItemError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "item at body offset {}: ", self.offset)?;
        match self.rule {
            ItemRule::Cut => f.write_str("it runs past the frame's end"),
            ItemRule::UnknownItem(tag) => write!(f, "unknown item tag {tag}"),
            ItemRule::NoThread => f.write_str("a sample before any thread in its frame"),
            ItemRule::TooDeep => write!(f, "a sample of more than {MAX_STACK_DEPTH} frames"),
            ItemRule::TimeOverflow => f.write_str("a time past 2^64 - 1 microseconds"),
        }
    }
}

impl core::error::Error for ItemError {}

/// The items of one `Items` frame, in order; after an error, nothing more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Items<'a> {
    bytes: &'a [u8],
    at: usize,
    thread: Option<(u32, u64)>,
    time_base_us: u64,
    failed: bool,
}

impl<'a> Items<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Items { bytes, at: 0, thread: None, time_base_us: 0, failed: false }
    }

    fn next_item(&mut self) -> Result<Option<Item<'a>>, ItemError> {
        loop {
            let start = self.at;
            let mut c = Scanner::new(self.bytes, start);
            let fail = |rule| ItemError { offset: start, rule };
            let Some(tag) = c.byte() else { return Ok(None) };
            let cut = || fail(ItemRule::Cut);
            let item = match tag {
                item::DEFINE => {
                    let id = c.varint32().ok_or_else(cut)?;
                    let filename = c.string().ok_or_else(cut)?;
                    let funcname = c.string().ok_or_else(cut)?;
                    let mut n = [0i32; 4];
                    for slot in &mut n {
                        *slot = varint::zigzag_decode(c.varint32().ok_or_else(cut)?);
                    }
                    let opcode = c.byte().ok_or_else(cut)?;
                    let [lineno, end_lineno, col, end_col] = n;
                    let location = Location { lineno, end_lineno, col, end_col };
                    let frame = Frame {
                        filename,
                        funcname,
                        location: (n != [-1; 4]).then_some(location),
                        opcode: (opcode != 255).then_some(opcode),
                    };
                    Some(Item::Define { id, frame })
                }
                item::THREAD => {
                    let interpreter = c.varint32().ok_or_else(cut)?;
                    self.thread = Some((interpreter, c.varint().ok_or_else(cut)?));
                    None
                }
                item::TIME => {
                    self.time_base_us = c.varint().ok_or_else(cut)?;
                    None
                }
                item::SAMPLE => {
                    let delta = c.varint().ok_or_else(cut)?;
                    let status = c.byte().ok_or_else(cut)?;
                    let depth = c.varint().ok_or_else(cut)?;
                    let (interpreter_id, thread_id) = self.thread.ok_or(fail(ItemRule::NoThread))?;
                    let timestamp_us = self.time_base_us.checked_add(delta).ok_or(fail(ItemRule::TimeOverflow))?;
                    if depth > MAX_STACK_DEPTH as u64 {
                        return Err(fail(ItemRule::TooDeep));
                    }
                    let ids_at = c.at;
                    for _ in 0..depth {
                        c.varint32().ok_or_else(cut)?;
                    }
                    self.time_base_us = timestamp_us;
                    let taken = Taken { timestamp_us, interpreter_id, thread_id, status };
                    let ids = Ids { bytes: c.bytes.get(ids_at..c.at).unwrap_or_default(), left: depth as usize };
                    Some(Item::Sample { taken, ids })
                }
                item::COUNTS => {
                    let dropped = c.varint().ok_or_else(cut)?;
                    let refused = c.varint().ok_or_else(cut)?;
                    Some(Item::Counts { dropped, refused })
                }
                other => return Err(fail(ItemRule::UnknownItem(other))),
            };
            self.at = c.at;
            if let Some(item) = item {
                return Ok(Some(item));
            }
        }
    }
}

impl<'a> Iterator for Items<'a> {
    type Item = Result<Item<'a>, ItemError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let next = self.next_item();
        self.failed = next.is_err();
        next.transpose()
    }
}

/// A sample's frame ids, innermost first (read and checked with the sample).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ids<'a> {
    bytes: &'a [u8],
    left: usize,
}

impl Iterator for Ids<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        if self.left == 0 {
            return None;
        }
        let (id, n) = varint::decode_u32(self.bytes).ok()?;
        self.bytes = self.bytes.get(n..).unwrap_or_default();
        self.left -= 1;
        Some(id)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Ids<'_> {}
