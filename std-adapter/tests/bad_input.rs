//! Bad input is normal input for conversions too: every truncation and many single-byte
//! corruptions of CPython's vectors, the gperftools and the MOJO files go through every
//! format and the re-encoders; each must end in a typed error or a result, never a panic.

use std::path::Path;

use tachyon::convert::pstats::SortOrder;
use tachyon::convert::{convert, Destination, Output};
use tachyon::memory::VecSink;
use tachyon::open::{Limits, OwnedReaderStorage};
use tachyon::sources::gperftools::GperftoolsSource;
use tachyon::sources::mojo::{MojoMetric, MojoSource};
use tachyon::sources::tachyon::TachyonSource;
use tachyon_core::io::Cursor;
use tachyon_core::reader::Metadata;
use tachyon_core::LittleEndian;

fn formats() -> Vec<Output> {
    vec![
        Output::Collapsed,
        Output::Pstats { compat: false },
        Output::PstatsText { sort: SortOrder::Name, limit: None, summary: true },
        Output::Flamegraph { title: "t".into() },
        Output::Gecko,
        Output::Speedscope { name: "s".into() },
        Output::Pprof,
        Output::Jsonl { run_id: Some("0".repeat(32)) },
        Output::Mojo { version: None },
        Output::Austin,
    ]
}

/// Runs everything over `bytes`; returns how many runs ended in an error.
fn run_all(bytes: &[u8]) -> usize {
    let Ok(meta) = Metadata::read(&mut Cursor::new(bytes)) else { return 1 };
    let Ok(mut storage) = OwnedReaderStorage::for_metadata(&meta, Limits::default()) else { return 1 };
    let mut errors = 0;
    for format in formats() {
        let Ok(mut reader) = storage.open(Cursor::new(bytes)) else { return errors + 1 };
        let mut out = Vec::new();
        let mut source = TachyonSource::new(&mut reader);
        errors += usize::from(convert(&mut source, &format, Destination::Stream(&mut out), &mut |_| {}).is_err());
    }
    if let Ok(mut reader) = storage.open(Cursor::new(bytes)) {
        let again =
            tachyon::convert::tachyon::reencode(&mut reader, VecSink::default(), LittleEndian, None, &mut |_| {});
        errors += usize::from(again.is_err());
    }
    errors
}

#[test]
fn corrupt_and_truncated_files_never_panic_a_conversion() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../qemu-tests/vectors/cpython-3.15.2");
    let mut variants = 0;
    let mut failed = 0;
    for name in
        ["03_suffix.x86_64", "04_pop_push.s390x", "05_two_threads.x86_64", "09_zstd.x86_64", "13_time_edges.s390x"]
    {
        let good = std::fs::read(dir.join(format!("{name}.bin"))).unwrap();
        assert_eq!(run_all(&good), 0, "{name} converts cleanly");
        for len in 0..good.len() {
            variants += 1;
            failed += usize::from(run_all(&good[..len]) > 0);
        }
        for at in 0..good.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = good.clone();
                bad[at] ^= flip;
                variants += 1;
                failed += usize::from(run_all(&bad) > 0);
            }
        }
    }
    // A real profile: corruptions spread over the file, every 211th byte.
    let real = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/stdlib_work.pyb")).unwrap();
    assert_eq!(run_all(&real), 0, "the example converts cleanly");
    for at in (0..real.len()).step_by(211) {
        let mut bad = real.clone();
        bad[at] ^= 0x5a;
        variants += 1;
        failed += usize::from(run_all(&bad) > 0);
    }
    eprintln!("{failed} of {variants} variants ended in an error, none panicked");
    // Truncations all fail (the footer is gone); most corruptions are caught somewhere.
    assert!(failed > variants / 2, "{failed} of {variants} variants failed");
}

/// Every aggregate output of one gperftools profile (but the flame graph, which draws the
/// collapsed collector's lines and is slow unoptimised); returns how many ended in an error.
fn run_gperftools(bytes: &[u8]) -> usize {
    let mut errors = 0;
    for format in formats().into_iter().filter(|f| !matches!(f, Output::Flamegraph { .. })) {
        match GperftoolsSource::open(Cursor::new(bytes)) {
            Ok(mut source) => {
                let mut out = Vec::new();
                let result = convert(&mut source, &format, Destination::Stream(&mut out), &mut |_| {});
                errors += usize::from(result.is_err());
            }
            Err(_) => errors += 1,
        }
    }
    errors
}

#[test]
fn corrupt_and_truncated_gperftools_profiles_never_panic_a_conversion() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../qemu-tests/vectors/gperftools-2.10");
    let mut files: Vec<_> = ["x86_64-le64-gperftools2.10", "i386-le32-gperftools2.10", "edge-synthetic"]
        .iter()
        .flat_map(|d| std::fs::read_dir(root.join(d)).unwrap().map(|e| e.unwrap().path()))
        .filter(|p| p.extension().is_some_and(|x| x == "prof"))
        .collect();
    files.sort();
    let (mut variants, mut failed) = (0, 0);
    for path in &files {
        let good = std::fs::read(path).unwrap();
        // Every real file and variant google-pprof reads converts (gecko alone refuses: no times).
        let refused = run_gperftools(&good);
        assert!(refused <= 1, "{}: {refused} outputs failed", path.display());
        // Spread over the file (a prime step); the core reader's own test takes every length.
        for len in (0..good.len()).step_by(211) {
            variants += 1;
            failed += usize::from(run_gperftools(&good[..len]) > 1);
        }
        for at in (0..good.len()).step_by(307) {
            for flip in [0x01u8, 0xff] {
                let mut bad = good.clone();
                bad[at] ^= flip;
                variants += 1;
                failed += usize::from(run_gperftools(&bad) > 1);
            }
        }
    }
    eprintln!("{} files, {failed} of {variants} variants ended in an error, none panicked", files.len());
    assert!(variants > 1000, "{variants}");
}

/// A little-endian 64-bit gperftools profile of one-address records `(count, pc)`.
fn gperftools_profile(records: &[(u64, u64)]) -> Vec<u8> {
    let mut words = vec![0u64, 3, 0, 1000, 0];
    for &(count, pc) in records {
        words.extend([count, 1, pc]);
    }
    words.extend([0, 1, 0]);
    let mut file: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    file.extend_from_slice(b"00400000-00500000 r-xp 00000000 00:00 0 /bin/true\n");
    file
}

/// Counts of 2^32 and more, which 8-byte slots can hold: summed exactly while the total stays
/// within 2^53 (every output converts; collapsed lines count them), refused beyond with an
/// error naming the record where the total passed it — never an overflow.
#[test]
fn counts_of_2_to_the_32_and_beyond() {
    let big = gperftools_profile(&[(1 << 32, 0x401000), (1 << 32, 0x402000), (1 << 32, 0x401000)]);
    assert_eq!(run_gperftools(&big), 1, "only gecko refuses (no times)");
    let mut source = GperftoolsSource::open(Cursor::new(&big[..])).unwrap();
    let mut out = Vec::new();
    convert(&mut source, &Output::Collapsed, Destination::Stream(&mut out), &mut |_| {}).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), "0x401000 8589934592\n0x402000 4294967296\n");

    // The second record takes the total past 2^53; it starts at 40 + 24 bytes.
    for second in [1 << 53, u64::MAX] {
        let file = gperftools_profile(&[(1, 0x401000), (second, 0x402000), (5, 0x401000)]);
        let err = GperftoolsSource::open(Cursor::new(&file[..])).err().expect("refused");
        assert!(err.to_string().starts_with("offset 64: "), "{err}");
        assert!(err.to_string().contains("2^53"), "{err}");
    }
}

/// pprof values are signed 64-bit: many large ones would overflow a sum; past 2^53 the
/// profile is refused, saying why.
#[test]
fn pprof_values_adding_past_2_to_the_53_are_refused() {
    use prost::Message;
    use tachyon::convert::pprof::{Profile, Sample, ValueType};
    use tachyon::model::Source;
    use tachyon::sources::pprof::{PprofSource, SampleIndex};
    let profile = |values: &[i64]| Profile {
        sample_type: vec![ValueType { r#type: 1, unit: 2 }],
        sample: values.iter().map(|&v| Sample { location_id: vec![], value: vec![v], label: vec![] }).collect(),
        string_table: vec![String::new(), "samples".into(), "count".into()],
        ..Profile::default()
    };
    let fine = profile(&[1 << 52, 1 << 52]).encode_to_vec();
    assert_eq!(PprofSource::open(&fine[..], &SampleIndex::Default).unwrap().info().expected_samples, 1 << 53);
    for values in [&[1 << 52, 1 << 52, 1][..], &[i64::MAX, i64::MAX, i64::MAX]] {
        let bytes = profile(values).encode_to_vec();
        let err = PprofSource::open(&bytes[..], &SampleIndex::Default).err().expect("refused");
        assert!(err.to_string().contains("more than 2^53"), "{err}");
    }
}

/// Every MOJO path over `bytes`: the hub's outputs through [`MojoSource`] (and MOJO and
/// Austin's text made from the hub), and the event-by-event ones (Austin's text, speedscope
/// as Austin's tools make it, re-encoding, `dump`, `info`); returns how many ended in an
/// error.
fn run_mojo(bytes: &[u8]) -> usize {
    let mut errors = 0;
    let mut outputs: Vec<Output> = formats().into_iter().filter(|f| !matches!(f, Output::Flamegraph { .. })).collect();
    outputs.push(Output::Tachyon { big_endian: None, compression: None });
    match MojoSource::open(Cursor::new(bytes), MojoMetric::Default) {
        // One source replays for every output.
        Ok(mut source) => {
            for output in &outputs {
                let mut out = Vec::new();
                errors +=
                    usize::from(convert(&mut source, output, Destination::Stream(&mut out), &mut |_| {}).is_err());
            }
        }
        Err(_) => errors += 1,
    }
    let mut out = Vec::new();
    errors += usize::from(tachyon::convert::austin::austin_text(Cursor::new(bytes), &mut out).is_err());
    errors += usize::from(tachyon::convert::austin_speedscope::from_mojo(Cursor::new(bytes), "s", Vec::new()).is_err());
    errors += usize::from(tachyon::mojo::reencode(Cursor::new(bytes), &mut Vec::new(), Some(1)).is_err());
    errors += usize::from(tachyon::mojo::dump(Cursor::new(bytes), &mut Vec::new()).is_err());
    errors += usize::from(tachyon::mojo::info(Cursor::new(bytes), bytes.len() as u64).is_err());
    errors
}

/// About `n` points spread over `0..len` (all of them when there are fewer).
fn spread(len: usize, n: usize) -> impl Iterator<Item = usize> {
    (0..len).step_by(len.div_ceil(n).max(1))
}

/// Every committed MOJO file (real, re-encoded, synthetic edge cases, version 4): truncations
/// and corruptions spread over each end in a result or a typed error on every path, never a
/// panic (the core's own tests take every truncation).
#[test]
fn corrupt_and_truncated_mojo_files_never_panic_a_conversion() {
    let vectors = Path::new(env!("CARGO_MANIFEST_DIR")).join("../qemu-tests/vectors");
    let mut files: Vec<_> = ["mojo-austin-3.7", "mojo-austin-3.7/derived", "mojo-austin-3.7/synthetic_edge", "mojo-v4"]
        .iter()
        .flat_map(|d| std::fs::read_dir(vectors.join(d)).unwrap().map(|e| e.unwrap().path()))
        .filter(|p| p.extension().is_some_and(|x| x == "mojo"))
        .collect();
    files.sort();
    assert!(files.len() >= 25, "{} files", files.len());
    let (mut variants, mut failed) = (0, 0);
    for path in &files {
        let good = std::fs::read(path).unwrap();
        run_mojo(&good);
        // Fewer points in the large files (real recordings): each run reads all of it.
        let (cuts, flips) = if good.len() > 16_384 { (20, 6) } else { (60, 20) };
        for len in spread(good.len(), cuts) {
            variants += 1;
            failed += usize::from(run_mojo(&good[..len]) > 0);
        }
        for at in spread(good.len(), flips) {
            for flip in [0x01u8, 0x40, 0xff] {
                let mut bad = good.clone();
                bad[at] ^= flip;
                variants += 1;
                failed += usize::from(run_mojo(&bad) > 0);
            }
        }
    }
    eprintln!("{} files, {failed} of {variants} variants ended in an error somewhere, none panicked", files.len());
    assert!(variants > 2000 && failed > 0, "{failed} of {variants}");
}

/// MOJO events, written by our writer, after `MOJ` and version 3.
fn mojo_file(events: &[tachyon_core::mojo::Event<&[u8]>]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut staging = vec![0u8; 1 << 16];
    let mut w = tachyon_core::mojo::Writer::new(tachyon::memory::IoSink(&mut out), &mut staging, 3).unwrap();
    for e in events {
        w.write(e).unwrap();
    }
    w.flush().unwrap();
    out
}

/// A key flood (a million distinct strings and frames, each used once), a stack 100,000 deep
/// and empty stacks: every path reads them in memory that follows the file, and the outputs
/// hold what the file says.
#[test]
fn mojo_key_floods_deep_and_empty_stacks() {
    use tachyon_core::mojo::{Event, FrameDef};
    let frame = |key: u64, filename: u64, scope: u64| {
        Event::Frame(FrameDef { key, filename, scope, line: key, line_end: key, column: 1, column_end: 2 })
    };
    let names: Vec<String> = (0..1_000_000u64).map(|i| format!("f{i}")).collect();
    let mut events: Vec<Event<&[u8]>> = vec![Event::Metadata { key: b"mode", value: b"wall" }];
    // The flood: each sample defines a new string and frame and refers to it.
    for (i, name) in names.iter().enumerate() {
        let key = i as u64 + 2;
        events.push(Event::Stack { pid: 1, iid: 0, tid: b"1" });
        events.push(Event::String { key, value: name.as_bytes() });
        events.push(frame(key, key, key));
        events.push(Event::FrameRef { key });
        events.push(Event::Time(1));
    }
    // A deep stack: one frame 100,000 times; then an empty stack.
    events.push(Event::Stack { pid: 1, iid: 0, tid: b"2" });
    events.extend(std::iter::repeat_n(Event::FrameRef { key: 2 }, 100_000));
    events.push(Event::Time(5));
    events.push(Event::Stack { pid: 1, iid: 0, tid: b"2" });
    events.push(Event::Time(7));
    let file = mojo_file(&events);

    let mut text = Vec::new();
    let samples = tachyon::convert::austin::austin_text(Cursor::new(&file[..]), &mut text).unwrap();
    assert_eq!(samples, 1_000_002);
    let text = String::from_utf8(text).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[1], "P1;T0:1;f0:f0:2 1");
    assert_eq!(lines[1_000_000], "P1;T0:1;f999999:f999999:1000001 1");
    assert_eq!(lines[1_000_001].matches(";f0:f0:2").count(), 100_000);
    assert_eq!(lines[1_000_002], "P1;T0:2 7");

    let mut source = MojoSource::open(Cursor::new(&file[..]), MojoMetric::Default).unwrap();
    let mut out = Vec::new();
    convert(&mut source, &Output::Collapsed, Destination::Stream(&mut out), &mut |_| {}).unwrap();
    let collapsed = String::from_utf8(out).unwrap();
    // A million one-sample stacks of weight 1 µs, the deep one of 5; the empty one has no line.
    assert_eq!(collapsed.lines().count(), 1_000_001);
    let deep = collapsed.lines().find(|l| l.starts_with("tid:2;")).unwrap();
    assert_eq!(deep.matches("f0:f0:2").count(), 100_000);
    assert!(deep.ends_with(" 5"), "{}", &deep[deep.len() - 20..]);
}
