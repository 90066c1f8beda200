//! A journaled stream received while its writer still writes it (the capture path's journal,
//! a rotating writer's live period, a device's capture as it arrives): each [`Growing::feed`]
//! takes the capture's next bytes, and what came whole is handed out once — the sample
//! records ([`Growing::take_records`]) and the header and tables the journal carried so far
//! ([`Growing::tables`]), for a [`tachyon_core::Reader::open_growing`] that keeps the
//! threads' stacks between them. Memory: the journal's tables, the frame still being written
//! and the record still being written, never the stream's samples.

use std::collections::HashMap;

use tachyon_core::header::HEADER_SIZE;
use tachyon_core::transport::{decode, Accepted, Receiver};

use super::{append_tables, journal_header, record_at, Journal, ReceiveError};

/// Bytes a frame or a record may take before its end arrives: beyond them, the bytes are not
/// a stream this reads (no frame ends, or a record never does).
pub const MAX_PENDING_BYTES: usize = 64 << 20;

/// A journaled stream received as it grows.
#[derive(Default)]
pub struct Growing {
    receiver: Receiver,
    journal: Journal,
    /// Frames decoded.
    frames: u32,
    /// Capture bytes taken in.
    taken: u64,
    /// The capture's bytes after its last frame end: a frame still being written.
    partial: Vec<u8>,
    /// File offset of `region`'s first byte, the sample-region bytes not handed out yet.
    region_at: u64,
    region: Vec<u8>,
    /// Each thread's stack depth after the records handed out (the scan's rules need it).
    depths: HashMap<(u64, u32), usize>,
    /// Strings and frames of the last tables handed out.
    tables_given: Option<(usize, usize)>,
    /// Samples in the records handed out.
    samples: u64,
    /// Scratch for decoding a frame.
    frame: Vec<u8>,
    scratch: Vec<u8>,
}

impl Growing {
    /// A stream of which nothing was received yet.
    pub fn new() -> Self {
        Growing { region_at: HEADER_SIZE as u64, ..Growing::default() }
    }

    /// Capture bytes taken in so far.
    pub fn taken(&self) -> u64 {
        self.taken
    }

    /// Samples in the records handed out so far.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// True once the stream's `End` arrived: the writer finished.
    pub fn is_complete(&self) -> bool {
        self.receiver.complete()
    }

    /// Takes in the capture's next bytes. Errors are those of [`super::receive`], at capture
    /// offsets (a stream written without a journal is [`ReceiveError::NoJournal`] at its
    /// first write: it can only be read once complete); a stream that writes its sample region anywhere but at its end (which a
    /// journaled writer never does) is refused, as is a frame or record that never ends
    /// ([`MAX_PENDING_BYTES`]).
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), ReceiveError> {
        let mut rest = bytes;
        while let Some(end) = rest.iter().position(|&b| b == 0) {
            let at = self.taken - self.partial.len() as u64;
            if self.partial.is_empty() {
                self.frame(&rest[..end], at)?;
            } else {
                let mut whole = std::mem::take(&mut self.partial);
                whole.extend_from_slice(&rest[..end]);
                self.frame(&whole, at)?;
            }
            self.taken += end as u64 + 1;
            rest = &rest[end + 1..];
        }
        if self.partial.len() + rest.len() > MAX_PENDING_BYTES {
            let why = format!("no frame ends in the {MAX_PENDING_BYTES} bytes from offset {}", self.taken);
            return Err(ReceiveError::BadJournal { why });
        }
        self.partial.extend_from_slice(rest);
        self.taken += rest.len() as u64;
        Ok(())
    }

    /// One frame's bytes (without its end), from capture offset `at`.
    fn frame(&mut self, bytes: &[u8], at: u64) -> Result<(), ReceiveError> {
        if bytes.is_empty() {
            return Ok(());
        }
        let offset = at as usize;
        self.frame.clear();
        self.frame.extend_from_slice(bytes);
        self.scratch.resize(bytes.len(), 0);
        let decoded = decode(&mut self.frame, &mut self.scratch).map_err(|why| ReceiveError::Frame { offset, why })?;
        self.frames += 1;
        match self.receiver.accept(&decoded).map_err(|why| ReceiveError::Stream { offset, why })? {
            Accepted::Write { offset: start, bytes: data } => {
                // A journaled stream sends its header before any write (see `receive`).
                if self.journal.header.is_none() {
                    return Err(ReceiveError::NoJournal { frames: self.frames });
                }
                // The header (written first, and again at the end) and, once `finish` said
                // where the samples end, the tables are not samples.
                let samples_end = self.journal.tables.unwrap_or(u64::MAX);
                let from = start.max(HEADER_SIZE as u64);
                let to = (start + data.len() as u64).min(samples_end);
                if from < to {
                    let next = self.region_at + self.region.len() as u64;
                    if from != next {
                        let why = format!(
                            "the frame at offset {offset} writes the sample region at {from}, not at its end {next}: \
                             not a stream that can be read while it grows"
                        );
                        return Err(ReceiveError::BadJournal { why });
                    }
                    self.region.extend_from_slice(&data[(from - start) as usize..(to - start) as usize]);
                }
            }
            Accepted::Journal(record) => self.journal.take(record),
            Accepted::Nothing => {}
        }
        Ok(())
    }

    /// The sample records that arrived whole since the last call, in file order (a record
    /// still being written waits for the next). Records are only handed out once the
    /// journal's header arrived and within its rules (see [`super::receive`]'s salvage): a
    /// record the stream never completes stops the records after it.
    pub fn take_records(&mut self) -> Result<Vec<u8>, ReceiveError> {
        let Some(header) = self.journal.header else { return Ok(Vec::new()) };
        let (_, endian) = journal_header(&self.journal, header)?;
        let frames = self.journal.frames.len() as u64;
        let mut at = 0;
        while let Some(record) = record_at(&self.region[at..], endian, frames, &self.depths) {
            at += record.len;
            self.samples += record.samples;
            self.depths.insert(record.thread, record.depth);
        }
        if self.region.len() - at > MAX_PENDING_BYTES {
            let why =
                format!("no record ends in the {MAX_PENDING_BYTES} bytes from sample-region offset {}", self.region_at);
            return Err(ReceiveError::BadJournal { why });
        }
        let rest = self.region.split_off(at);
        self.region_at += at as u64;
        Ok(std::mem::replace(&mut self.region, rest))
    }

    /// A Tachyon file of the journal's header and tables so far, with no samples, when they
    /// changed since the last call (the first call after the header arrived gives one):
    /// what [`tachyon_core::Reader::open_growing`] and `reload_tables` read tables from.
    pub fn tables(&mut self) -> Result<Option<Vec<u8>>, ReceiveError> {
        let Some(header) = self.journal.header else { return Ok(None) };
        // A string still being sent is left out until it is whole.
        let whole = self.journal.strings.len() - usize::from(self.journal.string_open);
        let now = (whole, self.journal.frames.len());
        if self.tables_given == Some(now) {
            return Ok(None);
        }
        let (mut head, endian) = journal_header(&self.journal, header)?;
        head.sample_count = 0;
        head.thread_count = 0;
        let mut file = vec![0; HEADER_SIZE];
        let open = if self.journal.string_open { self.journal.strings.pop() } else { None };
        append_tables(&mut file, &self.journal, head, endian);
        if let Some(open) = open {
            self.journal.strings.push(open);
        }
        self.tables_given = Some(now);
        Ok(Some(file))
    }
}
