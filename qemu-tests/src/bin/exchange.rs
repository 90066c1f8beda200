//! The cross-endian exchange matrix (run by `scripts/exchange.sh`). Each architecture writes
//! the same generated streams with the native-order writer, raw and zstd; each reads every
//! file every architecture wrote and checks the samples against the input; big-endian files
//! must equal CPython's s390x output and little-endian ones CPython's x86_64 output byte for
//! byte, and CPython's readers must decode what the PowerPC builds wrote.
//!
//! ```text
//! exchange docs DIR    (host) documents and the CPython manifests
//! exchange write DIR   (each architecture) DIR/ours-ARCH/NAME.{raw,zstd}.bin
//! exchange read DIR    (each architecture) checks every DIR/ours-*/ file; prints a line
//! exchange check DIR   (host) byte comparisons, CPython's decodes, the matrix table
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use qemu_tests::model::{model, per_thread, PerThread};
use qemu_tests::{compare_bytes, decode_to_json, gen, parse_jsonl};
use serde_json::Value;
use tachyon::tachyon::input::encode_document_native;
use tachyon_core::Compression;

const SEED: u64 = 0x7ac4_2026;
const ARCHES: [&str; 4] = ["x86_64", "s390x", "powerpc", "powerpc64"];
const MODES: [(&str, Compression); 2] = [("raw", Compression::None), ("zstd", Compression::Zstd)];

fn documents() -> Vec<(String, Value)> {
    let mut docs = Vec::new();
    for (name, doc) in gen::corpus(SEED) {
        for (mode, c) in MODES {
            let mut d = doc.clone();
            d["compression"] = Value::from(c.field());
            docs.push((format!("{name}.{mode}"), d));
        }
    }
    docs
}

fn list(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    v.sort();
    v
}

fn tsv(path: PathBuf, pairs: impl Iterator<Item = (PathBuf, PathBuf)>) {
    let text: String = pairs.map(|(a, b)| format!("{}\t{}\n", a.display(), b.display())).collect();
    std::fs::write(path, text).unwrap();
}

fn docs(dir: &Path) {
    let d = dir.join("docs");
    std::fs::create_dir_all(&d).unwrap();
    let all = documents();
    for (name, doc) in &all {
        std::fs::write(d.join(format!("{name}.json")), doc.to_string()).unwrap();
    }
    for arch in ["amd64", "s390x"] {
        std::fs::create_dir_all(dir.join(format!("cpython-{arch}"))).unwrap();
        tsv(
            dir.join(format!("write-{arch}.tsv")),
            all.iter().map(|(n, _)| (d.join(format!("{n}.json")), dir.join(format!("cpython-{arch}/{n}.bin")))),
        );
        // CPython's readers decode what the PowerPC builds wrote.
        let mut pairs = Vec::new();
        for writer in ["powerpc", "powerpc64"] {
            let out = dir.join(format!("cpython-reads-{arch}/{writer}"));
            std::fs::create_dir_all(&out).unwrap();
            for (n, _) in &all {
                pairs.push((dir.join(format!("ours-{writer}/{n}.bin")), out.join(format!("{n}.jsonl"))));
            }
        }
        tsv(dir.join(format!("dump-{arch}.tsv")), pairs.into_iter());
    }
    println!("{} documents in {}", all.len(), d.display());
}

fn write(dir: &Path) {
    let out = dir.join(format!("ours-{}", std::env::consts::ARCH));
    std::fs::create_dir_all(&out).unwrap();
    for (name, doc) in documents() {
        let bytes = encode_document_native(&doc, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        std::fs::write(out.join(format!("{name}.bin")), bytes).unwrap();
    }
}

fn read(dir: &Path) -> bool {
    // Each document's samples, worked out once for the four writers' files.
    let want: BTreeMap<String, PerThread> = documents().into_iter().map(|(name, doc)| (name, model(&doc))).collect();
    let me = std::env::consts::ARCH;
    let mut ok = true;
    for writer in ARCHES {
        let (mut files, mut samples, mut bad) = (0, 0, Vec::new());
        for path in list(&dir.join(format!("ours-{writer}"))) {
            let name = path.file_stem().unwrap().to_string_lossy().to_string();
            files += 1;
            match decode_to_json(&std::fs::read(&path).unwrap()) {
                Ok(view) if per_thread(&view) == want[&name] => samples += view.len() - 1,
                Ok(_) => bad.push(format!("{name}: samples differ from the input")),
                Err(e) => bad.push(format!("{name}: {e}")),
            }
        }
        println!("reader={me} writer={writer} files={files} samples={samples} mismatches={}", bad.len());
        for b in &bad {
            eprintln!("  {me} reading {writer}'s {b}");
        }
        ok &= bad.is_empty() && files == want.len();
    }
    ok
}

fn check(dir: &Path) -> bool {
    let docs: BTreeMap<String, Value> = documents().into_iter().collect();
    let mut failures = Vec::new();
    for writer in ARCHES {
        let cpython = if writer == "x86_64" { "amd64" } else { "s390x" };
        for name in docs.keys() {
            let ours = std::fs::read(dir.join(format!("ours-{writer}/{name}.bin"))).unwrap();
            let theirs = std::fs::read(dir.join(format!("cpython-{cpython}/{name}.bin"))).unwrap();
            failures.extend(
                compare_bytes(&format!("{name} written on {writer} vs CPython {cpython}"), &ours, &theirs).err(),
            );
        }
        println!("bytes: {writer} native files = CPython {cpython} files: {} documents", docs.len());
    }
    for arch in ["amd64", "s390x"] {
        for writer in ["powerpc", "powerpc64"] {
            let mut samples = 0;
            for (name, doc) in &docs {
                let p = dir.join(format!("cpython-reads-{arch}/{writer}/{name}.jsonl"));
                let view = parse_jsonl(&std::fs::read_to_string(&p).unwrap());
                if view.last().is_some_and(|l| l.get("error").is_some()) || per_thread(&view) != model(doc) {
                    failures.push(format!("CPython {arch} reading {writer}'s {name}: differs from the input"));
                } else {
                    samples += view.len() - 1;
                }
            }
            println!("CPython {arch} reader decoded {writer}'s {} files to the input ({samples} samples)", docs.len());
        }
    }
    for f in failures.iter().take(20) {
        eprintln!("{f}");
    }
    failures.is_empty()
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(cmd), Some(dir)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: exchange docs|write|read|check DIR");
        return ExitCode::from(2);
    };
    let dir = Path::new(dir);
    let ok = match cmd.as_str() {
        "docs" => {
            docs(dir);
            true
        }
        "write" => {
            write(dir);
            true
        }
        "read" => read(dir),
        "check" => check(dir),
        _ => {
            eprintln!("usage: exchange docs|write|read|check DIR");
            return ExitCode::from(2);
        }
    };
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
