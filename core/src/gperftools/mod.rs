//! gperftools CPU profiles, as libprofiler writes them and google-pprof reads them
//! (feature `gperftools`).
//!
//! # Wire format
//!
//! Everything is a sequence of *slots*, the writer's `uintptr_t`: 4 or 8 bytes in the
//! writer's byte order ([`word`]).
//!
//! | part | slots | libprofiler writes |
//! |---|---|---|
//! | header | `0, words, version, period_us, padding`, then `words − 3` more | `0, 3, 0, 1e6 / frequency, 0` |
//! | record | `count, depth, pc[0] … pc[depth − 1]` | one per eviction of a stack from its table, so one stack can have several; at most 254 program counters |
//! | end | a record whose first program counter is 0 | the trailer `0, 1, 0` |
//! | tail | bytes to the end of the file | `/proc/self/maps`, reformatted |
//!
//! Readers find the slot width and byte order from the header ([`detect`]). google-pprof,
//! the format's own reader, ends the data at *any* record whose first program counter is 0
//! (its maps text then starts `depth` slots further), at the end of the file (trailer
//! optional, a partial last slot dropped), and refuses depths over 2^16. These readers
//! follow it and name in [`Quirks`] what libprofiler never writes. Where google-pprof reads
//! past the end of a file (a header cut short), they return an error instead.

mod reader;
pub mod word;
mod writer;

pub use reader::{detect, End, Item, Pcs, Reader, Record, Tail, LARGEST_RECORD_WINDOW, MIN_WINDOW};
pub use word::{NativeWord, RunTimeWord, Word, Word32, Word64};
pub use writer::{WriteError, Writer};

use crate::endian::RunTimeEndian;

/// The deepest record readers accept (google-pprof: "stack trace depth >= 2**32" beyond).
pub const MAX_DEPTH: u64 = 1 << 16;

/// libprofiler's deepest record: 254 program counters.
pub const LIBPROFILER_MAX_DEPTH: usize = 254;

/// The header's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Header {
    /// Slot width.
    pub word: RunTimeWord,
    /// Byte order.
    pub endian: RunTimeEndian,
    /// Header words after the second slot: 3 (version, period, padding) plus extra ones.
    pub words: u64,
    /// Format version (0).
    pub version: u64,
    /// Sampling period in microseconds (1,000,000 / `CPUPROFILE_FREQUENCY`, default 10,000).
    pub period_us: u64,
    /// The padding slot (0).
    pub padding: u64,
}

impl Header {
    /// The header libprofiler writes on this target.
    pub fn libprofiler(period_us: u64) -> Self {
        Header {
            word: RunTimeWord::default(),
            endian: RunTimeEndian::default(),
            words: 3,
            version: 0,
            period_us,
            padding: 0,
        }
    }
}

impl Default for Header {
    fn default() -> Self {
        Header::libprofiler(10_000)
    }
}

/// What a file did that libprofiler never does and google-pprof accepts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Quirks {
    /// The header has more than three words after its second slot (go pprof refuses it).
    pub extra_header_words: bool,
    /// Format version other than 0 (go pprof reads version 1 as a Java profile).
    pub version_not_zero: bool,
    /// Sampling period 0 (go pprof refuses it).
    pub period_zero: bool,
    /// Padding slot other than 0.
    pub padding_not_zero: bool,
    /// The data ended at a record with first program counter 0 other than the trailer
    /// `0, 1, 0` (go pprof counts a mid-file one as a sample and reads on).
    pub end_not_trailer: bool,
    /// The data ended at the end of the file, without a trailer (and so without maps text).
    pub no_trailer: bool,
    /// The file ends within a slot; the part is dropped.
    pub partial_slot: bool,
    /// The last record is cut short by the end of the file; its samples count with the
    /// program counters present.
    pub cut_record: bool,
    /// A record with count 0.
    pub zero_count_record: bool,
}

impl Quirks {
    /// Names of the quirks met, for `info`.
    pub fn names(&self) -> impl Iterator<Item = &'static str> {
        [
            (self.extra_header_words, "extra header words"),
            (self.version_not_zero, "version not 0"),
            (self.period_zero, "period 0"),
            (self.padding_not_zero, "padding not 0"),
            (self.end_not_trailer, "data ended by a pc-0 record other than the trailer"),
            (self.no_trailer, "no trailer"),
            (self.partial_slot, "partial last slot"),
            (self.cut_record, "last record cut short"),
            (self.zero_count_record, "count-0 record"),
        ]
        .into_iter()
        .filter_map(|(met, name)| met.then_some(name))
    }
}

/// The rule a file broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Rule {
    /// Shorter than the header.
    TooShort {
        /// Bytes there are.
        len: u64,
        /// Bytes needed.
        needed: u64,
    },
    /// Neither half of the header-words slot is zero (google-pprof: "header size >= 2**16"
    /// for 4-byte slots, "2**32" for 8-byte ones).
    HeaderWordsUnreadable,
    /// The first slot is not 0 ("not a profile file, or old format profile file").
    NotAProfile {
        /// Its value.
        first_slot: u64,
    },
    /// Header words outside 3..=2^32 − 2.
    HeaderWords {
        /// The slot's value.
        words: u64,
    },
    /// Version over 2^32.
    Version {
        /// The value.
        version: u64,
    },
    /// Period over 2^32 µs.
    Period {
        /// The value.
        period_us: u64,
    },
    /// Record depth over 2^16.
    Depth {
        /// The value.
        depth: u64,
    },
}

impl core::fmt::Display for Rule {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Rule::TooShort { len, needed } => write!(f, "{len} bytes, shorter than the header ({needed} bytes)"),
            Rule::HeaderWordsUnreadable => f.write_str("header size >= 2**16 (not a CPU profile)"),
            Rule::NotAProfile { first_slot } => {
                write!(f, "not a profile file, or old format profile file (first slot {first_slot:#x})")
            }
            Rule::HeaderWords { words } => write!(f, "header of {words} words: not a profile, or corrupted"),
            Rule::Version { version } => write!(f, "version {version} over 2**32: corrupted profile"),
            Rule::Period { period_us } => write!(f, "period {period_us} over 2**32: corrupted profile"),
            Rule::Depth { depth } => write!(f, "stack trace depth {depth} over 2**16"),
        }
    }
}

/// A read failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ReadError<E> {
    /// The source failed at this file offset.
    Io {
        /// File offset.
        offset: u64,
        /// The source's error.
        error: E,
    },
    /// The file broke a rule at this offset.
    Format {
        /// File offset.
        offset: u64,
        /// The rule.
        rule: Rule,
    },
    /// A record longer than the caller's window (a capacity, not a format, limit).
    TooLarge {
        /// File offset of the record.
        offset: u64,
        /// Its depth.
        depth: u64,
        /// The window's length.
        window: usize,
    },
    /// A window under [`MIN_WINDOW`] bytes.
    WindowTooSmall {
        /// Its length.
        len: usize,
        /// The least.
        needed: usize,
    },
}

impl<E> From<crate::inbox::SourceError<E>> for ReadError<E> {
    fn from(e: crate::inbox::SourceError<E>) -> Self {
        ReadError::Io { offset: e.offset, error: e.error }
    }
}

impl<E: core::fmt::Debug> core::fmt::Display for ReadError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ReadError::Io { offset, error } => write!(f, "read error at file offset {offset}: {error:?}"),
            ReadError::Format { offset, rule } => write!(f, "at file offset {offset}: {rule}"),
            ReadError::TooLarge { offset, depth, window } => {
                write!(f, "at file offset {offset}: a record of depth {depth} does not fit the {window}-byte window")
            }
            ReadError::WindowTooSmall { len, needed } => write!(f, "a window of {len} bytes; at least {needed}"),
        }
    }
}

impl<E: core::fmt::Debug> core::error::Error for ReadError<E> {}
