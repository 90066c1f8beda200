//! MOJO events read as the text they stand for, without writing most of it (see
//! [`MojoProfiles`]).

use std::borrow::Cow;
use std::convert::Infallible;
use std::fmt;
use std::io::{self, Write};

use tachyon_core::mojo::{Event, Reader};

use super::profiles::*;
use crate::hash::IdMap;
use crate::mojo::austin::{self, AustinError, AustinText};

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
/// is read sample by sample into 2.4.0's text ([`austin::samples_text`]), which the
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
        let samples = austin::samples_text(&mut reader, &mut profiles).map_err(austin)?;
        profiles.finish(name, out).map_err(MojoSpeedscopeError::Speedscope)?;
        return Ok(samples);
    }
    let mut profiles = MojoProfiles::new(reader.version());
    loop {
        // Used where it was returned: a copy first costs more than the rest of some events.
        let next = reader.next_item();
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
        if self.line.is_none() && self.text.buf.len() >= austin::FLUSH_AT {
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
