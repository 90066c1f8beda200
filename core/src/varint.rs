//! Unsigned LEB128 varints and 32-bit zigzag, as the format uses them (spec section 0).
//!
//! The writer always emits the shortest form. The reader follows CPython 3.15.2: non-minimal
//! encodings are accepted, at most 10 bytes are read, bits above 2^63 in the tenth byte are
//! dropped, and an eleventh byte is an error.

/// Longest varint: a `u64` needs 10 groups of 7 bits.
pub const MAX_VARINT_LEN: usize = 10;

/// Longest varint the writer emits for a value that fits in 32 bits.
pub const MAX_VARINT32_LEN: usize = 5;

/// Why a varint could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum VarintError {
    /// The input ended before a byte without the continuation bit.
    Truncated,
    /// Ten bytes all had the continuation bit set.
    TooLong,
    /// The value does not fit in 32 bits where the format requires it to.
    Exceeds32Bits,
}

/// Writes `value` in shortest LEB128 form into `out`, returning the number of bytes used.
#[inline]
pub fn encode_u64(mut value: u64, out: &mut [u8; MAX_VARINT_LEN]) -> usize {
    let mut i = 0;
    while value >= 0x80 {
        out[i] = (value as u8) | 0x80;
        value >>= 7;
        i += 1;
    }
    out[i] = value as u8;
    i + 1
}

/// Number of bytes [`encode_u64`] uses for `value`.
#[inline]
pub fn encoded_len(value: u64) -> usize {
    // Bits needed, rounded up to 7-bit groups; zero still takes one byte.
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Decodes a varint from the start of `input`: `(value, bytes consumed)`.
#[inline]
pub fn decode_u64(input: &[u8]) -> Result<(u64, usize), VarintError> {
    // Most varints in a profile are one or two bytes (frame indices, deltas of a sampling
    // interval): decode those inline, the rest out of line.
    match input {
        [b0, ..] if b0 & 0x80 == 0 => Ok((u64::from(*b0), 1)),
        [b0, b1, ..] if b1 & 0x80 == 0 => Ok((u64::from(b0 & 0x7f) | u64::from(*b1) << 7, 2)),
        _ => decode_long(input),
    }
}

/// [`decode_u64`] for varints of three bytes or more (or a truncated one).
#[inline(never)]
fn decode_long(input: &[u8]) -> Result<(u64, usize), VarintError> {
    let mut value = 0u64;
    for i in 0..MAX_VARINT_LEN {
        let Some(&byte) = input.get(i) else {
            return Err(VarintError::Truncated);
        };
        // At i = 9 the shift is 63: only the lowest payload bit survives, like CPython.
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok((value, i + 1));
        }
    }
    Err(VarintError::TooLong)
}

/// Decodes a varint that must fit in 32 bits (the format's `uvarint32`).
#[inline]
pub fn decode_u32(input: &[u8]) -> Result<(u32, usize), VarintError> {
    let (value, used) = decode_u64(input)?;
    let value = u32::try_from(value).map_err(|_| VarintError::Exceeds32Bits)?;
    Ok((value, used))
}

/// Zigzag-maps a signed 32-bit value so small magnitudes get short varints.
#[inline]
pub fn zigzag_encode(n: i32) -> u32 {
    ((n << 1) ^ (n >> 31)) as u32
}

/// Inverse of [`zigzag_encode`].
#[inline]
pub fn zigzag_decode(z: u32) -> i32 {
    ((z >> 1) as i32) ^ -((z & 1) as i32)
}

/// Reads bytes, varints and length-prefixed byte strings from the front of a slice, each
/// `None` where the slice ends first (or the varint is not one): for records whose every
/// count is checked against the bytes there are before it is trusted.
#[derive(Debug, Clone, Copy)]
pub struct Scanner<'a> {
    /// The slice.
    pub bytes: &'a [u8],
    /// Where the next read starts.
    pub at: usize,
}

impl<'a> Scanner<'a> {
    /// Reads `bytes` from `at`.
    pub fn new(bytes: &'a [u8], at: usize) -> Self {
        Scanner { bytes, at }
    }

    /// The next byte.
    pub fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    /// The next varint.
    pub fn varint(&mut self) -> Option<u64> {
        let (value, n) = decode_u64(self.bytes.get(self.at..)?).ok()?;
        self.at += n;
        Some(value)
    }

    /// The next varint that must fit in 32 bits.
    pub fn varint32(&mut self) -> Option<u32> {
        let (value, n) = decode_u32(self.bytes.get(self.at..)?).ok()?;
        self.at += n;
        Some(value)
    }

    /// The next byte string: a varint length, then that many bytes.
    pub fn string(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.varint()?).ok()?;
        let end = self.at.checked_add(len)?;
        let s = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: u64) -> ([u8; MAX_VARINT_LEN], usize) {
        let mut b = [0; MAX_VARINT_LEN];
        let n = encode_u64(v, &mut b);
        (b, n)
    }

    #[test]
    fn spec_examples_encode() {
        // Section 0 of the spec lists these exact encodings.
        let cases: [(u64, &[u8]); 5] = [
            (0, &[0x00]),
            (127, &[0x7f]),
            (128, &[0x80, 0x01]),
            (1000, &[0xe8, 0x07]),
            (u64::MAX, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
        ];
        for (v, want) in cases {
            let (b, n) = enc(v);
            assert_eq!(&b[..n], want, "value {v}");
            assert_eq!(encoded_len(v), want.len());
            assert_eq!(decode_u64(want), Ok((v, want.len())));
        }
    }

    #[test]
    fn reader_quirks_match_cpython() {
        // Non-minimal forms are accepted.
        assert_eq!(decode_u64(&[0x80, 0x00]), Ok((0, 2)));
        // Bits above 2^63 in the tenth byte are dropped: ff×9 7f reads as 2^64−1.
        let mut b = [0xffu8; 10];
        b[9] = 0x7f;
        assert_eq!(decode_u64(&b), Ok((u64::MAX, 10)));
        // An eleventh byte is an error.
        assert_eq!(decode_u64(&[0x80; 11]), Err(VarintError::TooLong));
        assert_eq!(decode_u64(&[0x80, 0x80]), Err(VarintError::Truncated));
        assert_eq!(decode_u64(&[]), Err(VarintError::Truncated));
        assert_eq!(decode_u32(&[0x80, 0x80, 0x80, 0x80, 0x10]), Err(VarintError::Exceeds32Bits));
        assert_eq!(decode_u32(&[0xff, 0xff, 0xff, 0xff, 0x0f]), Ok((u32::MAX, 5)));
    }

    #[test]
    fn zigzag_spec_examples() {
        let cases: [(i32, &[u8]); 6] = [
            (0, &[0x00]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (-2, &[0x03]),
            (10, &[0x14]),
            (-2147483643, &[0xf5, 0xff, 0xff, 0xff, 0x0f]),
        ];
        for (n, want) in cases {
            let (b, len) = enc(u64::from(zigzag_encode(n)));
            assert_eq!(&b[..len], want, "value {n}");
            assert_eq!(zigzag_decode(decode_u32(want).unwrap().0), n);
        }
        for n in [i32::MIN, i32::MAX, -7, 7] {
            assert_eq!(zigzag_decode(zigzag_encode(n)), n);
        }
    }
}
