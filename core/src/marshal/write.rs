//! The encoder: the objects of a stats dictionary, without references (so every Python 3
//! loads the result alike).

use embedded_io::Write;

/// Why an object was not written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodeError<E> {
    /// The sink failed.
    Sink(E),
    /// A str of 2^32 bytes or more (marshal's lengths are 32-bit).
    TooLong,
}

impl<E> From<E> for EncodeError<E> {
    fn from(e: E) -> Self {
        EncodeError::Sink(e)
    }
}

impl<E: core::fmt::Debug> core::fmt::Display for EncodeError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            EncodeError::Sink(e) => write!(f, "sink error: {e:?}"),
            EncodeError::TooLong => f.write_str("a string of 2^32 bytes or more"),
        }
    }
}

type Res<E> = Result<(), EncodeError<E>>;

/// Writes marshal objects into a sink; the caller writes containers' items in order.
pub struct Encoder<W: Write> {
    sink: W,
}

impl<W: Write> Encoder<W> {
    /// An encoder writing into `sink`.
    pub fn new(sink: W) -> Self {
        Encoder { sink }
    }

    /// The sink back.
    pub fn into_inner(self) -> W {
        self.sink
    }

    /// Starts a dict: key and value objects follow, then [`Self::end_dict`].
    pub fn dict(&mut self) -> Res<W::Error> {
        Ok(self.sink.write_all(b"{")?)
    }

    /// Ends a dict (the NULL key).
    pub fn end_dict(&mut self) -> Res<W::Error> {
        Ok(self.sink.write_all(b"0")?)
    }

    /// Starts a tuple of `len` items (`)` up to 255 items, `(` beyond).
    pub fn tuple(&mut self, len: u32) -> Res<W::Error> {
        match u8::try_from(len) {
            Ok(n) => Ok(self.sink.write_all(&[b')', n])?),
            Err(_) => {
                self.sink.write_all(b"(")?;
                Ok(self.sink.write_all(&len.to_le_bytes())?)
            }
        }
    }

    /// Starts a list of `len` items.
    pub fn list(&mut self, len: u32) -> Res<W::Error> {
        self.sink.write_all(b"[")?;
        Ok(self.sink.write_all(&len.to_le_bytes())?)
    }

    /// `True` or `False`.
    pub fn bool(&mut self, v: bool) -> Res<W::Error> {
        Ok(self.sink.write_all(if v { b"T" } else { b"F" })?)
    }

    /// An int: `i` when it fits 32 bits, otherwise a long in base-2^15 digits.
    pub fn int(&mut self, v: i128) -> Res<W::Error> {
        if let Ok(small) = i32::try_from(v) {
            self.sink.write_all(b"i")?;
            return Ok(self.sink.write_all(&small.to_le_bytes())?);
        }
        let mut magnitude = v.unsigned_abs();
        let mut digits = [0u16; 9]; // 128 bits / 15
        let mut n = 0;
        while magnitude != 0 {
            digits[n] = (magnitude & 0x7fff) as u16;
            magnitude >>= 15;
            n += 1;
        }
        let count = if v < 0 { -(n as i32) } else { n as i32 };
        self.sink.write_all(b"l")?;
        self.sink.write_all(&count.to_le_bytes())?;
        for d in &digits[..n] {
            self.sink.write_all(&d.to_le_bytes())?;
        }
        Ok(())
    }

    /// A binary float (`g`).
    pub fn float(&mut self, v: f64) -> Res<W::Error> {
        self.sink.write_all(b"g")?;
        Ok(self.sink.write_all(&v.to_le_bytes())?)
    }

    /// A str from UTF-8 bytes: `z` for short ASCII, `u` otherwise (nothing is written for
    /// one too long for marshal).
    pub fn str(&mut self, s: &[u8]) -> Res<W::Error> {
        if s.is_ascii() && s.len() < 256 {
            self.sink.write_all(&[b'z', s.len() as u8])?;
        } else {
            let len = u32::try_from(s.len()).map_err(|_| EncodeError::TooLong)?;
            self.sink.write_all(b"u")?;
            self.sink.write_all(&len.to_le_bytes())?;
        }
        Ok(self.sink.write_all(s)?)
    }
}
