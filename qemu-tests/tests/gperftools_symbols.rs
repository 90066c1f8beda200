//! Symbolised gperftools conversions, on the profiles libprofiler records of our own workload
//! (`qemu-tests/oracle/gperftools/record.sh`: x86_64 and i386; s390x, powerpc and powerpc64
//! under qemu-user), against what the real readers printed for it while its binaries were
//! still at the recorded paths. Every machine's recording made by the test command
//! ([`qemu_tests::recordings`], fresh) and the committed x86_64 and s390x ones:
//!
//! - collapsed stacks name the same functions with the same counts as google-pprof 2.10's
//!   `--collapsed`. Its names are compared without the two decorations it adds: `<address>`
//!   after names it took from `nm` (the symbol's start, to tell apart functions of one name)
//!   and `[inline]` after inlined functions; its lines, one per distinct address stack, are
//!   summed by name as ours are. On PowerPC, where google-pprof misnames addresses
//!   ([`only_workload`]), and on the committed recordings, whose libc is the recording
//!   machine's, the functions named from the workload's own binaries must agree at every depth;
//! - the pprof output has go pprof's samples, address for address;
//! - binaries that are missing, truncated or not ELF leave addresses as `0x…` with a
//!   warning each, never a failure.
//!
//! What the committed recordings hold is checked of them alone: every function of the
//! workload sampled, the library call chain, go pprof showing the inlined functions.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use prost::Message;
use qemu_tests::gperftools_oracle::go_samples;
use tachyon::convert::{convert, Destination, Output};
use tachyon::file::FileSource;
use tachyon::gperftools::source::GperftoolsSource;
use tachyon::pprof::proto::Profile;
use tachyon::symbolize::Symbolizer;

use qemu_tests::recordings;

/// The x86_64 profile this run recorded.
fn recorded() -> PathBuf {
    recordings::gperftools("x86_64", false)
}

fn text(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{}: {e}", dir.join(name).display()))
}

/// Converts the recorded profile, symbolised with binaries under `binary_paths`; returns the
/// output and the symboliser's warnings.
fn run(dir: &Path, binary_paths: Vec<PathBuf>, output: &Output) -> (Vec<u8>, Vec<String>) {
    let file = FileSource::open(&dir.join("workload.prof")).unwrap();
    let mut source = GperftoolsSource::open(file).unwrap();
    let mut symbolizer = Symbolizer::new(binary_paths);
    source.symbolize(&mut symbolizer);
    let mut out = Vec::new();
    convert(&mut source, output, Destination::Stream(&mut out), &mut |_| {}).unwrap();
    (out, symbolizer.warnings().to_vec())
}

/// Collapsed lines summed by their text.
fn collapsed(text: &str, undecorate: bool) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let (stack, count) = line.rsplit_once(' ').unwrap();
        let stack =
            if undecorate { stack.split(';').map(undecorated).collect::<Vec<_>>().join(";") } else { stack.to_owned() };
        *out.entry(stack).or_insert(0) += count.parse::<u64>().unwrap();
    }
    out
}

/// A google-pprof name without its `[inline]` or `<hex start>` suffix, nor the symbol
/// version `nm -D` appends (`@@GLIBC_2.0`, `@GLIBC_2.2`).
fn undecorated(name: &str) -> &str {
    let name = name.strip_suffix("[inline]").unwrap_or(name);
    let name = match name.strip_suffix('>').and_then(|n| n.rsplit_once('<')) {
        Some((base, hex)) if !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) => base,
        _ => name,
    };
    name.split_once('@').map_or(name, |(base, _)| base)
}

#[test]
fn symbolised_collapsed_stacks_are_google_pprofs() {
    for (name, dir, committed) in recordings::every_gperftools() {
        let expected = collapsed(&text(&dir, "google-pprof.collapsed.txt"), true);
        let (out, warnings) = run(&dir, vec![dir.join("bins")], &Output::Collapsed);
        // Only x86_64's libc has its debugging information installed (libc6-dbg).
        if name.starts_with("x86_64") {
            assert_eq!(warnings, Vec::<String>::new(), "{name}");
        }
        let ours = collapsed(&String::from_utf8(out).unwrap(), false);
        if name.starts_with("powerpc") {
            // libc's frames have names from its symbol table (on powerpc64 through the `.opd`
            // function descriptors), where google-pprof's are wrong: every stack of the
            // workload's, all of whose work runs under `main`, starts in libc's start.
            for stack in ours.keys().filter(|k| k.split(';').any(|f| f == "main")) {
                assert!(stack.starts_with("__libc_start_main;"), "{name}: {stack}");
            }
        }
        if name.starts_with("powerpc") || committed {
            assert_eq!(only_workload(&ours), only_workload(&expected), "{name}");
        } else {
            assert_eq!(ours, expected, "{name}");
        }
    }
}

/// The workload's functions each committed recording sampled: x86_64 every one; s390x, whose
/// run is emulated and a tenth as long, all but `recurse` and `hash_block`.
const COMMITTED_FUNCTIONS: [(&str, &[&str]); 2] = [
    ("x86_64", &WORKLOAD_FUNCTIONS),
    (
        "s390x",
        &["main", "middle", "mix", "series", "sort_keys", "compare_keys", "lib_sort", "sort_range", "merge_runs"],
    ),
];

/// What the committed recordings hold: the workload's functions named from DWARF, through the
/// library's call chain.
#[test]
fn the_committed_recordings_name_the_functions_of_the_workload() {
    for (arch, functions) in COMMITTED_FUNCTIONS {
        let dir = recordings::gperftools(arch, true);
        let (out, _) = run(&dir, vec![dir.join("bins")], &Output::Collapsed);
        let ours = only_workload(&collapsed(&String::from_utf8(out).unwrap(), false));
        let named = |function: &str| ours.keys().any(|k| k.split(';').any(|f| f == function));
        let missing: Vec<&str> = functions.iter().copied().filter(|f| !named(f)).collect();
        assert_eq!(missing, Vec::<&str>::new(), "{arch}: {ours:?}");
        assert!(ours.keys().any(|k| k.contains("main;middle;sort_keys;lib_sort;sort_range")), "{arch}: {ours:?}");
    }
}

/// The functions of the recorded workload (`qemu-tests/oracle/gperftools/workload.c` and
/// `libsort.c`), which both readers name from the binaries' DWARF.
const WORKLOAD_FUNCTIONS: [&str; 11] = [
    "main",
    "middle",
    "recurse",
    "hash_block",
    "mix",
    "series",
    "sort_keys",
    "compare_keys",
    "lib_sort",
    "sort_range",
    "merge_runs",
];

/// Stacks with every frame not of the workload's functions as `?`, summed again. On PowerPC
/// the profile holds addresses google-pprof can only misname: libprofiler's walk reads the
/// leaf caller's link-register slot before the leaf has saved it, giving stale values (0x15,
/// 0x115, …) in no mapping, which google-pprof looks up in the main program anyway
/// (`__abi_tag`, a note); and on 64-bit PowerPC (ELFv1) libc's function symbols point at
/// `.opd` descriptors, so `nm`'s nearest symbol to a code address is a data symbol
/// (`__h_errno`), where we read the descriptor and name the function. We leave stale addresses
/// as `0x…`; the workload's frames, named from DWARF, must agree at every depth. A run of
/// frames not of the workload is one `?`: how many there are is not the workload's (a sample
/// inside libprofiler's own `ProfilerStop`, built with debugging information on PowerPC, is
/// several inlined functions for us and one misnamed symbol for google-pprof; a clean CI run
/// recorded one).
fn only_workload(stacks: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (stack, n) in stacks {
        let mut frames: Vec<&str> =
            stack.split(';').map(|f| if WORKLOAD_FUNCTIONS.contains(&f) { f } else { "?" }).collect();
        frames.dedup_by(|a, b| *a == "?" && *b == "?");
        *out.entry(frames.join(";")).or_insert(0) += n;
    }
    out
}

#[test]
fn missing_binaries_leave_addresses_and_a_warning_each() {
    let dir = recorded();
    let (out, warnings) = run(&dir, vec![], &Output::Collapsed);
    let gone = |name: &str| dir.join("build").join(name).display().to_string();
    assert_eq!(
        warnings,
        [
            format!("{}: not found, its addresses stay unsymbolised", gone("workload")),
            format!("{}: not found, its addresses stay unsymbolised", gone("libsort.so")),
        ],
    );
    let out = String::from_utf8(out).unwrap();
    // libc is where the profile says: its frames are named (all the workload's work runs
    // under its start); the workload's are not.
    assert!(out
        .lines()
        .all(|l| l.starts_with("0x") && l.contains(";__libc_start_main_impl;__libc_start_call_main;0x")));
    assert!(!WORKLOAD_FUNCTIONS.iter().any(|f| out.split([';', ' ', '\n']).any(|n| n == *f)), "{out}");
    let total: u64 = out.lines().map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap()).sum();
    assert_eq!(total, collapsed(&text(&dir, "google-pprof.collapsed.txt"), true).values().sum::<u64>());
}

#[test]
fn truncated_or_foreign_binaries_leave_addresses_and_a_warning_each() {
    let dir = recorded();
    let scratch = std::env::temp_dir().join(format!("tachyon-bad-bins-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let workload = std::fs::read(dir.join("bins/workload")).unwrap();
    let lib = std::fs::read(dir.join("bins/libsort.so")).unwrap();
    for (case, workload_bytes, lib_bytes) in [
        ("truncated headers", workload[..64].to_vec(), lib[..200].to_vec()),
        ("truncated sections", workload[..workload.len() / 2].to_vec(), lib[..lib.len() / 3].to_vec()),
        ("not ELF", b"#!/bin/sh\necho not a binary\n".to_vec(), vec![0xffu8; 4096]),
        ("empty", Vec::new(), Vec::new()),
    ] {
        std::fs::write(scratch.join("workload"), &workload_bytes).unwrap();
        std::fs::write(scratch.join("libsort.so"), &lib_bytes).unwrap();
        let (out, warnings) = run(&dir, vec![scratch.clone()], &Output::Collapsed);
        assert_eq!(warnings.len(), 2, "{case}: {warnings:?}");
        for w in &warnings {
            assert!(w.starts_with(&scratch.display().to_string()), "{case}: {w}");
        }
        let out = String::from_utf8(out).unwrap();
        let total: u64 = out.lines().map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap()).sum();
        let expected: u64 = collapsed(&text(&dir, "google-pprof.collapsed.txt"), true).values().sum();
        assert_eq!(total, expected, "{case}");
        assert!(!out.contains("compare_keys"), "{case}: {out}");
    }
    std::fs::remove_dir_all(&scratch).unwrap();
}

#[test]
fn symbolised_pprof_has_go_pprofs_samples() {
    for (name, dir, _) in recordings::every_gperftools() {
        let ours = symbolised_pprof(&dir, &name);
        let raw = go_pprof(&ours, &["-raw", "-symbolize=none"], &name);
        assert_eq!(go_samples(&raw), go_samples(&text(&dir, "go-pprof.raw.txt")), "{name}");
        std::fs::remove_file(&ours).unwrap();
    }
}

/// What the committed recordings hold: locations of inlined functions, which go pprof shows.
#[test]
fn go_pprof_shows_the_inlined_functions_of_the_committed_recordings() {
    for (arch, functions) in COMMITTED_FUNCTIONS {
        let ours = symbolised_pprof(&recordings::gperftools(arch, true), arch);
        let top = go_pprof(&ours, &["-top", "-nodecount=100"], arch);
        assert!(top.contains("merge_runs (inline)"), "{arch}: go pprof -top shows merge_runs (inline):\n{top}");
        for function in
            ["compare_keys", "sort_range", "hash_block", "series"].into_iter().filter(|f| functions.contains(f))
        {
            assert!(top.lines().any(|l| l.ends_with(&format!(" {function}"))), "{arch}: {function}:\n{top}");
        }
        std::fs::remove_file(&ours).unwrap();
    }
}

/// Our pprof of the recording in `dir`, symbolised, written to a scratch file (its path).
fn symbolised_pprof(dir: &Path, name: &str) -> PathBuf {
    let (gz, _) = run(dir, vec![dir.join("bins")], &Output::Pprof);
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(&gz[..]).read_to_end(&mut raw).unwrap();
    let profile = Profile::decode(&raw[..]).unwrap();
    assert!(!profile.sample.is_empty(), "{name}");
    let tag: String = name.chars().filter(char::is_ascii_alphanumeric).collect();
    let ours = std::env::temp_dir().join(format!("tachyon-symbolised-{tag}-{}.pb.gz", std::process::id()));
    std::fs::write(&ours, &gz).unwrap();
    ours
}

fn go_pprof(file: &Path, args: &[&str], name: &str) -> String {
    let out = Command::new("go").args(["tool", "pprof"]).args(args).arg(file).output().unwrap();
    assert!(out.status.success(), "{name}: go tool pprof {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn maps_text_that_is_not_utf8_still_converts() {
    let dir = recorded();
    let mut file = std::fs::read(dir.join("workload.prof")).unwrap();
    // Every `/` of the maps text (after the last record) becomes a byte UTF-8 never has.
    let text_start = file.windows(5).position(|w| w == b"-xp 0" || w == b"r--p ").unwrap();
    for b in &mut file[text_start..] {
        if *b == b'/' {
            *b = 0xff;
        }
    }
    let mut source = GperftoolsSource::open(tachyon_core::io::Cursor::new(&file[..])).unwrap();
    let mut symbolizer = Symbolizer::new(vec![dir.join("bins")]);
    source.symbolize(&mut symbolizer);
    let mut out = Vec::new();
    convert(&mut source, &Output::Collapsed, Destination::Stream(&mut out), &mut |_| {}).unwrap();
    let out = String::from_utf8(out).unwrap();
    let total: u64 = out.lines().map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap()).sum();
    let expected: u64 = collapsed(&text(&dir, "google-pprof.collapsed.txt"), true).values().sum();
    assert_eq!(total, expected);
    assert!(out.lines().all(|l| l.starts_with("0x")), "{out}");
    assert!(!symbolizer.warnings().is_empty());
}
