//! Austin's text read line by line as `austin2speedscope` reads it: the header's mode, each
//! sample line split into its thread, frames and metrics, numbers parsed as Python's `int`.

use std::borrow::Cow;
use std::io::{self, Write};

use super::profiles::*;

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
    pub(super) fn take_line(&mut self, line: &str, ended: bool) {
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
    pub(super) fn start(&mut self) {
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
    pub(super) fn sample(&mut self, line: &str) -> Result<(), SpeedscopeError> {
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
    pub(super) fn sample_of(
        &mut self,
        head: &str,
        frames: Frames<'_>,
        metrics: Metrics<'_>,
    ) -> Result<(), SpeedscopeError> {
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
    pub(super) fn frame(&mut self, piece: &str) -> Option<u32> {
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
    pub(super) fn stack(&mut self) -> u32 {
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
    pub(super) fn thread(&mut self, pid: &str, thread: &str) -> usize {
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
    pub(super) fn profile(&mut self, t: usize, pid: &str, thread: &str, metric: Metric) -> &mut Profile {
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
}

impl Profiles {
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
