//! Shared helpers for the conformance suite: the CPython 3.15.2 vectors compiled into the
//! test binary (so the suite runs the same under qemu-user), decoding to CPython's JSON
//! view, and diffs that name the first differing byte or sample.
//!
//! ## Module map
//! * [`gen`]: seeded writer-input documents; [`model`]: what a reader must return for one.
//! * [`gperftools_oracle`]: what the real gperftools readers printed, parsed.
//! * [`flame`]: our flame graph pages' trees against CPython's.
//! * `inputs` (feature `oracle`): the files the conversion tests run over; [`recordings`]: the
//!   real tools' recordings, made on this machine (fresh) or committed, and what each may be
//!   asked.
//! * The test kit every crate's tests share (a memory limit for a test or a command, the
//!   fixtures, the round-trip model) is the `tachyon-test-kit` crate in `qemu-tests/kit/`.

pub mod flame;
pub mod gen;
pub mod gperftools_oracle;
#[cfg(feature = "oracle")]
pub mod inputs;
pub mod model;
pub mod recordings;
pub mod top;

use serde_json::Value;
use tachyon::tachyon::storage::{Limits, OwnedReaderStorage};
use tachyon_core::io::Cursor;
use tachyon_core::reader::Metadata;

/// One vector: name, writer input, CPython's decoded view, and the two files CPython wrote.
pub struct Vector {
    /// `NN_name`.
    pub name: &'static str,
    /// `.input.json`.
    pub input: &'static str,
    /// `.expected.jsonl`.
    pub expected: &'static str,
    /// Written natively on x86_64 (little-endian).
    pub x86_64: &'static [u8],
    /// Written on s390x (big-endian).
    pub s390x: &'static [u8],
}

macro_rules! vectors {
    ($($name:literal),* $(,)?) => {
        /// All vectors written by CPython 3.15.2 (see `vectors/cpython-3.15.2/README.md`).
        pub const VECTORS: &[Vector] = &[$(Vector {
            name: $name,
            input: include_str!(concat!("../vectors/cpython-3.15.2/", $name, ".input.json")),
            expected: include_str!(concat!("../vectors/cpython-3.15.2/", $name, ".expected.jsonl")),
            x86_64: include_bytes!(concat!("../vectors/cpython-3.15.2/", $name, ".x86_64.bin")),
            s390x: include_bytes!(concat!("../vectors/cpython-3.15.2/", $name, ".s390x.bin")),
        }),*];
    };
}

vectors!(
    "01_single_sample",
    "02_repeat_run",
    "03_suffix",
    "04_pop_push",
    "05_two_threads",
    "06_two_interpreters",
    "07_none_location",
    "08_opcodes",
    "09_zstd",
    "10_stats_mode",
    "11_empty",
    "12_empty_and_deep_stack",
    "13_time_edges",
    "14_zstd_empty",
);

/// `Err` naming the first differing byte, or `Ok`.
pub fn compare_bytes(what: &str, got: &[u8], want: &[u8]) -> Result<(), String> {
    if got == want {
        return Ok(());
    }
    let first = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
    let show = |b: &[u8]| b.iter().skip(first).take(8).map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(" ");
    Err(format!(
        "{what}: first difference at byte {first} (got {} bytes, want {}): got [{}], want [{}]",
        got.len(),
        want.len(),
        show(got),
        show(want)
    ))
}

/// Decodes a file into CPython's JSON view: `get_info()` then one value per thread sample.
pub fn decode_to_json(file: &[u8]) -> Result<Vec<Value>, String> {
    let meta = Metadata::read(&mut Cursor::new(file)).map_err(|e| e.to_string())?;
    let mut storage = OwnedReaderStorage::for_metadata(&meta, Limits::default()).map_err(|e| e.to_string())?;
    let mut reader = storage.open(Cursor::new(file)).map_err(|e| e.to_string())?;
    let tables = reader.tables();
    let mut out = vec![tachyon::tachyon::view::info(reader.metadata(), tables.string_count(), tables.frame_count())];
    while let Some(s) = reader.next_sample().map_err(|e| e.to_string())? {
        out.push(tachyon::tachyon::view::sample(&s));
    }
    Ok(out)
}

/// Parses a JSON-lines text.
pub fn parse_jsonl(text: &str) -> Vec<Value> {
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).expect("valid JSON line")).collect()
}

/// `Err` naming the first differing line (0 = info, then samples), or `Ok`.
pub fn compare_views(what: &str, got: &[Value], want: &[Value]) -> Result<(), String> {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g != w {
            let kind = if i == 0 { "info".to_string() } else { format!("sample {}", i - 1) };
            return Err(format!("{what}: first difference at {kind}:\n  got  {g}\n  want {w}"));
        }
    }
    if got.len() != want.len() {
        return Err(format!("{what}: {} lines decoded, {} expected", got.len(), want.len()));
    }
    Ok(())
}
