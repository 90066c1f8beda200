//! Streaming reader: header, then records one by one over a caller's window, then the tail.
//!
//! The rules are google-pprof 2.10's (`ReadCPUProfile` and `CpuProfileStream`), the format's
//! own reader: what it accepts is accepted here and counted as it counts; what it merely
//! tolerates is named in [`Quirks`]. Each record is bounds-checked once, when the window
//! holds all of it; its program counters are then decoded from the window without copies.

use embedded_io::Read;

use crate::inbox::Inbox;

use super::word::{RunTimeWord, Word};
use super::{Header, Quirks, ReadError, Rule, MAX_DEPTH};
use crate::endian::{Endianity, RunTimeEndian};

/// The smallest window a reader accepts: the header of a 64-bit file with room to spare.
pub const MIN_WINDOW: usize = 64;

/// The window that holds any record a reader accepts: count, depth and [`MAX_DEPTH`]
/// 8-byte program counters, plus the slot after them that tells an end marker.
pub const LARGEST_RECORD_WINDOW: usize = (MAX_DEPTH as usize + 3) * 8;

/// Finds word size and byte order as google-pprof does, from a file's first 16 bytes (8
/// suffice for 32-bit files): bytes 0..8 all zero mean 8-byte slots; then the header's
/// second slot, the count of header words, must be small, and where its high half is zero
/// tells the order.
pub fn detect(prefix: &[u8]) -> Result<(RunTimeWord, RunTimeEndian), Rule> {
    let too_short = |needed: usize| Rule::TooShort { len: prefix.len() as u64, needed: needed as u64 };
    let first = prefix.get(..8).ok_or_else(|| too_short(8))?;
    let zero = |r: core::ops::Range<usize>| prefix.get(r).is_some_and(|b| b.iter().all(|&x| x == 0));
    if first.iter().any(|&b| b != 0) {
        if zero(6..8) {
            Ok((RunTimeWord::Four, RunTimeEndian::Little))
        } else if zero(4..6) {
            Ok((RunTimeWord::Four, RunTimeEndian::Big))
        } else {
            Err(Rule::HeaderWordsUnreadable)
        }
    } else {
        if prefix.len() < 16 {
            return Err(too_short(16));
        }
        if zero(12..16) {
            Ok((RunTimeWord::Eight, RunTimeEndian::Little))
        } else if zero(8..12) {
            Ok((RunTimeWord::Eight, RunTimeEndian::Big))
        } else {
            Err(Rule::HeaderWordsUnreadable)
        }
    }
}

/// A record's program counters, innermost first, decoded from the window on demand.
#[derive(Clone, Copy)]
pub struct Pcs<'r, W: Word, E: Endianity> {
    bytes: &'r [u8],
    word: W,
    endian: E,
}

impl<'r, W: Word, E: Endianity> Pcs<'r, W, E> {
    /// How many.
    pub fn len(&self) -> usize {
        self.bytes.len() / self.word.bytes()
    }

    /// True for none.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The `i`-th, innermost first.
    pub fn get(&self, i: usize) -> Option<u64> {
        let w = self.word.bytes();
        self.word.read(self.endian, self.bytes.get(i.checked_mul(w)?..)?)
    }

    /// All of them, innermost first.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = u64> + 'r
    where
        W: 'r,
        E: 'r,
    {
        let (word, endian) = (self.word, self.endian);
        self.bytes.chunks_exact(word.bytes()).map(move |c| word.read(endian, c).unwrap_or(0))
    }

    /// The bytes they were decoded from.
    pub fn as_bytes(&self) -> &'r [u8] {
        self.bytes
    }
}

impl<W: Word, E: Endianity> core::fmt::Debug for Pcs<'_, W, E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter().map(HexPc)).finish()
    }
}

struct HexPc(u64);

impl core::fmt::Debug for HexPc {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// One sample record: `count` samples of one stack.
#[derive(Debug, Clone, Copy)]
pub struct Record<'r, W: Word, E: Endianity> {
    /// Samples of this stack (libprofiler evicts a stack's count from its hash table more
    /// than once, so one stack can have several records; readers sum them).
    pub count: u64,
    /// The declared depth; `None` when the file ends right after the count.
    pub depth: Option<u64>,
    /// Program counters, innermost first: `pc[0]` from the signal context, then return
    /// addresses (readers subtract 1 from those to point into the call). Fewer than `depth`
    /// only when the file ends inside the record ([`Self::is_cut`]).
    pub pcs: Pcs<'r, W, E>,
    /// File offset of the record's count slot.
    pub offset: u64,
}

impl<W: Word, E: Endianity> Record<'_, W, E> {
    /// True when the file ends inside this record: google-pprof still counts its samples,
    /// with the program counters the file has.
    pub fn is_cut(&self) -> bool {
        self.depth != Some(self.pcs.len() as u64)
    }
}

/// How the sample data ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum End {
    /// At a record whose first program counter is 0 (libprofiler's trailer is `0, 1, 0`).
    /// Its count and depth slots are consumed; the tail starts at that first program
    /// counter, and the maps text `depth` slots later (for depth 0 the "first program
    /// counter" read was the next slot, which the text then starts with).
    Marker {
        /// The marker's count slot.
        count: u64,
        /// The marker's depth slot.
        depth: u64,
        /// File offset of the marker's count slot.
        offset: u64,
    },
    /// At the end of the file (no trailer). The tail holds at most a partial slot.
    EndOfFile {
        /// File offset where the data ended.
        offset: u64,
    },
}

impl End {
    /// Bytes of the tail before the maps text starts: the marker's `depth` slots. Past the
    /// end of the tail, or for [`End::EndOfFile`], there is no text.
    pub fn text_skip<W: Word>(&self, word: W) -> Option<u64> {
        match *self {
            End::Marker { depth, .. } => Some(depth * word.bytes() as u64),
            End::EndOfFile { .. } => None,
        }
    }

    /// True for libprofiler's own trailer, `0, 1, 0`.
    pub fn is_trailer(&self) -> bool {
        matches!(self, End::Marker { count: 0, depth: 1, .. })
    }
}

/// What [`Reader::next_item`] yields, in file order.
#[derive(Debug)]
pub enum Item<'r, W: Word, E: Endianity> {
    /// A header word past the usual three (version, period, padding), when the header
    /// declares more; readers skip them.
    ExtraHeaderWord(u64),
    /// A sample record.
    Record(Record<'r, W, E>),
    /// The end of the sample data; after it come only the tail's bytes ([`Reader::into_tail`]).
    End(End),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    ExtraHeader { left: u64 },
    Records,
    Ended,
}

/// Streams a gperftools CPU profile: [`Header`], then [`Item`]s, then the tail (the maps
/// text). `W` and `E` are the slot width and byte order, detected ([`RunTimeWord`],
/// [`RunTimeEndian`]) or given.
pub struct Reader<'w, R: Read, W: Word = RunTimeWord, E: Endianity = RunTimeEndian> {
    inbox: Inbox<'w, R>,
    word: W,
    endian: E,
    header: Header,
    state: State,
    quirks: Quirks,
    records: u64,
    samples: u64,
}

impl<'w, R: Read> Reader<'w, R> {
    /// Opens a profile, detecting slot width and byte order as google-pprof does. `window`
    /// must have [`MIN_WINDOW`] bytes; records longer than it are refused
    /// ([`ReadError::TooLarge`]), so [`LARGEST_RECORD_WINDOW`] reads every file
    /// google-pprof reads, and 2,048 bytes every record libprofiler writes (254 frames).
    pub fn open(source: R, window: &'w mut [u8]) -> Result<Self, ReadError<R::Error>> {
        let mut r = Reader::new(source, window, RunTimeWord::Eight, RunTimeEndian::Little)?;
        r.inbox.fill(16)?;
        let (word, endian) = detect(r.inbox.buffered()).map_err(|rule| ReadError::Format { offset: 0, rule })?;
        r.word = word;
        r.endian = endian;
        r.read_header()?;
        Ok(r)
    }
}

impl<'w, R: Read, W: Word, E: Endianity> Reader<'w, R, W, E> {
    /// Opens a profile whose slot width and byte order the caller knows.
    pub fn open_as(source: R, window: &'w mut [u8], word: W, endian: E) -> Result<Self, ReadError<R::Error>> {
        let mut r = Reader::new(source, window, word, endian)?;
        r.read_header()?;
        Ok(r)
    }

    fn new(source: R, window: &'w mut [u8], word: W, endian: E) -> Result<Self, ReadError<R::Error>> {
        if window.len() < MIN_WINDOW {
            return Err(ReadError::WindowTooSmall { len: window.len(), needed: MIN_WINDOW });
        }
        Ok(Reader {
            inbox: Inbox::new(source, window),
            word,
            endian,
            header: Header::default(),
            state: State::Records,
            quirks: Quirks::default(),
            records: 0,
            samples: 0,
        })
    }

    fn slot(&self, i: usize) -> Option<u64> {
        self.word.read(self.endian, self.inbox.buffered().get(i * self.word.bytes()..)?)
    }

    fn read_header(&mut self) -> Result<(), ReadError<R::Error>> {
        let w = self.word.bytes();
        self.inbox.fill(5 * w)?;
        let have = self.inbox.len();
        let fail = |offset: u64, rule| Err(ReadError::Format { offset, rule });
        let (Some(first), Some(words), Some(version), Some(period_us), Some(padding)) =
            (self.slot(0), self.slot(1), self.slot(2), self.slot(3), self.slot(4))
        else {
            return fail(0, Rule::TooShort { len: have as u64, needed: 5 * w as u64 });
        };
        if first != 0 {
            return fail(0, Rule::NotAProfile { first_slot: first });
        }
        // google-pprof: data starts at slot 2 + words, which must lie in 5..=2^32.
        if !(3..=(1u64 << 32) - 2).contains(&words) {
            return fail(w as u64, Rule::HeaderWords { words });
        }
        if version > 1 << 32 {
            return fail(2 * w as u64, Rule::Version { version });
        }
        if period_us > 1 << 32 {
            return fail(3 * w as u64, Rule::Period { period_us });
        }
        self.header = Header { word: self.word_size(), endian: self.byte_order(), words, version, period_us, padding };
        self.quirks.extra_header_words = words != 3;
        self.quirks.version_not_zero = version != 0;
        self.quirks.period_zero = period_us == 0;
        self.quirks.padding_not_zero = padding != 0;
        self.inbox.consume(5 * w);
        self.state = if words > 3 { State::ExtraHeader { left: words - 3 } } else { State::Records };
        Ok(())
    }

    fn word_size(&self) -> RunTimeWord {
        if self.word.bytes() == 4 {
            RunTimeWord::Four
        } else {
            RunTimeWord::Eight
        }
    }

    fn byte_order(&self) -> RunTimeEndian {
        if self.endian.is_big_endian() {
            RunTimeEndian::Big
        } else {
            RunTimeEndian::Little
        }
    }

    /// The header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// What the file did that libprofiler never does but readers accept, so far.
    pub fn quirks(&self) -> Quirks {
        self.quirks
    }

    /// Records read so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Samples so far: the sum of the records' counts, as google-pprof totals them
    /// (saturating at `u64::MAX`).
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// File offset of the next byte.
    pub fn offset(&self) -> u64 {
        self.inbox.offset()
    }

    /// Slot width.
    pub fn word(&self) -> W {
        self.word
    }

    /// Byte order.
    pub fn endian(&self) -> E {
        self.endian
    }

    fn end_of_file(&mut self) -> Item<'_, W, E> {
        self.state = State::Ended;
        self.quirks.no_trailer = true;
        if self.inbox.len() > 0 {
            self.quirks.partial_slot = true;
        }
        Item::End(End::EndOfFile { offset: self.inbox.offset() })
    }

    /// The next header word, record or end; `Ok(None)` after the end.
    pub fn next_item(&mut self) -> Result<Option<Item<'_, W, E>>, ReadError<R::Error>> {
        let w = self.word.bytes();
        match self.state {
            State::Ended => Ok(None),
            State::ExtraHeader { left } => {
                self.inbox.fill(w)?;
                let Some(value) = self.slot(0) else { return Ok(Some(self.end_of_file())) };
                self.inbox.consume(w);
                self.state = if left > 1 { State::ExtraHeader { left: left - 1 } } else { State::Records };
                Ok(Some(Item::ExtraHeaderWord(value)))
            }
            State::Records => self.next_record(),
        }
    }

    fn next_record(&mut self) -> Result<Option<Item<'_, W, E>>, ReadError<R::Error>> {
        let w = self.word.bytes();
        let offset = self.inbox.offset();
        self.inbox.fill(3 * w)?;
        let Some(count) = self.slot(0) else { return Ok(Some(self.end_of_file())) };
        let Some(depth) = self.slot(1) else {
            // The file ends after the count: google-pprof adds `count` samples of an
            // empty stack.
            self.quirks.cut_record = true;
            self.tally(count);
            self.inbox.consume(w);
            let pcs = Pcs { bytes: &[], word: self.word, endian: self.endian };
            return Ok(Some(Item::Record(Record { count, depth: None, pcs, offset })));
        };
        if depth > MAX_DEPTH {
            return Err(ReadError::Format { offset: offset + w as u64, rule: Rule::Depth { depth } });
        }
        // The whole record, and for depth 0 the slot after it, which google-pprof reads as
        // the record's first program counter either way.
        let slots = 2 + depth.max(1) as usize;
        let bytes = slots * w;
        if bytes > self.inbox.capacity() {
            return Err(ReadError::TooLarge { offset, depth, window: self.inbox.capacity() });
        }
        self.inbox.fill(bytes)?;
        if self.slot(2) == Some(0) {
            self.inbox.consume(2 * w);
            self.state = State::Ended;
            let end = End::Marker { count, depth, offset };
            self.quirks.end_not_trailer = !end.is_trailer();
            return Ok(Some(Item::End(end)));
        }
        let have = self.inbox.len() / w - 2;
        let present = have.min(depth as usize);
        if present < depth as usize {
            self.quirks.cut_record = true;
        }
        self.tally(count);
        let used = (2 + present) * w;
        let record = self.inbox.take(used);
        let pcs = Pcs { bytes: record.get(2 * w..).unwrap_or_default(), word: self.word, endian: self.endian };
        Ok(Some(Item::Record(Record { count, depth: Some(depth), pcs, offset })))
    }

    fn tally(&mut self, count: u64) {
        self.records += 1;
        self.samples = self.samples.saturating_add(count);
        self.quirks.zero_count_record |= count == 0;
    }

    /// The rest of the file from the current position: after [`Item::End`], the tail
    /// (the maps text, after [`End::text_skip`] bytes).
    pub fn into_tail(self) -> Tail<'w, R> {
        Tail { inbox: self.inbox }
    }
}

/// The bytes after the sample data.
pub struct Tail<'w, R: Read> {
    inbox: Inbox<'w, R>,
}

impl<R: Read> Tail<'_, R> {
    /// Fills `dst` with the next bytes; 0 at the end of the file.
    pub fn read(&mut self, dst: &mut [u8]) -> Result<usize, ReadError<R::Error>> {
        Ok(self.inbox.read(dst)?)
    }

    /// File offset of the next byte.
    pub fn offset(&self) -> u64 {
        self.inbox.offset()
    }
}
