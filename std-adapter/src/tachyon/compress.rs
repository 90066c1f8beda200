//! A writer's sample region compressed in a second thread while the writer encodes, so that
//! on two cores writing a zstd file costs little more than writing a raw one.
//!
//! The writer hands its records over as it does to an in-thread compressor; they are gathered
//! into batches of [`BATCH_BYTES`] (CPython's 512 KiB) and sent to a worker that runs core's
//! own [`Compressor`] — level 5, `ZSTD_e_continue` per batch, the frame ended on empty input —
//! so the frame is byte for byte the one the in-thread path and CPython write (zstd's output
//! does not depend on how `continue` input is chunked). Compressed bytes come back in order
//! and wait in [`RegionCompressor::pending`] until the writer has written them, so a sink
//! error leaves them there for the writer's retry, as with the in-thread compressor. Memory:
//! the worker's workspace (about 6 MB) and at most [`IN_FLIGHT`] batches.

use std::sync::mpsc::{self, Receiver, SyncSender};
use std::thread::JoinHandle;

use tachyon_core::compression::{
    compressor_workspace_bytes, workspace_words, Compressor, Progress, RegionCompressor, ZstdError,
};

/// Input gathered before it goes to the worker.
pub const BATCH_BYTES: usize = 512 << 10;
/// Batches sent and not yet compressed before the writer waits.
pub const IN_FLIGHT: usize = 3;

enum Job {
    Batch(Vec<u8>),
    End,
}

enum Output {
    /// Compressed bytes, and the emptied batch buffer for reuse.
    Bytes(Vec<u8>, Vec<u8>),
    /// The frame is closed and all of it was sent.
    Done,
    Failed(ZstdError),
}

/// Compression of a sample region in a worker thread.
pub struct ThreadedCompressor {
    jobs: Option<SyncSender<Job>>,
    outputs: Receiver<Output>,
    batch: Vec<u8>,
    spare: Vec<Vec<u8>>,
    pending: Vec<u8>,
    pending_from: usize,
    finished: bool,
    failed: Option<ZstdError>,
    worker: Option<JoinHandle<()>>,
}

/// libzstd refused a context in a workspace of the size it asked for; never seen.
const WORKSPACE_REFUSED: ZstdError = ZstdError(u32::MAX);

impl ThreadedCompressor {
    /// Starts the worker.
    pub fn spawn() -> std::io::Result<Self> {
        let (jobs, job_rx) = mpsc::sync_channel(IN_FLIGHT);
        let (out_tx, outputs) = mpsc::channel();
        let worker = std::thread::Builder::new().name("tachyon-zstd-out".into()).spawn(move || {
            compress_jobs(&job_rx, &out_tx);
        })?;
        Ok(ThreadedCompressor {
            jobs: Some(jobs),
            outputs,
            batch: Vec::with_capacity(BATCH_BYTES),
            spare: Vec::new(),
            pending: Vec::new(),
            pending_from: 0,
            finished: false,
            failed: None,
            worker: Some(worker),
        })
    }

    /// Takes what the worker has sent back; waits for the end of the frame when `until_done`.
    fn receive(&mut self, until_done: bool) {
        loop {
            let output = if until_done {
                match self.outputs.recv() {
                    Ok(o) => o,
                    Err(_) => {
                        self.failed.get_or_insert(WORKSPACE_REFUSED);
                        return;
                    }
                }
            } else {
                match self.outputs.try_recv() {
                    Ok(o) => o,
                    Err(_) => return,
                }
            };
            match output {
                Output::Bytes(bytes, mut buffer) => {
                    if self.pending_from == self.pending.len() {
                        self.pending.clear();
                        self.pending_from = 0;
                    }
                    self.pending.extend_from_slice(&bytes);
                    buffer.clear();
                    self.spare.push(buffer);
                }
                Output::Done => {
                    self.finished = true;
                    return;
                }
                Output::Failed(e) => {
                    self.failed = Some(e);
                    return;
                }
            }
        }
    }

    /// Sends the gathered batch to the worker (waiting while [`IN_FLIGHT`] are queued).
    fn send_batch(&mut self) {
        let next = self.spare.pop().unwrap_or_else(|| Vec::with_capacity(BATCH_BYTES));
        let batch = std::mem::replace(&mut self.batch, next);
        if let Some(jobs) = &self.jobs {
            if jobs.send(Job::Batch(batch)).is_err() {
                self.failed.get_or_insert(WORKSPACE_REFUSED);
            }
        }
    }
}

impl RegionCompressor for ThreadedCompressor {
    fn compress(&mut self, input: &[u8], end: bool) -> Result<Progress, ZstdError> {
        self.receive(false);
        if let Some(e) = self.failed {
            return Err(e);
        }
        if self.finished {
            return Ok(Progress { consumed: 0, done: true });
        }
        if !end || !input.is_empty() {
            let mut rest = input;
            while !rest.is_empty() {
                let take = rest.len().min(BATCH_BYTES - self.batch.len());
                self.batch.extend_from_slice(&rest[..take]);
                rest = &rest[take..];
                if self.batch.len() == BATCH_BYTES {
                    self.send_batch();
                }
            }
            return Ok(Progress { consumed: input.len(), done: false });
        }
        if !self.batch.is_empty() {
            self.send_batch();
        }
        if let Some(jobs) = self.jobs.take() {
            let _ = jobs.send(Job::End);
        }
        self.receive(true);
        match self.failed {
            Some(e) => Err(e),
            None => Ok(Progress { consumed: 0, done: self.finished }),
        }
    }

    fn pending(&mut self) -> &[u8] {
        self.receive(false);
        &self.pending[self.pending_from..]
    }

    fn consume_pending(&mut self, n: usize) {
        self.pending_from = (self.pending_from + n).min(self.pending.len());
    }

    fn is_finished(&self) -> bool {
        self.finished
    }

    fn restart(&mut self) -> Result<(), ZstdError> {
        // A fresh worker: the old one ended with its frame (dropping it joins it).
        *self = ThreadedCompressor::spawn().map_err(|_| WORKSPACE_REFUSED)?;
        Ok(())
    }
}

impl Drop for ThreadedCompressor {
    fn drop(&mut self) {
        // Hanging up ends the worker at its next receive or send.
        self.jobs = None;
        let (_, outputs) = mpsc::channel();
        drop(std::mem::replace(&mut self.outputs, outputs));
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

/// The worker: compresses each batch with `continue`, ends the frame on `End`.
fn compress_jobs(jobs: &Receiver<Job>, outputs: &mpsc::Sender<Output>) {
    let mut workspace = vec![0u64; workspace_words(compressor_workspace_bytes())];
    let mut out = vec![0u8; 128 << 10];
    let Some(mut c) = Compressor::new(&mut workspace, &mut out) else {
        let _ = outputs.send(Output::Failed(WORKSPACE_REFUSED));
        return;
    };
    while let Ok(job) = jobs.recv() {
        let (batch, end) = match job {
            Job::Batch(b) => (b, false),
            Job::End => (Vec::new(), true),
        };
        let mut compressed = Vec::new();
        let mut fed = 0;
        // As the in-thread path: input with "continue" until all of it is taken (output zstd
        // still holds goes out with the next call), the frame ended on empty input.
        let done = loop {
            let progress = match c.compress(&batch[fed..], end) {
                Ok(p) => p,
                Err(e) => {
                    let _ = outputs.send(Output::Failed(e));
                    return;
                }
            };
            fed += progress.consumed;
            let n = c.pending().len();
            compressed.extend_from_slice(c.pending());
            c.consume_pending(n);
            if progress.done || (!end && fed == batch.len()) {
                break progress.done;
            }
        };
        if outputs.send(Output::Bytes(compressed, batch)).is_err() {
            return;
        }
        if done {
            let _ = outputs.send(Output::Done);
            return;
        }
    }
}
