//! A seekable in-memory cursor, since embedded-io 0.7 ships none.
//!
//! `Cursor<&mut [u8]>` is a `Write + Seek` sink over a fixed buffer (a full buffer is an error
//! of kind `WriteZero`, never a panic); `Cursor<&[u8]>` is a `Read + Seek` source.

use embedded_io::{ErrorKind, ErrorType, Read, Seek, SeekFrom, Write};

/// Errors of [`Cursor`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CursorError {
    /// A write did not fit in the buffer.
    Full,
    /// A seek went before the start or past `u64`.
    InvalidSeek,
}

impl core::fmt::Display for CursorError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CursorError::Full => f.write_str("cursor buffer is full"),
            CursorError::InvalidSeek => f.write_str("seek to a negative or overflowing position"),
        }
    }
}

impl core::error::Error for CursorError {}

impl embedded_io::Error for CursorError {
    fn kind(&self) -> ErrorKind {
        match self {
            CursorError::Full => ErrorKind::WriteZero,
            CursorError::InvalidSeek => ErrorKind::InvalidInput,
        }
    }
}

/// A position over a byte buffer, like `std::io::Cursor`.
#[derive(Debug)]
pub struct Cursor<T> {
    inner: T,
    pos: u64,
    /// Highest position ever written, so callers know how many bytes a file took.
    written: usize,
}

impl<T: AsRef<[u8]>> Cursor<T> {
    /// A cursor at position 0.
    pub fn new(inner: T) -> Self {
        Cursor { inner, pos: 0, written: 0 }
    }

    /// The current position.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// One past the highest byte written through this cursor.
    pub fn written_len(&self) -> usize {
        self.written
    }

    /// The bytes written so far (`[0, written_len)`).
    pub fn written(&self) -> &[u8] {
        &self.inner.as_ref()[..self.written]
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.inner
    }

    /// The whole underlying buffer.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }
}

impl<T> ErrorType for Cursor<T> {
    type Error = CursorError;
}

impl<T: AsRef<[u8]>> Read for Cursor<T> {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, CursorError> {
        let data = self.inner.as_ref();
        let start = usize::try_from(self.pos).unwrap_or(usize::MAX).min(data.len());
        let n = buf.len().min(data.len() - start);
        buf[..n].copy_from_slice(&data[start..start + n]);
        self.pos += n as u64;
        Ok(n)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Write for Cursor<T> {
    fn write(&mut self, buf: &[u8]) -> Result<usize, CursorError> {
        if buf.is_empty() {
            return Ok(0);
        }
        let data = self.inner.as_mut();
        let start = match usize::try_from(self.pos) {
            Ok(p) if p < data.len() => p,
            _ => return Err(CursorError::Full),
        };
        let n = buf.len().min(data.len() - start);
        data[start..start + n].copy_from_slice(&buf[..n]);
        self.pos += n as u64;
        self.written = self.written.max(start + n);
        Ok(n)
    }

    fn flush(&mut self) -> Result<(), CursorError> {
        Ok(())
    }
}

impl<T: AsRef<[u8]>> Seek for Cursor<T> {
    fn seek(&mut self, to: SeekFrom) -> Result<u64, CursorError> {
        let (base, offset) = match to {
            SeekFrom::Start(p) => {
                self.pos = p;
                return Ok(p);
            }
            SeekFrom::End(d) => (self.inner.as_ref().len() as u64, d),
            SeekFrom::Current(d) => (self.pos, d),
        };
        let pos = base.checked_add_signed(offset).ok_or(CursorError::InvalidSeek)?;
        self.pos = pos;
        Ok(pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_seek_patch_and_read_back() {
        let mut buf = [0u8; 8];
        let mut c = Cursor::new(&mut buf[..]);
        c.write_all(&[1, 2, 3, 4]).unwrap();
        c.seek(SeekFrom::Start(1)).unwrap();
        c.write_all(&[9]).unwrap();
        assert_eq!(c.written(), &[1, 9, 3, 4]);
        assert_eq!(c.seek(SeekFrom::End(-1)).unwrap(), 7);
        assert_eq!(c.seek(SeekFrom::Current(-8)), Err(CursorError::InvalidSeek));
        c.seek(SeekFrom::Start(6)).unwrap();
        assert_eq!(c.write(&[5, 6, 7]), Ok(2));
        assert_eq!(c.write(&[5]), Err(CursorError::Full));

        let mut r = Cursor::new(&buf[..]);
        let mut out = [0u8; 3];
        r.seek(SeekFrom::Start(6)).unwrap();
        assert_eq!(r.read(&mut out), Ok(2));
        assert_eq!(&out[..2], &[5, 6]);
        assert_eq!(r.read(&mut out), Ok(0));
    }
}
