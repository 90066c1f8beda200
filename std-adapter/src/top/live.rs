//! Files counted while their writers write them: a journaled stream ([`LiveStream`]) and a
//! MOJO file ([`LiveMojo`]), each refresh reading only what the file gained.
//!
//! A journaled stream: each refresh reads the bytes added
//! since the last ([`Growing`]) and decodes only the records they completed, with a reader
//! opened once on the stream's tables ([`Reader::open_growing`]) that keeps every thread's
//! stack between refreshes. The reader borrows its storage, so both live in a thread of
//! their own for as long as the stream is followed; a refresh hands it the new records (and
//! the tables when the journal grew them) and takes back the counts so far.

use std::cell::RefCell;
use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::mpsc;

use tachyon_core::io::{Cursor, CursorError};
use tachyon_core::reader::RegionSource;
use tachyon_core::storage::VecReaderStorage;
use tachyon_core::{ReadError, Reader};

use super::{probe, Adding, Counts, TopError};
use crate::file::FileSource;
use crate::mojo::growing::GrowingMojo;
use crate::mojo::source::MojoMetric;
use crate::tachyon::receive::is_stream;
use crate::tachyon::receive::Growing;
use crate::tachyon::source::{frame_table, replay};

/// The window the growing reader decodes through.
const READ_BUFFER: usize = 256 << 10;

/// Bytes read and decoded at a time: a stream met when it is already large (a view started
/// late, `--once`) is read in pieces of this size, so memory does not follow its length.
const READ_CHUNK: usize = 1 << 20;

/// A file followed as it grows.
#[derive(Debug)]
pub(super) enum Live {
    /// A framed stream: a journal, a live period, a device's capture.
    Stream(Box<LiveStream>),
    /// A MOJO file Austin is writing.
    Mojo(Box<LiveMojo>),
}

impl Live {
    /// Follows the file at `path`, counting into `empty` (its thread, its window), when its
    /// first bytes say it is a file that can be followed; `None` otherwise.
    pub(super) fn open(path: &Path, empty: Counts) -> Result<Option<Self>, TopError> {
        let start = probe(path)?;
        if is_stream(&start) {
            return LiveStream::new(path, empty).map(|s| Some(Live::Stream(Box::new(s))));
        }
        // (A MOJO file whose first bytes are all written so far.)
        let magic = tachyon_core::mojo::MAGIC;
        if start.starts_with(magic) || (!start.is_empty() && magic.starts_with(&start)) {
            return LiveMojo::new(path, empty).map(|m| Some(Live::Mojo(Box::new(m))));
        }
        Ok(None)
    }

    /// Whether the file at the path is still the one followed, and no shorter than what was
    /// read of it (a writer only appends).
    pub(super) fn follows(&self, path: &Path, len: u64) -> bool {
        let (followed, identity, taken) = match self {
            Live::Stream(s) => (&s.path, s.identity, s.growing.taken()),
            Live::Mojo(m) => (&m.path, m.identity, m.growing.taken()),
        };
        path == followed && self::identity(path).ok() == Some(identity) && len >= taken
    }

    /// Reads what the file gained and counts the samples it completed; the bytes read.
    pub(super) fn refresh(&mut self) -> Result<u64, TopError> {
        match self {
            Live::Stream(s) => s.refresh(),
            Live::Mojo(m) => m.refresh(),
        }
    }

    /// The counts of every sample read so far.
    pub(super) fn counts(&self) -> &Counts {
        match self {
            Live::Stream(s) => &s.counts,
            Live::Mojo(m) => &m.counts,
        }
    }
}

/// A stream followed as it grows.
pub(super) struct LiveStream {
    path: PathBuf,
    /// The file's device and inode: another file at the path (a stream replaced by the
    /// profile it holds) is read anew.
    identity: (u64, u64),
    growing: Growing,
    batches: Option<mpsc::Sender<Batch>>,
    counted: mpsc::Receiver<Result<Counts, String>>,
    /// Counts so far (those of the last refresh).
    counts: Counts,
}

/// What a refresh hands the decoding thread.
struct Batch {
    /// The stream's header and tables, when they changed.
    tables: Option<Vec<u8>>,
    /// Records that arrived whole.
    records: Vec<u8>,
}

impl LiveStream {
    /// Follows the stream at `path`, counting into `empty` (its thread, its window).
    fn new(path: &Path, empty: Counts) -> Result<Self, TopError> {
        let identity = identity(path)?;
        let (batches, inbox) = mpsc::channel();
        let (outbox, counted) = mpsc::channel();
        let counts = empty.clone();
        std::thread::Builder::new()
            .name("tachyon-top-stream".into())
            .spawn(move || decode_batches(counts, &inbox, &outbox))
            .map_err(|e| stream_error(path, e.to_string()))?;
        Ok(LiveStream {
            path: path.to_owned(),
            identity,
            growing: Growing::new(),
            batches: Some(batches),
            counted,
            counts: empty,
        })
    }

    /// Reads what the stream gained and counts the records it completed; the bytes read.
    fn refresh(&mut self) -> Result<u64, TopError> {
        let mut file = File::open(&self.path).map_err(|e| stream_error(&self.path, e.to_string()))?;
        file.seek(SeekFrom::Start(self.growing.taken())).map_err(|e| stream_error(&self.path, e.to_string()))?;
        let mut chunk = vec![0; READ_CHUNK];
        let mut read = 0;
        loop {
            let n = match file.read(&mut chunk) {
                Ok(0) => return Ok(read),
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(stream_error(&self.path, e.to_string())),
            };
            read += n as u64;
            self.take_in(&chunk[..n]).map_err(|why| stream_error(&self.path, why))?;
        }
    }

    /// Receives `bytes` and counts the records they complete.
    fn take_in(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.growing.feed(bytes).map_err(|e| e.to_string())?;
        let tables = self.growing.tables().map_err(|e| e.to_string())?;
        let records = self.growing.take_records().map_err(|e| e.to_string())?;
        if tables.is_none() && records.is_empty() {
            return Ok(());
        }
        let batches = self.batches.as_ref().ok_or("the stream's decoding ended")?;
        let sent = batches.send(Batch { tables, records });
        match sent.ok().and_then(|()| self.counted.recv().ok()) {
            Some(Ok(counts)) => {
                self.counts = counts;
                Ok(())
            }
            Some(Err(why)) => {
                self.batches = None;
                Err(why)
            }
            None => {
                self.batches = None;
                Err("the stream's decoding thread ended".into())
            }
        }
    }
}

impl std::fmt::Debug for LiveStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveStream").field("path", &self.path).field("taken", &self.growing.taken()).finish()
    }
}

/// A MOJO file followed as it grows ([`GrowingMojo`]): the counts of the samples read whole
/// are kept, and each refresh adds the one the file ends in so far to a copy of them.
pub(super) struct LiveMojo {
    path: PathBuf,
    identity: (u64, u64),
    growing: GrowingMojo,
    /// The file's functions in the counts.
    map: Vec<u32>,
    /// Counts of the samples read whole.
    kept: Counts,
    /// Those and the pending sample's.
    counts: Counts,
}

impl LiveMojo {
    fn new(path: &Path, empty: Counts) -> Result<Self, TopError> {
        Ok(LiveMojo {
            path: path.to_owned(),
            identity: identity(path)?,
            growing: GrowingMojo::new(MojoMetric::Default),
            map: Vec::new(),
            kept: empty.clone(),
            counts: empty,
        })
    }

    fn refresh(&mut self) -> Result<u64, TopError> {
        let file = FileSource::open(&self.path).map_err(|e| stream_error(&self.path, e.to_string()))?;
        let read = self
            .growing
            .read(file, &mut Adding::new(&mut self.kept, &mut self.map, false))
            .map_err(|e| stream_error(&self.path, e.to_string()))?;
        // The pending sample's functions are mapped in the kept counts, so the copy numbers
        // them as the kept counts will.
        Adding::new(&mut self.kept, &mut self.map, false).extend(self.growing.frames());
        self.counts = self.kept.clone();
        self.growing.pending(&mut Adding::new(&mut self.counts, &mut self.map, false));
        Ok(read)
    }
}

impl std::fmt::Debug for LiveMojo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveMojo").field("path", &self.path).field("taken", &self.growing.taken()).finish()
    }
}

fn stream_error(path: &Path, why: String) -> TopError {
    TopError::Stream { path: path.to_owned(), why }
}

fn identity(path: &Path) -> Result<(u64, u64), TopError> {
    let meta = std::fs::metadata(path).map_err(|e| stream_error(path, e.to_string()))?;
    Ok((meta.dev(), meta.ino()))
}

/// The records handed over and not yet read by the reader: its region source.
#[derive(Clone, Default)]
struct Queue(Rc<RefCell<(Vec<u8>, usize)>>);

impl RegionSource<CursorError> for Queue {
    fn read_region(&mut self, dst: &mut [u8]) -> Result<usize, ReadError<CursorError>> {
        let mut queue = self.0.borrow_mut();
        let (bytes, read) = &mut *queue;
        let n = dst.len().min(bytes.len() - *read);
        dst[..n].copy_from_slice(&bytes[*read..*read + n]);
        *read += n;
        if *read == bytes.len() {
            bytes.clear();
            *read = 0;
        }
        Ok(n)
    }
}

/// The decoding thread: opens the reader on the first batch's tables, then counts each
/// batch's records, sending the counts so far after each; ends when the stream is dropped or
/// on the first error.
fn decode_batches(mut counts: Counts, inbox: &mpsc::Receiver<Batch>, outbox: &mpsc::Sender<Result<Counts, String>>) {
    let Ok(first) = inbox.recv() else { return };
    let Some(tables) = first.tables else {
        let _ = outbox.send(Err("records before the stream's header".into()));
        return;
    };
    let queue = Queue::default();
    let mut region = queue.clone();
    let mut storage = VecReaderStorage::growing(READ_BUFFER, usize::MAX);
    let seed = crate::hash::IdHash::default().key();
    let opened = Reader::open_growing(Cursor::new(tables), storage.storage().with_seed(seed), &mut region);
    let mut reader = match opened {
        Ok(reader) => reader,
        Err(e) => {
            let _ = outbox.send(Err(e.to_string()));
            return;
        }
    };
    let mut frames = frame_table(reader.tables());
    // Each frame's function in the counts, made again only when the tables grow.
    let mut map = Vec::new();
    let mut batch = Batch { tables: None, records: first.records };
    loop {
        if let Some(tables) = batch.tables.take() {
            match reader.reload_tables(Cursor::new(tables)) {
                Ok(true) => {
                    frames = frame_table(reader.tables());
                    map.clear();
                }
                Ok(false) => {
                    let _ = outbox.send(Err("the tables grew in the middle of a record".into()));
                    return;
                }
                Err(e) => {
                    let _ = outbox.send(Err(e.to_string()));
                    return;
                }
            }
        }
        queue.0.borrow_mut().0.extend_from_slice(&batch.records);
        let counted = replay(&mut reader, &frames, &mut Adding::new(&mut counts, &mut map, false), &mut |_| {});
        let result = counted.map(|_| counts.clone()).map_err(|e| e.to_string());
        let failed = result.is_err();
        if outbox.send(result).is_err() || failed {
            return;
        }
        match inbox.recv() {
            Ok(next) => batch = next,
            Err(_) => return,
        }
    }
}
