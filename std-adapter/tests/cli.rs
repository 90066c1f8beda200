//! The `tachyon` command against CPython 3.15.2's own files: dumps equal CPython's reader
//! output byte for byte, encodes equal CPython's writer output byte for byte.

use std::path::{Path, PathBuf};
use tachyon_test_kit::fixtures;

use assert_cmd::Command;
use serde_json::Value;

fn vectors() -> PathBuf {
    fixtures::vectors("cpython-3.15.2")
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

fn example() -> PathBuf {
    fixtures::root().join("examples/stdlib_work.pyb")
}

/// The golden files next to the example are CPython 3.15.2's own `replay` output.
#[test]
fn convert_matches_cpythons_replay_of_the_example() {
    let dir = example().parent().unwrap().to_path_buf();
    let collapsed = tachyon().args(["convert", "--to", "collapsed"]).arg(example()).output().unwrap();
    assert!(collapsed.status.success());
    assert_eq!(collapsed.stdout, std::fs::read(dir.join("stdlib_work.cpython-collapsed.txt")).unwrap());
    let table = tachyon().args(["convert", "--to", "pstats-text"]).arg(example()).output().unwrap();
    assert!(table.status.success());
    assert_eq!(
        String::from_utf8(table.stdout).unwrap(),
        std::fs::read_to_string(dir.join("stdlib_work.cpython-table.txt")).unwrap()
    );
}

#[test]
fn every_format_writes_to_a_file_what_it_prints() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-formats");
    std::fs::create_dir_all(&tmp).unwrap();
    for to in ["collapsed", "pstats", "pstats-text", "flamegraph", "gecko", "speedscope", "pprof", "jsonl"] {
        let file = tmp.join(to);
        tachyon().args(["convert", "--quiet", "--to", to, "-o"]).arg(&file).arg(example()).assert().success();
        let printed = tachyon().args(["convert", "--to", to]).arg(example()).output().unwrap();
        assert!(printed.status.success(), "{to}");
        let written = std::fs::read(&file).unwrap();
        assert!(!written.is_empty(), "{to}");
        // Run ids and gzip need not repeat; everything else must.
        if to != "jsonl" && to != "pprof" {
            assert_eq!(written, printed.stdout, "{to}");
        }
    }
    // The root counts every sample with a stack (7,996 of the 8,086 in the golden collapsed
    // file; CPython's collectors leave out the 90 with empty stacks too).
    let golden = std::fs::read_to_string(example().with_file_name("stdlib_work.cpython-collapsed.txt")).unwrap();
    let total: u64 = golden.lines().map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap()).sum();
    assert_eq!(total, 7_996);
    let svg = String::from_utf8(std::fs::read(tmp.join("flamegraph")).unwrap()).unwrap();
    assert!(svg.contains("<title>all (7,996 samples, 100%)"), "flame graph root counts every stacked sample");
    let speedscope: Value = serde_json::from_slice(&std::fs::read(tmp.join("speedscope")).unwrap()).unwrap();
    assert_eq!(speedscope["profiles"].as_array().unwrap().len(), 3, "one profile per thread");
}

#[test]
fn reencoding_changes_byte_order_and_back() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-reencode");
    std::fs::create_dir_all(&tmp).unwrap();
    for name in names() {
        let le = vectors().join(format!("{name}.x86_64.bin"));
        let be = vectors().join(format!("{name}.s390x.bin"));
        let to_big = tmp.join(format!("{name}.big"));
        let back = tmp.join(format!("{name}.little"));
        tachyon()
            .args(["convert", "--to", "tachyon", "--byte-order", "big", "-o"])
            .arg(&to_big)
            .arg(&le)
            .assert()
            .success();
        assert_eq!(std::fs::read(&to_big).unwrap(), std::fs::read(&be).unwrap(), "{name}: as CPython on s390x");
        tachyon()
            .args(["convert", "--to", "tachyon", "--byte-order", "little", "-o"])
            .arg(&back)
            .arg(&to_big)
            .assert()
            .success();
        assert_eq!(std::fs::read(&back).unwrap(), std::fs::read(&le).unwrap(), "{name}: back as CPython on x86_64");
    }
}

/// CPython's real profiles (and the example) come back byte for byte.
#[test]
fn reencoding_real_profiles_gives_them_back() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-reencode-real");
    std::fs::create_dir_all(&tmp).unwrap();
    let dir = fixtures::root().join("qemu-tests/fixtures/real-3.15.2");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.retain(|p| p.extension().is_some_and(|x| x == "pyb"));
    files.push(example());
    assert!(files.len() >= 9);
    for file in files {
        let out = tmp.join(file.file_name().unwrap());
        tachyon().args(["convert", "--to", "tachyon", "-o"]).arg(&out).arg(&file).assert().success();
        assert!(std::fs::read(&out).unwrap() == std::fs::read(&file).unwrap(), "{}", file.display());
    }
}

#[test]
fn diff_draws_a_differential_flame_graph() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-diff");
    std::fs::create_dir_all(&tmp).unwrap();
    let base = fixtures::root().join("qemu-tests/fixtures/real-3.15.2/threads_wall_zstd.pyb");
    let out = tmp.join("diff.svg");
    tachyon().arg("diff").arg(&base).arg(example()).arg("-o").arg(&out).assert().success();
    let svg = String::from_utf8(std::fs::read(&out).unwrap()).unwrap();
    assert!(svg.contains("threads_wall_zstd.pyb → stdlib_work.pyb"), "default title names both files");
    // Widths come from the new profile: its frames are drawn, frames only the base had are not.
    assert!(svg.contains("difflib.py"), "new profile's frames");
    assert!(!svg.contains("threads.py:fib"), "base-only frames have no width");
    assert!(svg.contains("all (7,996 samples"), "root counts the new profile");
    assert!(!svg.contains("tid:"), "threads are merged");
}

#[test]
fn options_of_other_formats_are_usage_errors() {
    for args in [
        &["--to", "collapsed", "--pstats-compat"][..],
        &["--to", "pstats", "--sort", "name"],
        &["--to", "gecko", "--byte-order", "big"],
        &["--to", "collapsed", "--title", "x"],
        &["--to", "nonsense"],
    ] {
        tachyon().arg("convert").args(args).arg(example()).assert().code(2);
    }
}

#[test]
fn a_corrupt_file_fails_with_its_offset() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-corrupt");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut bytes = std::fs::read(vectors().join("04_pop_push.x86_64.bin")).unwrap();
    bytes[64 + 12] = 9; // encoding byte of the first record
    let bad = tmp.join("bad.bin");
    std::fs::write(&bad, bytes).unwrap();
    let out = tachyon().args(["convert", "--to", "collapsed"]).arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let msg = String::from_utf8(out.stderr).unwrap();
    assert!(msg.contains("bad.bin") && msg.contains("76"), "names the file and offset: {msg}");
}

#[test]
fn encode_input_nested_deeper_than_json_allows_is_an_error_not_a_crash() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-encode-deep");
    std::fs::create_dir_all(&tmp).unwrap();
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let document = tmp.join("deep.json");
    std::fs::write(&document, format!("{{\"samples\": {deep}}}")).unwrap();
    // JSON lines: the parameters, then a call nested as deep.
    let lines = tmp.join("deep.jsonl");
    std::fs::write(&lines, format!("{{\"start_time_us\": 1, \"sample_interval_us\": 1}}\n{deep}\n")).unwrap();
    for (input, place) in [(&document, "deep.json: recursion limit"), (&lines, "deep.jsonl: line 2: recursion limit")] {
        let out = tachyon().arg("encode").arg(input).arg("-o").arg(tmp.join("out.bin")).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", input.display());
        let msg = String::from_utf8(out.stderr).unwrap();
        assert!(msg.contains(place), "names the file, line and rule: {msg}");
    }
}

#[test]
fn info_names_the_format_first_from_the_content() {
    let gperf = fixtures::vectors("gperftools-2.10");
    // (file, google-pprof 2.10's "Total: N samples" for it, slot bytes, byte order)
    let real = [
        ("x86_64-le64-gperftools2.10/burn-x86_64.prof", 296, 8, "little"),
        ("i386-le32-gperftools2.10/burn-i386.prof", 197, 4, "little"),
        ("s390x-be64-gperftools2.10-qemu/burn-s390x.prof", 252, 8, "big"),
    ];
    for (file, total, word, order) in real {
        let out = tachyon().arg("info").arg(gperf.join(file)).output().unwrap();
        assert!(out.status.success(), "{file}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert_eq!(text.lines().next().map(str::trim), Some("format: gperftools"), "{file}");
        let out = tachyon().args(["info", "--json"]).arg(gperf.join(file)).output().unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!((v["samples"].as_u64(), v["word_bytes"].as_u64()), (Some(total), Some(word)), "{file}");
        assert_eq!((v["byte_order"].as_str(), v["end_marker"].as_str()), (Some(order), Some("0, 1, 0")), "{file}");
        assert_eq!(v["quirks"], serde_json::json!([]), "{file}");
    }
    // A quirk is named.
    let odd = gperf.join("edge-synthetic/x64-zeropc_midrecord.prof");
    let v: Value =
        serde_json::from_slice(&tachyon().args(["info", "--json"]).arg(odd).output().unwrap().stdout).unwrap();
    assert_eq!(v["samples"], 3, "google-pprof stops at the pc-0 record");
    assert_eq!(v["quirks"], serde_json::json!(["data ended by a pc-0 record other than the trailer"]));
    // A Tachyon file, renamed to look like something else, is still Tachyon.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-detect");
    std::fs::create_dir_all(&dir).unwrap();
    let disguised = dir.join("profile.prof");
    std::fs::copy(vectors().join(format!("{}.s390x.bin", names()[0])), &disguised).unwrap();
    let out = tachyon().arg("info").arg(&disguised).output().unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().next().map(str::trim), Some("format: tachyon"));
    // Text is no profile.
    let text = dir.join("notes.bin");
    std::fs::write(&text, "plain text, not a profile\n").unwrap();
    let out = tachyon().arg("info").arg(&text).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8(out.stderr).unwrap().contains("not a profile format"));
}

#[test]
fn convert_reads_a_gperftools_profile_by_its_content() {
    let prof = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../qemu-tests/vectors/gperftools-2.10/s390x-be64-gperftools2.10-qemu/burn-s390x.prof");
    let out = tachyon().args(["convert", "--to", "collapsed"]).arg(&prof).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    // google-pprof 2.10 counts 252 samples in this file; native stacks have no tid root.
    let total: u64 = text.lines().map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap()).sum();
    assert_eq!(total, 252);
    assert!(text.lines().all(|l| l.starts_with("0x")), "{text}");
    // The binaries it names were on the recording machine: one warning each, then hex names.
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        err,
        "tachyon: warning: /tmp/research/gperf/src/burn-s390x: not found, its addresses stay unsymbolised\n\
         tachyon: warning: /tmp/research/gperf/root-s390x/lib/s390x-linux-gnu/libc.so.6: not found, its \
         addresses stay unsymbolised\n"
    );
    let quiet = tachyon().args(["convert", "--to", "collapsed", "--no-symbolize"]).arg(&prof).output().unwrap();
    assert!(quiet.status.success() && quiet.stderr.is_empty(), "{}", String::from_utf8_lossy(&quiet.stderr));
    assert_eq!(String::from_utf8(quiet.stdout).unwrap(), text);
    // A differential flame graph of two native profiles.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-gperftools");
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("diff.svg");
    let out = tachyon().arg("diff").arg(&prof).arg(&prof).arg("-o").arg(&svg).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    // The Firefox profiler needs times the format does not have: exit 1, saying so.
    let out = tachyon().args(["convert", "--to", "gecko"]).arg(&prof).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("gperftools") && err.contains("time"), "{err}");
    // An option of another output is still a usage error.
    let out = tachyon().args(["convert", "--to", "pprof", "--sort", "name"]).arg(&prof).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8(out.stderr).unwrap().contains("--sort only applies to --to pstats-text"));
    let out = tachyon().args(["convert", "--to", "pprof", "--byte-order", "big"]).arg(&prof).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("--byte-order only applies to --to tachyon or --to gperftools"), "{err}");
    // Re-encoded: the same bytes, and nothing to symbolise; in another byte order, a file the
    // command reads to the same stacks.
    let again = dir.join("again.prof");
    let out = tachyon().args(["convert", "--to", "gperftools", "-o"]).arg(&again).arg(&prof).output().unwrap();
    assert!(out.status.success() && out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read(&again).unwrap() == std::fs::read(&prof).unwrap());
    let little = tachyon()
        .args(["convert", "--to", "gperftools", "--byte-order", "little", "--word-size", "64"])
        .arg(&prof)
        .output()
        .unwrap();
    assert!(little.status.success(), "{}", String::from_utf8_lossy(&little.stderr));
    std::fs::write(dir.join("little.prof"), &little.stdout).unwrap();
    let out = tachyon()
        .args(["convert", "--to", "collapsed", "--no-symbolize"])
        .arg(dir.join("little.prof"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), text);
    // pprof in and out: our pprof of it reads back, counting samples, to the same stacks.
    let pb = dir.join("burn.pb.gz");
    let out =
        tachyon().args(["convert", "--to", "pprof", "--no-symbolize", "-o"]).arg(&pb).arg(&prof).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = tachyon().args(["convert", "--to", "collapsed", "--sample-index", "samples"]).arg(&pb).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), text);
    let out = tachyon().arg("info").arg(&pb).output().unwrap();
    let info = String::from_utf8(out.stdout).unwrap();
    assert!(info.contains("format: pprof") && info.contains("\"samples/count\""), "{info}");
    let out = tachyon().args(["convert", "--to", "collapsed", "--sample-index", "7"]).arg(&pb).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    // pprof back to gperftools (counting samples by default): the records' stacks again.
    let back = dir.join("back.prof");
    let out = tachyon()
        .args(["convert", "--to", "gperftools", "--byte-order", "big", "-o"])
        .arg(&back)
        .arg(&pb)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = tachyon().args(["convert", "--to", "collapsed"]).arg(&back).output().unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), text);
    // A Python profile has no addresses to write.
    let pyb = fixtures::root().join("examples/stdlib_work.pyb");
    let out = tachyon().args(["convert", "--to", "gperftools"]).arg(&pyb).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8(out.stderr).unwrap().contains("without addresses"));
    let out = tachyon().args(["info"]).arg(dir.join("little.prof")).output().unwrap();
    assert!(String::from_utf8(out.stdout).unwrap().contains("\"little\""));
}

/// MOJO input by its content: `info` reads it; `--to austin` is mojo2austin 1.7.1's text;
/// `--to mojo` gives the file back, `--mojo-version 1` the version 1 vector; the other
/// outputs say they do not take MOJO yet, and Austin's formats refuse other inputs.
#[test]
fn mojo_input_to_austins_formats() {
    use std::io::Read as _;
    let mojo = fixtures::vectors("mojo-austin-3.7");
    let file = mojo.join("a37_wall_simple_py311.mojo");
    let v: Value =
        serde_json::from_slice(&tachyon().args(["info", "--json"]).arg(&file).output().unwrap().stdout).unwrap();
    assert_eq!((v["format"].as_str(), v["version"].as_u64()), (Some("mojo"), Some(3)));
    assert_eq!((v["metadata"]["mode"].as_str(), v["processes"].as_u64()), (Some("wall"), Some(1)));
    assert!(v["samples"].as_u64().unwrap() > 100);

    let mut want = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(mojo.join("expected/a37_wall_simple_py311.austin.gz")).unwrap())
        .read_to_end(&mut want)
        .unwrap();
    let out = tachyon().args(["convert", "--to", "austin"]).arg(&file).output().unwrap();
    assert!(out.status.success());
    assert!(out.stdout == want, "--to austin differs from mojo2austin's text");

    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-mojo");
    std::fs::create_dir_all(&dir).unwrap();
    let again = dir.join("again.mojo");
    tachyon().args(["convert", "--to", "mojo", "-o"]).arg(&again).arg(&file).assert().success();
    assert!(std::fs::read(&again).unwrap() == std::fs::read(&file).unwrap(), "re-encoded bytes differ");
    let v1 = dir.join("v1.mojo");
    tachyon().args(["convert", "--to", "mojo", "--mojo-version", "1", "-o"]).arg(&v1).arg(&file).assert().success();
    let derived = std::fs::read(mojo.join("derived/v1_from_a37_wall_simple.mojo")).unwrap();
    assert!(std::fs::read(&v1).unwrap() == derived, "version 1 differs from the derived vector");

    // Collapsed stacks weigh samples by their time, as Austin's tools do: the sums per thread
    // and stack of mojo2austin's text (its frames named as CPython's collapsed lines name them).
    let text = String::from_utf8(want).unwrap();
    for (metric, by_time) in [(None, true), (Some("samples"), false)] {
        let mut expected: std::collections::BTreeMap<String, u64> = Default::default();
        for line in text.lines().filter(|l| l.starts_with('P')) {
            let (head, value) = line.rsplit_once(' ').unwrap();
            let mut parts = head.split(';');
            let (_pid, thread) = (parts.next().unwrap(), parts.next().unwrap());
            let tid = thread.rsplit(':').next().unwrap();
            let frames: Vec<String> = parts
                .map(|f| {
                    let mut p = f.rsplitn(3, ':');
                    let (line, scope, file) = (p.next().unwrap(), p.next().unwrap(), p.next().unwrap());
                    format!("{}:{scope}:{line}", file.rsplit('/').next().unwrap())
                })
                .collect();
            let weight: u64 = if by_time { value.parse().unwrap() } else { 1 };
            if !frames.is_empty() && weight > 0 {
                *expected.entry(format!("tid:{tid};{}", frames.join(";"))).or_default() += weight;
            }
        }
        let mut cmd = tachyon();
        cmd.args(["convert", "--to", "collapsed"]).arg(&file);
        if let Some(m) = metric {
            cmd.args(["--metric", m]);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let got: std::collections::BTreeMap<String, u64> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| l.rsplit_once(' ').map(|(k, v)| (k.to_owned(), v.parse().unwrap())).unwrap())
            .collect();
        assert!(expected.len() > 5);
        assert_eq!(got, expected, "collapsed --metric {metric:?}");
    }
    // From Tachyon: the example's 7,996 samples (its header says), one line each.
    let out = tachyon().args(["convert", "--to", "austin"]).arg(example()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("# interval: 1000\n# mode: wall\nP"), "{}", &text[..200]);
    assert_eq!(text.lines().filter(|l| l.starts_with('P')).count(), 7996);
    let out = tachyon().args(["convert", "--to", "mojo", "--mojo-version", "1"]).arg(example()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(&out.stdout[..4], b"MOJ\x01");
    let out = tachyon().args(["convert", "--to", "collapsed", "--mojo-version", "2"]).arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = tachyon().args(["convert", "--to", "mojo", "--mojo-version", "5"]).arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `info` names what the header holds as numbers: the text shows `name (number)`, the JSON
/// keeps CPython's numbers and adds the names. The file was recorded by CPython 3.15.2's
/// sampler in exception mode with all threads (`-a`: GC frames on), compressed with zstd.
#[test]
fn info_names_compression_mode_and_features() {
    let file = fixtures::root().join("qemu-tests/fixtures/real-3.15.2/tiny_exception_zstd.pyb");
    let out = tachyon().arg("info").arg(&file).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for line in ["compression_type: zstd (1)", "mode: exception (4)", "capture_features: all_threads, gc (5)"] {
        assert!(text.lines().any(|l| l.trim_start() == line), "{line} in\n{text}");
    }
    assert!(!text.contains("mode_name"), "{text}");
    let out = tachyon().args(["info", "--json"]).arg(&file).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((&v["compression_type"], &v["compression"]), (&Value::from(1), &Value::from("zstd")));
    assert_eq!((&v["mode"], &v["mode_name"]), (&Value::from(4), &Value::from("exception")));
    assert_eq!(v["capture_features"], 5);
    assert_eq!(v["capture_feature_names"], serde_json::json!(["all_threads", "gc"]));
}

/// `info`, `verify` and `dump` take a real file of every format, and `verify` refuses a
/// corrupted copy of each naming the format, the offset and the rule.
#[test]
fn info_verify_and_dump_take_every_format() {
    let root = fixtures::root();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-every-format");
    std::fs::create_dir_all(&dir).unwrap();
    let gperftools = root.join("qemu-tests/vectors/gperftools-2.10/x86_64-le64-gperftools2.10/burn-x86_64.prof");
    // Our pprof of that profile (go pprof reads such files: qemu-tests' pprof tests).
    let pprof = dir.join("burn.pb.gz");
    tachyon().args(["-q", "convert", "--to", "pprof", "-o"]).arg(&pprof).arg(&gperftools).assert().success();
    let real = [
        ("Tachyon file", root.join("qemu-tests/fixtures/real-3.15.2/mixed_gil_raw.pyb")),
        ("gperftools CPU profile", gperftools),
        ("pprof profile", pprof),
        ("MOJO file", root.join("qemu-tests/vectors/mojo-austin-3.7/a37_wall_simple_py311.mojo")),
        ("pstats file", root.join("qemu-tests/vectors/pstats/cprofile_py311_simple.pstats")),
    ];
    let mut dumps = Vec::new();
    for (title, file) in &real {
        for args in [&["info"][..], &["info", "--json"], &["verify"], &["dump"]] {
            let out = tachyon().args(args).arg(file).output().unwrap();
            assert!(out.status.success(), "{args:?} {title}: {}", String::from_utf8_lossy(&out.stderr));
            if args == ["verify"] {
                let text = String::from_utf8(out.stdout.clone()).unwrap();
                assert!(text.contains(": OK, ") && text.trim_end().ends_with(&format!("({title})")), "{text}");
            }
            if args == ["dump"] {
                let lines: Vec<Value> =
                    String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
                assert!(!lines.is_empty(), "{title}");
                dumps.push(lines);
            }
        }
    }
    // google-pprof's text of the gperftools profile says "Total: 296 samples"; the pprof file
    // holds the same samples in its count type.
    for lines in &dumps[1..3] {
        assert_eq!(lines.iter().map(|l| l["count"].as_u64().unwrap()).sum::<u64>(), 296);
    }
    assert_eq!(dumps[3][0]["kind"], "metadata");
    // The pstats file's first entry, as the format research's marshal dump shows it
    // (qemu-tests/vectors/pstats/cprofile_py311_simple.tree.txt).
    assert_eq!(
        dumps[4][0],
        serde_json::json!({"file": "../scripts/simple.py", "line": 15, "function": "main", "cc": 1, "nc": 1,
            "tt": 0.00022641700000000002, "ct": 0.604067074,
            "callers": [["../scripts/simple.py", 1, "<module>", [1, 1, 0.00022641700000000002, 0.604067074]]]})
    );

    // One corruption per format, each breaking a rule its reader names with the offset.
    let read = |i: usize| std::fs::read(&real[i].1).unwrap();
    let mut tachyon_bad = read(0);
    tachyon_bad[64 + 12] = 9; // the first record's encoding byte (a raw sample region)
    let mut gperftools_bad = read(1);
    gperftools_bad[48..56].fill(0xff); // the first record's depth slot
    let pprof_bad = {
        let mut message = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&read(2)[..]), &mut message).unwrap();
        let offset = message.len();
        message.push(0x0f); // field 1, wire type 7
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut gz, &message).unwrap();
        (gz.finish().unwrap(), offset)
    };
    // Cut inside the first event, which starts after `MOJ` and the one-byte version.
    let mojo_bad = read(3)[..6].to_vec();
    let mut pstats_bad = read(4);
    pstats_bad[450] ^= 0xff;
    let cases = [
        ("Tachyon file", tachyon_bad, vec!["file offset 76".to_owned(), "Unknown stack encoding: 9".to_owned()]),
        ("gperftools CPU profile", gperftools_bad, vec!["file offset 48".to_owned(), "depth".to_owned()]),
        (
            "pprof profile",
            pprof_bad.0,
            vec![format!("at message offset {}", pprof_bad.1), "wire type 7, which does not exist".to_owned()],
        ),
        ("MOJO file", mojo_bad, vec!["offset 4".to_owned(), "the file ends inside an event".to_owned()]),
        ("pstats file", pstats_bad, vec!["offset 450".to_owned(), "unknown type code".to_owned()]),
    ];
    for (title, bytes, wanted) in cases {
        let bad = dir.join("corrupt");
        std::fs::write(&bad, bytes).unwrap();
        let out = tachyon().arg("verify").arg(&bad).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{title}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains(&format!("not a valid {title}: ")), "{err}");
        for w in wanted {
            assert!(err.contains(&w), "{title}: {w:?} in {err}");
        }
    }
}

/// Issue 39: `convert --to pprof` of a Tachyon file wrote CPython's monotonic clock as
/// `time_nanos` (go pprof showed 1970-01-01 00:23); it is dated as the OTLP output dates it,
/// the last sample at the file's modification time.
#[test]
fn pprof_of_a_tachyon_file_is_dated_by_its_write_time() {
    use prost::Message;
    use std::io::Read;
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pprof-dated");
    std::fs::create_dir_all(&dir).unwrap();
    let pyb = dir.join("dated.pyb");
    std::fs::copy(example(), &pyb).unwrap();
    // 2026-01-02 03:04:05 UTC.
    let written = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_767_323_045);
    std::fs::File::options().write(true).open(&pyb).unwrap().set_modified(written).unwrap();
    let out = dir.join("dated.pb.gz");
    let run = tachyon().args(["convert", "--to", "pprof", "-o"]).arg(&out).arg(&pyb).output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&out).unwrap()).read_to_end(&mut raw).unwrap();
    let profile = tachyon::pprof::proto::Profile::decode(&raw[..]).unwrap();
    let end_ns = profile.time_nanos + profile.duration_nanos;
    assert!(profile.duration_nanos > 0, "{}", profile.duration_nanos);
    assert!((end_ns - 1_767_323_045_000_000_000).abs() < 1_000, "ends at {end_ns} ns, not at the file's write time");
}

/// `tachyon --help` lists each command in one short line (each fits an 100-column terminal
/// with its name); the long text is in `tachyon help COMMAND`.
#[test]
fn help_lists_each_command_in_one_short_line() {
    let out = tachyon().arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let commands: Vec<&str> =
        text.split("Commands:\n").nth(1).unwrap().lines().take_while(|l| l.starts_with("  ")).collect();
    assert!(commands.len() >= 10, "{text}");
    for line in &commands {
        assert!(line.chars().count() <= 100, "{} columns: {line}", line.chars().count());
    }
    for (command, long) in [("merge", "in memory that grows with distinct stacks"), ("push", "Retries with backoff")] {
        let out = tachyon().args(["help", command]).output().unwrap();
        assert!(String::from_utf8(out.stdout).unwrap().replace('\n', " ").contains(long), "tachyon help {command}");
    }
}

/// `--window SECONDS` counts only the last span of sample time: a file of 1,000 samples of
/// `early` in its first second and 100 of `late` ten seconds on (and one of `early` among
/// them); the last second holds `late`'s hundred and that one, the whole file everything.
#[test]
fn top_window_counts_only_the_last_seconds_of_sample_time() {
    use tachyon_core::{Frame, Writer, WriterConfig};
    let mut storage = tachyon_core::storage::VecWriterStorage::growing(4, 16384);
    let mut w =
        Writer::new(tachyon::memory::VecSink::default(), storage.storage(), WriterConfig::new(0, 1000)).unwrap();
    let stack = |f: &'static [u8]| [Frame::new(b"w.py", f), Frame::new(b"w.py", b"main")];
    for i in 0..1000u64 {
        w.write_thread_sample(i * 1000, 0, 1, 0, stack(b"early")).unwrap();
    }
    for i in 0..100u64 {
        let name: &'static [u8] = if i == 50 { b"early" } else { b"late" };
        w.write_thread_sample(10_000_000 + i * 1000, 0, 1, 0, stack(name)).unwrap();
    }
    w.finish().unwrap();
    let path = std::env::temp_dir().join(format!("tachyon-top-window-{}.pyb", std::process::id()));
    std::fs::write(&path, w.into_inner().into_inner()).unwrap();
    let own = |args: &[&str]| {
        let out = tachyon().args(["top", "--once", "--json"]).args(args).arg(&path).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let functions = v["functions"].as_array().unwrap().clone();
        let of =
            |name: &str| functions.iter().find(|f| f["function"] == name).map_or(0, |f| f["own"].as_u64().unwrap());
        (v["total"].as_u64().unwrap(), of("early"), of("late"), v["window_us"].as_u64())
    };
    assert_eq!(own(&[]), (1100, 1001, 99, None));
    assert_eq!(own(&["--window", "1"]), (100, 1, 99, Some(1_000_000)));
    // The span reaches back 1.1 s at most: none of the first second's samples.
    assert_eq!(own(&["--window", "5"]), (100, 1, 99, Some(5_000_000)));
    assert_eq!(own(&["--window", "11"]), (1100, 1001, 99, Some(11_000_000)));
    assert_eq!(tachyon().args(["top", "--once", "--window", "0"]).arg(&path).output().unwrap().status.code(), Some(2));
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn top_once_prints_the_table_and_json() {
    // Every vector: the JSON's shape, totals that add up (own sums to the samples with a
    // stack; no function's total exceeds them), and the text's header.
    for name in names() {
        let file = vectors().join(format!("{name}.x86_64.bin"));
        let out = tachyon().args(["top", "--once", "--json"]).arg(&file).output().unwrap();
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let total = v["total"].as_u64().unwrap();
        let functions = v["functions"].as_array().unwrap();
        let own: u64 = functions.iter().map(|f| f["own"].as_u64().unwrap()).sum();
        assert_eq!(own, total, "{name}");
        for f in functions {
            assert!(f["total"].as_u64().unwrap() <= total && f["own"].as_u64() <= f["total"].as_u64(), "{name}: {f}");
            assert!(f["function"].is_string() && f["file"].is_string() && f["line"].is_i64(), "{name}: {f}");
        }
        let text = tachyon().args(["top", "--once", "--limit", "2"]).arg(&file).output().unwrap();
        let text = String::from_utf8(text.stdout).unwrap();
        assert!(text.starts_with(&format!("Total samples: {total}   Threads: ")), "{name}: {text}");
        assert!(text.lines().count() <= 4, "{name}: {text}");
    }
    // Output that is not a terminal gets one table, as with --once.
    let file = vectors().join("08_opcodes.x86_64.bin");
    let piped = tachyon().arg("top").arg(&file).output().unwrap();
    let once = tachyon().args(["top", "--once"]).arg(&file).output().unwrap();
    assert!(piped.status.success() && !piped.stdout.is_empty());
    assert_eq!(piped.stdout, once.stdout);
    // Not a profile: exit 1 naming the file; a bad option: a usage error.
    let out = tachyon().args(["top", "--once", "Cargo.toml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Cargo.toml"));
    assert_eq!(tachyon().args(["top", "--sort", "size", "Cargo.toml"]).output().unwrap().status.code(), Some(2));
    // A recording CPython has not finalized: 64 zero bytes, then samples (its names come at
    // finalize), said as such.
    let unfinalized = std::env::temp_dir().join(format!("tachyon-top-unfinalized-{}.bin", std::process::id()));
    std::fs::write(&unfinalized, [vec![0u8; 64], vec![7u8; 500]].concat()).unwrap();
    let out = tachyon().args(["top", "--once"]).arg(&unfinalized).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not finalized"), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::remove_file(&unfinalized).unwrap();
}
