//! The decoder (spec section 9): byte order and layout from the header, every count checked
//! before it is trusted, then the samples streamed in file order through a window in the
//! caller's storage (a zstd region is decompressed through the same bounded window).
//!
//! Replay follows CPython 3.15.2 exactly, quirks included (spec 9.3): a POP_PUSH popping more
//! frames than the stack has keeps nothing, a SUFFIX pushing nothing keeps the innermost
//! `shared` frames, a REPEAT with count 0 creates its thread. Unlike CPython, nothing is
//! buffered whole: memory stays what the caller lent, time is linear in the file size.

use embedded_io::{Read, Seek, SeekFrom};

use crate::endian::RunTimeEndian;
use crate::error::{FormatRule, Position, ReadError};
use crate::header::{
    decode_stats, stats_prefix_len, Compression, Footer, Header, HeaderError, HeaderLayout, Stats, StatsTail,
    FOOTER_SIZE, HEADER_SIZE, STATS_VERSION,
};
use crate::records::{Encoding, Prefix, MAX_STACK_DEPTH, PREFIX_LEN};
use crate::storage::{ReaderStorage, ReaderThreads, Resource, StringTable};
use crate::tables::{frame_from_fields, FrameEntry, FrameField, Location};
use crate::varint::{self, VarintError, MAX_VARINT_LEN};

#[cfg(feature = "zstd")]
use crate::compression::Decompressor;

/// Everything about a file that needs no sample data: header, footer counts and stats.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Metadata {
    /// Header fields.
    pub header: Header,
    /// Byte order of the file.
    pub endian: RunTimeEndian,
    /// Header layout.
    pub layout: HeaderLayout,
    /// Actual file length (the footer's own `file_size` is ignored, as by CPython).
    pub file_len: u64,
    /// Footer fields.
    pub footer: Footer,
    /// The stats trailer, if present and of version 1.
    pub stats: Option<Stats>,
}

type Res<T, E> = Result<T, ReadError<E>>;

fn io_err<E>(offset: u64) -> impl FnOnce(E) -> ReadError<E> {
    move |error| ReadError::Io { position: Position::File(offset), error }
}

/// Reads exactly `buf.len()` bytes at `offset`; `Ok(0)` from the source is an early end.
fn read_at<R: Read + Seek>(src: &mut R, offset: u64, buf: &mut [u8]) -> Res<(), R::Error> {
    src.seek(SeekFrom::Start(offset)).map_err(io_err(offset))?;
    read_fully(src, buf, offset)
}

fn read_fully<R: Read>(src: &mut R, mut buf: &mut [u8], mut offset: u64) -> Res<(), R::Error> {
    while !buf.is_empty() {
        match src.read(buf) {
            Ok(0) => return Err(ReadError::UnexpectedEof { position: Position::File(offset) }),
            Ok(n) => {
                let n = n.min(buf.len());
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) => return Err(io_err(offset)(e)),
        }
    }
    Ok(())
}

impl Metadata {
    /// Runs CPython's open-time checks 1–10 (spec 9.2) in their order; reads 64 header bytes,
    /// the footer and at most 56 trailer bytes.
    pub fn read<R: Read + Seek>(src: &mut R) -> Res<Metadata, R::Error> {
        let file_len = src.seek(SeekFrom::End(0)).map_err(io_err(0))?;
        let at = |o| Position::File(o);
        if file_len < HEADER_SIZE as u64 {
            return Err(ReadError::format(at(0), FormatRule::FileTooSmall { len: file_len }));
        }
        let mut hb = [0u8; HEADER_SIZE];
        read_at(src, 0, &mut hb)?;
        let (header, endian, layout) = Header::decode(&hb, file_len).map_err(|e| match e {
            HeaderError::BadMagic(magic) => ReadError::format(at(0), FormatRule::BadMagic { magic }),
            HeaderError::UnsupportedVersion { version, python_version } => {
                ReadError::format(at(4), FormatRule::UnsupportedVersion { version, python_version })
            }
            HeaderError::InvalidMode(mode) => ReadError::format(at(60), FormatRule::InvalidMode { mode }),
        })?;
        let foot = file_len - FOOTER_SIZE as u64;
        let mut fb = [0u8; FOOTER_SIZE];
        read_at(src, foot, &mut fb)?;
        let footer = Footer::decode(&fb, endian);
        let stats = if layout == HeaderLayout::V3_15_2 { Self::read_stats(src, foot, endian)? } else { None };

        let (sto, fto) = (header.string_table_offset, header.frame_table_offset);
        let rule = if sto > file_len {
            Some((40, FormatRule::StringTableOffsetPastEnd { offset: sto, file_len }))
        } else if fto > file_len {
            Some((48, FormatRule::FrameTableOffsetPastEnd { offset: fto, file_len }))
        } else if sto < HEADER_SIZE as u64 {
            Some((40, FormatRule::StringTableOffsetInHeader { offset: sto }))
        } else if fto < HEADER_SIZE as u64 {
            Some((48, FormatRule::FrameTableOffsetInHeader { offset: fto }))
        } else if sto > fto {
            Some((40, FormatRule::TablesOutOfOrder { strings: sto, frames: fto }))
        } else {
            None
        };
        if let Some((offset, rule)) = rule {
            return Err(ReadError::format(at(offset), rule));
        }
        Ok(Metadata { header, endian, layout, file_len, footer, stats })
    }

    /// The trailer rules of spec 6: magic 16 bytes before the footer, size checked before
    /// version, unknown versions ignored, values validated.
    fn read_stats<R: Read + Seek>(src: &mut R, foot: u64, e: RunTimeEndian) -> Res<Option<Stats>, R::Error> {
        let tail_at = foot - 16;
        let mut tb = [0u8; 16];
        read_at(src, tail_at, &mut tb)?;
        let Some(tail) = StatsTail::decode(&tb, e) else {
            return Ok(None);
        };
        if tail.size < 32 || u64::from(tail.size) > foot {
            return Err(ReadError::format(Position::File(tail_at + 12), FormatRule::StatsSize { size: tail.size }));
        }
        if tail.version != STATS_VERSION {
            return Ok(None);
        }
        let start = foot - u64::from(tail.size);
        let mut prefix = [0u8; 40];
        let prefix = &mut prefix[..stats_prefix_len(tail.size)];
        read_at(src, start, prefix)?;
        let stats = decode_stats(prefix, e);
        if !stats.is_valid() {
            return Err(ReadError::format(Position::File(start), FormatRule::StatsValues));
        }
        Ok(Some(stats))
    }

    /// Most strings the string table can hold, each taking at least its length byte
    /// (CPython's bound on the footer's string count).
    pub fn max_string_count(&self) -> u64 {
        self.file_len - self.header.string_table_offset
    }

    /// Most frames the frame table can hold, each taking at least 7 bytes (CPython's bound on
    /// the footer's frame count).
    pub fn max_frame_count(&self) -> u64 {
        (self.file_len - self.header.frame_table_offset) / MIN_FRAME_LEN
    }

    /// Whether the sample region is zstd-compressed.
    pub fn is_compressed(&self) -> bool {
        self.header.compression == Compression::Zstd
    }
}

// ---------------------------------------------------------------------------------------
// Byte streams: the file itself, or the decompressed sample region.

/// Something that fills a buffer with the next bytes of a stream; 0 means the end.
trait Refill<E> {
    fn refill(&mut self, dst: &mut [u8]) -> Res<usize, E>;
}

/// Sequential reads of `[pos, end)` of the file; the source is already positioned at `pos`.
struct FileRange<'a, R> {
    src: &'a mut R,
    pos: &'a mut u64,
    end: u64,
}

impl<R: Read> Refill<R::Error> for FileRange<'_, R> {
    fn refill(&mut self, dst: &mut [u8]) -> Res<usize, R::Error> {
        let left = self.end.saturating_sub(*self.pos);
        let want = dst.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(0);
        }
        match self.src.read(&mut dst[..want]) {
            Ok(0) => Err(ReadError::UnexpectedEof { position: Position::File(*self.pos) }),
            Ok(n) => {
                let n = n.min(want);
                *self.pos += n as u64;
                Ok(n)
            }
            Err(e) => Err(io_err(*self.pos)(e)),
        }
    }
}

/// The decompressed sample region, `produced` bytes so far, at most `limit`.
#[cfg(feature = "zstd")]
struct ZstdRange<'a, 'w, R> {
    file: FileRange<'a, R>,
    dec: &'a mut Decompressor<'w>,
    produced: &'a mut u64,
    limit: u64,
}

#[cfg(feature = "zstd")]
impl<R: Read> Refill<R::Error> for ZstdRange<'_, '_, R> {
    fn refill(&mut self, dst: &mut [u8]) -> Res<usize, R::Error> {
        loop {
            let at_start = self.dec.at_start();
            let out = self.dec.decompress(dst).map_err(|e| {
                // Bytes that are not a zstd frame at all read as CPython's header error.
                let rule = if at_start { FormatRule::ZstdFrameHeader } else { FormatRule::Zstd { code: e.0 } };
                ReadError::format(Position::File(*self.file.pos), rule)
            })?;
            if out.produced > 0 {
                *self.produced += out.produced as u64;
                if *self.produced > self.limit {
                    let rule = FormatRule::ZstdTooLarge { limit: self.limit };
                    return Err(ReadError::format(Position::Decompressed(self.limit), rule));
                }
                return Ok(out.produced);
            }
            if out.needs_input {
                let n = self.file.refill(self.dec.input_space())?;
                if n == 0 {
                    let rule = if self.dec.at_start() {
                        FormatRule::ZstdFrameHeader
                    } else if !self.dec.at_frame_boundary() {
                        FormatRule::ZstdTruncated
                    } else {
                        return Ok(0);
                    };
                    return Err(ReadError::format(Position::File(*self.file.pos), rule));
                }
                self.dec.commit_input(n);
            }
        }
    }
}

/// A window over a stream: `buf[start..end]` are the next bytes, at stream offset `pos`.
struct Window<'b> {
    buf: &'b mut [u8],
    start: usize,
    end: usize,
    pos: u64,
}

impl<'b> Window<'b> {
    fn reset(&mut self, pos: u64) {
        self.start = 0;
        self.end = 0;
        self.pos = pos;
    }

    #[inline]
    fn available(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    #[inline]
    fn consume(&mut self, n: usize) {
        self.start += n;
        self.pos += n as u64;
    }

    /// Tries to have `n` bytes available (`n` ≤ buffer length); false if the stream ends first.
    #[inline]
    fn ensure<E>(&mut self, src: &mut impl Refill<E>, n: usize) -> Res<bool, E> {
        if self.end - self.start >= n {
            return Ok(true);
        }
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        while self.end < n {
            let got = src.refill(&mut self.buf[self.end..])?;
            if got == 0 {
                return Ok(false);
            }
            self.end += got;
        }
        Ok(true)
    }

    #[inline]
    fn varint<E>(&mut self, src: &mut impl Refill<E>) -> Res<Result<u64, VarintError>, E> {
        self.ensure(src, MAX_VARINT_LEN)?;
        Ok(varint::decode_u64(self.available()).map(|(v, n)| {
            self.consume(n);
            v
        }))
    }

    #[inline]
    fn varint32<E>(&mut self, src: &mut impl Refill<E>) -> Res<Result<u32, VarintError>, E> {
        Ok(self.varint(src)?.and_then(|v| u32::try_from(v).map_err(|_| VarintError::Exceeds32Bits)))
    }

    #[inline]
    fn byte<E>(&mut self, src: &mut impl Refill<E>) -> Res<Option<u8>, E> {
        if !self.ensure(src, 1)? {
            return Ok(None);
        }
        let b = self.buf[self.start];
        self.consume(1);
        Ok(Some(b))
    }

    /// Copies the next `dst.len()` bytes, reading past the window straight into `dst`.
    fn copy_out<E>(&mut self, src: &mut impl Refill<E>, dst: &mut [u8]) -> Res<bool, E> {
        let from_window = dst.len().min(self.end - self.start);
        dst[..from_window].copy_from_slice(&self.buf[self.start..self.start + from_window]);
        self.consume(from_window);
        let mut filled = from_window;
        while filled < dst.len() {
            let got = src.refill(&mut dst[filled..])?;
            if got == 0 {
                return Ok(false);
            }
            filled += got;
            self.pos += got as u64;
        }
        Ok(true)
    }
}

// ---------------------------------------------------------------------------------------
// Tables.

/// The string and frame tables of an open file.
pub struct Tables<'a> {
    strings: StringTable<'a>,
    frames: &'a mut [FrameEntry],
    frame_count: usize,
}

/// A frame resolved to its strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResolvedFrame<'a> {
    /// File name bytes (see [`crate::text::Lossy`] for CPython's text view).
    pub filename: &'a [u8],
    /// Function name bytes.
    pub funcname: &'a [u8],
    /// Location as CPython's reader reports it (`None` iff the line is unknown).
    pub location: Option<Location>,
    /// Opcode, `None` for 255.
    pub opcode: Option<u8>,
}

impl<'a> Tables<'a> {
    /// Number of strings.
    pub fn string_count(&self) -> usize {
        self.strings.len()
    }

    /// Number of frames.
    pub fn frame_count(&self) -> usize {
        self.frame_count
    }

    /// String `index`.
    pub fn string(&self, index: u32) -> Option<&[u8]> {
        self.strings.get(index)
    }

    /// Raw frame-table entry `index`.
    pub fn frame_entry(&self, index: u32) -> Option<&FrameEntry> {
        self.frames[..self.frame_count].get(index as usize)
    }

    /// Frame `index` with its strings; `None` if the index or its string indices are out of
    /// range.
    pub fn frame(&self, index: u32) -> Option<ResolvedFrame<'_>> {
        let f = self.frame_entry(index)?;
        Some(ResolvedFrame {
            filename: self.strings.get(f.filename)?,
            funcname: self.strings.get(f.funcname)?,
            location: f.reported_location(),
            opcode: f.reported_opcode(),
        })
    }

    /// Checks that frame `index` exists and names valid strings (CPython checks this when a
    /// sample using the frame is emitted).
    #[inline]
    fn check_frame(&self, index: u32) -> Result<(), FormatRule> {
        let f = self.frame_entry(index).ok_or(FormatRule::InvalidFrameIndex { index })?;
        let n = self.strings.len() as u64;
        if u64::from(f.filename) >= n || u64::from(f.funcname) >= n {
            return Err(FormatRule::InvalidStringIndex { frame: index });
        }
        Ok(())
    }
}

/// One thread sample, in file order.
#[derive(Clone, Copy)]
pub struct Sample<'r> {
    /// Timestamp, µs (deltas summed modulo 2^64 from the header's start time).
    pub timestamp_us: u64,
    /// Interpreter id.
    pub interpreter_id: u32,
    /// Thread id.
    pub thread_id: u64,
    /// Status byte (bit flags, spec 2.1).
    pub status: u8,
    /// Frame ids, innermost first.
    pub stack: &'r [u32],
    /// Kind of record the sample came from.
    pub encoding: Encoding,
    /// Ordinal of that record in the sample region (0-based). Samples of one REPEAT record
    /// share it, which is how CPython's replay batches them (spec 9.4).
    pub record: u64,
    tables: &'r Tables<'r>,
}

impl<'r> Sample<'r> {
    /// The stack resolved to names and locations, innermost first.
    pub fn frames(&self) -> impl Iterator<Item = ResolvedFrame<'r>> + 'r {
        let tables = self.tables;
        self.stack.iter().filter_map(move |&id| tables.frame(id))
    }

    /// The tables the ids refer to.
    pub fn tables(&self) -> &'r Tables<'r> {
        self.tables
    }
}

impl core::fmt::Debug for Sample<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Sample")
            .field("timestamp_us", &self.timestamp_us)
            .field("interpreter_id", &self.interpreter_id)
            .field("thread_id", &self.thread_id)
            .field("status", &self.status)
            .field("stack", &self.stack)
            .field("encoding", &self.encoding)
            .field("record", &self.record)
            .finish()
    }
}

/// Records of each kind seen so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecordCounts {
    /// REPEAT records.
    pub repeat: u64,
    /// FULL records.
    pub full: u64,
    /// SUFFIX records.
    pub suffix: u64,
    /// POP_PUSH records.
    pub pop_push: u64,
}

impl RecordCounts {
    /// Records of all kinds.
    pub fn total(&self) -> u64 {
        self.repeat + self.full + self.suffix + self.pop_push
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between records.
    Records,
    /// Inside a REPEAT record of this thread with this many entries left.
    Repeat { thread: usize, remaining: u32 },
    /// The stream ended (or failed).
    Done,
}

/// Decoding state of the sample region.
struct Stream<'s> {
    window: Window<'s>,
    threads: ReaderThreads<'s>,
    state: State,
    decoded: u64,
    counts: RecordCounts,
    started: bool,
}

/// Streams the samples of a Tachyon file.
pub struct Reader<'s, R: Read + Seek> {
    source: R,
    meta: Metadata,
    tables: Tables<'s>,
    stream: Stream<'s>,
    /// File offset of the next sample-region byte to read (into the window or zstd).
    region_pos: u64,
    #[cfg(feature = "zstd")]
    zstd: Option<Decompressor<'s>>,
    /// Decompressed bytes so far, and the most allowed.
    #[cfg(feature = "zstd")]
    decompressed: u64,
    #[cfg(feature = "zstd")]
    max_decompressed: u64,
}

/// CPython's cap on a decompressed sample region: 1 GiB. Decoding time is linear in the
/// decompressed size, which zstd lets grow about 30,000-fold over the file size; the cap
/// keeps a small hostile file from keeping a reader busy.
pub const DEFAULT_MAX_DECOMPRESSED: u64 = 1 << 30;

impl<'s, R: Read + Seek> Reader<'s, R> {
    /// Opens a file: metadata checks, then the string and frame tables into `storage`. A
    /// compressed file opens, but its samples need `Reader::open_zstd` (feature `zstd`).
    pub fn open(source: R, storage: ReaderStorage<'s>) -> Res<Self, R::Error> {
        Self::open_inner(source, storage)
    }

    /// Opens a file whose sample region may be zstd-compressed, decoding it through
    /// `decompressor` (its window limit bounds the memory a hostile frame can ask for).
    #[cfg(feature = "zstd")]
    pub fn open_zstd(source: R, storage: ReaderStorage<'s>, decompressor: Decompressor<'s>) -> Res<Self, R::Error> {
        let mut r = Self::open_inner(source, storage)?;
        r.zstd = Some(decompressor);
        Ok(r)
    }

    fn open_inner(mut source: R, storage: ReaderStorage<'s>) -> Res<Self, R::Error> {
        let meta = Metadata::read(&mut source)?;
        let ReaderStorage { strings, frames, threads, read_buffer } = storage;
        let mut window = Window { buf: read_buffer, start: 0, end: 0, pos: 0 };
        let mut tables = Tables { strings, frames, frame_count: 0 };
        load_strings(&mut source, &meta, &mut window, &mut tables)?;
        load_frames(&mut source, &meta, &mut window, &mut tables)?;
        Ok(Reader {
            source,
            meta,
            tables,
            stream: Stream {
                window,
                threads,
                state: State::Records,
                decoded: 0,
                counts: RecordCounts::default(),
                started: false,
            },
            region_pos: HEADER_SIZE as u64,
            #[cfg(feature = "zstd")]
            zstd: None,
            #[cfg(feature = "zstd")]
            decompressed: 0,
            #[cfg(feature = "zstd")]
            max_decompressed: DEFAULT_MAX_DECOMPRESSED,
        })
    }

    /// Sets the largest decompressed sample region accepted (default
    /// [`DEFAULT_MAX_DECOMPRESSED`], CPython's 1 GiB); beyond it, reading fails with
    /// [`FormatRule::ZstdTooLarge`].
    #[cfg(feature = "zstd")]
    pub fn set_max_decompressed(&mut self, bytes: u64) {
        self.max_decompressed = bytes;
    }

    /// Header, footer and stats.
    pub fn metadata(&self) -> &Metadata {
        &self.meta
    }

    /// String and frame tables.
    pub fn tables(&self) -> &Tables<'s> {
        &self.tables
    }

    /// Records of each kind read so far.
    pub fn record_counts(&self) -> RecordCounts {
        self.stream.counts
    }

    /// Bytes of the (decompressed) sample region consumed so far; after the last sample, its
    /// whole size.
    pub fn sample_region_bytes(&self) -> u64 {
        let start = if self.meta.is_compressed() { 0 } else { HEADER_SIZE as u64 };
        self.stream.window.pos.saturating_sub(start)
    }

    /// Thread samples decoded so far.
    pub fn samples_decoded(&self) -> u64 {
        self.stream.decoded
    }

    /// Distinct threads seen so far.
    pub fn threads_seen(&self) -> usize {
        self.stream.threads.len()
    }

    /// Gives the source back.
    pub fn into_inner(self) -> R {
        self.source
    }

    /// The next thread sample in file order, `Ok(None)` at the end. At the end the decoded
    /// count is checked against the header (CPython's check after replay). After an error
    /// the stream is over.
    pub fn next_sample(&mut self) -> Res<Option<Sample<'_>>, R::Error> {
        let result = self.step();
        match result {
            Ok(Some((thread, status, encoding))) => {
                let t = self.stream.threads.get(thread);
                Ok(Some(Sample {
                    timestamp_us: t.prev_ts,
                    interpreter_id: t.interpreter_id,
                    thread_id: t.thread_id,
                    status,
                    stack: self.stream.threads.stack(thread),
                    encoding,
                    record: self.stream.counts.total() - 1,
                    tables: &self.tables,
                }))
            }
            Ok(None) => {
                self.stream.state = State::Done;
                Ok(None)
            }
            Err(e) => {
                self.stream.state = State::Done;
                Err(e)
            }
        }
    }

    fn step(&mut self) -> Res<Option<(usize, u8, Encoding)>, R::Error> {
        if self.stream.state == State::Done {
            return Ok(None);
        }
        if !self.stream.started {
            self.source.seek(SeekFrom::Start(HEADER_SIZE as u64)).map_err(io_err(HEADER_SIZE as u64))?;
            self.stream.started = true;
            self.region_pos = HEADER_SIZE as u64;
            let compressed = self.meta.is_compressed();
            self.stream.window.reset(if compressed { 0 } else { HEADER_SIZE as u64 });
        }
        let end = self.meta.header.string_table_offset;
        let file = FileRange { src: &mut self.source, pos: &mut self.region_pos, end };
        let ctx = Ctx { meta: &self.meta, tables: &self.tables };
        if self.meta.is_compressed() {
            #[cfg(feature = "zstd")]
            if let Some(dec) = self.zstd.as_mut() {
                let mut src = ZstdRange { file, dec, produced: &mut self.decompressed, limit: self.max_decompressed };
                return self.stream.step(&mut src, &ctx, Position::Decompressed);
            }
            return Err(ReadError::format(Position::File(HEADER_SIZE as u64), FormatRule::ZstdUnavailable));
        }
        let mut src = file;
        self.stream.step(&mut src, &ctx, Position::File)
    }
}

/// What decoding needs to see besides the stream.
struct Ctx<'a, 's> {
    meta: &'a Metadata,
    tables: &'a Tables<'s>,
}

impl<'s> Stream<'s> {
    /// Decodes up to the next sample: `(thread, status, encoding)`.
    fn step<E>(
        &mut self,
        src: &mut impl Refill<E>,
        ctx: &Ctx<'_, '_>,
        at: fn(u64) -> Position,
    ) -> Res<Option<(usize, u8, Encoding)>, E> {
        loop {
            if let State::Repeat { thread, remaining } = self.state {
                if remaining > 0 {
                    let pos = at(self.window.pos);
                    let delta =
                        self.window.varint(src)?.map_err(|_| ReadError::format(pos, FormatRule::MalformedRleDelta))?;
                    let status = self
                        .window
                        .byte(src)?
                        .ok_or_else(|| ReadError::format(at(self.window.pos), FormatRule::TruncatedRle))?;
                    self.state = State::Repeat { thread, remaining: remaining - 1 };
                    let t = self.threads.get_mut(thread);
                    t.prev_ts = t.prev_ts.wrapping_add(delta);
                    self.decoded += 1;
                    return Ok(Some((thread, status, Encoding::Repeat)));
                }
                self.state = State::Records;
            }
            let record_at = self.window.pos;
            if !self.window.ensure(src, PREFIX_LEN)? {
                let trailing = self.window.available().len() as u64;
                if trailing != 0 {
                    return Err(ReadError::format(at(record_at), FormatRule::TruncatedRecord { trailing }));
                }
                let declared = ctx.meta.header.sample_count;
                if self.decoded != declared {
                    let rule = FormatRule::SampleCountMismatch { declared, decoded: self.decoded };
                    return Err(ReadError::format(at(record_at), rule));
                }
                return Ok(None);
            }
            let mut pb = [0u8; PREFIX_LEN];
            pb.copy_from_slice(&self.window.available()[..PREFIX_LEN]);
            let prefix = Prefix::decode(&pb, ctx.meta.endian);
            self.window.consume(PREFIX_LEN);
            let thread = self.thread(prefix, ctx, at(record_at))?;
            let encoding = Encoding::from_byte(prefix.encoding).ok_or_else(|| {
                ReadError::format(at(record_at + 12), FormatRule::UnknownEncoding { encoding: prefix.encoding })
            })?;
            if encoding == Encoding::Repeat {
                self.counts.repeat += 1;
                let pos = at(self.window.pos);
                let count =
                    self.window.varint32(src)?.map_err(|_| ReadError::format(pos, FormatRule::MalformedRleCount))?;
                // Where the region's length is known, reject counts it cannot hold, as CPython.
                if !ctx.meta.is_compressed() {
                    let left = ctx.meta.header.string_table_offset.saturating_sub(self.window.pos);
                    if u64::from(count) > left / 2 {
                        return Err(ReadError::format(pos, FormatRule::RleCountTooLarge { count, max: left / 2 }));
                    }
                }
                self.state = State::Repeat { thread, remaining: count };
                continue;
            }
            let status = self.stack_record(src, ctx, at, thread, encoding)?;
            self.decoded += 1;
            return Ok(Some((thread, status, encoding)));
        }
    }

    /// The thread of a record, created on first sight within the header's thread count.
    fn thread<E>(&mut self, p: Prefix, ctx: &Ctx<'_, '_>, pos: Position) -> Res<usize, E> {
        match self.threads.find(p.thread_id, p.interpreter_id) {
            Ok(i) => Ok(i),
            Err(slot) => {
                let declared = ctx.meta.header.thread_count;
                let found = self.threads.len() as u64 + 1;
                if found > u64::from(declared) {
                    return Err(ReadError::format(pos, FormatRule::TooManyThreads { declared, found }));
                }
                let start = ctx.meta.header.start_time_us;
                self.threads.create(slot, p.thread_id, p.interpreter_id, start).ok_or(ReadError::Capacity {
                    position: pos,
                    resource: Resource::Threads,
                    capacity: self.threads.len(),
                })
            }
        }
    }

    /// Decodes a FULL, SUFFIX or POP_PUSH body into the thread's stack; returns the status.
    fn stack_record<E>(
        &mut self,
        src: &mut impl Refill<E>,
        ctx: &Ctx<'_, '_>,
        at: fn(u64) -> Position,
        thread: usize,
        encoding: Encoding,
    ) -> Res<u8, E> {
        let w = &mut self.window;
        let pos = at(w.pos);
        let delta = w.varint(src)?.map_err(|_| ReadError::format(pos, FormatRule::MalformedDelta))?;
        let status = w.byte(src)?.ok_or_else(|| ReadError::format(at(w.pos), FormatRule::TruncatedStatus))?;
        let mut count = |w: &mut Window<'_>| -> Res<u32, E> {
            let pos = at(w.pos);
            w.varint32(src)?.map_err(|_| ReadError::format(pos, FormatRule::MalformedStackVarint))
        };
        let first = count(w)?;
        let second = if encoding == Encoding::Full { 0 } else { count(w)? };
        let (slot, start) = self.threads.stack_slot(thread);
        let depth = MAX_STACK_DEPTH - usize::from(*start);
        let counts_at = at(w.pos);
        // Work out which old frames survive (moving them if needed) and how many to read.
        let (push, new_start) = match encoding {
            Encoding::Full => {
                if first as usize > MAX_STACK_DEPTH {
                    return Err(ReadError::format(counts_at, FormatRule::StackTooDeep { depth: first }));
                }
                (first as usize, MAX_STACK_DEPTH - first as usize)
            }
            Encoding::Suffix => {
                let (shared, push) = (first as usize, second as usize);
                if shared > depth {
                    let rule = FormatRule::SharedExceedsDepth { shared: first, depth: depth as u32 };
                    return Err(ReadError::format(counts_at, rule));
                }
                let total = shared as u64 + u64::from(second);
                if total > MAX_STACK_DEPTH as u64 {
                    return Err(ReadError::format(counts_at, FormatRule::FinalStackTooDeep { depth: total }));
                }
                if push == 0 {
                    // CPython quirk: with nothing pushed the innermost `shared` frames stay.
                    let s = usize::from(*start);
                    slot.copy_within(s..s + shared, MAX_STACK_DEPTH - shared);
                }
                (push, MAX_STACK_DEPTH - shared - push)
            }
            Encoding::PopPush | Encoding::Repeat => {
                // CPython quirk: popping more than the depth leaves an empty stack.
                let kept = depth.saturating_sub(first as usize);
                let total = kept as u64 + u64::from(second);
                if total > MAX_STACK_DEPTH as u64 {
                    return Err(ReadError::format(counts_at, FormatRule::FinalStackTooDeep { depth: total }));
                }
                (second as usize, MAX_STACK_DEPTH - kept - second as usize)
            }
        };
        for entry in &mut slot[new_start..new_start + push] {
            let pos = at(w.pos);
            let index = w.varint32(src)?.map_err(|_| ReadError::format(pos, FormatRule::MalformedStackVarint))?;
            ctx.tables.check_frame(index).map_err(|rule| ReadError::format(pos, rule))?;
            *entry = index;
        }
        *start = new_start as u16;
        let t = self.threads.get_mut(thread);
        t.prev_ts = t.prev_ts.wrapping_add(delta);
        match encoding {
            Encoding::Full => self.counts.full += 1,
            Encoding::Suffix => self.counts.suffix += 1,
            _ => self.counts.pop_push += 1,
        }
        Ok(status)
    }
}

/// Loads the string table (checks 12–14): count bounded by the bytes left in the file before
/// anything is read, each length by the bytes left, each string into the caller's arena.
fn load_strings<R: Read + Seek>(
    src: &mut R,
    meta: &Metadata,
    window: &mut Window<'_>,
    tables: &mut Tables<'_>,
) -> Res<(), R::Error> {
    let start = meta.header.string_table_offset;
    let count = meta.footer.string_count;
    let max = meta.max_string_count();
    if u64::from(count) > max {
        let rule = FormatRule::StringCountTooLarge { count, max };
        return Err(ReadError::format(Position::File(meta.file_len - FOOTER_SIZE as u64), rule));
    }
    src.seek(SeekFrom::Start(start)).map_err(io_err(start))?;
    window.reset(start);
    let mut pos = start;
    let mut file = FileRange { src, pos: &mut pos, end: meta.file_len };
    for _ in 0..count {
        let at = window.pos;
        let len = window
            .varint32(&mut file)?
            .map_err(|_| ReadError::format(Position::File(at), FormatRule::MalformedStringLength))?;
        if u64::from(len) > meta.file_len - window.pos {
            return Err(ReadError::format(Position::File(at), FormatRule::StringOverflow { len }));
        }
        let body_at = window.pos;
        let pushed = tables.strings.push_with(len as usize, |dst| {
            if window.copy_out(&mut file, dst)? {
                Ok(())
            } else {
                Err(ReadError::UnexpectedEof { position: Position::File(body_at) })
            }
        })?;
        if let Err(resource) = pushed {
            let capacity = if resource == Resource::Strings { tables.strings.len() } else { 0 };
            return Err(ReadError::Capacity { position: Position::File(at), resource, capacity });
        }
    }
    Ok(())
}

/// The smallest frame entry: six one-byte varints and the opcode byte.
const MIN_FRAME_LEN: u64 = 7;

/// Loads the frame table (checks 15–17) into the caller's frame storage.
fn load_frames<R: Read + Seek>(
    src: &mut R,
    meta: &Metadata,
    window: &mut Window<'_>,
    tables: &mut Tables<'_>,
) -> Res<(), R::Error> {
    let start = meta.header.frame_table_offset;
    let count = meta.footer.frame_count;
    let max = meta.max_frame_count();
    if u64::from(count) > max {
        let rule = FormatRule::FrameCountTooLarge { count, max };
        return Err(ReadError::format(Position::File(meta.file_len - FOOTER_SIZE as u64 + 4), rule));
    }
    if count as usize > tables.frames.len() {
        let capacity = tables.frames.len();
        return Err(ReadError::Capacity { position: Position::File(start), resource: Resource::Frames, capacity });
    }
    src.seek(SeekFrom::Start(start)).map_err(io_err(start))?;
    window.reset(start);
    let mut pos = start;
    let mut file = FileRange { src, pos: &mut pos, end: meta.file_len };
    for slot in tables.frames[..count as usize].iter_mut() {
        let mut fields = [0u32; 6];
        for (value, field) in fields.iter_mut().zip(FrameField::VARINTS) {
            let at = window.pos;
            *value = window
                .varint32(&mut file)?
                .map_err(|_| ReadError::format(Position::File(at), FormatRule::MalformedFrameField { field }))?;
        }
        let at = window.pos;
        let opcode = window
            .byte(&mut file)?
            .ok_or_else(|| ReadError::format(Position::File(at), FormatRule::FrameTableTruncated))?;
        *slot = frame_from_fields(fields, opcode);
        tables.frame_count += 1;
    }
    Ok(())
}
