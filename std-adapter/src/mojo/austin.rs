//! Austin's text format from a MOJO file, as `mojo2austin` writes it: austin-python 1.7.1's
//! for versions 1 to 3 (the converter of the Austin 3 era, which keeps `:GC:`, `:INVALID:`
//! and full mode's three metrics; 2.4.0's drops them), austin-python 2.4.0's for version 4,
//! which 1.7.1 cannot read (Austin 4's STACK_REPEAT and task events); see
//! [`samples_text`].
//!
//! `mojo2austin` turns events into text one by one, and so does this, in one pass and in
//! memory that follows the file's definitions, not its samples:
//!
//! | event | text |
//! |---|---|
//! | METADATA | `# key: value` and a newline |
//! | STACK | `P<pid>;T<iid>:<tid>` (`P<pid>;T<tid>` before version 3); the tid in decimal when it is hex, as written otherwise |
//! | FRAME_REF | `;<file>:<scope>:<line>`, the names the frame had when defined |
//! | FRAME_KERNEL | `;kernel:<symbol>:0` |
//! | FRAME_INVALID, GC | `;:INVALID:`, `;:GC:` |
//! | METRIC_TIME, METRIC_MEMORY | ` <value>` and a newline; in full mode (after metadata `mode: full`) held back and written before the next STACK or METADATA as ` <time>,<idle 0/1>,<memory>` |
//! | STRING_REF | the string's value |
//! | STRING, FRAME, IDLE | nothing (IDLE sets full mode's idle flag) |
//!
//! Where `mojo2austin` fails (an undefined key, a definition before any STACK, an event of
//! version 4, which it does not know), this returns an error naming the event's offset. Names
//! that are not UTF-8, on which `mojo2austin` fails, are written with U+FFFD.

use std::convert::Infallible;
use std::fmt;
use std::io::{self, Write};

use crate::hash::IdMap;
use crate::pyfmt::push_decimal;
use crate::pyfmt::push_i64;
use tachyon_core::mojo::{Event, Problem, ReadError, Reader, SampleError, Tables};

/// Why a MOJO file could not be written as Austin text.
#[derive(Debug)]
pub enum AustinError<E> {
    /// The file broke a rule of the format, or reading it failed.
    Read(ReadError<E>),
    /// An event the text cannot follow: it broke a rule of the samples (both versions of
    /// `mojo2austin` fail there), or, before version 4, it is of version 4, which 1.7.1 does
    /// not know ([`Problem::NotInVersion`]).
    Event(SampleError),
    /// A sample came before the `mode` metadata, which says which metric the text shows
    /// (2.4.0's `mojo2austin` asserts it has one).
    NoMode {
        /// File offset of the sample's STACK event.
        offset: u64,
    },
    /// Writing failed.
    Write(io::Error),
}

impl<E: fmt::Debug> fmt::Display for AustinError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AustinError::Read(e) => write!(f, "{e}"),
            AustinError::Write(e) => write!(f, "writing the output: {e}"),
            AustinError::NoMode { offset } => {
                write!(f, "offset {offset}: a sample before the mode metadata, which says what the text shows")
            }
            AustinError::Event(e) => write!(f, "{e}"),
        }
    }
}

impl<E: fmt::Debug> std::error::Error for AustinError<E> {}

impl AustinError<Infallible> {
    /// The same error as one of a reader that can fail with `E`.
    pub fn map_read<E>(self) -> AustinError<E> {
        match self {
            AustinError::Read(e) => match e {
                ReadError::Io { error, .. } => match error {},
                ReadError::Format { offset, rule } => AustinError::Read(ReadError::Format { offset, rule }),
                ReadError::TooLarge { offset, window } => AustinError::Read(ReadError::TooLarge { offset, window }),
                ReadError::WindowTooSmall { len, needed } => {
                    AustinError::Read(ReadError::WindowTooSmall { len, needed })
                }
            },
            AustinError::Event(e) => AustinError::Event(e),
            AustinError::NoMode { offset } => AustinError::NoMode { offset },
            AustinError::Write(e) => AustinError::Write(e),
        }
    }
}

impl<E> From<io::Error> for AustinError<E> {
    fn from(e: io::Error) -> Self {
        AustinError::Write(e)
    }
}

/// Full mode's metrics of the sample being written.
#[derive(Debug, Default)]
struct Pending {
    time: Option<i64>,
    idle: bool,
    memory: Option<i64>,
}

impl Pending {
    /// The metrics as `mojo2austin` writes them in full mode: time, idle 0/1, memory, a
    /// missing one as 0 (`mojo2austin` fails there); `None` if there are none.
    fn values(&self) -> Option<[i64; 3]> {
        (self.time.is_some() || self.memory.is_some())
            .then(|| [self.time.unwrap_or(0), self.idle.into(), self.memory.unwrap_or(0)])
    }

    /// Writes the metrics as ` <time>,<idle>,<memory>` and a line end, and forgets them.
    fn write(&mut self, out: &mut Vec<u8>) {
        if let Some([time, idle, memory]) = self.values() {
            out.push(b' ');
            push_i64(out, time);
            out.push(b',');
            push_i64(out, idle);
            out.push(b',');
            push_i64(out, memory);
            out.push(b'\n');
        }
        *self = Pending::default();
    }
}

/// Appends `b` as text: as it is when it is UTF-8 (checked, not copied), else with U+FFFD
/// for what is not.
fn push_text(out: &mut Vec<u8>, b: &[u8]) {
    match std::str::from_utf8(b) {
        Ok(_) => out.extend_from_slice(b),
        Err(_) => out.extend_from_slice(String::from_utf8_lossy(b).as_bytes()),
    }
}

/// What Python's `int(tid, 16)` reads a thread id as, in decimal; `None` where it raises.
fn python_hex(tid: &str) -> Option<String> {
    let s = tid.trim();
    let (negative, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let s = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).map_or(s, |r| r.strip_prefix('_').unwrap_or(r));
    // Digits, with single underscores between them; read without a copy (one per sample).
    if s.is_empty() || s.starts_with('_') || s.ends_with('_') || s.contains("__") {
        return None;
    }
    let mut value = 0u128;
    for c in s.chars().filter(|&c| c != '_') {
        value = value.checked_mul(16)?.checked_add(u128::from(c.to_digit(16)?))?;
    }
    Some(if negative && value != 0 { format!("-{value}") } else { value.to_string() })
}

/// Each thread id's text as `mojo2austin` prints it (decimal when it is hex), worked out
/// once per distinct thread id: most samples are of the thread before. The texts of at most
/// [`TID_TEXTS`] threads are kept (then the table starts again): a file of a million threads
/// kept a million, 240 MB.
#[derive(Default)]
struct TidText {
    index: IdMap<Box<[u8]>, usize>,
    shown: Vec<(Box<[u8]>, Box<str>)>,
    last: Option<usize>,
}

/// Threads whose texts [`TidText`] keeps at once (about 100 bytes each).
const TID_TEXTS: usize = 1 << 16;

impl TidText {
    fn of(&mut self, tid: &[u8]) -> &str {
        let i = match self.last {
            Some(i) if *self.shown[i].0 == *tid => i,
            _ => {
                let i = match self.index.get(tid) {
                    Some(&i) => i,
                    None => {
                        if self.shown.len() == TID_TEXTS {
                            self.shown.clear();
                            self.index.clear();
                        }
                        let text = String::from_utf8_lossy(tid);
                        let shown = python_hex(&text).unwrap_or_else(|| text.into_owned());
                        self.shown.push((tid.into(), shown.into()));
                        self.index.insert(tid.into(), self.shown.len() - 1);
                        self.shown.len() - 1
                    }
                };
                self.last = Some(i);
                i
            }
        };
        &self.shown[i].1
    }
}

/// Appends a frame as the text has it: `;<file>:<scope>:<line>`.
fn push_frame(out: &mut Vec<u8>, filename: &[u8], scope: &[u8], line: u64) {
    out.push(b';');
    push_text(out, filename);
    out.push(b':');
    push_text(out, scope);
    out.push(b':');
    push_decimal(out, line);
}

/// Writes Austin's text for the MOJO file `source` to `out`; returns the samples (STACK
/// events) written.
pub fn austin_text<R: embedded_io::Read, W: Write>(source: R, out: W) -> Result<u64, AustinError<R::Error>> {
    let mut window = vec![0u8; crate::mojo::WINDOW];
    let mut reader = Reader::open(source, &mut window).map_err(AustinError::Read)?;
    if reader.version() >= 4 {
        return samples_text(&mut reader, out);
    }
    let mut text = AustinText::new(reader.version(), out);
    while let Some((offset, event)) = reader.next_item().map_err(AustinError::Read)? {
        text.event(offset, &event).map_err(|e| e.map_read())?;
    }
    text.finish().map_err(|e| e.map_read())
}

/// Austin's text of a version 4 file, as austin-python 2.4.0's `mojo2austin` writes it: each
/// metadata item as `# key: value`, each sample of its reader ([`crate::mojo::for_each`]:
/// STACK_REPEAT's frames in place, task frames left out, INVALID and kernel markers dropped
/// as that reader drops them) as `P<pid>;T<iid>:<tid>;<file>:<scope>:<line>… <metric>`, the
/// tid in decimal when it is hex, no `;` without frames, and the metric the `mode`
/// metadata names: memory in memory mode, else the time (in full mode too: its three-value
/// tail is overwritten there), `None` when the sample has none. Compared byte for byte with
/// austin-python's own snapshots of Austin 4 files (`qemu-tests/vectors/mojo-v4/`).
pub fn samples_text<R: embedded_io::Read, W: Write>(
    reader: &mut Reader<'_, R>,
    out: W,
) -> Result<u64, AustinError<R::Error>> {
    use crate::mojo::{Either, Item, SamplesError};
    let mut out = io::BufWriter::with_capacity(FLUSH_AT, out);
    let mut memory_mode: Option<bool> = None;
    let mut line = Vec::new();
    let mut tids = TidText::default();
    let written = crate::mojo::for_each_in(reader, |_, item| {
        line.clear();
        match item {
            Item::Metadata { key, value } => {
                if key == b"mode" {
                    memory_mode = Some(value == b"memory");
                }
                line.extend_from_slice(b"# ");
                push_text(&mut line, key);
                line.extend_from_slice(b": ");
                push_text(&mut line, value);
            }
            Item::Sample(s) => {
                let memory = memory_mode.ok_or(AustinError::NoMode { offset: s.offset })?;
                line.push(b'P');
                push_decimal(&mut line, s.pid);
                line.extend_from_slice(b";T");
                push_decimal(&mut line, s.iid);
                line.push(b':');
                line.extend_from_slice(tids.of(s.tid).as_bytes());
                for frame in s.frames() {
                    if let tachyon_core::mojo::Frame::Defined(f) = frame {
                        push_frame(&mut line, f.filename, f.scope, f.def.line);
                    }
                }
                line.push(b' ');
                match if memory { s.memory } else { s.time } {
                    Some(v) => push_i64(&mut line, v),
                    None => line.extend_from_slice(b"None"),
                }
            }
        }
        line.push(b'\n');
        out.write_all(&line).map_err(AustinError::Write)
    });
    let samples = written.map_err(|e| match e {
        Either::Ours(SamplesError::Read(e)) => AustinError::Read(e),
        Either::Ours(SamplesError::Sample(e)) => AustinError::Event(e),
        Either::Ours(SamplesError::Write(e)) => AustinError::Write(e),
        Either::Theirs(e) => e,
    })?;
    out.flush()?;
    Ok(samples)
}

/// Austin's text made from MOJO events one at a time, as `mojo2austin` makes it; memory
/// follows the definitions and threads, not the samples.
pub struct AustinText<W: Write> {
    out: W,
    /// Text not yet written to `out`.
    pub(super) buf: Vec<u8>,
    version: u8,
    tables: Tables<'static>,
    /// Each thread id's text.
    tids: TidText,
    /// `;file:scope:line` of frames referred to, by `(pid, key)`: written again as it is
    /// (a frame's names are fixed when it is defined), at most [`RENDERED_BYTES`] in all.
    rendered: IdMap<(u64, u64), Box<[u8]>>,
    rendered_bytes: usize,
    /// The pid of the last STACK (keys belong to it).
    pub(super) pid: Option<u64>,
    /// Metadata said `mode: full`: the metrics are held back until the line ends.
    pub(super) full: bool,
    pending: Pending,
    samples: u64,
}

/// Most bytes of frame text kept for reuse: many frames sharing long names must not make
/// memory grow past what the tables hold by much; past it, frames are written from the
/// tables each time.
const RENDERED_BYTES: usize = 64 << 20;

/// `buf` goes to the output once it holds this much.
pub(super) const FLUSH_AT: usize = 1 << 16;

impl<W: Write> AustinText<W> {
    /// Text for the events of a file of `version`, into `out` (buffered here).
    pub fn new(version: u8, out: W) -> Self {
        let tables = Tables::growable(crate::mojo::TABLE_LIMITS, crate::hash::IdHash::default().key());
        AustinText {
            out,
            buf: Vec::with_capacity(2 * FLUSH_AT),
            version,
            tables,
            tids: TidText::default(),
            rendered: IdMap::default(),
            rendered_bytes: 0,
            pid: None,
            full: false,
            pending: Pending::default(),
            samples: 0,
        }
    }

    /// Writes what `event`, at file offset `offset`, adds to the text.
    pub fn event(&mut self, offset: u64, event: &Event<&[u8]>) -> Result<(), AustinError<Infallible>> {
        self.render(offset, event)?;
        if self.buf.len() >= FLUSH_AT {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Full mode has metrics held back, which the next STACK or METADATA writes.
    pub(super) fn metrics_held(&self) -> bool {
        self.pending.values().is_some()
    }

    /// Full mode's held-back metrics, written as a line end (nothing if there are none).
    pub(super) fn end_line(&mut self) {
        self.pending.write(&mut self.buf);
    }

    /// Full mode's held-back metrics, which the next STACK or METADATA would write as
    /// ` <time>,<idle>,<memory>`, taken instead.
    pub(super) fn take_metrics(&mut self) -> Option<[i64; 3]> {
        std::mem::take(&mut self.pending).values()
    }

    /// Appends what `event` adds to the text to `buf`, which is left to the caller to empty.
    pub(super) fn render(&mut self, offset: u64, event: &Event<&[u8]>) -> Result<(), AustinError<Infallible>> {
        let fail = |problem| AustinError::Event(SampleError { offset, problem });
        let current = || self.pid.ok_or(fail(Problem::NoStack));
        let out = &mut self.buf;
        match *event {
            Event::Metadata { key, value } => {
                self.pending.write(out);
                if key == b"mode" && value == b"full" {
                    self.full = true;
                }
                out.extend_from_slice(b"# ");
                push_text(out, key);
                out.extend_from_slice(b": ");
                push_text(out, value);
                out.push(b'\n');
            }
            Event::Stack { pid: p, iid, tid } => {
                self.pending.write(out);
                self.pid = Some(p);
                self.samples += 1;
                out.push(b'P');
                push_decimal(out, p);
                out.extend_from_slice(b";T");
                if self.version >= 3 {
                    push_decimal(out, iid);
                    out.push(b':');
                }
                out.extend_from_slice(self.tids.of(tid).as_bytes());
            }
            Event::String { key, value } => {
                self.tables.define_string(current()?, key, value).map_err(|e| fail(Problem::Table(e)))?
            }
            Event::Frame(def) => {
                let pid = current()?;
                self.tables.define_frame(pid, def).map_err(|e| fail(Problem::Table(e)))?;
                // A redefinition changes the text (last wins).
                if let Some(old) = self.rendered.remove(&(pid, def.key)) {
                    self.rendered_bytes -= old.len();
                }
            }
            Event::FrameRef { key } => {
                let pid = current()?;
                if let Some(text) = self.rendered.get(&(pid, key)) {
                    out.extend_from_slice(text);
                } else {
                    let f = self.tables.frame(pid, key).ok_or(fail(Problem::UndefinedFrame { pid, key }))?;
                    let start = out.len();
                    push_frame(out, f.filename, f.scope, f.def.line);
                    let text = &out[start..];
                    if self.rendered_bytes + text.len() <= RENDERED_BYTES {
                        self.rendered_bytes += text.len();
                        self.rendered.insert((pid, key), text.into());
                    }
                }
            }
            Event::StringRef { key } => {
                let pid = current()?;
                let s = self.tables.string(pid, key).ok_or(fail(Problem::UndefinedString { pid, key }))?;
                push_text(out, s);
            }
            Event::FrameKernel { symbol } => {
                out.extend_from_slice(b";kernel:");
                push_text(out, symbol);
                out.extend_from_slice(b":0");
            }
            Event::FrameInvalid => out.extend_from_slice(b";:INVALID:"),
            Event::Gc => out.extend_from_slice(b";:GC:"),
            Event::Idle => self.pending.idle = true,
            Event::Time(v) if self.full => self.pending.time = Some(v),
            Event::Memory(v) if self.full => self.pending.memory = Some(v),
            Event::Time(v) | Event::Memory(v) => {
                out.push(b' ');
                push_i64(out, v);
                out.push(b'\n');
            }
            Event::StackRepeat | Event::TaskStack { .. } | Event::TaskWaiter { .. } | Event::TaskRunning { .. } => {
                return Err(fail(Problem::NotInVersion { id: event.id(), version: self.version }))
            }
        }
        Ok(())
    }

    /// Writes out the rest of the text and flushes; returns the samples (STACK events)
    /// written. `mojo2austin` writes held-back metrics only before a later STACK or
    /// METADATA: at the end of the file they are dropped (Austin ends its files with
    /// metadata).
    pub fn finish(mut self) -> Result<u64, AustinError<Infallible>> {
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        self.out.flush()?;
        Ok(self.samples)
    }
}

#[cfg(test)]
mod tests {
    use super::python_hex;

    #[test]
    fn thread_ids_read_as_python_reads_them() {
        for (tid, want) in [
            ("256e", Some("9582")),
            ("7F4E", Some("32590")),
            ("0x2a", Some("42")),
            (" 2a\n", Some("42")),
            ("-2a", Some("-42")),
            ("2_a", Some("42")),
            ("0x_2a", Some("42")),
            ("main", None),
            ("", None),
            ("2__a", None),
            ("_2a", None),
            ("2a_", None),
        ] {
            assert_eq!(python_hex(tid).as_deref(), want, "{tid:?}");
        }
    }
}
