//! The sending side: a seekable sink whose writes go out as frames.

use embedded_io::{ErrorType, Seek, SeekFrom, Write};

use super::{chunk_for, encode, Record, MAGIC, MIN_SCRATCH, VERSION};

/// A `Write + Seek` sink for the Tachyon writer over a link that can only write: every
/// write goes out as a [`Record::Write`] frame with its offset (split to fit `scratch`), a
/// seek only moves the offset. [`FramedSink::new`] sends `Begin`, [`FramedSink::finish`] `End`.
///
/// A frame is sent whole or the write fails; the sequence number moves on only when it was
/// sent, so a write the Tachyon writer retries after a link error goes out with the number
/// the failed one had (the receiver refuses the damaged frame in between).
pub struct FramedSink<'b, L: Write> {
    link: L,
    scratch: &'b mut [u8],
    seq: u32,
    position: u64,
    length: u64,
    /// `End` went out (a retried [`FramedSink::finish`] then only flushes: a second `End`
    /// would make the receiver refuse the stream).
    ended: bool,
}

/// Errors of [`FramedSink`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SinkError<E> {
    /// The link failed.
    Link(E),
    /// The scratch buffer is shorter than [`MIN_SCRATCH`].
    ScratchTooSmall,
    /// A seek before the start or past `u64`.
    InvalidSeek,
    /// Past `u32::MAX` frames.
    TooManyFrames,
    /// [`FramedSink::send_journal`] was given a record that is not a journal record.
    NotJournal,
    /// A journaled stream was asked for a compressed sample region.
    Compressed,
}

impl<E: core::fmt::Debug> core::fmt::Display for SinkError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SinkError::Link(e) => write!(f, "link: {e:?}"),
            SinkError::ScratchTooSmall => write!(f, "scratch buffer shorter than {MIN_SCRATCH} bytes"),
            SinkError::InvalidSeek => f.write_str("seek to a negative or overflowing position"),
            SinkError::TooManyFrames => f.write_str("more than 2^32 frames"),
            SinkError::NotJournal => f.write_str("not a journal record"),
            SinkError::Compressed => f.write_str("a journaled stream needs an uncompressed sample region"),
        }
    }
}

impl<E: core::fmt::Debug> core::error::Error for SinkError<E> {}

impl<E: embedded_io::Error> embedded_io::Error for SinkError<E> {
    fn kind(&self) -> embedded_io::ErrorKind {
        match self {
            SinkError::Link(e) => e.kind(),
            SinkError::ScratchTooSmall | SinkError::InvalidSeek | SinkError::NotJournal | SinkError::Compressed => {
                embedded_io::ErrorKind::InvalidInput
            }
            SinkError::TooManyFrames => embedded_io::ErrorKind::OutOfMemory,
        }
    }
}

impl<'b, L: Write> FramedSink<'b, L> {
    /// Sends `Begin` on `link`; frames are staged in `scratch` (at least [`MIN_SCRATCH`]
    /// bytes; [`chunk_for`] says how many file bytes a frame then carries).
    pub fn new(link: L, scratch: &'b mut [u8]) -> Result<Self, SinkError<L::Error>> {
        if scratch.len() < MIN_SCRATCH {
            return Err(SinkError::ScratchTooSmall);
        }
        let mut sink = FramedSink { link, scratch, seq: 0, position: 0, length: 0, ended: false };
        sink.begin()?;
        Ok(sink)
    }

    /// Starts a new stream on `link` (the next file of a rotating writer) and gives back the
    /// old link; `Begin` goes out with the first record sent on the new one.
    pub fn restart(&mut self, link: L) -> L {
        self.seq = 0;
        self.position = 0;
        self.length = 0;
        self.ended = false;
        core::mem::replace(&mut self.link, link)
    }

    /// True once `End` went out.
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// Sends `Begin` unless this link has it: it is always frame 0, so a link has it once
    /// any frame went out.
    fn begin(&mut self) -> Result<(), SinkError<L::Error>> {
        if self.seq == 0 {
            self.send_frame(&Record::Begin { magic: MAGIC, version: VERSION })?;
        }
        Ok(())
    }

    /// Sends `End` with the file's length (one past the highest byte written) and flushes;
    /// after a failure it can be called again (`End` goes out once).
    pub fn finish(&mut self) -> Result<u64, SinkError<L::Error>> {
        if !self.ended {
            self.send(&Record::End { length: self.length })?;
            self.ended = true;
        }
        self.link.flush().map_err(SinkError::Link)?;
        Ok(self.length)
    }

    /// Sends a journal record (`Header`, `String`, `Frame`, `Stats`; see the module's wire
    /// format). A string longer than a frame carries goes out in parts.
    pub fn send_journal(&mut self, record: &Record<'_>) -> Result<(), SinkError<L::Error>> {
        let chunk = chunk_for(self.scratch.len());
        match *record {
            Record::String { bytes, continues } if bytes.len() > chunk => {
                let mut parts = bytes.chunks(chunk).peekable();
                while let Some(part) = parts.next() {
                    let more = continues || parts.peek().is_some();
                    self.send(&Record::String { bytes: part, continues: more })?;
                }
                Ok(())
            }
            Record::Begin { .. } | Record::Write { .. } | Record::End { .. } => Err(SinkError::NotJournal),
            _ => self.send(record),
        }
    }

    /// The file's length so far (one past the highest byte written).
    pub fn length(&self) -> u64 {
        self.length
    }

    /// Frames sent so far.
    pub fn frames(&self) -> u32 {
        self.seq
    }

    /// The link.
    pub fn into_inner(self) -> L {
        self.link
    }

    fn send(&mut self, record: &Record<'_>) -> Result<(), SinkError<L::Error>> {
        self.begin()?;
        self.send_frame(record)
    }

    fn send_frame(&mut self, record: &Record<'_>) -> Result<(), SinkError<L::Error>> {
        let next = self.seq.checked_add(1).ok_or(SinkError::TooManyFrames)?;
        // `chunk_for` keeps every record within the scratch buffer.
        let frame = encode(self.seq, record, self.scratch).map_err(|_| SinkError::ScratchTooSmall)?;
        self.link.write_all(frame).map_err(SinkError::Link)?;
        self.seq = next;
        Ok(())
    }
}

impl<L: Write> ErrorType for FramedSink<'_, L> {
    type Error = SinkError<L::Error>;
}

impl<L: Write> Write for FramedSink<'_, L> {
    fn write(&mut self, buf: &[u8]) -> Result<usize, Self::Error> {
        let n = buf.len().min(chunk_for(self.scratch.len()));
        if n == 0 {
            return Ok(0);
        }
        let end = self.position.checked_add(n as u64).ok_or(SinkError::InvalidSeek)?;
        self.send(&Record::Write { offset: self.position, bytes: &buf[..n] })?;
        self.position = end;
        self.length = self.length.max(end);
        Ok(n)
    }

    fn flush(&mut self) -> Result<(), Self::Error> {
        self.link.flush().map_err(SinkError::Link)
    }
}

impl<L: Write> Seek for FramedSink<'_, L> {
    fn seek(&mut self, pos: SeekFrom) -> Result<u64, Self::Error> {
        let to = match pos {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::Current(d) => self.position.checked_add_signed(d),
            SeekFrom::End(d) => self.length.checked_add_signed(d),
        };
        self.position = to.ok_or(SinkError::InvalidSeek)?;
        Ok(self.position)
    }
}
