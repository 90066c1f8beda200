//! Typed errors: [`WriteError`] for the writer, [`ReadError`] for the reader.
//!
//! Every reader error names where it happened ([`Position`]) and which rule was broken
//! ([`Rule`]), with the values involved. `Display` uses CPython 3.15.2's wording where
//! CPython has a message for the same condition.

use core::fmt;

use crate::storage::Resource;
use crate::tables::FrameField;

/// Where in the input an error was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Position {
    /// Absolute byte offset in the file.
    File(u64),
    /// Byte offset in the decompressed sample region (which starts at file offset 64).
    Decompressed(u64),
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Position::File(o) => write!(f, "file offset {o}"),
            Position::Decompressed(o) => write!(f, "offset {o} of the decompressed sample region"),
        }
    }
}

/// The format rule a file broke.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Rule {
    /// Shorter than the 64-byte header.
    FileTooSmall {
        /// File length.
        len: u64,
    },
    /// Neither `HCAT` nor `TACH`.
    BadMagic {
        /// The four bytes as a little-endian number.
        magic: u32,
    },
    /// A format version other than 1.
    UnsupportedVersion {
        /// The version field.
        version: u32,
        /// Python version bytes of the writer.
        python_version: [u8; 3],
    },
    /// Mode bits 6 or 7 in the profiling config.
    InvalidMode {
        /// The mode bits.
        mode: u8,
    },
    /// A stats trailer whose size is below 32 or beyond the footer.
    StatsSize {
        /// The size field.
        size: u32,
    },
    /// Stats values that are not finite or negative where they must not be.
    StatsValues,
    /// String table offset past the end of the file.
    StringTableOffsetPastEnd {
        /// The offset.
        offset: u64,
        /// File length.
        file_len: u64,
    },
    /// Frame table offset past the end of the file.
    FrameTableOffsetPastEnd {
        /// The offset.
        offset: u64,
        /// File length.
        file_len: u64,
    },
    /// String table offset inside the header.
    StringTableOffsetInHeader {
        /// The offset.
        offset: u64,
    },
    /// Frame table offset inside the header.
    FrameTableOffsetInHeader {
        /// The offset.
        offset: u64,
    },
    /// String table after the frame table.
    TablesOutOfOrder {
        /// String table offset.
        strings: u64,
        /// Frame table offset.
        frames: u64,
    },
    /// More strings declared than bytes remain.
    StringCountTooLarge {
        /// Declared count.
        count: u32,
        /// Largest possible.
        max: u64,
    },
    /// A string length varint is malformed or over 32 bits.
    MalformedStringLength,
    /// A string runs past the end of the file.
    StringOverflow {
        /// Its declared length.
        len: u32,
    },
    /// More frames declared than 7-byte entries fit.
    FrameCountTooLarge {
        /// Declared count.
        count: u32,
        /// Largest possible.
        max: u64,
    },
    /// A frame field varint is malformed or over 32 bits.
    MalformedFrameField {
        /// Which field.
        field: FrameField,
    },
    /// The file ends before a frame's opcode byte.
    FrameTableTruncated,
    /// Fewer than 13 bytes left where a record starts.
    TruncatedRecord {
        /// Bytes left.
        trailing: u64,
    },
    /// A new thread beyond the header's thread count.
    TooManyThreads {
        /// Header's count.
        declared: u32,
        /// Threads found so far, this one included.
        found: u64,
    },
    /// Encoding byte above 3.
    UnknownEncoding {
        /// The byte.
        encoding: u8,
    },
    /// REPEAT count varint malformed or over 32 bits.
    MalformedRleCount,
    /// REPEAT count larger than the bytes left allow.
    RleCountTooLarge {
        /// The count.
        count: u32,
        /// Largest possible.
        max: u64,
    },
    /// A REPEAT timestamp delta is malformed.
    MalformedRleDelta,
    /// The region ends inside a REPEAT entry.
    TruncatedRle,
    /// A record's timestamp delta is malformed.
    MalformedDelta,
    /// The region ends before a record's status byte.
    TruncatedStatus,
    /// A depth, shared, pop, push or frame-index varint is malformed or over 32 bits.
    MalformedStackVarint,
    /// A FULL record deeper than 256.
    StackTooDeep {
        /// Its depth.
        depth: u32,
    },
    /// SUFFIX shares more frames than the stack has.
    SharedExceedsDepth {
        /// Shared count.
        shared: u32,
        /// Current depth.
        depth: u32,
    },
    /// SUFFIX or POP_PUSH result deeper than 256.
    FinalStackTooDeep {
        /// Resulting depth.
        depth: u64,
    },
    /// A frame index at or beyond the frame count.
    InvalidFrameIndex {
        /// The index.
        index: u32,
    },
    /// A referenced frame names a string index at or beyond the string count.
    InvalidStringIndex {
        /// The frame.
        frame: u32,
    },
    /// The stream decoded a different number of samples than the header declares.
    SampleCountMismatch {
        /// Header's count.
        declared: u64,
        /// Decoded.
        decoded: u64,
    },
    /// The zstd region is empty or is not a zstd frame.
    ZstdFrameHeader,
    /// The zstd region ends inside a frame.
    ZstdTruncated,
    /// libzstd reported an error (its error code), e.g. a window larger than allowed.
    Zstd {
        /// `ZSTD_ErrorCode`.
        code: u32,
    },
    /// A compressed file was opened without a decompressor (the `zstd` feature or workspace).
    ZstdUnavailable,
    /// The decompressed sample region is larger than the reader's limit (CPython's: 1 GiB).
    ZstdTooLarge {
        /// The limit, bytes.
        limit: u64,
    },
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Rule::*;
        match *self {
            FileTooSmall { len } => write!(f, "File too small for header ({len} bytes)"),
            BadMagic { magic } => write!(f, "Invalid magic number: 0x{:08x}", magic),
            UnsupportedVersion { version, python_version: [a, b, c] } => {
                write!(f, "Unsupported format version {version} (written by Python {a}.{b}.{c}; this reader supports version 1)")
            }
            InvalidMode { mode } => write!(f, "Invalid profiling mode in header: {mode}"),
            StatsSize { size } => write!(f, "Invalid profiling statistics size ({size})"),
            StatsValues => f.write_str("Invalid profiling statistics values"),
            StringTableOffsetPastEnd { offset, file_len } => {
                write!(f, "Invalid string table offset: {offset} exceeds file size {file_len}")
            }
            FrameTableOffsetPastEnd { offset, file_len } => {
                write!(f, "Invalid frame table offset: {offset} exceeds file size {file_len}")
            }
            StringTableOffsetInHeader { offset } => {
                write!(f, "Invalid string table offset: {offset} is before data section")
            }
            FrameTableOffsetInHeader { offset } => {
                write!(f, "Invalid frame table offset: {offset} is before data section")
            }
            TablesOutOfOrder { strings, frames } => {
                write!(f, "Invalid table offsets: string table ({strings}) is after frame table ({frames})")
            }
            StringCountTooLarge { count, max } => write!(f, "Invalid string count {count} exceeds maximum possible {max}"),
            MalformedStringLength => f.write_str("Malformed varint in string table"),
            StringOverflow { len } => write!(f, "String table overflow (string of {len} bytes)"),
            FrameCountTooLarge { count, max } => write!(f, "Invalid frame count {count} exceeds maximum possible {max}"),
            MalformedFrameField { field } => write!(f, "Malformed varint in frame table ({})", field.name()),
            FrameTableTruncated => f.write_str("Unexpected end of frame table (opcode)"),
            TruncatedRecord { trailing } => write!(f, "Truncated sample data: {trailing} trailing bytes"),
            TooManyThreads { declared, found } => write!(
                f,
                "Invalid thread count: sample data contains more unique threads than declared in header (declared {declared}, found at least {found})"
            ),
            UnknownEncoding { encoding } => write!(f, "Unknown stack encoding: {encoding}"),
            MalformedRleCount => f.write_str("Malformed varint for RLE count"),
            RleCountTooLarge { count, max } => write!(f, "Invalid RLE count {count} exceeds maximum possible {max}"),
            MalformedRleDelta => f.write_str("Malformed varint in RLE sample data"),
            TruncatedRle => f.write_str("Unexpected end of sample data in RLE"),
            MalformedDelta => f.write_str("Malformed varint in sample data"),
            TruncatedStatus => f.write_str("Unexpected end of sample data"),
            MalformedStackVarint => f.write_str("Invalid or incomplete varint in binary data"),
            StackTooDeep { depth } => write!(f, "Stack depth {depth} exceeds capacity 256"),
            SharedExceedsDepth { shared, depth } => write!(f, "Shared count {shared} exceeds current stack depth {depth}"),
            FinalStackTooDeep { depth } => write!(f, "Final stack depth {depth} exceeds capacity 256"),
            InvalidFrameIndex { index } => write!(f, "Invalid frame index: {index}"),
            InvalidStringIndex { frame } => write!(f, "Invalid string index in frame {frame}"),
            SampleCountMismatch { declared, decoded } => {
                write!(f, "Sample count mismatch: header declares {declared} samples but replay decoded {decoded}")
            }
            ZstdFrameHeader => f.write_str("Corrupted zstd frame header"),
            ZstdTruncated => f.write_str("Incomplete zstd frame: data may be truncated"),
            Zstd { code } => write!(f, "zstd decompression error (ZSTD_ErrorCode {code})"),
            ZstdUnavailable => f.write_str("compressed sample region but no zstd decompressor was provided"),
            ZstdTooLarge { limit } => write!(f, "decompressed sample region exceeds {limit} bytes"),
        }
    }
}

/// A reader error: I/O from the source, a broken format rule, or storage too small.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ReadError<E> {
    /// The source failed.
    Io {
        /// Where the read started.
        position: Position,
        /// The source's error.
        error: E,
    },
    /// The source ended early (a `read` returned 0 inside the file's declared length).
    UnexpectedEof {
        /// Where the read started.
        position: Position,
    },
    /// The file breaks a rule of the format.
    Format {
        /// Where.
        position: Position,
        /// Which rule, with the values.
        rule: Rule,
    },
    /// The file is valid so far but needs more than the caller's storage.
    Capacity {
        /// Where.
        position: Position,
        /// Which table.
        resource: Resource,
        /// Its capacity.
        capacity: usize,
    },
}

impl<E> ReadError<E> {
    pub(crate) fn format(position: Position, rule: Rule) -> Self {
        ReadError::Format { position, rule }
    }

    /// The rule broken, for `Format` errors.
    pub fn rule(&self) -> Option<Rule> {
        match self {
            ReadError::Format { rule, .. } => Some(*rule),
            _ => None,
        }
    }

    /// Where the error happened.
    pub fn position(&self) -> Position {
        match self {
            ReadError::Io { position, .. }
            | ReadError::UnexpectedEof { position }
            | ReadError::Format { position, .. }
            | ReadError::Capacity { position, .. } => *position,
        }
    }
}

impl<E: fmt::Debug> fmt::Display for ReadError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io { position, error } => write!(f, "I/O error at {position}: {error:?}"),
            ReadError::UnexpectedEof { position } => write!(f, "file ended early at {position}"),
            ReadError::Format { position, rule } => write!(f, "{rule} (at {position})"),
            ReadError::Capacity { position, resource, capacity } => {
                write!(f, "reader storage too small at {position}: more than {capacity} {resource:?}")
            }
        }
    }
}

impl<E: fmt::Debug> core::error::Error for ReadError<E> {}

/// A format limit of CPython's writer (spec 5.10): reaching one sets `limit_reached`, the
/// sample is refused and the writer stays usable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
///
/// CPython's count limits (2^32 − 1 strings, frames or threads) are always reached later than
/// the caller's storage, whose tables hold at most 2^32 − 2 entries; they surface as
/// [`WriteError::Capacity`].
pub enum FormatLimit {
    /// A string longer than 2^32 − 1 bytes.
    StringLength,
    /// 2^64 − 1 samples.
    Samples,
}

/// A writer error.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum WriteError<E> {
    /// The sink failed at this file offset. Nothing of the failed call was accepted; the
    /// writer stays usable, rewrites from its last good position on the next call, and
    /// `finish` can be retried.
    Sink {
        /// File offset of the failed write or seek.
        offset: u64,
        /// The sink's error.
        error: E,
    },
    /// The sink's `write` returned 0 for a non-empty buffer (treated like an I/O error).
    SinkWroteZero {
        /// File offset.
        offset: u64,
    },
    /// A caller-provided table is full: the sample was refused, everything before it kept.
    Capacity {
        /// Which table.
        resource: Resource,
    },
    /// A format limit was reached: the sample was refused, everything before it kept.
    Limit(FormatLimit),
    /// `set_stats` got a value CPython rejects (not finite, or negative where not allowed).
    InvalidStats,
    /// A frame id not obtained from this writer.
    UnknownFrameId {
        /// The id.
        id: u32,
    },
    /// libzstd failed (its `ZSTD_ErrorCode`); the writer cannot go on compressing.
    Zstd {
        /// The code.
        code: u32,
    },
    /// The configuration asks for zstd but the storage holds no compressor
    /// (`WriterStorage::with_zstd`, feature `zstd`).
    CompressorMissing,
    /// The writer was already finished.
    Finished,
    /// [`Writer::restart`](crate::Writer::restart) was called before the current file was
    /// finished.
    NotFinished,
}

impl<E> WriteError<E> {
    /// The same error with the sink's error mapped by `f` (a caller that writes through
    /// several sinks reports one error type).
    pub fn map_sink<F>(self, f: impl FnOnce(E) -> F) -> WriteError<F> {
        match self {
            WriteError::Sink { offset, error } => WriteError::Sink { offset, error: f(error) },
            WriteError::SinkWroteZero { offset } => WriteError::SinkWroteZero { offset },
            WriteError::Capacity { resource } => WriteError::Capacity { resource },
            WriteError::Limit(l) => WriteError::Limit(l),
            WriteError::InvalidStats => WriteError::InvalidStats,
            WriteError::UnknownFrameId { id } => WriteError::UnknownFrameId { id },
            WriteError::Zstd { code } => WriteError::Zstd { code },
            WriteError::CompressorMissing => WriteError::CompressorMissing,
            WriteError::Finished => WriteError::Finished,
            WriteError::NotFinished => WriteError::NotFinished,
        }
    }

    /// True for capacity and format limits: the file is still finishable with everything
    /// accepted so far (CPython's `limit_reached`).
    pub fn is_limit(&self) -> bool {
        matches!(self, WriteError::Capacity { .. } | WriteError::Limit(_))
    }
}

impl<E: fmt::Debug> fmt::Display for WriteError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::Sink { offset, error } => write!(f, "sink error at file offset {offset}: {error:?}"),
            WriteError::SinkWroteZero { offset } => write!(f, "sink accepted no bytes at file offset {offset}"),
            WriteError::Capacity { resource } => write!(f, "writer storage full: {resource:?}"),
            WriteError::Limit(l) => write!(f, "format limit reached: {l:?}"),
            WriteError::InvalidStats => f.write_str("invalid profiling statistics"),
            WriteError::UnknownFrameId { id } => write!(f, "frame id {id} was not interned by this writer"),
            WriteError::Zstd { code } => write!(f, "zstd compression error (ZSTD_ErrorCode {code})"),
            WriteError::CompressorMissing => f.write_str("zstd compression requested without a compressor"),
            WriteError::Finished => f.write_str("writer is already finished"),
            WriteError::NotFinished => f.write_str("restart before the current file was finished"),
        }
    }
}

impl<E: fmt::Debug> core::error::Error for WriteError<E> {}
