//! pstats files as input: what the command does with them, and bad input through the loader.
//! (Their printed text is compared with Python's own in `qemu-tests/tests/pstats_text.rs`.)

use std::path::{Path, PathBuf};
use std::time::Instant;
use tachyon_test_kit::fixtures;

use assert_cmd::Command;
use tachyon::pstats::{load, PstatsError};

fn vectors() -> Vec<PathBuf> {
    let files = fixtures::files(&fixtures::vectors("pstats"), ".pstats");
    assert!(files.len() >= 20);
    files
}

fn vector(name: &str) -> PathBuf {
    fixtures::vectors("pstats").join(name)
}

fn tachyon() -> Command {
    Command::cargo_bin("tachyon").unwrap()
}

#[test]
fn outputs_made_of_stacks_are_refused_with_the_reason() {
    for to in
        ["collapsed", "flamegraph", "gecko", "speedscope", "tachyon", "pprof", "otlp", "otlp-json", "jsonl", "mojo"]
    {
        let out =
            tachyon().args(["convert", "--to", to]).arg(vector("cprofile_py311_simple.pstats")).assert().failure();
        let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(err.contains("caller→callee edges"), "--to {to}: {err}");
    }
}

#[test]
fn callgrind_of_a_pstats_file_has_its_own_times_in_nanoseconds() {
    // The file's two functions: `tt` 1.7e-07 s and 2.166e-06 s (read with Python's marshal).
    let out =
        tachyon().args(["convert", "--to", "callgrind"]).arg(vector("cprofile_py311_tiny.pstats")).assert().success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let body = text.split_once("summary: ").unwrap().1;
    assert_eq!(
        body,
        "2336\n\nfl=(1) ~\nfn=(1) <method 'disable' of '_lsprof.Profiler' objects>\n0 170\n\n\
         fl=(1)\nfn=(2) <built-in method builtins.sum>\n0 2166\n"
    );
}

#[test]
fn reencoding_drops_the_sampled_marker_unless_asked() {
    let dir = tempdir("reencode");
    let input = vector("sampling_py315_workload.pstats");
    assert!(load(&std::fs::read(&input).unwrap()).unwrap().sampled);
    let plain = dir.join("plain.pstats");
    let kept = dir.join("kept.pstats");
    tachyon().args(["convert", "--to", "pstats", "-o"]).arg(&plain).arg(&input).assert().success();
    tachyon()
        .args(["convert", "--to", "pstats", "--keep-sampled-marker", "-o"])
        .arg(&kept)
        .arg(&input)
        .assert()
        .success();
    let original = load(&std::fs::read(&input).unwrap()).unwrap();
    for (path, marker) in [(&plain, false), (&kept, true)] {
        let again = load(&std::fs::read(path).unwrap()).unwrap();
        assert_eq!(again.sampled, marker);
        assert_eq!(again.entries.len(), original.entries.len());
        for (a, b) in again.entries.iter().zip(&original.entries) {
            assert_eq!(a.key, b.key);
            assert_eq!(format!("{:?}", (a.cc, a.nc, a.tt, a.ct)), format!("{:?}", (b.cc, b.nc, b.tt, b.ct)));
            assert_eq!(a.callers.len(), b.callers.len());
        }
    }
}

#[test]
fn options_of_the_other_inputs_are_refused() {
    let pstats = vector("cprofile_py311_simple.pstats");
    let out = tachyon().args(["convert", "--to", "pstats-text", "--sort", "nosuchkey"]).arg(&pstats).assert().failure();
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("not a sort key"));
    tachyon().args(["convert", "--to", "pstats-text", "--no-summary"]).arg(&pstats).assert().failure();
    let pyb = fixtures::root().join("examples/stdlib_work.pyb");
    let out = tachyon().args(["convert", "--to", "pstats-text", "--strip-dirs"]).arg(&pyb).assert().failure();
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("pstats input only"));
    let out = tachyon().args(["convert", "--to", "pstats-text", "--sort", "calls"]).arg(&pyb).assert().failure();
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("nsamples"));
    // A prefix pstats expands (unique) works; one it drops (ambiguous) does not.
    tachyon().args(["convert", "--to", "pstats-text", "--sort", "cu"]).arg(&pstats).assert().success();
    tachyon().args(["convert", "--to", "pstats-text", "--sort", "cum"]).arg(&pstats).assert().failure();
    // Restrictions: pstats input only, not beside --limit, and a pattern the regex crate
    // cannot evaluate is refused, named as Python would show it.
    let out = tachyon().args(["convert", "--to", "pstats-text", "--restrict", "0.5"]).arg(&pyb).assert().failure();
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("--restrict applies to pstats input only"));
    let both = ["convert", "--to", "pstats-text", "--restrict", "0.5", "--limit", "3"];
    tachyon().args(both).arg(&pstats).assert().failure();
    for pattern in ["(", "(?<=a)b"] {
        let out =
            tachyon().args(["convert", "--to", "pstats-text", "--restrict", pattern]).arg(&pstats).assert().failure();
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(stderr.contains(&format!("the restriction '{pattern}': not a regular expression")), "{stderr}");
    }
    let restricted = ["convert", "--to", "pstats-text", "--restrict", "py", "--restrict", "1"];
    let out = tachyon().args(restricted).arg(&pstats).assert().success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(text.contains("due to restriction <'py'>") && text.contains("due to restriction <1>"), "{text}");
}

fn tempdir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("pstats-input-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn offset_of(e: &PstatsError) -> usize {
    match e {
        PstatsError::Marshal(m) => m.offset,
        PstatsError::Shape { offset, .. } => *offset,
    }
}

#[test]
fn truncated_and_corrupted_files_are_typed_errors() {
    let mut errors = 0;
    for file in vectors() {
        let bytes = std::fs::read(&file).unwrap();
        // Every byte of the small files; about 600 places spread over the large ones.
        let step = (bytes.len() / 600).max(1);
        for cut in (0..bytes.len()).step_by(step) {
            if let Err(e) = load(&bytes[..cut]) {
                assert!(offset_of(&e) <= cut, "{}: cut at {cut}: {e}", file.display());
                errors += 1;
            }
        }
        for at in (0..bytes.len()).step_by(step) {
            for flip in [0xff, 0x80, 0x01] {
                let mut b = bytes.clone();
                b[at] ^= flip;
                if let Err(e) = load(&b) {
                    assert!(offset_of(&e) <= b.len(), "{e}");
                    errors += 1;
                }
            }
        }
    }
    assert!(errors > 5_000, "{errors}");
}

#[test]
fn hostile_structures_are_refused_in_bounded_time_and_memory() {
    // Nesting a million deep.
    let deep: Vec<u8> = std::iter::repeat([b'[', 1, 0, 0, 0]).take(1_000_000).flatten().collect();
    let e = load(&deep).unwrap_err();
    assert!(e.to_string().contains("deeper than 200"), "{e}");
    // A length of 2^31 - 1 with nothing behind it.
    assert!(load(b"{(\xff\xff\xff\x7f").unwrap_err().to_string().contains("length"));
    // References forward and to themselves.
    assert!(load(b"{r\x05\x00\x00\x00").is_err());
    assert!(load(b"\xfbr\x00\x00\x00\x00N0").is_err());
    // Keys that are not 3-tuples; a value that is not 5 items.
    assert!(load(b"{)\x02z\x01ai\x01\x00\x00\x00N0").unwrap_err().to_string().contains("2 items"));
    assert!(load(b"{z\x01aN0").unwrap_err().to_string().contains("not a tuple"));
    // Doubling references: 40 tuples each holding the previous one twice would be 2^40
    // items if copied; shared, they load (and are refused as a dict) at once.
    let mut b = vec![b'{', 0xa9, 2, b'N', b'N'];
    for i in 0..40u32 {
        b.extend_from_slice(&[0xa9, 2, b'r']);
        b.extend_from_slice(&i.to_le_bytes());
        b.push(b'r');
        b.extend_from_slice(&i.to_le_bytes());
    }
    b.extend_from_slice(b"N0");
    let start = Instant::now();
    assert!(load(&b).is_err());
    assert!(start.elapsed().as_secs() < 5, "doubling references took {:?}", start.elapsed());
}

#[test]
fn merge_adds_pstats_files_and_refuses_others() {
    let dir = tempdir("merge");
    let a = vector("cprofile_py311_simple.pstats");
    let out = dir.join("sum.pstats");
    tachyon().arg("merge").arg(&a).arg(&a).arg("-o").arg(&out).assert().success();
    let one = load(&std::fs::read(&a).unwrap()).unwrap();
    let sum = load(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(sum.entries.len(), one.entries.len());
    for (s, o) in sum.entries.iter().zip(&one.entries) {
        // The same file twice: every count doubled.
        assert_eq!(format!("{:?}", (s.nc, s.cc)), format!("{:?}", (o.nc.py_double(), o.cc.py_double())));
    }
    let pyb = fixtures::root().join("examples/stdlib_work.pyb");
    let failed = tachyon().arg("merge").arg(&a).arg(&pyb).arg("-o").arg(&out).assert().failure();
    assert!(String::from_utf8_lossy(&failed.get_output().stderr).contains("one format"));
    tachyon().arg("merge").arg(&a).arg("-o").arg(&out).assert().failure();
}

trait Double {
    fn py_double(self) -> Self;
}

impl Double for tachyon::pstats::Num {
    fn py_double(self) -> Self {
        use tachyon::pstats::{Num, NumValue};
        match self.value() {
            NumValue::Int(i) => Num::int(2 * i).unwrap(),
            NumValue::Float(f) => Num::float(2.0 * f),
        }
    }
}
