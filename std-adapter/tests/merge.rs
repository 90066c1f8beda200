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
    stacks_of(&String::from_utf8(out.stdout).unwrap())
}

/// Collapsed stacks `text` as stack → count.
fn stacks_of(text: &str) -> BTreeMap<String, u64> {
    let mut stacks = BTreeMap::new();
    for line in text.lines() {
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

/// A location: its id, address and lines as (function id, line).
type PprofLocation<'a> = (u64, u64, &'a [(u64, i64)]);

/// A gzipped pprof profile of one sample type (`samples`/`count`) from `strings` (index 0
/// empty, 1 and 2 those two), functions `(id, name, filename)`, locations `(id, address,
/// lines as (function id, line))` and samples `(location ids leaf first, count)`.
fn pprof_profile(
    strings: &[&str],
    functions: &[(u64, i64, i64)],
    locations: &[PprofLocation<'_>],
    samples: &[(&[u64], i64)],
) -> Vec<u8> {
    use prost::Message;
    use tachyon::pprof::proto::{Function, Line, Location, Profile, Sample, ValueType};
    let profile = Profile {
        sample_type: vec![ValueType { r#type: 1, unit: 2 }],
        sample: samples
            .iter()
            .map(|&(ids, count)| Sample { location_id: ids.to_vec(), value: vec![count], label: vec![] })
            .collect(),
        location: locations
            .iter()
            .map(|&(id, address, lines)| Location {
                id,
                address,
                line: lines.iter().map(|&(function_id, line)| Line { function_id, line }).collect(),
                ..Location::default()
            })
            .collect(),
        function: functions
            .iter()
            .map(|&(id, name, filename)| Function { id, name, filename, ..Function::default() })
            .collect(),
        string_table: strings.iter().map(|&s| s.to_owned()).collect(),
        ..Profile::default()
    };
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &profile.encode_to_vec()).unwrap();
    gz.finish().unwrap()
}

/// The fold looks up each string of a pprof file's table once, not once for every frame
/// that names it, and reuses one part's storage for the next file's: two names of one text
/// at two places in a table are one name, a name without a string of its own (a bare
/// address) keeps its address, and each file's names are its own however the files before
/// it named theirs, on one thread and on several.
#[test]
fn merged_pprof_names_are_each_files_own() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("merge-pprof-names");
    std::fs::create_dir_all(&dir).unwrap();
    // "main" and "f.py" twice in the table; location 4 a bare address.
    let a = pprof_profile(
        &["", "samples", "count", "main", "f.py", "main", "f.py", "g"],
        &[(1, 3, 4), (2, 5, 6), (3, 7, 4)],
        &[(1, 0, &[(1, 10)]), (2, 0, &[(2, 10)]), (3, 0, &[(3, 20)]), (4, 0x1234, &[])],
        &[(&[1, 3], 2), (&[2, 3], 3), (&[4], 1)],
    );
    // The same places in the table hold other names.
    let b = pprof_profile(
        &["", "samples", "count", "h", "k.py", "i", "j.py", "main"],
        &[(1, 3, 4), (2, 5, 6), (3, 7, 4)],
        &[(1, 0, &[(1, 1)]), (2, 0, &[(2, 2)]), (3, 0, &[(3, 10)])],
        &[(&[1, 3], 7), (&[2, 1], 11)],
    );
    let (pa, pb) = (dir.join("a.pb.gz"), dir.join("b.pb.gz"));
    std::fs::write(&pa, a).unwrap();
    std::fs::write(&pb, b).unwrap();
    let mut each = BTreeMap::new();
    for (file, times) in [(&pa, 2), (&pb, 2)] {
        for (stack, n) in collapsed(file) {
            *each.entry(stack).or_insert(0) += n * times;
        }
    }
    // What the files hold, read alone: the bare address, both names of one text as one.
    assert!(each.keys().any(|s| s.contains("0x1234")), "{each:?}");
    assert_eq!(each.values().sum::<u64>(), 2 * (2 + 3 + 1) + 2 * (7 + 11), "{each:?}");
    assert_eq!(each.len(), 4, "a's two places of main at line 10 are one stack: {each:?}");
    for jobs in ["1", "2"] {
        let out = dir.join(format!("merged-{jobs}.txt"));
        tachyon()
            .args(["merge", "--quiet", "--no-symbolize", "--to", "collapsed", "-j", jobs])
            .args([&pa, &pb, &pb, &pa])
            .arg("-o")
            .arg(&out)
            .assert()
            .success();
        assert_eq!(stacks_of(&std::fs::read_to_string(&out).unwrap()), each, "-j {jobs}");
    }
}
