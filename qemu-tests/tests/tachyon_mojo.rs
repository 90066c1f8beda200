//! Tachyon → MOJO, read by the real austin-python 2.4.0, and back to Tachyon, read by the
//! real CPython 3.15.2: on every Tachyon input of the conversion tests (the CPython vectors
//! in both byte orders, the committed and freshly recorded real profiles, seeded generated
//! streams), `tachyon convert --to mojo` writes a file 2.4.0's `MojoStreamReader` reads, and
//! it yields the samples CPython's own reader yields for the Tachyon file, mapped as
//! `std-adapter/src/mojo/write.rs` documents; `--to austin` is austin-python 1.7.1's
//! `mojo2austin` text of that MOJO file; and the MOJO file converted back to Tachyon holds,
//! for CPython, every sample and frame the mapping keeps.
//!
//! The expected values are made here from CPython's dump of the input and the mapping, never
//! from our reader.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use qemu_tests::inputs::{convert_file, cpython_dump, inputs, oracle_ready, root};
use serde_json::{json, Value};
use tachyon::convert::{convert, Destination, Output};
use tachyon::file::FileSource;
use tachyon::mojo::source::{MojoMetric, MojoSource};

/// The frames CPython's tools hide (the profiler's own), which every output leaves out.
fn hidden(frame: &Value) -> bool {
    frame[0].as_str().is_some_and(|f| f.ends_with("_sync_coordinator.py"))
}

/// A pseudo frame without a location: `(file, function)`.
fn pseudo(frame: &Value, file: &str, function: Option<&str>) -> bool {
    frame[0] == file
        && frame[2].is_null()
        && match function {
            Some(f) => frame[1] == f,
            None => true,
        }
}

/// The time from `prev` to `ts`, µs, within ±2^63 (MOJO's metrics are signed 64-bit).
fn delta(ts: u64, prev: u64) -> i64 {
    (i128::from(ts) - i128::from(prev)).clamp(i64::MIN.into(), i64::MAX.into()) as i64
}

/// CPython's dump: its info line and its samples.
fn read_dump(path: &Path) -> (Value, Vec<Value>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap());
    let info = lines.next().expect("an info line");
    let samples: Vec<Value> = lines.collect();
    for s in &samples {
        assert!(s.get("error").is_none(), "{}: {s}", path.display());
    }
    (info, samples)
}

/// What austin-python 2.4.0 should yield for the MOJO file made of CPython's samples: the
/// metadata and the samples.
fn expected_mojo(info: &Value, samples: &[Value]) -> (Vec<Value>, Vec<Value>) {
    let start = info["start_time_us"].as_u64().unwrap();
    let pid = samples.first().map(|s| s["tid"].as_u64().unwrap());
    let mut last: HashMap<(u64, u64), u64> = HashMap::new();
    let mut out = Vec::new();
    let mut end = None::<u64>;
    for s in samples {
        let (iid, tid, ts) = (s["iid"].as_u64().unwrap(), s["tid"].as_u64().unwrap(), s["ts"].as_u64().unwrap());
        let prev = last.insert((iid, tid), ts).unwrap_or(start);
        end = Some(end.map_or(ts, |e| e.max(ts)));
        let mut frames: Vec<&Value> = s["frames"].as_array().unwrap().iter().filter(|f| !hidden(f)).collect();
        let gc = frames.first().is_some_and(|f| pseudo(f, "~", Some("<GC>")));
        if gc {
            frames.remove(0);
        }
        // 2.4.0's samples leave out the INVALID and kernel markers.
        frames.retain(|f| !pseudo(f, "~", Some("<invalid>")) && !pseudo(f, "kernel", None));
        let from_one = |v: &Value| v.as_i64().filter(|&c| c >= 0).map_or(0, |c| c + 1);
        let frames: Vec<Value> = frames
            .iter()
            .rev()
            .map(|f| {
                let loc = &f[2];
                let known = |i: usize| loc[i].as_i64().map_or(0, |v| v.max(0));
                json!({
                    "filename": f[0], "scope": f[1], "line": known(0), "line_end": known(1),
                    "column": if loc.is_null() { 0 } else { from_one(&loc[2]) },
                    "column_end": if loc.is_null() { 0 } else { from_one(&loc[3]) },
                })
            })
            .collect();
        out.push(json!({
            "kind": "sample", "pid": pid, "iid": iid, "tid": format!("{tid:x}"), "frames": frames,
            "time": delta(ts, prev), "memory": null, "idle": null,
            "gc": if gc { json!(true) } else { Value::Null }, "running_task": null,
        }));
    }
    let meta = |key: &str, value: String| json!({"kind": "metadata", "key": key, "value": value});
    let mode = if info["mode"] == 1 { "cpu" } else { "wall" };
    let mut metadata = vec![meta("interval", info["sample_interval_us"].to_string()), meta("mode", mode.into())];
    if let Some(end) = end {
        metadata.push(meta("duration", end.saturating_sub(start).to_string()));
    }
    (metadata, out)
}

/// What CPython should read back from the Tachyon file made of the MOJO file: each
/// thread's samples, at the sum of the thread's times since the start, with the frames
/// MOJO keeps (no opcode; an unknown location is line 0 without columns; an unknown last
/// line is the first; negative values are unknown).
fn expected_round_trip(info: &Value, samples: &[Value]) -> BTreeMap<(u64, u64), Vec<Value>> {
    let start = info["start_time_us"].as_u64().unwrap();
    let status = if info["mode"] == 1 { 2 } else { 0 };
    let mut last: HashMap<(u64, u64), u64> = HashMap::new();
    let mut clocks: HashMap<(u64, u64), u64> = HashMap::new();
    let mut out: BTreeMap<(u64, u64), Vec<Value>> = BTreeMap::new();
    for s in samples {
        let (iid, tid, ts) = (s["iid"].as_u64().unwrap(), s["tid"].as_u64().unwrap(), s["ts"].as_u64().unwrap());
        let prev = last.insert((iid, tid), ts).unwrap_or(start);
        let delta = delta(ts, prev);
        let clock = clocks.entry((iid, tid)).or_insert(0);
        *clock = clock.saturating_add_signed(delta);
        let frames: Vec<Value> = s["frames"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| !hidden(f))
            .map(|f| {
                let special =
                    pseudo(f, "~", Some("<GC>")) || pseudo(f, "~", Some("<invalid>")) || pseudo(f, "kernel", None);
                let loc = &f[2];
                let location = if special {
                    Value::Null
                } else if loc.is_null() {
                    json!([0, 0, -1, -1])
                } else {
                    let line = loc[0].as_i64().unwrap().max(0);
                    let end = loc[1].as_i64().unwrap();
                    let known = |i: usize| Some(loc[i].as_i64().unwrap()).filter(|&c| c >= 0);
                    // A Tachyon file stores the last column as a delta from the first: an
                    // unknown one reads back as the first (spec, frame table).
                    let (col, end_col) = match (known(2), known(3)) {
                        (None, _) => (-1, -1),
                        (Some(c), e) => (c, e.unwrap_or(c)),
                    };
                    json!([line, if end > 0 { end } else { line }, col, end_col])
                };
                json!([f[0], f[1], location, null])
            })
            .collect();
        out.entry((iid, tid)).or_default().push(json!({
            "ts": *clock, "iid": iid, "tid": tid, "status": status, "frames": frames,
        }));
    }
    out
}

/// Samples by thread, in order.
fn by_thread(samples: &[Value]) -> BTreeMap<(u64, u64), Vec<Value>> {
    let mut threads: BTreeMap<(u64, u64), Vec<Value>> = BTreeMap::new();
    for s in samples {
        threads.entry((s["iid"].as_u64().unwrap(), s["tid"].as_u64().unwrap())).or_default().push(s.clone());
    }
    threads
}

/// The virtual environments of `qemu-tests/oracle/austin/record.sh`.
fn austin_dir() -> PathBuf {
    std::env::var_os("TACHYON_AUSTIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/tachyon-austin"))
}

#[test]
fn tachyon_to_mojo_reads_in_austin_python_as_in_cpython_and_comes_back() {
    oracle_ready();
    let austin = austin_dir();
    let python24 = austin.join("austin-python-2.4/bin/python");
    let python17 = austin.join("austin-3.7/bin/python");
    assert!(python24.exists() && python17.exists(), "run qemu-tests/oracle/austin/record.sh first");
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tachyon-mojo");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let files = inputs(&work, 0x5eed_1111);
    assert!(files.len() >= 60, "{} inputs", files.len());

    // Tachyon → MOJO (and Austin's text), then MOJO → Tachyon.
    let mut dumps = Vec::new();
    let (mut austin_jobs, mut mojo2austin_jobs) = (String::new(), String::new());
    for (i, file) in files.iter().enumerate() {
        let mojo = work.join(format!("{i}.mojo"));
        let bytes = convert_file(file, &Output::Mojo { version: None })
            .unwrap_or_else(|e| panic!("{}: --to mojo: {e}", file.display()));
        std::fs::write(&mojo, bytes).unwrap();
        let text =
            convert_file(file, &Output::Austin).unwrap_or_else(|e| panic!("{}: --to austin: {e}", file.display()));
        std::fs::write(work.join(format!("{i}.ours.austin")), text).unwrap();
        austin_jobs.push_str(&format!("{}\t{}\n", mojo.display(), work.join(format!("{i}.samples.jsonl")).display()));
        mojo2austin_jobs.push_str(&format!(
            "{}\t{}\n",
            mojo.display(),
            work.join(format!("{i}.theirs.austin")).display()
        ));
        let mut source = MojoSource::open(FileSource::open(&mojo).unwrap(), MojoMetric::Default);
        let back = work.join(format!("{i}.back.pyb"));
        convert(
            &mut source,
            &Output::Tachyon { big_endian: None, compression: None },
            Destination::File(&back),
            &mut |_| {},
        )
        .unwrap_or_else(|e| panic!("{}: back to Tachyon: {e}", file.display()));
        dumps.push((file.clone(), work.join(format!("{i}.jsonl"))));
        dumps.push((back, work.join(format!("{i}.back.jsonl"))));
    }
    cpython_dump(&work, "dump", &dumps);
    std::fs::write(work.join("austin.tsv"), austin_jobs).unwrap();
    let status = Command::new(&python24)
        .arg(root().join("qemu-tests/oracle/austin/samples.py"))
        .args(["--batch".as_ref(), work.join("austin.tsv").as_os_str()])
        .status()
        .unwrap();
    assert!(status.success(), "austin-python 2.4.0's reader driver failed");
    // austin-python 1.7.1's mojo2austin over every MOJO file, in one process.
    std::fs::write(work.join("mojo2austin.tsv"), mojo2austin_jobs).unwrap();
    let status = Command::new(&python17)
        .arg(root().join("qemu-tests/oracle/austin/mojo2austin_batch.py"))
        .arg(work.join("mojo2austin.tsv"))
        .status()
        .unwrap();
    assert!(status.success(), "mojo2austin failed");

    let mut compared = 0usize;
    for (i, file) in files.iter().enumerate() {
        let name = file.display();
        let (info, samples) = read_dump(&work.join(format!("{i}.jsonl")));
        assert!(info.get("error").is_none(), "{name}: CPython cannot read the input: {info}");

        // What 2.4.0 reads equals CPython's samples, mapped.
        let (want_meta, want) = expected_mojo(&info, &samples);
        let got_text = std::fs::read_to_string(work.join(format!("{i}.samples.jsonl"))).unwrap();
        let got: Vec<Value> = got_text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        if let Some(e) = got.iter().find(|l| l["kind"] == "error") {
            panic!("{name}: austin-python 2.4.0 fails on our MOJO file: {e}");
        }
        let got_meta: Vec<&Value> = got.iter().filter(|l| l["kind"] == "metadata").collect();
        assert_eq!(got_meta, want_meta.iter().collect::<Vec<_>>(), "{name}: metadata");
        let got: Vec<&Value> = got.iter().filter(|l| l["kind"] == "sample").collect();
        assert_eq!(got.len(), want.len(), "{name}: samples");
        for (j, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(*g, w, "{name}: sample {j}");
        }
        compared += want.len();

        // Our Austin text is mojo2austin's of our MOJO file.
        let theirs = work.join(format!("{i}.theirs.austin"));
        let ours = std::fs::read(work.join(format!("{i}.ours.austin"))).unwrap();
        qemu_tests::compare_bytes(&format!("{name}: --to austin"), &ours, &std::fs::read(&theirs).unwrap())
            .unwrap_or_else(|e| panic!("{e}"));

        // Back in Tachyon, CPython reads every sample the mapping keeps.
        let (back_info, back) = read_dump(&work.join(format!("{i}.back.jsonl")));
        assert!(back_info.get("error").is_none(), "{name}: CPython cannot read the round trip: {back_info}");
        assert_eq!(back_info["sample_interval_us"], info["sample_interval_us"], "{name}: interval");
        let (got, want) = (by_thread(&back), expected_round_trip(&info, &samples));
        assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "{name}: threads");
        for (thread, w) in &want {
            assert_eq!(got[thread].len(), w.len(), "{name}: thread {thread:?}");
            for (j, (g, w)) in got[thread].iter().zip(w).enumerate() {
                assert_eq!(g, w, "{name}: round trip, thread {thread:?}, sample {j}");
            }
        }
    }
    assert!(compared > 100_000, "{compared} samples");
}
