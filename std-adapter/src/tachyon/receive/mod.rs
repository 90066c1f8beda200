//! A profile streamed in frames over a link that cannot seek (the core's
//! [`tachyon_core::transport`]), put back together from a capture of the link: every frame
//! decoded, checked (CRC, sequence, no holes) and replayed at its offset. A capture with a
//! frame lost, damaged or out of place is refused, naming the frame and where it is: the
//! file made is the device's, byte for byte, or none is.
//!
//! A stream cut at its tail (the writing process killed, the link dropped) is the one
//! exception, and only when it carries the journal a `JournalWriter` sends: [`receive`]
//! then rebuilds a valid file from the samples that arrived whole and the tables the journal
//! carried, and says what was cut.
//!
//! A device's sample stream ([`tachyon_core::stream`]: definitions once, samples by id) is
//! received the same way: [`receive`] writes the file its samples make, or, cut, the file of
//! every sample that arrived whole.

mod growing;
mod stream;

pub use growing::{Growing, MAX_PENDING_BYTES};

use std::collections::HashMap;
use std::fmt;
use std::io::{self, Write};
use std::path::Path;

use tachyon_core::header::{Footer, Header, HEADER_SIZE, STATS_TRAILER_SIZE};
use tachyon_core::records::{Encoding, Prefix, MAX_STACK_DEPTH, PREFIX_LEN};
use tachyon_core::transport::{decode, Accepted, DecodeError, Receiver, Record, StreamError};
use tachyon_core::varint::{self, Scanner};
use tachyon_core::{FileKind, RunTimeEndian};

/// Why a capture does not give a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReceiveError {
    /// The bytes of a frame (from `offset` of the capture) do not decode.
    Frame {
        /// Capture offset of the frame's first byte.
        offset: usize,
        /// What is wrong.
        why: DecodeError,
    },
    /// A frame breaks the stream's rules.
    Stream {
        /// Capture offset of the frame's first byte.
        offset: usize,
        /// Which rule.
        why: StreamError,
    },
    /// The capture ends before the stream's `End` frame (`frames` frames read).
    NoEnd {
        /// Frames read.
        frames: u32,
    },
    /// The capture ends before `End` and carries no journal to rebuild the tables from (the
    /// stream was written by a plain `FramedSink`).
    NoJournal {
        /// Frames read.
        frames: u32,
    },
    /// The journal's header is not a Tachyon header.
    BadJournal {
        /// What is wrong.
        why: String,
    },
}

impl fmt::Display for ReceiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReceiveError::Frame { offset, why: DecodeError::Crc } => {
                write!(f, "offset {offset}: a damaged frame (its CRC does not match)")
            }
            ReceiveError::Frame { offset, why: DecodeError::Malformed } => {
                write!(f, "offset {offset}: bytes that are not a frame (damaged, or part of one lost)")
            }
            ReceiveError::Stream { offset, why } => write!(f, "offset {offset}: {why}"),
            ReceiveError::NoEnd { frames } => {
                write!(f, "the capture ends after {frames} frames, before the stream's End")
            }
            ReceiveError::NoJournal { frames } => write!(
                f,
                "the capture ends after {frames} frames, before the stream's End, and carries no journal \
                 of the tables to rebuild a file from (written without a JournalWriter)"
            ),
            ReceiveError::BadJournal { why } => write!(f, "the stream's journal: {why}"),
        }
    }
}

impl std::error::Error for ReceiveError {}

/// The file a capture of a framed stream holds, when the stream is complete. Memory: the
/// file (no longer than the capture: every byte of it came in a frame) and one frame's bytes.
pub fn reassemble(capture: &[u8]) -> Result<Vec<u8>, ReceiveError> {
    match receive(capture)? {
        Received { file, salvage: None } => Ok(file),
        Received { salvage: Some(s), .. } => Err(ReceiveError::NoEnd { frames: s.frames }),
    }
}

/// Replaces the complete journaled stream at `path` by the Tachyon file it holds, so that a
/// journaled run that finished cleanly leaves a file CPython reads (`tachyon_writer_finalize`
/// calls it): the file is written beside it, synced, and renamed over the stream, so a crash
/// at any moment leaves the stream or the file, never neither. Returns the file's size. A
/// stream that is not complete (cut, damaged) is left as it is, with an `InvalidData` error
/// saying why; a path that already holds a Tachyon file is left as it is.
pub fn receive_in_place(path: &Path) -> io::Result<u64> {
    let capture = std::fs::read(path)?;
    // A stream's first byte is COBS's code for frame 0's zero `seq` (1), never the magic.
    if FileKind::detect(&capture) == FileKind::Tachyon {
        return Ok(capture.len() as u64);
    }
    let file = reassemble(&capture).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    replace(path, &file)?;
    Ok(file.len() as u64)
}

/// What [`salvage_in_place`] found at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InPlace {
    /// A Tachyon file already (left as it was).
    Complete,
    /// A complete stream, replaced by its file.
    Received,
    /// A stream cut at its tail (its writer killed), replaced by the file rebuilt from it.
    Salvaged(Salvage),
}

/// As [`receive_in_place`], for a stream whose writer is gone: a stream cut at its tail is
/// replaced by the file [`receive`] rebuilds from it (every sample that arrived whole). Only
/// for a stream no process writes any more: a live writer's stream replaced under it would
/// lose what it writes next. A stream damaged elsewhere is left as it is (`InvalidData`).
pub fn salvage_in_place(path: &Path) -> io::Result<InPlace> {
    let capture = std::fs::read(path)?;
    salvage_read(path, &capture)?.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
}

/// [`salvage_in_place`] of `capture`, the bytes read from `path`: the stream's own error apart
/// from the file system's.
pub(crate) fn salvage_read(path: &Path, capture: &[u8]) -> io::Result<Result<InPlace, ReceiveError>> {
    if FileKind::detect(capture) == FileKind::Tachyon {
        return Ok(Ok(InPlace::Complete));
    }
    let received = match receive(capture) {
        Ok(received) => received,
        Err(e) => return Ok(Err(e)),
    };
    replace(path, &received.file)?;
    Ok(Ok(received.salvage.map_or(InPlace::Received, InPlace::Salvaged)))
}

/// True when `prefix` (the first bytes of a file) starts as a framed stream: its first frame
/// decodes (a journaled writer's stream, a device's capture), so `tachyon receive` makes a
/// profile of it.
pub fn is_stream(prefix: &[u8]) -> bool {
    // Frame 0 ends at the first zero byte; within what was given, it must decode whole.
    let Some(end) = prefix.iter().position(|&b| b == 0) else { return false };
    let (mut frame, mut scratch) = (prefix[..end].to_vec(), vec![0; end]);
    decode(&mut frame, &mut scratch).is_ok()
}

/// The suffix of the temporary file [`receive_in_place`] and [`salvage_in_place`] write beside
/// a stream (`NAME.PID.receiving`): one left by a process killed while writing it is removed
/// by `tachyon receive` of the folder or prefix.
pub const RECEIVING_SUFFIX: &str = ".receiving";

/// `file` written beside `path`, synced, and renamed over it.
pub(crate) fn replace(path: &Path, file: &[u8]) -> io::Result<()> {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}{RECEIVING_SUFFIX}", std::process::id()));
    let beside = path.with_file_name(name);
    let written = (|| {
        let mut out = std::fs::File::create(&beside)?;
        out.write_all(file)?;
        out.sync_all()?;
        std::fs::rename(&beside, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&beside);
        return Err(e);
    }
    // The rename itself is durable once the folder is synced (where a folder can be).
    if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        let _ = std::fs::File::open(folder).and_then(|f| f.sync_all());
    }
    Ok(())
}

/// What [`receive`] made.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    /// The Tachyon file.
    pub file: Vec<u8>,
    /// Set when the stream was cut and the file rebuilt from what arrived.
    pub salvage: Option<Salvage>,
}

/// How a cut stream was salvaged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Salvage {
    /// Frames that arrived whole.
    pub frames: u32,
    /// Capture bytes after the last whole frame (a frame cut while it was being written).
    pub incomplete_bytes: usize,
    /// Sample-region bytes after the last whole record (a record cut between two frames).
    pub cut_record_bytes: u64,
    /// Samples kept.
    pub samples: u64,
}

impl fmt::Display for Salvage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the stream was cut: rebuilt from {} whole frames, {} samples kept; {} bytes at the end were an \
             incomplete frame, {} bytes of the sample region an incomplete record",
            self.frames, self.samples, self.incomplete_bytes, self.cut_record_bytes
        )
    }
}

/// The journal of a stream: what rebuilds the tables.
#[derive(Default)]
struct Journal {
    header: Option<[u8; HEADER_SIZE]>,
    strings: Vec<Vec<u8>>,
    /// The last string goes on in the next `String` record.
    string_open: bool,
    frames: Vec<Vec<u8>>,
    stats: Option<Vec<u8>>,
    /// Where the sample region ends, once `finish` said so (`Tables`).
    tables: Option<u64>,
}

impl Journal {
    fn take(&mut self, record: Record<'_>) {
        match record {
            Record::Header { bytes } => self.header = bytes.try_into().ok(),
            Record::String { bytes, continues } => {
                match self.strings.last_mut() {
                    Some(last) if self.string_open => last.extend_from_slice(bytes),
                    _ => self.strings.push(bytes.to_vec()),
                }
                self.string_open = continues;
            }
            Record::Frame { bytes } => self.frames.push(bytes.to_vec()),
            Record::Stats { bytes } => self.stats = Some(bytes.to_vec()),
            Record::Tables { offset } => self.tables = Some(offset),
            Record::Begin { .. } | Record::Write { .. } | Record::End { .. } => {}
        }
    }
}

/// The file a capture of a framed stream holds: the writes replayed when the stream is
/// complete; when it was cut at its tail and carries a journal, a file rebuilt from every
/// sample record that arrived whole (uncompressed region, the journal's tables, its last
/// stats). Damage anywhere but the tail is refused as [`reassemble`] refuses it.
pub fn receive(capture: &[u8]) -> Result<Received, ReceiveError> {
    // A device's sample stream (`tachyon_core::stream`) is written as the file its samples make.
    if let Some(end) = capture.iter().position(|&b| b == 0) {
        if stream::begins_stream(&capture[..end]) {
            return stream::receive(capture);
        }
    }
    let mut file = Vec::new();
    let mut receiver = Receiver::new();
    let mut journal = Journal::default();
    let (mut frame, mut scratch) = (Vec::new(), Vec::new());
    let mut frames = 0;
    let mut offset = 0;
    // The bytes after the last 0x00 are a frame that was still being written.
    let whole = capture.iter().rposition(|&b| b == 0).map_or(0, |last| last + 1);
    for bytes in capture[..whole].split(|&b| b == 0) {
        let at = offset;
        offset += bytes.len() + 1;
        if bytes.is_empty() {
            continue;
        }
        // Decoded in place, so a copy; the CRC is checked over at most as many bytes.
        frame.clear();
        frame.extend_from_slice(bytes);
        scratch.resize(bytes.len(), 0);
        let decoded = decode(&mut frame, &mut scratch).map_err(|why| ReceiveError::Frame { offset: at, why })?;
        frames += 1;
        match receiver.accept(&decoded).map_err(|why| ReceiveError::Stream { offset: at, why })? {
            Accepted::Write { offset: start, bytes: data } => {
                // No holes: `start` is at most the length so far.
                let start = start as usize;
                let end = start + data.len();
                if file.len() < end {
                    file.resize(end, 0);
                }
                file[start..end].copy_from_slice(data);
            }
            Accepted::Journal(record) => journal.take(record),
            Accepted::Nothing => {}
        }
    }
    let incomplete_bytes = capture.len() - whole;
    if receiver.complete() {
        if incomplete_bytes > 0 {
            return Err(ReceiveError::Stream { offset: whole, why: StreamError::AfterEnd });
        }
        return Ok(Received { file, salvage: None });
    }
    let Some(header) = journal.header else {
        // A journaled stream sends its header before any write: writes without one are a
        // plain stream's.
        return Err(if file.is_empty() { ReceiveError::NoEnd { frames } } else { ReceiveError::NoJournal { frames } });
    };
    salvage(file, &journal, header, frames, incomplete_bytes)
}

/// Rebuilds a file from the sample bytes that arrived and the journal.
fn salvage(
    mut file: Vec<u8>,
    journal: &Journal,
    header: [u8; HEADER_SIZE],
    frames: u32,
    incomplete_bytes: usize,
) -> Result<Received, ReceiveError> {
    let (mut head, endian) = journal_header(journal, header)?;
    // Once `finish` said where the samples end, what follows is tables, never samples.
    if let Some(end) = journal.tables {
        if end < HEADER_SIZE as u64 || end > file.len() as u64 {
            let why = format!("the sample region ends at {end}, outside the {} bytes received", file.len());
            return Err(ReceiveError::BadJournal { why });
        }
        file.truncate(end as usize);
    }
    file.resize(file.len().max(HEADER_SIZE), 0);
    let scan = scan_records(&file[HEADER_SIZE..], endian, journal.frames.len() as u64);
    let region_end = HEADER_SIZE + scan.whole_bytes;
    let cut_record_bytes = (file.len() - region_end) as u64;
    file.truncate(region_end);
    head.sample_count = scan.samples;
    head.thread_count = scan.threads;
    append_tables(&mut file, journal, head, endian);
    let salvage = Salvage { frames, incomplete_bytes, cut_record_bytes, samples: scan.samples };
    Ok(Received { file, salvage: Some(salvage) })
}

/// The journal's header, checked as a rebuilt file needs it: an uncompressed region (zstd
/// holds bytes back, so a cut region cannot be decoded) and stats of the trailer's size.
fn journal_header(journal: &Journal, header: [u8; HEADER_SIZE]) -> Result<(Header, RunTimeEndian), ReceiveError> {
    let bad = |why: String| ReceiveError::BadJournal { why };
    let (head, endian, _) = Header::decode(&header, u64::MAX).map_err(|e| bad(format!("{e:?}")))?;
    if head.compression != tachyon_core::Compression::None {
        return Err(bad("the sample region is compressed; only an uncompressed one can be salvaged".into()));
    }
    if let Some(stats) = journal.stats.as_ref().filter(|s| s.len() != STATS_TRAILER_SIZE) {
        return Err(bad(format!("a stats record of {} bytes ({STATS_TRAILER_SIZE} expected)", stats.len())));
    }
    Ok((head, endian))
}

/// Appends the journal's tables, its last stats and the footer to `file` (the header and
/// the whole records), and writes `head`, with the tables' offsets, over its header.
fn append_tables<E: tachyon_core::Endianity>(file: &mut Vec<u8>, journal: &Journal, mut head: Header, endian: E) {
    let string_table_offset = file.len() as u64;
    for string in &journal.strings {
        let mut len = [0u8; varint::MAX_VARINT_LEN];
        let n = varint::encode_u64(string.len() as u64, &mut len);
        file.extend_from_slice(&len[..n]);
        file.extend_from_slice(string);
    }
    let frame_table_offset = file.len() as u64;
    for entry in &journal.frames {
        file.extend_from_slice(entry);
    }
    if let Some(stats) = &journal.stats {
        file.extend_from_slice(stats);
    }
    let footer = Footer {
        string_count: journal.strings.len() as u32,
        frame_count: journal.frames.len() as u32,
        file_size: file.len() as u64 + tachyon_core::header::FOOTER_SIZE as u64,
    };
    file.extend_from_slice(&footer.encode(endian));
    head.string_table_offset = string_table_offset;
    head.frame_table_offset = frame_table_offset;
    file[..HEADER_SIZE].copy_from_slice(&head.encode(endian));
}

/// What the whole records at the start of a sample region hold.
struct Scan {
    /// Bytes of the whole records.
    whole_bytes: usize,
    samples: u64,
    threads: u32,
}

/// Walks the sample records of `region` and stops before the first that is cut short or
/// that CPython's reader would refuse (spec 9: counts past 32 bits, a stack deeper than 256,
/// a SUFFIX sharing more than the thread's stack, a frame the journal did not carry). The
/// walk's limits are the region's length: a count is never trusted beyond the bytes there
/// are.
fn scan_records<E: tachyon_core::Endianity>(region: &[u8], endian: E, frames: u64) -> Scan {
    let mut at = 0;
    let mut samples = 0u64;
    let mut depths: HashMap<(u64, u32), usize> = HashMap::new();
    while let Some(record) = record_at(region.get(at..).unwrap_or(&[]), endian, frames, &depths) {
        at += record.len;
        samples += record.samples;
        depths.insert(record.thread, record.depth);
    }
    Scan { whole_bytes: at, samples, threads: depths.len() as u32 }
}

/// A whole record: its length, its samples, its thread and the thread's stack depth after it.
struct Whole {
    len: usize,
    samples: u64,
    thread: (u64, u32),
    depth: usize,
}

/// The whole record at the start of `bytes`, given each thread's stack depth so far.
fn record_at<E: tachyon_core::Endianity>(
    bytes: &[u8],
    endian: E,
    frames: u64,
    depths: &HashMap<(u64, u32), usize>,
) -> Option<Whole> {
    let prefix = Prefix::decode(bytes.get(..PREFIX_LEN)?.try_into().ok()?, endian);
    let thread = (prefix.thread_id, prefix.interpreter_id);
    let before = depths.get(&thread).copied().unwrap_or(0);
    let mut c = Scanner::new(bytes, PREFIX_LEN);
    let (samples, depth) = match Encoding::from_byte(prefix.encoding)? {
        Encoding::Repeat => {
            // Each entry takes at least two bytes, so the loop ends with the bytes.
            let count = c.varint32()?;
            for _ in 0..count {
                c.varint()?; // timestamp delta
                c.byte()?; // status
            }
            (u64::from(count), before)
        }
        encoding => {
            c.varint()?; // timestamp delta
            c.byte()?; // status
            let first = c.varint32()? as usize;
            let (listed, depth) = match encoding {
                Encoding::Full => (first, first),
                Encoding::Suffix => {
                    let push = c.varint32()? as usize;
                    (first <= before).then_some((push, first + push))?
                }
                _ => {
                    let push = c.varint32()? as usize;
                    (push, before.saturating_sub(first) + push)
                }
            };
            if depth > MAX_STACK_DEPTH {
                return None;
            }
            for _ in 0..listed {
                if u64::from(c.varint32()?) >= frames {
                    return None;
                }
            }
            (1, depth)
        }
    };
    Some(Whole { len: c.at, samples, thread, depth })
}
