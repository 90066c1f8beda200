//! The hub every conversion goes through: each format's input (its `source` module) feeds it,
//! outputs read it, so adding a format is one module, never one per pair. Several inputs of
//! one format replay as one profile through [`chain`].
//!
//! It has two tiers, as google/pprof's `Profile` and inferno's folded lines have one each:
//!
//! - **Streaming**: a [`Source`] states the profile's facts ([`SourceInfo`]) and its whole
//!   frame table ([`FrameTable`]) before the first sample, then replays its samples in file
//!   order into a [`Collector`] as [`Call`]s: one stack (frame ids) standing for many
//!   samples, with their timestamps when the format has them ([`Times`]). A Tachyon REPEAT
//!   run, a gperftools record with its count, are one call: no input pays per sample what it
//!   can pay per stack, and memory never grows with the sample count.
//! - **Aggregate**: a collector is the second tier. Each output keeps what it needs (stacks
//!   and counts for collapsed stacks and pprof, per-function counts for pstats, every sample
//!   for the Firefox profiler) and writes it at the end.
//!
//! A frame carries what any input has: names, file, a line span with columns, an opcode, and
//! for native profiles an address and its mapping. Outputs that need something an input
//! lacks say so ([`SourceInfo::timestamps`] and the output registry).

pub mod chain;
pub mod fold;
pub mod stacks;

use tachyon_core::header::ProfilingMode;
use tachyon_core::kind::FileKind;
use tachyon_core::tables::Location;

use std::hash::{BuildHasher, Hasher};

use crate::hash::{HashedIds, IdHash};
use crate::output::{ConvertError, Destination, Output};

/// Replays report progress every this many samples.
pub const PROGRESS_EVERY: u64 = 65_536;

/// Calls a progress callback about every [`PROGRESS_EVERY`] samples.
#[derive(Debug, Clone, Copy)]
pub struct Ticker {
    next: u64,
}

impl Default for Ticker {
    fn default() -> Self {
        Ticker { next: PROGRESS_EVERY }
    }
}

impl Ticker {
    /// `done` samples so far: reports them if another [`PROGRESS_EVERY`] have passed.
    #[inline]
    pub fn tick(&mut self, done: u64, progress: &mut dyn FnMut(u64)) {
        if done >= self.next {
            progress(done);
            self.next = done.saturating_add(PROGRESS_EVERY);
        }
    }
}

/// Most timestamps in one part of a call.
pub const CALL_PART: usize = 4096;

/// How an output names a frame when it shows names only (collapsed stacks, flame graphs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    /// CPython's `basename:function:line` (the function alone for pstats' `~` pseudo-file).
    Python,
    /// The function name alone, as google-pprof and perf's folded stacks name native frames.
    Native,
}

/// Most samples a source whose file states its counts (gperftools records, pprof values) may
/// total, refused beyond by the source: every output adds counts in 64 bits (and multiplies
/// them by the interval), and JSON readers hold integers exactly only up to 2^53. A real
/// profile is far below (2^53 samples at 1 kHz is 285,000 years); a file beyond has a
/// corrupted count.
pub const MAX_COUNTED_TOTAL: u64 = 1 << 53;

/// Most a pprof source's counted values may total: 2^63 − 1, the most one pprof or OTLP value
/// holds, so that every sum of them fits the 64-bit fields outputs add them in. pprof values
/// are weights (nanoseconds, bytes, or counts go rescaled when it merged profiles of
/// different periods), not samples: a real profile may pass 2^53 (104 days of CPU time in
/// nanoseconds). Outputs made one sample per count refuse far fewer on their own
/// (`MAX_COUNTED_SAMPLES` in Tachyon's writer); JSON outputs write such integers exactly,
/// though a JavaScript viewer shows them rounded to 53 bits.
pub const MAX_WEIGHT_TOTAL: u64 = i64::MAX as u64;

/// What a source says about its whole profile.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceInfo {
    /// The input format.
    pub kind: FileKind,
    /// Start of the profile, µs since the epoch (0 when the format does not say).
    pub start_time_us: u64,
    /// Sampling interval, µs (0 = unknown).
    pub sample_interval_us: u64,
    /// What the interval measures: `wall`, `cpu`, `gil` … (pprof's sample type).
    pub mode: std::borrow::Cow<'static, str>,
    /// CPython's profiling mode number this profile corresponds to, for the outputs that say
    /// it (jsonl, the pstats table, a Tachyon header): a Tachyon header's; `cpu` for
    /// gperftools (libprofiler samples CPU time); for pprof, the period type's when it is
    /// one of CPython's mode names. `None` where nothing says.
    pub cpython_mode: Option<ProfilingMode>,
    /// Samples the source expects to replay (for progress; may be 0 or a guess).
    pub expected_samples: u64,
    /// Every call has a timestamp per sample ([`Times::Stamped`]).
    pub timestamps: bool,
    /// Samples belong to threads worth showing (a `tid:` root in collapsed stacks).
    pub threads: bool,
    /// How frames are named in name-only outputs.
    pub naming: Naming,
    /// The clock of the start time and the timestamps.
    pub clock: Clock,
}

/// Where a profile lies in Unix time ([`SourceInfo::unix_span`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnixSpan {
    /// Start, µs since the epoch.
    pub start_us: u64,
    /// End, µs since the epoch.
    pub end_us: u64,
    /// What is added to the profile's own times to make them Unix time.
    pub offset_us: i128,
}

impl SourceInfo {
    /// The profile's span on its own clock, from its start and the earliest and latest sample
    /// times seen (CPython's timestamps may go before the start: the span covers them).
    pub fn own_span(&self, first_us: Option<u64>, last_us: Option<u64>) -> (u64, u64) {
        let first = first_us.map_or(self.start_time_us, |t| t.min(self.start_time_us));
        (first, last_us.unwrap_or(self.start_time_us).max(self.start_time_us))
    }

    /// The profile's span in Unix time, given the earliest and latest sample times seen and
    /// when its file was written: as stated on a Unix clock (pprof); on a monotonic clock
    /// (CPython's), placed so that the last sample is when the file was written, the spacing
    /// kept; without times, the write time alone. `None` where nothing says.
    pub fn unix_span(
        &self,
        written_unix_us: Option<u64>,
        first_us: Option<u64>,
        last_us: Option<u64>,
    ) -> Option<UnixSpan> {
        let (first, last) = self.own_span(first_us, last_us);
        let offset_us = match (self.clock, written_unix_us) {
            (Clock::Unix, _) => 0,
            (Clock::Monotonic, Some(w)) => i128::from(w) - i128::from(last),
            (Clock::None, Some(w)) => return Some(UnixSpan { start_us: w, end_us: w, offset_us: 0 }),
            _ => return None,
        };
        let unix = |t: u64| (i128::from(t) + offset_us).clamp(0, i128::from(u64::MAX)) as u64;
        Some(UnixSpan { start_us: unix(first), end_us: unix(last), offset_us })
    }
}

/// What clock a profile's times are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// Unix time (pprof's `time_nanos`).
    Unix,
    /// A clock of the profiled machine without a stated relation to Unix time (CPython's
    /// `time.monotonic()`): outputs that need Unix time place the last sample at the time the
    /// file was written ([`Source::written_unix_us`]).
    Monotonic,
    /// No times (gperftools, MOJO, pstats).
    None,
}

/// One frame of the table, as a source hands it to [`FrameTable::push`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct FrameInfo {
    /// File name (lossy UTF-8; empty when unknown).
    pub filename: String,
    /// Function name (lossy UTF-8; `0x…` for a native address without a symbol).
    pub funcname: String,
    /// Source span, `None` when unknown.
    pub location: Option<Location>,
    /// Opcode, if captured.
    pub opcode: Option<u8>,
    /// Native address (for a caller, the return address minus one), if any.
    pub address: Option<u64>,
    /// Index into [`FrameTable::mappings`] of the mapping holding `address`.
    pub mapping: Option<u32>,
    /// The name is made up from the address (no symbol was found): outputs that can hold
    /// bare addresses (pprof) leave the name out, so that their readers may symbolise.
    pub anonymous: bool,
    /// A frame the source's own tools never show (CPython's `_sync_coordinator.py`).
    pub hidden: bool,
    /// Inlined into its caller: the next frame of every stack holding it (its caller) is at
    /// the same address, and outputs with one entry per address (pprof's locations) put both
    /// in one.
    pub inlined: bool,
}

/// A frame with its names borrowed from where its source keeps them: what
/// [`Source::replay_named`] hands over instead of a [`FrameInfo`] of owned strings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FrameRef<'a> {
    /// As [`FrameInfo::filename`].
    pub filename: &'a str,
    /// As [`FrameInfo::funcname`] (made only for a bare address).
    pub funcname: std::borrow::Cow<'a, str>,
    /// As [`FrameInfo::location`].
    pub location: Option<Location>,
    /// As [`FrameInfo::opcode`].
    pub opcode: Option<u8>,
    /// As [`FrameInfo::address`].
    pub address: Option<u64>,
    /// As [`FrameInfo::mapping`].
    pub mapping: Option<u32>,
    /// As [`FrameInfo::anonymous`].
    pub anonymous: bool,
    /// As [`FrameInfo::hidden`].
    pub hidden: bool,
    /// As [`FrameInfo::inlined`].
    pub inlined: bool,
}

impl FrameInfo {
    /// The frame with its names borrowed.
    pub fn to_ref(&self) -> FrameRef<'_> {
        FrameRef {
            filename: &self.filename,
            funcname: std::borrow::Cow::Borrowed(&self.funcname),
            location: self.location,
            opcode: self.opcode,
            address: self.address,
            mapping: self.mapping,
            anonymous: self.anonymous,
            hidden: self.hidden,
            inlined: self.inlined,
        }
    }
}

impl FrameRef<'_> {
    /// The frame with its names owned.
    pub fn to_info(&self) -> FrameInfo {
        FrameInfo {
            filename: self.filename.to_owned(),
            funcname: self.funcname.clone().into_owned(),
            location: self.location,
            opcode: self.opcode,
            address: self.address,
            mapping: self.mapping,
            anonymous: self.anonymous,
            hidden: self.hidden,
            inlined: self.inlined,
        }
    }
}

/// A mapped file of a native process (a line of `/proc/self/maps`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub limit: u64,
    /// Offset in the file of `start`.
    pub offset: u64,
    /// Path of the mapped file (may be empty or a pseudo-path such as `[vdso]`).
    pub file: String,
    /// Build id, when the input records one.
    pub build_id: String,
}

/// The `(filename, lineno, funcname)` triple CPython's pstats, collapsed and flame-graph
/// collectors aggregate on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FunctionKey {
    /// File name.
    pub filename: String,
    /// First line (0 without a location).
    pub lineno: i32,
    /// Function name.
    pub funcname: String,
}

impl FunctionKey {
    /// The hash a [`FrameTable`] finds a key by, of its parts as borrowed.
    fn hash(hash: &IdHash, filename: &str, lineno: i32, funcname: &str) -> u64 {
        let mut h = hash.build_hasher();
        h.write_usize(filename.len());
        h.write(filename.as_bytes());
        h.write_u32(lineno as u32);
        h.write(funcname.as_bytes());
        h.finish()
    }
}

/// First line, 0 when there is no location (CPython's `extract_lineno`).
pub fn extract_lineno(location: Option<Location>) -> i32 {
    location.map_or(0, |l| l.lineno)
}

/// Python's `os.path.basename` on a POSIX path: everything after the last `/`.
pub fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Every frame of a profile, complete before the first sample: frame ids are positions.
#[derive(Debug, Clone, Default)]
pub struct FrameTable {
    /// Indexed by frame id.
    pub frames: Vec<FrameInfo>,
    /// Distinct `(filename, lineno, funcname)` keys, in frame-table order.
    pub functions: Vec<FunctionKey>,
    /// Mapped files of a native profile, by start address.
    pub mappings: Vec<Mapping>,
    /// Per frame id, its index into `functions`.
    function_of: Vec<u32>,
    /// The table that finds a function by its [`FunctionKey::hash`]: the
    /// keys are held once, in `functions`, and a frame of a known function is found without
    /// an owned key (a `HashMap<FunctionKey, _>` took two strings a frame and a second copy
    /// of each key; it was a fifth of a merge of small files, measured).
    function_index: HashedIds,
    hash: IdHash,
    /// Per frame id, [`FrameInfo::hidden`]: a byte a frame, read for every frame of every
    /// stack by [`FrameTable::visible`] (a frame's whole record is a hundred bytes).
    hidden: Vec<bool>,
    any_hidden: bool,
}

impl FrameTable {
    /// Appends a frame; returns its id. The table's mappings must be in place first: a
    /// frame's file may be its mapping's ([`FrameTable::file_of`]).
    pub fn push(&mut self, frame: FrameInfo) -> u32 {
        let filename = file_of(&self.mappings, &frame);
        let (lineno, funcname) = (extract_lineno(frame.location), &frame.funcname);
        let hash = FunctionKey::hash(&self.hash, filename, lineno, funcname);
        let functions = &self.functions;
        let found = self.function_index.find(hash, |id| {
            let known = &functions[id as usize];
            known.lineno == lineno && known.funcname == *funcname && known.filename == filename
        });
        let function = match found {
            Ok(id) => id,
            Err(free) => {
                self.functions.push(FunctionKey { filename: filename.to_owned(), lineno, funcname: funcname.clone() });
                self.function_index.insert(free, hash)
            }
        };
        self.any_hidden |= frame.hidden;
        self.hidden.push(frame.hidden);
        self.function_of.push(function);
        self.frames.push(frame);
        self.frames.len() as u32 - 1
    }

    /// The file a frame is from, as the outputs that name files the way CPython's collectors
    /// do show it (function keys, jsonl, a Tachyon file's frames): its source file, else, for
    /// a native frame without line information, the binary or library its address is in.
    /// pprof output keeps the empty source file instead: its mappings already name binaries.
    pub fn file_of<'a>(&'a self, frame: &'a FrameInfo) -> &'a str {
        file_of(&self.mappings, frame)
    }

    /// Index into [`FrameTable::functions`] of frame `id`: frames with equal
    /// `(filename, lineno, funcname)` share it.
    pub fn function(&self, id: u32) -> u32 {
        self.function_of[id as usize]
    }

    /// The mapping holding `address`, if any (mappings sorted by start, as `/proc/self/maps`
    /// lists them; one binary search).
    pub fn mapping_of(&self, address: u64) -> Option<u32> {
        let after = self.mappings.partition_point(|m| m.start <= address);
        let i = after.checked_sub(1)?;
        (address < self.mappings[i].limit).then_some(i as u32)
    }

    /// The frame of `id`.
    pub fn frame(&self, id: u32) -> &FrameInfo {
        &self.frames[id as usize]
    }

    /// `stack` without hidden frames (copied into `scratch` only if the table has any).
    pub fn visible<'a>(&self, stack: &'a [u32], scratch: &'a mut Vec<u32>) -> &'a [u32] {
        if !self.any_hidden {
            return stack;
        }
        // Each frame written where the next visible one goes, that place moving on only past
        // a visible one: no branch a frame.
        scratch.clear();
        scratch.resize(stack.len(), 0);
        let mut kept = 0;
        for &id in stack {
            scratch[kept] = id;
            kept += usize::from(!self.hidden[id as usize]);
        }
        scratch.truncate(kept);
        scratch
    }
}

/// [`FrameTable::file_of`], for a table's `mappings`.
fn file_of<'a>(mappings: &'a [Mapping], frame: &'a FrameInfo) -> &'a str {
    match (frame.filename.is_empty(), frame.mapping) {
        (true, Some(m)) => mappings.get(m as usize).map_or("", |m| &m.file),
        _ => &frame.filename,
    }
}

/// The samples a call stands for.
#[derive(Debug, Clone, Copy)]
pub enum Times<'a> {
    /// One timestamp (µs) per sample, in file order; never empty.
    Stamped(&'a [u64]),
    /// A count without times (gperftools records, pprof samples).
    Counted(u64),
}

/// One CPython `collect()` call as a collector sees it: one thread with one status and one
/// stack, standing for several samples. From a Tachyon file, a FULL, SUFFIX or POP_PUSH record
/// is a call of one sample and a REPEAT record one call per run of equal statuses (spec 9.4),
/// handed over in parts of at most [`CALL_PART`] timestamps so that memory stays bounded
/// whatever count a record declares; from a gperftools file, a record is a call of `count`
/// samples.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// The samples.
    pub times: Times<'a>,
    /// Interpreter id (0 for native profiles).
    pub interpreter_id: u32,
    /// Thread id (0 for profiles without threads).
    pub thread_id: u64,
    /// Status flags (0 where the format has none).
    pub status: u8,
    /// Frame ids, innermost first, hidden frames removed; may be empty.
    pub stack: &'a [u32],
    /// A further part of the call before it (same thread, status and stack): collectors
    /// that act once per call (the Firefox profiler's state markers) act on the first part.
    pub continued: bool,
}

impl Call<'_> {
    /// Samples this call stands for.
    pub fn samples(&self) -> u64 {
        match self.times {
            Times::Stamped(t) => t.len() as u64,
            Times::Counted(n) => n,
        }
    }

    /// The timestamps, empty for a counted call.
    pub fn timestamps_us(&self) -> &[u64] {
        match self.times {
            Times::Stamped(t) => t,
            Times::Counted(_) => &[],
        }
    }
}

/// Something that consumes replayed samples, a call at a time.
pub trait Collector {
    /// One call, or a further part of one.
    fn collect(&mut self, frames: &FrameTable, call: &Call<'_>);
}

/// A source's frames and mappings by id, their names borrowed: what a source that replays
/// without building its [`FrameTable`] ([`Source::replay_named`]) lends its collector.
pub trait FrameNames {
    /// Frame `id` (an id of a call's stack).
    fn frame(&self, id: u32) -> FrameRef<'_>;
    /// Frame `id` and where its filename and funcname stand in a string table of the
    /// source's own, for a source that has one (pprof's): a collector can then look each
    /// string up once, not once for every frame that names it. `None` for a name that is
    /// not one of that table's strings as it stands (made up, say).
    fn numbered_frame(&self, id: u32) -> (FrameRef<'_>, [Option<u32>; 2]) {
        (self.frame(id), [None, None])
    }
    /// Mapping `index` (a frame's [`FrameRef::mapping`]).
    fn mapping(&self, index: u32) -> &Mapping;
}

/// What consumes the calls of a source replaying without its frame table
/// ([`Source::replay_named`]): a [`Collector`] given the frames' names borrowed.
pub trait NamedCollector {
    /// One call, or a further part of one; its stack's ids are `frames`' ids.
    fn collect(&mut self, frames: &dyn FrameNames, call: &Call<'_>);
}

/// An input replayed into the hub.
pub trait Source {
    /// What reading the input can fail with.
    type Error: std::fmt::Debug + std::fmt::Display;

    /// The profile's facts.
    fn info(&self) -> &SourceInfo;

    /// Every frame, complete before [`Source::replay`].
    fn frames(&self) -> &FrameTable;

    /// Feeds every sample to `collector` in file order, calling `progress` with the samples
    /// so far about every [`PROGRESS_EVERY`] samples; returns the sample count.
    fn replay(&mut self, collector: &mut dyn Collector, progress: &mut dyn FnMut(u64)) -> Result<u64, Self::Error>;

    /// Readies the source for `output` through the hub; every consumer calls it before
    /// [`Source::info`], [`Source::frames`] or [`Source::replay`] (as [`crate::convert`],
    /// after [`Source::pass_through`] declined, and [`crate::model::chain`] do). Where the
    /// input's own tools differ by output it shapes the samples (gperftools: go pprof cleans
    /// stacks otherwise than google-pprof); an input that must read the file for its frames
    /// reads it here (MOJO), so that passing through reads the file once. Does nothing by
    /// default.
    fn prepare(&mut self, _output: &Output) -> Result<(), Self::Error> {
        Ok(())
    }

    /// When the input was written, µs since the Unix epoch (a file's modification time), if
    /// known: an anchor for profiles on a [`Clock::Monotonic`] clock, and the time of
    /// profiles without one.
    fn written_unix_us(&self) -> Option<u64> {
        None
    }

    /// Replays as [`Source::replay`] does, but lending the frames' names where the source
    /// keeps them rather than building its [`FrameTable`] of owned strings: for a consumer that
    /// keeps the names its own way, a file at a time (a merge of thousands of small files
    /// spent a third of its time making frame tables and freeing them; measured). `None`, the
    /// default, where the source has no such path or has built its table already.
    fn replay_named(
        &mut self,
        _collector: &mut dyn NamedCollector,
        _progress: &mut dyn FnMut(u64),
    ) -> Option<Result<u64, Self::Error>> {
        None
    }

    /// Writes `output` without the hub when it is the input's own format and the input can
    /// keep it as it was (Tachyon's records, byte for byte); `None` otherwise.
    fn pass_through(
        &mut self,
        _output: &Output,
        _dest: &mut Destination<'_>,
        _progress: &mut dyn FnMut(u64),
    ) -> Option<Result<u64, ConvertError<Self::Error>>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(filename: &str, funcname: &str, lineno: Option<i32>, col: i32) -> FrameInfo {
        FrameInfo {
            filename: filename.into(),
            funcname: funcname.into(),
            location: lineno.map(|l| Location { lineno: l, end_lineno: l, col, end_col: col }),
            ..FrameInfo::default()
        }
    }

    #[test]
    fn frames_share_a_function_exactly_when_file_first_line_and_name_are_equal() {
        let mut table = FrameTable {
            mappings: vec![Mapping { start: 0x1000, limit: 0x2000, file: "libm.so".into(), ..Mapping::default() }],
            ..FrameTable::default()
        };
        let frames = [
            frame("a.py", "f", Some(1), 0),
            frame("a.py", "f", Some(1), 4), // another column: the same function
            frame("a.py", "f", Some(2), 0),
            frame("b.py", "f", Some(1), 0),
            frame("a.py", "g", Some(1), 0),
            frame("a.p", "yf", Some(1), 0), // the same bytes split elsewhere
            frame("a.py", "f", None, 0),
            frame("a.py", "f", Some(0), 0), // line 0 is no line
            FrameInfo { mapping: Some(0), ..frame("", "cos", None, 0) }, // its mapping's file
            frame("libm.so", "cos", None, 0),
        ];
        // Many functions, so that the table grows past its first slots while finding.
        let more: Vec<FrameInfo> = (0..100).map(|i| frame("m.py", &format!("h{i}"), Some(i), 0)).collect();
        let ids: Vec<u32> = frames.iter().chain(&more).chain(&frames).map(|f| table.push(f.clone())).collect();
        let functions: Vec<u32> = ids.iter().map(|&id| table.function(id)).collect();
        let n = frames.len();
        assert_eq!(functions[..n], [0, 0, 1, 2, 3, 4, 5, 5, 6, 6]);
        assert_eq!(functions[n..n + 100], (7..107).collect::<Vec<_>>());
        assert_eq!(functions[n + 100..], functions[..n], "known functions found again");
        assert_eq!(table.functions.len(), 107);
        assert_eq!(table.functions[6], FunctionKey { filename: "libm.so".into(), lineno: 0, funcname: "cos".into() });
        assert_eq!(table.functions[4], FunctionKey { filename: "a.p".into(), lineno: 1, funcname: "yf".into() });
    }
}
