//! pprof `profile.proto` as an input: files go pprof writes and files our converter writes
//! are read back to the samples they were made from.
//!
//! - go's: `go tool pprof -proto -symbolize=none` of a gperftools profile libprofiler recorded
//!   (this run's and the committed ones, [`qemu_tests::recordings`]) holds, per
//!   `--sample-index samples`, the same
//!   stacks and counts as the gperftools file read directly (go's legacy parser subtracts 1
//!   from return addresses as we do), and per the default index (the last: `cpu`
//!   nanoseconds) those counts times the period;
//! - ours: the symbolised pprof of the same profile reads back to the collapsed stacks the
//!   profile gives directly, and the pprof of every real gperftools vector to its samples;
//! - what go pprof cannot give, we add: collapsed stacks and the Firefox profiler's refusal
//!   named (pprof has no times).
//!
//! Which functions and inlined frames a recording holds is asserted of the committed ones only.

use std::collections::BTreeMap;
use std::path::PathBuf;
use tachyon_test_kit::fixtures;

use qemu_tests::recordings;

use tachyon::convert::{convert, ConvertError, Destination, Output};
use tachyon::gperftools::source::GperftoolsSource;
use tachyon::model::Source;
use tachyon::pprof::source::{PprofSource, SampleIndex};
use tachyon::symbolize::Symbolizer;
use tachyon_core::io::Cursor;
use tachyon_core::kind::FileKind;

/// The x86_64 recordings: this run's and the committed one (`true`).
fn x86_64() -> [(PathBuf, bool); 2] {
    [(recordings::gperftools("x86_64", false), false), (recordings::gperftools("x86_64", true), true)]
}

fn collapsed_of(source: &mut impl Source) -> BTreeMap<String, u64> {
    let mut out = Vec::new();
    convert(source, &Output::Collapsed, Destination::Stream(&mut out), &mut |_| {}).unwrap();
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| {
            let (stack, n) = l.rsplit_once(' ').unwrap();
            (stack.to_owned(), n.parse().unwrap())
        })
        .collect()
}

fn gperftools_collapsed(file: &[u8], symbolise: Option<PathBuf>) -> BTreeMap<String, u64> {
    let mut source = GperftoolsSource::open(Cursor::new(file)).unwrap();
    if let Some(bins) = symbolise {
        source.symbolize(&mut Symbolizer::new(vec![bins]));
    }
    collapsed_of(&mut source)
}

/// The collapsed stacks of a gperftools file with its stacks cleaned as go pprof cleans them
/// (as pprof output and go's `-proto` have them: go drops a second address that all records
/// but one in 32 share, which a real profile can meet).
fn go_cleaned_collapsed(file: &[u8], symbolise: Option<PathBuf>) -> BTreeMap<String, u64> {
    let mut source = GperftoolsSource::open(Cursor::new(file)).unwrap();
    if let Some(bins) = symbolise {
        source.symbolize(&mut Symbolizer::new(vec![bins]));
    }
    source.prepare(&Output::Pprof).unwrap();
    let info = source.info().clone();
    let mut c = tachyon::convert::collapsed::CollapsedCollector::new(info.naming, info.threads);
    source.replay(&mut c, &mut |_| {}).unwrap();
    c.lines(source.frames()).into_iter().collect()
}

fn pprof(file: &[u8], index: &SampleIndex) -> PprofSource {
    PprofSource::open(file, index).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn go_pprofs_proto_of_a_gperftools_profile_reads_to_its_samples() {
    for (dir, committed) in x86_64() {
        go_pprofs_proto_reads_to_its_samples(&dir, committed);
    }
}

fn go_pprofs_proto_reads_to_its_samples(dir: &std::path::Path, committed: bool) {
    let prof = std::fs::read(dir.join("workload.prof")).unwrap();
    let proto = std::fs::read(dir.join("go-pprof.pb.gz")).unwrap();
    let direct = go_cleaned_collapsed(&prof, None);
    assert!(!committed || direct.len() > 10, "{} stacks", direct.len());

    let mut by_count = pprof(&proto, &SampleIndex::Name("samples".into()));
    assert_eq!(by_count.info().kind, FileKind::Pprof { gzipped: true });
    assert_eq!(by_count.info().sample_interval_us, 1000, "1000 Hz recording");
    assert_eq!(collapsed_of(&mut by_count), direct);
    assert_eq!(collapsed_of(&mut pprof(&proto, &SampleIndex::Index(0))), direct);

    let mut by_time = pprof(&proto, &SampleIndex::Default);
    assert_eq!(&*by_time.info().mode, "cpu");
    let times: BTreeMap<String, u64> = direct.iter().map(|(k, n)| (k.clone(), n * 1_000_000)).collect();
    assert_eq!(collapsed_of(&mut by_time), times);

    for bad in [SampleIndex::Index(2), SampleIndex::Name("alloc_space".into())] {
        let err = PprofSource::open(&proto[..], &bad).err().unwrap().to_string();
        assert!(err.contains("--sample-index"), "{err}");
    }
}

#[test]
fn our_pprof_reads_back_to_the_stacks_it_was_made_from() {
    let mut files = Vec::new();
    for (dir, committed) in x86_64() {
        let name = if committed { "committed recording, symbolised" } else { "this run's recording, symbolised" };
        files.push((name.to_string(), std::fs::read(dir.join("workload.prof")).unwrap(), Some(dir.join("bins"))));
    }
    let vectors = fixtures::vectors("gperftools-2.10");
    for d in ["x86_64-le64-gperftools2.10", "i386-le32-gperftools2.10", "s390x-be64-gperftools2.10-qemu"] {
        let path = std::fs::read_dir(vectors.join(d))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|x| x == "prof"))
            .unwrap();
        files.push((d.to_string(), std::fs::read(path).unwrap(), None));
    }
    for (name, file, bins) in files {
        let expected = go_cleaned_collapsed(&file, bins.clone());
        let mut source = GperftoolsSource::open(Cursor::new(&file[..])).unwrap();
        if let Some(bins) = bins {
            source.symbolize(&mut Symbolizer::new(vec![bins]));
        }
        let mut gz = Vec::new();
        convert(&mut source, &Output::Pprof, Destination::Stream(&mut gz), &mut |_| {}).unwrap();
        // Our pprof's default type is the time; the count is index 0.
        let mut back = pprof(&gz, &SampleIndex::Name("samples".into()));
        assert_eq!(collapsed_of(&mut back), expected, "{name}");
        if name.starts_with("committed") {
            assert!(expected.keys().any(|k| k.ends_with(";hash_block;mix")), "{name}: inlined frames");
        }
    }
}

#[test]
fn pprof_input_to_every_output_that_needs_no_times() {
    let proto = std::fs::read(recordings::gperftools("x86_64", true).join("go-pprof.pb.gz")).unwrap();
    let samples = SampleIndex::Name("samples".into());
    let total = pprof(&proto, &samples).info().expected_samples;
    for output in [
        Output::Flamegraph { title: "t".into() },
        Output::Speedscope { name: "s".into() },
        Output::Pprof,
        Output::Pstats { compat: true },
        Output::Jsonl { run_id: Some("0".repeat(32)) },
    ] {
        let mut out = Vec::new();
        let n = convert(&mut pprof(&proto, &samples), &output, Destination::Stream(&mut out), &mut |_| {})
            .unwrap_or_else(|e| panic!("{output:?}: {e}"));
        assert_eq!(n, total, "{output:?}");
        assert!(!out.is_empty(), "{output:?}");
    }
    let err = convert(&mut pprof(&proto, &samples), &Output::Gecko, Destination::Stream(&mut Vec::new()), &mut |_| {})
        .unwrap_err();
    assert!(matches!(err, ConvertError::Unsupported { input: FileKind::Pprof { .. }, .. }), "{err}");
}

#[test]
fn damaged_pprof_files_are_errors_not_panics() {
    let proto = std::fs::read(recordings::gperftools("x86_64", true).join("go-pprof.pb.gz")).unwrap();
    let mut raw = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&proto[..]), &mut raw).unwrap();
    let mut errors = 0;
    for cut in (0..raw.len()).step_by(7) {
        for damaged in [raw[..cut].to_vec(), {
            let mut d = raw.clone();
            d[cut] ^= 0x5a;
            d
        }] {
            match PprofSource::open(&damaged[..], &SampleIndex::Default) {
                Ok(mut s) => {
                    // A message that still decodes replays or says which reference is wrong.
                    let _ = convert(&mut s, &Output::Collapsed, Destination::Stream(&mut Vec::new()), &mut |_| {});
                }
                Err(_) => errors += 1,
            }
        }
    }
    assert!(errors > 0);
    // Through the file layer too (the command's path).
    let path = std::env::temp_dir().join(format!("tachyon-cut-{}.pb", std::process::id()));
    std::fs::write(&path, &raw[..raw.len() / 2]).unwrap();
    let file = std::io::BufReader::new(std::fs::File::open(&path).unwrap());
    assert!(PprofSource::open(file, &SampleIndex::Default).is_err());
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn go_pprofs_proto_made_gperftools_again_holds_its_samples() {
    for (dir, _) in x86_64() {
        go_pprofs_proto_made_gperftools_again(&dir);
    }
}

fn go_pprofs_proto_made_gperftools_again(dir: &std::path::Path) {
    let proto = std::fs::read(dir.join("go-pprof.pb.gz")).unwrap();
    let out = std::env::temp_dir().join(format!("tachyon-from-go-{}.prof", std::process::id()));
    let mut source = pprof(&proto, &SampleIndex::Counts);
    let total = source.info().expected_samples;
    let output = Output::Gperftools { word: None, big_endian: None };
    convert(&mut source, &output, Destination::File(&out), &mut |_| {}).unwrap();
    // Our reader finds the proto's stacks in it (return addresses given back their 1).
    let again = std::fs::read(&out).unwrap();
    assert_eq!(gperftools_collapsed(&again, None), collapsed_of(&mut pprof(&proto, &SampleIndex::Counts)));
    // go pprof reads it, all its samples. (Its stacks go through go's legacy cleaning a
    // second time, which may find another address to drop: compared by total.)
    let raw =
        std::process::Command::new("go").args(["tool", "pprof", "-raw", "-symbolize=none"]).arg(&out).output().unwrap();
    assert!(raw.status.success(), "{}", String::from_utf8_lossy(&raw.stderr));
    let go_total: u64 =
        qemu_tests::gperftools_oracle::go_samples(&String::from_utf8(raw.stdout).unwrap()).values().sum();
    assert_eq!(go_total, total);
    std::fs::remove_file(&out).unwrap();
}

#[test]
fn go_pprofs_bare_addresses_are_symbolised_as_the_gperftools_profile_is() {
    for (arch, dir, committed) in recordings::every_gperftools() {
        let proto = std::fs::read(dir.join("go-pprof.pb.gz")).unwrap();
        let prof = std::fs::read(dir.join("workload.prof")).unwrap();
        let mut source = pprof(&proto, &SampleIndex::Name("samples".into()));
        let mut symbolizer = Symbolizer::new(vec![dir.join("bins")]);
        source.symbolize(&mut symbolizer);
        let ours = collapsed_of(&mut source);
        if committed {
            assert!(ours.keys().any(|k| k.contains(";middle;sort_keys;lib_sort;sort_range")), "{arch}: {ours:?}");
        }
        assert_eq!(ours, go_cleaned_collapsed(&prof, Some(dir.join("bins"))), "{arch}");
    }
}
