//! The profiles `austin2speedscope` builds, per process, thread and metric, and why it fails.

use std::collections::HashMap;
use std::fmt;
use std::io;

use crate::hash::IdMap;
use crate::pyfmt::push_decimal;

/// The `exporter` austin2speedscope 0.2.1 writes.
pub(super) const EXPORTER: &str = "Austin2Speedscope Converter 0.2.1";

/// Why the text could not become speedscope JSON (where `austin2speedscope` fails).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpeedscopeError {
    /// The header has no `mode`.
    NoMode,
    /// A `mode` other than wall, cpu, memory, full.
    UnknownMode(String),
    /// A sample with one metric in full mode (line number, from 1).
    OneMetricInFullMode(u64),
    /// A sample line with nothing after the pid (line number, from 1).
    NoThread(u64),
    /// A metric beyond 128 bits (line number, from 1; never from MOJO's 64-bit metrics).
    MetricTooLarge(u64),
}

impl fmt::Display for SpeedscopeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpeedscopeError::NoMode => f.write_str("no `mode` metadata (austin2speedscope fails: KeyError)"),
            SpeedscopeError::UnknownMode(m) => {
                write!(f, "mode {m:?} (austin2speedscope knows wall, cpu, memory, full)")
            }
            SpeedscopeError::OneMetricInFullMode(l) => {
                write!(f, "line {l} of the text: one metric in full mode (austin2speedscope fails an assertion)")
            }
            SpeedscopeError::NoThread(l) => write!(f, "line {l} of the text: a sample without a thread"),
            SpeedscopeError::MetricTooLarge(l) => write!(f, "line {l} of the text: a metric beyond 128 bits"),
        }
    }
}

impl std::error::Error for SpeedscopeError {}

/// Austin's modes, as `austin2speedscope` reads the header's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Cpu,
    Wall,
    Memory,
    Full,
}

impl Mode {
    /// The profiles a sample's metrics go to, in order (Python's `zip` stops at the shorter).
    pub(super) fn metrics(self) -> &'static [Metric] {
        match self {
            Mode::Cpu => &[Metric::Cpu],
            Mode::Wall => &[Metric::Wall],
            Mode::Memory => &[Metric::Alloc, Metric::Dealloc],
            Mode::Full => &[Metric::Cpu, Metric::Wall, Metric::Alloc, Metric::Dealloc],
        }
    }
}

/// A profile's metric (its number indexes a thread's profiles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Metric {
    Cpu = 0,
    Wall = 1,
    Alloc = 2,
    Dealloc = 3,
}

impl Metric {
    pub(super) fn prefix(self) -> &'static str {
        match self {
            Metric::Cpu => "CPU time",
            Metric::Wall => "Wall time",
            Metric::Alloc => "Memory allocation",
            Metric::Dealloc => "Memory deallocation",
        }
    }

    pub(super) fn unit(self) -> &'static str {
        match self {
            Metric::Cpu | Metric::Wall => "microseconds",
            Metric::Alloc | Metric::Dealloc => "bytes",
        }
    }
}

/// One profile: its name and unit, and its samples' stack ids and weights.
#[derive(Debug)]
pub(super) struct Profile {
    pub(super) name: String,
    pub(super) unit: &'static str,
    pub(super) stacks: Vec<u32>,
    pub(super) weights: Vec<i128>,
    pub(super) end: i128,
}

/// Where the reading is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    Header,
    Samples,
    Done,
}

/// `austin2speedscope` over Austin's text, written into it as bytes.
pub struct Profiles {
    pub(super) stage: Stage,
    pub(super) line: Vec<u8>,
    /// A `\r` ended the last line: a `\n` right after it belongs to it.
    pub(super) after_cr: bool,
    pub(super) lines: u64,
    pub(super) mode: Option<String>,
    pub(super) metrics: &'static [Metric],
    /// Frames parsed, as `[function, file, line]`, by id.
    pub(super) frames: Vec<[String; 3]>,
    /// Per parsed frame, its index in the output's frames ([`NOT_A_FRAME`]: not listed yet).
    pub(super) listed: Vec<u32>,
    /// The output's frames: parsed frame ids in order of first use in an added sample.
    pub(super) order: Vec<u32>,
    pub(super) frame_ids: HashMap<[String; 3], u32>,
    /// Each distinct piece of frame text: its frame id, or [`NOT_A_FRAME`].
    pub(super) pieces: IdMap<Box<str>, u32>,
    pub(super) stacks: Vec<Vec<u32>>,
    pub(super) stack_ids: IdMap<Vec<u32>, u32>,
    pub(super) profiles: Vec<Profile>,
    /// Per thread, its profile per metric.
    pub(super) threads: Vec<[Option<usize>; 4]>,
    /// `"<pid> <thread>"` → its thread (the pid, digits, holds no space).
    pub(super) thread_ids: IdMap<Box<str>, usize>,
    /// The key and thread of the last sample (most samples are of the thread before).
    pub(super) key: String,
    pub(super) last_thread: Option<usize>,
    /// The frames and stack id of the last stack (most samples repeat a stack).
    pub(super) last_frames: Vec<u32>,
    pub(super) last_stack: Option<u32>,
    pub(super) error: Option<SpeedscopeError>,
    pub(super) scratch: Vec<u32>,
}

/// A piece of frame text that does not parse; a frame not yet in the output.
pub(super) const NOT_A_FRAME: u32 = u32::MAX;

/// A sample line's metrics, for [`Profiles::sample_of`].
pub(super) enum Metrics<'a> {
    /// In the line's text (after its last space), to be parsed.
    Text(&'a str),
    /// Read already: what the text would say.
    Read(&'a [i64]),
}

/// A sample line's frames, for [`Profiles::sample_of`].
pub(super) enum Frames<'a> {
    /// In the line's text, to be parsed.
    Text,
    /// Parsed already, as these frame ids.
    Parsed(&'a [u32]),
    /// One of them does not parse: the line is skipped.
    Unparsable,
}

impl Default for Profiles {
    fn default() -> Self {
        Profiles {
            stage: Stage::Header,
            line: Vec::new(),
            after_cr: false,
            lines: 0,
            mode: None,
            metrics: &[],
            frames: Vec::new(),
            listed: Vec::new(),
            order: Vec::new(),
            frame_ids: HashMap::new(),
            pieces: IdMap::default(),
            stacks: Vec::new(),
            stack_ids: IdMap::default(),
            profiles: Vec::new(),
            threads: Vec::new(),
            thread_ids: IdMap::default(),
            key: String::new(),
            last_thread: None,
            last_frames: Vec::new(),
            last_stack: None,
            error: None,
            scratch: Vec::new(),
        }
    }
}

/// Why [`Profiles::finish`] failed.
#[derive(Debug)]
pub enum FinishError {
    /// The text is one `austin2speedscope` fails on.
    Text(SpeedscopeError),
    /// Writing failed.
    Write(io::Error),
}

impl fmt::Display for FinishError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FinishError::Text(e) => write!(f, "{e}"),
            FinishError::Write(e) => write!(f, "writing the output: {e}"),
        }
    }
}

impl std::error::Error for FinishError {}

/// Python's `str.strip()` whitespace, which counts U+001C–U+001F.
pub(super) fn python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Appends `v` in decimal.
pub(super) fn push_i128(out: &mut Vec<u8>, v: i128) {
    if v < 0 {
        out.push(b'-');
    }
    match u64::try_from(v.unsigned_abs()) {
        Ok(v) => push_decimal(out, v),
        Err(_) => out.extend_from_slice(v.unsigned_abs().to_string().as_bytes()),
    }
}
