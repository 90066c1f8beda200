//! Austin's MOJO files as a [`Source`]: each sample is one call, of one thread, weighed by
//! the metric Austin measured or placed on a timeline.
//!
//! Frames are defined lazily in MOJO (before the first sample that needs them), and the hub
//! wants every frame before the first sample, so the file is read twice: once for its frames
//! and facts, once to replay. Memory grows with the distinct frames and threads, never with
//! the samples.
//!
//! | MOJO | hub |
//! |---|---|
//! | FRAME: filename, scope, line, line_end, column, column_end | file, function, `lineno`, `end_lineno` (0, unknown: `lineno`, as a Tachyon frame can only hold it), `col = column − 1`, `end_col = column_end − 1` (Austin counts columns from 1, 0 unknown); a value beyond 2^31 − 1, which CPython cannot hold, as 2^31 − 1 |
//! | FRAME_INVALID | a frame `~:<invalid>` |
//! | FRAME_KERNEL | a frame of file `kernel`, named by the symbol |
//! | GC | a frame `~:<GC>` innermost (CPython's name for time in the collector) |
//! | FRAME `~`, `<GC>`, line 0 (what a `~:<GC>` frame that is not innermost is written as) | the frame `~:<GC>` |
//! | STACK pid, iid, tid | thread id: the tid read as hex (Austin writes the native id so), else a hash of its text; interpreter id: iid. The pid has no place: Linux thread ids are distinct across processes |
//! | METRIC_TIME | the sample's weight in µs; on a timeline, the thread's clock advances by it, and the sample is at the end of its time |
//! | METRIC_MEMORY | the weight under `--metric alloc` (positive deltas) or `free` (negative ones, negated) |
//! | IDLE, mode | status: on CPU in `cpu` mode, and in `full` mode unless idle |
//!
//! Outputs that aggregate (collapsed stacks, flame graphs, pprof, pstats, speedscope) weigh
//! each sample by the chosen metric ([`MojoMetric`]; by default time, or allocations for a
//! memory profile), as Austin's own tools do, with a sampling interval of one unit so that
//! times come out in µs; samples of weight 0 or less add nothing, as austin2speedscope skips
//! them. Outputs made of timed samples (the Firefox profiler, Tachyon) get every sample, at a
//! time that is the sum of its thread's time metrics up to and including its own (Austin
//! measures a sample's time up to the moment it takes it; memory profiles, which have no
//! time metric, advance by the `interval` metadata; a negative time steps back, not below
//! 0); `--to jsonl` counts samples, as CPython's does. The profile starts at time 0: MOJO
//! has no start time.

use std::collections::HashMap;

use embedded_io::{Read, Seek, SeekFrom};
use tachyon_core::header::ProfilingMode;
use tachyon_core::kind::FileKind;
use tachyon_core::mojo::{Frame, FrameDef, Sample};
use tachyon_core::tables::Location;

use crate::hash::IdMap;
use crate::model::{Call, Clock, Collector, FrameInfo, FrameTable, Naming, Source, SourceInfo, Ticker, Times};
use crate::mojo::{for_each, Either, Item, SamplesError};
use crate::output::{ConvertError, Destination, Output, OutputKind};

/// THREAD_STATUS_ON_CPU.
const ON_CPU: u8 = 2;

crate::choices! {
    /// What a sample weighs in aggregating outputs.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum MojoMetric {
        /// Time, or for a memory profile allocations.
        Default = "default",
        /// METRIC_TIME, µs (wall or CPU time as the mode measured; in full mode wall time).
        Time = "time",
        /// METRIC_TIME of samples not idle (full mode's CPU time, as austin2speedscope counts it).
        Cpu = "cpu",
        /// Positive METRIC_MEMORY deltas, bytes.
        Alloc = "alloc",
        /// Negative METRIC_MEMORY deltas, negated, bytes.
        Free = "free",
        /// One per sample.
        Samples = "samples",
    }
}

// By hand: `choices!` variants take documentation only, so no `#[default]`.
#[allow(clippy::derivable_impls)]
impl Default for MojoMetric {
    fn default() -> Self {
        MojoMetric::Default
    }
}

impl MojoMetric {
    /// The sample's weight (≤ 0: it adds nothing).
    fn weight(self, s: &Sample<'_>) -> i64 {
        match self {
            MojoMetric::Default | MojoMetric::Time => s.time.unwrap_or(0),
            MojoMetric::Cpu if s.idle => 0,
            MojoMetric::Cpu => s.time.unwrap_or(0),
            MojoMetric::Alloc => s.memory.unwrap_or(0),
            MojoMetric::Free => s.memory.map_or(0, |m| m.saturating_neg()),
            MojoMetric::Samples => 1,
        }
    }
}

/// A MOJO file, read once for its frames (when [`Source::prepare`] readies it for the hub)
/// and again by each replay; Austin's own formats read it once, passed through.
pub struct MojoSource<R: Read + Seek> {
    source: R,
    /// The frames and facts have been read.
    scanned: bool,
    /// The metric asked for (`Default` until the scan resolves it by the file's mode).
    asked: MojoMetric,
    info: SourceInfo,
    frames: MojoFrames,
    /// Chosen by the caller; `Default` resolved by the file's mode.
    metric: MojoMetric,
    /// Replay every sample with its time (true), or weighed by `metric`.
    timeline: bool,
    /// Austin's `interval` metadata, µs (0 when the file has none).
    interval_us: u64,
}

/// `for_each`'s error when the callback cannot fail.
fn read_failure<E>(e: Either<SamplesError<E>, std::convert::Infallible>) -> SamplesError<E> {
    match e {
        Either::Ours(e) => e,
        Either::Theirs(never) => match never {},
    }
}

/// Austin's own formats, written from the file's events in one pass, not through the hub.
fn passed_through(output: &Output) -> bool {
    matches!(output, Output::Austin | Output::Mojo { .. } | Output::Speedscope { .. })
}

/// A thread id from Austin's tid text: hex as Austin writes it, else a hash of the text.
pub fn thread_id(tid: &[u8]) -> u64 {
    let hex = std::str::from_utf8(tid).ok().filter(|t| !t.is_empty() && t.len() <= 16);
    match hex.and_then(|t| u64::from_str_radix(t, 16).ok()) {
        Some(id) => id,
        None => tid.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)),
    }
}

/// Austin's span (lines from 1, columns from 1, 0 unknown) as CPython's.
pub fn location(def: &FrameDef) -> Location {
    // Beyond i32, which CPython holds lines and columns in: the largest value. (Austin 4.0
    // was seen writing line 2927995183 for a frame of a child process it read half made.)
    let signed = |v: u64| i32::try_from(v).unwrap_or(i32::MAX);
    let column = |v: u64| if v == 0 { -1 } else { signed(v - 1) };
    // Tachyon stores the last line as a delta from the first: an unknown one is the first.
    let lineno = signed(def.line);
    Location {
        lineno,
        end_lineno: if def.line_end == 0 { lineno } else { signed(def.line_end) },
        col: column(def.column),
        end_col: column(def.column_end),
    }
}

impl<R: Read + Seek> MojoSource<R> {
    /// The file, not read yet: [`Source::prepare`] reads its frames and facts for the hub;
    /// Austin's formats are written in one pass from its events ([`Source::pass_through`]).
    /// `metric` weighs samples in aggregating outputs.
    pub fn open(source: R, metric: MojoMetric) -> Self {
        let info = SourceInfo {
            kind: FileKind::Mojo,
            start_time_us: 0,
            sample_interval_us: 1,
            mode: "".into(),
            cpython_mode: None,
            expected_samples: 0,
            timestamps: false,
            threads: true,
            naming: Naming::Python,
            clock: Clock::None,
        };
        MojoSource {
            source,
            scanned: false,
            asked: metric,
            info,
            frames: MojoFrames::new(),
            metric,
            timeline: false,
            interval_us: 0,
        }
    }

    /// Reads the file's frames and facts, once.
    fn scan(&mut self) -> Result<(), SamplesError<R::Error>> {
        if self.scanned {
            return Ok(());
        }
        let source = &mut self.source;
        source
            .seek(SeekFrom::Start(0))
            .map_err(|error| SamplesError::Read(tachyon_core::mojo::ReadError::Io { offset: 0, error }))?;
        let mut frames = MojoFrames::new();
        let (mut mode, mut interval_us) = (String::new(), 0u64);
        let samples = for_each(source, |_, item| {
            match item {
                Item::Metadata { key, value } => read_metadata(key, value, &mut mode, &mut interval_us),
                Item::Sample(s) => frames.learn(&s),
            }
            Ok(())
        })
        .map_err(read_failure)?;
        self.metric = self.asked.resolve(&mode);
        self.info.cpython_mode = match mode.as_str() {
            "cpu" => Some(ProfilingMode::Cpu),
            "wall" | "full" => Some(ProfilingMode::Wall),
            _ => None,
        };
        self.info.mode = mode.into();
        self.info.expected_samples = samples;
        (self.frames, self.interval_us) = (frames, interval_us);
        self.scanned = true;
        self.shape(self.timeline);
        Ok(())
    }

    /// Replays on a timeline (every sample at its thread's time) or weighed by the metric.
    fn shape(&mut self, timeline: bool) {
        self.timeline = timeline;
        self.info.timestamps = timeline;
        // Weighed samples count units of the metric: one µs (or byte) each.
        self.info.sample_interval_us = if timeline { self.interval_us } else { 1 };
    }
}

impl<R: Read + Seek> Source for MojoSource<R> {
    type Error = SamplesError<R::Error>;

    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn frames(&self) -> &FrameTable {
        &self.frames.table
    }

    /// Austin's own formats come from the file's events, not the hub: the text as
    /// `mojo2austin` writes it ([`crate::mojo::austin`]), MOJO re-encoded event by event
    /// ([`crate::mojo::reencode`]), speedscope as `austin2speedscope` makes it of that text
    /// ([`crate::mojo::speedscope`]).
    fn pass_through(
        &mut self,
        output: &Output,
        dest: &mut Destination<'_>,
        _progress: &mut dyn FnMut(u64),
    ) -> Option<Result<u64, ConvertError<Self::Error>>> {
        use crate::mojo::austin::AustinError;
        use crate::mojo::speedscope::MojoSpeedscopeError;
        if !passed_through(output) {
            return None;
        }
        let austin = |e: AustinError<R::Error>| match e {
            AustinError::Read(e) => ConvertError::Read(SamplesError::Read(e)),
            AustinError::Event(e) => ConvertError::Read(SamplesError::Sample(e)),
            AustinError::Write(e) => ConvertError::Write(e),
            e @ AustinError::NoMode { .. } => ConvertError::Encode(e.to_string()),
        };
        let source = &mut self.source;
        if let Err(error) = source.seek(SeekFrom::Start(0)) {
            return Some(Err(ConvertError::Read(SamplesError::Read(tachyon_core::mojo::ReadError::Io {
                offset: 0,
                error,
            }))));
        }
        Some(dest.write_with(|out| match output {
            Output::Austin => crate::mojo::austin::austin_text(source, out).map_err(austin),
            Output::Mojo { version } => crate::mojo::reencode(source, out, *version).map_err(|e| match e {
                crate::mojo::ReencodeError::Read(e) => ConvertError::Read(SamplesError::Read(e)),
                e => ConvertError::Encode(e.to_string()),
            }),
            Output::Speedscope { name } => crate::mojo::speedscope::from_mojo(source, name, out).map_err(|e| match e {
                MojoSpeedscopeError::Austin(e) => austin(e),
                MojoSpeedscopeError::Speedscope(e) => ConvertError::Encode(e.to_string()),
            }),
            _ => unreachable!("Austin's formats and speedscope only"),
        }))
    }

    fn prepare(&mut self, output: &Output) -> Result<(), Self::Error> {
        self.shape(matches!(
            output.kind(),
            OutputKind::Gecko | OutputKind::Perfetto | OutputKind::Tachyon | OutputKind::Jsonl
        ));
        self.scan()
    }

    fn replay(&mut self, collector: &mut dyn Collector, progress: &mut dyn FnMut(u64)) -> Result<u64, Self::Error> {
        // A consumer that did not prepare still gets every sample.
        self.scan()?;
        self.source
            .seek(SeekFrom::Start(0))
            .map_err(|error| SamplesError::Read(tachyon_core::mojo::ReadError::Io { offset: 0, error }))?;
        let frames = &self.frames;
        let mut calls = Calls::new(&self.info.mode, self.metric, self.timeline, self.interval_us);
        let mut ticker = Ticker::default();
        let mut done = 0u64;
        for_each(&mut self.source, |_, item| {
            if let Item::Sample(s) = item {
                done += 1;
                ticker.tick(done, progress);
                calls.collect(frames, &s, collector, true);
            }
            Ok(())
        })
        .map_err(read_failure)?;
        Ok(done)
    }
}

impl MojoMetric {
    /// The metric asked for, `Default` resolved by the file's mode (Austin's `mode`
    /// metadata): allocations for a memory profile, else time.
    pub(crate) fn resolve(self, mode: &str) -> MojoMetric {
        match self {
            MojoMetric::Default if mode == "memory" => MojoMetric::Alloc,
            MojoMetric::Default => MojoMetric::Time,
            m => m,
        }
    }
}

/// Takes the metadata the hub uses: the mode and the sampling interval (µs).
pub(crate) fn read_metadata(key: &[u8], value: &[u8], mode: &mut String, interval_us: &mut u64) {
    match key {
        b"mode" => *mode = String::from_utf8_lossy(value).into_owned(),
        b"interval" => *interval_us = std::str::from_utf8(value).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(0),
        _ => {}
    }
}

/// The hub's frames of a MOJO file's definitions, learnt from its samples: a frame per
/// process and definition, per kernel symbol, and the `~:<invalid>` and `~:<GC>` frames.
pub(crate) struct MojoFrames {
    pub(crate) table: FrameTable,
    /// `(pid, definition)` → frame id; a definition's names are its strings' when defined.
    defined: IdMap<(u64, FrameDef), u32>,
    kernel: HashMap<Vec<u8>, u32>,
    invalid: u32,
    gc: u32,
}

impl MojoFrames {
    pub(crate) fn new() -> Self {
        let mut table = FrameTable::default();
        let pseudo = |name: &str| FrameInfo { filename: "~".into(), funcname: name.into(), ..FrameInfo::default() };
        let invalid = table.push(pseudo("<invalid>"));
        let gc = table.push(pseudo("<GC>"));
        MojoFrames { table, defined: IdMap::default(), kernel: HashMap::new(), invalid, gc }
    }

    /// Gives the sample's frames not met before their ids.
    pub(crate) fn learn(&mut self, s: &Sample<'_>) {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let (table, gc) = (&mut self.table, self.gc);
        for f in s.frames() {
            match f {
                Frame::Defined(f) => {
                    self.defined.entry((s.pid, f.def)).or_insert_with(|| {
                        // MOJO's GC marks only the innermost frame: a `~:<GC>` further out
                        // is written as a FRAME of that name at line 0, and reads back as
                        // the pseudo-frame it was.
                        if (f.filename, f.scope, f.def.line) == (&b"~"[..], &b"<GC>"[..], 0) {
                            return gc;
                        }
                        table.push(FrameInfo {
                            filename: text(f.filename),
                            funcname: text(f.scope),
                            location: Some(location(&f.def)),
                            ..FrameInfo::default()
                        })
                    });
                }
                Frame::Kernel(symbol) if !self.kernel.contains_key(symbol) => {
                    let id = table.push(FrameInfo {
                        filename: "kernel".into(),
                        funcname: text(symbol),
                        ..FrameInfo::default()
                    });
                    self.kernel.insert(symbol.to_vec(), id);
                }
                Frame::Kernel(_) | Frame::Invalid => {}
            }
        }
    }

    /// The sample's stack, innermost first, into `stack` (a frame not learnt is the invalid one).
    fn stack(&self, s: &Sample<'_>, stack: &mut Vec<u32>) {
        stack.clear();
        if s.gc {
            stack.push(self.gc);
        }
        let mut at = s.frames();
        while let Some(f) = at.next_back() {
            stack.push(match f {
                Frame::Defined(f) => self.defined.get(&(s.pid, f.def)).copied().unwrap_or(self.invalid),
                Frame::Kernel(symbol) => self.kernel.get(symbol).copied().unwrap_or(self.invalid),
                Frame::Invalid => self.invalid,
            });
        }
    }
}

/// Samples made the hub's calls: weighed by the metric, or each at its thread's time on a
/// timeline.
pub(crate) struct Calls {
    metric: MojoMetric,
    timeline: bool,
    /// Austin's `interval`, µs: a timeline's step for a sample without a time.
    step: u64,
    /// The mode decides once whether samples are on CPU: always, unless idle, or never.
    cpu: bool,
    full: bool,
    /// A thread is its process, interpreter and thread id (CPython's are interpreter and
    /// thread); its clock on a timeline.
    clocks: IdMap<(u64, u64, u64), u64>,
    stack: Vec<u32>,
}

impl Calls {
    /// Calls of a file of `mode`, weighed by `metric` (resolved) or on a timeline.
    pub(crate) fn new(mode: &str, metric: MojoMetric, timeline: bool, interval_us: u64) -> Self {
        Calls {
            metric,
            timeline,
            step: interval_us,
            cpu: mode == "cpu",
            full: mode == "full",
            clocks: IdMap::default(),
            stack: Vec::new(),
        }
    }

    /// Hands `collector` the sample's call, unless it weighs nothing. A sample not `kept`
    /// leaves its thread's clock where it was (a sample a file still being written may add
    /// to).
    pub(crate) fn collect(&mut self, frames: &MojoFrames, s: &Sample<'_>, collector: &mut dyn Collector, kept: bool) {
        let thread_id = thread_id(s.tid);
        let time;
        let times = if self.timeline {
            // A sample is taken at the end of the time it stands for.
            let clock = self.clocks.entry((s.pid, s.iid, thread_id)).or_insert(0);
            let at = match s.time {
                Some(t) => clock.saturating_add_signed(t),
                None => clock.saturating_add(self.step),
            };
            if kept {
                *clock = at;
            }
            time = [at];
            Times::Stamped(&time)
        } else {
            match u64::try_from(self.metric.weight(s)) {
                Ok(w) if w > 0 => Times::Counted(w),
                _ => return,
            }
        };
        frames.stack(s, &mut self.stack);
        let on_cpu = self.cpu || (self.full && !s.idle);
        let call = Call {
            times,
            interpreter_id: u32::try_from(s.iid).unwrap_or(u32::MAX),
            thread_id,
            status: if on_cpu { ON_CPU } else { 0 },
            stack: &self.stack,
            continued: false,
        };
        collector.collect(&frames.table, &call);
    }
}
