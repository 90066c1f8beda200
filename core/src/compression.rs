//! zstd for the sample region, through libzstd 1.5.7 static contexts (spec section 8).
//!
//! This is the only module of the crate with `unsafe`: it wraps the `zstd-sys` calls that
//! place a compression or decompression context inside a caller-provided workspace
//! (`ZSTD_initStaticCCtx`, `ZSTD_initStaticDStream`). libzstd never allocates with a static
//! context; it fails with an error instead. Workspaces are `[u64]` so they meet zstd's
//! 8-byte alignment rule.
//!
//! Writing matches CPython byte for byte: one frame, level 5, every other parameter default
//! (no checksum, no content size), input passed with `ZSTD_e_continue` and the frame closed
//! with `ZSTD_e_end` on empty input.

use core::ffi::c_void;
use core::marker::PhantomData;
use core::ptr::NonNull;

use zstd_sys as sys;

/// CPython's compression level.
pub const LEVEL: i32 = 5;

/// Window log of the frames CPython writes (level 5, unknown size): a 2 MiB window.
pub const CPYTHON_WINDOW_LOG: u32 = 21;

/// The `ZSTD_ErrorCode` of a failed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ZstdError(pub u32);

fn check(ret: usize) -> Result<usize, ZstdError> {
    // SAFETY: pure functions on an integer.
    if unsafe { sys::ZSTD_isError(ret) } != 0 {
        Err(ZstdError(unsafe { sys::ZSTD_getErrorCode(ret) } as u32))
    } else {
        Ok(ret)
    }
}

/// Workspace bytes a compressor needs (libzstd's own estimate for streaming at level 5).
pub fn compressor_workspace_bytes() -> usize {
    // SAFETY: a pure size computation.
    unsafe { sys::ZSTD_estimateCStreamSize(LEVEL) }
}

/// Workspace bytes a decompressor needs for frames with windows up to `2^window_log_max`.
pub fn decompressor_workspace_bytes(window_log_max: u32) -> usize {
    // SAFETY: a pure size computation.
    unsafe { sys::ZSTD_estimateDStreamSize(1usize << window_log_max.min(31)) }
}

/// `u64` words for a workspace of `bytes` bytes.
pub fn workspace_words(bytes: usize) -> usize {
    bytes.div_ceil(8)
}

/// A streaming compressor living in a borrowed workspace, writing into a borrowed output
/// buffer that the caller drains.
pub struct Compressor<'w> {
    cctx: NonNull<sys::ZSTD_CCtx>,
    out: &'w mut [u8],
    /// Compressed bytes `out[pending_start..pending_end]` not yet handed to the sink.
    pending_start: usize,
    pending_end: usize,
    finished: bool,
    _workspace: PhantomData<&'w mut [u64]>,
}

/// What a compressor step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Input bytes consumed.
    pub consumed: usize,
    /// The frame is closed and all of it is in the output buffer.
    pub done: bool,
}

impl<'w> Compressor<'w> {
    /// Places a level-5 compressor in `workspace`. `None` if the workspace is too small
    /// (see [`compressor_workspace_bytes`]) or `out` is empty.
    pub fn new(workspace: &'w mut [u64], out: &'w mut [u8]) -> Option<Self> {
        if out.is_empty() {
            return None;
        }
        let bytes = core::mem::size_of_val(workspace);
        // SAFETY: the workspace is valid, 8-byte aligned, exclusively borrowed for 'w, and
        // outlives the context, which is never freed (static contexts are not).
        let cctx = unsafe { sys::ZSTD_initStaticCCtx(workspace.as_mut_ptr().cast::<c_void>(), bytes) };
        let cctx = NonNull::new(cctx)?;
        // A static context starts with all-zero parameters (content-size flag off), unlike
        // ZSTD_createCCtx; reset them to libzstd's defaults first, as CPython's context has.
        // SAFETY: cctx is a live context.
        let reset =
            unsafe { sys::ZSTD_CCtx_reset(cctx.as_ptr(), sys::ZSTD_ResetDirective::ZSTD_reset_session_and_parameters) };
        check(reset).ok()?;
        // SAFETY: cctx is a live context.
        let set =
            unsafe { sys::ZSTD_CCtx_setParameter(cctx.as_ptr(), sys::ZSTD_cParameter::ZSTD_c_compressionLevel, LEVEL) };
        check(set).ok()?;
        Some(Compressor { cctx, out, pending_start: 0, pending_end: 0, finished: false, _workspace: PhantomData })
    }

    /// Compressed bytes waiting for the sink.
    pub fn pending(&self) -> &[u8] {
        &self.out[self.pending_start..self.pending_end]
    }

    /// Marks `n` pending bytes as written.
    pub fn consume_pending(&mut self, n: usize) {
        self.pending_start = (self.pending_start + n).min(self.pending_end);
        if self.pending_start == self.pending_end {
            self.pending_start = 0;
            self.pending_end = 0;
        }
    }

    /// Feeds `input` (with `ZSTD_e_continue`, or `ZSTD_e_end` when `end`) into the free part
    /// of the output buffer. Call again after draining [`Self::pending`] until the input is
    /// consumed (and, when ending, until `done`).
    pub fn compress(&mut self, input: &[u8], end: bool) -> Result<Progress, ZstdError> {
        if self.finished {
            return Ok(Progress { consumed: 0, done: true });
        }
        let mut out = sys::ZSTD_outBuffer {
            dst: self.out.as_mut_ptr().cast::<c_void>(),
            size: self.out.len(),
            pos: self.pending_end,
        };
        let mut inp = sys::ZSTD_inBuffer { src: input.as_ptr().cast::<c_void>(), size: input.len(), pos: 0 };
        let directive = if end { sys::ZSTD_EndDirective::ZSTD_e_end } else { sys::ZSTD_EndDirective::ZSTD_e_continue };
        // SAFETY: both buffers describe live, correctly sized memory; cctx is live.
        let remaining = check(unsafe { sys::ZSTD_compressStream2(self.cctx.as_ptr(), &mut out, &mut inp, directive) })?;
        self.pending_end = out.pos;
        let done = end && remaining == 0 && inp.pos == input.len();
        self.finished = done;
        Ok(Progress { consumed: inp.pos, done })
    }

    /// True when the frame has been closed.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Drops whatever the current frame holds and starts a new one with the same
    /// parameters (a writer's next file).
    pub fn restart(&mut self) -> Result<(), ZstdError> {
        // SAFETY: cctx is a live context.
        check(unsafe { sys::ZSTD_CCtx_reset(self.cctx.as_ptr(), sys::ZSTD_ResetDirective::ZSTD_reset_session_only) })?;
        self.pending_start = 0;
        self.pending_end = 0;
        self.finished = false;
        Ok(())
    }
}

/// A compressor for a writer's sample region: feeds input with `ZSTD_e_continue` and ends the
/// frame on empty input, handing back the compressed bytes as they come. [`Compressor`] is
/// one, compressing in the caller's thread; the std layer has one that compresses in another
/// thread while the writer encodes. Whatever the chunking of the input, the frame is the same
/// bytes (one frame, level 5, as CPython writes).
pub trait RegionCompressor {
    /// Takes input as [`Compressor::compress`] does: some or all of it (the count is in the
    /// progress), or, with `end` and empty input, closes the frame (`done` once it is all
    /// out).
    fn compress(&mut self, input: &[u8], end: bool) -> Result<Progress, ZstdError>;
    /// Compressed bytes waiting for the sink.
    fn pending(&mut self) -> &[u8];
    /// Marks `n` pending bytes as written.
    fn consume_pending(&mut self, n: usize);
    /// True when the frame has been closed.
    fn is_finished(&self) -> bool;
    /// Starts a new frame, dropping anything of the current one (a writer's next file).
    fn restart(&mut self) -> Result<(), ZstdError>;
}

impl RegionCompressor for Compressor<'_> {
    fn compress(&mut self, input: &[u8], end: bool) -> Result<Progress, ZstdError> {
        Compressor::compress(self, input, end)
    }

    fn pending(&mut self) -> &[u8] {
        Compressor::pending(self)
    }

    fn consume_pending(&mut self, n: usize) {
        Compressor::consume_pending(self, n)
    }

    fn is_finished(&self) -> bool {
        Compressor::is_finished(self)
    }

    fn restart(&mut self) -> Result<(), ZstdError> {
        Compressor::restart(self)
    }
}

/// What compresses a writer's sample region: a [`Compressor`] the writer owns, or a
/// [`RegionCompressor`] of the caller's. Writer constructors take either (`.into()`).
pub enum ZstdOut<'s> {
    /// Compression in the writer's thread.
    Here(Compressor<'s>),
    /// The caller's compressor.
    Caller(&'s mut dyn RegionCompressor),
}

impl ZstdOut<'_> {
    /// The compressor.
    pub fn get(&mut self) -> &mut dyn RegionCompressor {
        match self {
            ZstdOut::Here(c) => c,
            ZstdOut::Caller(c) => *c,
        }
    }
}

impl<'s> From<Compressor<'s>> for ZstdOut<'s> {
    fn from(c: Compressor<'s>) -> Self {
        ZstdOut::Here(c)
    }
}

impl<'s> From<&'s mut dyn RegionCompressor> for ZstdOut<'s> {
    fn from(c: &'s mut dyn RegionCompressor) -> Self {
        ZstdOut::Caller(c)
    }
}

/// Where a decompressor is in the region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FrameState {
    /// Nothing decoded yet.
    Start,
    /// Inside a frame.
    InFrame,
    /// Between frames (the last one ended cleanly).
    Between,
}

/// A streaming decompressor in a borrowed workspace, with a borrowed input buffer of
/// compressed bytes that the caller refills.
pub struct Decompressor<'w> {
    dctx: NonNull<sys::ZSTD_DCtx>,
    input: &'w mut [u8],
    in_start: usize,
    in_end: usize,
    state: FrameState,
    _workspace: PhantomData<&'w mut [u64]>,
}

/// What a decompressor step produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Output {
    /// Bytes written to the output slice.
    pub produced: usize,
    /// The decoder wants more compressed input before it can go on.
    pub needs_input: bool,
}

impl<'w> Decompressor<'w> {
    /// Places a decompressor in `workspace` that refuses windows above `2^window_log_max`.
    /// `None` if the workspace is too small or `input` is empty.
    pub fn new(workspace: &'w mut [u64], input: &'w mut [u8], window_log_max: u32) -> Option<Self> {
        if input.is_empty() {
            return None;
        }
        let bytes = core::mem::size_of_val(workspace);
        // SAFETY: as for the compressor: valid, aligned, exclusively borrowed, never freed.
        let dctx = unsafe { sys::ZSTD_initStaticDStream(workspace.as_mut_ptr().cast::<c_void>(), bytes) };
        let dctx = NonNull::new(dctx)?;
        // SAFETY: dctx is live.
        let reset =
            unsafe { sys::ZSTD_DCtx_reset(dctx.as_ptr(), sys::ZSTD_ResetDirective::ZSTD_reset_session_and_parameters) };
        check(reset).ok()?;
        // SAFETY: dctx is live.
        let set = unsafe {
            sys::ZSTD_DCtx_setParameter(dctx.as_ptr(), sys::ZSTD_dParameter::ZSTD_d_windowLogMax, window_log_max as i32)
        };
        check(set).ok()?;
        Some(Decompressor { dctx, input, in_start: 0, in_end: 0, state: FrameState::Start, _workspace: PhantomData })
    }

    /// Free room for compressed input; fill it and call [`Self::commit_input`].
    pub fn input_space(&mut self) -> &mut [u8] {
        if self.in_start == self.in_end {
            self.in_start = 0;
            self.in_end = 0;
        } else if self.in_end == self.input.len() {
            self.input.copy_within(self.in_start..self.in_end, 0);
            self.in_end -= self.in_start;
            self.in_start = 0;
        }
        &mut self.input[self.in_end..]
    }

    /// Adds `n` bytes written into [`Self::input_space`].
    pub fn commit_input(&mut self, n: usize) {
        self.in_end = (self.in_end + n).min(self.input.len());
    }

    /// Compressed bytes buffered but not yet consumed.
    pub fn buffered_input(&self) -> usize {
        self.in_end - self.in_start
    }

    /// True when the last frame ended cleanly (or, before any input, false).
    pub fn at_frame_boundary(&self) -> bool {
        self.state == FrameState::Between
    }

    /// True before any byte was decoded.
    pub fn at_start(&self) -> bool {
        self.state == FrameState::Start
    }

    /// Decodes buffered input into `out`.
    pub fn decompress(&mut self, out: &mut [u8]) -> Result<Output, ZstdError> {
        let mut o = sys::ZSTD_outBuffer { dst: out.as_mut_ptr().cast::<c_void>(), size: out.len(), pos: 0 };
        let mut i = sys::ZSTD_inBuffer {
            src: self.input[self.in_start..].as_ptr().cast::<c_void>(),
            size: self.in_end - self.in_start,
            pos: 0,
        };
        if i.size == 0 {
            return Ok(Output { produced: 0, needs_input: true });
        }
        // SAFETY: both buffers describe live, correctly sized memory; dctx is live.
        let hint = check(unsafe { sys::ZSTD_decompressStream(self.dctx.as_ptr(), &mut o, &mut i) })?;
        self.in_start += i.pos;
        if hint == 0 {
            // A frame ended and is fully flushed; more input would start another frame.
            self.state = FrameState::Between;
        } else if i.pos > 0 || o.pos > 0 {
            self.state = FrameState::InFrame;
        }
        let needs_input = self.in_start == self.in_end && o.pos < out.len();
        Ok(Output { produced: o.pos, needs_input })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_stream_is_the_nine_byte_frame() {
        // Vector 14: an empty sample stream compresses to 28 b5 2f fd 20 00 01 00 00.
        let mut ws = [0u64; 0];
        let mut out = [0u8; 64];
        assert!(Compressor::new(&mut ws, &mut out).is_none(), "an empty workspace must be refused");
        let mut ws = std_vec(workspace_words(compressor_workspace_bytes()));
        let mut c = Compressor::new(&mut ws, &mut out).unwrap();
        let p = c.compress(&[], true).unwrap();
        assert!(p.done);
        assert_eq!(c.pending(), &[0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x00, 0x01, 0x00, 0x00]);
    }

    #[test]
    fn round_trip_through_static_contexts() {
        let data: [u8; 3000] = core::array::from_fn(|i| (i % 251) as u8 ^ (i / 7) as u8);
        let mut ws = std_vec(workspace_words(compressor_workspace_bytes()));
        let mut out = [0u8; 256];
        let mut c = Compressor::new(&mut ws, &mut out).unwrap();
        let mut compressed = [0u8; 4096];
        let mut clen = 0;
        let mut fed = 0;
        loop {
            let end = fed == data.len();
            let p = c.compress(&data[fed..], end).unwrap();
            fed += p.consumed;
            let pend = c.pending().len();
            compressed[clen..clen + pend].copy_from_slice(c.pending());
            clen += pend;
            c.consume_pending(pend);
            if p.done {
                break;
            }
        }
        // No content size: frame header descriptor byte 0x00 and window byte 0x58 (log 21).
        assert_eq!(&compressed[..6], &[0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58]);

        let mut dws = std_vec(workspace_words(decompressor_workspace_bytes(CPYTHON_WINDOW_LOG)));
        let mut input = [0u8; 100];
        let mut d = Decompressor::new(&mut dws, &mut input, CPYTHON_WINDOW_LOG).unwrap();
        let mut decoded = [0u8; 3000];
        let mut dlen = 0;
        let mut src = 0;
        while !(d.at_frame_boundary() && src == clen && d.buffered_input() == 0) {
            let space = d.input_space();
            let n = space.len().min(clen - src);
            space[..n].copy_from_slice(&compressed[src..src + n]);
            d.commit_input(n);
            src += n;
            let o = d.decompress(&mut decoded[dlen..]).unwrap();
            dlen += o.produced;
        }
        assert_eq!(&decoded[..dlen], &data[..]);
    }

    extern crate std;
    fn std_vec(words: usize) -> std::vec::Vec<u64> {
        std::vec![0u64; words]
    }
}
