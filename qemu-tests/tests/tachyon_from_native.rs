//! Tachyon files made from native profiles (gperftools, pprof), read by CPython 3.15.2: its
//! `replay --collapsed` of our file names, per stack, the functions our collapsed output of
//! the input names, with the same counts. CPython names a frame `file:function:line`; the
//! comparison keeps the function and drops CPython's `tid:` root, summing stacks that differ
//! only in lines. The outputs CPython computes from frames alone (jsonl, the pstats tables and
//! file) made from the input directly equal CPython's `replay` of our Tachyon file: so each
//! is what CPython's collectors would compute from the input's stacks. The profiles are
//! libprofiler's x86_64 recordings, this run's and the committed one
//! ([`qemu_tests::recordings`]), symbolised with their binaries; the pprof is go's `-proto` of
//! each.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use qemu_tests::inputs::{cpython_replay, jsonl_run_id, oracle_ready, replay_table, root, TEXT_VARIANTS};
use tachyon::convert::{convert, ConvertError, Destination, Output};
use tachyon::gperftools::source::GperftoolsSource;
use tachyon::model::Source;
use tachyon::pprof::source::{PprofSource, SampleIndex};
use tachyon::symbolize::Symbolizer;
use tachyon_core::io::Cursor;

/// The x86_64 recordings, this run's and the committed one (`true`), each with a folder of its
/// own under the test's scratch folder `name`.
fn recordings(name: &str) -> [(PathBuf, bool, PathBuf); 2] {
    let work = |kind: &str| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name).join(kind);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    };
    [
        (qemu_tests::recordings::gperftools("x86_64", false), false, work("fresh")),
        (qemu_tests::recordings::gperftools("x86_64", true), true, work("committed")),
    ]
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

/// The outputs made from `source` directly against CPython's `replay` of `tachyon_file` (made
/// from the same source): jsonl byte for byte (given CPython's run id), every pstats table
/// byte for byte, and the pstats file as `qemu-tests/oracle/pstats_compare.py` compares them
/// (same dictionary; `pstats.Stats` prints both alike).
fn frame_outputs_match_cpython<S: Source>(mut source: impl FnMut() -> S, tachyon_file: &Path, work: &Path) {
    let replayed = work.join("replayed");
    let _ = std::fs::remove_dir_all(&replayed);
    cpython_replay(work, &[(tachyon_file.to_owned(), replayed.clone())]);
    let mut ours = |output: &Output| {
        let mut out = Vec::new();
        convert(&mut source(), output, Destination::Stream(&mut out), &mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
        out
    };
    let cpython_jsonl = std::fs::read_to_string(replayed.join("jsonl.jsonl")).expect("CPython's jsonl");
    let jsonl = ours(&Output::Jsonl { run_id: jsonl_run_id(&cpython_jsonl) });
    assert!(String::from_utf8(jsonl).unwrap() == cpython_jsonl, "jsonl differs from CPython's");
    for (variant, sort, limit, summary) in TEXT_VARIANTS {
        let printed = std::fs::read_to_string(replayed.join(format!("text-{variant}.txt"))).unwrap();
        let table = ours(&Output::PstatsText { sort, limit, summary });
        assert_eq!(String::from_utf8(table).unwrap(), replay_table(&printed), "pstats table {variant}");
    }
    let (mine, compat) = (replayed.join("ours.marshal"), replayed.join("ours-compat.marshal"));
    std::fs::write(&mine, ours(&Output::Pstats { compat: false })).unwrap();
    std::fs::write(&compat, ours(&Output::Pstats { compat: true })).unwrap();
    let manifest = work.join("pstats.tsv");
    let row = [replayed.join("pstats.marshal"), mine, compat].map(|p| p.display().to_string()).join("\t");
    std::fs::write(&manifest, row + "\n").unwrap();
    let out = Command::new(root().join("scripts/oracle-python.sh"))
        .arg("amd64")
        .arg(root().join("qemu-tests/oracle/pstats_compare.py"))
        .arg(&manifest)
        .output()
        .unwrap();
    assert!(out.status.success(), "pstats: {}", String::from_utf8_lossy(&out.stdout));
}

fn symbolised(dir: &Path) -> GperftoolsSource<Cursor<Vec<u8>>> {
    let mut source = GperftoolsSource::open(Cursor::new(std::fs::read(dir.join("workload.prof")).unwrap())).unwrap();
    source.symbolize(&mut Symbolizer::new(vec![dir.join("bins")]));
    source
}

#[test]
fn cpython_reads_a_gperftools_profile_made_tachyon_as_the_profile_reads() {
    oracle_ready();
    for (dir, committed, work) in recordings("tachyon-from-native") {
        let expected = ours(&mut symbolised(&dir));
        // (What the committed recording holds: an inlined function's frame.)
        assert!(!committed || expected.keys().any(|k| k.ends_with(";compare_keys;mix")), "{expected:?}");
        for big in [false, true] {
            let file = work.join(format!("gperftools-{big}.pyb"));
            tachyon_of(&mut symbolised(&dir), &file, big);
            assert_eq!(cpython_collapsed(&file, &work), expected, "{}: big-endian {big}", dir.display());
        }
        frame_outputs_match_cpython(|| symbolised(&dir), &work.join("gperftools-false.pyb"), &work);
    }
}

#[test]
fn cpython_reads_go_pprofs_proto_made_tachyon_as_it_reads() {
    oracle_ready();
    for (dir, _, work) in recordings("tachyon-from-pprof") {
        go_pprofs_proto_made_tachyon(&dir, &work);
    }
}

fn go_pprofs_proto_made_tachyon(dir: &Path, work: &Path) {
    let proto = std::fs::read(dir.join("go-pprof.pb.gz")).unwrap();
    let samples = SampleIndex::Name("samples".into());
    let expected = ours(&mut PprofSource::open(&proto[..], &samples).unwrap());
    let file = work.join("pprof.pyb");
    tachyon_of(&mut PprofSource::open(&proto[..], &samples).unwrap(), &file, false);
    assert_eq!(cpython_collapsed(&file, work), expected);
    frame_outputs_match_cpython(|| PprofSource::open(&proto[..], &samples).unwrap(), &file, work);
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
