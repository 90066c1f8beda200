//! The viewer formats read by the viewers' own tools, over the same files as the CPython
//! replay test (tools from `scripts/viewer-tools.sh`; this fails, never skips, without them):
//!
//! - pprof: `go tool pprof -raw` reads every file; its samples are exactly our collapsed
//!   stacks (one per thread and stack, same counts), and `-top` runs;
//! - speedscope: valid against speedscope's published schema, indices and weights consistent;
//! - Firefox profiler: the processed format's tables consistent (it has no published schema);
//! - flame graphs: `rsvg-convert` renders each SVG, whose root counts every sample with a stack;
//! - callgrind: valgrind's `callgrind_annotate` reads it, its totals pstats' and the stacks'
//!   (of the native recordings and the MOJO and pstats files too: a pstats file's own times);
//! - Perfetto: the `perfetto` package's trace protos decode it to the samples `dump` gives (of
//!   the MOJO files too, on their threads' clocks).

use std::path::Path;
use std::process::Command;
use tachyon_test_kit::fixtures;

use qemu_tests::inputs::{convert_file, inputs, root, viewer_tools};
use tachyon::convert::{convert, Destination, Output};
use tachyon::file::FileSource;
use tachyon::gperftools::source::GperftoolsSource;
use tachyon::model::Source;
use tachyon::pprof::source::{PprofSource, SampleIndex};
use tachyon::pstats::source::{PstatsOptions, PstatsSource};
use tachyon_core::io::Cursor;

const SEED: u64 = 0x71e_e4e5;

/// `(samples, total count)` of `go tool pprof -raw` output.
fn pprof_raw_samples(text: &str) -> Option<(usize, u64)> {
    let body = text.split("\nSamples:\n").nth(1)?.split("\nLocations").next()?;
    let mut samples = 0;
    let mut total = 0;
    for line in body.lines().skip(1) {
        // "     COUNT   NANOS: LOCATION IDS" lines; label lines have no colon after numbers.
        let Some((values, _)) = line.split_once(':') else { continue };
        let mut nums = values.split_whitespace();
        if let (Some(Ok(n)), Some(Ok(_))) = (nums.next().map(str::parse::<u64>), nums.next().map(str::parse::<u64>)) {
            samples += 1;
            total += n;
        }
    }
    Some((samples, total))
}

#[test]
fn viewers_read_our_outputs() {
    let tools = viewer_tools();
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("viewer-formats");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let files = inputs(&work, SEED);
    let mut failures: Vec<String> = Vec::new();
    let mut manifest = String::new();
    let mut svgs = 0;
    for (i, file) in files.iter().enumerate() {
        let name = file.display().to_string();
        let Ok(collapsed) = convert_file(file, &Output::Collapsed) else { continue };
        let (stacks, total) = stacks_and_total(&collapsed);

        let pprof = work.join(format!("{i}.pb.gz"));
        std::fs::write(&pprof, convert_file(file, &Output::Pprof).unwrap()).unwrap();
        failures.extend(pprof_failure(&name, &pprof, stacks, total));

        for (kind, format) in [("speedscope", Output::Speedscope { name: name.clone() }), ("gecko", Output::Gecko)] {
            let path = work.join(format!("{i}.{kind}.json"));
            std::fs::write(&path, convert_file(file, &format).unwrap()).unwrap();
            manifest += &format!("{kind}\t{}\n", path.display());
        }

        if i % 4 == 0 || total > 1000 {
            svgs += 1;
            let bytes = convert_file(file, &Output::Flamegraph { title: name.clone() }).unwrap();
            failures.extend(flamegraph_failure(&name, &work.join(format!("{i}.svg")), &bytes, total));
        }
    }
    let (last, failed) = viewer_checks(&tools, &work, &manifest);
    eprintln!("speedscope/gecko: {last}");
    failures.extend(failed);
    eprintln!("{} files through go tool pprof, {svgs} flame graphs rendered", files.len());
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// How many lines collapsed stacks have, and the sum of their counts.
fn stacks_and_total(collapsed: &[u8]) -> (usize, u64) {
    let text = std::str::from_utf8(collapsed).unwrap();
    let total = text.lines().map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap()).sum();
    (text.lines().count(), total)
}

/// What is wrong with the pprof file `pprof` of `stacks` collapsed stacks totalling `total`:
/// `go tool pprof -raw` or `-top` fails on it, or its samples are not those stacks.
fn pprof_failure(name: &str, pprof: &Path, stacks: usize, total: u64) -> Option<String> {
    let raw = Command::new("go").args(["tool", "pprof", "-raw"]).arg(pprof).output().unwrap();
    let top = Command::new("go").args(["tool", "pprof", "-top"]).arg(pprof).output().unwrap();
    let text = String::from_utf8_lossy(&raw.stdout);
    match (raw.status.success() && top.status.success(), pprof_raw_samples(&text)) {
        (true, Some(got)) if got == (stacks, total) => None,
        (ok, got) => Some(format!(
            "{name} pprof: go tool pprof ok={ok}, (samples, total) {got:?}, want {:?}; stderr: {}",
            (stacks, total),
            String::from_utf8_lossy(&raw.stderr).lines().last().unwrap_or("")
        )),
    }
}

/// What is wrong with a flame graph of `total` samples written to `svg`: `rsvg-convert` cannot
/// render it, or its root does not count them all.
fn flamegraph_failure(name: &str, svg: &Path, bytes: &[u8], total: u64) -> Option<String> {
    std::fs::write(svg, bytes).unwrap();
    let rendered = Command::new("rsvg-convert").arg(svg).arg("-o").arg(svg.with_extension("png")).status();
    if !rendered.is_ok_and(|s| s.success()) {
        return Some(format!("{name} flamegraph: rsvg-convert failed"));
    }
    let want = format!("<title>all ({} samples, 100%)", thousands(total));
    (total > 0 && !String::from_utf8_lossy(bytes).contains(&want)).then(|| format!("{name} flamegraph: no \"{want}\""))
}

/// Runs `qemu-tests/oracle/viewer_formats.py` over the `speedscope`/`gecko` manifest lines:
/// its summary line, and its report if it failed.
fn viewer_checks(tools: &Path, work: &Path, manifest: &str) -> (String, Option<String>) {
    let schema = tools.join("speedscope-schema.json");
    oracle_check(tools, work, "viewer_formats.py", &[&schema], "viewers", manifest, "speedscope/gecko checks")
}

/// Runs `qemu-tests/oracle/SCRIPT` in the viewer tools' venv, `args` first, then `manifest`
/// (written to `work/NAME.tsv`): its last line, and, if it failed, `what` and its report.
fn oracle_check(
    tools: &Path,
    work: &Path,
    script: &str,
    args: &[&Path],
    name: &str,
    manifest: &str,
    what: &str,
) -> (String, Option<String>) {
    let manifest_path = work.join(format!("{name}.tsv"));
    std::fs::write(&manifest_path, manifest).unwrap();
    let out = Command::new(tools.join("venv/bin/python"))
        .arg(root().join("qemu-tests/oracle").join(script))
        .args(args)
        .arg(&manifest_path)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    let last = report.lines().last().unwrap_or("").to_owned();
    let failed = (!out.status.success()).then(|| format!("{what}:\n{report}{}", String::from_utf8_lossy(&out.stderr)));
    (last, failed)
}

/// `1234567` as inferno prints it: `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// go tool pprof reads the pprof we make from each real gperftools profile and shows the
/// samples (counts and address stacks) it shows for the original file.
#[test]
fn go_pprof_shows_our_pprof_of_a_gperftools_profile_as_the_original() {
    let _ = viewer_tools();
    let root = fixtures::vectors("gperftools-2.10");
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gperftools-pprof");
    std::fs::create_dir_all(&work).unwrap();
    for dir in ["x86_64-le64-gperftools2.10", "i386-le32-gperftools2.10", "s390x-be64-gperftools2.10-qemu"] {
        let prof = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|x| x == "prof"))
            .unwrap();
        let ours = work.join(format!("{dir}.pb.gz"));
        let mut source = GperftoolsSource::open(FileSource::open(&prof).unwrap()).unwrap();
        convert(&mut source, &Output::Pprof, Destination::File(&ours), &mut |_| {}).unwrap();
        let raw = |file: &Path| {
            let out = Command::new("go").args(["tool", "pprof", "-raw", "-symbolize=none"]).arg(file).output().unwrap();
            assert!(out.status.success(), "{}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
            qemu_tests::gperftools_oracle::go_samples(&String::from_utf8_lossy(&out.stdout))
        };
        let want = raw(&prof);
        assert!(!want.is_empty());
        assert_eq!(raw(&ours), want, "{dir}");
    }
}

/// Speedscope files and flame graphs made from native inputs reach the viewers too: every
/// committed gperftools profile (real and edge variants, unsymbolised), each profile the test
/// command records (`TACHYON_GPERFTOOLS_PROFILES`, symbolised from its binaries) and go's
/// `-proto` of it: speedscope's schema and consistency checks pass, `rsvg-convert` renders
/// the flame graph, whose root counts the samples our collapsed lines count.
#[test]
fn native_inputs_reach_the_viewers() {
    let tools = viewer_tools();
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("viewer-formats-native");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let mut manifest = String::new();
    let mut failures = Vec::new();
    let mut checked = 0;
    let mut check = |name: &str, convert_to: &mut dyn FnMut(&Output) -> Vec<u8>| {
        checked += 1;
        let path = work.join(format!("{checked}.speedscope.json"));
        std::fs::write(&path, convert_to(&Output::Speedscope { name: name.to_owned() })).unwrap();
        manifest += &format!("speedscope\t{}\n", path.display());
        let (_, total) = stacks_and_total(&convert_to(&Output::Collapsed));
        let bytes = convert_to(&Output::Flamegraph { title: name.to_owned() });
        failures.extend(flamegraph_failure(name, &work.join(format!("{checked}.svg")), &bytes, total));
    };
    let vectors = fixtures::vectors("gperftools-2.10");
    let mut profiles: Vec<_> = std::fs::read_dir(&vectors)
        .unwrap()
        .map(|d| d.unwrap().path())
        .filter(|d| d.is_dir())
        .flat_map(|d| std::fs::read_dir(d).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "prof"))
        .collect();
    profiles.sort();
    for prof in &profiles {
        let bytes = std::fs::read(prof).unwrap();
        // Edge variants the reader refuses have nothing to show.
        if GperftoolsSource::open(Cursor::new(bytes.clone())).is_err() {
            continue;
        }
        let mut unsymbolised =
            |output: &Output| output_of(&mut GperftoolsSource::open(Cursor::new(bytes.clone())).unwrap(), output);
        check(&prof.display().to_string(), &mut unsymbolised);
    }
    for (arch, dir, _) in qemu_tests::recordings::every_gperftools() {
        let mut symbolised = |output: &Output| {
            let bytes = std::fs::read(dir.join("workload.prof")).unwrap();
            let mut source = GperftoolsSource::open(Cursor::new(bytes)).unwrap();
            source.symbolize(&mut tachyon::symbolize::Symbolizer::new(vec![dir.join("bins")]));
            output_of(&mut source, output)
        };
        check(&format!("{arch} recording"), &mut symbolised);
        let proto = std::fs::read(dir.join("go-pprof.pb.gz")).unwrap();
        let samples = SampleIndex::Name("samples".into());
        let mut from_pprof = |output: &Output| output_of(&mut PprofSource::open(&proto[..], &samples).unwrap(), output);
        check(&format!("{arch} go -proto"), &mut from_pprof);
    }
    let (last, failed) = viewer_checks(&tools, &work, &manifest);
    eprintln!("{checked} native inputs; speedscope: {last}");
    failures.extend(failed);
    assert!(checked > 20, "only {checked} inputs");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// The MOJO files the tests read: every file the test command records with Austin 3.7.0 and
/// 4.0.0 (`TACHYON_MOJO_PROFILES`) and every committed real one.
fn mojo_files() -> Vec<std::path::PathBuf> {
    let recorded = qemu_tests::recordings::fresh("TACHYON_MOJO_PROFILES");
    let mut files = qemu_tests::inputs::files_in(&recorded, "mojo");
    files.extend(qemu_tests::inputs::files_in(&root().join("qemu-tests/vectors/mojo-austin-3.7"), "mojo"));
    files
}

fn output_of(source: &mut impl Source, output: &Output) -> Vec<u8> {
    let mut out = Vec::new();
    convert(source, output, Destination::Stream(&mut out), &mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
    out
}

/// MOJO files reach the viewers: every file the test command records with Austin 3.7.0 and
/// 4.0.0 (`TACHYON_MOJO_PROFILES`) and every committed real one. go tool pprof reads our
/// pprof to our collapsed stacks (weighed by time, or allocations for a memory profile); the
/// Firefox profiler's tables (on per-thread clocks) and speedscope's schema hold, for the
/// hub's speedscope and for austin2speedscope's, as `tachyon convert` writes it from MOJO;
/// `rsvg-convert` renders the flame graph; Python 3.11's `pstats` loads the pstats file and
/// totals its own time to the weights.
#[test]
fn mojo_inputs_reach_the_viewers() {
    use tachyon::mojo::source::{MojoMetric, MojoSource};
    let tools = viewer_tools();
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("viewer-formats-mojo");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let files = mojo_files();
    let mut manifest = String::new();
    let mut failures = Vec::new();
    for (i, file) in files.iter().enumerate() {
        let name = file.display().to_string();
        let bytes = std::fs::read(file).unwrap();
        let out = |output: &Output| {
            let mut source = MojoSource::open(Cursor::new(&bytes[..]), MojoMetric::Default);
            output_of(&mut source, output)
        };
        let (stacks, total) = stacks_and_total(&out(&Output::Collapsed));
        // (Whether a recording of this run has stacks is the machine's; a committed file's is not.)
        let committed = file.starts_with(root());
        assert!(stacks > 0 || !committed, "{name}: no stacks");
        let pprof = work.join(format!("{i}.pb.gz"));
        std::fs::write(&pprof, out(&Output::Pprof)).unwrap();
        failures.extend(pprof_failure(&name, &pprof, stacks, total));
        for (kind, bytes) in
            [("speedscope", out(&Output::Speedscope { name: name.clone() })), ("gecko", out(&Output::Gecko))]
        {
            let path = work.join(format!("{i}.{kind}.json"));
            std::fs::write(&path, bytes).unwrap();
            manifest += &format!("{kind}\t{}\n", path.display());
        }
        let mut austin_json = Vec::new();
        tachyon::mojo::speedscope::from_mojo(Cursor::new(&bytes[..]), &name, &mut austin_json)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let path = work.join(format!("{i}.austin.speedscope.json"));
        std::fs::write(&path, austin_json).unwrap();
        manifest += &format!("speedscope\t{}\n", path.display());
        let svg = out(&Output::Flamegraph { title: name.clone() });
        failures.extend(flamegraph_failure(&name, &work.join(format!("{i}.svg")), &svg, total));
        // Python 3.11's pstats loads the pstats file; its own time adds up to the weights (µs).
        let pstats = work.join(format!("{i}.pstats"));
        std::fs::write(&pstats, out(&Output::Pstats { compat: true })).unwrap();
        let loaded = Command::new(tools.join("venv/bin/python"))
            .args(["-c", "import pstats, sys; print(round(pstats.Stats(sys.argv[1]).total_tt * 1e6))"])
            .arg(&pstats)
            .output()
            .unwrap();
        let tt = String::from_utf8_lossy(&loaded.stdout).trim().to_owned();
        if !loaded.status.success() || tt != total.to_string() {
            failures.push(format!("{name} pstats: Python's total_tt {tt:?} µs, want {total}"));
        }
    }
    let (last, failed) = viewer_checks(&tools, &work, &manifest);
    eprintln!("{} MOJO files; speedscope/gecko: {last}", files.len());
    failures.extend(failed);
    assert!(files.len() >= 20, "{} files", files.len());
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// `--to callgrind` of every file, read by valgrind's `callgrind_annotate`: each function's
/// self samples are its direct samples in Python's `pstats` (of our `--to pstats` file,
/// byte-identical to CPython's), its inclusive samples those of the collapsed stacks holding
/// it (`qemu-tests/oracle/callgrind_check.py`).
#[test]
fn callgrind_annotate_reads_our_callgrind() {
    let tools = viewer_tools();
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("viewer-callgrind");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let files = inputs(&work, SEED);
    let mut manifest = String::new();
    for (i, file) in files.iter().enumerate() {
        let Ok(collapsed) = convert_file(file, &Output::Collapsed) else { continue };
        if collapsed.is_empty() {
            continue;
        }
        manifest += &callgrind_line(&work, i, &file.display().to_string(), Frames::Files, &mut |output| {
            convert_file(file, output).unwrap()
        });
    }
    callgrind_check(&tools, &work, &manifest, "callgrind", 40);
}

/// `--to callgrind` of every real native, MOJO and pstats recording the test command makes
/// (gperftools on each architecture, symbolised, and the committed ones; go's `-proto` of each; Austin 3.7 and 4 in
/// every mode; cProfile, `profile` and CPython 3.15's profilers) and of the committed real MOJO
/// and pstats files, read by `callgrind_annotate` with the same checks as the Tachyon inputs'
/// (functions matched by name where the collapsed stacks name native frames by name alone);
/// a pstats file's self and inclusive times are its own `tt` and `ct`.
#[test]
fn callgrind_annotate_reads_our_callgrind_of_native_mojo_and_pstats_recordings() {
    use tachyon::mojo::source::{MojoMetric, MojoSource};
    let tools = viewer_tools();
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("viewer-callgrind-recorded");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let mut manifest = String::new();
    let mut add = |name: &str, frames: Frames, convert_to: &mut dyn FnMut(&Output) -> Vec<u8>| {
        manifest += &callgrind_line(&work, manifest.lines().count(), name, frames, convert_to);
    };
    for (arch, dir, _) in qemu_tests::recordings::every_gperftools() {
        add(&format!("{arch} gperftools"), Frames::Names, &mut |output| {
            let bytes = std::fs::read(dir.join("workload.prof")).unwrap();
            let mut source = GperftoolsSource::open(Cursor::new(bytes)).unwrap();
            source.symbolize(&mut tachyon::symbolize::Symbolizer::new(vec![dir.join("bins")]));
            output_of(&mut source, output)
        });
        let proto = std::fs::read(dir.join("go-pprof.pb.gz")).unwrap();
        add(&format!("{arch} go -proto"), Frames::Names, &mut |output| {
            let mut source = PprofSource::open(&proto[..], &SampleIndex::Name("samples".into())).unwrap();
            source.symbolize(&mut tachyon::symbolize::Symbolizer::new(vec![dir.join("bins")]));
            output_of(&mut source, output)
        });
    }
    for file in mojo_files() {
        let bytes = std::fs::read(&file).unwrap();
        add(&file.display().to_string(), Frames::Files, &mut |output| {
            output_of(&mut MojoSource::open(Cursor::new(&bytes[..]), MojoMetric::Default), output)
        });
    }
    // pstats: the recordings and the committed real files; the reference is the file itself
    // (a line of three fields).
    let pstats =
        std::env::var_os("TACHYON_PSTATS_PROFILES").expect("TACHYON_PSTATS_PROFILES (set by scripts/test-all.sh)");
    let mut pstats_files = qemu_tests::inputs::files_in(Path::new(&pstats), "pstats");
    pstats_files.extend(
        qemu_tests::inputs::files_in(&fixtures::vectors("pstats"), "pstats")
            .into_iter()
            .filter(|f| !f.file_name().unwrap().to_str().unwrap().starts_with("contract_")),
    );
    for (i, file) in pstats_files.iter().enumerate() {
        let mut source = PstatsSource::open(file, PstatsOptions::default()).unwrap();
        let callgrind = work.join(format!("pstats-{i}.callgrind"));
        std::fs::write(&callgrind, output_of(&mut source, &Output::Callgrind)).unwrap();
        manifest += &format!("{}\t{}\t{}\n", file.display(), callgrind.display(), file.display());
    }
    assert!(pstats_files.len() >= 14, "only {} pstats files", pstats_files.len());
    callgrind_check(&tools, &work, &manifest, "callgrind of recordings", 40);
}

/// Runs callgrind_check.py over `manifest` (of `callgrind_line`s), after its self-test; fails
/// if either fails or the manifest has fewer than `at_least` files.
fn callgrind_check(tools: &Path, work: &Path, manifest: &str, what: &str, at_least: usize) {
    let script = root().join("qemu-tests/oracle/callgrind_check.py");
    let selftest = Command::new(tools.join("venv/bin/python")).arg(&script).arg("--self-test").output().unwrap();
    assert!(selftest.status.success(), "callgrind_check.py --self-test: {}", String::from_utf8_lossy(&selftest.stdout));
    let (last, failed) = oracle_check(
        tools,
        work,
        "callgrind_check.py",
        &[],
        "callgrind",
        manifest,
        "callgrind_annotate or pstats disagree",
    );
    eprintln!("{what}: {} files; {last}", manifest.lines().count());
    assert!(failed.is_none(), "{}", failed.unwrap_or_default());
    assert!(manifest.lines().count() >= at_least, "only {} files", manifest.lines().count());
}

/// How a profile's collapsed stacks name a frame, which the input's kind says (a C++
/// function's name holds colons of its own: `CpuProfiler::Stop()`, sampled in libprofiler on
/// PowerPC, read as `file:function:line` broke the check on one machine's recording).
#[derive(Clone, Copy)]
enum Frames {
    /// `file:function:line`, as CPython's `replay --collapsed` (Python frames).
    Files,
    /// The function alone, as google-pprof (native frames).
    Names,
}

/// callgrind_check.py's manifest line for one profile: its callgrind, pstats (compat) and
/// collapsed files, written as `work/K.*` by `convert_to`, and how the stacks name frames.
fn callgrind_line(
    work: &Path,
    k: usize,
    name: &str,
    frames: Frames,
    convert_to: &mut dyn FnMut(&Output) -> Vec<u8>,
) -> String {
    let mut write = |ext: &str, output: &Output| {
        let path = work.join(format!("{k}.{ext}"));
        std::fs::write(&path, convert_to(output)).unwrap();
        path.display().to_string()
    };
    let callgrind = write("callgrind", &Output::Callgrind);
    let pstats = write("pstats", &Output::Pstats { compat: true });
    let collapsed = write("collapsed", &Output::Collapsed);
    let frames = match frames {
        Frames::Files => "files",
        Frames::Names => "names",
    };
    format!("{name}\t{callgrind}\t{pstats}\t{collapsed}\t{frames}\n")
}

/// `--to perfetto` of every Tachyon test input and every MOJO file, decoded with the trace
/// protos of the `perfetto` package: interned ids defined before use, and every sample's
/// time, thread and call stack those `tachyon dump` gives — a MOJO file's samples put on
/// their threads' clocks by the checker (`qemu-tests/oracle/perfetto_check.py`).
#[test]
fn perfetto_protos_read_our_traces_as_dump_reads_the_files() {
    let tools = viewer_tools();
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("viewer-perfetto");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let files = inputs(&work, SEED);
    let mut manifest = String::new();
    for (i, file) in files.iter().enumerate() {
        let Ok(trace) = convert_file(file, &Output::Perfetto) else { continue };
        let trace_path = work.join(format!("{i}.perfetto-trace"));
        std::fs::write(&trace_path, trace).unwrap();
        let mut dump = Vec::new();
        tachyon::profile::Profile::open(file).unwrap().dump(&mut dump, &mut |_| {}).unwrap();
        let dump_path = work.join(format!("{i}.dump.jsonl"));
        std::fs::write(&dump_path, dump).unwrap();
        manifest += &format!("{}\t{}\t{}\n", file.display(), trace_path.display(), dump_path.display());
    }
    let tachyon_files = manifest.lines().count();
    // MOJO: the recordings and the committed real files, each sample on its thread's clock.
    let mojo_files = mojo_files();
    for (i, file) in mojo_files.iter().enumerate() {
        use tachyon::mojo::source::{MojoMetric, MojoSource};
        let bytes = std::fs::read(file).unwrap();
        let trace = output_of(&mut MojoSource::open(Cursor::new(&bytes[..]), MojoMetric::Default), &Output::Perfetto);
        let trace_path = work.join(format!("mojo-{i}.perfetto-trace"));
        std::fs::write(&trace_path, trace).unwrap();
        let mut dump = Vec::new();
        tachyon::mojo::dump(Cursor::new(&bytes[..]), &mut dump).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let dump_path = work.join(format!("mojo-{i}.dump.jsonl"));
        std::fs::write(&dump_path, dump).unwrap();
        manifest += &format!("{}\t{}\t{}\n", file.display(), trace_path.display(), dump_path.display());
    }
    let (last, failed) =
        oracle_check(&tools, &work, "perfetto_check.py", &[], "perfetto", &manifest, "the perfetto protos disagree");
    eprintln!("perfetto: {tachyon_files} Tachyon and {} MOJO files; {last}", mojo_files.len());
    assert!(failed.is_none(), "{}", failed.unwrap_or_default());
    assert!(tachyon_files >= 40, "only {tachyon_files} Tachyon files");
    assert!(mojo_files.len() >= 20, "only {} MOJO files", mojo_files.len());
}
