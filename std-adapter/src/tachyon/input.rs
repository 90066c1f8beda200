//! CPython writer-input documents (the shared vectors' `*.input.json`): constructor
//! arguments, optional `stats`, and `samples`, one per `write_sample` call.
//!
//! Values are normalised exactly as CPython's `BinaryWriter` does (spec 5.1): location parts
//! truncated to int32 (anything that is not a signed 64-bit int becomes -1), opcodes outside
//! 0..=254 become "none", status keeps its low 8 bits, and an interpreter id above 2^32-1 is
//! a limit error that ends the call (earlier threads of the call stay written).

use std::borrow::Borrow;
use std::fmt;

use embedded_io::{Seek, Write};
use serde_json::Value;

use crate::memory::VecSink;
use crate::tachyon::storage::OwnedWriterStorage;
use tachyon_core::storage::{WriterCapacity, WriterStorage};
use tachyon_core::{
    CaptureFeatures, Compression, Endianity, Frame, Location, ProfilingConfig, ProfilingMode, Stats, WriteError,
    Writer, WriterConfig,
};

/// Why a document could not be written.
#[derive(Debug)]
pub enum InputError {
    /// The document does not have the expected shape.
    Shape(String),
    /// The writer refused something (not a limit).
    Write(String),
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputError::Shape(s) => write!(f, "bad writer input: {s}"),
            InputError::Write(s) => write!(f, "writer error: {s}"),
        }
    }
}

impl std::error::Error for InputError {}

fn shape(what: &str) -> InputError {
    InputError::Shape(what.to_string())
}

fn field<'a>(v: &'a Value, key: &str) -> Result<&'a Value, InputError> {
    v.get(key).ok_or_else(|| shape(&format!("missing \"{key}\"")))
}

fn u64_of(v: &Value, what: &str) -> Result<u64, InputError> {
    v.as_u64().ok_or_else(|| shape(&format!("\"{what}\" must be an integer in 0..2^64")))
}

fn array<'a>(v: &'a Value, what: &str) -> Result<&'a Vec<Value>, InputError> {
    v.as_array().ok_or_else(|| shape(&format!("\"{what}\" must be a list")))
}

/// A location part: signed 64-bit ints wrap to int32, anything else is -1.
fn location_part(v: &Value) -> i32 {
    v.as_i64().map_or(-1, |n| n as i32)
}

/// CPython's opcode rule: 0..=254 kept, everything else (255, huge, negative, null) none.
fn opcode(v: &Value) -> Option<u8> {
    v.as_i64().and_then(|n| u8::try_from(n).ok()).filter(|&n| n != 255)
}

/// The constructor arguments and stats of a document.
pub fn config(doc: &Value) -> Result<(WriterConfig, Option<Stats>), InputError> {
    let mut cfg = WriterConfig::new(
        u64_of(field(doc, "start_time_us")?, "start_time_us")?,
        u64_of(field(doc, "sample_interval_us")?, "sample_interval_us")?,
    );
    let int = |key: &str, default: i64| doc.get(key).and_then(Value::as_i64).unwrap_or(default);
    cfg.compression = Compression::from_field(int("compression", 0) as u32);
    let mode = int("mode", -1);
    let features = int("capture_features", -1);
    if !(-1..=4).contains(&mode) {
        return Err(shape("invalid profiling mode"));
    }
    if !(-1..=31).contains(&features) {
        return Err(shape("invalid capture features"));
    }
    cfg.profiling = ProfilingConfig {
        mode: ProfilingMode::from_value(mode),
        capture_features: u8::try_from(features).ok().and_then(CaptureFeatures::new),
    };
    let stats = match doc.get("stats") {
        None | Some(Value::Null) => None,
        Some(s) => {
            let s = array(s, "stats")?;
            let num = |i: usize| s.get(i).and_then(Value::as_f64);
            Some(Stats {
                duration_sec: num(0).ok_or_else(|| shape("stats[0]"))?,
                sample_rate: num(1).ok_or_else(|| shape("stats[1]"))?,
                error_rate: num(2),
                missed_samples: num(3),
            })
        }
    };
    Ok((cfg, stats))
}

/// Upper bounds of what a stream of calls interns, so storage can be sized before writing.
#[derive(Debug, Default, Clone, Copy)]
pub struct CapacityCount {
    string_bytes: usize,
    frames: usize,
    threads: usize,
}

impl CapacityCount {
    /// Counts one `write_sample` call.
    pub fn add_call(&mut self, s: &Value) {
        for it in s.get("interpreters").and_then(Value::as_array).into_iter().flatten() {
            for th in it.get("threads").and_then(Value::as_array).into_iter().flatten() {
                self.threads += 1;
                for f in th.get("frames").and_then(Value::as_array).into_iter().flatten().take(256) {
                    self.frames += 1;
                    for i in 0..2 {
                        self.string_bytes += f.get(i).and_then(Value::as_str).map_or(0, str::len);
                    }
                }
            }
        }
    }

    /// The capacities (CPython's REPEAT budget).
    pub fn capacity(&self) -> WriterCapacity {
        WriterCapacity {
            string_bytes: self.string_bytes.max(1),
            strings: (2 * self.frames).max(1),
            frames: self.frames.max(1),
            threads: self.threads.max(1),
            rle_budget: tachyon_core::records::CPYTHON_RLE_BUDGET,
        }
    }
}

/// Upper bounds of what the document interns.
pub fn capacity(doc: &Value) -> WriterCapacity {
    let mut count = CapacityCount::default();
    for s in doc.get("samples").and_then(Value::as_array).into_iter().flatten() {
        count.add_call(s);
    }
    count.capacity()
}

/// Writes every sample of the document; returns how many calls hit a limit.
pub fn write_samples<W: Write + Seek, E: Endianity>(
    doc: &Value,
    w: &mut Writer<'_, W, E>,
) -> Result<usize, InputError> {
    let mut limited = 0;
    for call in array(field(doc, "samples")?, "samples")? {
        limited += usize::from(write_call(call, w)?);
    }
    Ok(limited)
}

/// Writes one `write_sample` call (`{"ts", "interpreters"}`); true if it hit a limit, which
/// ends the call as in CPython.
pub fn write_call<W: Write + Seek, E: Endianity>(s: &Value, w: &mut Writer<'_, W, E>) -> Result<bool, InputError> {
    let ts = u64_of(field(s, "ts")?, "ts")?;
    for it in array(field(s, "interpreters")?, "interpreters")? {
        let Ok(iid) = u32::try_from(u64_of(field(it, "iid")?, "iid")?) else {
            // CPython: OverflowError with limit_reached; the rest of the call is skipped.
            return Ok(true);
        };
        for th in array(field(it, "threads")?, "threads")? {
            let tid = u64_of(field(th, "tid")?, "tid")?;
            let status = field(th, "status")?.as_i64().ok_or_else(|| shape("status"))? as u8;
            let raw = array(field(th, "frames")?, "frames")?;
            let mut frames = Vec::with_capacity(raw.len().min(256));
            for f in raw.iter().take(256) {
                let name = |i: usize| f.get(i).and_then(Value::as_str).ok_or_else(|| shape("frame name"));
                let location = match f.get(2) {
                    None | Some(Value::Null) => None,
                    Some(l) => {
                        let l = array(l, "location")?;
                        let part = |i: usize| l.get(i).map_or(-1, location_part);
                        Some(Location { lineno: part(0), end_lineno: part(1), col: part(2), end_col: part(3) })
                    }
                };
                let op = f.get(3).and_then(opcode);
                frames.push(Frame {
                    filename: name(0)?.as_bytes(),
                    funcname: name(1)?.as_bytes(),
                    location,
                    opcode: op,
                });
            }
            match w.write_thread_sample(ts, iid, tid, status, frames.iter().copied()) {
                Ok(()) => {}
                Err(e) if e.is_limit() => return Ok(true),
                Err(e) => return Err(InputError::Write(format!("{e:?}"))),
            }
        }
    }
    Ok(false)
}

/// Encodes a whole document into bytes in byte order `endian`, with `compression`
/// overriding the document's when given.
pub fn encode_document<E: Endianity>(
    doc: &Value,
    endian: E,
    compression: Option<Compression>,
) -> Result<Vec<u8>, InputError> {
    let calls = array(field(doc, "samples")?, "samples")?.iter().map(Ok);
    Ok(encode_stream(VecSink::new(), endian, doc, capacity(doc), compression, calls)?.into_inner())
}

/// Like [`encode_document`] through the native-order constructors (`Writer::new`,
/// with the storage's compressor for zstd): the file is in this machine's byte order, as CPython writes.
pub fn encode_document_native(doc: &Value, compression: Option<Compression>) -> Result<Vec<u8>, InputError> {
    let calls = array(field(doc, "samples")?, "samples")?.iter().map(Ok);
    let sink = encode_to(VecSink::new(), doc, capacity(doc), compression, calls, |sink, storage, cfg| {
        Writer::new(sink, storage, cfg)
    })?;
    Ok(sink.into_inner())
}

/// Encodes into any sink in byte order `endian`: `params` holds the constructor arguments and
/// stats (a document's `samples` are ignored here), `calls` the `write_sample` calls, which
/// may be streamed (JSON lines). Returns the sink.
pub fn encode_stream<W: Write + Seek, E: Endianity, V: Borrow<Value>>(
    sink: W,
    endian: E,
    params: &Value,
    cap: WriterCapacity,
    compression: Option<Compression>,
    calls: impl Iterator<Item = Result<V, InputError>>,
) -> Result<W, InputError>
where
    W::Error: fmt::Debug,
{
    encode_to(sink, params, cap, compression, calls, |sink, storage, cfg| {
        Writer::with_endian(sink, storage, cfg, endian)
    })
}

type Made<'s, W, E> = Result<Writer<'s, W, E>, WriteError<<W as embedded_io::ErrorType>::Error>>;

/// Sizes storage (with a compressor when the configuration asks for zstd), builds the writer
/// with `make`, writes every call and the stats, finalizes and returns the sink.
fn encode_to<W: Write + Seek, E: Endianity, V: Borrow<Value>>(
    sink: W,
    params: &Value,
    cap: WriterCapacity,
    compression: Option<Compression>,
    calls: impl Iterator<Item = Result<V, InputError>>,
    make: impl for<'s> FnOnce(W, WriterStorage<'s>, WriterConfig) -> Made<'s, W, E>,
) -> Result<W, InputError>
where
    W::Error: fmt::Debug,
{
    let (mut cfg, stats) = config(params)?;
    if let Some(c) = compression {
        cfg.compression = c;
    }
    let mut storage = OwnedWriterStorage::new(cap, cfg.compression).map_err(|e| InputError::Write(e.to_string()))?;
    let werr = |e: WriteError<W::Error>| InputError::Write(e.to_string());
    let mut w = make(sink, storage.storage(), cfg).map_err(werr)?;
    for call in calls {
        write_call(call?.borrow(), &mut w)?;
    }
    if let Some(s) = stats {
        w.set_stats(s).map_err(werr)?;
    }
    w.finish().map_err(werr)?;
    Ok(w.into_inner())
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tachyon_core::LittleEndian;

    use super::*;

    /// The reason a document is refused; panics if it is written instead.
    fn refusal(doc: Value) -> String {
        match encode_document(&doc, LittleEndian, None) {
            Err(InputError::Shape(why)) => why,
            other => panic!("{doc}: {other:?}"),
        }
    }

    fn document(samples: Value) -> Value {
        json!({"start_time_us": 1, "sample_interval_us": 100, "samples": samples})
    }

    #[test]
    fn documents_of_the_wrong_shape_are_refused_naming_what_is_wrong() {
        assert_eq!(refusal(json!({})), "missing \"samples\"");
        assert_eq!(refusal(json!({"samples": {}})), "\"samples\" must be a list");
        assert_eq!(refusal(json!({"samples": []})), "missing \"start_time_us\"");
        assert_eq!(
            refusal(json!({"start_time_us": -1, "sample_interval_us": 1, "samples": []})),
            "\"start_time_us\" must be an integer in 0..2^64"
        );
        assert_eq!(refusal(document(json!([{"ts": 1}]))), "missing \"interpreters\"");
        assert_eq!(refusal(document(json!([{"ts": 1.5, "interpreters": []}]))), "\"ts\" must be an integer in 0..2^64");
        let thread = |frames: Value| {
            document(json!([{"ts": 1, "interpreters": [{"iid": 0, "threads": [
            {"tid": 1, "status": 0, "frames": frames}]}]}]))
        };
        assert_eq!(refusal(thread(json!([["a.py"]]))), "frame name");
        assert_eq!(refusal(thread(json!([["a.py", 7]]))), "frame name");
        assert_eq!(refusal(thread(json!([["a.py", "f", "not a list"]]))), "\"location\" must be a list");
        assert_eq!(refusal(thread(json!("frames"))), "\"frames\" must be a list");
        let mut doc = thread(json!([]));
        doc["mode"] = json!(5);
        assert_eq!(refusal(doc), "invalid profiling mode");
    }

    #[test]
    fn a_refusal_in_a_later_sample_refuses_the_document() {
        let good = json!({"ts": 1, "interpreters": []});
        assert_eq!(refusal(document(json!([good, good, {"ts": 2}]))), "missing \"interpreters\"");
        assert!(encode_document(&document(json!([good, good])), LittleEndian, None).is_ok());
    }
}
