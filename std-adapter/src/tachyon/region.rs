//! A zstd sample region decompressed in a second thread while the reader decodes, so that on
//! two cores reading a compressed file costs about what decompressing it costs.
//!
//! The worker runs core's own [`ZstdRegion`] (the same decompression, rules and error
//! positions as the reader's built-in path) over a second handle on the file and fills a ring
//! of buffers; the reader takes them in order through [`RegionSource`]. An error is delivered
//! where it occurred in the stream, after the bytes before it, as the built-in path would
//! deliver it. Memory: the worker's zstd workspace (on huge pages where the system has them,
//! so the part zstd touches is resident in 2 MiB steps: a 2 MiB window takes 4 MiB) and input
//! buffer, plus at most [`BUFFERS`] × [`BUFFER_BYTES`] in flight, made as they are needed.

use std::io;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::thread::JoinHandle;

use embedded_io::{Read, Seek};
use tachyon_core::compression::{decompressor_workspace_bytes, workspace_words, Decompressor};
use tachyon_core::reader::{Metadata, ZstdRegion};
use tachyon_core::{Position, ReadError, RegionSource};

use crate::memory::ZeroedWords;

/// Buffers in the ring.
pub const BUFFERS: usize = 8;
/// Bytes per buffer: large enough that handing buffers over costs little (a few µs each),
/// small enough that the first one arrives soon and few pages are touched for small regions.
pub const BUFFER_BYTES: usize = 128 << 10;
/// Buffers handed back to the worker at once: the worker, faster than the decoding, waits
/// for them, and each hand-back that finds it waiting wakes it (a system call of some µs).
/// Half the ring leaves it the other half to fill meanwhile.
const HANDED_BACK_AT_ONCE: usize = BUFFERS / 2;
/// Bytes in the first chunk handed over (then twice as many each time, up to 16 times as
/// many: 64 KiB, half a buffer; chunks of a whole buffer were no faster, measured).
const FIRST_CHUNK: usize = 4 << 10;
/// Compressed bytes read from the file at a time.
const INPUT_BYTES: usize = 128 << 10;

enum Chunk {
    Bytes(Vec<u8>, usize),
    End,
    Failed(ReadError<io::Error>),
}

/// The decompressed sample region, made by a worker thread.
pub struct ThreadedRegion {
    full: Receiver<Chunk>,
    empty: Option<Sender<Vec<u8>>>,
    current: Vec<u8>,
    /// Buffers read, handed back to the worker a few at a time (each hand-back may wake it).
    done: Vec<Vec<u8>>,
    len: usize,
    pos: usize,
    ended: bool,
    worker: Option<JoinHandle<()>>,
}

impl ThreadedRegion {
    /// Starts decompressing the region of the file `meta` describes from `source` (a second
    /// handle on that file, which the worker owns), refusing zstd windows above
    /// `2^window_log_max` and regions above `max_decompressed` bytes.
    pub fn spawn<R>(source: R, meta: &Metadata, window_log_max: u32, max_decompressed: u64) -> io::Result<Self>
    where
        R: Read<Error = io::Error> + Seek + Send + 'static,
    {
        let (full_tx, full) = mpsc::sync_channel(BUFFERS);
        let (empty, empty_rx) = mpsc::channel();
        let meta = *meta;
        let worker = std::thread::Builder::new().name("tachyon-zstd".into()).spawn(move || {
            decompress(source, &meta, window_log_max, max_decompressed, &full_tx, &empty_rx);
        })?;
        Ok(ThreadedRegion {
            full,
            empty: Some(empty),
            current: Vec::new(),
            done: Vec::new(),
            len: 0,
            pos: 0,
            ended: false,
            worker: Some(worker),
        })
    }
}

/// The worker: fills empty buffers with the region until it ends or fails, or until the
/// reader hangs up.
fn decompress<R: Read<Error = io::Error> + Seek>(
    source: R,
    meta: &Metadata,
    window_log_max: u32,
    max_decompressed: u64,
    full: &SyncSender<Chunk>,
    empty: &Receiver<Vec<u8>>,
) {
    // zstd writes its window from the workspace's start; on huge pages the worker's first
    // megabytes, the slow ones of a large region, took 6 % less of the whole `verify`
    // (measured).
    let mut workspace = ZeroedWords::on_huge_pages(workspace_words(decompressor_workspace_bytes(window_log_max)));
    let mut input = vec![0u8; INPUT_BYTES];
    let Some(dec) = Decompressor::new(workspace.words(), &mut input, window_log_max) else {
        let error = io::Error::other("libzstd refused the decompression workspace");
        let _ = full.send(Chunk::Failed(ReadError::Io { position: Position::File(0), error }));
        return;
    };
    let mut region = match ZstdRegion::new(source, meta, dec, max_decompressed) {
        Ok(r) => r,
        Err(e) => {
            let _ = full.send(Chunk::Failed(e));
            return;
        }
    };
    // Buffers are made as they are needed, up to BUFFERS: a small region touches one.
    let mut made = 0;
    let mut sent = 0u32;
    loop {
        let mut buf = match empty.try_recv() {
            Ok(buf) => buf,
            Err(_) if made < BUFFERS => {
                made += 1;
                vec![0u8; BUFFER_BYTES]
            }
            Err(_) => match empty.recv() {
                Ok(buf) => buf,
                Err(_) => return,
            },
        };
        // The first chunks are small, so that decoding starts soon; then 64 KiB each.
        let want = (FIRST_CHUNK << sent.min(4)).min(buf.len());
        sent += 1;
        let mut len = 0;
        let end = loop {
            match region.read_region(&mut buf[len..want]) {
                Ok(0) => break Some(Chunk::End),
                Ok(n) => {
                    len += n;
                    if len == want {
                        break None;
                    }
                }
                Err(e) => break Some(Chunk::Failed(e)),
            }
        };
        if len > 0 && full.send(Chunk::Bytes(buf, len)).is_err() {
            return;
        }
        if let Some(last) = end {
            let _ = full.send(last);
            return;
        }
    }
}

impl RegionSource<io::Error> for ThreadedRegion {
    fn read_region(&mut self, dst: &mut [u8]) -> Result<usize, ReadError<io::Error>> {
        loop {
            if self.pos < self.len {
                let n = dst.len().min(self.len - self.pos);
                dst[..n].copy_from_slice(&self.current[self.pos..self.pos + n]);
                self.pos += n;
                return Ok(n);
            }
            if self.ended {
                return Ok(0);
            }
            if !self.current.is_empty() {
                self.done.push(std::mem::take(&mut self.current));
                if self.done.len() >= HANDED_BACK_AT_ONCE {
                    for buf in self.done.drain(..) {
                        // The worker may have finished already; then the buffers are not needed.
                        if let Some(empty) = &self.empty {
                            let _ = empty.send(buf);
                        }
                    }
                }
                (self.len, self.pos) = (0, 0);
            }
            match self.full.recv() {
                Ok(Chunk::Bytes(buf, len)) => {
                    self.current = buf;
                    self.len = len;
                    self.pos = 0;
                }
                Ok(Chunk::End) => self.ended = true,
                Ok(Chunk::Failed(e)) => {
                    self.ended = true;
                    return Err(e);
                }
                Err(_) => {
                    self.ended = true;
                    let error = io::Error::other("the decompression thread stopped");
                    return Err(ReadError::Io { position: Position::File(0), error });
                }
            }
        }
    }
}

impl Drop for ThreadedRegion {
    fn drop(&mut self) {
        // Hanging up ends the worker at its next send or receive.
        self.empty = None;
        let (_, full) = mpsc::sync_channel(0);
        drop(std::mem::replace(&mut self.full, full));
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}
