//! Differential tests against the real CPython 3.15.2, x86_64 natively and big-endian s390x
//! under qemu-user (set up by `scripts/oracle.sh`; this test fails, not skips, without it).
//!
//! Over seeded generated streams and the vector inputs:
//! 1. CPython writes (both architectures) → our reader yields exactly what CPython's readers
//!    yield (info and every sample, in order).
//! 2. Our writer (little- and big-endian) → the same bytes as CPython's, compressed and not;
//!    CPython's readers on both architectures decode our files to the input.

use std::path::{Path, PathBuf};
use std::process::Command;
use tachyon_test_kit::fixtures;

use qemu_tests::model::{model, per_thread};
use qemu_tests::{compare_bytes, compare_views, decode_to_json, gen, parse_jsonl, VECTORS};
use tachyon::tachyon::input::encode_document;
use tachyon_core::{BigEndian, LittleEndian};

const SEED: u64 = 0x7ac4_2026;
const ARCHES: [&str; 2] = ["amd64", "s390x"];

fn root() -> PathBuf {
    fixtures::root()
}

fn oracle_ready() {
    let dir = std::env::var_os("TACHYON_ORACLE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/tachyon-oracle"));
    assert!(dir.join("ready").exists(), "CPython oracle not set up in {}: run scripts/oracle.sh first", dir.display());
}

/// Runs `cpython_batch.py ACTION` over `pairs` on every architecture at once.
fn batch(action: &str, work: &Path, jobs: &[(&str, Vec<(PathBuf, PathBuf)>)]) {
    let script = root().join("qemu-tests/oracle/cpython_batch.py");
    let runner = root().join("scripts/oracle-python.sh");
    let children: Vec<_> = jobs
        .iter()
        .map(|(arch, pairs)| {
            let manifest = work.join(format!("{action}-{arch}.tsv"));
            let text: String = pairs.iter().map(|(a, b)| format!("{}\t{}\n", a.display(), b.display())).collect();
            std::fs::write(&manifest, text).unwrap();
            let child = Command::new(&runner).arg(arch).arg(&script).arg(action).arg(&manifest).spawn().unwrap();
            (arch.to_string(), child)
        })
        .collect();
    for (arch, child) in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "CPython {action} on {arch} failed");
    }
}

#[test]
fn differential_against_cpython_3_15_2() {
    oracle_ready();
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cpython-oracle");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();

    let mut docs = gen::corpus(SEED);
    docs.extend(VECTORS.iter().map(|v| (format!("vector_{}", v.name), serde_json::from_str(v.input).unwrap())));
    let path = |name: &str, what: &str| work.join(format!("{name}.{what}"));
    for (name, doc) in &docs {
        std::fs::write(path(name, "json"), doc.to_string()).unwrap();
    }

    // CPython writes every document on both architectures.
    let writes: Vec<(&str, Vec<(PathBuf, PathBuf)>)> = ARCHES
        .iter()
        .map(|&arch| {
            (arch, docs.iter().map(|(n, _)| (path(n, "json"), path(n, &format!("cpython-{arch}.bin")))).collect())
        })
        .collect();
    batch("write", &work, &writes);

    // Our writer in both byte orders: the same bytes as CPython's.
    let mut failures = Vec::new();
    for (name, doc) in &docs {
        for (arch, ours) in [
            ("amd64", encode_document(doc, LittleEndian, None).unwrap()),
            ("s390x", encode_document(doc, BigEndian, None).unwrap()),
        ] {
            let theirs = std::fs::read(path(name, &format!("cpython-{arch}.bin"))).unwrap();
            failures.extend(compare_bytes(&format!("{name} (ours vs CPython {arch})"), &ours, &theirs).err());
            std::fs::write(path(name, &format!("ours-{arch}.bin")), ours).unwrap();
        }
    }

    // Both CPython readers decode CPython's files and ours.
    let files = ["cpython-amd64", "cpython-s390x", "ours-amd64", "ours-s390x"];
    let dumps: Vec<(&str, Vec<(PathBuf, PathBuf)>)> = ARCHES
        .iter()
        .map(|&arch| {
            let pairs = docs
                .iter()
                .flat_map(|(n, _)| files.iter().map(move |f| (n.clone(), *f)))
                .map(|(n, f)| (path(&n, &format!("{f}.bin")), path(&n, &format!("{f}.read-by-{arch}.jsonl"))))
                .collect();
            (arch, pairs)
        })
        .collect();
    batch("dump", &work, &dumps);

    let mut samples_checked = 0usize;
    for (name, doc) in &docs {
        let want_model = model(doc);
        for file in files {
            let bin = std::fs::read(path(name, &format!("{file}.bin"))).unwrap();
            let ours = decode_to_json(&bin);
            for arch in ARCHES {
                let what = format!("{name}: {file} read by CPython {arch}");
                let theirs =
                    parse_jsonl(&std::fs::read_to_string(path(name, &format!("{file}.read-by-{arch}.jsonl"))).unwrap());
                if let Some(err) = theirs.last().and_then(|l| l.get("error")) {
                    failures.push(format!("{what}: CPython error {err}"));
                    continue;
                }
                // 1. Our reader yields what CPython's reader yields.
                match &ours {
                    Ok(got) => failures.extend(compare_views(&format!("{what} vs our reader"), got, &theirs).err()),
                    Err(e) => failures.push(format!("{what}: our reader failed: {e}")),
                }
                // 2. CPython decodes the file to the input.
                if per_thread(&theirs) != want_model {
                    failures.push(format!("{what}: samples differ from the input"));
                }
                samples_checked += theirs.len() - 1;
            }
        }
    }
    println!("{} documents, {samples_checked} samples compared, {} failures", docs.len(), failures.len());
    assert!(failures.is_empty(), "{}", failures.iter().take(20).cloned().collect::<Vec<_>>().join("\n"));
}

/// Real profiles: the committed fixtures, plus those the test command records in this run
/// (`TACHYON_REAL_PROFILES`). Both CPython readers and ours must agree on every sample.
#[test]
fn real_profiles_decode_like_cpython() {
    oracle_ready();
    let mut files: Vec<PathBuf> = Vec::new();
    let mut dirs = vec![root().join("qemu-tests/fixtures/real-3.15.2")];
    dirs.extend(std::env::var_os("TACHYON_REAL_PROFILES").map(PathBuf::from));
    for dir in &dirs {
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "pyb"))
            .collect();
        assert!(!found.is_empty(), "no profiles in {}", dir.display());
        found.sort();
        files.extend(found);
    }
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cpython-real");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let out = |i: usize, arch: &str| work.join(format!("{i}.read-by-{arch}.jsonl"));
    let jobs: Vec<(&str, Vec<(PathBuf, PathBuf)>)> = ARCHES
        .iter()
        .map(|&arch| (arch, files.iter().enumerate().map(|(i, f)| (f.clone(), out(i, arch))).collect()))
        .collect();
    batch("dump", &work, &jobs);
    let mut failures = Vec::new();
    let mut samples = 0;
    for (i, file) in files.iter().enumerate() {
        let ours = decode_to_json(&std::fs::read(file).unwrap());
        for arch in ARCHES {
            let what = format!("{} read by CPython {arch}", file.display());
            let theirs = parse_jsonl(&std::fs::read_to_string(out(i, arch)).unwrap());
            match &ours {
                Ok(got) => failures.extend(compare_views(&what, got, &theirs).err()),
                Err(e) => failures.push(format!("{what}: our reader failed: {e}")),
            }
            samples += theirs.len() - 1;
        }
    }
    println!("{} real profiles, {samples} samples compared, {} failures", files.len(), failures.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A valid file with 40,000 threads of one sample each: CPython's reader, whose thread
/// lookup grows with the thread count (0.04 s for 10,000 threads, 0.57 s for 40,000, more than
/// fifteen minutes for a million on this project's machine), and ours, whose thread table
/// grows with use (a million take 0.25 s and 77 MB, see core's `runs` test), give the same
/// samples.
#[test]
fn many_threads_decode_like_cpython() {
    oracle_ready();
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cpython-many-threads");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let file = work.join("threads.bin");
    let bytes = gen::many_threads(40_000);
    std::fs::write(&file, &bytes).unwrap();
    let out = work.join("threads.read-by-amd64.jsonl");
    batch("dump", &work, &[("amd64", vec![(file.clone(), out.clone())])]);
    let theirs = parse_jsonl(&std::fs::read_to_string(&out).unwrap());
    assert_eq!(theirs.len(), 40_001, "CPython's info line and every sample");
    let ours = decode_to_json(&bytes).expect("our reader");
    compare_views("40,000 threads", &ours, &theirs).unwrap();
}
