//! MOJO files Austin 3.7.0 and 4.0.0 record during the test command
//! (`qemu-tests/oracle/austin/record.sh`, directory `TACHYON_MOJO_PROFILES`) of Python 3.11
//! running our workloads in every mode (wall, cpu, memory, full, GC, threads, children
//! processes): our Austin text is byte for byte what austin-python 1.7.1's `mojo2austin` wrote
//! for each, every file re-encodes to its own bytes, and its version 1 and 2 re-encodings read
//! back to the same events but for the fields those versions lack. On those files and every
//! committed MOJO vector, our samples (`tachyon dump`) are austin-python 2.4.0's, dumped by
//! `oracle/austin/samples.py` during the recording. Which threads and processes a recording
//! sampled is asserted of the committed recordings only ([`qemu_tests::recordings`]).

use std::path::PathBuf;
use tachyon_test_kit::fixtures;

use tachyon::mojo::austin::austin_text;
use tachyon_core::io::Cursor;
use tachyon_core::mojo::{Event, Reader};

const MODES: [&str; 7] = ["wall", "cpu", "memory", "full", "gc", "threads", "children"];

/// Austin 3.7.0's files are named by mode, 4.0.0's `a40-` and the mode.
fn recorded_names() -> impl Iterator<Item = String> {
    ["", "a40-"].into_iter().flat_map(|prefix| MODES.map(|mode| format!("{prefix}{mode}")))
}

fn recorded() -> PathBuf {
    qemu_tests::recordings::fresh("TACHYON_MOJO_PROFILES")
}

fn events(file: &[u8]) -> Vec<Event<Vec<u8>>> {
    let mut window = vec![0u8; 1 << 16];
    let mut reader = Reader::open(Cursor::new(file), &mut window).unwrap();
    let mut out = Vec::new();
    while let Some((_, e)) = reader.next_item().unwrap() {
        out.push(e.map(<[u8]>::to_vec));
    }
    out
}

#[test]
fn austin_text_is_mojo2austins_and_files_reencode() {
    for name in recorded_names() {
        let name = name.as_str();
        let dir = recorded();
        let file = std::fs::read(dir.join(format!("{name}.mojo"))).unwrap();
        let want = std::fs::read(dir.join(format!("{name}.austin"))).unwrap();
        let mut text = Vec::new();
        austin_text(Cursor::new(&file[..]), &mut text).unwrap_or_else(|e| panic!("{name}: {e}"));
        if text != want {
            let (a, b) = (String::from_utf8_lossy(&text), String::from_utf8_lossy(&want));
            let line = a.lines().zip(b.lines()).position(|(x, y)| x != y);
            panic!("{name}: our Austin text differs from mojo2austin's at line {line:?}");
        }
        let mut again = Vec::new();
        tachyon::mojo::reencode(Cursor::new(&file[..]), &mut again, None).unwrap();
        assert!(again == file, "{name}: re-encoded bytes differ");

        let original = events(&file);
        for version in [1u8, 2] {
            let mut older = Vec::new();
            tachyon::mojo::reencode(Cursor::new(&file[..]), &mut older, Some(version)).unwrap();
            let expected: Vec<_> = original
                .iter()
                .cloned()
                .map(|e| match e {
                    Event::Stack { pid, tid, .. } => Event::Stack { pid, iid: 0, tid },
                    Event::Frame(mut d) if version == 1 => {
                        (d.line_end, d.column, d.column_end) = (0, 0, 0);
                        Event::Frame(d)
                    }
                    e => e,
                })
                .collect();
            assert_eq!(events(&older), expected, "{name} as version {version}");
        }
    }
}

#[test]
fn every_mode_left_its_marks() {
    for austin in ["3.7.0", "4.0.0"] {
        let prefix = if austin == "3.7.0" { "" } else { "a40-" };
        let text = |name: &str| std::fs::read_to_string(recorded().join(format!("{prefix}{name}.austin"))).unwrap();
        assert!(text("wall").starts_with(&format!("# austin: {austin}\n")));
        marks(&text);
    }
}

fn marks(text: &dyn Fn(&str) -> String) {
    assert!(text("wall").contains("# mode: wall"));
    assert!(text("cpu").contains("# mode: cpu"));
    assert!(text("memory").contains("# mode: memory"));
    // Full mode: time, idle and memory on every sample line.
    let full = text("full");
    assert!(full.lines().filter(|l| l.starts_with('P')).all(|l| l.rsplit(' ').next().unwrap().split(',').count() == 3));
    // With -g Austin reports the collector's time as metadata; whether a sample lands inside a
    // collection (`:GC:`) is chance (the committed gc vector has them).
    assert!(text("gc").contains("\n# gc: "));
}

/// What the committed recordings of Austin 4.0.0 hold: the threads workload sampled in
/// several threads, the children workload in several processes.
#[test]
fn the_committed_recordings_sampled_several_threads_and_processes() {
    let heads = |name: &str| {
        let file = std::fs::read(qemu_tests::recordings::committed("austin-4.0.0").join(name)).unwrap();
        let (mut pids, mut tids) = (std::collections::BTreeSet::new(), std::collections::BTreeSet::new());
        for e in events(&file) {
            if let Event::Stack { pid, tid, .. } = e {
                pids.insert(pid);
                tids.insert(tid);
            }
        }
        (pids.len(), tids.len())
    };
    assert!(heads("a40-threads.mojo").1 > 1, "several threads");
    assert!(heads("a40-children.mojo").0 > 1, "several processes");
}

/// A dump line as austin-python 2.4.0 has it: its samples leave out the INVALID and kernel
/// markers, and have idle null outside full mode and gc null without GC metadata (ours say
/// false).
fn as_2_4(mut line: serde_json::Value) -> serde_json::Value {
    if line["kind"] == "sample" {
        let frames =
            line["frames"].as_array().unwrap().iter().filter(|f| f.get("filename").is_some()).cloned().collect();
        line["frames"] = serde_json::Value::Array(frames);
    }
    line
}

fn null_as_false(mut line: serde_json::Value) -> serde_json::Value {
    for flag in ["idle", "gc"] {
        if line.get(flag) == Some(&serde_json::Value::Null) {
            line[flag] = serde_json::Value::Bool(false);
        }
    }
    line
}

/// Every recorded file and committed vector: `tachyon dump`'s lines are what austin-python
/// 2.4.0's reader yields, in its order (metadata between two samples before the first); where
/// that reader fails, so do we, after the same lines or fewer (a version 0 header, which it
/// misreads as version 2 for a while, we refuse at once).
#[test]
fn samples_are_austin_python_2_4s() {
    let dir = recorded();
    let vectors = fixtures::root().join("qemu-tests/vectors");
    let mut pairs: Vec<(PathBuf, PathBuf)> =
        recorded_names().map(|n| (dir.join(format!("{n}.mojo")), dir.join(format!("{n}.samples.jsonl")))).collect();
    let mut committed: Vec<_> = std::fs::read_dir(dir.join("vectors"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_str().is_some_and(|p| p.ends_with(".samples.jsonl")))
        .collect();
    committed.sort();
    for dump in committed {
        let name = dump.file_name().unwrap().to_str().unwrap().trim_end_matches(".samples.jsonl").replace("__", "/");
        pairs.push((vectors.join(name), dump));
    }
    assert!(pairs.len() >= 14 + 25, "recorded files and committed vectors: {}", pairs.len());
    // (Counted on the committed vectors: how many samples a recording holds is the machine's.)
    let (mut samples, mut failures) = (0, 0);
    for (mojo, dump) in pairs {
        let committed = !mojo.starts_with(&dir);
        let file = std::fs::read(&mojo).unwrap_or_else(|e| panic!("{}: {e}", mojo.display()));
        let mut want: Vec<serde_json::Value> = std::fs::read_to_string(&dump)
            .unwrap()
            .lines()
            .map(|l| null_as_false(serde_json::from_str(l).unwrap()))
            .collect();
        let theirs_failed = want.last().is_some_and(|l| l["kind"] == "error");
        if theirs_failed {
            want.pop();
        }
        let mut out = Vec::new();
        let ours = tachyon::mojo::dump(Cursor::new(&file[..]), &mut out);
        let got: Vec<serde_json::Value> =
            String::from_utf8(out).unwrap().lines().map(|l| as_2_4(serde_json::from_str(l).unwrap())).collect();
        let name = mojo.display();
        assert_eq!(ours.is_err(), theirs_failed, "{name}: ours {ours:?}");
        if theirs_failed {
            assert!(got.len() <= want.len(), "{name}");
            want.truncate(got.len());
        }
        assert_eq!(got.len(), want.len(), "{name}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "{name}: line {i}");
        }
        if committed {
            samples += want.iter().filter(|l| l["kind"] == "sample").count();
            failures += usize::from(theirs_failed);
        }
    }
    assert!(samples > 25_000, "{samples} samples of the committed vectors compared");
    assert!(failures >= 5, "{failures} committed vectors both readers refuse");
}

/// speedscope from every recorded file and every committed real vector (and its v1/v2
/// re-encodings) is byte for byte the JSON austin-python 1.7.1's `austin2speedscope` wrote of
/// `mojo2austin`'s text of it (`record.sh`), named as that text file is.
#[test]
fn speedscope_is_austin2speedscopes() {
    let dir = recorded();
    let vectors = fixtures::vectors("mojo-austin-3.7");
    let mut cases: Vec<(PathBuf, String, PathBuf)> = recorded_names()
        .map(|n| (dir.join(format!("{n}.mojo")), format!("{n}.austin"), dir.join(format!("{n}.speedscope.json"))))
        .collect();
    for name in [
        "a37_full_small_threads_py311",
        "a37_gc_small_py311",
        "a37_memory_small_py311",
        "a37_wall_simple_py311",
        "a37_wall_small_py311",
        "a37p_native_kernel_py311",
        "v1_from_a37_wall_simple",
        "v2_from_a37_wall_simple",
    ] {
        let mojo = if name.starts_with('v') {
            vectors.join(format!("derived/{name}.mojo"))
        } else {
            vectors.join(format!("{name}.mojo"))
        };
        cases.push((mojo, format!("{name}.austin"), dir.join(format!("vectors/{name}.speedscope.json"))));
    }
    // (Counted on the committed vectors: how many threads a recording sampled is the machine's.)
    let mut profiles = 0;
    for (mojo, title, json) in cases {
        let file = std::fs::read(&mojo).unwrap_or_else(|e| panic!("{}: {e}", mojo.display()));
        let want = std::fs::read(&json).unwrap_or_else(|e| panic!("{}: {e}", json.display()));
        let mut got = Vec::new();
        tachyon::mojo::speedscope::from_mojo(Cursor::new(&file[..]), &title, &mut got)
            .unwrap_or_else(|e| panic!("{}: {e}", mojo.display()));
        qemu_tests::compare_bytes(&format!("{}: speedscope", mojo.display()), &got, &want)
            .unwrap_or_else(|e| panic!("{e}"));
        let doc: serde_json::Value = serde_json::from_slice(&want).unwrap();
        if !mojo.starts_with(&dir) {
            profiles += doc["profiles"].as_array().unwrap().len();
        }
    }
    assert!(profiles >= 15, "{profiles} profiles of the committed vectors compared");
}
