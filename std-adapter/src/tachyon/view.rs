//! The JSON view CPython 3.15.2's reader gives of a file: `get_info()` as one object, then one
//! object per thread sample in replay order — the format of the shared vectors'
//! `*.expected.jsonl`. Names are decoded like CPython's `errors='replace'`.

use std::io;

use serde_json::{json, Value};
use tachyon_core::reader::{Metadata, ResolvedFrame, Sample, Tables};

use crate::pyfmt::write_json_str;

/// `get_info()` of a file.
pub fn info(meta: &Metadata, string_count: usize, frame_count: usize) -> Value {
    let h = &meta.header;
    let stats = meta.stats;
    json!({
        "version": 1,
        "python_version": h.python_version,
        "start_time_us": h.start_time_us,
        "sample_interval_us": h.sample_interval_us,
        "sample_count": h.sample_count,
        "thread_count": h.thread_count,
        "string_count": string_count,
        "frame_count": frame_count,
        "compression_type": h.compression.field(),
        "duration_sec": stats.map(|s| s.duration_sec),
        "sample_rate": stats.map(|s| s.sample_rate),
        "error_rate": stats.and_then(|s| s.error_rate),
        "missed_samples": stats.and_then(|s| s.missed_samples),
        "mode": h.config.mode.map(|m| m.value()),
        "capture_features": h.config.capture_features.map(|c| c.bits()),
    })
}

/// One frame as `[filename, funcname, [lineno, end_lineno, col, end_col] | null, opcode | null]`.
pub fn frame(f: &ResolvedFrame<'_>) -> Value {
    Value::Array(vec![
        String::from_utf8_lossy(f.filename).into(),
        String::from_utf8_lossy(f.funcname).into(),
        f.location.map_or(Value::Null, |l| json!([l.lineno, l.end_lineno, l.col, l.end_col])),
        f.opcode.into(),
    ])
}

/// One thread sample as `{"ts","iid","tid","status","frames"}`.
pub fn sample(s: &Sample<'_>) -> Value {
    // Built directly: `json!` would serialise the frames' `Value`s into new ones.
    let fields = [
        ("ts", Value::from(s.timestamp_us)),
        ("iid", Value::from(s.interpreter_id)),
        ("tid", Value::from(s.thread_id)),
        ("status", Value::from(s.status)),
        ("frames", Value::Array(s.frames().map(|f| frame(&f)).collect())),
    ];
    Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// Writes one thread sample as the exact line CPython's reader gives through
/// `json.dumps({...}, separators=(",", ":"))`: keys `ts`, `iid`, `tid`, `status`, `frames`,
/// names decoded with `errors='replace'`. For many samples, [`SampleLines`] is faster.
pub fn write_sample_line(out: &mut impl io::Write, s: &Sample<'_>) -> io::Result<()> {
    SampleLines::default().write(out, s)
}

/// Writes sample lines like [`write_sample_line`], rendering each frame's JSON once and a
/// stack's once per stack: the samples of a REPEAT run share it ([`Self::set_stack`], then
/// [`Self::write_line`] per sample). Memory: one rendered frame per frame id used.
#[derive(Debug, Default)]
pub struct SampleLines {
    rendered: Vec<Option<Box<[u8]>>>,
    /// `[frame,...]}` and the newline: the end of every line of the current stack.
    tail: Vec<u8>,
}

impl SampleLines {
    /// Writes the line of `s`.
    pub fn write(&mut self, out: &mut impl io::Write, s: &Sample<'_>) -> io::Result<()> {
        self.set_stack(s.tables(), s.stack)?;
        self.write_line(out, s.timestamp_us, s.interpreter_id, s.thread_id, s.status)
    }

    /// Renders the frames of `stack` for the lines that follow.
    pub fn set_stack(&mut self, tables: &Tables<'_>, stack: &[u32]) -> io::Result<()> {
        self.tail.clear();
        self.tail.push(b'[');
        for (i, &id) in stack.iter().enumerate() {
            if i > 0 {
                self.tail.push(b',');
            }
            let slot = id as usize;
            if self.rendered.len() <= slot {
                self.rendered.resize(slot + 1, None);
            }
            if self.rendered[slot].is_none() {
                let mut text = Vec::new();
                if let Some(f) = tables.frame(id) {
                    write_frame(&mut text, &f)?;
                }
                self.rendered[slot] = Some(text.into_boxed_slice());
            }
            self.tail.extend_from_slice(self.rendered[slot].as_deref().unwrap_or_default());
        }
        self.tail.extend_from_slice(b"]}\n");
        Ok(())
    }

    /// Writes one line with the stack last set.
    pub fn write_line(
        &mut self,
        out: &mut impl io::Write,
        timestamp_us: u64,
        interpreter_id: u32,
        thread_id: u64,
        status: u8,
    ) -> io::Result<()> {
        let mut head = Digits::default();
        head.push(b"{\"ts\":");
        head.number(timestamp_us);
        head.push(b",\"iid\":");
        head.number(interpreter_id.into());
        head.push(b",\"tid\":");
        head.number(thread_id);
        head.push(b",\"status\":");
        head.number(status.into());
        head.push(b",\"frames\":");
        out.write_all(head.as_bytes())?;
        out.write_all(&self.tail)
    }
}

/// A line's head built on the stack: fixed text and decimal numbers (at most 4 × 20 digits
/// and 38 bytes of keys).
struct Digits {
    buf: [u8; 128],
    len: usize,
}

impl Default for Digits {
    fn default() -> Self {
        Digits { buf: [0; 128], len: 0 }
    }
}

impl Digits {
    fn push(&mut self, text: &[u8]) {
        self.buf[self.len..self.len + text.len()].copy_from_slice(text);
        self.len += text.len();
    }

    fn number(&mut self, mut v: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }

    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// `[filename, funcname, [lineno, end_lineno, col, end_col] | null, opcode | null]`.
fn write_frame(out: &mut impl io::Write, f: &ResolvedFrame<'_>) -> io::Result<()> {
    out.write_all(b"[")?;
    write_json_str(out, &String::from_utf8_lossy(f.filename))?;
    out.write_all(b",")?;
    write_json_str(out, &String::from_utf8_lossy(f.funcname))?;
    match f.location {
        Some(l) => write!(out, ",[{},{},{},{}]", l.lineno, l.end_lineno, l.col, l.end_col)?,
        None => out.write_all(b",null")?,
    }
    match f.opcode {
        Some(o) => write!(out, ",{o}]"),
        None => out.write_all(b",null]"),
    }
}
