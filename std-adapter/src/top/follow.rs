//! Reading a path again and again, as the live view does, without reading again what has
//! not changed: each file's counts are kept under its length and modification time (taken
//! before it is read), and a refresh reads only the files that are new or whose length or
//! time moved — a rotating writer's live period as it grows, not its ended periods; nothing
//! while the writer is idle. A kept file that is gone or changed has its counts taken back
//! out (a writer's retention removing old periods costs nothing to read).
//!
//! A file that changed is read again whole: a single growing stream costs its whole length
//! at each refresh that finds it grown.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::{files_at, Counts, TopError};

/// Counts of one path, kept across refreshes.
#[derive(Debug)]
pub struct Follow {
    path: PathBuf,
    /// The kept files' counts, added up.
    kept: Counts,
    parts: BTreeMap<PathBuf, Part>,
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
        Follow { path: path.to_owned(), kept: Counts::new(thread), parts: BTreeMap::new(), bytes_read: 0 }
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
        for path in &files {
            if self.parts.contains_key(path) {
                continue;
            }
            let stamp = stamp(path)?;
            let part = self.kept.add_kept(path, stamp)?;
            self.bytes_read += stamp.0;
            self.parts.insert(path.clone(), part);
        }
        Ok(self.kept.clone())
    }
}

impl Counts {
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
