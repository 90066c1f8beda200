//! What the streaming readers of the formats without lengths up front (gperftools, MOJO)
//! share: the caller's window over the source, the bytes buffered in it, and the file offset
//! of the first of them. A reader decodes from [`Inbox::buffered`], [`Inbox::consume`]s what it
//! decoded, and asks [`Inbox::fill`] for more when a record or event runs past the buffered
//! bytes; the unread bytes move to the window's front only when what is asked for would not
//! fit after them, so each byte is read from the source once and moved at most once per fill.
//! The mirror of [`crate::outbox`] for their writers.

use embedded_io::Read;

/// The source failed: where the read would have put its first byte, and its error.
#[derive(Debug)]
pub(crate) struct SourceError<E> {
    pub(crate) offset: u64,
    pub(crate) error: E,
}

/// A window over a source: `window[start..end]` is buffered, and is the file from `offset`.
pub(crate) struct Inbox<'w, R> {
    source: R,
    window: &'w mut [u8],
    start: usize,
    end: usize,
    /// File offset of `window[start]`.
    offset: u64,
    eof: bool,
}

impl<'w, R: Read> Inbox<'w, R> {
    pub(crate) fn new(source: R, window: &'w mut [u8]) -> Self {
        Self::at(source, window, 0)
    }

    /// An inbox whose source is the file from `offset` on.
    pub(crate) fn at(source: R, window: &'w mut [u8], offset: u64) -> Self {
        Inbox { source, window, start: 0, end: 0, offset, eof: false }
    }

    /// The bytes read and not yet consumed.
    #[inline]
    pub(crate) fn buffered(&self) -> &[u8] {
        self.window.get(self.start..self.end).unwrap_or_default()
    }

    /// How many bytes are buffered.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.end - self.start
    }

    /// The window's length: the most that can ever be buffered.
    pub(crate) fn capacity(&self) -> usize {
        self.window.len()
    }

    /// File offset of the first buffered byte (the next one to decode).
    #[inline]
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// The source has ended: what is buffered is all the file has left (MOJO's events end
    /// where the file does).
    #[cfg(feature = "mojo")]
    #[inline]
    pub(crate) fn eof(&self) -> bool {
        self.eof
    }

    /// Consumes `n` buffered bytes (at most what is buffered).
    #[inline]
    pub(crate) fn consume(&mut self, n: usize) {
        let n = n.min(self.end - self.start);
        self.start += n;
        self.offset += n as u64;
    }

    /// Consumes `n` buffered bytes and gives them, still in the window, for as long as
    /// nothing else is asked of the inbox.
    #[inline]
    pub(crate) fn take(&mut self, n: usize) -> &[u8] {
        let at = self.start;
        self.consume(n);
        self.window.get(at..self.start).unwrap_or_default()
    }

    /// Buffers at least `n` bytes from the current position (at most the window's length),
    /// or all the file has left.
    pub(crate) fn fill(&mut self, n: usize) -> Result<(), SourceError<R::Error>> {
        let n = n.min(self.window.len());
        if self.end - self.start >= n || self.eof {
            return Ok(());
        }
        if self.start + n > self.window.len() {
            self.window.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        while self.end - self.start < n {
            let Some(free) = self.window.get_mut(self.end..).filter(|f| !f.is_empty()) else { break };
            match self.source.read(free) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(k) => self.end += k.min(free.len()),
                Err(error) => return Err(SourceError { offset: self.offset + (self.end - self.start) as u64, error }),
            }
        }
        Ok(())
    }

    /// Fills `dst` with the next bytes, buffered ones first, then straight from the source;
    /// 0 at the end of the file (gperftools' tail, read after the records).
    #[cfg(feature = "gperftools")]
    pub(crate) fn read(&mut self, dst: &mut [u8]) -> Result<usize, SourceError<R::Error>> {
        if self.end > self.start {
            let n = dst.len().min(self.end - self.start);
            if let (Some(d), Some(s)) = (dst.get_mut(..n), self.window.get(self.start..self.start + n)) {
                d.copy_from_slice(s);
            }
            self.consume(n);
            return Ok(n);
        }
        if self.eof || dst.is_empty() {
            return Ok(0);
        }
        match self.source.read(dst) {
            Ok(0) => {
                self.eof = true;
                Ok(0)
            }
            Ok(n) => {
                let n = n.min(dst.len());
                self.offset += n as u64;
                Ok(n)
            }
            Err(error) => Err(SourceError { offset: self.offset, error }),
        }
    }

    /// The source, with whatever is still buffered dropped.
    #[cfg(feature = "mojo")]
    pub(crate) fn into_source(self) -> R {
        self.source
    }
}
