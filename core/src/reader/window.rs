//! The byte streams records are read from: the file's sample region, that region
//! decompressed here, or the region from a source of the caller's, each through the bounded
//! window in the caller's storage.

use super::*;

/// Something that fills a buffer with the next bytes of a stream; 0 means the end.
pub(super) trait Refill<E> {
    fn refill(&mut self, dst: &mut [u8]) -> Res<usize, E>;
}

/// Sequential reads of `[pos, end)` of the file; the source is already positioned at `pos`.
pub(super) struct FileRange<'a, R> {
    pub(super) src: &'a mut R,
    pub(super) pos: &'a mut u64,
    pub(super) end: u64,
}

impl<R: Read> Refill<R::Error> for FileRange<'_, R> {
    fn refill(&mut self, dst: &mut [u8]) -> Res<usize, R::Error> {
        let left = self.end.saturating_sub(*self.pos);
        let want = dst.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        if want == 0 {
            return Ok(0);
        }
        match self.src.read(&mut dst[..want]) {
            Ok(0) => Err(ReadError::UnexpectedEof { position: Position::File(*self.pos) }),
            Ok(n) => {
                let n = n.min(want);
                *self.pos += n as u64;
                Ok(n)
            }
            Err(e) => Err(io_err(*self.pos)(e)),
        }
    }
}

/// The decompressing side of a zstd sample region: the decompressor, the bytes it has
/// produced and the most it may produce.
#[cfg(feature = "zstd")]
pub(super) struct ZstdState<'w> {
    pub(super) dec: Decompressor<'w>,
    pub(super) produced: u64,
    pub(super) limit: u64,
}

#[cfg(feature = "zstd")]
impl ZstdState<'_> {
    /// The region's next decompressed bytes, reading compressed ones through `file`.
    pub(super) fn refill<R: Read>(&mut self, file: &mut FileRange<'_, R>, dst: &mut [u8]) -> Res<usize, R::Error> {
        loop {
            let at_start = self.dec.at_start();
            let out = self.dec.decompress(dst).map_err(|e| {
                // Bytes that are not a zstd frame at all read as CPython's header error.
                let rule = if at_start { Rule::ZstdFrameHeader } else { Rule::Zstd { code: e.0 } };
                ReadError::format(Position::File(*file.pos), rule)
            })?;
            if out.produced > 0 {
                self.produced += out.produced as u64;
                if self.produced > self.limit {
                    let rule = Rule::ZstdTooLarge { limit: self.limit };
                    return Err(ReadError::format(Position::Decompressed(self.limit), rule));
                }
                return Ok(out.produced);
            }
            if out.needs_input {
                let n = file.refill(self.dec.input_space())?;
                if n == 0 {
                    let rule = if self.dec.at_start() {
                        Rule::ZstdFrameHeader
                    } else if !self.dec.at_frame_boundary() {
                        Rule::ZstdTruncated
                    } else {
                        return Ok(0);
                    };
                    return Err(ReadError::format(Position::File(*file.pos), rule));
                }
                self.dec.commit_input(n);
            }
        }
    }
}

/// The bytes of a sample region, decompressed if the file is compressed, from a source of
/// the caller's instead of the reader's own reads: the std layer decompresses a zstd region
/// in a second thread, say, while the reader decodes ([`Reader::open_with_region`]).
pub trait RegionSource<E> {
    /// Fills `dst` with the region's next bytes and returns how many; 0 at the end. Errors
    /// are positioned as the reader positions its own (`ZstdRegion`, with the `zstd` feature,
    /// gives the same errors at the same offsets as the reader's built-in decompression).
    fn read_region(&mut self, dst: &mut [u8]) -> Result<usize, ReadError<E>>;
}

impl<E, S: RegionSource<E> + ?Sized> Refill<E> for &mut S {
    fn refill(&mut self, dst: &mut [u8]) -> Res<usize, E> {
        (**self).read_region(dst)
    }
}

/// A raw (uncompressed) file's sample region read from a source of its own: the reader's own
/// reads, rules and error positions, as a [`RegionSource`] that can run apart from the reader
/// (in another thread, over a second handle on the same file, so that the system's copying
/// of the file's bytes happens on another core).
pub struct RawRegion<R> {
    source: R,
    pos: u64,
    end: u64,
}

impl<R: Read + Seek> RawRegion<R> {
    /// The sample region of the raw file `meta` describes, read from `source` (the same
    /// file). A compressed file's region would be its compressed bytes: `ZstdRegion`
    /// decompresses it.
    pub fn new(mut source: R, meta: &Metadata) -> Res<Self, R::Error> {
        let start = HEADER_SIZE as u64;
        source.seek(SeekFrom::Start(start)).map_err(io_err(start))?;
        Ok(RawRegion { source, pos: start, end: meta.header.string_table_offset })
    }
}

impl<R: Read + Seek> RegionSource<R::Error> for RawRegion<R> {
    fn read_region(&mut self, dst: &mut [u8]) -> Result<usize, ReadError<R::Error>> {
        FileRange { src: &mut self.source, pos: &mut self.pos, end: self.end }.refill(dst)
    }
}

/// A file's zstd sample region decompressed from a source of its own: the reader's own
/// decompression, rules and error positions included, as a [`RegionSource`] that can run
/// apart from the reader (in another thread, over a second handle on the same file).
#[cfg(feature = "zstd")]
pub struct ZstdRegion<'w, R> {
    pub(super) source: R,
    pub(super) pos: u64,
    pub(super) end: u64,
    pub(super) state: ZstdState<'w>,
}

#[cfg(feature = "zstd")]
impl<'w, R: Read + Seek> ZstdRegion<'w, R> {
    /// The sample region of the file `meta` describes, read from `source` (the same file)
    /// through `decompressor`; more than `max_decompressed` bytes is an error
    /// ([`DEFAULT_MAX_DECOMPRESSED`] is CPython's cap).
    pub fn new(
        mut source: R,
        meta: &Metadata,
        decompressor: Decompressor<'w>,
        max_decompressed: u64,
    ) -> Res<Self, R::Error> {
        let start = HEADER_SIZE as u64;
        source.seek(SeekFrom::Start(start)).map_err(io_err(start))?;
        let state = ZstdState { dec: decompressor, produced: 0, limit: max_decompressed };
        Ok(ZstdRegion { source, pos: start, end: meta.header.string_table_offset, state })
    }
}

#[cfg(feature = "zstd")]
impl<R: Read + Seek> RegionSource<R::Error> for ZstdRegion<'_, R> {
    fn read_region(&mut self, dst: &mut [u8]) -> Result<usize, ReadError<R::Error>> {
        let mut file = FileRange { src: &mut self.source, pos: &mut self.pos, end: self.end };
        self.state.refill(&mut file, dst)
    }
}

/// A window over a stream: `buf[start..end]` are the next bytes, at stream offset `pos`.
pub(super) struct Window<'b> {
    pub(super) buf: &'b mut [u8],
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) pos: u64,
}

impl<'b> Window<'b> {
    pub(super) fn reset(&mut self, pos: u64) {
        self.start = 0;
        self.end = 0;
        self.pos = pos;
    }

    #[inline]
    pub(super) fn available(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    #[inline]
    pub(super) fn consume(&mut self, n: usize) {
        self.start += n;
        self.pos += n as u64;
    }

    /// Tries to have `n` bytes available (`n` ≤ buffer length); false if the stream ends first.
    #[inline]
    pub(super) fn ensure<E>(&mut self, src: &mut impl Refill<E>, n: usize) -> Res<bool, E> {
        if self.end - self.start >= n {
            return Ok(true);
        }
        self.fill(src, n)
    }

    /// Moves the unread bytes to the front and reads until `n` are available or the stream
    /// ends.
    pub(super) fn fill<E>(&mut self, src: &mut impl Refill<E>, n: usize) -> Res<bool, E> {
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
        while self.end < n {
            let got = src.refill(&mut self.buf[self.end..])?;
            if got == 0 {
                return Ok(false);
            }
            self.end += got;
        }
        Ok(true)
    }

    #[inline]
    pub(super) fn varint<E>(&mut self, src: &mut impl Refill<E>) -> Res<Result<u64, VarintError>, E> {
        self.ensure(src, MAX_VARINT_LEN)?;
        Ok(varint::decode_u64(self.available()).map(|(v, n)| {
            self.consume(n);
            v
        }))
    }

    #[inline]
    pub(super) fn varint32<E>(&mut self, src: &mut impl Refill<E>) -> Res<Result<u32, VarintError>, E> {
        Ok(self.varint(src)?.and_then(|v| u32::try_from(v).map_err(|_| VarintError::Exceeds32Bits)))
    }

    #[inline]
    pub(super) fn byte<E>(&mut self, src: &mut impl Refill<E>) -> Res<Option<u8>, E> {
        if !self.ensure(src, 1)? {
            return Ok(None);
        }
        let b = self.buf[self.start];
        self.consume(1);
        Ok(Some(b))
    }

    /// Copies the next `dst.len()` bytes, reading past the window straight into `dst`.
    pub(super) fn copy_out<E>(&mut self, src: &mut impl Refill<E>, dst: &mut [u8]) -> Res<bool, E> {
        let from_window = dst.len().min(self.end - self.start);
        dst[..from_window].copy_from_slice(&self.buf[self.start..self.start + from_window]);
        self.consume(from_window);
        let mut filled = from_window;
        while filled < dst.len() {
            let got = src.refill(&mut dst[filled..])?;
            if got == 0 {
                return Ok(false);
            }
            filled += got;
            self.pos += got as u64;
        }
        Ok(true)
    }
}

/// Where the sample region's bytes come from.
pub(super) enum Region<'s, E> {
    /// The file's own bytes.
    Raw,
    /// zstd frames in the file, decompressed here.
    #[cfg(feature = "zstd")]
    Zstd(ZstdState<'s>),
    /// The caller's source.
    External(&'s mut dyn RegionSource<E>),
    /// A compressed region and nothing to decompress it with.
    Unavailable,
}

/// The sample region as a byte stream: its source and the window over it.
pub(super) struct Input<'s, R: Read + Seek> {
    pub(super) source: R,
    pub(super) window: Window<'s>,
    /// File offset of the next byte to read from the file (raw, or into zstd).
    pub(super) file_pos: u64,
    /// Where the region ends in the file.
    pub(super) file_end: u64,
    pub(super) region: Region<'s, R::Error>,
    /// Offsets count decompressed bytes rather than file bytes.
    pub(super) decompressed: bool,
}

impl<R: Read + Seek> Input<'_, R> {
    #[inline]
    pub(super) fn at(&self, offset: u64) -> Position {
        self.positions()(offset)
    }

    /// [`Self::at`] apart from the input, for use while its window is borrowed.
    #[inline]
    pub(super) fn positions(&self) -> impl Fn(u64) -> Position + Copy {
        let decompressed = self.decompressed;
        move |offset| if decompressed { Position::Decompressed(offset) } else { Position::File(offset) }
    }

    /// Tries to have `n` bytes (`n` ≤ the window's size) available; false if the region ends
    /// first, and then all of it is.
    #[inline]
    pub(super) fn ensure(&mut self, n: usize) -> Res<bool, R::Error> {
        if self.window.end - self.window.start >= n {
            return Ok(true);
        }
        self.fill(n)
    }

    pub(super) fn fill(&mut self, n: usize) -> Res<bool, R::Error> {
        let Input { source, window, file_pos, file_end, region, .. } = self;
        let mut file = FileRange { src: source, pos: file_pos, end: *file_end };
        match region {
            Region::Raw => window.fill(&mut file, n),
            #[cfg(feature = "zstd")]
            Region::Zstd(state) => window.fill(&mut ZstdRefill { file, state }, n),
            Region::External(src) => window.fill(src, n),
            Region::Unavailable => Err(ReadError::format(Position::File(HEADER_SIZE as u64), Rule::ZstdUnavailable)),
        }
    }

    /// Makes the next record available whole if the window can hold the largest one; true
    /// when it is (or when the region ends first, so that all of it is).
    #[inline]
    pub(super) fn ensure_record(&mut self) -> Res<bool, R::Error> {
        let want = LARGEST_RECORD.min(self.window.buf.len());
        let complete = self.ensure(want)?;
        Ok(!complete || self.window.end - self.window.start >= LARGEST_RECORD)
    }
}

#[cfg(feature = "zstd")]
pub(super) struct ZstdRefill<'a, 'w, R> {
    pub(super) file: FileRange<'a, R>,
    pub(super) state: &'a mut ZstdState<'w>,
}

#[cfg(feature = "zstd")]
impl<R: Read> Refill<R::Error> for ZstdRefill<'_, '_, R> {
    fn refill(&mut self, dst: &mut [u8]) -> Res<usize, R::Error> {
        self.state.refill(&mut self.file, dst)
    }
}
