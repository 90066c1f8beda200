//! MOJO's varints: sign and magnitude, least significant group first.
//!
//! | byte | bits |
//! |---|---|
//! | first | `continue:1, negative:1, value:6` |
//! | later | `continue:1, value:7` |
//!
//! Austin writes the shortest form and sets the sign only on negative memory deltas (never
//! on zero), so real files re-encode byte for byte. Readers accept longer forms; this one
//! accepts any form of at most [`MAX_LEN`] bytes, enough for every u64 (a frame key of
//! `u64::MAX` takes all ten).

/// The longest varint read or written: 6 + 9 × 7 = 69 bits.
pub const MAX_LEN: usize = 10;

/// A decoded varint: the sign bit and the magnitude.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Varint {
    /// The sign bit of the first byte.
    pub negative: bool,
    /// The value without its sign.
    pub magnitude: u64,
}

/// Why bytes are not a varint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarintError {
    /// The bytes end before the varint does.
    Incomplete,
    /// More than 64 bits of magnitude, or more than [`MAX_LEN`] bytes.
    Overflow,
}

/// Decodes the varint at the start of `bytes`; returns it and its length.
pub fn decode(bytes: &[u8]) -> Result<(Varint, usize), VarintError> {
    let first = *bytes.first().ok_or(VarintError::Incomplete)?;
    let negative = first & 0x40 != 0;
    // One and two bytes, nearly every varint of a real file, without the loop.
    match bytes.get(1) {
        _ if first & 0x80 == 0 => return Ok((Varint { negative, magnitude: u64::from(first & 0x3f) }, 1)),
        Some(&second) if second & 0x80 == 0 => {
            let magnitude = u64::from(first & 0x3f) | u64::from(second) << 6;
            return Ok((Varint { negative, magnitude }, 2));
        }
        _ => {}
    }
    let mut magnitude = u64::from(first & 0x3f);
    let mut more = first & 0x80 != 0;
    let mut shift = 6u32;
    let mut len = 1;
    while more {
        if len == MAX_LEN {
            return Err(VarintError::Overflow);
        }
        let byte = *bytes.get(len).ok_or(VarintError::Incomplete)?;
        let group = u64::from(byte & 0x7f);
        // Bits the group would push past bit 63 must be zero.
        if group != 0 && (shift >= 64 || group >> (64 - shift) != 0) {
            return Err(VarintError::Overflow);
        }
        if shift < 64 {
            magnitude |= group << shift;
        }
        shift += 7;
        more = byte & 0x80 != 0;
        len += 1;
    }
    Ok((Varint { negative, magnitude }, len))
}

/// Austin's encoding of a magnitude and sign into `out`; returns the bytes used (at most
/// [`MAX_LEN`]).
pub fn encode(negative: bool, magnitude: u64, out: &mut [u8; MAX_LEN]) -> usize {
    let mut rest = magnitude >> 6;
    let mut first = (magnitude & 0x3f) as u8;
    if negative {
        first |= 0x40;
    }
    if rest != 0 {
        first |= 0x80;
    }
    out[0] = first;
    let mut len = 1;
    while rest != 0 {
        let mut byte = (rest & 0x7f) as u8;
        rest >>= 7;
        if rest != 0 {
            byte |= 0x80;
        }
        out[len] = byte;
        len += 1;
    }
    len
}

/// Austin's encoding of a signed value (a memory delta): the sign only when negative.
pub fn encode_signed(value: i64, out: &mut [u8; MAX_LEN]) -> usize {
    encode(value < 0, value.unsigned_abs(), out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(negative: bool, magnitude: u64) -> ([u8; MAX_LEN], usize) {
        let mut out = [0; MAX_LEN];
        let n = encode(negative, magnitude, &mut out);
        (out, n)
    }

    #[test]
    fn real_files_forms() {
        // From real files (the format page): a memory delta, and the key of a frame whose
        // instruction offset is -1.
        let (Varint { negative, magnitude }, n) = decode(&[0xc0, 0xc0, 0x0a]).unwrap();
        assert_eq!((negative, magnitude, n), (true, 86016, 3));
        let max = [0xbf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x03];
        assert_eq!(decode(&max).unwrap(), (Varint { negative: false, magnitude: u64::MAX }, 10));
        let (out, n) = enc(false, u64::MAX);
        assert_eq!(&out[..n], &max);
        let (out, n) = enc(true, 86016);
        assert_eq!(&out[..n], &[0xc0, 0xc0, 0x0a]);
        // 879 µs, `09 af 0d` in a real file.
        let (out, n) = enc(false, 879);
        assert_eq!(&out[..n], &[0xaf, 0x0d]);
    }

    #[test]
    fn longer_forms_read_and_overflow_is_named() {
        assert_eq!(decode(&[0x85, 0x00]).unwrap(), (Varint { negative: false, magnitude: 5 }, 2));
        assert_eq!(decode(&[0x85, 0x80]), Err(VarintError::Incomplete));
        // Bit 64 set in the tenth byte.
        let over = [0xbf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x04];
        assert_eq!(decode(&over), Err(VarintError::Overflow));
        // An eleventh byte, even of zeros.
        let long = [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00];
        assert_eq!(decode(&long), Err(VarintError::Overflow));
    }

    #[test]
    fn every_width_round_trips() {
        for bits in 0..64 {
            for value in [1u64 << bits, (1u64 << bits) - 1, (1u64 << bits) | 1] {
                for negative in [false, true] {
                    let (out, n) = enc(negative, value);
                    assert_eq!(decode(&out[..n]).unwrap(), (Varint { negative, magnitude: value }, n));
                }
            }
        }
    }
}
