//! The `tachyon` command against CPython 3.15.2's own files: dumps equal CPython's reader
//! output byte for byte, encodes equal CPython's writer output byte for byte.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

fn vectors() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../qemu-tests/vectors/cpython-3.15.2")
}

fn names() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(vectors())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".input.json").map(str::to_string))
        .collect();
    v.sort();
    assert_eq!(v.len(), 14);
    v
}

fn tachyon() -> Command {
    Command::cargo_bin("tachyon").unwrap()
}

#[test]
fn dump_prints_cpythons_lines_exactly() {
    for name in names() {
        let expected = std::fs::read_to_string(vectors().join(format!("{name}.expected.jsonl"))).unwrap();
        let samples: String = expected.lines().skip(1).map(|l| format!("{l}\n")).collect();
        for arch in ["x86_64", "s390x"] {
            let out = tachyon().arg("dump").arg(vectors().join(format!("{name}.{arch}.bin"))).output().unwrap();
            assert!(out.status.success(), "{name}.{arch}");
            assert_eq!(String::from_utf8(out.stdout).unwrap(), samples, "{name}.{arch}");
        }
    }
}

#[test]
fn info_json_carries_cpythons_get_info() {
    for name in names() {
        let expected = std::fs::read_to_string(vectors().join(format!("{name}.expected.jsonl"))).unwrap();
        let want: Value = serde_json::from_str(expected.lines().next().unwrap()).unwrap();
        for (arch, order) in [("x86_64", "little"), ("s390x", "big")] {
            let out =
                tachyon().args(["info", "--json"]).arg(vectors().join(format!("{name}.{arch}.bin"))).output().unwrap();
            assert!(out.status.success());
            let got: Value = serde_json::from_slice(&out.stdout).unwrap();
            for (k, v) in want.as_object().unwrap() {
                assert_eq!(&got[k], v, "{name}.{arch}: {k}");
            }
            assert_eq!(got["byte_order"], order);
            assert_eq!(got["header_layout"], "3.15.2");
        }
    }
}

#[test]
fn encode_reproduces_cpythons_files() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-encode");
    std::fs::create_dir_all(&dir).unwrap();
    for name in names() {
        let input = vectors().join(format!("{name}.input.json"));
        for (arch, order) in [("x86_64", "little"), ("s390x", "big")] {
            let out = dir.join(format!("{name}.{arch}.bin"));
            tachyon().arg("encode").arg(&input).arg("-o").arg(&out).args(["--byte-order", order]).assert().success();
            let want = std::fs::read(vectors().join(format!("{name}.{arch}.bin"))).unwrap();
            assert_eq!(std::fs::read(&out).unwrap(), want, "{name} {order}");
        }
        // The same input as JSON lines: parameters first, then one call per line.
        let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&input).unwrap()).unwrap();
        let calls = doc.as_object_mut().unwrap().remove("samples").unwrap();
        let mut lines = format!("{doc}\n");
        for c in calls.as_array().unwrap() {
            lines.push_str(&format!("{c}\n"));
        }
        let jsonl = dir.join(format!("{name}.jsonl"));
        std::fs::write(&jsonl, lines).unwrap();
        let out = dir.join(format!("{name}.from-jsonl.bin"));
        tachyon().arg("encode").arg(&jsonl).arg("-o").arg(&out).args(["--byte-order", "big"]).assert().success();
        assert_eq!(
            std::fs::read(&out).unwrap(),
            std::fs::read(vectors().join(format!("{name}.s390x.bin"))).unwrap(),
            "{name} jsonl"
        );
    }
    // Vector 09 is vector 05's input with zstd: the override must give CPython's 09 bytes.
    let out = dir.join("05-as-zstd.bin");
    tachyon()
        .arg("encode")
        .arg(vectors().join("05_two_threads.input.json"))
        .arg("-o")
        .arg(&out)
        .args(["--byte-order", "little", "--compression", "zstd"])
        .assert()
        .success();
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(vectors().join("09_zstd.x86_64.bin")).unwrap());
}

#[test]
fn verify_and_exit_codes() {
    let good = vectors().join("04_pop_push.s390x.bin");
    let out = tachyon().arg("verify").arg(&good).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("OK, 7 thread samples"));

    // A file cut inside its sample region: exit 1, the file, the offset and the rule named.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-verify");
    std::fs::create_dir_all(&dir).unwrap();
    let bytes = std::fs::read(vectors().join("05_two_threads.x86_64.bin")).unwrap();
    let mut broken = bytes.clone();
    broken[64 + 12] = 9; // first record's encoding byte
    let bad = dir.join("bad-encoding.bin");
    std::fs::write(&bad, broken).unwrap();
    let out = tachyon().arg("verify").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad-encoding.bin") && err.contains("Unknown stack encoding: 9") && err.contains("file offset 76"),
        "{err}"
    );

    let out = tachyon().arg("dump").arg(dir.join("missing.bin")).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let out = tachyon().arg("frobnicate").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
