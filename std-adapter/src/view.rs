//! The JSON view CPython 3.15.2's reader gives of a file: `get_info()` as one object, then one
//! object per thread sample in replay order — the format of the shared vectors'
//! `*.expected.jsonl`. Names are decoded like CPython's `errors='replace'`.

use std::io;

use serde_json::{json, Value};
use tachyon_core::reader::{Metadata, ResolvedFrame, Sample};

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
    json!([
        String::from_utf8_lossy(f.filename),
        String::from_utf8_lossy(f.funcname),
        f.location.map(|l| json!([l.lineno, l.end_lineno, l.col, l.end_col])),
        f.opcode,
    ])
}

/// One thread sample as `{"ts","iid","tid","status","frames"}`.
pub fn sample(s: &Sample<'_>) -> Value {
    json!({
        "ts": s.timestamp_us,
        "iid": s.interpreter_id,
        "tid": s.thread_id,
        "status": s.status,
        "frames": s.frames().map(|f| frame(&f)).collect::<Vec<_>>(),
    })
}

/// Writes `text` as Python's `json.dumps` does by default (`ensure_ascii`): printable ASCII
/// as is, `"` `\\` and the usual control characters as short escapes, everything else as
/// lowercase `\\uXXXX` (UTF-16 surrogate pairs beyond the BMP).
pub fn write_py_str(out: &mut impl io::Write, text: &str) -> io::Result<()> {
    out.write_all(b"\"")?;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        let short: Option<&[u8]> = match c {
            '"' => Some(b"\\\""),
            '\\' => Some(b"\\\\"),
            '\n' => Some(b"\\n"),
            '\r' => Some(b"\\r"),
            '\t' => Some(b"\\t"),
            '\u{8}' => Some(b"\\b"),
            '\u{c}' => Some(b"\\f"),
            ' '..='~' => continue,
            _ => None,
        };
        out.write_all(&text.as_bytes()[start..i])?;
        start = i + c.len_utf8();
        match short {
            Some(s) => out.write_all(s)?,
            None => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    write!(out, "\\u{u:04x}")?;
                }
            }
        }
    }
    out.write_all(&text.as_bytes()[start..])?;
    out.write_all(b"\"")
}

/// Writes one thread sample as the exact line CPython's reader gives through
/// `json.dumps({...}, separators=(",", ":"))`: keys `ts`, `iid`, `tid`, `status`, `frames`,
/// names decoded with `errors='replace'`. For many samples, [`SampleLines`] is faster.
pub fn write_sample_line(out: &mut impl io::Write, s: &Sample<'_>) -> io::Result<()> {
    SampleLines::default().write(out, s)
}

/// Writes sample lines like [`write_sample_line`], rendering each frame's JSON once and
/// copying it afterwards (memory: one rendered frame per frame id used).
#[derive(Debug, Default)]
pub struct SampleLines {
    rendered: Vec<Option<Box<[u8]>>>,
}

impl SampleLines {
    /// Writes the line of `s`.
    pub fn write(&mut self, out: &mut impl io::Write, s: &Sample<'_>) -> io::Result<()> {
        write!(
            out,
            "{{\"ts\":{},\"iid\":{},\"tid\":{},\"status\":{},\"frames\":[",
            s.timestamp_us, s.interpreter_id, s.thread_id, s.status
        )?;
        for (i, &id) in s.stack.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            let slot = id as usize;
            if self.rendered.len() <= slot {
                self.rendered.resize(slot + 1, None);
            }
            if self.rendered[slot].is_none() {
                let mut text = Vec::new();
                if let Some(f) = s.tables().frame(id) {
                    write_frame(&mut text, &f)?;
                }
                self.rendered[slot] = Some(text.into_boxed_slice());
            }
            out.write_all(self.rendered[slot].as_deref().unwrap_or_default())?;
        }
        out.write_all(b"]}\n")
    }
}

/// `[filename, funcname, [lineno, end_lineno, col, end_col] | null, opcode | null]`.
fn write_frame(out: &mut impl io::Write, f: &ResolvedFrame<'_>) -> io::Result<()> {
    out.write_all(b"[")?;
    write_py_str(out, &String::from_utf8_lossy(f.filename))?;
    out.write_all(b",")?;
    write_py_str(out, &String::from_utf8_lossy(f.funcname))?;
    match f.location {
        Some(l) => write!(out, ",[{},{},{},{}]", l.lineno, l.end_lineno, l.col, l.end_col)?,
        None => out.write_all(b",null")?,
    }
    match f.opcode {
        Some(o) => write!(out, ",{o}]"),
        None => out.write_all(b",null]"),
    }
}

#[cfg(test)]
mod tests {
    use super::write_py_str;

    fn py(s: &str) -> String {
        let mut v = Vec::new();
        write_py_str(&mut v, s).unwrap();
        String::from_utf8(v).unwrap()
    }

    /// Expected strings are what Python's `json.dumps` printed for the same input.
    #[test]
    fn escapes_like_python_json_dumps() {
        assert_eq!(py("plain /x.py"), r#""plain /x.py""#);
        assert_eq!(py("q\"b\\n\nr\rt\tb\u{8}f\u{c}"), r#""q\"b\\n\nr\rt\tb\bf\f""#);
        assert_eq!(py("\u{1}\u{7f}é€\u{fffd}"), r#""\u0001\u007f\u00e9\u20ac\ufffd""#);
        assert_eq!(py("日\u{1f600}"), r#""\u65e5\ud83d\ude00""#);
    }
}
