//! Reading a path again and again, as the live view does, without reading again what has
//! not changed: each file's counts are kept under its length and modification time (taken
//! before it is read), and a refresh reads only the files that are new or whose length or
//! time moved — a rotating writer's live period as it grows, not its ended periods; nothing
//! while the writer is idle. A kept file that is gone or changed has its counts taken back
//! out (a writer's retention removing old periods costs nothing to read).
//!
//! A framed stream (a journal, a live period, a device's capture) is followed as it grows:
//! a refresh reads the bytes it gained and counts the records they completed
//! ([`super::live`]). Any other file that changed is read again whole; so is a stream that
//! cannot be followed (a compressed region, bytes that are not a journaled stream), which
//! then says what is wrong.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::live::LiveStream;
use super::{files_at, probe_is_stream, Counts, TopError};

/// Counts of one path, kept across refreshes.
#[derive(Debug)]
pub struct Follow {
    path: PathBuf,
    /// The kept files' counts, added up.
    kept: Counts,
    parts: BTreeMap<PathBuf, Part>,
    /// The streams followed as they grow.
    live: HashMap<PathBuf, LiveStream>,
    /// Streams that could not be followed, by device and inode: read whole.
    whole: HashMap<PathBuf, (u64, u64)>,
    bytes_read: u64,
}

/// What one kept file added.
#[derive(Debug)]
struct Part {
    stamp: Stamp,
    /// (function, own, total) of the functions the file counted.
    counts: Vec<(u32, u64, u64)>,
    samples: u64,
    threads: BTreeSet<u64>,
}

/// A file's length and modification time: a file with both unchanged is not read again.
type Stamp = (u64, Option<SystemTime>);

fn stamp(path: &Path) -> Result<Stamp, TopError> {
    let meta = std::fs::metadata(path).map_err(|e| TopError::Stream { path: path.to_owned(), why: e.to_string() })?;
    Ok((meta.len(), meta.modified().ok()))
}

impl Follow {
    /// Follows `path` (a profile, a framed stream, a rotating writer's prefix or folder),
    /// counting thread `thread`'s samples (every thread's when `None`).
    pub fn new(path: &Path, thread: Option<u64>) -> Self {
        Follow {
            path: path.to_owned(),
            kept: Counts::new(thread),
            parts: BTreeMap::new(),
            live: HashMap::new(),
            whole: HashMap::new(),
            bytes_read: 0,
        }
    }

    /// The thread counted (every thread when `None`).
    pub fn thread(&self) -> Option<u64> {
        self.kept.thread
    }

    /// Bytes of files the last [`Follow::refresh`] read.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// The counts of everything at the path now, as [`Counts::add_path`] counts it from
    /// nothing. On an error, the files kept so far stay kept.
    pub fn refresh(&mut self) -> Result<Counts, TopError> {
        self.bytes_read = 0;
        let files = files_at(&self.path)?;
        let present: HashSet<&PathBuf> = files.iter().collect();
        let mut changed = Vec::new();
        for (path, part) in &self.parts {
            if !present.contains(path) || stamp(path).ok() != Some(part.stamp) {
                changed.push(path.clone());
            }
        }
        for path in changed {
            if let Some(part) = self.parts.remove(&path) {
                self.kept.take_back(&part);
            }
        }
        self.kept.threads = self.parts.values().flat_map(|p| p.threads.iter().copied()).collect();
        self.live.retain(|path, _| present.contains(path));
        for path in &files {
            if self.parts.contains_key(path) {
                continue;
            }
            let stamp = stamp(path)?;
            if let Some(part) = self.follow_stream(path, stamp)? {
                self.parts.insert(path.clone(), part);
                continue;
            }
            let part = self.kept.add_kept(path, stamp)?;
            self.bytes_read += stamp.0;
            self.parts.insert(path.clone(), part);
        }
        Ok(self.kept.clone())
    }
}

impl Follow {
    /// The counts of the stream at `path` so far, reading only what it gained since the last
    /// refresh; `None` when the file is not a stream that can be followed.
    fn follow_stream(&mut self, path: &Path, stamp: Stamp) -> Result<Option<Part>, TopError> {
        let identity = std::fs::metadata(path).map(|m| (m.dev(), m.ino())).ok();
        if identity.is_some() && self.whole.get(path).copied() == identity {
            return Ok(None);
        }
        if self.live.get(path).is_some_and(|live| !live.follows(path, stamp.0)) {
            self.live.remove(path);
        }
        if !self.live.contains_key(path) {
            if !probe_is_stream(path)? {
                return Ok(None);
            }
            self.live.insert(path.to_owned(), LiveStream::new(path, self.kept.thread)?);
        }
        let Some(live) = self.live.get_mut(path) else { return Ok(None) };
        match live.refresh() {
            Ok(read) => {
                self.bytes_read += read;
                Ok(Some(self.kept.absorb(live.counts(), stamp)))
            }
            Err(_) => {
                // Read whole instead, which says what is wrong if anything is.
                self.live.remove(path);
                if let Some(identity) = identity {
                    self.whole.insert(path.to_owned(), identity);
                }
                Ok(None)
            }
        }
    }
}

impl Counts {
    /// Adds `other`'s counts (of a file's samples), returning what they added.
    fn absorb(&mut self, other: &Counts, stamp: Stamp) -> Part {
        let mut counts = Vec::new();
        for (i, key) in other.keys.iter().enumerate() {
            let (own, total) = (other.own[i], other.total[i]);
            if total == 0 {
                continue;
            }
            let f = self.function(key, false) as usize;
            self.own[f] += own;
            self.total[f] += total;
            counts.push((f as u32, own, total));
        }
        self.samples += other.samples;
        self.threads.extend(&other.threads);
        Part { stamp, counts, samples: other.samples, threads: other.threads.clone() }
    }

    /// Adds the file at `path`, returning what it added; on an error, adds nothing.
    fn add_kept(&mut self, path: &Path, stamp: Stamp) -> Result<Part, TopError> {
        let (own, total, samples) = (self.own.clone(), self.total.clone(), self.samples);
        let threads = std::mem::take(&mut self.threads);
        let added = self.add_file(path);
        let file_threads = std::mem::replace(&mut self.threads, threads);
        let before = |v: &[u64], i: usize| v.get(i).copied().unwrap_or(0);
        if let Err(e) = added {
            // Functions the file named stay known, with nothing counted.
            for i in 0..self.own.len() {
                self.own[i] = before(&own, i);
                self.total[i] = before(&total, i);
            }
            self.samples = samples;
            return Err(e);
        }
        self.threads.extend(&file_threads);
        let counts = (0..self.own.len())
            .filter_map(|i| {
                let (o, t) = (self.own[i] - before(&own, i), self.total[i] - before(&total, i));
                (t > 0).then_some((i as u32, o, t))
            })
            .collect();
        Ok(Part { stamp, counts, samples: self.samples - samples, threads: file_threads })
    }

    /// Takes out what `part` added.
    fn take_back(&mut self, part: &Part) {
        for &(i, own, total) in &part.counts {
            self.own[i as usize] -= own;
            self.total[i as usize] -= total;
        }
        self.samples -= part.samples;
    }
}
