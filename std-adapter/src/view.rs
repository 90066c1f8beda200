//! The JSON view CPython 3.15.2's reader gives of a file: `get_info()` as one object, then one
//! object per thread sample in replay order — the format of the shared vectors'
//! `*.expected.jsonl`. Names are decoded like CPython's `errors='replace'`.

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
