//! The aggregate JSON-lines schema of CPython's `replay --jsonl` (its `jsonl_collector.py`
//! documents it): a `meta` line, `string_table`, `frame_table` and `agg` lines in chunks of
//! 256 entries, an `end` line. Ids are given in the order frames are first met (innermost
//! first within a sample; a frame's function name is interned before its file name); a frame
//! is its file, function and the location fields that are known (`end_line` > 0, `col` ≥ 0,
//! `end_col` ≥ 0), so frames differing only in opcode share an id.

use std::collections::HashMap;
use std::io::{self, Write};

use crate::hash::StringIndex;
use crate::model::{Call, Collector, FrameTable};
use crate::pyfmt::write_json_str;

const CHUNK: usize = 256;

/// Location fields as exported: `line`, then the optional ones.
type LocationFields = (i32, Option<i32>, Option<i32>, Option<i32>);

/// Builds the tables and per-frame counts.
#[derive(Debug, Default)]
pub struct JsonlCollector {
    /// Per table frame id: the exported frame id, once met.
    export_id: Vec<Option<u32>>,
    /// Exported frames: (path string, function string, location fields).
    frames: Vec<(u32, u32, LocationFields)>,
    frame_ids: HashMap<(u32, u32, LocationFields), u32>,
    strings: StringIndex,
    /// Per exported frame: (self, cumulative).
    counts: Vec<(u64, u64)>,
    seen: Vec<u64>,
    generation: u64,
    samples_total: u64,
}

impl Collector for JsonlCollector {
    fn collect(&mut self, frames: &FrameTable, s: &Call<'_>) {
        if s.stack.is_empty() {
            return;
        }
        let n = s.samples();
        if self.export_id.len() < frames.frames.len() {
            self.export_id.resize(frames.frames.len(), None);
        }
        self.samples_total += n;
        self.generation += 1;
        for (i, &id) in s.stack.iter().enumerate() {
            let f = self.frame_id(frames, id) as usize;
            if i == 0 {
                self.counts[f].0 += n;
            }
            if self.seen[f] != self.generation {
                self.seen[f] = self.generation;
                self.counts[f].1 += n;
            }
        }
    }
}

impl JsonlCollector {
    fn frame_id(&mut self, frames: &FrameTable, id: u32) -> u32 {
        if let Some(e) = self.export_id[id as usize] {
            return e;
        }
        let f = frames.frame(id);
        let loc = f.location.map_or((0, 0, -1, -1), |l| (l.lineno, l.end_lineno, l.col, l.end_col));
        let fields =
            (loc.0, (loc.1 > 0).then_some(loc.1), (loc.2 >= 0).then_some(loc.2), (loc.3 >= 0).then_some(loc.3));
        let func = self.strings.id(&f.funcname);
        let path = self.strings.id(frames.file_of(f));
        let key = (path, func, fields);
        let next = self.frames.len() as u32;
        let e = *self.frame_ids.entry(key).or_insert(next);
        if e == next {
            self.frames.push(key);
            self.counts.push((0, 0));
            self.seen.push(0);
        }
        self.export_id[id as usize] = Some(e);
        e
    }

    /// Writes the records; `run_id` tags every line (CPython uses a random UUID4 in hex).
    pub fn write(
        &self,
        sample_interval_us: u64,
        mode: Option<tachyon_core::header::ProfilingMode>,
        run_id: &str,
        out: &mut impl Write,
    ) -> io::Result<()> {
        let head = |kind: &str| format!("{{\"type\":\"{kind}\",\"v\":0,\"run_id\":\"{run_id}\"");
        write!(out, "{},\"sample_interval_usec\":{sample_interval_us}", head("meta"))?;
        if let Some(m) = mode {
            write!(out, ",\"mode\":\"{}\"", m.name())?;
        }
        out.write_all(b"}\n")?;
        for (c, chunk) in self.strings.strings().chunks(CHUNK).enumerate() {
            write!(out, "{},\"strings\":[", head("string_table"))?;
            for (i, s) in chunk.iter().enumerate() {
                let comma = if i > 0 { "," } else { "" };
                write!(out, "{comma}{{\"str_id\":{},\"value\":", c * CHUNK + i)?;
                write_json_str(out, s)?;
                out.write_all(b"}")?;
            }
            out.write_all(b"]}\n")?;
        }
        for (c, chunk) in self.frames.chunks(CHUNK).enumerate() {
            write!(out, "{},\"frames\":[", head("frame_table"))?;
            for (i, (path, func, (line, end_line, col, end_col))) in chunk.iter().enumerate() {
                let comma = if i > 0 { "," } else { "" };
                write!(
                    out,
                    "{comma}{{\"frame_id\":{},\"path_str_id\":{path},\"func_str_id\":{func},\"line\":{line}",
                    c * CHUNK + i
                )?;
                for (name, v) in [("end_line", end_line), ("col", col), ("end_col", end_col)] {
                    if let Some(v) = v {
                        write!(out, ",\"{name}\":{v}")?;
                    }
                }
                out.write_all(b"}")?;
            }
            out.write_all(b"]}\n")?;
        }
        for (c, chunk) in self.counts.chunks(CHUNK).enumerate() {
            write!(
                out,
                "{},\"kind\":\"frame\",\"scope\":\"final\",\"samples_total\":{},\"entries\":[",
                head("agg"),
                self.samples_total
            )?;
            for (i, (own, cumulative)) in chunk.iter().enumerate() {
                let comma = if i > 0 { "," } else { "" };
                write!(out, "{comma}{{\"frame_id\":{},\"self\":{own},\"cumulative\":{cumulative}}}", c * CHUNK + i)?;
            }
            out.write_all(b"]}\n")?;
        }
        writeln!(out, "{},\"samples_total\":{}}}", head("end"), self.samples_total)
    }
}

/// A random version-4 UUID in hex, from the standard library's randomly keyed hasher.
pub fn random_run_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let word = || {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
        h.finish()
    };
    let mut bits = (u128::from(word()) << 64) | u128::from(word());
    bits = (bits & !(0xf << 76)) | (0x4 << 76); // version 4
    bits = (bits & !(0x3 << 62)) | (0x2 << 62); // RFC 4122 variant
    format!("{bits:032x}")
}
