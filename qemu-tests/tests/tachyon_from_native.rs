//! Tachyon files made from native profiles (gperftools, pprof), read by CPython 3.15.2: its
//! `replay --collapsed` of our file names, per stack, the functions our collapsed output of
//! the input names, with the same counts. CPython names a frame `file:function:line`; the
//! comparison keeps the function and drops CPython's `tid:` root, summing stacks that differ
//! only in lines. The profile is the one the test command records (`TACHYON_GPERFTOOLS_PROFILES`),
//! symbolised with its binaries; the pprof is go's `-proto` of it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use qemu_tests::inputs::{oracle_ready, root};
use tachyon::convert::{convert, ConvertError, Destination, Output};
use tachyon::model::Source;
use tachyon::sources::gperftools::GperftoolsSource;
use tachyon::sources::pprof::{PprofSource, SampleIndex};
use tachyon::symbolize::Symbolizer;
use tachyon_core::io::Cursor;

fn recorded() -> PathBuf {
    std::env::var_os("TACHYON_GPERFTOOLS_PROFILES")
        .map(|d| PathBuf::from(d).join("x86_64"))
        .expect("TACHYON_GPERFTOOLS_PROFILES (set by scripts/test-all.sh)")
}

fn lines(text: &str, function_of: impl Fn(&str) -> String, skip_root: bool) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let (stack, n) = line.rsplit_once(' ').unwrap();
        let frames: Vec<String> = stack.split(';').skip(usize::from(skip_root)).map(&function_of).collect();
        *out.entry(frames.join(";")).or_insert(0) += n.parse::<u64>().unwrap();
    }
    out
}

/// CPython's collapsed lines of `file`, by function names.
fn cpython_collapsed(file: &Path, work: &Path) -> BTreeMap<String, u64> {
    let out = work.join("cpython.collapsed");
    let status = Command::new(root().join("scripts/oracle-python.sh"))
        .args(["amd64", "-m", "profiling.sampling", "replay", "--collapsed"])
        .arg(file)
        .arg("-o")
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "CPython replay of {}", file.display());
    // `basename:function:line`: the function is between the first and the last colon.
    let function = |f: &str| {
        let (rest, _line) = f.rsplit_once(':').unwrap();
        rest.split_once(':').map_or(rest, |(_, name)| name).to_owned()
    };
    lines(&std::fs::read_to_string(out).unwrap(), function, true)
}

fn ours(source: &mut impl Source) -> BTreeMap<String, u64> {
    let mut out = Vec::new();
    convert(source, &Output::Collapsed, Destination::Stream(&mut out), &mut |_| {}).unwrap();
    lines(&String::from_utf8(out).unwrap(), str::to_owned, false)
}

fn tachyon_of(source: &mut impl Source, path: &Path, big_endian: bool) {
    let output = Output::Tachyon { big_endian: Some(big_endian), compression: None };
    convert(source, &output, Destination::File(path), &mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
}

fn symbolised(dir: &Path) -> GperftoolsSource<Cursor<Vec<u8>>> {
    let mut source = GperftoolsSource::open(Cursor::new(std::fs::read(dir.join("workload.prof")).unwrap())).unwrap();
    source.symbolize(&mut Symbolizer::new(vec![dir.join("bins")]));
    source
}

#[test]
fn cpython_reads_a_gperftools_profile_made_tachyon_as_the_profile_reads() {
    oracle_ready();
    let dir = recorded();
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tachyon-from-native");
    std::fs::create_dir_all(&work).unwrap();
    let expected = ours(&mut symbolised(&dir));
    assert!(expected.keys().any(|k| k.ends_with(";compare_keys;mix")), "{expected:?}");
    for big in [false, true] {
        let file = work.join(format!("gperftools-{big}.pyb"));
        tachyon_of(&mut symbolised(&dir), &file, big);
        assert_eq!(cpython_collapsed(&file, &work), expected, "big-endian {big}");
    }
}

#[test]
fn cpython_reads_go_pprofs_proto_made_tachyon_as_it_reads() {
    oracle_ready();
    let dir = recorded();
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tachyon-from-pprof");
    std::fs::create_dir_all(&work).unwrap();
    let proto = std::fs::read(dir.join("go-pprof.pb.gz")).unwrap();
    let samples = SampleIndex::Name("samples".into());
    let expected = ours(&mut PprofSource::open(&proto[..], &samples).unwrap());
    let file = work.join("pprof.pyb");
    tachyon_of(&mut PprofSource::open(&proto[..], &samples).unwrap(), &file, false);
    assert_eq!(cpython_collapsed(&file, &work), expected);
    // Counting nanoseconds (the default, cpu) would make a sample of each: refused, saying how.
    let mut by_time = PprofSource::open(&proto[..], &SampleIndex::Default).unwrap();
    let err = convert(
        &mut by_time,
        &Output::Tachyon { big_endian: None, compression: None },
        Destination::Stream(&mut Vec::new()),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(matches!(&err, ConvertError::Encode(m) if m.contains("--sample-index samples")), "{err}");
}
