//! Byte order of the native fields of a Tachyon file.
//!
//! The writer stores header, footer, trailer and record-prefix integers in the byte order of
//! the machine that wrote the file ("native", spec section 0). Varints, status bytes, opcodes
//! and strings have no byte order. As in gimli, the order is a zero-sized type parameter when
//! it is known at compile time ([`LittleEndian`], [`BigEndian`], [`NativeEndian`]) and the
//! [`RunTimeEndian`] enum when it is read from a file's magic.

use core::fmt::Debug;

/// A byte order for the fixed-width native fields.
pub trait Endianity: Copy + Default + Eq + Debug {
    /// True for big-endian (s390x, PowerPC) files.
    fn is_big_endian(self) -> bool;

    /// Decodes a `u32` stored in this byte order.
    #[inline]
    fn read_u32(self, bytes: [u8; 4]) -> u32 {
        if self.is_big_endian() {
            u32::from_be_bytes(bytes)
        } else {
            u32::from_le_bytes(bytes)
        }
    }

    /// Decodes a `u64` stored in this byte order.
    #[inline]
    fn read_u64(self, bytes: [u8; 8]) -> u64 {
        if self.is_big_endian() {
            u64::from_be_bytes(bytes)
        } else {
            u64::from_le_bytes(bytes)
        }
    }

    /// Decodes an IEEE-754 binary64 stored in this byte order.
    #[inline]
    fn read_f64(self, bytes: [u8; 8]) -> f64 {
        f64::from_bits(self.read_u64(bytes))
    }

    /// Encodes a `u32` in this byte order.
    #[inline]
    fn u32_bytes(self, value: u32) -> [u8; 4] {
        if self.is_big_endian() {
            value.to_be_bytes()
        } else {
            value.to_le_bytes()
        }
    }

    /// Encodes a `u64` in this byte order.
    #[inline]
    fn u64_bytes(self, value: u64) -> [u8; 8] {
        if self.is_big_endian() {
            value.to_be_bytes()
        } else {
            value.to_le_bytes()
        }
    }

    /// Encodes an IEEE-754 binary64 in this byte order.
    #[inline]
    fn f64_bytes(self, value: f64) -> [u8; 8] {
        self.u64_bytes(value.to_bits())
    }
}

/// Little-endian files (written on x86_64, aarch64, …).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LittleEndian;

/// Big-endian files (written on s390x, PowerPC, …).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BigEndian;

/// A byte order chosen at run time, for files whose order comes from the magic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RunTimeEndian {
    /// Little-endian.
    Little,
    /// Big-endian.
    Big,
}

impl Default for RunTimeEndian {
    fn default() -> Self {
        if cfg!(target_endian = "big") {
            RunTimeEndian::Big
        } else {
            RunTimeEndian::Little
        }
    }
}

impl Endianity for LittleEndian {
    #[inline]
    fn is_big_endian(self) -> bool {
        false
    }
}

impl Endianity for BigEndian {
    #[inline]
    fn is_big_endian(self) -> bool {
        true
    }
}

impl Endianity for RunTimeEndian {
    #[inline]
    fn is_big_endian(self) -> bool {
        self == RunTimeEndian::Big
    }
}

/// The byte order of the target this crate is compiled for: what CPython's writer uses.
#[cfg(target_endian = "little")]
pub type NativeEndian = LittleEndian;
/// The byte order of the target this crate is compiled for: what CPython's writer uses.
#[cfg(target_endian = "big")]
pub type NativeEndian = BigEndian;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_disagree_on_the_same_bytes() {
        let bytes = [0x48, 0x43, 0x41, 0x54];
        assert_eq!(LittleEndian.read_u32(bytes), 0x5441_4348);
        assert_eq!(BigEndian.read_u32(bytes), 0x4843_4154);
        assert_eq!(RunTimeEndian::Big.u64_bytes(1), [0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(RunTimeEndian::Little.u64_bytes(1), [1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(BigEndian.read_f64(BigEndian.f64_bytes(2.5)), 2.5);
    }

    #[test]
    fn native_matches_target() {
        assert_eq!(NativeEndian::default().is_big_endian(), cfg!(target_endian = "big"));
        assert_eq!(RunTimeEndian::default().is_big_endian(), cfg!(target_endian = "big"));
    }
}
