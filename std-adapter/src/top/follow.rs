//! Reading a path again and again, as the live view does, without reading again what has
//! not changed: each file's counts are kept under its length and modification time (taken
//! before it is read), and a refresh reads only the files that are new or whose length or
//! time moved — a rotating writer's live period as it grows, not its ended periods; nothing
//! while the writer is idle. A kept file that is gone or changed has its counts taken back
//! out (a writer's retention removing old periods costs nothing to read).
//!
//! A framed stream (a journal, a live period, a device's capture) and a MOJO file are
//! followed as they grow: a refresh reads the bytes they gained and counts the records or
//! samples those completed ([`super::live`]). Any other file that changed is read again
//! whole; so is a file that cannot be followed (a compressed region, bytes that are not a
//! journaled stream, a MOJO file that breaks a rule), which then says what is wrong.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::live::Live;
use super::window::Recent;
use super::{files_at, Counts, TopError};

/// Counts of one path, kept across refreshes.
#[derive(Debug)]
pub struct Follow {
    path: PathBuf,
    /// The kept files' counts, added up.
    kept: Counts,
    parts: BTreeMap<PathBuf, Part>,
    /// The files followed as they grow.
    live: HashMap<PathBuf, Live>,
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
    /// Its last span of sample time, the functions as the kept counts number them.
    recent: Option<Recent>,
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
        Self::with_counts(path, Counts::new(thread))
    }

    /// As [`Follow::new`], also counting the last `span_us` µs of sample time
    /// ([`Counts::recent`]).
    pub fn windowed(path: &Path, thread: Option<u64>, span_us: u64) -> Self {
        Self::with_counts(path, Counts::windowed(thread, span_us))
    }

    fn with_counts(path: &Path, kept: Counts) -> Self {
        Follow {
            path: path.to_owned(),
            kept,
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
            let mut file = self.kept.empty_like();
            file.add_file(path)?;
            self.bytes_read += stamp.0;
            let part = self.kept.absorb(&file, stamp);
            self.parts.insert(path.clone(), part);
        }
        if let Some(span) = self.kept.span_us() {
            let mut recent = Recent::new(span);
            for part in self.parts.values().filter_map(|p| p.recent.as_ref()) {
                recent.merge(part, |f| f);
            }
            // What is older than the span now never counts again (a writer's retention
            // removes the oldest files first): a day of rotated periods keeps nothing of
            // those before the last span.
            for part in self.parts.values_mut().filter_map(|p| p.recent.as_mut()) {
                part.drop_before(&recent);
            }
            self.kept.recent = Some(recent);
        }
        Ok(self.kept.clone())
    }

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
            let Some(live) = Live::open(path, self.kept.empty_like())? else { return Ok(None) };
            self.live.insert(path.to_owned(), live);
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
        let mut rename = vec![0; other.keys.len()];
        for (i, key) in other.keys.iter().enumerate() {
            // (A native function's key is its name alone already; its file is the first seen.)
            let f = self.function(key, false) as usize;
            if self.files[f].is_empty() {
                self.files[f] = other.files[i].clone();
            }
            rename[i] = f as u32;
            let (own, total) = (other.own[i], other.total[i]);
            if total == 0 {
                continue;
            }
            self.own[f] += own;
            self.total[f] += total;
            counts.push((f as u32, own, total));
        }
        self.samples += other.samples;
        self.threads.extend(&other.threads);
        let recent = other.recent.as_ref().map(|r| {
            let mut renamed = Recent::new(r.span_us());
            renamed.merge(r, |f| rename[f as usize]);
            renamed
        });
        Part { stamp, counts, samples: other.samples, threads: other.threads.clone(), recent }
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
