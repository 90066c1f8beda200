//! Every saved crash (`regressions/<target>/*`) and every committed seed, run through the
//! function its fuzz target runs, without libFuzzer: a crash found once fails this test until
//! the reader is fixed, and stays here afterwards. Both run in a child process under an
//! address-space limit of [`LIMIT`], as libFuzzer's `-malloc_limit_mb` bounds the fuzz runs
//! (`scripts/fuzz.sh`), so an input found for allocating out of proportion stays a failure
//! even where the kernel would only reserve the pages.

use std::path::{Path, PathBuf};
use tachyon_test_kit::fixtures;

fn root() -> PathBuf {
    fixtures::root()
}

fn files(dir: &Path, extensions: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if extensions.is_empty() || p.extension().is_some_and(|x| extensions.iter().any(|e| x == *e)) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Address space for the replay: the fuzz runs' malloc limit, with room for the test binary.
const LIMIT: u64 = 384 << 20;

type Target = fn(&[u8]);

fn target(name: &str) -> Option<Target> {
    Some(match name {
        "tachyon_metadata" => tachyon_fuzz::tachyon_metadata,
        "tachyon_replay" => tachyon_fuzz::tachyon_replay,
        "gperftools" => tachyon_fuzz::gperftools,
        "mojo" => tachyon_fuzz::mojo,
        "pstats" => tachyon_fuzz::pstats,
        "marshal" => tachyon_fuzz::marshal,
        "pprof" => tachyon_fuzz::pprof,
        "json_encode" => tachyon_fuzz::json_encode,
        "detect" => tachyon_fuzz::detect,
        "elf_symbols" => tachyon_fuzz::elf_symbols,
        "transport_receiver" => tachyon_fuzz::transport_receiver,
        _ => return None,
    })
}

#[test]
fn saved_crashes_no_longer_crash() {
    if tachyon_test_kit::under_memory_limit("saved_crashes_no_longer_crash", LIMIT) {
        return;
    }
    let dir = root().join("fuzz/regressions");
    let mut ran = 0;
    for file in files(&dir, &[]) {
        if file.file_name().is_some_and(|n| n == "README.md") {
            continue;
        }
        let name = file.parent().unwrap().file_name().unwrap().to_string_lossy().into_owned();
        let data = std::fs::read(&file).unwrap();
        if name == "roundtrip" {
            // As libfuzzer-sys makes the target's argument from the bytes.
            let u = arbitrary::Unstructured::new(&data);
            if let Ok(stream) = <tachyon_fuzz::roundtrip::Stream as arbitrary::Arbitrary>::arbitrary_take_rest(u) {
                tachyon_fuzz::roundtrip::run(&stream);
            }
        } else {
            let run = target(&name).unwrap_or_else(|| panic!("{}: no target {name}", file.display()));
            run(&data);
        }
        ran += 1;
    }
    eprintln!("{ran} saved crashes replayed");
}

#[test]
fn every_seed_runs_through_its_target() {
    if tachyon_test_kit::under_memory_limit("every_seed_runs_through_its_target", LIMIT) {
        return;
    }
    let v = root().join("qemu-tests/vectors");
    let tachyon =
        [files(&v.join("cpython-3.15.2"), &["bin"]), files(&root().join("qemu-tests/fixtures"), &["pyb"])].concat();
    let sets: [(&str, Vec<PathBuf>); 7] = [
        ("tachyon_replay", tachyon.clone()),
        ("tachyon_metadata", tachyon),
        ("gperftools", files(&v.join("gperftools-2.10"), &["prof"])),
        ("mojo", files(&v, &["mojo"])),
        ("pstats", files(&v.join("pstats"), &["pstats"])),
        ("marshal", files(&v.join("pstats"), &["pstats"])),
        ("json_encode", files(&v.join("cpython-3.15.2"), &["json"])),
    ];
    for (name, seeds) in sets {
        assert!(seeds.len() > 3, "{name}: {} seeds", seeds.len());
        let run = target(name).unwrap();
        for seed in seeds {
            let data = std::fs::read(&seed).unwrap();
            run(&data);
            tachyon_fuzz::detect(&data);
        }
    }
}
