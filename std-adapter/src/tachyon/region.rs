//! A sample region read in a second thread while the reader decodes: a zstd region
//! decompressed there, so that on two cores reading a compressed file costs about what
//! decompressing it costs, or a large raw one read there, so that the system's copying of
//! the file's bytes is done on the other core.
//!
//! The worker runs core's own [`ZstdRegion`] or [`RawRegion`] (the same reads, rules and
//! error positions as the reader's built-in path) over a second handle on the file and fills
//! a ring of buffers; the reader takes them in order through [`RegionSource`]. An error is
//! delivered where it occurred in the stream, after the bytes before it, as the built-in
//! path would deliver it. Memory: for zstd, the worker's workspace (on huge pages where the
//! system has them, so the part zstd touches is resident in 2 MiB steps: a 2 MiB window takes
//! 4 MiB) and input buffer; plus at most [`BUFFERS`] × [`BUFFER_BYTES`] in flight, made as
//! they are needed.
//!
//! The reader is the slower of the two, so the hand-over keeps system calls out of its
//! thread: it hands a buffer back by pushing it on a list (the worker, when it finds none,
//! naps and looks again rather than waiting to be woken), and it polls for a full one
//! before it sleeps (the worker wakes it only then).

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use embedded_io::{Read, Seek};
use tachyon_core::compression::{decompressor_workspace_bytes, workspace_words, Decompressor};
use tachyon_core::reader::{Metadata, RawRegion, ZstdRegion};
use tachyon_core::{Position, ReadError, RegionSource};

use crate::memory::ZeroedWords;

/// Buffers in the ring.
pub const BUFFERS: usize = 8;
/// Bytes per buffer: large enough that handing buffers over costs little (a few µs each),
/// small enough that the first one arrives soon and few pages are touched for small regions.
pub const BUFFER_BYTES: usize = 128 << 10;
/// Bytes in the first chunk handed over (then twice as many each time, up to 16 times as
/// many: 64 KiB, half a buffer; chunks of a whole buffer were no faster, measured).
const FIRST_CHUNK: usize = 4 << 10;
/// Compressed bytes read from the file at a time.
const INPUT_BYTES: usize = 128 << 10;
/// How long the reader polls for a chunk before it sleeps until one is handed over: longer
/// than the worker takes for a chunk at the start of a densely compressed region (tens to a
/// few hundred µs), where the reader waits most.
const READER_POLL: Duration = Duration::from_micros(200);
/// How long the worker naps between looks for a buffer handed back (the system adds its
/// timer slack, some 50 µs): less than the reader takes to read the buffers still full.
const WORKER_NAP: Duration = Duration::from_micros(20);

enum Chunk {
    Bytes(Vec<u8>, usize),
    End,
    Failed(ReadError<io::Error>),
}

/// What the two threads share, each part under its own lock (held for a push or a pop).
#[derive(Default)]
struct Shared {
    full: Mutex<Full>,
    empty: Mutex<Empty>,
}

#[derive(Default)]
struct Full {
    chunks: VecDeque<Chunk>,
    /// The reader's thread while it sleeps for a chunk.
    sleeping: Option<Thread>,
    /// The worker has returned (or panicked): no chunk will follow those queued.
    finished: bool,
}

#[derive(Default)]
struct Empty {
    buffers: Vec<Vec<u8>>,
    /// The reader is gone: the worker stops.
    hung_up: bool,
}

/// The lock's contents even after a panic in the other thread: each push or pop leaves the
/// lists whole, and a dead worker is told by [`Full::finished`].
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The decompressed sample region, made by a worker thread.
pub struct ThreadedRegion {
    shared: Arc<Shared>,
    /// [`READER_POLL`], or nothing on a machine of one core, where polling would only keep
    /// the worker from running.
    poll: Duration,
    current: Vec<u8>,
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
        let meta = *meta;
        Self::start("tachyon-zstd", move |shared| decompress(source, &meta, window_log_max, max_decompressed, shared))
    }

    /// Starts reading the region of the raw file `meta` describes from `source` (a second
    /// handle on that file, which the worker owns).
    pub fn spawn_raw<R>(source: R, meta: &Metadata) -> io::Result<Self>
    where
        R: Read<Error = io::Error> + Seek + Send + 'static,
    {
        let meta = *meta;
        Self::start("tachyon-read", move |shared| match RawRegion::new(source, &meta) {
            Ok(mut region) => fill(&mut region, shared),
            Err(e) => shared.send(Chunk::Failed(e)),
        })
    }

    /// Runs `work` in a thread named `name` over the state both threads share.
    fn start(name: &str, work: impl FnOnce(&Shared) + Send + 'static) -> io::Result<Self> {
        let shared = Arc::new(Shared::default());
        let theirs = Arc::clone(&shared);
        let worker = std::thread::Builder::new().name(name.into()).spawn(move || {
            let _finished = Finished(&theirs);
            work(&theirs);
        })?;
        let poll = if super::has_second_core() { READER_POLL } else { Duration::ZERO };
        Ok(ThreadedRegion { shared, poll, current: Vec::new(), len: 0, pos: 0, ended: false, worker: Some(worker) })
    }

    /// The next chunk: polled for a while (the worker is on another core), then slept for.
    fn next_chunk(&mut self) -> Chunk {
        let started = Instant::now();
        loop {
            let mut full = lock(&self.shared.full);
            if let Some(chunk) = full.chunks.pop_front() {
                return chunk;
            }
            if full.finished {
                let error = io::Error::other("the thread reading the sample region stopped");
                return Chunk::Failed(ReadError::Io { position: Position::File(0), error });
            }
            if started.elapsed() >= self.poll {
                full.sleeping = Some(std::thread::current());
                drop(full);
                std::thread::park();
            } else {
                drop(full);
                // A pause between looks, so that the worker's pushes seldom find the lock taken.
                for _ in 0..64 {
                    std::hint::spin_loop();
                }
            }
        }
    }
}

impl Shared {
    /// Queues a chunk for the reader, waking it if it sleeps.
    fn send(&self, chunk: Chunk) {
        let mut full = lock(&self.full);
        full.chunks.push_back(chunk);
        full.wake_reader();
    }
}

impl Full {
    /// Wakes the reader if it sleeps for a chunk (it recorded itself under this lock).
    fn wake_reader(&mut self) {
        if let Some(reader) = self.sleeping.take() {
            reader.unpark();
        }
    }
}

/// Marks the worker finished when it returns or unwinds, waking a sleeping reader.
struct Finished<'a>(&'a Shared);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        let mut full = lock(&self.0.full);
        full.finished = true;
        full.wake_reader();
    }
}

/// The zstd worker: the decompressor, then [`fill`].
fn decompress<R: Read<Error = io::Error> + Seek>(
    source: R,
    meta: &Metadata,
    window_log_max: u32,
    max_decompressed: u64,
    shared: &Shared,
) {
    // zstd writes its window from the workspace's start; on huge pages the worker's first
    // megabytes, the slow ones of a large region, took 6 % less of the whole `verify`
    // (measured).
    let mut workspace = ZeroedWords::on_huge_pages(workspace_words(decompressor_workspace_bytes(window_log_max)));
    let mut input = vec![0u8; INPUT_BYTES];
    let Some(dec) = Decompressor::new(workspace.words(), &mut input, window_log_max) else {
        let error = io::Error::other("libzstd refused the decompression workspace");
        shared.send(Chunk::Failed(ReadError::Io { position: Position::File(0), error }));
        return;
    };
    match ZstdRegion::new(source, meta, dec, max_decompressed) {
        Ok(mut region) => fill(&mut region, shared),
        Err(e) => shared.send(Chunk::Failed(e)),
    }
}

/// The worker's loop: fills empty buffers with the region until it ends or fails, or until
/// the reader hangs up.
fn fill(region: &mut impl RegionSource<io::Error>, shared: &Shared) {
    // Buffers are made as they are needed, up to BUFFERS: a small region touches one.
    let mut made = 0;
    let mut sent = 0u32;
    loop {
        let mut buf = loop {
            let mut empty = lock(&shared.empty);
            if empty.hung_up {
                return;
            }
            if let Some(buf) = empty.buffers.pop() {
                break buf;
            }
            drop(empty);
            if made < BUFFERS {
                made += 1;
                break vec![0u8; BUFFER_BYTES];
            }
            std::thread::park_timeout(WORKER_NAP);
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
        if len > 0 {
            shared.send(Chunk::Bytes(buf, len));
        }
        if let Some(last) = end {
            shared.send(last);
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
                // Handed back without waking the worker (see the module's documentation).
                lock(&self.shared.empty).buffers.push(std::mem::take(&mut self.current));
                (self.len, self.pos) = (0, 0);
            }
            match self.next_chunk() {
                Chunk::Bytes(buf, len) => {
                    self.current = buf;
                    self.len = len;
                    self.pos = 0;
                }
                Chunk::End => self.ended = true,
                Chunk::Failed(e) => {
                    self.ended = true;
                    return Err(e);
                }
            }
        }
    }
}

impl Drop for ThreadedRegion {
    fn drop(&mut self) {
        // The worker stops at its next look for a buffer.
        lock(&self.shared.empty).hung_up = true;
        if let Some(worker) = self.worker.take() {
            worker.thread().unpark();
            let _ = worker.join();
        }
    }
}
