//! `tachyon merge` of sample inputs: the merged file of each format holds every sample of
//! each input — its collapsed stacks are the sum of theirs — and refuses mixed formats.
//! (Tachyon files are also checked with CPython's own replay in `qemu-tests`.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tachyon_test_kit::fixtures;

use assert_cmd::Command;

fn vectors() -> PathBuf {
    fixtures::root().join("qemu-tests/vectors")
}

fn tachyon() -> Command {
    Command::cargo_bin("tachyon").unwrap()
}

/// Collapsed stacks of `file` as stack → count.
fn collapsed(file: &Path) -> BTreeMap<String, u64> {
    let out = tachyon().args(["convert", "--quiet", "--no-symbolize", "--to", "collapsed"]).arg(file).output().unwrap();
    assert!(out.status.success(), "{}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
    let mut stacks = BTreeMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let (stack, n) = line.rsplit_once(' ').unwrap();
        *stacks.entry(stack.to_string()).or_insert(0) += n.parse::<u64>().unwrap();
    }
    stacks
}

fn merged_is_the_sum(inputs: &[PathBuf], name: &str) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("merge");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(name);
    tachyon().arg("merge").args(inputs).arg("-o").arg(&out).assert().success();
    let mut sum = BTreeMap::new();
    for input in inputs {
        for (stack, n) in collapsed(input) {
            *sum.entry(stack).or_insert(0) += n;
        }
    }
    let merged = collapsed(&out);
    assert!(!merged.is_empty(), "{name}: no samples");
    assert_eq!(merged, sum, "{name}: the merged file's stacks are not the inputs' sum");
}

#[test]
fn each_sample_format_merges_into_itself() {
    let v = vectors();
    merged_is_the_sum(
        &[
            fixtures::root().join("examples/stdlib_work.pyb"),
            v.join("cpython-3.15.2/05_two_threads.x86_64.bin"),
            v.join("cpython-3.15.2/09_zstd.s390x.bin"),
        ],
        "merged.pyb",
    );
    merged_is_the_sum(
        &[
            v.join("gperftools-2.10/x86_64-le64-gperftools2.10/burn-x86_64.prof"),
            v.join("gperftools-2.10/x86_64-le64-gperftools2.10/burn-x86_64.prof"),
        ],
        "merged.prof",
    );
    merged_is_the_sum(
        &[v.join("mojo-austin-3.7/a37_gc_small_py311.mojo"), v.join("mojo-austin-3.7/a37_memory_small_py311.mojo")],
        "merged.mojo",
    );
}

#[test]
fn mixed_formats_are_refused() {
    let v = vectors();
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mixed.out");
    let failed = tachyon()
        .arg("merge")
        .arg(v.join("cpython-3.15.2/05_two_threads.x86_64.bin"))
        .arg(v.join("pstats/cprofile_py311_simple.pstats"))
        .arg("-o")
        .arg(&out)
        .assert()
        .failure();
    assert!(String::from_utf8_lossy(&failed.get_output().stderr).contains("one format"));
}

/// `--jobs N` reads N files at once; the merged file is the same byte for byte however many,
/// and a count of 0, or `--jobs` without `--to`, is refused as a usage error.
#[test]
fn merge_jobs_change_nothing_but_the_threads_used() {
    let v = vectors();
    let inputs = [
        fixtures::root().join("examples/stdlib_work.pyb"),
        v.join("cpython-3.15.2/05_two_threads.x86_64.bin"),
        v.join("cpython-3.15.2/09_zstd.s390x.bin"),
        v.join("cpython-3.15.2/05_two_threads.x86_64.bin"),
        fixtures::root().join("examples/stdlib_work.pyb"),
    ];
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("merge-jobs");
    std::fs::create_dir_all(&dir).unwrap();
    let merged = |jobs: &[&str]| {
        let out = dir.join(format!("merged{}.pb.gz", jobs.join("")));
        tachyon().arg("merge").args(&inputs).args(["--to", "pprof"]).args(jobs).arg("-o").arg(&out).assert().success();
        std::fs::read(out).unwrap()
    };
    let one = merged(&["--jobs", "1"]);
    assert!(!one.is_empty());
    for jobs in [&["--jobs", "2"][..], &["-j", "4"], &["--jobs", "9"], &[]] {
        assert!(merged(jobs) == one, "{jobs:?} merged other bytes than --jobs 1");
    }
    let out = dir.join("refused");
    for args in [&["--to", "pprof", "--jobs", "0"][..], &["--jobs", "2"]] {
        tachyon().arg("merge").args(&inputs).args(args).arg("-o").arg(&out).assert().code(2);
    }
}
