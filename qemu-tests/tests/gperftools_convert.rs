//! gperftools CPU profiles through the conversion pipeline, on the real libprofiler 2.10 files
//! (x86_64, i386, s390x; `vectors/gperftools-2.10/`), against what the real readers printed
//! for them: collapsed stacks and pprof samples are go pprof's samples (`-raw
//! -symbolize=none`: return addresses minus one, equal stacks summed), pstats totals are
//! google-pprof's, `--to gperftools` gives every file (real, edge variants, the one the test
//! command records) back byte for byte and, in another slot width or byte order, a file in
//! which go pprof finds the same samples and which converts back to the original bytes, and
//! the outputs that need what the format lacks refuse by name.

use std::collections::BTreeMap;
use std::io::Read as _;
use tachyon_test_kit::fixtures;

use prost::Message;
use qemu_tests::gperftools_oracle::{go_samples, perl_total};
use tachyon::convert::{convert, ConvertError, Destination, Output};
use tachyon::gperftools::source::GperftoolsSource;
use tachyon::model::Source;
use tachyon::pprof::proto::Profile;
use tachyon::pstats::replay::SortOrder;
use tachyon_core::gperftools::{RunTimeWord, Word};
use tachyon_core::io::Cursor;
use tachyon_core::kind::FileKind;

const DIRS: [&str; 3] = ["x86_64-le64-gperftools2.10", "i386-le32-gperftools2.10", "s390x-be64-gperftools2.10-qemu"];

fn dir(d: &str) -> std::path::PathBuf {
    fixtures::vectors("gperftools-2.10").join(d)
}

/// The profile, go pprof's raw text and google-pprof's text of each real file.
fn real() -> Vec<(String, Vec<u8>, String, String)> {
    DIRS.iter()
        .map(|d| {
            let prof = std::fs::read_dir(dir(d))
                .unwrap()
                .map(|e| e.unwrap().path())
                .find(|p| p.extension().is_some_and(|x| x == "prof"))
                .unwrap();
            let text = |f: &str| std::fs::read_to_string(dir(d).join(f)).unwrap();
            (d.to_string(), std::fs::read(prof).unwrap(), text("go-pprof.raw.txt"), text("google-pprof.text.txt"))
        })
        .collect()
}

fn run(file: &[u8], output: &Output) -> Result<Vec<u8>, String> {
    let mut source = GperftoolsSource::open(Cursor::new(file)).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    convert(&mut source, output, Destination::Stream(&mut out), &mut |_| {}).map_err(|e| e.to_string())?;
    Ok(out)
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.strip_prefix("0x").unwrap_or_else(|| panic!("{s} is an address")), 16).unwrap()
}

#[test]
fn collapsed_stacks_are_go_pprofs_samples() {
    for (name, file, go_raw, _) in real() {
        let text = String::from_utf8(run(&file, &Output::Collapsed).unwrap()).unwrap();
        let mut ours: BTreeMap<Vec<u64>, u64> = BTreeMap::new();
        for line in text.lines() {
            // Native frames: no `tid:` root, root first, named by address without symbols.
            let (stack, count) = line.rsplit_once(' ').unwrap();
            let stack: Vec<u64> = stack.split(';').rev().map(hex).collect();
            *ours.entry(stack).or_insert(0) += count.parse::<u64>().unwrap();
        }
        assert_eq!(ours, go_samples(&go_raw), "{name}");
        // Sorted as CPython sorts: by count, descending.
        let counts: Vec<u64> = text.lines().map(|l| l.rsplit_once(' ').unwrap().1.parse().unwrap()).collect();
        assert!(counts.windows(2).all(|w| w[0] >= w[1]), "{name}: {counts:?}");
    }
}

#[test]
fn pprof_has_go_pprofs_samples_addresses_and_mappings() {
    for (name, file, go_raw, _) in real() {
        let mut gz = Vec::new();
        flate2::read::GzDecoder::new(&run(&file, &Output::Pprof).unwrap()[..]).read_to_end(&mut gz).unwrap();
        let p = Profile::decode(&gz[..]).unwrap();
        let s = |i: i64| p.string_table[i as usize].as_str();
        let types: Vec<(&str, &str)> = p.sample_type.iter().map(|t| (s(t.r#type), s(t.unit))).collect();
        assert_eq!(types, [("samples", "count"), ("cpu", "nanoseconds")], "{name}");
        assert!(go_raw.contains(&format!("\nPeriod: {}\n", p.period)), "{name}: period {}", p.period);
        let address: BTreeMap<u64, u64> = p.location.iter().map(|l| (l.id, l.address)).collect();
        let mut ours: BTreeMap<Vec<u64>, u64> = BTreeMap::new();
        for sample in &p.sample {
            assert!(sample.label.is_empty(), "{name}: no thread labels for a profile without threads");
            assert_eq!(sample.value[1], sample.value[0] * p.period, "{name}");
            let stack = sample.location_id.iter().map(|id| address[id]).collect();
            *ours.entry(stack).or_insert(0) += sample.value[0] as u64;
        }
        assert_eq!(ours, go_samples(&go_raw), "{name}");
        // Every address lies in the mapping it names; without symbols, no function names.
        for l in &p.location {
            assert!(l.line.is_empty(), "{name}: location {} has lines", l.id);
            let m = &p.mapping[l.mapping_id as usize - 1];
            assert!(m.memory_start <= l.address && l.address < m.memory_limit, "{name}: {:#x}", l.address);
        }
        let files: Vec<&str> = p.mapping.iter().map(|m| s(m.filename)).collect();
        assert!(files.iter().any(|f| f.ends_with("libprofiler.so.0.5.5")), "{name}: {files:?}");
    }
}

#[test]
fn pstats_totals_are_google_pprofs_and_every_aggregate_output_is_made() {
    for (name, file, _, perl_text) in real() {
        let total = perl_total(&perl_text);
        let mut source = GperftoolsSource::open(Cursor::new(&file[..])).unwrap();
        assert_eq!(source.info().kind, FileKind::Gperftools);
        assert_eq!(source.info().expected_samples, total, "{name}");
        let mut sink = Vec::new();
        let n = convert(&mut source, &Output::Collapsed, Destination::Stream(&mut sink), &mut |_| {}).unwrap();
        assert_eq!(n, total, "{name}: samples replayed");

        let text = String::from_utf8(
            run(&file, &Output::PstatsText { sort: SortOrder::Nsamples, limit: None, summary: false }).unwrap(),
        )
        .unwrap();
        // Rows "direct/cumulative  ..."; direct samples add up to the total.
        let direct: u64 = text
            .lines()
            .filter_map(|l| l.split_whitespace().next()?.split_once('/'))
            .filter_map(|(d, _)| d.parse::<u64>().ok())
            .sum();
        assert_eq!(direct, total, "{name}:\n{text}");

        let speedscope: serde_json::Value =
            serde_json::from_slice(&run(&file, &Output::Speedscope { name: name.clone() }).unwrap()).unwrap();
        let weights: u64 =
            speedscope["profiles"][0]["weights"].as_array().unwrap().iter().map(|w| w.as_u64().unwrap()).sum();
        assert_eq!(weights, total * 10_000, "{name}: weights in µs");

        let svg = String::from_utf8(run(&file, &Output::Flamegraph { title: name.clone() }).unwrap()).unwrap();
        assert!(svg.contains(&format!("all ({total} samples, 100%)")), "{name}");
        assert!(run(&file, &Output::Jsonl { run_id: Some("0".repeat(32)) }).is_ok(), "{name}");
        assert!(run(&file, &Output::Pstats { compat: true }).is_ok(), "{name}");
    }
}

#[test]
fn the_firefox_profiler_needs_times_and_refuses_by_name() {
    let (_, file, _, _) = &real()[0];
    let mut source = GperftoolsSource::open(Cursor::new(&file[..])).unwrap();
    let err = convert(&mut source, &Output::Gecko, Destination::Stream(&mut Vec::new()), &mut |_| {}).unwrap_err();
    match err {
        ConvertError::Unsupported { output: o, input: FileKind::Gperftools, why } => {
            assert_eq!(o, Output::Gecko.kind());
            assert!(why.contains("time"), "{why}");
        }
        e => panic!("{e}"),
    }
}

/// Every profile file: the real ones, their edge variants, and those recorded by the test
/// command (`TACHYON_GPERFTOOLS_PROFILES`: every arch of `RECORDED_ARCHES`).
fn every_file() -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = real().into_iter().map(|(name, file, _, _)| (name, file)).collect();
    let edge = dir("edge-synthetic");
    let mut names: Vec<_> = std::fs::read_dir(&edge).unwrap().map(|e| e.unwrap().path()).collect();
    names.sort();
    for p in names.into_iter().filter(|p| p.extension().is_some_and(|x| x == "prof")) {
        files.push((p.display().to_string(), std::fs::read(&p).unwrap()));
    }
    let recorded = std::env::var_os("TACHYON_GPERFTOOLS_PROFILES")
        .map(std::path::PathBuf::from)
        .expect("TACHYON_GPERFTOOLS_PROFILES (set by scripts/test-all.sh)");
    for arch in qemu_tests::gperftools_oracle::RECORDED_ARCHES {
        let path = recorded.join(arch).join("workload.prof");
        files.push((path.display().to_string(), std::fs::read(&path).unwrap()));
    }
    files
}

fn gperftools(word: Option<RunTimeWord>, big_endian: Option<bool>) -> Output {
    Output::Gperftools { word, big_endian }
}

#[test]
fn gperftools_output_of_a_gperftools_file_is_the_same_bytes() {
    let files = every_file();
    assert!(files.len() >= 40, "{} files", files.len());
    for (name, file) in files {
        let again = run(&file, &gperftools(None, None)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(again == file, "{name}: {} bytes re-encoded differ from the {} read", again.len(), file.len());
    }
}

#[test]
fn other_slot_widths_and_byte_orders_keep_go_pprofs_samples_and_convert_back() {
    let work = std::env::temp_dir().join(format!("tachyon-gperftools-formats-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    for (name, file, go_raw, perl_text) in real() {
        let wide = name.contains("64");
        let original = (Some(if wide { RunTimeWord::Eight } else { RunTimeWord::Four }), Some(name.contains("s390x")));
        for word in [RunTimeWord::Four, RunTimeWord::Eight] {
            for big in [false, true] {
                let case =
                    format!("{name} as {}-byte {}", word.bytes(), if big { "big-endian" } else { "little-endian" });
                let converted = run(&file, &gperftools(Some(word), Some(big)));
                if wide && word == RunTimeWord::Four {
                    // 64-bit addresses do not fit: refused, naming the first that does not.
                    let err = converted.unwrap_err();
                    assert!(err.contains("does not fit a 4-byte slot"), "{case}: {err}");
                    continue;
                }
                let converted = converted.unwrap_or_else(|e| panic!("{case}: {e}"));
                let mut source = GperftoolsSource::open(Cursor::new(&converted[..])).unwrap();
                assert_eq!(source.info().expected_samples, perl_total(&perl_text), "{case}");
                assert_eq!(
                    convert(&mut source, &Output::Collapsed, Destination::Stream(&mut Vec::new()), &mut |_| {})
                        .unwrap(),
                    perl_total(&perl_text),
                    "{case}"
                );
                let path = work.join("converted.prof");
                std::fs::write(&path, &converted).unwrap();
                let out = std::process::Command::new("go")
                    .args(["tool", "pprof", "-raw", "-symbolize=none"])
                    .arg(&path)
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{case}: {}", String::from_utf8_lossy(&out.stderr));
                assert_eq!(go_samples(&String::from_utf8(out.stdout).unwrap()), go_samples(&go_raw), "{case}");
                let back = run(&converted, &gperftools(original.0, original.1)).unwrap();
                assert!(back == file, "{case}: converted back, {} bytes differ from the {}", back.len(), file.len());
            }
        }
    }
    std::fs::remove_dir_all(&work).unwrap();
}

#[test]
fn a_build_attribute_names_the_binaries_of_later_maps_lines() {
    let file = std::fs::read(dir("edge-synthetic").join("x64-build_var.prof")).unwrap();
    let source = GperftoolsSource::open(Cursor::new(&file[..])).unwrap();
    let files: Vec<&str> = source.frames().mappings.iter().map(|m| m.file.as_str()).collect();
    assert!(files.contains(&"/tmp/research/gperf/src/burn-x86_64"), "{files:?}");
    assert!(!files.iter().any(|f| f.contains("$build")), "{files:?}");
}
