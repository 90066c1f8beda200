//! MOJO → Tachyon, read by the real CPython 3.15.2: on every MOJO file the test command
//! records (`TACHYON_MOJO_PROFILES`) and every committed real one, `tachyon convert --to
//! tachyon` writes a file CPython's `BinaryReader` reads, and it yields the samples
//! austin-python 2.4.0's reader yields for the MOJO file (dumped by `record.sh`), mapped as
//! `std-adapter/src/mojo/source.rs` documents: the tid read as hex into the thread id, the
//! iid into the interpreter id, frames innermost first with CPython's spans (Austin's
//! columns count from 1, 0 unknown; an unknown last line is the first), a `~:<GC>` frame innermost in a collection, status on
//! CPU in cpu mode and in full mode unless idle, and each sample at its thread's clock: the
//! sum of the thread's time metrics up to its own (memory profiles: of the `interval`). 2.4.0's
//! samples leave out the INVALID and kernel markers, so those frames are left out of
//! CPython's before comparing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use qemu_tests::inputs::{cpython_dump, oracle_ready, root};
use serde_json::{json, Value};
use tachyon::convert::{convert, Destination, Output};
use tachyon::file::FileSource;
use tachyon::mojo::source::{MojoMetric, MojoSource};

/// `(MOJO file, 2.4.0's samples of it)`: the recorded files and the committed real ones.
fn files() -> Vec<(PathBuf, PathBuf)> {
    let dir = qemu_tests::recordings::fresh("TACHYON_MOJO_PROFILES");
    let mut out: Vec<(PathBuf, PathBuf)> = qemu_tests::inputs::files_in(&dir, "mojo")
        .into_iter()
        .map(|m| (m.clone(), m.with_extension("samples.jsonl")))
        .collect();
    let vectors = root().join("qemu-tests/vectors/mojo-austin-3.7");
    for m in qemu_tests::inputs::files_in(&vectors, "mojo") {
        let name = m.file_name().unwrap().to_str().unwrap().to_owned();
        out.push((m, dir.join(format!("vectors/mojo-austin-3.7__{name}.samples.jsonl"))));
    }
    out
}

/// What CPython's reader should yield for 2.4.0's samples of a file, by the mapping.
fn expected(dump: &str) -> (Vec<Value>, u64) {
    let lines: Vec<Value> = dump.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let meta =
        |key: &str| lines.iter().rev().find(|l| l["kind"] == "metadata" && l["key"] == key).map(|l| l["value"].clone());
    let mode = meta("mode").and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
    let interval: u64 = meta("interval").and_then(|v| v.as_str().and_then(|s| s.parse().ok())).unwrap_or(0);
    let mut clocks: HashMap<(u64, u64, String), u64> = HashMap::new();
    let mut out = Vec::new();
    for s in lines.iter().filter(|l| l["kind"] == "sample") {
        let tid = s["tid"].as_str().unwrap();
        let key = (s["pid"].as_u64().unwrap(), s["iid"].as_u64().unwrap_or(0), tid.to_owned());
        let clock = clocks.entry(key).or_insert(0);
        *clock = match s["time"].as_i64() {
            Some(t) => clock.saturating_add_signed(t),
            None => *clock + interval,
        };
        let ts = *clock;
        // The mapping: values beyond what CPython's C int holds saturate.
        let held = |v: i64| v.min(i64::from(i32::MAX));
        let known = |v: &Value, less: i64| match v.as_i64() {
            None | Some(0) => -1,
            Some(v) => held(v - less),
        };
        let mut frames: Vec<Value> = s["frames"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .map(|f| {
                let line = held(f["line"].as_i64().unwrap());
                let end = match f["line_end"].as_i64() {
                    None | Some(0) => line,
                    Some(end) => held(end),
                };
                let span = json!([line, end, known(&f["column"], 1), known(&f["column_end"], 1)]);
                json!([f["filename"], f["scope"], span, null])
            })
            .collect();
        if s["gc"] == true {
            frames.insert(0, json!(["~", "<GC>", null, null]));
        }
        let on_cpu = mode == "cpu" || (mode == "full" && s["idle"] != true);
        out.push(json!({
            "ts": ts,
            "iid": s["iid"].as_u64().unwrap_or(0),
            "tid": u64::from_str_radix(tid, 16).unwrap(),
            "status": if on_cpu { 2 } else { 0 },
            "frames": frames,
        }));
    }
    (out, interval)
}

#[test]
fn mojo_to_tachyon_reads_back_in_cpython_as_austin_python_reads_the_mojo() {
    oracle_ready();
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mojo-tachyon");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let files = files();
    assert!(files.len() >= 14 + 6, "{} files", files.len());
    let mut dumps = Vec::new();
    for (i, (mojo, _)) in files.iter().enumerate() {
        let mut source = MojoSource::open(FileSource::open(mojo).unwrap(), MojoMetric::Default);
        let out = work.join(format!("{i}.pyb"));
        let output = Output::Tachyon { big_endian: None, compression: None };
        convert(&mut source, &output, Destination::File(&out), &mut |_| {})
            .unwrap_or_else(|e| panic!("{}: {e}", mojo.display()));
        dumps.push((out, work.join(format!("{i}.jsonl"))));
    }
    cpython_dump(&work, "dump", &dumps);
    // (Counted on the committed files: how many samples a recording holds is the machine's.)
    let mut compared = 0;
    let vectors = root().join("qemu-tests/vectors");
    for (i, (mojo, dump)) in files.iter().enumerate() {
        let name = mojo.display();
        let (want, interval) = expected(&std::fs::read_to_string(dump).unwrap());
        let text = std::fs::read_to_string(work.join(format!("{i}.jsonl"))).unwrap();
        let mut lines = text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap());
        let info = lines.next().unwrap();
        assert!(info.get("error").is_none(), "{name}: {info}");
        assert_eq!(info["sample_count"], json!(want.len()), "{name}: {info}");
        assert_eq!(info["sample_interval_us"], json!(interval), "{name}: {info}");
        let got: Vec<Value> = lines
            .map(|mut s| {
                // 2.4.0's samples have no INVALID or kernel markers.
                let frames = s["frames"].as_array().unwrap().iter().filter(|f| f[1] != "<invalid>" && f[0] != "kernel");
                s["frames"] = Value::Array(frames.cloned().collect());
                s
            })
            .collect();
        assert_eq!(got.len(), want.len(), "{name}");
        // CPython's replay order is per thread (runs of a thread's samples are written
        // together): compare each thread's samples in order.
        let by_thread = |samples: &[Value]| {
            let mut threads: std::collections::BTreeMap<(u64, u64), Vec<Value>> = Default::default();
            for s in samples {
                threads.entry((s["iid"].as_u64().unwrap(), s["tid"].as_u64().unwrap())).or_default().push(s.clone());
            }
            threads
        };
        let (got, want) = (by_thread(&got), by_thread(&want));
        assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "{name}: threads");
        for (thread, w) in &want {
            for (j, (g, w)) in got[thread].iter().zip(w).enumerate() {
                assert_eq!(g, w, "{name}: thread {thread:?}, sample {j}");
            }
            if mojo.starts_with(&vectors) {
                compared += w.len();
            }
        }
    }
    assert!(compared > 4_000, "{compared} samples of the committed files");
}
