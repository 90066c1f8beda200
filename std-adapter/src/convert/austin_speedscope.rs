//! speedscope JSON from a MOJO file as Austin's own pipeline makes it: `mojo2austin` (1.7.1)
//! turns the file into Austin's text, and `austin2speedscope` (austin-python 1.7.1, exporter
//! 0.2.1) turns the text into one sampled profile per process, thread and metric. This runs
//! the same two steps: [`Profiles`] reads Austin's text line by line as `austin2speedscope`
//! does, quirks included, so the JSON is byte for byte the tool's; and [`from_mojo`] feeds it
//! MOJO events, the text made by [`super::austin::AustinText`] except for the lines whose
//! reading the events already tell (nearly all: see `MojoProfiles`).
//!
//! - The metadata header is the leading `# key: value` lines; the line that ends it is read
//!   and dropped, so a file's first sample never counts. `mode` picks the metrics: `wall`
//!   and `cpu` one time profile, `memory` one allocation profile (negative deltas included:
//!   the text has one value), `full` CPU time (time where not idle), wall time, allocations
//!   and deallocations. A blank line ends the samples.
//! - A line is `P<pid>;T<thread>;<frame>;… <metric>`: the metric after the last space, the
//!   thread up to the first `;`, frames split on `;` and each split at its last two `:`
//!   (`file:function:line`), after `;L<digits>` is replaced by `:<digits>` (unless the
//!   frames begin with `;L`). A line that does not parse (a `:GC:` or `:INVALID:` frame, a
//!   name holding `;`, a metric missing) is skipped; numbers parse as Python's `int`.
//! - Per metric, a sample without frames or of weight 0 is skipped; profiles are named
//!   `<Wall time|CPU time|Memory allocation|Memory deallocation> profile for <pid>:<thread>`,
//!   in microseconds or bytes, made in order of first use and listed by the name's last word,
//!   stably; frames are `{name, file, line}` in order of first use.
//! - JSON as Python's `json.dump`: `", "` and `": "` separators, non-ASCII as `\uXXXX`.
//!
//! Where `austin2speedscope` fails (no `mode`, an unknown one, a one-value metric in full
//! mode, a sample line without a thread), this returns an error saying so. Memory: each
//! distinct stack once, and a stack id and a weight per sample and metric (speedscope lists
//! every sample).

use std::borrow::Cow;
use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt;
use std::io::{self, Write};

use super::austin::{AustinError, AustinText};
use crate::hash::IdMap;
use crate::pyfmt::push_decimal;
use crate::pyfmt::write_json_str;
use tachyon_core::mojo::{Event, Reader};

/// The `exporter` austin2speedscope 0.2.1 writes.
const EXPORTER: &str = "Austin2Speedscope Converter 0.2.1";

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
enum Mode {
    Cpu,
    Wall,
    Memory,
    Full,
}

impl Mode {
    /// The profiles a sample's metrics go to, in order (Python's `zip` stops at the shorter).
    fn metrics(self) -> &'static [Metric] {
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
enum Metric {
    Cpu = 0,
    Wall = 1,
    Alloc = 2,
    Dealloc = 3,
}

impl Metric {
    fn prefix(self) -> &'static str {
        match self {
            Metric::Cpu => "CPU time",
            Metric::Wall => "Wall time",
            Metric::Alloc => "Memory allocation",
            Metric::Dealloc => "Memory deallocation",
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Metric::Cpu | Metric::Wall => "microseconds",
            Metric::Alloc | Metric::Dealloc => "bytes",
        }
    }
}

/// One profile: its name and unit, and its samples' stack ids and weights.
#[derive(Debug)]
struct Profile {
    name: String,
    unit: &'static str,
    stacks: Vec<u32>,
    weights: Vec<i128>,
    end: i128,
}

/// Where the reading is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Header,
    Samples,
    Done,
}

/// `austin2speedscope` over Austin's text, written into it as bytes.
pub struct Profiles {
    stage: Stage,
    line: Vec<u8>,
    /// A `\r` ended the last line: a `\n` right after it belongs to it.
    after_cr: bool,
    lines: u64,
    mode: Option<String>,
    metrics: &'static [Metric],
    /// Frames parsed, as `[function, file, line]`, by id.
    frames: Vec<[String; 3]>,
    /// Per parsed frame, its index in the output's frames ([`NOT_A_FRAME`]: not listed yet).
    listed: Vec<u32>,
    /// The output's frames: parsed frame ids in order of first use in an added sample.
    order: Vec<u32>,
    frame_ids: HashMap<[String; 3], u32>,
    /// Each distinct piece of frame text: its frame id, or [`NOT_A_FRAME`].
    pieces: IdMap<Box<str>, u32>,
    stacks: Vec<Vec<u32>>,
    stack_ids: IdMap<Vec<u32>, u32>,
    profiles: Vec<Profile>,
    /// Per thread, its profile per metric.
    threads: Vec<[Option<usize>; 4]>,
    /// `"<pid> <thread>"` → its thread (the pid, digits, holds no space).
    thread_ids: IdMap<Box<str>, usize>,
    /// The key and thread of the last sample (most samples are of the thread before).
    key: String,
    last_thread: Option<usize>,
    /// The frames and stack id of the last stack (most samples repeat a stack).
    last_frames: Vec<u32>,
    last_stack: Option<u32>,
    error: Option<SpeedscopeError>,
    scratch: Vec<u32>,
}

/// A piece of frame text that does not parse; a frame not yet in the output.
const NOT_A_FRAME: u32 = u32::MAX;

/// A sample line's metrics, for [`Profiles::sample_of`].
enum Metrics<'a> {
    /// In the line's text (after its last space), to be parsed.
    Text(&'a str),
    /// Read already: what the text would say.
    Read(&'a [i64]),
}

/// A sample line's frames, for [`Profiles::sample_of`].
enum Frames<'a> {
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

/// Python's `str.strip()` whitespace, which counts U+001C–U+001F.
fn python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// What Python's `int(s)` reads `s` as, in decimal: ASCII digits with single underscores
/// between them, a sign, whitespace around (`None` where `int` raises; digits of other
/// scripts, which it also takes, are refused: MOJO's text never has them). Borrowed when `s`
/// is already so written, as nearly every number is.
fn python_int(s: &str) -> Option<Cow<'_, str>> {
    let b = s.as_bytes();
    if !b.is_empty() && b.iter().all(u8::is_ascii_digit) && (b[0] != b'0' || b.len() == 1) {
        return Some(Cow::Borrowed(s));
    }
    let s = s.trim_matches(python_space);
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let b = digits.as_bytes();
    if b.is_empty() || b[0] == b'_' || b[b.len() - 1] == b'_' || digits.contains("__") {
        return None;
    }
    if !b.iter().all(|c| c.is_ascii_digit() || *c == b'_') {
        return None;
    }
    let clean: String = digits.chars().filter(|&c| c != '_').collect();
    let trimmed = clean.trim_start_matches('0');
    Some(Cow::Owned(match (trimmed.is_empty(), negative) {
        (true, _) => "0".to_owned(),
        (false, true) => format!("-{trimmed}"),
        (false, false) => trimmed.to_owned(),
    }))
}

/// Appends `v` in decimal.
fn push_i128(out: &mut Vec<u8>, v: i128) {
    if v < 0 {
        out.push(b'-');
    }
    match u64::try_from(v.unsigned_abs()) {
        Ok(v) => push_decimal(out, v),
        Err(_) => out.extend_from_slice(v.unsigned_abs().to_string().as_bytes()),
    }
}

/// `s` read when it is at most 18 ASCII digits (where [`python_int`] would read it as it
/// is written, bar leading zeros): the metrics of nearly every line.
fn small_decimal(s: &str) -> Option<i128> {
    let b = s.as_bytes();
    if b.is_empty() || b.len() > 18 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0i128, |v, d| v * 10 + i128::from(d - b'0')))
}

/// `s` split at every `sep` (ASCII), as `str::split` splits it.
fn split(s: &str, sep: u8) -> impl Iterator<Item = &str> {
    let mut start = 0;
    memchr::memchr_iter(sep, s.as_bytes()).chain(std::iter::once(s.len())).map(move |end| {
        let piece = &s[start..end];
        start = end + 1;
        piece
    })
}

/// `s` before and after its first `sep` (ASCII); all of it and nothing without one.
fn split_once(s: &str, sep: u8) -> (&str, &str) {
    // memchr's set-up costs more than it saves on a few bytes (pids, threads).
    let found = if s.len() < 64 { s.bytes().position(|b| b == sep) } else { memchr::memchr(sep, s.as_bytes()) };
    match found {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (s, ""),
    }
}

/// `frames` with `;L<digits>` made `:<digits>`, as `Sample.parse` rewrites Austin's older
/// line notation (only if the frames do not begin with `;L`: Python's `rfind` is then 0).
fn alt_lines(frames: &str) -> Cow<'_, str> {
    // Nothing to rewrite unless a frame after the first begins with `L` and a digit (checked
    // per frame: the search for `;L` costs more on lines that have none, nearly all).
    let digit_after_l = |f: &str| f.strip_prefix('L').is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()));
    if !split(frames, b';').skip(1).any(digit_after_l) || frames.rfind(";L") == Some(0) {
        return frames.into();
    }
    let mut out = String::with_capacity(frames.len());
    let mut rest = frames;
    while let Some(i) = rest.find(";L") {
        let digits = rest[i + 2..].bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            out.push_str(&rest[..i + 2]);
            rest = &rest[i + 2..];
            continue;
        }
        out.push_str(&rest[..i]);
        out.push(':');
        out.push_str(&rest[i + 2..i + 2 + digits]);
        rest = &rest[i + 2 + digits..];
    }
    out.push_str(rest);
    out.into()
}

impl Profiles {
    /// One line of the text, without its line end (`ended`: it had one).
    fn take_line(&mut self, line: &str, ended: bool) {
        self.lines += 1;
        match self.stage {
            Stage::Header => {
                if let Some(meta) = line.strip_prefix("# ") {
                    let (key, value) = meta.split_once(':').unwrap_or((meta, ""));
                    if key == "mode" {
                        self.mode = Some(value.trim_matches(python_space).to_owned());
                    }
                } else {
                    // The line that ends the header is read and dropped.
                    self.stage = Stage::Samples;
                    self.start();
                }
            }
            Stage::Samples if line.is_empty() && ended => self.stage = Stage::Done,
            Stage::Samples => {
                if let Err(e) = self.sample(line) {
                    self.error = Some(e);
                    self.stage = Stage::Done;
                }
            }
            Stage::Done => {}
        }
    }

    /// The header is over: its mode decides the metrics.
    fn start(&mut self) {
        let mode = match self.mode.as_deref() {
            None => Err(SpeedscopeError::NoMode),
            Some("cpu") => Ok(Mode::Cpu),
            Some("wall") => Ok(Mode::Wall),
            Some("memory") => Ok(Mode::Memory),
            Some("full") => Ok(Mode::Full),
            Some(m) => Err(SpeedscopeError::UnknownMode(m.to_owned())),
        };
        match mode {
            Ok(m) => self.metrics = m.metrics(),
            Err(e) => {
                self.error = Some(e);
                self.stage = Stage::Done;
            }
        }
    }

    /// A sample line (`Sample.parse`, then `add_samples`); a line that does not parse is
    /// skipped. Per line nothing is allocated once its frames, stack and thread have been
    /// seen: frames are looked up by their text.
    fn sample(&mut self, line: &str) -> Result<(), SpeedscopeError> {
        if !line.starts_with('P') {
            return Ok(());
        }
        let (head, metrics) = match memchr::memrchr(b' ', line.as_bytes()) {
            Some(i) => (&line[..i], &line[i + 1..]),
            None => ("", line),
        };
        self.sample_of(head, Frames::Text, Metrics::Text(metrics))
    }

    /// A sample line split at its last space: `head` is `P<pid>;T<thread>` and, unless
    /// `frames` has them already, `;` and the frames.
    fn sample_of(&mut self, head: &str, frames: Frames<'_>, metrics: Metrics<'_>) -> Result<(), SpeedscopeError> {
        let (process, rest) = split_once(head, b';');
        let Some(pid) = process.get(1..).and_then(python_int) else { return Ok(()) };
        let Some(after_t) = rest.strip_prefix('T') else {
            return if rest.is_empty() { Err(SpeedscopeError::NoThread(self.lines)) } else { Ok(()) };
        };
        let (thread, frame_text) = split_once(after_t, b';');
        // The metrics (`Metric.parse`).
        let mut values = [0i128; 3];
        let mut n = 0;
        match metrics {
            Metrics::Text(metrics) => {
                for part in metrics.split(',') {
                    if n == 3 {
                        return Ok(());
                    }
                    values[n] = match small_decimal(part) {
                        Some(v) => v,
                        None => {
                            let Some(v) = python_int(part) else { return Ok(()) };
                            v.parse().map_err(|_| SpeedscopeError::MetricTooLarge(self.lines))?
                        }
                    };
                    n += 1;
                }
            }
            Metrics::Read(read) => {
                for (value, &r) in values.iter_mut().zip(read) {
                    *value = r.into();
                }
                n = read.len().min(3);
            }
        }
        let weights: &[i128] = match n {
            3 => {
                let [time, idle, memory] = values;
                let cpu = if idle == 0 { time } else { 0 };
                &[cpu, time, memory.max(0), if memory < 0 { -memory } else { 0 }]
            }
            1 if self.metrics.len() == 4 => return Err(SpeedscopeError::OneMetricInFullMode(self.lines)),
            1 => &values[..1],
            _ => return Ok(()),
        };
        // The frames (`Frame.parse`): any that does not parse skips the line.
        self.scratch.clear();
        match frames {
            Frames::Text => {
                let frame_text = alt_lines(frame_text);
                if !frame_text.is_empty() {
                    for piece in split(&frame_text, b';') {
                        match self.frame(piece) {
                            Some(id) => self.scratch.push(id),
                            None => return Ok(()),
                        }
                    }
                }
            }
            Frames::Parsed(ids) => self.scratch.extend_from_slice(ids),
            Frames::Unparsable => return Ok(()),
        }
        if self.scratch.is_empty() {
            return Ok(());
        }
        let metrics = self.metrics;
        let mut stack_and_thread = None;
        for (&metric, &weight) in metrics.iter().zip(weights) {
            if weight == 0 {
                continue;
            }
            let (stack, t) = *stack_and_thread.get_or_insert_with(|| (self.stack(), self.thread(&pid, thread)));
            let profile = self.profile(t, &pid, thread, metric);
            profile.stacks.push(stack);
            profile.weights.push(weight);
            profile.end += weight;
        }
        Ok(())
    }

    /// The id of the frame a piece of text is (`file:function:line`), `None` if it does not
    /// parse; a piece is parsed once.
    fn frame(&mut self, piece: &str) -> Option<u32> {
        if let Some(&id) = self.pieces.get(piece) {
            return (id != NOT_A_FRAME).then_some(id);
        }
        let mut parts = piece.rsplitn(3, ':');
        let parsed = match (parts.next(), parts.next(), parts.next()) {
            (Some(line), Some(function), Some(file)) => {
                python_int(line).map(|line| [function.to_owned(), file.to_owned(), line.into_owned()])
            }
            _ => None,
        };
        let id = match parsed {
            // Pieces that differ as text may be one frame (`f:1` and `f:01`).
            Some(f) => match self.frame_ids.get(&f) {
                Some(&id) => id,
                None => {
                    let id = self.frames.len() as u32;
                    self.frames.push(f.clone());
                    self.listed.push(NOT_A_FRAME);
                    self.frame_ids.insert(f, id);
                    id
                }
            },
            None => NOT_A_FRAME,
        };
        // One entry per distinct piece of text: memory follows the distinct frames.
        self.pieces.insert(piece.into(), id);
        (id != NOT_A_FRAME).then_some(id)
    }

    /// The id of the stack in `scratch`, a sample of which is added: its frames are numbered
    /// in the output now if new (`get_frame`), so a frame only of skipped samples is not.
    fn stack(&mut self) -> u32 {
        if let Some(id) = self.last_stack.filter(|_| self.last_frames == self.scratch) {
            return id;
        }
        self.last_frames.clone_from(&self.scratch);
        if let Some(&id) = self.stack_ids.get(&self.scratch[..]) {
            self.last_stack = Some(id);
            return id;
        }
        let listed: Vec<u32> = self
            .scratch
            .iter()
            .map(|&f| {
                let slot = &mut self.listed[f as usize];
                if *slot == NOT_A_FRAME {
                    *slot = self.order.len() as u32;
                    self.order.push(f);
                }
                *slot
            })
            .collect();
        let id = self.stacks.len() as u32;
        self.stacks.push(listed);
        self.stack_ids.insert(self.scratch.clone(), id);
        self.last_stack = Some(id);
        id
    }

    /// The thread `"<pid> <thread>"` names.
    fn thread(&mut self, pid: &str, thread: &str) -> usize {
        let key = &self.key;
        if let Some(t) = self.last_thread {
            let same = key.len() == pid.len() + 1 + thread.len()
                && key.starts_with(pid)
                && key.as_bytes()[pid.len()] == b' '
                && key.ends_with(thread);
            if same {
                return t;
            }
        }
        self.key.clear();
        self.key.push_str(pid);
        self.key.push(' ');
        self.key.push_str(thread);
        let t = match self.thread_ids.get(self.key.as_str()) {
            Some(&t) => t,
            None => {
                let t = self.threads.len();
                self.threads.push([None; 4]);
                self.thread_ids.insert(self.key.as_str().into(), t);
                t
            }
        };
        self.last_thread = Some(t);
        t
    }

    /// The profile of `metric` of thread `t`, which `pid` and `thread` name.
    fn profile(&mut self, t: usize, pid: &str, thread: &str, metric: Metric) -> &mut Profile {
        let i = match self.threads[t][metric as usize] {
            Some(i) => i,
            None => {
                let i = self.profiles.len();
                self.threads[t][metric as usize] = Some(i);
                self.profiles.push(Profile {
                    name: format!("{} profile for {pid}:{thread}", metric.prefix()),
                    unit: metric.unit(),
                    stacks: Vec::new(),
                    weights: Vec::new(),
                    end: 0,
                });
                i
            }
        };
        &mut self.profiles[i]
    }

    /// Takes what is left (a last line without a line end) and writes the JSON, titled
    /// `name` (austin2speedscope's: the text file's name).
    pub fn finish(mut self, name: &str, out: impl Write) -> Result<(), FinishError> {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.take_line(&String::from_utf8_lossy(&line), false);
        }
        if self.stage == Stage::Header {
            self.start();
        }
        if let Some(e) = self.error {
            return Err(FinishError::Text(e));
        }
        self.write_json(name, out).map_err(FinishError::Write)
    }

    fn write_json(&self, name: &str, out: impl Write) -> io::Result<()> {
        let mut out = io::BufWriter::with_capacity(1 << 16, out);
        out.write_all(
            b"{\"$schema\": \"https://www.speedscope.app/file-format-schema.json\", \"shared\": {\"frames\": [",
        )?;
        for (i, [function, file, line]) in self.order.iter().map(|&f| &self.frames[f as usize]).enumerate() {
            if i > 0 {
                out.write_all(b", ")?;
            }
            out.write_all(b"{\"name\": ")?;
            write_json_str(&mut out, function)?;
            out.write_all(b", \"file\": ")?;
            write_json_str(&mut out, file)?;
            write!(out, ", \"line\": {line}}}")?;
        }
        out.write_all(b"]}, \"profiles\": [")?;
        let last_word = |p: &Profile| p.name.rsplit(python_space).find(|w| !w.is_empty()).unwrap_or("").to_owned();
        let mut order: Vec<&Profile> = self.profiles.iter().collect();
        order.sort_by_cached_key(|p| last_word(p));
        // Each distinct stack as JSON once (`[1, 2, 3]`), written again per sample.
        let mut stacks = Vec::new();
        let mut ends = Vec::with_capacity(self.stacks.len());
        for stack in &self.stacks {
            stacks.push(b'[');
            for (k, &id) in stack.iter().enumerate() {
                if k > 0 {
                    stacks.extend_from_slice(b", ");
                }
                push_decimal(&mut stacks, id.into());
            }
            stacks.push(b']');
            ends.push(stacks.len());
        }
        let stack_json = |id: u32| {
            let id = id as usize;
            &stacks[if id == 0 { 0 } else { ends[id - 1] }..ends[id]]
        };
        let mut buf = Vec::with_capacity(2 << 16);
        for (i, p) in order.iter().enumerate() {
            if i > 0 {
                out.write_all(b", ")?;
            }
            out.write_all(b"{\"name\": ")?;
            write_json_str(&mut out, &p.name)?;
            write!(out, ", \"unit\": \"{}\", \"startValue\": 0, \"endValue\": {}, \"samples\": [", p.unit, p.end)?;
            for (j, &stack) in p.stacks.iter().enumerate() {
                if j > 0 {
                    buf.extend_from_slice(b", ");
                }
                buf.extend_from_slice(stack_json(stack));
                if buf.len() >= 1 << 16 {
                    out.write_all(&buf)?;
                    buf.clear();
                }
            }
            buf.extend_from_slice(b"], \"weights\": [");
            for (j, &weight) in p.weights.iter().enumerate() {
                if j > 0 {
                    buf.extend_from_slice(b", ");
                }
                push_i128(&mut buf, weight);
                if buf.len() >= 1 << 16 {
                    out.write_all(&buf)?;
                    buf.clear();
                }
            }
            buf.extend_from_slice(b"], \"type\": \"sampled\"}");
            out.write_all(&buf)?;
            buf.clear();
        }
        out.write_all(b"], \"name\": ")?;
        write_json_str(&mut out, name)?;
        write!(out, ", \"exporter\": \"{EXPORTER}\"}}")?;
        out.flush()
    }
}

/// The text arrives as bytes, split into lines as Python's text mode splits them (`\n`,
/// `\r`, `\r\n`).
impl Write for Profiles {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut rest = buf;
        if self.after_cr {
            self.after_cr = false;
            if let Some(tail) = rest.strip_prefix(b"\n") {
                rest = tail;
            }
        }
        while self.stage != Stage::Done {
            let Some(end) = memchr::memchr2(b'\n', b'\r', rest) else {
                self.line.extend_from_slice(rest);
                break;
            };
            let cr = rest[end] == b'\r';
            let line: std::borrow::Cow<'_, [u8]> = if self.line.is_empty() {
                rest[..end].into()
            } else {
                self.line.extend_from_slice(&rest[..end]);
                std::mem::take(&mut self.line).into()
            };
            match std::str::from_utf8(&line) {
                Ok(text) => self.take_line(text, true),
                Err(_) => self.take_line(&String::from_utf8_lossy(&line), true),
            }
            rest = &rest[end + 1..];
            if cr {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
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

/// Why a MOJO file could not become speedscope JSON.
#[derive(Debug)]
pub enum MojoSpeedscopeError<E> {
    /// Its text could not be made (as `mojo2austin` fails).
    Austin(AustinError<E>),
    /// The text could not become JSON (as `austin2speedscope` fails), or writing failed.
    Speedscope(FinishError),
}

impl<E: fmt::Debug> fmt::Display for MojoSpeedscopeError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MojoSpeedscopeError::Austin(e) => write!(f, "{e}"),
            MojoSpeedscopeError::Speedscope(e) => write!(f, "{e}"),
        }
    }
}

impl<E: fmt::Debug> std::error::Error for MojoSpeedscopeError<E> {}

/// Writes the speedscope JSON `austin2speedscope` makes of `mojo2austin`'s text of the MOJO
/// file `source`, titled `name`; returns the samples (STACK events) read. A version 4 file
/// is read sample by sample into 2.4.0's text ([`super::austin::samples_text`]), which the
/// same reading of Austin's text takes.
pub fn from_mojo<R: embedded_io::Read, W: Write>(
    source: R,
    name: &str,
    out: W,
) -> Result<u64, MojoSpeedscopeError<R::Error>> {
    let mut window = vec![0u8; crate::mojo::WINDOW];
    let austin = |e: AustinError<R::Error>| MojoSpeedscopeError::Austin(e);
    let mut reader = Reader::open(source, &mut window).map_err(|e| austin(AustinError::Read(e)))?;
    if reader.version() >= 4 {
        let mut profiles = Profiles::default();
        let samples = super::austin::samples_text(&mut reader, &mut profiles).map_err(austin)?;
        profiles.finish(name, out).map_err(MojoSpeedscopeError::Speedscope)?;
        return Ok(samples);
    }
    let mut profiles = MojoProfiles::new(reader.version());
    loop {
        // Used where it was returned: a copy first costs more than the rest of some events.
        let next = reader.next_event();
        let done = match &next {
            Ok(Some((offset, event))) => profiles.event(*offset, event).map_err(|e| austin(e.map_read())),
            Ok(None) => break,
            Err(_) => Ok(()),
        };
        if let Err(e) = next {
            return Err(austin(AustinError::Read(e)));
        }
        done?;
    }
    profiles.finish(name, out).map_err(|e| match e {
        MojoSpeedscopeError::Austin(e) => austin(e.map_read()),
        MojoSpeedscopeError::Speedscope(e) => MojoSpeedscopeError::Speedscope(e),
    })
}

/// [`Profiles`] fed MOJO events, as if [`AustinText`] wrote them as text into it, with the
/// same JSON byte for byte, but without the text of nearly every line: a sample line whose
/// text [`Profiles`] would split into the frames its events give is taken as events, its
/// frames known by their MOJO keys, each parsed once from its text. A line that cannot be
/// (a thread or name holding `;` or a line end, a name `Sample.parse` may rewrite, a string
/// reference, a kernel frame, a frame defined again within it, a line without metrics, one
/// before the samples begin) has its text written after all and is read as text.
struct MojoProfiles {
    text: AustinText<io::Sink>,
    profiles: Profiles,
    /// The sample line being taken as events, if it is.
    line: Option<PlainLine>,
    /// The frames of the last STACK's line, with their ids in `profiles` ([`NOT_A_FRAME`]
    /// too), as far as it was taken as events; and the ids of those that parse.
    frames: Vec<(FrameEvent, u32)>,
    ids: Vec<u32>,
    /// The frames of the line before and its pid: most lines begin with the frames of
    /// the one before, found here by position before they are looked up.
    before: Vec<(FrameEvent, u32)>,
    pids: [u64; 2],
    /// Per `(pid, frame key)` referred to in a line taken as events: the frame's id in
    /// `profiles`, [`NOT_A_FRAME`], or [`TEXT_ONLY`].
    known: IdMap<(u64, u64), u32>,
}

/// A sample line taken as events: its STACK's text (`P<pid>;T<thread>`) is in `text.buf`
/// from `start`; its frames' is not written.
struct PlainLine {
    start: usize,
    /// A frame in it does not parse: [`Profiles`] skips the line.
    unparsable: bool,
}

/// An event of a frame in a line taken as events, to be written as text if the line
/// cannot be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FrameEvent {
    Ref(u64),
    Gc,
    Invalid,
}

impl FrameEvent {
    fn event(self) -> Event<&'static [u8]> {
        match self {
            FrameEvent::Ref(key) => Event::FrameRef { key },
            FrameEvent::Gc => Event::Gc,
            FrameEvent::Invalid => Event::FrameInvalid,
        }
    }
}

/// A frame whose text must be read with its line's (it holds `;` or a line end, or begins
/// with `L` and a digit, which `Sample.parse` may merge with the frame before).
const TEXT_ONLY: u32 = u32::MAX - 1;

impl MojoProfiles {
    fn new(version: u8) -> Self {
        MojoProfiles {
            text: AustinText::new(version, io::sink()),
            profiles: Profiles::default(),
            line: None,
            frames: Vec::new(),
            ids: Vec::new(),
            before: Vec::new(),
            pids: [0; 2],
            known: IdMap::default(),
        }
    }

    fn event(&mut self, offset: u64, event: &Event<&[u8]>) -> Result<(), AustinError<Infallible>> {
        let plain = self.line.is_some();
        match *event {
            Event::Stack { .. } | Event::Metadata { .. } => {
                // Full mode's metrics end the line before, if it has any.
                if plain && self.text.metrics_held() {
                    self.end_line(offset, None)?;
                } else if plain {
                    self.write_line(offset)?;
                }
                let start = self.text.buf.len();
                self.text.render(offset, event)?;
                if let Event::Stack { pid, .. } = *event {
                    self.start_line(start, pid);
                }
            }
            Event::FrameRef { key } if plain => {
                let frame = FrameEvent::Ref(key);
                let id = match self.seen_before(frame) {
                    Some(id) => id,
                    None => {
                        let pid = self.pids[1];
                        match self.known.get(&(pid, key)) {
                            Some(&id) => id,
                            None => {
                                let id = self.parse_frame(offset, event)?;
                                self.known.insert((pid, key), id);
                                id
                            }
                        }
                    }
                };
                self.add_frame(offset, frame, id)?;
            }
            Event::FrameInvalid | Event::Gc if plain => {
                let frame = if let Event::Gc = event { FrameEvent::Gc } else { FrameEvent::Invalid };
                let id = match self.seen_before(frame) {
                    Some(id) => id,
                    None => self.parse_frame(offset, event)?,
                };
                self.add_frame(offset, frame, id)?;
            }
            Event::Frame(def) => {
                let key = (self.text.pid.unwrap_or_default(), def.key);
                // A frame defined again: those referred to before are written as they were.
                // (The line before is not looked at again: its frames are forgotten when
                // this line's replace them.)
                if self.known.remove(&key).is_some() {
                    self.write_line(offset)?;
                    self.frames.clear();
                }
                self.text.render(offset, event)?;
            }
            Event::Time(v) | Event::Memory(v) if plain && !self.text.full => self.end_line(offset, Some((event, v)))?,
            Event::FrameKernel { .. } | Event::StringRef { .. } if plain => {
                self.write_line(offset)?;
                self.text.render(offset, event)?;
            }
            _ => self.text.render(offset, event)?,
        }
        if self.line.is_none() && self.text.buf.len() >= super::austin::FLUSH_AT {
            self.read_text(self.text.buf.len());
        }
        Ok(())
    }

    /// A STACK of `pid`, its text from `start`: the line is taken as events if its thread
    /// holds nothing that splits a line or its frames.
    fn start_line(&mut self, start: usize, pid: u64) {
        // Short: a loop costs less than memchr's set-up.
        let head = &self.text.buf[start..];
        let semicolons = head.iter().filter(|&&b| b == b';').count();
        let plain = semicolons == 1 && !head.iter().any(|&b| b == b'\n' || b == b'\r');
        std::mem::swap(&mut self.frames, &mut self.before);
        self.frames.clear();
        self.ids.clear();
        self.pids = [self.pids[1], pid];
        self.line = plain.then_some(PlainLine { start, unparsable: false });
    }

    /// The id of `frame` if the line before had it at the same place, in the same process.
    fn seen_before(&self, frame: FrameEvent) -> Option<u32> {
        match self.before.get(self.frames.len()) {
            Some(&(f, id)) if f == frame && self.pids[0] == self.pids[1] => Some(id),
            _ => None,
        }
    }

    /// What [`Profiles`] makes of the text of a frame's `event`.
    fn parse_frame(&mut self, offset: u64, event: &Event<&[u8]>) -> Result<u32, AustinError<Infallible>> {
        let at = self.text.buf.len();
        self.text.render(offset, event)?;
        // `;` and the piece.
        let piece = &self.text.buf[at + 1..];
        let splits = memchr::memchr3(b'\n', b'\r', b';', piece).is_some();
        let merges = piece.first() == Some(&b'L') && piece.get(1).is_some_and(u8::is_ascii_digit);
        let id = if splits || merges {
            TEXT_ONLY
        } else {
            self.profiles.frame(&String::from_utf8_lossy(piece)).unwrap_or(NOT_A_FRAME)
        };
        self.text.buf.truncate(at);
        Ok(id)
    }

    fn add_frame(&mut self, offset: u64, frame: FrameEvent, id: u32) -> Result<(), AustinError<Infallible>> {
        self.frames.push((frame, id));
        match (id, &mut self.line) {
            (TEXT_ONLY, _) => return self.write_line(offset),
            (NOT_A_FRAME, Some(line)) => line.unparsable = true,
            _ => self.ids.push(id),
        }
        Ok(())
    }

    /// The line is not taken as events after all: its frames are written as text.
    fn write_line(&mut self, offset: u64) -> Result<(), AustinError<Infallible>> {
        if self.line.take().is_some() {
            for (frame, _) in &self.frames {
                self.text.render(offset, &frame.event())?;
            }
        }
        Ok(())
    }

    /// The line ends with `metric`, a METRIC_TIME or METRIC_MEMORY and its value (full
    /// mode's held back metrics if `None`): the profiles take it as events if they are
    /// reading samples, with nothing of a line before it unread; otherwise it is written
    /// as text.
    fn end_line(&mut self, offset: u64, metric: Option<(&Event<&[u8]>, i64)>) -> Result<(), AustinError<Infallible>> {
        let Some(line) = &self.line else { return Ok(()) };
        let unparsable = line.unparsable;
        self.read_text(line.start);
        let p = &mut self.profiles;
        if p.stage == Stage::Header || !p.line.is_empty() {
            self.write_line(offset)?;
            match metric {
                Some((event, _)) => self.text.render(offset, event)?,
                None => self.text.end_line(),
            }
            return Ok(());
        }
        self.line = None;
        // What the text would say: ` <value>`, or ` <time>,<idle>,<memory>`.
        let (one, three);
        let read: &[i64] = match metric {
            Some((_, value)) => {
                one = [value];
                &one
            }
            None => {
                three = self.text.take_metrics().unwrap_or_default();
                &three
            }
        };
        if p.stage == Stage::Samples {
            p.lines += 1;
            p.after_cr = false;
            let buf = &self.text.buf;
            let head = match std::str::from_utf8(buf) {
                Ok(head) => Cow::Borrowed(head),
                Err(_) => String::from_utf8_lossy(buf),
            };
            let frames = if unparsable { Frames::Unparsable } else { Frames::Parsed(&self.ids) };
            if let Err(e) = p.sample_of(&head, frames, Metrics::Read(read)) {
                p.error = Some(e);
                p.stage = Stage::Done;
            }
        }
        self.text.buf.clear();
        Ok(())
    }

    /// The text before `end` goes to the profiles to read.
    fn read_text(&mut self, end: usize) {
        if end > 0 {
            // Reading text cannot fail.
            let _ = self.profiles.write(&self.text.buf[..end]);
            self.text.buf.drain(..end);
            if let Some(line) = &mut self.line {
                line.start -= end;
            }
        }
    }

    /// The rest of the text is read, and the JSON written; returns the samples (STACK
    /// events) read. Held back metrics are dropped at the end, as `mojo2austin` drops them.
    fn finish(mut self, name: &str, out: impl Write) -> Result<u64, MojoSpeedscopeError<Infallible>> {
        self.write_line(0).map_err(MojoSpeedscopeError::Austin)?;
        self.read_text(self.text.buf.len());
        let samples = self.text.finish().map_err(MojoSpeedscopeError::Austin)?;
        self.profiles.finish(name, out).map_err(MojoSpeedscopeError::Speedscope)?;
        Ok(samples)
    }
}

#[cfg(test)]
mod tests {
    use super::{alt_lines, python_int};

    #[test]
    fn numbers_read_as_pythons_int_reads_them() {
        for (s, want) in [
            ("12", Some("12")),
            (" 12\n", Some("12")),
            ("+12", Some("12")),
            ("-0", Some("0")),
            ("007", Some("7")),
            ("1_000", Some("1000")),
            ("-5", Some("-5")),
            ("123456789012345678901234567890123456789012", Some("123456789012345678901234567890123456789012")),
            ("", None),
            ("1__0", None),
            ("_1", None),
            ("1_", None),
            ("0x10", None),
            ("1P1", None),
            ("GC", None),
        ] {
            assert_eq!(python_int(s).as_deref(), want, "{s:?}");
        }
    }

    #[test]
    fn old_line_notation_rewritten_as_sample_parse_does() {
        for (frames, want) in [
            ("a.py:f:1;L2.py:h:3", "a.py:f:1:2.py:h:3"),
            (";L2.py:h:3", ";L2.py:h:3"),
            ("a:f;L12;b:g;L7", "a:f:12;b:g:7"),
            ("a:f:1;Lx:g:2", "a:f:1;Lx:g:2"),
            ("a:f:1", "a:f:1"),
        ] {
            assert_eq!(alt_lines(frames), want, "{frames:?}");
        }
    }
}
