//! Large files: CPython 3.15.2's own `BinaryWriter` fed the samples of committed real
//! recordings many times over (`qemu-tests/oracle/make_large_profiles.py`), so that the
//! decoder's cost per byte shows rather than the process's start-up. Whole commands, as in
//! the real-profile tables, with MB/s of the sample region as decoded (decompressed, for zstd) and samples/s.

use std::path::Path;
use std::process::Command;

use super::cpython::{collapsed_side_by_side, counts, verify_and_zstd_floor, Counts};
use super::runner::*;
use tachyon_test_kit::fixtures::root;

/// Name, committed input, copies, compression (0 raw, 1 zstd). From these inputs the files
/// are the same on every machine.
const LARGE: [(&str, &str, u32, u32); 3] = [
    ("deep_x20_raw.pyb", "qemu-tests/fixtures/recorded/cpython-3.15.2/deep_varied_zstd.pyb", 20, 0),
    ("deep_x20_zstd.pyb", "qemu-tests/fixtures/recorded/cpython-3.15.2/deep_varied_zstd.pyb", 20, 1),
    ("threads_x2500_raw.pyb", "qemu-tests/fixtures/real-3.15.2/threads_wall_zstd.pyb", 2500, 0),
];

/// Makes the large files in `dir` (kept between runs: each takes 10–30 s to write).
fn make(dir: &Path) {
    for (name, input, times, compression) in LARGE {
        let out = dir.join(name);
        if out.exists() {
            continue;
        }
        let status = Command::new("bash")
            .arg(root().join("scripts/oracle-python.sh"))
            .args(["amd64", root().join("qemu-tests/oracle/make_large_profiles.py").to_str().unwrap()])
            .arg(root().join(input))
            .arg(&out)
            .args([times.to_string(), compression.to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "make_large_profiles.py {name} failed");
    }
}

pub(super) fn large_profiles(runner: &mut Runner, dir: &Path, runs: usize) {
    make(dir);
    let cpython_runs = runs.min(3);
    let bench = root().join("qemu-tests/oracle/cpython_bench.py").display().to_string();
    println!("Large files written by CPython 3.15.2's BinaryWriter from real recordings (whole commands):\n");
    println!("| file | samples | REPEAT / other records | bytes | CPython replay, no-op collector | `tachyon verify` | MB/s of sample region | samples/s | speed-up | `zstd -d` of the sample region | verify ÷ `zstd -d` | peak RSS: CPython / ours |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut collapsed = Vec::new();
    for (name, _, _, _) in LARGE {
        let file = dir.join(name);
        let f = file.to_str().unwrap().to_owned();
        let Counts { samples, repeats, others, region_bytes: decoded } = counts(&file);
        let bytes = std::fs::metadata(&file).unwrap().len();
        let cp = runner.median(cpython_runs, &with(python_argv(), &[&bench, "read", &f]), None);
        let (ours, zstd) = verify_and_zstd_floor(runner, dir, name, &file, runs);
        let floor = if let Some(z) = zstd {
            format!("{} | {:.2}×", ms(&z), ours.seconds / z.seconds)
        } else {
            "— | —".to_owned()
        };
        println!(
            "| {name} | {samples} | {repeats} / {others} | {bytes} | {} | {} | {:.0} | {:.0} M | {:.1}× | {floor} | {} / {} |",
            ms(&cp),
            ms(&ours),
            decoded as f64 / ours.seconds / 1e6,
            samples as f64 / ours.seconds / 1e6,
            cp.seconds / ours.seconds,
            mb(cp.rss_kb),
            mb(ours.rss_kb)
        );

        let (cpc, oc, out_bytes) = collapsed_side_by_side(runner, dir, name, &f, runs);
        collapsed.push(format!(
            "| {name} | {samples} | {out_bytes} | {} | {} | {:.0} | {:.1}× | yes | {} / {} |",
            ms(&cpc),
            ms(&oc),
            decoded as f64 / oc.seconds / 1e6,
            cpc.seconds / oc.seconds,
            mb(cpc.rss_kb),
            mb(oc.rss_kb)
        ));
        // Tens of megabytes each.
        for side in ["cpython", "ours"] {
            std::fs::remove_file(dir.join(format!("{name}.{side}.collapsed"))).unwrap();
        }
    }
    println!();
    println!("| file | samples | output bytes | CPython `replay --collapsed` | `tachyon convert --to collapsed` | MB/s of sample region | speed-up | same output | peak RSS: CPython / ours |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for row in collapsed {
        println!("{row}");
    }
    println!();
}
