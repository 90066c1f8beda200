//! What the two framed links share (`transport`'s writes and `stream`'s samples): each frame
//! is COBS-encoded and ended by `0x00`, so a receiver finds the next frame after any damage,
//! and checked by zlib's CRC-32.

/// CRC-32 as zlib computes it (reflected, polynomial 0xEDB88320), four bits at a time: a
/// 64-byte table where a byte-wide one would cost a kilobyte of a small device's flash.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        crc = (crc >> 4) ^ NIBBLE[(crc & 15) as usize];
        crc = (crc >> 4) ^ NIBBLE[(crc & 15) as usize];
    }
    !crc
}

/// The CRC of each nibble: what four steps of the bitwise loop do to it.
const NIBBLE: [u32; 16] = {
    let mut table = [0u32; 16];
    let mut i = 0;
    while i < 16 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 4 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// The most non-zero bytes one COBS block carries.
#[cfg(feature = "stream")]
const BLOCK: usize = 254;

/// Writes `bytes` COBS-encoded to `link` (without the closing `0x00`), block by block, with
/// no buffer of its own: each block's code byte is found by looking ahead at most 254 bytes.
#[cfg(feature = "stream")]
pub(crate) fn write_cobs<L: embedded_io::Write>(link: &mut L, mut bytes: &[u8]) -> Result<(), Failure<L::Error>> {
    loop {
        let run = bytes.iter().take(BLOCK).position(|&b| b == 0).unwrap_or(bytes.len().min(BLOCK));
        write_all(link, &[run as u8 + 1])?;
        write_all(link, bytes.get(..run).unwrap_or_default())?;
        if run == BLOCK {
            bytes = bytes.get(run..).unwrap_or_default();
        } else if run == bytes.len() {
            return Ok(());
        } else {
            // The zero the block's code stands for.
            bytes = bytes.get(run + 1..).unwrap_or_default();
        }
    }
}

/// How a write to a link failed.
#[cfg(feature = "stream")]
pub(crate) enum Failure<E> {
    /// The link's error.
    Link(E),
    /// The link took no bytes of a non-empty write (which `embedded_io::Write` forbids).
    WroteZero,
}

/// All of `bytes` to `link`, in as many writes as it takes.
#[cfg(feature = "stream")]
pub(crate) fn write_all<L: embedded_io::Write>(link: &mut L, mut bytes: &[u8]) -> Result<(), Failure<L::Error>> {
    while !bytes.is_empty() {
        match link.write(bytes) {
            Ok(0) => return Err(Failure::WroteZero),
            Ok(n) => bytes = bytes.get(n..).unwrap_or_default(),
            Err(e) => return Err(Failure::Link(e)),
        }
    }
    Ok(())
}

/// Decodes the COBS bytes of one frame (without its closing `0x00`) in place; the decoded
/// length, or `None` when they are not COBS (a zero byte, a block past the end).
#[cfg(feature = "stream")]
pub(crate) fn decode_cobs(bytes: &mut [u8]) -> Option<usize> {
    let (mut read, mut written) = (0, 0);
    while let Some(&code) = bytes.get(read) {
        let run = usize::from(code).checked_sub(1)?;
        let start = read + 1;
        let end = start.checked_add(run).filter(|&end| end <= bytes.len())?;
        if bytes.get(start..end)?.contains(&0) {
            return None;
        }
        bytes.copy_within(start..end, written);
        written += run;
        read = end;
        if run < BLOCK && read < bytes.len() {
            *bytes.get_mut(written)? = 0;
            written += 1;
        }
    }
    Some(written)
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use std::vec::Vec;

    /// A link that keeps what is sent.
    #[cfg(feature = "stream")]
    struct Link(Vec<u8>);

    #[cfg(feature = "stream")]
    impl embedded_io::ErrorType for Link {
        type Error = core::convert::Infallible;
    }

    #[cfg(feature = "stream")]
    impl embedded_io::Write for Link {
        fn write(&mut self, buf: &[u8]) -> Result<usize, Self::Error> {
            self.0.extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> Result<(), Self::Error> {
            Ok(())
        }
    }

    #[test]
    fn crc_is_zlibs() {
        // zlib.crc32 of b"123456789", of nothing, and of bytes 0..=255 twice (Python).
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
        let all: Vec<u8> = (0..512).map(|i| i as u8).collect();
        assert_eq!(crc32(&all), 0x1C61_3576);
    }

    /// COBS by the textbook's loop (a code placeholder filled in when its block ends), to
    /// check the streaming encoder and the decoder against.
    #[cfg(feature = "stream")]
    fn textbook(data: &[u8]) -> Vec<u8> {
        let mut out = std::vec![0u8];
        let (mut code_at, mut code) = (0, 1u8);
        for &b in data {
            if b == 0 {
                out[code_at] = code;
                code_at = out.len();
                out.push(0);
                code = 1;
            } else {
                out.push(b);
                code += 1;
                if code == 0xFF {
                    out[code_at] = code;
                    code_at = out.len();
                    out.push(0);
                    code = 1;
                }
            }
        }
        out[code_at] = code;
        out.push(0);
        out
    }

    #[cfg(feature = "stream")]
    #[test]
    fn cobs_is_the_textbooks_and_decodes_back() {
        let mut cases: Vec<Vec<u8>> =
            std::vec![std::vec![], std::vec![0], std::vec![0, 0], std::vec![5, 0], std::vec![1, 2, 3],];
        for n in [253, 254, 255, 508, 509, 600] {
            cases.push((0..n).map(|i| (i % 255 + 1) as u8).collect());
            let mut with_zero: Vec<u8> = (0..n).map(|i| (i % 255 + 1) as u8).collect();
            with_zero.push(0);
            cases.push(with_zero.clone());
            with_zero.insert(0, 0);
            cases.push(with_zero);
        }
        for data in &cases {
            let mut link = Link(Vec::new());
            assert!(write_cobs(&mut link, data).is_ok());
            let mut wire = link.0;
            wire.push(0);
            assert_eq!(wire, textbook(data), "{data:?}");
            let mut body = wire[..wire.len() - 1].to_vec();
            let n = decode_cobs(&mut body).unwrap();
            assert_eq!(&body[..n], &data[..], "{data:?}");
        }
        // Not COBS: a zero inside, a block past the end, a zero code.
        assert_eq!(decode_cobs(&mut [3, 1, 0]), None);
        assert_eq!(decode_cobs(&mut [4, 1, 2]), None);
        assert_eq!(decode_cobs(&mut [0]), None);
    }
}
