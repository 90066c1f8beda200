//! The fixed-size structures: the 64-byte header, the 32-byte footer and the optional 56-byte
//! `TACHSTAT` stats trailer (spec sections 1.1, 6, 7 and 10.3).
//!
//! Each is encoded from and decoded into a plain struct in one step over a fixed-size array,
//! so a reader does one bounds check per structure.

use crate::endian::{Endianity, RunTimeEndian};

/// `"TACH"` read as a big-endian number; little-endian files start with `48 43 41 54`.
pub const MAGIC: u32 = 0x5441_4348;
/// The only format version 3.15.2 writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// Size of the header at offset 0.
pub const HEADER_SIZE: usize = 64;
/// Size of the footer at the end of the file.
pub const FOOTER_SIZE: usize = 32;
/// Size of the stats trailer 3.15.2 writes.
pub const STATS_TRAILER_SIZE: usize = 56;
/// Magic of the stats trailer; bytes, so never byte-swapped.
pub const STATS_MAGIC: [u8; 8] = *b"TACHSTAT";
/// Version of the stats trailer 3.15.2 writes and understands.
pub const STATS_VERSION: u32 = 1;
/// The Python version CPython 3.15.2 stamps into bytes 8–10.
pub const CPYTHON_VERSION: [u8; 3] = [3, 15, 2];

/// The compression field at header offset 56.
///
/// Only the value 1 means zstd; every other value is stored verbatim and means a raw sample
/// region, which is how CPython's writer and reader treat it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Compression {
    /// Raw sample region (field value 0).
    None,
    /// One zstd frame (field value 1).
    Zstd,
    /// Any other field value: raw sample region.
    Other(u32),
}

impl Compression {
    /// Interprets the header field.
    pub fn from_field(value: u32) -> Self {
        match value {
            0 => Compression::None,
            1 => Compression::Zstd,
            v => Compression::Other(v),
        }
    }

    /// The header field value.
    pub fn field(self) -> u32 {
        match self {
            Compression::None => 0,
            Compression::Zstd => 1,
            Compression::Other(v) => v,
        }
    }

    /// A name for people: `none`, `zstd`, or `other` (any other value, read as raw).
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Zstd => "zstd",
            Compression::Other(_) => "other",
        }
    }
}

/// The profiler mode recorded in the profiling-config bitfield.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum ProfilingMode {
    /// Wall-clock sampling (CPython mode 0).
    Wall = 0,
    /// CPU time (1).
    Cpu = 1,
    /// GIL holder (2).
    Gil = 2,
    /// All (3).
    All = 3,
    /// Exceptions (4).
    Exception = 4,
}

impl ProfilingMode {
    /// CPython's integer for the mode.
    pub fn value(self) -> u8 {
        self as u8
    }

    /// The mode for CPython's integer, if valid.
    pub fn from_value(v: i64) -> Option<Self> {
        Some(match v {
            0 => ProfilingMode::Wall,
            1 => ProfilingMode::Cpu,
            2 => ProfilingMode::Gil,
            3 => ProfilingMode::All,
            4 => ProfilingMode::Exception,
            _ => return None,
        })
    }

    /// CPython's name for the mode (`PROFILING_MODE_NAMES`: `wall`, `cpu`, `gil`, `all`,
    /// `exception`).
    pub fn name(self) -> &'static str {
        match self {
            ProfilingMode::Wall => "wall",
            ProfilingMode::Cpu => "cpu",
            ProfilingMode::Gil => "gil",
            ProfilingMode::All => "all",
            ProfilingMode::Exception => "exception",
        }
    }

    /// The mode CPython names `name`, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        (0..=4).filter_map(ProfilingMode::from_value).find(|m| m.name() == name)
    }
}

/// The 5-bit capture-features mask (`all_threads`, `native`, `gc`, `opcodes`, `blocking`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CaptureFeatures(u8);

impl CaptureFeatures {
    /// Every sampled thread, not only the main one.
    pub const ALL_THREADS: u8 = 1 << 0;
    /// Native frames.
    pub const NATIVE: u8 = 1 << 1;
    /// GC frames.
    pub const GC: u8 = 1 << 2;
    /// Opcodes.
    pub const OPCODES: u8 = 1 << 3;
    /// Blocking calls.
    pub const BLOCKING: u8 = 1 << 4;

    /// The mask, if it fits in the format's five bits.
    pub fn new(mask: u8) -> Option<Self> {
        (mask < 32).then_some(CaptureFeatures(mask))
    }

    /// The mask.
    pub fn bits(self) -> u8 {
        self.0
    }

    /// The names of the features set, in bit order, as CPython's sampler options name them
    /// (`all_threads`, `native`, `gc`, `opcodes`, `blocking`).
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        const NAMES: [&str; 5] = ["all_threads", "native", "gc", "opcodes", "blocking"];
        NAMES.into_iter().enumerate().filter(move |&(bit, _)| self.0 & (1 << bit) != 0).map(|(_, name)| name)
    }
}

/// The profiling-config bitfield at header offset 60: mode and capture features, each optional.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ProfilingConfig {
    /// `None` when the writer did not know the mode.
    pub mode: Option<ProfilingMode>,
    /// `None` when the writer did not know the features.
    pub capture_features: Option<CaptureFeatures>,
}

impl ProfilingConfig {
    /// `(mode + 1) | 8 | features << 4`, as CPython's writer computes it.
    pub fn encode(self) -> u32 {
        let mode = self.mode.map_or(0, |m| u32::from(m.value()) + 1);
        let features = self.capture_features.map_or(0, |f| 8 | (u32::from(f.bits()) << 4));
        mode | features
    }

    /// Decodes the field; `Err(mode bits)` for the invalid mode values 6 and 7.
    pub fn decode(field: u32) -> Result<Self, u8> {
        let mode_bits = (field & 7) as u8;
        let mode = match mode_bits {
            0 => None,
            m @ 1..=5 => ProfilingMode::from_value(i64::from(m - 1)),
            m => return Err(m),
        };
        // Bits 4–8 mean something only when bit 3 says the features are known.
        let capture_features = (field & 8 != 0).then_some(CaptureFeatures(((field >> 4) & 0x1f) as u8));
        Ok(ProfilingConfig { mode, capture_features })
    }
}

/// Which of the two version-1 header layouts a file uses (spec 10.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum HeaderLayout {
    /// CPython 3.15.2: u64 sample count at 28, config at 60.
    V3_15_2,
    /// The December 2025 design document: u32 sample count at 28, no config.
    Dec2025,
}

/// The header fields, independent of byte order and layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Header {
    /// Python version bytes 8–10 (not checked by readers).
    pub python_version: [u8; 3],
    /// Start of profiling, µs; the first timestamp delta of each thread is relative to it.
    pub start_time_us: u64,
    /// Nominal sampling interval, µs.
    pub sample_interval_us: u64,
    /// Thread samples in the file, REPEAT ones included.
    pub sample_count: u64,
    /// Distinct `(thread_id, interpreter_id)` pairs.
    pub thread_count: u32,
    /// Absolute offset of the string table (end of the sample region).
    pub string_table_offset: u64,
    /// Absolute offset of the frame table.
    pub frame_table_offset: u64,
    /// Compression of the sample region.
    pub compression: Compression,
    /// Mode and capture features.
    pub config: ProfilingConfig,
}

/// Why a header could not be decoded (the offset is always 0..64; the reader adds it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum HeaderError {
    /// The first four bytes are neither `HCAT` nor `TACH`; the value as read little-endian.
    BadMagic(u32),
    /// A format version other than 1, with the writer's Python version.
    UnsupportedVersion {
        /// The version field.
        version: u32,
        /// Bytes 8–10.
        python_version: [u8; 3],
    },
    /// Mode bits 6 or 7 in the profiling config.
    InvalidMode(u8),
}

#[inline]
fn array<const N: usize>(bytes: &[u8; HEADER_SIZE], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&bytes[at..at + N]);
    out
}

impl Header {
    /// The 64 header bytes in byte order `e` and the 3.15.2 layout.
    pub fn encode<E: Endianity>(&self, e: E) -> [u8; HEADER_SIZE] {
        let mut b = [0u8; HEADER_SIZE];
        b[0..4].copy_from_slice(&e.u32_bytes(MAGIC));
        b[4..8].copy_from_slice(&e.u32_bytes(FORMAT_VERSION));
        b[8..11].copy_from_slice(&self.python_version);
        b[12..20].copy_from_slice(&e.u64_bytes(self.start_time_us));
        b[20..28].copy_from_slice(&e.u64_bytes(self.sample_interval_us));
        b[28..36].copy_from_slice(&e.u64_bytes(self.sample_count));
        b[36..40].copy_from_slice(&e.u32_bytes(self.thread_count));
        b[40..48].copy_from_slice(&e.u64_bytes(self.string_table_offset));
        b[48..56].copy_from_slice(&e.u64_bytes(self.frame_table_offset));
        b[56..60].copy_from_slice(&e.u32_bytes(self.compression.field()));
        b[60..64].copy_from_slice(&e.u32_bytes(self.config.encode()));
        b
    }

    /// The byte order named by the magic.
    pub fn detect_endian(bytes: &[u8; HEADER_SIZE]) -> Result<RunTimeEndian, HeaderError> {
        match array::<4>(bytes, 0) {
            [0x48, 0x43, 0x41, 0x54] => Ok(RunTimeEndian::Little),
            [0x54, 0x41, 0x43, 0x48] => Ok(RunTimeEndian::Big),
            other => Err(HeaderError::BadMagic(u32::from_le_bytes(other))),
        }
    }

    /// Decodes a header of a file of `file_len` bytes: byte order from the magic, then the
    /// layout by the plausibility rule of spec 10.3, then the checks CPython runs on the
    /// header in its order (magic, version, mode).
    pub fn decode(
        bytes: &[u8; HEADER_SIZE],
        file_len: u64,
    ) -> Result<(Header, RunTimeEndian, HeaderLayout), HeaderError> {
        let e = Self::detect_endian(bytes)?;
        let python_version = array::<3>(bytes, 8);
        let version = e.read_u32(array(bytes, 4));
        if version != FORMAT_VERSION {
            return Err(HeaderError::UnsupportedVersion { version, python_version });
        }
        let u32_at = |at| e.read_u32(array(bytes, at));
        let u64_at = |at| e.read_u64(array(bytes, at));
        let tables_fit = |strings: u64, frames: u64| {
            64 <= strings && strings <= frames && frames <= file_len.saturating_sub(FOOTER_SIZE as u64)
        };
        // The 3.15.2 layout wins whenever it is plausible, and also when neither is, so that
        // the offset checks report CPython's errors for a damaged 3.15.2 file.
        let old_plausible = !tables_fit(u64_at(40), u64_at(48))
            && tables_fit(u64_at(36), u64_at(44))
            && u32_at(52) <= 1
            && bytes[56..64].iter().all(|&b| b == 0);
        let common = Header {
            python_version,
            start_time_us: u64_at(12),
            sample_interval_us: u64_at(20),
            sample_count: 0,
            thread_count: 0,
            string_table_offset: 0,
            frame_table_offset: 0,
            compression: Compression::None,
            config: ProfilingConfig::default(),
        };
        if old_plausible {
            let header = Header {
                sample_count: u64::from(u32_at(28)),
                thread_count: u32_at(32),
                string_table_offset: u64_at(36),
                frame_table_offset: u64_at(44),
                compression: Compression::from_field(u32_at(52)),
                ..common
            };
            return Ok((header, e, HeaderLayout::Dec2025));
        }
        let config = ProfilingConfig::decode(u32_at(60)).map_err(HeaderError::InvalidMode)?;
        let header = Header {
            sample_count: u64_at(28),
            thread_count: u32_at(36),
            string_table_offset: u64_at(40),
            frame_table_offset: u64_at(48),
            compression: Compression::from_field(u32_at(56)),
            config,
            ..common
        };
        Ok((header, e, HeaderLayout::V3_15_2))
    }
}

/// The footer's fields (the checksum is always zero and never read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Footer {
    /// Entries in the string table.
    pub string_count: u32,
    /// Entries in the frame table.
    pub frame_count: u32,
    /// Total file size as the writer saw it (readers ignore it, as CPython's does).
    pub file_size: u64,
}

impl Footer {
    /// The 32 footer bytes.
    pub fn encode<E: Endianity>(&self, e: E) -> [u8; FOOTER_SIZE] {
        let mut b = [0u8; FOOTER_SIZE];
        b[0..4].copy_from_slice(&e.u32_bytes(self.string_count));
        b[4..8].copy_from_slice(&e.u32_bytes(self.frame_count));
        b[8..16].copy_from_slice(&e.u64_bytes(self.file_size));
        b
    }

    /// Decodes the footer bytes.
    pub fn decode<E: Endianity>(b: &[u8; FOOTER_SIZE], e: E) -> Self {
        let mut u32b = [0u8; 4];
        let mut u64b = [0u8; 8];
        u32b.copy_from_slice(&b[0..4]);
        let string_count = e.read_u32(u32b);
        u32b.copy_from_slice(&b[4..8]);
        let frame_count = e.read_u32(u32b);
        u64b.copy_from_slice(&b[8..16]);
        Footer { string_count, frame_count, file_size: e.read_u64(u64b) }
    }
}

/// The run statistics of `set_stats()`.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Stats {
    /// Profiling duration, seconds.
    pub duration_sec: f64,
    /// Achieved sample rate, Hz.
    pub sample_rate: f64,
    /// Error rate (percent in CPython's CLI), if known.
    pub error_rate: Option<f64>,
    /// Missed samples (percent in CPython's CLI; a double), if known.
    pub missed_samples: Option<f64>,
}

impl Stats {
    /// CPython's validation: duration and rate finite and ≥ 0, error rate finite and ≥ 0,
    /// missed samples finite (negative allowed).
    pub fn is_valid(&self) -> bool {
        let non_negative = |v: f64| v.is_finite() && v >= 0.0;
        non_negative(self.duration_sec)
            && non_negative(self.sample_rate)
            && self.error_rate.map_or(true, non_negative)
            && self.missed_samples.map_or(true, f64::is_finite)
    }

    /// The stats of `written` samples, the last at `last_timestamp_us`, with `refused` more
    /// that the writer refused and `dropped` more that never reached it, in the meanings
    /// CPython's own profiler gives the fields (`profiling.sampling` 3.15.2): `duration_sec`
    /// from `start_time_us` to the last sample, `sample_rate` samples written a second,
    /// `error_rate` the percentage of samples taken that were refused, `missed_samples` the
    /// percentage of all samples that never reached the writer.
    pub fn of_counts(
        start_time_us: u64,
        last_timestamp_us: Option<u64>,
        written: u64,
        refused: u64,
        dropped: u64,
    ) -> Stats {
        let duration_sec =
            last_timestamp_us.map_or(0.0, |last| last.saturating_sub(start_time_us) as f64 / 1_000_000.0);
        let sample_rate = if duration_sec > 0.0 { written as f64 / duration_sec } else { 0.0 };
        let taken = written + refused;
        let percent = |part: u64, whole: u64| if whole > 0 { part as f64 * 100.0 / whole as f64 } else { 0.0 };
        Stats {
            duration_sec,
            sample_rate,
            error_rate: Some(percent(refused, taken)),
            missed_samples: Some(percent(dropped, taken + dropped)),
        }
    }

    /// The 56-byte trailer 3.15.2 writes.
    pub fn encode<E: Endianity>(&self, e: E) -> [u8; STATS_TRAILER_SIZE] {
        let mut b = [0u8; STATS_TRAILER_SIZE];
        let present = u32::from(self.error_rate.is_some()) | (u32::from(self.missed_samples.is_some()) << 1);
        b[0..8].copy_from_slice(&e.f64_bytes(self.duration_sec));
        b[8..16].copy_from_slice(&e.f64_bytes(self.sample_rate));
        b[16..24].copy_from_slice(&e.f64_bytes(self.error_rate.unwrap_or(0.0)));
        b[24..32].copy_from_slice(&e.f64_bytes(self.missed_samples.unwrap_or(0.0)));
        b[32..36].copy_from_slice(&e.u32_bytes(present));
        b[40..48].copy_from_slice(&STATS_MAGIC);
        b[48..52].copy_from_slice(&e.u32_bytes(STATS_VERSION));
        b[52..56].copy_from_slice(&e.u32_bytes(STATS_TRAILER_SIZE as u32));
        b
    }
}

/// The 16 bytes that end a stats trailer and let a reader find its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatsTail {
    /// Trailer version (only 1 is understood).
    pub version: u32,
    /// Trailer size, counted back from the footer.
    pub size: u32,
}

impl StatsTail {
    /// `Some` when the 16 bytes before the footer carry the `TACHSTAT` magic.
    pub fn decode<E: Endianity>(b: &[u8; 16], e: E) -> Option<Self> {
        if b[0..8] != STATS_MAGIC {
            return None;
        }
        let mut w = [0u8; 4];
        w.copy_from_slice(&b[8..12]);
        let version = e.read_u32(w);
        w.copy_from_slice(&b[12..16]);
        Some(StatsTail { version, size: e.read_u32(w) })
    }
}

/// How many leading trailer bytes a reader needs for a trailer of `size` bytes: the two
/// mandatory doubles, and the optional fields plus `present` only when `size >= 56`.
pub fn stats_prefix_len(size: u32) -> usize {
    if size as usize >= STATS_TRAILER_SIZE {
        40
    } else {
        16
    }
}

/// Decodes the fields of a trailer from its leading bytes (see [`stats_prefix_len`]).
pub fn decode_stats<E: Endianity>(prefix: &[u8], e: E) -> Stats {
    let f64_at = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&prefix[at..at + 8]);
        e.read_f64(w)
    };
    let present = if prefix.len() >= 40 {
        let mut w = [0u8; 4];
        w.copy_from_slice(&prefix[32..36]);
        e.read_u32(w)
    } else {
        0
    };
    Stats {
        duration_sec: f64_at(0),
        sample_rate: f64_at(8),
        error_rate: (present & 1 != 0).then(|| f64_at(16)),
        missed_samples: (present & 2 != 0).then(|| f64_at(24)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endian::{BigEndian, LittleEndian};

    #[test]
    fn config_bitfield_spec_examples() {
        let cfg = |mode: i64, cap: u8| ProfilingConfig {
            mode: ProfilingMode::from_value(mode),
            capture_features: CaptureFeatures::new(cap),
        };
        assert_eq!(cfg(2, 21).encode(), 0x15b);
        assert_eq!(cfg(1, 0b01011).encode(), 0xba);
        assert_eq!(cfg(0, 0b00101).encode(), 0x59);
        assert_eq!(cfg(1, 0b01111).encode(), 0xfa);
        assert_eq!(ProfilingConfig::default().encode(), 0);
        assert_eq!(ProfilingConfig::decode(0xba), Ok(cfg(1, 0b01011)));
        // Features without bit 3 are ignored.
        assert_eq!(ProfilingConfig::decode(0x10), Ok(ProfilingConfig::default()));
        assert_eq!(ProfilingConfig::decode(6), Err(6));
        assert_eq!(ProfilingConfig::decode(7), Err(7));
    }

    fn sample_header() -> Header {
        Header {
            python_version: CPYTHON_VERSION,
            start_time_us: 1_000_000,
            sample_interval_us: 1000,
            sample_count: 8,
            thread_count: 2,
            string_table_offset: 0xb2,
            frame_table_offset: 0xea,
            compression: Compression::None,
            config: ProfilingConfig::default(),
        }
    }

    #[test]
    fn header_round_trips_in_both_orders() {
        let h = sample_header();
        for (bytes, order) in
            [(h.encode(LittleEndian), RunTimeEndian::Little), (h.encode(BigEndian), RunTimeEndian::Big)]
        {
            assert_eq!(Header::decode(&bytes, 287), Ok((h, order, HeaderLayout::V3_15_2)));
        }
        assert_eq!(&h.encode(LittleEndian)[..4], b"HCAT");
        assert_eq!(&h.encode(BigEndian)[..4], b"TACH");
    }

    #[test]
    fn old_layout_is_recognised() {
        let h = sample_header();
        for e in [RunTimeEndian::Little, RunTimeEndian::Big] {
            let new = h.encode(e);
            let mut old = [0u8; HEADER_SIZE];
            old[..28].copy_from_slice(&new[..28]);
            old[28..32].copy_from_slice(&e.u32_bytes(8));
            old[32..36].copy_from_slice(&e.u32_bytes(2));
            old[36..44].copy_from_slice(&e.u64_bytes(0xb2));
            old[44..52].copy_from_slice(&e.u64_bytes(0xea));
            let (decoded, _, layout) = Header::decode(&old, 287).unwrap();
            assert_eq!(layout, HeaderLayout::Dec2025);
            assert_eq!(decoded, h);
        }
    }

    #[test]
    fn header_errors() {
        let mut b = sample_header().encode(LittleEndian);
        b[60] = 7;
        assert_eq!(Header::decode(&b, 287), Err(HeaderError::InvalidMode(7)));
        b[4] = 2;
        assert_eq!(
            Header::decode(&b, 287),
            Err(HeaderError::UnsupportedVersion { version: 2, python_version: [3, 15, 2] })
        );
        b[0] = b'X';
        assert!(matches!(Header::decode(&b, 287), Err(HeaderError::BadMagic(_))));
    }

    #[test]
    fn stats_trailer_round_trip() {
        let s = Stats { duration_sec: 2.5, sample_rate: 1000.0, error_rate: Some(0.125), missed_samples: Some(3.0) };
        let b = s.encode(BigEndian);
        let mut tail = [0u8; 16];
        tail.copy_from_slice(&b[40..56]);
        assert_eq!(StatsTail::decode(&tail, BigEndian), Some(StatsTail { version: 1, size: 56 }));
        assert_eq!(decode_stats(&b[..stats_prefix_len(56)], BigEndian), s);
        let partial = Stats { error_rate: None, ..s };
        assert_eq!(decode_stats(&partial.encode(LittleEndian)[..40], LittleEndian), partial);
        assert!(!Stats { duration_sec: f64::NAN, ..s }.is_valid());
        assert!(Stats { missed_samples: Some(-1.0), ..s }.is_valid());
        assert!(!Stats { error_rate: Some(-1.0), ..s }.is_valid());
    }
}
