//! `tachyon top`: the functions a profile's samples spend their time in, as py-spy's `top` and
//! CPython's live view show them — each function's own samples (those whose innermost frame
//! it is) and total samples (those whose stack holds it at least once).
//!
//! A function is what the input's own tools aggregate on, as the collapsed stacks name it:
//! for Python profiles CPython's `(file, line, function name)` of a frame ([`FunctionKey`]),
//! for native ones (gperftools, pprof) the function name alone, shown with the file it was
//! first seen in and line 0. Samples with an empty stack (and the profiler's own frames) are
//! left out, as every conversion leaves them out, so the total is the sum of the collapsed
//! stacks' counts. Every input comes through the hub ([`crate::profile`]); framed streams (a
//! journaled writer's period not yet ended, a device's capture) through
//! [`crate::tachyon::receive`], as `tachyon receive` reads them; a rotating writer's prefix
//! or folder is each of its period files in turn.

mod follow;
mod live;
#[cfg(feature = "cli")]
pub mod screen;
mod window;

pub use follow::Follow;

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::convert::Output;
use crate::model::{Call, Collector, FrameTable, FunctionKey, Naming, Source, Times};
use crate::profile::{Profile, ProfileError, SourceOptions};
use crate::tachyon::receive::{is_stream, receive};
use crate::tachyon::rotate::period_files;
use crate::tachyon::source::TachyonSource;
use crate::tachyon::storage::{Limits, OwnedReaderStorage};
use tachyon_core::header::HEADER_SIZE;
use window::Recent;

/// Bytes read to tell a framed stream from a profile.
const PROBE_BYTES: u64 = 4096;

/// One function's counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionCounts {
    /// Function name.
    pub function: String,
    /// File (for native frames without lines, the binary).
    pub file: String,
    /// Line, 0 when unknown.
    pub line: i32,
    /// Samples whose innermost frame is this function.
    pub own: u64,
    /// Samples whose stack holds this function at least once.
    pub total: u64,
}

/// The order of the table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SortBy {
    /// Own samples, most first (then total, then name).
    #[default]
    Own,
    /// Total samples, most first (then own, then name).
    Total,
    /// Function name, then file and line.
    Name,
}

impl std::str::FromStr for SortBy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "own" => Ok(SortBy::Own),
            "total" => Ok(SortBy::Total),
            "name" => Ok(SortBy::Name),
            _ => Err(format!("{s}: sort by own, total or name")),
        }
    }
}

/// Counts per function over everything added, for one thread or all.
#[derive(Debug, Default, Clone)]
pub struct Counts {
    thread: Option<u64>,
    keys: Vec<FunctionKey>,
    index: HashMap<FunctionKey, u32>,
    /// Per function, the file shown (a native function's first file).
    files: Vec<String>,
    own: Vec<u64>,
    total: Vec<u64>,
    /// Per function, the last call that counted it in `total` (a function twice in a stack
    /// counts once).
    stamp: Vec<u64>,
    calls: u64,
    samples: u64,
    threads: BTreeSet<u64>,
    /// The counts of the last span of sample time, when asked for.
    recent: Option<Recent>,
}

/// Why `top` could not read an input.
#[derive(Debug)]
pub enum TopError {
    /// A profile could not be read.
    Profile(ProfileError),
    /// A framed stream (or a period file) could not be read or put back together.
    Stream {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
}

impl fmt::Display for TopError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopError::Profile(e) => e.fmt(f),
            TopError::Stream { path, why } => write!(f, "{}: {why}", path.display()),
        }
    }
}

impl std::error::Error for TopError {}

impl From<ProfileError> for TopError {
    fn from(e: ProfileError) -> Self {
        TopError::Profile(e)
    }
}

impl Counts {
    /// Counts of the samples of thread `thread` (of every thread when `None`).
    pub fn new(thread: Option<u64>) -> Self {
        Counts { thread, ..Counts::default() }
    }

    /// As [`Counts::new`], also keeping the counts of the last `span_us` µs of sample time
    /// (see [`Counts::recent`]).
    pub fn windowed(thread: Option<u64>, span_us: u64) -> Self {
        Counts { thread, recent: Some(Recent::new(span_us)), ..Counts::default() }
    }

    /// Empty counts of the same thread and span.
    fn empty_like(&self) -> Self {
        Counts {
            thread: self.thread,
            recent: self.recent.as_ref().map(|r| Recent::new(r.span_us())),
            ..Counts::default()
        }
    }

    /// The counts of the last span of sample time only, for counts made
    /// [`Counts::windowed`]: the span ends at the newest sample of any thread and starts at
    /// most a tenth of the span earlier than asked; samples without times (gperftools,
    /// pprof) are not in it. `None` for counts of the whole recording.
    pub fn recent(&self) -> Option<Counts> {
        let recent = self.recent.as_ref()?;
        let (samples, sums) = recent.sums();
        let mut out = self.clone();
        out.recent = None;
        out.samples = samples;
        for i in 0..out.keys.len() {
            let (own, total) = sums.get(&(i as u32)).copied().unwrap_or((0, 0));
            out.own[i] = own;
            out.total[i] = total;
        }
        Some(out)
    }

    /// The span of [`Counts::recent`], µs.
    pub fn span_us(&self) -> Option<u64> {
        self.recent.as_ref().map(Recent::span_us)
    }

    /// Samples counted (with a stack, of the thread asked for).
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Every thread seen, counted or not.
    pub fn threads(&self) -> &BTreeSet<u64> {
        &self.threads
    }

    /// Adds every sample of `source`.
    pub fn add<S: Source>(&mut self, source: &mut S) -> Result<u64, S::Error> {
        source.prepare(&Output::Collapsed)?;
        let native = source.info().naming == Naming::Native;
        source.replay(&mut Adding::new(self, &mut Vec::new(), native), &mut |_| {})
    }

    /// Adds every sample of the profile, stream or rotating writer's prefix or folder at
    /// `path`.
    pub fn add_path(&mut self, path: &Path) -> Result<(), TopError> {
        files_at(path)?.iter().try_for_each(|p| self.add_file(p))
    }

    fn add_file(&mut self, path: &Path) -> Result<(), TopError> {
        let stream = |why: String| TopError::Stream { path: path.to_owned(), why };
        let start = probe(path)?;
        if start.len() >= HEADER_SIZE && start[..HEADER_SIZE].iter().all(|&b| b == 0) {
            return Err(stream(format!(
                "{HEADER_SIZE} zero bytes where a Tachyon header goes: a recording its writer has not finalized \
                 (CPython 3.15 writes the header and the names only at finalize, so nothing can be counted \
                 before), or not a profile"
            )));
        }
        if !is_stream(&start) {
            let mut profile = Profile::open(path)?;
            // Native addresses named from the binaries, as `convert` names them.
            let options = SourceOptions { symbolize: Some(Vec::new()), ..SourceOptions::default() };
            let mut source = profile.source(&options)?;
            return self.add(&mut source).map(drop).map_err(TopError::Profile);
        }
        // A framed stream: the file it stands for so far, as `tachyon receive` makes it.
        let capture = std::fs::read(path).map_err(|e| stream(e.to_string()))?;
        let file = receive(&capture).map_err(|e| stream(e.to_string()))?.file;
        let meta = tachyon_core::reader::Metadata::read(&mut tachyon_core::io::Cursor::new(&file[..]))
            .map_err(|e| stream(e.to_string()))?;
        let mut storage =
            OwnedReaderStorage::for_metadata(&meta, Limits::default()).map_err(|e| stream(e.to_string()))?;
        let mut reader = storage.open(tachyon_core::io::Cursor::new(&file[..])).map_err(|e| stream(e.to_string()))?;
        self.add(&mut TachyonSource::new(&mut reader)).map(drop).map_err(|e| stream(e.to_string()))
    }

    /// The table, in `sort`'s order.
    pub fn table(&self, sort: SortBy) -> Vec<FunctionCounts> {
        let mut rows: Vec<FunctionCounts> = (0..self.keys.len())
            .filter(|&i| self.total[i] > 0)
            .map(|i| FunctionCounts {
                function: self.keys[i].funcname.clone(),
                file: self.files[i].clone(),
                line: self.keys[i].lineno,
                own: self.own[i],
                total: self.total[i],
            })
            .collect();
        let by_name = |a: &FunctionCounts, b: &FunctionCounts| {
            a.function.cmp(&b.function).then_with(|| a.file.cmp(&b.file)).then(a.line.cmp(&b.line))
        };
        match sort {
            SortBy::Own => {
                rows.sort_by(|a, b| b.own.cmp(&a.own).then(b.total.cmp(&a.total)).then_with(|| by_name(a, b)))
            }
            SortBy::Total => {
                rows.sort_by(|a, b| b.total.cmp(&a.total).then(b.own.cmp(&a.own)).then_with(|| by_name(a, b)))
            }
            SortBy::Name => rows.sort_by(by_name),
        }
        rows
    }

    /// `{"total": N, "threads": [...], "functions": [{"function", "file", "line", "own",
    /// "total"}, …]}`.
    pub fn json(&self, sort: SortBy) -> Value {
        let functions: Vec<Value> = self
            .table(sort)
            .into_iter()
            .map(|r| json!({"function": r.function, "file": r.file, "line": r.line, "own": r.own, "total": r.total}))
            .collect();
        json!({"total": self.samples, "threads": self.threads, "functions": functions})
    }

    /// The table as text, `limit` rows at most, lines cut to `width` columns when given.
    pub fn text(&self, sort: SortBy, limit: Option<usize>, width: Option<usize>) -> String {
        use std::fmt::Write as _;
        let percent = |n: u64| if self.samples > 0 { n as f64 * 100.0 / self.samples as f64 } else { 0.0 };
        let mut out = String::new();
        let _ = writeln!(out, "Total samples: {}   Threads: {}", self.samples, self.threads.len());
        let _ = writeln!(out, "{:>7} {:>7} {:>9} {:>9}  Function (file:line)", "%Own", "%Total", "Own", "Total");
        for row in self.table(sort).into_iter().take(limit.unwrap_or(usize::MAX)) {
            let mut line = format!(
                "{:>6.2}% {:>6.2}% {:>9} {:>9}  {} ({}:{})",
                percent(row.own),
                percent(row.total),
                row.own,
                row.total,
                row.function,
                row.file,
                row.line
            );
            if let Some(width) = width {
                if let Some((cut, _)) = line.char_indices().nth(width) {
                    line.truncate(cut);
                }
            }
            out.push_str(&line);
            out.push('\n');
        }
        out
    }

    fn function(&mut self, key: &FunctionKey, native: bool) -> u32 {
        let named = native.then(|| FunctionKey { filename: String::new(), lineno: 0, funcname: key.funcname.clone() });
        let counted = named.as_ref().unwrap_or(key);
        if let Some(&i) = self.index.get(counted) {
            return i;
        }
        let i = self.keys.len() as u32;
        self.files.push(key.filename.clone());
        self.keys.push(counted.clone());
        self.index.insert(counted.clone(), i);
        self.own.push(0);
        self.total.push(0);
        self.stamp.push(0);
        i
    }
}

/// The files at `path`: the file itself, or a rotating writer's period files in order.
fn files_at(path: &Path) -> Result<Vec<PathBuf>, TopError> {
    if !path.is_dir() && path.exists() {
        return Ok(vec![path.to_owned()]);
    }
    let (periods, _) =
        period_files(path).map_err(|e| TopError::Stream { path: path.to_owned(), why: e.to_string() })?;
    if periods.is_empty() {
        return Err(TopError::Stream {
            path: path.to_owned(),
            why: "no such file, and no period files of a rotating writer there".into(),
        });
    }
    Ok(periods)
}

/// The first bytes of the file at `path`.
fn probe(path: &Path) -> Result<Vec<u8>, TopError> {
    let mut start = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(PROBE_BYTES).read_to_end(&mut start))
        .map_err(|e| TopError::Stream { path: path.to_owned(), why: e.to_string() })?;
    Ok(start)
}

/// The collector adding one source's calls.
struct Adding<'a> {
    counts: &'a mut Counts,
    /// Per function of the source's frame table, its index in the counts: extended as the
    /// table grows (a source read as it is written learns frames as it goes).
    map: &'a mut Vec<u32>,
    /// The source names native functions (by name alone).
    native: bool,
    /// The call's distinct functions (for the window's buckets).
    distinct: Vec<u32>,
}

impl<'a> Adding<'a> {
    fn new(counts: &'a mut Counts, map: &'a mut Vec<u32>, native: bool) -> Self {
        Adding { counts, map, native, distinct: Vec::new() }
    }

    /// Maps the functions of `frames` not mapped yet.
    fn extend(&mut self, frames: &FrameTable) {
        if let Some(new) = frames.functions.get(self.map.len()..) {
            for key in new {
                self.map.push(self.counts.function(key, self.native));
            }
        }
    }
}

impl Collector for Adding<'_> {
    fn collect(&mut self, frames: &FrameTable, call: &Call<'_>) {
        self.extend(frames);
        let c = &mut *self.counts;
        c.threads.insert(call.thread_id);
        if call.stack.is_empty() || c.thread.is_some_and(|t| t != call.thread_id) {
            return;
        }
        let n = call.samples();
        c.samples += n;
        c.calls += 1;
        let function = |id: u32| self.map[frames.function(id) as usize] as usize;
        let own = function(call.stack[0]);
        c.own[own] += n;
        self.distinct.clear();
        for &id in call.stack {
            let f = function(id);
            if c.stamp[f] != c.calls {
                c.stamp[f] = c.calls;
                c.total[f] += n;
                self.distinct.push(f as u32);
            }
        }
        if let (Some(recent), Times::Stamped(times)) = (c.recent.as_mut(), call.times) {
            recent.add(times, own as u32, &self.distinct);
        }
    }
}
