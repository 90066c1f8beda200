//! Austin text from MOJO files against austin-python 1.7.1's `mojo2austin` on the same files
//! (`qemu-tests/vectors/mojo-austin-3.7/expected/*.austin.gz`, written by the real tool):
//! byte for byte on every real file Austin 3.7.0 wrote (wall, full with threads, memory,
//! GC, austinp's native and kernel frames) and on the version 1 and 2 re-encodings; the
//! synthetic edge cases as 1.7.1 read them, or an error naming the event where it fails.
//! Version 4 files (Austin 4) against austin-python's own `mojo2austin` snapshots, byte for
//! byte, and through the hub to every output.

use std::io::Read as _;
use std::path::PathBuf;
use tachyon_test_kit::fixtures;

use tachyon::mojo::austin::{austin_text, AustinError};
use tachyon_core::io::Cursor;
use tachyon_core::mojo::{Problem, SampleError, TableError};

fn vectors() -> PathBuf {
    fixtures::vectors("mojo-austin-3.7")
}

fn text(file: &[u8]) -> Result<String, AustinError<tachyon_core::io::CursorError>> {
    let mut out = Vec::new();
    austin_text(Cursor::new(file), &mut out)?;
    Ok(String::from_utf8(out).unwrap())
}

#[test]
fn every_real_file_is_mojo2austins_text() {
    let cases = [
        "a37_full_small_threads_py311",
        "a37_gc_small_py311",
        "a37_memory_small_py311",
        "a37_wall_simple_py311",
        "a37_wall_small_py311",
        "a37p_native_kernel_py311",
        "derived/v1_from_a37_wall_simple",
        "derived/v2_from_a37_wall_simple",
    ];
    for name in cases {
        let file = std::fs::read(vectors().join(format!("{name}.mojo"))).unwrap();
        let base = name.rsplit('/').next().unwrap();
        let mut want = String::new();
        flate2::read::GzDecoder::new(
            std::fs::File::open(vectors().join(format!("expected/{base}.austin.gz"))).unwrap(),
        )
        .read_to_string(&mut want)
        .unwrap();
        let got = text(&file).unwrap_or_else(|e| panic!("{name}: {e}"));
        if got != want {
            let line = got.lines().zip(want.lines()).position(|(a, b)| a != b);
            panic!(
                "{name}: differs from mojo2austin at line {line:?} ({} vs {} lines)",
                got.lines().count(),
                want.lines().count()
            );
        }
        // Every kind of line is there: samples, and the marks of each mode.
        assert!(want.lines().filter(|l| l.starts_with('P')).count() > 20, "{name}");
    }
}

fn edge(name: &str) -> Vec<u8> {
    std::fs::read(vectors().join(format!("synthetic_edge/{name}.mojo"))).unwrap()
}

#[test]
fn edge_cases_read_as_mojo2austin_reads_them() {
    // The second column of synthetic_edge/results.md: what 1.7.1 printed.
    for (name, want) in [
        ("ok_minimal", "P42;T0:42;f.py:fn:10 100\n"),
        ("neg_time", "P42;T0:42 -5\n"),
        ("nonhex_tid", "P42;T0:main 5\n"),
        ("nonminimal_varint", "P42;T0:42 5\n"),
        ("redefine_string", "P42;T0:42;f.py:fn:10 100\nP42;T0:42;f.py:fn2:11 100\n"),
        ("unknown_scope_key1", "P42;T0:42;f.py:<unknown>:10 100\n"),
        ("version4_header", "P42;T0:42;f.py:fn:10 100\n"),
    ] {
        let got = text(&edge(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got, format!("# mode: wall\n{want}"), "{name}");
    }
    // STRING_REF prints the string where it stands.
    assert!(text(&edge("string_ref_event")).unwrap().ends_with("P42;T0:42fn 1\n"));
    // Where 1.7.1 fails: the event and why.
    let why = |name: &str| match text(&edge(name)) {
        Err(AustinError::Event(SampleError { offset, problem })) => (offset, problem),
        other => panic!("{name}: {other:?}"),
    };
    assert_eq!(why("undefined_frame_ref"), (21, Problem::UndefinedFrame { pid: 42, key: 9 }));
    assert_eq!(why("cross_pid_ref"), (52, Problem::UndefinedFrame { pid: 43, key: 7 }));
    assert_eq!(why("string_before_stack"), (15, Problem::NoStack));
    assert_eq!(why("undefined_string_key0"), (28, Problem::Table(TableError::UndefinedString { pid: 42, key: 0 })));
    assert_eq!(why("event13_in_v3"), (46, Problem::NotInVersion { id: 13, version: 3 }));
    assert!(matches!(text(&edge("truncated_tail")), Err(AustinError::Read(_))));
    assert!(matches!(text(&edge("version0_header")), Err(AustinError::Read(_))));
}

#[test]
fn truncations_and_corruptions_are_errors_or_text() {
    let file = std::fs::read(vectors().join("a37_gc_small_py311.mojo")).unwrap();
    let (mut errors, mut texts) = (0, 0);
    for len in (0..file.len()).step_by(7) {
        match text(&file[..len]) {
            Ok(_) => texts += 1,
            Err(_) => errors += 1,
        }
    }
    for at in (4..file.len()).step_by(13) {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut bad = file.clone();
            bad[at] ^= flip;
            match text(&bad) {
                Ok(_) => texts += 1,
                Err(_) => errors += 1,
            }
        }
    }
    eprintln!("{texts} variants gave text, {errors} an error; none panicked");
    assert!(errors > 0 && texts > 0);
}

/// austin-python's snapshot cases (`test/format/test_mojo.py::test_mojo_snapshot`: `test`,
/// `mp`, `repeat`), the MOJO files Austin wrote and the text austin-python's `mojo2austin`
/// made of each (`qemu-tests/vectors/mojo-v4/austin-python/README.md`): equal byte for byte,
/// where austin-python's own test compares the first 128 characters. `repeat` is version 4
/// with STACK_REPEAT events (Austin 4.0 on macOS).
#[test]
fn austin_pythons_snapshots_byte_for_byte() {
    let dir = fixtures::vectors("mojo-v4/austin-python");
    for case in ["test", "mp", "repeat"] {
        let file = std::fs::read(dir.join(format!("{case}.mojo"))).unwrap();
        let mut want = String::new();
        flate2::read::GzDecoder::new(std::fs::File::open(dir.join(format!("{case}.austin.gz"))).unwrap())
            .read_to_string(&mut want)
            .unwrap();
        let got = text(&file).unwrap_or_else(|e| panic!("{case}: {e}"));
        let line = got.lines().zip(want.lines()).position(|(a, b)| a != b);
        assert!(
            got == want,
            "{case}: differs at line {line:?} ({} vs {} lines)",
            got.lines().count(),
            want.lines().count()
        );
    }
}

/// The version 4 snapshot through the hub: every output converts, and the collapsed stacks
/// weigh what the snapshot's lines with frames weigh.
#[test]
fn a_version_4_file_converts_to_every_output() {
    use tachyon::convert::{convert, Destination, Output};
    use tachyon::mojo::source::{MojoMetric, MojoSource};
    let dir = fixtures::vectors("mojo-v4/austin-python");
    let file = std::fs::read(dir.join("repeat.mojo")).unwrap();
    let mut want = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(dir.join("repeat.austin.gz")).unwrap())
        .read_to_string(&mut want)
        .unwrap();
    // Samples without frames (`P…;T…:tid <time>`) have no collapsed line.
    let weight: u64 = want
        .lines()
        .filter(|l| l.starts_with('P') && l.matches(';').count() >= 2)
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    let outputs = [
        Output::Collapsed,
        Output::Pstats { compat: false },
        Output::Flamegraph { title: "t".into() },
        Output::Speedscope { name: "s".into() },
        Output::Pprof,
        Output::Jsonl { run_id: Some("0".repeat(32)) },
        Output::Tachyon { big_endian: None, compression: None },
        Output::Mojo { version: None },
        Output::Austin,
    ];
    for output in outputs {
        let mut source = MojoSource::open(Cursor::new(&file[..]), MojoMetric::Default);
        let mut out = Vec::new();
        convert(&mut source, &output, Destination::Stream(&mut out), &mut |_| {})
            .unwrap_or_else(|e| panic!("{output:?}: {e}"));
        assert!(!out.is_empty(), "{output:?}");
        if output == Output::Collapsed {
            let text = String::from_utf8(out).unwrap();
            let total: u64 = text.lines().map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap()).sum();
            assert_eq!(total, weight);
        }
    }
    // The command's Austin-format paths (the text, and speedscope as austin2speedscope reads it).
    let mut out = Vec::new();
    tachyon::mojo::speedscope::from_mojo(Cursor::new(&file[..]), "s", &mut out).unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert!(json["profiles"].as_array().is_some_and(|p| !p.is_empty()));
}

/// CPython's `~:<GC>` pseudo-frame further out than the innermost frame (a weakref callback
/// run by the collector, as a real recording had) goes to MOJO as a FRAME of that name at
/// line 0, since MOJO's GC marks only the innermost frame, and must read back as the
/// pseudo-frame, without a location (CPython reads it so from the round trip).
#[test]
fn a_gc_frame_further_out_comes_back_as_the_pseudo_frame() {
    use tachyon::convert::{convert, Destination, Output};
    use tachyon::memory::VecSink;
    use tachyon::model::Source;
    use tachyon::mojo::source::{MojoMetric, MojoSource};
    use tachyon_core::storage::{VecWriterStorage, WriterCapacity};
    use tachyon_core::{Frame, Location, Writer, WriterConfig};

    let cap = WriterCapacity { string_bytes: 1 << 12, strings: 64, frames: 64, threads: 8, rle_budget: 16384 };
    let mut storage = VecWriterStorage::new(cap).unwrap();
    let mut w = Writer::new(VecSink::default(), storage.storage(), WriterConfig::new(1_000, 1_000)).unwrap();
    let callback = Frame::new(b"/usr/lib/python3.15/_weakrefset.py", b"_remove").at(Location {
        lineno: 18,
        end_lineno: 18,
        col: 16,
        end_col: 33,
    });
    let gc = Frame::new(b"~", b"<GC>");
    let work = Frame::new(b"app.py", b"work").at(Location { lineno: 3, end_lineno: 3, col: 4, end_col: 9 });
    w.write_thread_sample(1_000, 0, 7, 0, [gc, work]).unwrap();
    w.write_thread_sample(2_000, 0, 7, 0, [callback, gc, work]).unwrap();
    w.finish().unwrap();
    let dir = std::env::temp_dir().join(format!("tachyon-gc-frame-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pyb = dir.join("gc.pyb");
    std::fs::write(&pyb, w.into_inner().into_inner()).unwrap();

    let mut profile = tachyon::profile::Profile::open(&pyb).unwrap();
    let mut source = profile.source(&Default::default()).unwrap();
    let mut mojo = Vec::new();
    convert(&mut source, &Output::Mojo { version: None }, Destination::Stream(&mut mojo), &mut |_| {}).unwrap();

    let mut back = MojoSource::open(Cursor::new(&mojo[..]), MojoMetric::Default);
    back.prepare(&Output::Collapsed).unwrap();
    let gc_frames: Vec<_> = back.frames().frames.iter().filter(|f| f.funcname == "<GC>").collect();
    assert_eq!(gc_frames.len(), 1, "one `~:<GC>` frame, innermost or not: {gc_frames:?}");
    assert_eq!((gc_frames[0].filename.as_str(), gc_frames[0].location), ("~", None));
    std::fs::remove_dir_all(&dir).unwrap();
}
