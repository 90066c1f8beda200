//! Which profile format a file holds, from its first bytes (as `object::FileKind` does for
//! object files): never from its name.

use crate::endian::{BigEndian, Endianity, LittleEndian};
use crate::header::MAGIC;

/// Bytes [`FileKind::detect`] looks at, at most.
pub const DETECT_BYTES: usize = 64;

/// A profile format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum FileKind {
    /// Tachyon (CPython 3.15's `--binary`): magic `TACH` in the writer's byte order.
    Tachyon,
    /// A gperftools CPU profile: a header of zero, a small word count and version, in 4- or
    /// 8-byte slots of either order (detected only with the `gperftools` feature).
    Gperftools,
    /// A pprof `profile.proto`, gzipped (gzip's magic `1f 8b`, as pprof writes it) or not (a
    /// first byte that is a `Profile` field's key).
    Pprof {
        /// Gzip-compressed.
        gzipped: bool,
    },
    /// Austin's MOJO: magic `MOJ`.
    Mojo,
    /// A Python marshal dictionary (a pstats file): `{`, with or without marshal's
    /// reference flag.
    Marshal,
    /// None of these.
    Unknown,
}

impl FileKind {
    /// The format of a file starting with `prefix` (give it [`DETECT_BYTES`] bytes, or the
    /// whole file if shorter).
    pub fn detect(prefix: &[u8]) -> FileKind {
        if let Some(magic) = prefix.get(..4).and_then(|b| <[u8; 4]>::try_from(b).ok()) {
            if LittleEndian.read_u32(magic) == MAGIC || BigEndian.read_u32(magic) == MAGIC {
                return FileKind::Tachyon;
            }
        }
        if prefix.starts_with(b"MOJ") {
            return FileKind::Mojo;
        }
        if prefix.starts_with(&[0x1f, 0x8b]) {
            return FileKind::Pprof { gzipped: true };
        }
        #[cfg(feature = "gperftools")]
        if is_gperftools(prefix) {
            return FileKind::Gperftools;
        }
        match prefix.first() {
            Some(b'{' | 0xfb) => FileKind::Marshal,
            _ if is_profile_proto(prefix) => FileKind::Pprof { gzipped: false },
            _ => FileKind::Unknown,
        }
    }

    /// What a file of the format is called in a sentence: `Tachyon file`, `gperftools CPU
    /// profile`, `pprof profile`, `MOJO file`, `pstats file`.
    pub fn title(self) -> &'static str {
        match self {
            FileKind::Tachyon => "Tachyon file",
            FileKind::Gperftools => "gperftools CPU profile",
            FileKind::Pprof { .. } => "pprof profile",
            FileKind::Mojo => "MOJO file",
            FileKind::Marshal => "pstats file",
            FileKind::Unknown => "file of unknown format",
        }
    }

    /// The name `info` prints: `tachyon`, `gperftools`, `pprof`, `mojo`, `marshal`, `unknown`.
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Tachyon => "tachyon",
            FileKind::Gperftools => "gperftools",
            FileKind::Pprof { .. } => "pprof",
            FileKind::Mojo => "mojo",
            FileKind::Marshal => "marshal",
            FileKind::Unknown => "unknown",
        }
    }
}

/// Whether `prefix` parses as the start of a `Profile` message: every field key is one of
/// its fields 1–14 with that field's wire type (messages, strings and packed numbers
/// length-delimited; scalars varints), every varint ends within ten bytes, up to the end of
/// the prefix or, after at least one whole field, a length-delimited field that runs past it.
fn is_profile_proto(prefix: &[u8]) -> bool {
    let mut at = 0;
    let mut fields = 0;
    let varint = |at: &mut usize| -> Option<u64> {
        let mut value = 0u64;
        for shift in 0..10 {
            let b = *prefix.get(*at)?;
            *at += 1;
            value |= u64::from(b & 0x7f) << (7 * shift);
            if b & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    };
    while at < prefix.len() {
        let Some(key) = varint(&mut at) else { return fields > 0 && at >= prefix.len() };
        let (field, wire) = (key >> 3, key & 7);
        let delimited = matches!(field, 1..=6 | 11 | 13);
        let scalar = matches!(field, 7..=10 | 12 | 13 | 14);
        match wire {
            2 if delimited => {
                let Some(len) = varint(&mut at) else { return fields > 0 && at >= prefix.len() };
                fields += 1;
                if len > (prefix.len() - at.min(prefix.len())) as u64 {
                    // Runs past what we have: one field alone could be text by chance.
                    return fields >= 2;
                }
                at += len as usize;
            }
            0 if scalar => {
                if varint(&mut at).is_none() {
                    return fields > 0 && at >= prefix.len();
                }
                fields += 1;
            }
            _ => return false,
        }
    }
    fields > 0
}

/// google-pprof's word-size and byte-order detection, then its header checks.
#[cfg(feature = "gperftools")]
fn is_gperftools(prefix: &[u8]) -> bool {
    use crate::gperftools::{detect, Word};
    let Ok((word, endian)) = detect(prefix) else { return false };
    let w = word.bytes();
    let slot = |i: usize| prefix.get(i * w..).and_then(|b| word.read(endian, b));
    matches!((slot(0), slot(1)), (Some(0), Some(words)) if (3..=(1u64 << 32) - 2).contains(&words))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_bytes_name_the_format() {
        assert_eq!(FileKind::detect(b"HCAT\x01\x00\x00\x00"), FileKind::Tachyon);
        assert_eq!(FileKind::detect(b"TACH\x00\x00\x00\x01"), FileKind::Tachyon);
        assert_eq!(FileKind::detect(b"MOJ\x03"), FileKind::Mojo);
        assert_eq!(FileKind::detect(&[0x1f, 0x8b, 8, 0]), FileKind::Pprof { gzipped: true });
        assert_eq!(FileKind::detect(&[0x0a, 0x02, 0x08, 0x01]), FileKind::Pprof { gzipped: false });
        assert_eq!(FileKind::detect(b"{\x00"), FileKind::Marshal);
        assert_eq!(FileKind::detect(b"plain text"), FileKind::Unknown);
        assert_eq!(FileKind::detect(b"2 lines\n"), FileKind::Unknown);
        assert_eq!(
            FileKind::detect(&[0x0a, 0x04, 0x08, 0x01, 0x10, 0x02, 0x12, 0x30]),
            FileKind::Pprof { gzipped: false }
        );
        assert_eq!(FileKind::detect(b""), FileKind::Unknown);
    }

    #[cfg(feature = "gperftools")]
    #[test]
    fn gperftools_headers_in_every_width_and_order() {
        let le32 = [0u8, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0x10, 0x27, 0, 0, 0, 0, 0, 0];
        let be32 = [0u8, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0x27, 0x10, 0, 0, 0, 0];
        let mut le64 = [0u8; 40];
        le64[8] = 3;
        let mut be64 = [0u8; 40];
        be64[15] = 3;
        for h in [&le32[..], &be32, &le64, &be64] {
            assert_eq!(FileKind::detect(h), FileKind::Gperftools, "{h:?}");
        }
        // Zero header words is no profile.
        assert_eq!(FileKind::detect(&[0u8; 40]), FileKind::Unknown);
    }
}
