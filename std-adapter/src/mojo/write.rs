//! Austin's formats from any input: the hub's samples as the MOJO events Austin would have
//! written for them ([`HubEvents`]), into the core writer (`--to mojo`) or into Austin's text
//! (`--to austin`, through [`super::austin::AustinText`]). A MOJO input keeps its own events
//! instead (re-encoded, or turned into text as `mojo2austin` does).
//!
//! Austin writes a sample as a STACK, then the definitions its frames need that the process
//! has not had (each frame's strings before it, walking from the innermost frame out, as
//! Austin unwinds), then the frame references root first, then GC, then the metric; so does
//! this. The hub's fields map so:
//!
//! | hub (Tachyon) | MOJO |
//! |---|---|
//! | thread id | tid, in lowercase hex as Austin writes native ids |
//! | interpreter id | iid (version 3 and later) |
//! | — (Tachyon has no process id) | pid: the first sample's thread id, the process id of a Linux main thread, which CPython's sampler meets first |
//! | timestamps | METRIC_TIME: time since the thread's previous sample, the first one since the profile's start (as Tachyon stores them); a time going backwards stays negative, which the readers accept; beyond ±2^63 µs (a broken clock) it is clamped |
//! | samples counted without times (gperftools, pprof) | one STACK per call, its METRIC_TIME the count times the interval (the count alone when the interval is unknown) |
//! | frame: file, function, `lineno`, `end_lineno`, `col`, `end_col` | FRAME: filename, scope, line, line_end, `column = col + 1`, `column_end = end_col + 1` (Austin counts columns from 1); unknown values (no location, −1) as 0 |
//! | frame `~:<GC>` innermost | GC |
//! | frame `~:<invalid>` | FRAME_INVALID, in its place |
//! | frame of file `kernel` without a line | FRAME_KERNEL, in its place |
//! | mode: CPU | `mode: cpu`; every other mode `wall` (Austin has no GIL or exception mode) |
//! | sampling interval | `interval` metadata; `duration` at the end (last time − start) |
//! | opcode, status, start time | no counterpart |
//!
//! Keys are numbered in order of first use: strings from 2 (0 and 1 are the empty string
//! and `<unknown>` in austin-python's writer), frames from 1. Memory follows the distinct
//! strings, frames and threads, never the samples.

use std::collections::HashMap;
use std::fmt;
use std::io;

use tachyon_core::mojo::{Event, FrameDef, WriteError, Writer, AUSTIN_VERSION};

use super::austin::{AustinError, AustinText};
use crate::hash::ThreadNumbers;
use crate::memory::IoSink;
use crate::model::{Call, Collector, FrameInfo, FrameTable, Source, Times};
use crate::output::ConvertError;

/// Where [`HubEvents`] puts its events.
pub trait EventSink {
    /// Why taking an event failed.
    type Error: fmt::Display;
    /// Takes one event.
    fn event(&mut self, event: &Event<&[u8]>) -> Result<(), Self::Error>;
}

impl<S: embedded_io::Write> EventSink for Writer<'_, S>
where
    S::Error: fmt::Debug,
{
    type Error = WriteError<S::Error>;
    fn event(&mut self, event: &Event<&[u8]>) -> Result<(), Self::Error> {
        self.write(event)
    }
}

/// Austin's text of events that are made, not read: an event's offset is its number.
struct TextSink<W: io::Write> {
    text: AustinText<W>,
    events: u64,
}

impl<W: io::Write> EventSink for TextSink<W> {
    type Error = AustinError<std::convert::Infallible>;
    fn event(&mut self, event: &Event<&[u8]>) -> Result<(), Self::Error> {
        self.events += 1;
        self.text.event(self.events, event)
    }
}

/// What a hub frame is in MOJO.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// A FRAME, with its key once defined.
    Python(Option<u64>),
    /// FRAME_INVALID.
    Invalid,
    /// FRAME_KERNEL (its function is the symbol).
    Kernel,
    /// GC when innermost, else a FRAME.
    Gc(Option<u64>),
}

impl Kind {
    fn of(f: &FrameInfo) -> Kind {
        match (f.filename.as_str(), f.funcname.as_str(), f.location) {
            ("~", "<invalid>", None) => Kind::Invalid,
            ("~", "<GC>", None) => Kind::Gc(None),
            ("kernel", _, None) => Kind::Kernel,
            _ => Kind::Python(None),
        }
    }
}

/// A hub [`Collector`] that turns every sample into MOJO events for `sink`; keeps the first
/// error and takes nothing after it.
pub struct HubEvents<K: EventSink> {
    sink: K,
    /// Per hub frame id.
    kinds: Vec<Kind>,
    strings: HashMap<String, u64>,
    next_frame_key: u64,
    pid: Option<u64>,
    /// The threads met, numbered; by number, the time of the thread's last sample.
    threads: ThreadNumbers,
    last_times: Vec<u64>,
    start_time_us: u64,
    last_time_us: Option<u64>,
    interval_us: u64,
    error: Option<K::Error>,
}

impl<K: EventSink> HubEvents<K> {
    /// Events for `source`'s samples, into `sink`; writes the opening metadata.
    pub fn new<S: Source>(source: &S, sink: K) -> Self {
        let info = source.info();
        let mut hub = HubEvents {
            sink,
            kinds: source.frames().frames.iter().map(Kind::of).collect(),
            strings: HashMap::new(),
            next_frame_key: 1,
            pid: None,
            threads: ThreadNumbers::new(),
            last_times: Vec::new(),
            start_time_us: info.start_time_us,
            last_time_us: None,
            interval_us: info.sample_interval_us,
            error: None,
        };
        let mode: &[u8] =
            if info.cpython_mode == Some(tachyon_core::header::ProfilingMode::Cpu) { b"cpu" } else { b"wall" };
        hub.emit(&Event::Metadata { key: b"interval", value: info.sample_interval_us.to_string().as_bytes() });
        hub.emit(&Event::Metadata { key: b"mode", value: mode });
        hub
    }

    /// Writes the closing metadata; returns the sink, or the first error.
    pub fn finish(mut self) -> Result<K, K::Error> {
        if let Some(last) = self.last_time_us {
            let duration = last.saturating_sub(self.start_time_us).to_string();
            self.emit(&Event::Metadata { key: b"duration", value: duration.as_bytes() });
        }
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.sink),
        }
    }

    fn emit(&mut self, event: &Event<&[u8]>) {
        if self.error.is_none() {
            if let Err(e) = self.sink.event(event) {
                self.error = Some(e);
            }
        }
    }

    /// The key of string `s`, defined first if new.
    fn string(&mut self, s: &str) -> u64 {
        if let Some(&key) = self.strings.get(s) {
            return key;
        }
        let key = self.strings.len() as u64 + 2;
        self.strings.insert(s.to_owned(), key);
        self.emit(&Event::String { key, value: s.as_bytes() });
        key
    }

    /// Defines the frame `id` if it is a FRAME not yet defined.
    fn define(&mut self, frames: &FrameTable, id: u32) {
        let key = match self.kinds[id as usize] {
            Kind::Python(None) | Kind::Gc(None) => self.next_frame_key,
            _ => return,
        };
        let f = frames.frame(id);
        let filename = self.string(frames.file_of(f));
        let scope = self.string(&f.funcname);
        let unsigned = |v: i32| u64::try_from(v).unwrap_or(0);
        // Austin counts columns from 1; −1 (unknown) becomes 0.
        let from_one = |v: i32| u64::try_from(i64::from(v) + 1).unwrap_or(0);
        let (line, line_end, column, column_end) = match f.location {
            Some(l) => (unsigned(l.lineno), unsigned(l.end_lineno), from_one(l.col), from_one(l.end_col)),
            None => (0, 0, 0, 0),
        };
        self.emit(&Event::Frame(FrameDef { key, filename, scope, line, line_end, column, column_end }));
        self.next_frame_key += 1;
        let kind = &mut self.kinds[id as usize];
        *kind = match kind {
            Kind::Gc(_) => Kind::Gc(Some(key)),
            _ => Kind::Python(Some(key)),
        };
    }

    /// One sample of `call`; `tid` its thread id as text, `time` its METRIC_TIME.
    fn sample(&mut self, frames: &FrameTable, call: &Call<'_>, tid: &[u8], time: i64) {
        let pid = *self.pid.get_or_insert(call.thread_id);
        self.emit(&Event::Stack { pid, iid: u64::from(call.interpreter_id), tid });
        let (gc, stack) = match call.stack.split_first() {
            Some((&first, rest)) if matches!(self.kinds[first as usize], Kind::Gc(_)) => (true, rest),
            _ => (false, call.stack),
        };
        for &id in stack {
            self.define(frames, id);
        }
        for &id in stack.iter().rev() {
            match self.kinds[id as usize] {
                Kind::Python(Some(key)) | Kind::Gc(Some(key)) => self.emit(&Event::FrameRef { key }),
                Kind::Invalid => self.emit(&Event::FrameInvalid),
                Kind::Kernel => self.emit(&Event::FrameKernel { symbol: frames.frame(id).funcname.as_bytes() }),
                Kind::Python(None) | Kind::Gc(None) => unreachable!("defined above"),
            }
        }
        if gc {
            self.emit(&Event::Gc);
        }
        self.emit(&Event::Time(time));
    }
}

impl<K: EventSink> Collector for HubEvents<K> {
    fn collect(&mut self, frames: &FrameTable, call: &Call<'_>) {
        if self.error.is_some() {
            return;
        }
        let (hex, len) = lowercase_hex(call.thread_id);
        let tid = &hex[hex.len() - len..];
        match call.times {
            Times::Stamped(times) => {
                let (thread, new) = self.threads.number(call.interpreter_id, call.thread_id);
                if new {
                    self.last_times.push(self.start_time_us);
                }
                let mut last = self.last_times.get(thread as usize).copied().unwrap_or(self.start_time_us);
                for &t in times {
                    let delta = (i128::from(t) - i128::from(last)).clamp(i64::MIN.into(), i64::MAX.into());
                    self.sample(frames, call, tid, delta as i64);
                    last = t;
                    self.last_time_us = Some(self.last_time_us.map_or(t, |l| l.max(t)));
                }
                if let Some(slot) = self.last_times.get_mut(thread as usize) {
                    *slot = last;
                }
            }
            Times::Counted(n) => {
                let time = n.saturating_mul(self.interval_us.max(1));
                self.sample(frames, call, tid, i64::try_from(time).unwrap_or(i64::MAX));
            }
        }
    }
}

/// `v` in lowercase hex, as Austin writes thread ids: the digits end the buffer, and how many
/// there are (no allocation per call).
fn lowercase_hex(mut v: u64) -> ([u8; 16], usize) {
    let mut out = [0u8; 16];
    let mut len = 0;
    loop {
        len += 1;
        out[16 - len] = b"0123456789abcdef"[(v & 0xf) as usize];
        v >>= 4;
        if v == 0 {
            return (out, len);
        }
    }
}

/// Replays `source` into `sink` as MOJO events; returns the samples and the sink.
fn replay<S: Source, K: EventSink>(
    source: &mut S,
    sink: K,
    progress: &mut dyn FnMut(u64),
) -> Result<(u64, K), ConvertError<S::Error>> {
    let mut hub = HubEvents::new(source, sink);
    let n = source.replay(&mut hub, progress).map_err(ConvertError::Read)?;
    let sink = hub.finish().map_err(|e| ConvertError::Encode(e.to_string()))?;
    progress(n);
    Ok((n, sink))
}

/// Writes the samples of `source` as a MOJO file of `version` (default 3, as Austin writes)
/// into `sink`; returns the samples.
pub fn write_from_hub<S: Source, W: io::Write>(
    source: &mut S,
    sink: W,
    version: Option<u8>,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, ConvertError<S::Error>> {
    let version = version.unwrap_or(AUSTIN_VERSION);
    let mut staging = vec![0u8; crate::mojo::WINDOW + 64];
    let mut out = io::BufWriter::with_capacity(1 << 16, sink);
    let werr = |e: WriteError<io::Error>| ConvertError::Encode(e.to_string());
    let writer = Writer::new(IoSink(&mut out), &mut staging, version).map_err(werr)?;
    let (n, mut writer) = replay(source, writer, progress)?;
    writer.finish().map_err(werr)?;
    Ok(n)
}

/// Writes the samples of `source` as Austin's text (as `mojo2austin` writes the MOJO file
/// [`write_from_hub`] makes) into `out`; returns the samples.
pub fn austin_from_hub<S: Source, W: io::Write>(
    source: &mut S,
    out: W,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, ConvertError<S::Error>> {
    let text = AustinText::new(AUSTIN_VERSION, out);
    let (n, sink) = replay(source, TextSink { text, events: 0 }, progress)?;
    sink.text.finish().map_err(|e| ConvertError::Encode(e.to_string()))?;
    Ok(n)
}
