//! Slot width: 4 bytes on 32-bit writers, 8 on 64-bit ones.
//!
//! Word size is to a gperftools profile what byte order is to Tachyon: a zero-sized type
//! parameter when the caller knows it ([`Word32`], [`Word64`], [`NativeWord`]), the
//! [`RunTimeWord`] enum when a file says it.

use core::fmt::Debug;

use crate::endian::Endianity;

/// A slot width.
pub trait Word: Copy + Default + Eq + Debug {
    /// Bytes per slot: 4 or 8.
    fn bytes(self) -> usize;

    /// The largest value a slot holds.
    #[inline]
    fn max_value(self) -> u64 {
        if self.bytes() == 4 {
            u64::from(u32::MAX)
        } else {
            u64::MAX
        }
    }

    /// Decodes one slot from the first [`Self::bytes`] bytes of `bytes`; `None` when there
    /// are fewer.
    #[inline]
    fn read<E: Endianity>(self, endian: E, bytes: &[u8]) -> Option<u64> {
        if self.bytes() == 4 {
            let b: [u8; 4] = bytes.get(..4)?.try_into().ok()?;
            Some(u64::from(endian.read_u32(b)))
        } else {
            let b: [u8; 8] = bytes.get(..8)?.try_into().ok()?;
            Some(endian.read_u64(b))
        }
    }

    /// Encodes `value` into one slot; `None` when it does not fit the width.
    #[inline]
    fn encode<E: Endianity>(self, endian: E, value: u64) -> Option<SlotBytes> {
        if self.bytes() == 4 {
            let v = u32::try_from(value).ok()?;
            Some(SlotBytes { bytes: pad(endian.u32_bytes(v)), len: 4 })
        } else {
            Some(SlotBytes { bytes: endian.u64_bytes(value), len: 8 })
        }
    }
}

fn pad(four: [u8; 4]) -> [u8; 8] {
    let mut b = [0; 8];
    b[..4].copy_from_slice(&four);
    b
}

/// One encoded slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotBytes {
    bytes: [u8; 8],
    len: u8,
}

impl SlotBytes {
    /// The slot's bytes.
    pub fn as_slice(&self) -> &[u8] {
        self.bytes.get(..usize::from(self.len)).unwrap_or(&self.bytes)
    }
}

/// 4-byte slots (i386, 32-bit ARM, 32-bit PowerPC).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Word32;

/// 8-byte slots (x86_64, aarch64, s390x, powerpc64).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Word64;

/// A slot width read from a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RunTimeWord {
    /// 4-byte slots.
    Four,
    /// 8-byte slots.
    Eight,
}

impl Default for RunTimeWord {
    /// This target's pointer width, as libprofiler writes.
    fn default() -> Self {
        if cfg!(target_pointer_width = "32") {
            RunTimeWord::Four
        } else {
            RunTimeWord::Eight
        }
    }
}

impl Word for Word32 {
    #[inline]
    fn bytes(self) -> usize {
        4
    }
}

impl Word for Word64 {
    #[inline]
    fn bytes(self) -> usize {
        8
    }
}

impl Word for RunTimeWord {
    #[inline]
    fn bytes(self) -> usize {
        match self {
            RunTimeWord::Four => 4,
            RunTimeWord::Eight => 8,
        }
    }
}

/// The slot width of the target this crate is compiled for: what libprofiler writes here.
#[cfg(target_pointer_width = "32")]
pub type NativeWord = Word32;
/// The slot width of the target this crate is compiled for: what libprofiler writes here.
#[cfg(not(target_pointer_width = "32"))]
pub type NativeWord = Word64;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endian::{BigEndian, LittleEndian};

    #[test]
    fn widths_and_orders_decode_the_same_value_from_different_bytes() {
        assert_eq!(Word32.read(LittleEndian, &[3, 0, 0, 0, 9]), Some(3));
        assert_eq!(Word32.read(BigEndian, &[0, 0, 0, 3]), Some(3));
        assert_eq!(Word64.read(BigEndian, &[0, 0, 0, 0, 0, 0, 1, 2]), Some(0x102));
        assert_eq!(Word64.read(LittleEndian, &[1, 2, 3]), None);
        assert_eq!(RunTimeWord::Four.encode(BigEndian, 0x0102).unwrap().as_slice(), [0, 0, 1, 2]);
        assert_eq!(Word32.encode(LittleEndian, 1 << 32), None);
        assert_eq!(Word64.encode(LittleEndian, 1 << 32).unwrap().as_slice(), [0, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(NativeWord::default().bytes(), core::mem::size_of::<usize>());
    }
}
