//! The decoder (spec section 9): byte order and layout from the header, every count checked
//! before it is trusted, then the records streamed in file order through a window in the
//! caller's storage (a zstd region is decompressed through the same bounded window, here or
//! by a [`RegionSource`] of the caller's).
//!
//! A REPEAT record comes out as one [`Run`]: the stack once, then its timestamps and statuses
//! decoded on demand, so a consumer pays per run what it pays per stack
//! ([`Reader::next_record`]); [`Reader::next_sample`] gives the same samples one by one.
//! Records are decoded from the window in one piece whenever it holds the largest possible
//! record, with a single bounds check per field rather than a refill check per byte.
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
use crate::records::{Encoding, Prefix, MAX_RLE_ENTRY_LEN, MAX_STACK_DEPTH, PREFIX_LEN};
use crate::storage::{Keep, ReaderStorage, ReaderThreads, Resource, StringTable};
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
// Byte streams: the file itself, the sample region decompressed here, or the region from a
// source of the caller's.

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

/// The decompressing side of a zstd sample region: the decompressor, the bytes it has
/// produced and the most it may produce.
#[cfg(feature = "zstd")]
struct ZstdState<'w> {
    dec: Decompressor<'w>,
    produced: u64,
    limit: u64,
}

#[cfg(feature = "zstd")]
impl ZstdState<'_> {
    /// The region's next decompressed bytes, reading compressed ones through `file`.
    fn refill<R: Read>(&mut self, file: &mut FileRange<'_, R>, dst: &mut [u8]) -> Res<usize, R::Error> {
        loop {
            let at_start = self.dec.at_start();
            let out = self.dec.decompress(dst).map_err(|e| {
                // Bytes that are not a zstd frame at all read as CPython's header error.
                let rule = if at_start { FormatRule::ZstdFrameHeader } else { FormatRule::Zstd { code: e.0 } };
                ReadError::format(Position::File(*file.pos), rule)
            })?;
            if out.produced > 0 {
                self.produced += out.produced as u64;
                if self.produced > self.limit {
                    let rule = FormatRule::ZstdTooLarge { limit: self.limit };
                    return Err(ReadError::format(Position::Decompressed(self.limit), rule));
                }
                return Ok(out.produced);
            }
            if out.needs_input {
                let n = file.refill(self.dec.input_space())?;
                if n == 0 {
                    let rule = if self.dec.at_start() {
                        FormatRule::ZstdFrameHeader
                    } else if !self.dec.at_frame_boundary() {
                        FormatRule::ZstdTruncated
                    } else {
                        return Ok(0);
                    };
                    return Err(ReadError::format(Position::File(*file.pos), rule));
                }
                self.dec.commit_input(n);
            }
        }
    }
}

/// The bytes of a sample region, decompressed if the file is compressed, from a source of
/// the caller's instead of the reader's own reads: the std layer decompresses a zstd region
/// in a second thread, say, while the reader decodes ([`Reader::open_with_region`]).
pub trait RegionSource<E> {
    /// Fills `dst` with the region's next bytes and returns how many; 0 at the end. Errors
    /// are positioned as the reader positions its own (`ZstdRegion`, with the `zstd` feature,
    /// gives the same errors at the same offsets as the reader's built-in decompression).
    fn read_region(&mut self, dst: &mut [u8]) -> Result<usize, ReadError<E>>;
}

impl<E, S: RegionSource<E> + ?Sized> Refill<E> for &mut S {
    fn refill(&mut self, dst: &mut [u8]) -> Res<usize, E> {
        (**self).read_region(dst)
    }
}

/// A file's zstd sample region decompressed from a source of its own: the reader's own
/// decompression, rules and error positions included, as a [`RegionSource`] that can run
/// apart from the reader (in another thread, over a second handle on the same file).
#[cfg(feature = "zstd")]
pub struct ZstdRegion<'w, R> {
    source: R,
    pos: u64,
    end: u64,
    state: ZstdState<'w>,
}

#[cfg(feature = "zstd")]
impl<'w, R: Read + Seek> ZstdRegion<'w, R> {
    /// The sample region of the file `meta` describes, read from `source` (the same file)
    /// through `decompressor`; more than `max_decompressed` bytes is an error
    /// ([`DEFAULT_MAX_DECOMPRESSED`] is CPython's cap).
    pub fn new(
        mut source: R,
        meta: &Metadata,
        decompressor: Decompressor<'w>,
        max_decompressed: u64,
    ) -> Res<Self, R::Error> {
        let start = HEADER_SIZE as u64;
        source.seek(SeekFrom::Start(start)).map_err(io_err(start))?;
        let state = ZstdState { dec: decompressor, produced: 0, limit: max_decompressed };
        Ok(ZstdRegion { source, pos: start, end: meta.header.string_table_offset, state })
    }
}

#[cfg(feature = "zstd")]
impl<R: Read + Seek> RegionSource<R::Error> for ZstdRegion<'_, R> {
    fn read_region(&mut self, dst: &mut [u8]) -> Result<usize, ReadError<R::Error>> {
        let mut file = FileRange { src: &mut self.source, pos: &mut self.pos, end: self.end };
        self.state.refill(&mut file, dst)
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
        self.fill(src, n)
    }

    /// Moves the unread bytes to the front and reads until `n` are available or the stream
    /// ends.
    fn fill<E>(&mut self, src: &mut impl Refill<E>, n: usize) -> Res<bool, E> {
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

/// Where the sample region's bytes come from.
enum Region<'s, E> {
    /// The file's own bytes.
    Raw,
    /// zstd frames in the file, decompressed here.
    #[cfg(feature = "zstd")]
    Zstd(ZstdState<'s>),
    /// The caller's source.
    External(&'s mut dyn RegionSource<E>),
    /// A compressed region and nothing to decompress it with.
    Unavailable,
}

/// The sample region as a byte stream: its source and the window over it.
struct Input<'s, R: Read + Seek> {
    source: R,
    window: Window<'s>,
    /// File offset of the next byte to read from the file (raw, or into zstd).
    file_pos: u64,
    /// Where the region ends in the file.
    file_end: u64,
    region: Region<'s, R::Error>,
    /// Offsets count decompressed bytes rather than file bytes.
    decompressed: bool,
}

impl<R: Read + Seek> Input<'_, R> {
    #[inline]
    fn at(&self, offset: u64) -> Position {
        if self.decompressed {
            Position::Decompressed(offset)
        } else {
            Position::File(offset)
        }
    }

    /// Tries to have `n` bytes (`n` ≤ the window's size) available; false if the region ends
    /// first, and then all of it is.
    #[inline]
    fn ensure(&mut self, n: usize) -> Res<bool, R::Error> {
        if self.window.end - self.window.start >= n {
            return Ok(true);
        }
        self.fill(n)
    }

    fn fill(&mut self, n: usize) -> Res<bool, R::Error> {
        let Input { source, window, file_pos, file_end, region, .. } = self;
        let mut file = FileRange { src: source, pos: file_pos, end: *file_end };
        match region {
            Region::Raw => window.fill(&mut file, n),
            #[cfg(feature = "zstd")]
            Region::Zstd(state) => window.fill(&mut ZstdRefill { file, state }, n),
            Region::External(src) => window.fill(src, n),
            Region::Unavailable => {
                Err(ReadError::format(Position::File(HEADER_SIZE as u64), FormatRule::ZstdUnavailable))
            }
        }
    }

    /// Makes the next record available whole if the window can hold the largest one; true
    /// when it is (or when the region ends first, so that all of it is).
    #[inline]
    fn ensure_record(&mut self) -> Res<bool, R::Error> {
        let want = LARGEST_RECORD.min(self.window.buf.len());
        let complete = self.ensure(want)?;
        Ok(!complete || self.window.end - self.window.start >= LARGEST_RECORD)
    }
}

#[cfg(feature = "zstd")]
struct ZstdRefill<'a, 'w, R> {
    file: FileRange<'a, R>,
    state: &'a mut ZstdState<'w>,
}

#[cfg(feature = "zstd")]
impl<R: Read> Refill<R::Error> for ZstdRefill<'_, '_, R> {
    fn refill(&mut self, dst: &mut [u8]) -> Res<usize, R::Error> {
        self.state.refill(&mut self.file, dst)
    }
}

/// Continuation bits of four REPEAT entries of three bytes (a two-byte delta and the status):
/// set in each entry's first byte, clear in its second.
const THREE_BYTE_CONTINUED: u128 = 0x80 | 0x80 << 24 | 0x80 << 48 | 0x80 << 72;
const THREE_BYTE_ENDED: u128 = THREE_BYTE_CONTINUED << 8;

/// Four REPEAT entries `(delta, status)` if `bytes` starts with four of three bytes each:
/// sampling intervals of 128 µs to 16 ms give two-byte deltas, so this is what real runs
/// are made of. One 16-byte load, a check of the continuation bits, fixed shifts.
#[inline(always)]
fn four_three_byte_entries(bytes: &[u8]) -> Option<[(u64, u8); 4]> {
    let mut c = [0u8; 16];
    c.copy_from_slice(bytes.get(..16)?);
    let x = u128::from_le_bytes(c);
    if x & THREE_BYTE_CONTINUED != THREE_BYTE_CONTINUED || x & THREE_BYTE_ENDED != 0 {
        return None;
    }
    Some(core::array::from_fn(|k| {
        let e = (x >> (24 * k)) as u32;
        (u64::from(e & 0x7f) | u64::from((e >> 8) & 0x7f) << 7, (e >> 16) as u8)
    }))
}

/// Two REPEAT entries and their length in bytes if `bytes` starts with two whose deltas take
/// one or two bytes: decoded from one 8-byte word with shifts and masks, without a branch on
/// the lengths (which the data decides, so they predict badly).
#[inline(always)]
fn two_short_entries(bytes: &[u8]) -> Option<([(u64, u8); 2], usize)> {
    let mut c = [0u8; 8];
    c.copy_from_slice(bytes.get(..8)?);
    let w = u64::from_le_bytes(c);
    let two_a = (w >> 7) & 1;
    let w_b = w >> (8 * (2 + two_a));
    let two_b = (w_b >> 7) & 1;
    if two_a & (w >> 15) != 0 || two_b & (w_b >> 15) != 0 {
        return None;
    }
    let entry = |w: u64, two: u64| ((w & 0x7f) | (((w >> 8) & 0x7f) * two) << 7, (w >> (8 * (1 + two))) as u8);
    Some(([entry(w, two_a), entry(w_b, two_b)], (4 + two_a + two_b) as usize))
}

/// The largest record a reader accepts: the prefix, a 10-byte delta, the status, two 10-byte
/// counts and 256 indices of 10 bytes each (CPython reads non-minimal varints).
const LARGEST_RECORD: usize = PREFIX_LEN + MAX_VARINT_LEN + 1 + 2 * MAX_VARINT_LEN + MAX_STACK_DEPTH * MAX_VARINT_LEN;

/// The bytes of one record after its prefix, seen either in the window, which holds all of
/// it (or all the region has left), or through the window with refills, for windows smaller
/// than the largest record. The record rules are written once over this.
trait RecordBytes<E> {
    /// Stream offset of the next byte.
    fn offset(&self) -> u64;
    fn varint(&mut self) -> Res<Result<u64, VarintError>, E>;
    fn byte(&mut self) -> Res<Option<u8>, E>;

    #[inline]
    fn varint32(&mut self) -> Res<Result<u32, VarintError>, E> {
        Ok(self.varint()?.and_then(|v| u32::try_from(v).map_err(|_| VarintError::Exceeds32Bits)))
    }

    /// Fills `slots` with frame indices (spec 2: `uvarint32` each, checked against the
    /// tables as CPython checks them), positioned by `at`.
    #[inline]
    fn frame_indices(&mut self, slots: &mut [u32], tables: &Tables<'_>, at: &impl Fn(u64) -> Position) -> Res<(), E> {
        for entry in slots {
            let pos = self.offset();
            let index = self.varint32()?.map_err(|_| ReadError::format(at(pos), FormatRule::MalformedStackVarint))?;
            tables.check_frame(index).map_err(|rule| ReadError::format(at(pos), rule))?;
            *entry = index;
        }
        Ok(())
    }
}

/// A record held in the window: decoding needs no bounds check beyond the slice's own.
struct Held<'b> {
    bytes: &'b [u8],
    used: usize,
    base: u64,
}

impl<E> RecordBytes<E> for Held<'_> {
    #[inline]
    fn offset(&self) -> u64 {
        self.base + self.used as u64
    }

    #[inline]
    fn varint(&mut self) -> Res<Result<u64, VarintError>, E> {
        let rest = self.bytes.get(self.used..).unwrap_or_default();
        Ok(varint::decode_u64(rest).map(|(v, n)| {
            self.used += n;
            v
        }))
    }

    #[inline]
    fn byte(&mut self) -> Res<Option<u8>, E> {
        let b = self.bytes.get(self.used).copied();
        self.used += usize::from(b.is_some());
        Ok(b)
    }

    /// The common case in a tight loop: a one- or two-byte index below the frame count of
    /// tables whose frames are all valid. Anything else (a longer or malformed varint, an
    /// index out of range, a table with a bad frame) goes through the general path for that
    /// one index, which reports the error.
    #[inline]
    fn frame_indices(&mut self, slots: &mut [u32], tables: &Tables<'_>, at: &impl Fn(u64) -> Position) -> Res<(), E> {
        let limit = tables.trusted_index_limit();
        let bytes = self.bytes;
        // Frame tables of real profiles put the frames met first, the hot ones, first: most
        // records list one-byte indices only. Then one pass finds the largest and one copies
        // them out, both over plain bytes (the compiler vectorises them).
        if let Some(run) = bytes.get(self.used..self.used + slots.len()) {
            let max = run.iter().fold(0u8, |m, &b| m.max(b));
            if max < 0x80 && u32::from(max) < limit {
                for (slot, &b) in slots.iter_mut().zip(run) {
                    *slot = u32::from(b);
                }
                self.used += run.len();
                return Ok(());
            }
        }
        let mut used = self.used;
        for slot in slots {
            match bytes.get(used..used + 2) {
                Some(&[b0, _]) if b0 < 0x80 && u32::from(b0) < limit => {
                    *slot = u32::from(b0);
                    used += 1;
                    continue;
                }
                Some(&[b0, b1]) if b1 < 0x80 => {
                    let index = u32::from(b0 & 0x7f) | u32::from(b1) << 7;
                    if index < limit {
                        *slot = index;
                        used += 2;
                        continue;
                    }
                }
                _ => {}
            }
            self.used = used;
            let pos = self.base + used as u64;
            let index = RecordBytes::<E>::varint32(self)?
                .map_err(|_| ReadError::format(at(pos), FormatRule::MalformedStackVarint))?;
            tables.check_frame(index).map_err(|rule| ReadError::format(at(pos), rule))?;
            *slot = index;
            used = self.used;
        }
        self.used = used;
        Ok(())
    }
}

/// A record read through a window smaller than the largest record.
struct Streamed<'a, 's, R: Read + Seek> {
    input: &'a mut Input<'s, R>,
}

impl<R: Read + Seek> RecordBytes<R::Error> for Streamed<'_, '_, R> {
    fn offset(&self) -> u64 {
        self.input.window.pos
    }

    fn varint(&mut self) -> Res<Result<u64, VarintError>, R::Error> {
        self.input.ensure(MAX_VARINT_LEN)?;
        let w = &mut self.input.window;
        Ok(varint::decode_u64(w.available()).map(|(v, n)| {
            w.consume(n);
            v
        }))
    }

    fn byte(&mut self) -> Res<Option<u8>, R::Error> {
        if !self.input.ensure(1)? {
            return Ok(None);
        }
        let w = &mut self.input.window;
        let b = w.available().first().copied();
        w.consume(usize::from(b.is_some()));
        Ok(b)
    }
}

// ---------------------------------------------------------------------------------------
// Tables.

/// The string and frame tables of an open file.
pub struct Tables<'a> {
    strings: StringTable<'a>,
    frames: &'a mut [FrameEntry],
    frame_count: usize,
    /// Every frame names strings that exist (known once the tables are loaded), so a frame
    /// index needs only a range check.
    frames_valid: bool,
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

    /// Indices below this need no check: the frame count when every frame names valid
    /// strings, else 0.
    #[inline]
    fn trusted_index_limit(&self) -> u32 {
        if self.frames_valid {
            u32::try_from(self.frame_count).unwrap_or(u32::MAX)
        } else {
            0
        }
    }

    /// Checks that frame `index` exists and names valid strings (CPython checks this when a
    /// sample using the frame is emitted).
    #[inline]
    fn check_frame(&self, index: u32) -> Result<(), FormatRule> {
        if self.frames_valid && (index as usize) < self.frame_count {
            return Ok(());
        }
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

/// One record of the sample region, as [`Reader::next_record`] yields it.
pub enum Record<'r, 's, R: Read + Seek> {
    /// A FULL, SUFFIX or POP_PUSH record: one sample with a new stack.
    Sample(Sample<'r>),
    /// A REPEAT record: samples of one thread with its current stack, whose timestamps and
    /// statuses the [`Run`] decodes on demand.
    Repeat(Run<'r, 's, R>),
}

/// The samples of one REPEAT record: one thread, one stack, `count` (timestamp, status)
/// entries decoded one by one as they are asked for. Entries left unread when the run is
/// dropped are still decoded and checked (and the thread's clock advanced) by the reader's
/// next call; [`Reader::next_sample`] would yield them one by one.
pub struct Run<'r, 's, R: Read + Seek> {
    /// Interpreter id.
    pub interpreter_id: u32,
    /// Thread id.
    pub thread_id: u64,
    /// The stack of every sample of the run: frame ids, innermost first.
    pub stack: &'r [u32],
    /// Samples in the run, as the record declares.
    pub count: u32,
    /// Ordinal of the record in the sample region (0-based).
    pub record: u64,
    tables: &'r Tables<'r>,
    prev_ts: &'r mut u64,
    stream: &'r mut Stream<'s, R>,
}

/// One sample of a [`Run`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunEntry {
    /// Timestamp, µs.
    pub timestamp_us: u64,
    /// Status byte.
    pub status: u8,
}

impl<'r, R: Read + Seek> Run<'r, '_, R> {
    /// Entries not read yet.
    pub fn remaining(&self) -> u32 {
        self.stream.run.remaining
    }

    /// The next sample of the run, `Ok(None)` after the last. After an error the reader's
    /// stream is over.
    #[inline]
    pub fn next_entry(&mut self) -> Res<Option<RunEntry>, R::Error> {
        let mut next = None;
        match self
            .stream
            .entries(1, self.prev_ts, |timestamp_us, status| next = Some(RunEntry { timestamp_us, status }))
        {
            Ok(_) => Ok(next),
            Err(e) => Err(self.stream.fail(e)),
        }
    }

    /// Decodes the next entries into `out`, as many as fit and the run has; returns how many
    /// (0 after the last). Faster than [`Self::next_entry`] for long runs.
    pub fn read_entries(&mut self, out: &mut [RunEntry]) -> Res<usize, R::Error> {
        let max = u32::try_from(out.len()).unwrap_or(u32::MAX);
        let mut slots = out.iter_mut();
        let filled = self.stream.entries(max, self.prev_ts, |timestamp_us, status| {
            if let Some(slot) = slots.next() {
                *slot = RunEntry { timestamp_us, status };
            }
        });
        filled.map(|n| n as usize).map_err(|e| self.stream.fail(e))
    }

    /// Decodes and checks the entries left; returns how many there were.
    pub fn skip(&mut self) -> Res<u32, R::Error> {
        self.stream.entries(u32::MAX, self.prev_ts, |_, _| {}).map_err(|e| self.stream.fail(e))
    }

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

impl<R: Read + Seek> Iterator for Run<'_, '_, R> {
    type Item = Res<RunEntry, R::Error>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_entry().transpose()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.remaining() as usize;
        (0, Some(n))
    }
}

impl<R: Read + Seek> core::fmt::Debug for Run<'_, '_, R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Run")
            .field("interpreter_id", &self.interpreter_id)
            .field("thread_id", &self.thread_id)
            .field("stack", &self.stack)
            .field("count", &self.count)
            .field("remaining", &self.remaining())
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

/// The REPEAT record being read: its thread and the entries left (0: none).
#[derive(Debug, Clone, Copy)]
struct Pending {
    thread: usize,
    remaining: u32,
}

/// Decoding state of the sample region, apart from the threads.
struct Stream<'s, R: Read + Seek> {
    input: Input<'s, R>,
    run: Pending,
    /// The region ended, or an error ended it.
    done: bool,
    decoded: u64,
    counts: RecordCounts,
}

/// What a record decoded to.
enum Decoded {
    /// A sample of `thread` with its new stack.
    Sample { thread: usize, status: u8, encoding: Encoding },
    /// A REPEAT record of `thread` with `count` entries to read.
    Run { thread: usize, count: u32 },
    /// The region is over and its sample count checked.
    End,
}

/// The body of a record after its prefix.
enum Body {
    Stack { delta: u64, status: u8 },
    Run { count: u32 },
}

impl<R: Read + Seek> Stream<'_, R> {
    /// Ends the stream on `e` and hands it back.
    #[cold]
    fn fail(&mut self, e: ReadError<R::Error>) -> ReadError<R::Error> {
        self.done = true;
        self.run.remaining = 0;
        e
    }

    /// Decodes up to `max` entries of the pending run (fewer if it has fewer left), adding
    /// each delta to `prev_ts` and handing each timestamp and status to `each`; returns how
    /// many. Entries are decoded straight from the window in a tight loop while it holds at
    /// least the longest entry (11 bytes), so there is one length check per entry and a
    /// refill only per window.
    #[inline]
    fn entries(&mut self, max: u32, prev_ts: &mut u64, mut each: impl FnMut(u64, u8)) -> Res<u32, R::Error> {
        let want = max.min(self.run.remaining);
        let mut done = 0;
        let mut ts = *prev_ts;
        let result = loop {
            if done == want {
                break Ok(());
            }
            let input = &mut self.input;
            if input.window.end - input.window.start < MAX_RLE_ENTRY_LEN {
                if let Err(e) = input.fill(MAX_RLE_ENTRY_LEN) {
                    break Err(e);
                }
            }
            let at = input.window.pos;
            let bytes = input.window.available();
            let mut used = 0;
            let mut failed = None;
            // Fewer than 11 bytes after a refill means the region ends within them: one
            // entry, whose varint or status may then be cut off.
            let short = bytes.len() < MAX_RLE_ENTRY_LEN;
            while done < want {
                let rest = bytes.get(used..).unwrap_or_default();
                if rest.len() < MAX_RLE_ENTRY_LEN && !(short && used == 0) {
                    break;
                }
                if want - done >= 4 {
                    if let Some(four) = four_three_byte_entries(rest) {
                        for (delta, status) in four {
                            ts = ts.wrapping_add(delta);
                            each(ts, status);
                        }
                        used += 12;
                        done += 4;
                        continue;
                    }
                }
                if want - done >= 2 {
                    if let Some((two, len)) = two_short_entries(rest) {
                        for (delta, status) in two {
                            ts = ts.wrapping_add(delta);
                            each(ts, status);
                        }
                        used += len;
                        done += 2;
                        continue;
                    }
                }
                let Ok((delta, n)) = varint::decode_u64(rest) else {
                    failed = Some(ReadError::format(input.at(at + used as u64), FormatRule::MalformedRleDelta));
                    break;
                };
                let Some(&status) = rest.get(n) else {
                    failed = Some(ReadError::format(input.at(at + (used + n) as u64), FormatRule::TruncatedRle));
                    break;
                };
                ts = ts.wrapping_add(delta);
                each(ts, status);
                used += n + 1;
                done += 1;
            }
            input.window.consume(used);
            if let Some(e) = failed {
                break Err(e);
            }
        };
        *prev_ts = ts;
        self.run.remaining -= done;
        self.decoded += u64::from(done);
        result.map(|()| done)
    }
}

/// Streams the samples of a Tachyon file.
pub struct Reader<'s, R: Read + Seek> {
    meta: Metadata,
    tables: Tables<'s>,
    threads: ReaderThreads<'s>,
    stream: Stream<'s, R>,
}

/// CPython's cap on a decompressed sample region: 1 GiB. Decoding time is linear in the
/// decompressed size, which zstd lets grow about 30,000-fold over the file size; the cap
/// keeps a small hostile file from keeping a reader busy.
pub const DEFAULT_MAX_DECOMPRESSED: u64 = 1 << 30;

impl<'s, R: Read + Seek> Reader<'s, R> {
    /// Opens a file: metadata checks, then the string and frame tables into `storage`. A
    /// compressed file opens, but its samples need `Reader::open_zstd` (feature `zstd`) or
    /// [`Reader::open_with_region`].
    pub fn open(source: R, storage: ReaderStorage<'s>) -> Res<Self, R::Error> {
        Self::open_inner(source, storage, |meta| if meta.is_compressed() { Region::Unavailable } else { Region::Raw })
    }

    /// Opens a file whose sample region may be zstd-compressed, decoding it through
    /// `decompressor` (its window limit bounds the memory a hostile frame can ask for).
    #[cfg(feature = "zstd")]
    pub fn open_zstd(source: R, storage: ReaderStorage<'s>, decompressor: Decompressor<'s>) -> Res<Self, R::Error> {
        Self::open_inner(source, storage, |meta| {
            if meta.is_compressed() {
                Region::Zstd(ZstdState { dec: decompressor, produced: 0, limit: DEFAULT_MAX_DECOMPRESSED })
            } else {
                Region::Raw
            }
        })
    }

    /// Opens a file whose sample region comes from `region`: its bytes as the reader would
    /// read them (decompressed, for a compressed file), from another thread, say. The source
    /// is then only read for the metadata and the tables.
    pub fn open_with_region(
        source: R,
        storage: ReaderStorage<'s>,
        region: &'s mut dyn RegionSource<R::Error>,
    ) -> Res<Self, R::Error> {
        Self::open_inner(source, storage, |_| Region::External(region))
    }

    fn open_inner(
        mut source: R,
        storage: ReaderStorage<'s>,
        region: impl FnOnce(&Metadata) -> Region<'s, R::Error>,
    ) -> Res<Self, R::Error> {
        let meta = Metadata::read(&mut source)?;
        let ReaderStorage { strings, frames, threads, read_buffer } = storage;
        let mut window = Window { buf: read_buffer, start: 0, end: 0, pos: 0 };
        let mut tables = Tables { strings, frames, frame_count: 0, frames_valid: false };
        load_strings(&mut source, &meta, &mut window, &mut tables)?;
        load_frames(&mut source, &meta, &mut window, &mut tables)?;
        let strings = tables.strings.len() as u64;
        tables.frames_valid = tables.frames[..tables.frame_count]
            .iter()
            .all(|f| u64::from(f.filename) < strings && u64::from(f.funcname) < strings);
        let region = region(&meta);
        let start = HEADER_SIZE as u64;
        if !matches!(region, Region::External(_)) {
            source.seek(SeekFrom::Start(start)).map_err(io_err(start))?;
        }
        let decompressed = meta.is_compressed();
        window.reset(if decompressed { 0 } else { start });
        let input =
            Input { source, window, file_pos: start, file_end: meta.header.string_table_offset, region, decompressed };
        let stream = Stream {
            input,
            run: Pending { thread: 0, remaining: 0 },
            done: false,
            decoded: 0,
            counts: RecordCounts::default(),
        };
        Ok(Reader { meta, tables, threads, stream })
    }

    /// Sets the largest decompressed sample region accepted (default
    /// [`DEFAULT_MAX_DECOMPRESSED`], CPython's 1 GiB) when this reader decompresses; beyond
    /// it, reading fails with [`FormatRule::ZstdTooLarge`].
    #[cfg(feature = "zstd")]
    pub fn set_max_decompressed(&mut self, bytes: u64) {
        if let Region::Zstd(state) = &mut self.stream.input.region {
            state.limit = bytes;
        }
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
        self.stream.input.window.pos.saturating_sub(start)
    }

    /// Thread samples decoded so far.
    pub fn samples_decoded(&self) -> u64 {
        self.stream.decoded
    }

    /// Distinct threads seen so far.
    pub fn threads_seen(&self) -> usize {
        self.threads.len()
    }

    /// Gives the source back.
    pub fn into_inner(self) -> R {
        self.stream.input.source
    }

    /// The next record in file order, `Ok(None)` at the end: a sample with a new stack, or a
    /// REPEAT run whose samples share one stack (so a consumer can pay per run what it pays
    /// per stack). Entries of a previous run left unread are decoded first. At the end the
    /// decoded count is checked against the header (CPython's check after replay). After an
    /// error the stream is over.
    pub fn next_record(&mut self) -> Res<Option<Record<'_, 's, R>>, R::Error> {
        if self.stream.done {
            return Ok(None);
        }
        let decoded = self.finish_run().and_then(|()| self.decode_record());
        match decoded {
            Ok(Decoded::Sample { thread, status, encoding }) => {
                Ok(Some(Record::Sample(self.sample(thread, status, encoding))))
            }
            Ok(Decoded::Run { thread, count }) => {
                let record = self.stream.counts.total() - 1;
                let (stack, entry) = self.threads.stack_and_entry(thread);
                Ok(Some(Record::Repeat(Run {
                    interpreter_id: entry.interpreter_id,
                    thread_id: entry.thread_id,
                    stack,
                    count,
                    record,
                    tables: &self.tables,
                    prev_ts: &mut entry.prev_ts,
                    stream: &mut self.stream,
                })))
            }
            Ok(Decoded::End) => {
                self.stream.done = true;
                Ok(None)
            }
            Err(e) => Err(self.stream.fail(e)),
        }
    }

    /// The next thread sample in file order, `Ok(None)` at the end; REPEAT runs come one
    /// sample at a time. Same checks as [`Self::next_record`].
    pub fn next_sample(&mut self) -> Res<Option<Sample<'_>>, R::Error> {
        loop {
            if self.stream.done {
                return Ok(None);
            }
            if self.stream.run.remaining > 0 {
                let thread = self.stream.run.thread;
                let (_, entry) = self.threads.stack_and_entry(thread);
                let mut status = 0;
                if let Err(e) = self.stream.entries(1, &mut entry.prev_ts, |_, s| status = s) {
                    return Err(self.stream.fail(e));
                }
                return Ok(Some(self.sample(thread, status, Encoding::Repeat)));
            }
            match self.decode_record() {
                Ok(Decoded::Sample { thread, status, encoding }) => {
                    return Ok(Some(self.sample(thread, status, encoding)));
                }
                Ok(Decoded::Run { .. }) => {}
                Ok(Decoded::End) => {
                    self.stream.done = true;
                    return Ok(None);
                }
                Err(e) => return Err(self.stream.fail(e)),
            }
        }
    }

    fn sample(&self, thread: usize, status: u8, encoding: Encoding) -> Sample<'_> {
        let t = self.threads.get(thread);
        Sample {
            timestamp_us: t.prev_ts,
            interpreter_id: t.interpreter_id,
            thread_id: t.thread_id,
            status,
            stack: self.threads.stack(thread),
            encoding,
            record: self.stream.counts.total() - 1,
            tables: &self.tables,
        }
    }

    /// Decodes what is left of the pending run, advancing its thread's clock.
    fn finish_run(&mut self) -> Res<(), R::Error> {
        if self.stream.run.remaining == 0 {
            return Ok(());
        }
        let (_, entry) = self.threads.stack_and_entry(self.stream.run.thread);
        self.stream.entries(u32::MAX, &mut entry.prev_ts, |_, _| {}).map(drop)
    }

    /// Decodes the next record (the pending run is finished): a stack record into its
    /// thread's stack, or a REPEAT record's count.
    fn decode_record(&mut self) -> Res<Decoded, R::Error> {
        let input = &mut self.stream.input;
        let record_at = input.window.pos;
        let whole = input.ensure_record()?;
        // Short of a prefix only at the region's end: a window that cannot hold the largest
        // record still holds more than a prefix.
        if input.window.available().len() < PREFIX_LEN {
            let trailing = input.window.available().len() as u64;
            if trailing != 0 {
                return Err(ReadError::format(input.at(record_at), FormatRule::TruncatedRecord { trailing }));
            }
            let declared = self.meta.header.sample_count;
            if self.stream.decoded != declared {
                let rule = FormatRule::SampleCountMismatch { declared, decoded: self.stream.decoded };
                return Err(ReadError::format(input.at(record_at), rule));
            }
            return Ok(Decoded::End);
        }
        let mut pb = [0u8; PREFIX_LEN];
        pb.copy_from_slice(&input.window.available()[..PREFIX_LEN]);
        let prefix = Prefix::decode(&pb, self.meta.endian);
        input.window.consume(PREFIX_LEN);
        let thread = self.thread(prefix, record_at)?;
        let input = &mut self.stream.input;
        let encoding = Encoding::from_byte(prefix.encoding).ok_or_else(|| {
            let rule = FormatRule::UnknownEncoding { encoding: prefix.encoding };
            ReadError::format(input.at(record_at + 12), rule)
        })?;
        let decompressed = input.decompressed;
        let at = move |offset| if decompressed { Position::Decompressed(offset) } else { Position::File(offset) };
        let (meta, tables, threads) = (&self.meta, &self.tables, &mut self.threads);
        let body = if whole {
            let mut held = Held { bytes: input.window.available(), used: 0, base: input.window.pos };
            let body = record_body(&mut held, at, meta, tables, threads, thread, encoding);
            let used = held.used;
            input.window.consume(used);
            body?
        } else {
            record_body(&mut Streamed { input }, at, meta, tables, threads, thread, encoding)?
        };
        let stream = &mut self.stream;
        match body {
            Body::Run { count } => {
                stream.counts.repeat += 1;
                stream.run = Pending { thread, remaining: count };
                Ok(Decoded::Run { thread, count })
            }
            Body::Stack { delta, status } => {
                match encoding {
                    Encoding::Full => stream.counts.full += 1,
                    Encoding::Suffix => stream.counts.suffix += 1,
                    _ => stream.counts.pop_push += 1,
                }
                stream.decoded += 1;
                let (_, entry) = self.threads.stack_and_entry(thread);
                entry.prev_ts = entry.prev_ts.wrapping_add(delta);
                Ok(Decoded::Sample { thread, status, encoding })
            }
        }
    }

    /// The thread of a record, created on first sight within the header's thread count.
    fn thread(&mut self, p: Prefix, record_at: u64) -> Res<usize, R::Error> {
        match self.threads.find(p.thread_id, p.interpreter_id) {
            Ok(i) => Ok(i),
            Err(slot) => {
                let pos = self.stream.input.at(record_at);
                let declared = self.meta.header.thread_count;
                let found = self.threads.len() as u64 + 1;
                if found > u64::from(declared) {
                    return Err(ReadError::format(pos, FormatRule::TooManyThreads { declared, found }));
                }
                let start = self.meta.header.start_time_us;
                let capacity = self.threads.capacity();
                self.threads
                    .create(slot, p.thread_id, p.interpreter_id, start)
                    .map_err(|resource| ReadError::Capacity { position: pos, resource, capacity })
            }
        }
    }
}

/// Reads a record body through `b`: a REPEAT count, or a stack record into the thread's
/// stack (spec 2 and the checks of 9.3, CPython's quirks included).
fn record_body<E, B: RecordBytes<E>>(
    b: &mut B,
    at: impl Fn(u64) -> Position,
    meta: &Metadata,
    tables: &Tables<'_>,
    threads: &mut ReaderThreads<'_>,
    thread: usize,
    encoding: Encoding,
) -> Res<Body, E> {
    if encoding == Encoding::Repeat {
        let pos = b.offset();
        let count = b.varint32()?.map_err(|_| ReadError::format(at(pos), FormatRule::MalformedRleCount))?;
        // Where the region's length is known, reject counts it cannot hold, as CPython.
        if !meta.is_compressed() {
            let left = meta.header.string_table_offset.saturating_sub(b.offset());
            if u64::from(count) > left / 2 {
                return Err(ReadError::format(at(pos), FormatRule::RleCountTooLarge { count, max: left / 2 }));
            }
        }
        return Ok(Body::Run { count });
    }
    let pos = b.offset();
    let delta = b.varint()?.map_err(|_| ReadError::format(at(pos), FormatRule::MalformedDelta))?;
    let status = b.byte()?.ok_or_else(|| ReadError::format(at(b.offset()), FormatRule::TruncatedStatus))?;
    let count = |b: &mut B| -> Res<u32, E> {
        let pos = b.offset();
        b.varint32()?.map_err(|_| ReadError::format(at(pos), FormatRule::MalformedStackVarint))
    };
    let first = count(b)?;
    let second = if encoding == Encoding::Full { 0 } else { count(b)? };
    let depth = threads.stack(thread).len();
    let counts_at = at(b.offset());
    let too_deep = |total: u64| ReadError::format(counts_at, FormatRule::FinalStackTooDeep { depth: total });
    // Which old frames survive, and how many new ones follow.
    let (keep, push) = match encoding {
        Encoding::Full => {
            if first as usize > MAX_STACK_DEPTH {
                return Err(ReadError::format(counts_at, FormatRule::StackTooDeep { depth: first }));
            }
            (Keep::Bottom(0), first as usize)
        }
        Encoding::Suffix => {
            let (shared, push) = (first as usize, second as usize);
            if shared > depth {
                let rule = FormatRule::SharedExceedsDepth { shared: first, depth: depth as u32 };
                return Err(ReadError::format(counts_at, rule));
            }
            let total = shared as u64 + u64::from(second);
            if total > MAX_STACK_DEPTH as u64 {
                return Err(too_deep(total));
            }
            // CPython quirk: with nothing pushed the innermost `shared` frames stay.
            (if push == 0 { Keep::Innermost(shared) } else { Keep::Bottom(shared) }, push)
        }
        Encoding::PopPush | Encoding::Repeat => {
            // CPython quirk: popping more than the depth leaves an empty stack.
            let kept = depth.saturating_sub(first as usize);
            let total = kept as u64 + u64::from(second);
            if total > MAX_STACK_DEPTH as u64 {
                return Err(too_deep(total));
            }
            (Keep::Bottom(kept), second as usize)
        }
    };
    let capacity = threads.capacity();
    let slots = threads.reshape(thread, keep, push).map_err(|resource| ReadError::Capacity {
        position: counts_at,
        resource,
        capacity,
    })?;
    b.frame_indices(slots, tables, &at)?;
    Ok(Body::Stack { delta, status })
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
