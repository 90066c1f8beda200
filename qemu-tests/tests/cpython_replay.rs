//! Conversions against CPython 3.15.2's own `profiling.sampling replay` (x86_64 oracle from
//! `scripts/oracle.sh`; fails, never skips, without it), over the shared vectors in both byte
//! orders, the committed real profiles, those the test command records
//! (`TACHYON_REAL_PROFILES`) and seeded generated streams:
//!
//! - re-encoding (`--to tachyon`, same order and compression) gives CPython's files back byte
//!   for byte, and every thread's samples of the generated ones;
//! - collapsed stacks byte for byte, and `tachyon top`'s own and total samples per function
//!   as CPython's collapsed stacks give them;
//! - the pstats table `replay` prints, for every sort order, with limits and without summary;
//! - `--jsonl` byte for byte (given CPython's run id);
//! - `--flamegraph`: our page's tree has CPython's page's nodes with the same numbers, per
//!   thread too (`qemu_tests::flame`);
//! - `--gecko` with the same JSON content, number types included (`1` is not `1.0`), except the
//!   fields describing the converting process;
//! - pstats files: same dictionary as CPython's, and `pstats.Stats` loads and prints them like
//!   CPython's under Python 3.15; the `--pstats-compat` files load under Python 3.11.

use std::path::Path;
use std::process::Command;

use qemu_tests::inputs::{
    convert_file as ours, cpython_replay, inputs, jsonl_run_id, oracle_ready, reencode_file, replay_table as table,
    root, TEXT_VARIANTS,
};
use qemu_tests::model::per_thread;
use qemu_tests::top;
use qemu_tests::{compare_bytes, decode_to_json};
use serde_json::Value;
use tachyon::convert::Output;

const SEED: u64 = 0x5e9_1a7;

/// A Firefox profile without the fields that describe the converting process (its clock,
/// CPU count and pid), which differ between any two runs of CPython too.
fn gecko_content(bytes: &[u8]) -> Value {
    let mut v: Value = serde_json::from_slice(bytes).expect("gecko output is JSON");
    for key in ["startTime", "physicalCPUs", "logicalCPUs"] {
        v["meta"][key] = Value::Null;
    }
    for t in v["threads"].as_array_mut().expect("threads") {
        t["pid"] = Value::Null;
    }
    v
}

/// `Err` naming the first path where `got` and `want` differ (numbers compared with their
/// JSON type: `1` is not `1.0`).
fn same_json(path: &str, got: &Value, want: &Value) -> Result<(), String> {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => {
            let gk: Vec<&String> = g.keys().collect();
            let wk: Vec<&String> = w.keys().collect();
            if gk != wk {
                return Err(format!("{path}: keys {gk:?}, want {wk:?}"));
            }
            g.iter().try_for_each(|(k, v)| same_json(&format!("{path}.{k}"), v, &w[k]))
        }
        (Value::Array(g), Value::Array(w)) => {
            if g.len() != w.len() {
                return Err(format!("{path}: {} items, want {}", g.len(), w.len()));
            }
            g.iter().zip(w).enumerate().try_for_each(|(i, (a, b))| same_json(&format!("{path}[{i}]"), a, b))
        }
        _ if got == want => Ok(()),
        _ => Err(format!("{path}: {got}, want {want}")),
    }
}

fn run_python(program: &Path, args: &[&Path]) -> std::process::Output {
    Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{}: {e}", program.display()))
}

#[test]
fn conversions_match_cpython_replay() {
    oracle_ready();
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cpython-replay");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let files = inputs(&work, SEED);
    let outdir = |i: usize| work.join(format!("out-{i}"));
    let jobs: Vec<_> = files.iter().enumerate().map(|(i, f)| (f.clone(), outdir(i))).collect();
    cpython_replay(&work, &jobs);

    let mut failures: Vec<String> = Vec::new();
    let mut checked = 0;
    let mut reencoded_identical = 0;
    let mut pstats_rows = String::new();
    let mut flame_nodes = 0;
    for (i, file) in files.iter().enumerate() {
        let dir = outdir(i);
        let name = file.display();
        // Re-encoding: CPython's own files come back byte for byte. Generated streams may hold
        // threads whose first sample had an empty stack (their first record is a deferred
        // REPEAT, so the file does not record when they were created, which orders the final
        // flush): there every thread's samples must come back, in order.
        let original = std::fs::read(file).unwrap();
        checked += 1;
        match reencode_file(file) {
            Ok(again) if again == original => reencoded_identical += 1,
            Ok(again) if file.starts_with(&work) => {
                let (a, b) = (decode_to_json(&again), decode_to_json(&original));
                match (a, b) {
                    (Ok(a), Ok(b)) if a[0] == b[0] && per_thread(&a) == per_thread(&b) => {}
                    _ => failures.push(format!("{name}: re-encoded samples differ per thread")),
                }
            }
            Ok(again) => failures.extend(compare_bytes(&format!("{name} re-encoded"), &again, &original).err()),
            Err(e) => failures.push(format!("{name}: re-encoding failed: {e}")),
        }
        let cpython_failed = |what: &str| dir.join(format!("error-{what}.txt")).exists();
        // `tachyon top`: each function's own and total samples, as CPython's collapsed stacks
        // give them (generated streams may give two files one base name, which collapsed
        // stacks merge; the real files and vectors do not).
        if !cpython_failed("collapsed") && !file.starts_with(&work) {
            checked += 1;
            let theirs = top::from_collapsed(&std::fs::read_to_string(dir.join("collapsed.txt")).unwrap());
            match top::from_top(file) {
                Ok(got) => failures.extend(top::compare(&format!("{name} top"), &got, &theirs).err()),
                Err(e) => failures.push(format!("{name} top: {e}")),
            }
        }
        let mut check = |what: &str, got: Result<Vec<u8>, String>, want: &dyn Fn() -> Vec<u8>| {
            checked += 1;
            match (got, cpython_failed(what)) {
                (Err(_), true) => {}
                (Err(e), false) => failures.push(format!("{name} {what}: ours failed where CPython did not: {e}")),
                (Ok(_), true) => failures.push(format!("{name} {what}: CPython failed, ours did not")),
                (Ok(g), false) => failures.extend(compare_bytes(&format!("{name} {what}"), &g, &want()).err()),
            }
        };
        check("collapsed", ours(file, &Output::Collapsed), &|| std::fs::read(dir.join("collapsed.txt")).unwrap());
        for (variant, sort, limit, summary) in TEXT_VARIANTS {
            let what = format!("text-{variant}");
            let format = Output::PstatsText { sort, limit, summary };
            check(&what, ours(file, &format), &|| {
                table(&std::fs::read_to_string(dir.join(format!("{what}.txt"))).unwrap()).into_bytes()
            });
        }
        let cpython_jsonl = std::fs::read_to_string(dir.join("jsonl.jsonl")).unwrap_or_default();
        let run_id = jsonl_run_id(&cpython_jsonl);
        check("jsonl", ours(file, &Output::Jsonl { run_id }), &|| cpython_jsonl.clone().into_bytes());

        checked += 1;
        match (ours(file, &Output::Gecko), cpython_failed("gecko")) {
            (Ok(g), false) => {
                let want = std::fs::read(dir.join("gecko.json")).unwrap();
                if let Err(e) = same_json("", &gecko_content(&g), &gecko_content(&want)) {
                    failures.push(format!("{name} gecko: {e}"));
                }
            }
            (Err(_), true) => {}
            (got, _) => failures.push(format!(
                "{name} gecko: ours {:?}, CPython failed: {}",
                got.err(),
                cpython_failed("gecko")
            )),
        }

        checked += 1;
        let page = ours(file, &Output::FlamegraphHtml { title: "flame graph".into() });
        match (page, cpython_failed("flamegraph")) {
            (Ok(page), false) => {
                let theirs = std::fs::read_to_string(dir.join("flamegraph-tree.jsonl")).unwrap();
                match qemu_tests::flame::compare(&String::from_utf8(page).unwrap(), &theirs) {
                    Ok(n) => flame_nodes += n,
                    Err(e) => failures.push(format!("{name} flamegraph-html: {e}")),
                }
            }
            (Err(_), true) => {}
            (got, _) => failures.push(format!(
                "{name} flamegraph-html: ours {:?}, CPython failed: {}",
                got.err(),
                cpython_failed("flamegraph")
            )),
        }

        let got = ours(file, &Output::Pstats { compat: false });
        let compat = ours(file, &Output::Pstats { compat: true });
        if let (Ok(got), Ok(compat), false) = (&got, &compat, cpython_failed("pstats")) {
            std::fs::write(dir.join("ours.marshal"), got).unwrap();
            std::fs::write(dir.join("ours-compat.marshal"), compat).unwrap();
            let cols = [dir.join("pstats.marshal"), dir.join("ours.marshal"), dir.join("ours-compat.marshal")];
            pstats_rows += &format!("{}\t{}\t{}\n", cols[0].display(), cols[1].display(), cols[2].display());
        } else if got.is_ok() == cpython_failed("pstats") {
            failures.push(format!("{name} pstats: ours and CPython disagree on failing"));
        }
    }
    let pstats_manifest = work.join("pstats.tsv");
    std::fs::write(&pstats_manifest, pstats_rows).unwrap();
    let script = root().join("qemu-tests/oracle/pstats_compare.py");
    let py315 = run_python(&root().join("scripts/oracle-python.sh"), &[Path::new("amd64"), &script, &pstats_manifest]);
    let py311 = run_python(Path::new("python3.11"), &[&script, &pstats_manifest]);
    for (label, out) in [("3.15", py315), ("3.11", py311)] {
        let report = String::from_utf8_lossy(&out.stdout);
        eprintln!("pstats under Python {label}: {}", report.lines().last().unwrap_or(""));
        if !out.status.success() {
            failures.push(format!("pstats under Python {label}:\n{report}{}", String::from_utf8_lossy(&out.stderr)));
        }
    }
    eprintln!("{} files, {checked} conversions compared with CPython's replay", files.len());
    eprintln!("{reencoded_identical} files re-encoded byte for byte");
    eprintln!("{flame_nodes} flame graph nodes equal to CPython's");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// `tachyon diff --html` against CPython's `replay --diff-flamegraph BASE NEW` on pairs of the
/// replay inputs and the long recordings (each file against the next, and the real
/// recordings against themselves):
/// the same refusals (profiles of different modes), and where CPython draws a page, ours has
/// its tree node for node with the same differential numbers (baseline, baseline_total,
/// diff, diff_pct) and the same tree of the paths only the baseline has
/// (`qemu_tests::flame::compare_diff`).
#[test]
fn diff_pages_match_cpython() {
    oracle_ready();
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cpython-diff");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let mut files = inputs(&work, SEED);
    let short = files.len();
    let mut pairs: Vec<(usize, usize)> = (1..short).map(|i| (i - 1, i)).collect();
    pairs.extend((0..short).filter(|&i| !files[i].starts_with(&work)).map(|i| (i, i)));
    // The long recordings (CPython takes seconds over each, 20 s of CPU for the deep pair) in
    // one pair each: raw against zstd of one workload.
    let long = std::env::var_os("TACHYON_LONG_PROFILES").expect("TACHYON_LONG_PROFILES (set by scripts/test-all.sh)");
    files.extend(qemu_tests::inputs::files_in(Path::new(&long), "pyb"));
    pairs.extend((short..files.len()).step_by(2).filter(|&i| i + 1 < files.len()).map(|i| (i, i + 1)));
    let out = |k: usize| work.join(format!("diff-{k}.jsonl"));
    let manifest: String = pairs
        .iter()
        .enumerate()
        .map(|(k, &(a, b))| format!("{}\t{}\t{}\n", files[a].display(), files[b].display(), out(k).display()))
        .collect();
    std::fs::write(work.join("diff.tsv"), manifest).unwrap();
    let status = Command::new(root().join("scripts/oracle-python.sh"))
        .arg("amd64")
        .arg(root().join("qemu-tests/oracle/flame_tree.py"))
        .arg("--diff")
        .arg(work.join("diff.tsv"))
        .status()
        .unwrap();
    assert!(status.success(), "CPython replay --diff-flamegraph (flame_tree.py --diff)");
    let trees: Vec<_> = files.iter().map(|f| qemu_tests::inputs::profiled_file(f)).collect();
    let (mut failures, mut nodes, mut refused, mut pages) = (Vec::new(), 0, 0, 0);
    for (k, &(a, b)) in pairs.iter().enumerate() {
        let name = format!("{} → {}", files[a].display(), files[b].display());
        let (Ok(base), Ok(new)) = (&trees[a], &trees[b]) else {
            continue;
        };
        let theirs = std::fs::read_to_string(out(k)).unwrap();
        let mut page = Vec::new();
        let ours = tachyon::html::diff::write_diff(base, new, "diff", &mut page);
        match (ours, qemu_tests::flame::compare_diff(&String::from_utf8_lossy(&page), &theirs)) {
            (Err(tachyon::html::diff::DiffError::Modes { .. }), Err(e)) if e.contains("mode does not match") => {
                refused += 1
            }
            (Err(tachyon::html::diff::DiffError::Features(names)), Err(e))
                if e.ends_with(&format!("configuration: {}\"", names.join(", "))) =>
            {
                refused += 1
            }
            (Ok(()), Ok(n)) => {
                nodes += n;
                pages += 1;
            }
            (Ok(()), Err(e)) => failures.push(format!("{name}: {e}")),
            (Err(e), _) => failures.push(format!("{name}: ours refused ({e}), CPython did not")),
        }
    }
    eprintln!("{pages} differential pages ({nodes} nodes) as CPython's; {refused} pairs refused by both");
    assert!(pages >= 40 && refused >= 1, "{pages} pages, {refused} refused");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// `--to heatmap` against CPython's `replay --heatmap` on every replay input and the long
/// recordings (`TACHYON_LONG_PROFILES`): the same source files in the same order, with the
/// same totals and per-line self and total samples (`qemu_tests::flame::compare_heatmap`).
#[test]
fn heatmaps_match_cpython() {
    oracle_ready();
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cpython-heatmap");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let mut files = inputs(&work, SEED);
    let long = std::env::var_os("TACHYON_LONG_PROFILES").expect("TACHYON_LONG_PROFILES (set by scripts/test-all.sh)");
    files.extend(qemu_tests::inputs::files_in(Path::new(&long), "pyb"));
    let out = |k: usize| work.join(format!("heatmap-{k}.jsonl"));
    let manifest: String =
        files.iter().enumerate().map(|(k, f)| format!("{}\t{}\n", f.display(), out(k).display())).collect();
    std::fs::write(work.join("heatmap.tsv"), manifest).unwrap();
    let status = Command::new(root().join("scripts/oracle-python.sh"))
        .arg("amd64")
        .arg(root().join("qemu-tests/oracle/flame_tree.py"))
        .arg("--heatmap")
        .arg(work.join("heatmap.tsv"))
        .status()
        .unwrap();
    assert!(status.success(), "CPython replay --heatmap (flame_tree.py --heatmap)");
    let (mut failures, mut lines, mut compared) = (Vec::new(), 0, 0);
    for (k, file) in files.iter().enumerate() {
        let dir = work.join(format!("ours-{k}"));
        let heatmap = Output::Heatmap { title: "heatmap".into(), source_roots: Vec::new() };
        let mut src = tachyon::file::FileSource::open(file).unwrap();
        let Ok(meta) = tachyon_core::reader::Metadata::read(&mut src) else { continue };
        let Ok(mut storage) = tachyon::tachyon::storage::OwnedReaderStorage::for_metadata(&meta, Default::default())
        else {
            continue;
        };
        let Ok(mut reader) = storage.open_file(src) else { continue };
        let mut source = tachyon::tachyon::source::TachyonSource::new(&mut reader);
        let converted =
            tachyon::convert::convert(&mut source, &heatmap, tachyon::convert::Destination::File(&dir), &mut |_| {});
        let theirs = std::fs::read_to_string(out(k)).unwrap();
        match converted {
            Ok(_) => match qemu_tests::flame::compare_heatmap(&dir, &theirs) {
                Ok(n) => {
                    lines += n;
                    compared += 1;
                }
                Err(e) => failures.push(format!("{}: {e}", file.display())),
            },
            Err(e) if theirs.trim() == "null" => {
                eprintln!("{}: both refused ({e})", file.display())
            }
            Err(e) => failures.push(format!("{}: ours failed: {e}", file.display())),
        }
    }
    eprintln!("{compared} heatmaps ({lines} lines) as CPython's");
    assert!(compared >= 60, "only {compared} heatmaps compared");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// The long real profiles the test command records for the benchmark
/// (`make_real_profiles.sh --long`, `TACHYON_LONG_PROFILES`: 300k+ samples each, RLE-heavy and
/// deep, raw and zstd): collapsed stacks byte for byte as CPython's `replay --collapsed`
/// (through the reading the command does, zstd decompressed in a second thread), the flame
/// graph page's tree node for node as CPython's `replay --flamegraph` page's, and
/// re-encoding gives the files back byte for byte (zstd compressed in a second thread).
#[test]
fn long_real_profiles_match_cpython() {
    oracle_ready();
    let dir = std::env::var_os("TACHYON_LONG_PROFILES")
        .expect("TACHYON_LONG_PROFILES: run qemu-tests/oracle/make_real_profiles.sh --long DIR (as root) and set it");
    let files = qemu_tests::inputs::files_in(Path::new(&dir), "pyb");
    assert!(files.len() >= 4, "the long set has four profiles");
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cpython-long");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let mut failures = Vec::new();
    let mut identical = 0;
    // CPython's flame graphs, in one process (flame_tree.py keeps them in the oracle memo).
    let flame_manifest = work.join("flame.tsv");
    let tree_of = |i: usize| work.join(format!("{i}.flame.jsonl"));
    let lines: String =
        files.iter().enumerate().map(|(i, f)| format!("{}\t{}\n", f.display(), tree_of(i).display())).collect();
    std::fs::write(&flame_manifest, lines).unwrap();
    let status = Command::new(root().join("scripts/oracle-python.sh"))
        .arg("amd64")
        .arg(root().join("qemu-tests/oracle/flame_tree.py"))
        .arg(&flame_manifest)
        .status()
        .unwrap();
    assert!(status.success(), "CPython replay --flamegraph (flame_tree.py)");
    let mut flame_nodes = 0;
    for (i, file) in files.iter().enumerate() {
        let name = file.display();
        match ours(file, &Output::FlamegraphHtml { title: "flame graph".into() }) {
            Ok(page) => {
                let theirs = std::fs::read_to_string(tree_of(i)).unwrap();
                match qemu_tests::flame::compare(&String::from_utf8(page).unwrap(), &theirs) {
                    Ok(n) => flame_nodes += n,
                    Err(e) => failures.push(format!("{name} flamegraph-html: {e}")),
                }
            }
            Err(e) => failures.push(format!("{name}: flamegraph-html failed: {e}")),
        }
        let theirs = work.join(format!("{i}.collapsed.txt"));
        let status = Command::new(root().join("scripts/oracle-python.sh"))
            .args(["amd64", "-m", "profiling.sampling", "replay", "--collapsed", "-o"])
            .arg(&theirs)
            .arg(file)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "CPython replay --collapsed {name}");
        match ours(file, &Output::Collapsed) {
            Ok(got) => failures
                .extend(compare_bytes(&format!("{name} collapsed"), &got, &std::fs::read(&theirs).unwrap()).err()),
            Err(e) => failures.push(format!("{name}: collapsed failed: {e}")),
        }
        // Re-encoding gives the file back byte for byte, unless a thread's first record is a
        // REPEAT (its first samples had an empty stack, so the file does not say when the
        // writer met it, which orders the final flush): then every thread's samples.
        let original = std::fs::read(file).unwrap();
        match reencode_file(file) {
            Ok(again) if again == original => identical += 1,
            Ok(again) if starts_a_thread_with_a_run(&original) => {
                let (a, b) = (decode_to_json(&again), decode_to_json(&original));
                match (a, b) {
                    (Ok(a), Ok(b)) if a[0] == b[0] && per_thread(&a) == per_thread(&b) => {}
                    _ => failures.push(format!("{name}: re-encoded samples differ per thread")),
                }
            }
            Ok(again) => failures.extend(compare_bytes(&format!("{name} re-encoded"), &again, &original).err()),
            Err(e) => failures.push(format!("{name}: re-encoding failed: {e}")),
        }
    }
    eprintln!(
        "{} long profiles compared, {identical} re-encoded byte for byte, {flame_nodes} flame graph nodes equal",
        files.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Whether some thread's first record is a REPEAT record.
fn starts_a_thread_with_a_run(file: &[u8]) -> bool {
    use tachyon_core::reader::Record;
    let meta = tachyon_core::reader::Metadata::read(&mut tachyon_core::io::Cursor::new(file)).unwrap();
    let mut storage = tachyon::tachyon::storage::OwnedReaderStorage::for_metadata(
        &meta,
        tachyon::tachyon::storage::Limits::default(),
    )
    .unwrap();
    let mut reader = storage.open(tachyon_core::io::Cursor::new(file)).unwrap();
    let mut seen = std::collections::HashSet::new();
    while let Some(record) = reader.next_item().unwrap() {
        let (key, run) = match record {
            Record::Sample(s) => ((s.thread_id, s.interpreter_id), false),
            Record::Repeat(r) => ((r.thread_id, r.interpreter_id), true),
        };
        if seen.insert(key) && run {
            return true;
        }
    }
    false
}
