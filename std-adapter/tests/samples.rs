//! The resolved-sample iterator gives what CPython's reader gives: every sample of the
//! vectors, with names and locations, equals the lines of CPython's expected view.

use std::path::Path;
use tachyon_test_kit::fixtures;

use serde_json::{json, Value};
use tachyon::file::FileSource;
use tachyon::tachyon::source::samples;
use tachyon::tachyon::storage::{Limits, OwnedReaderStorage};
use tachyon_core::reader::Metadata;

#[test]
fn resolved_samples_match_cpythons_view() {
    let dir = fixtures::vectors("cpython-3.15.2");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let Some(name) = path.to_str().and_then(|p| p.strip_suffix(".x86_64.bin")) else { continue };
        let expected = std::fs::read_to_string(format!("{name}.expected.jsonl")).unwrap();
        let want: Vec<Value> = expected.lines().skip(1).map(|l| serde_json::from_str(l).unwrap()).collect();
        for arch in ["x86_64", "s390x"] {
            let file = format!("{name}.{arch}.bin");
            let mut src = FileSource::open(Path::new(&file)).unwrap();
            let meta = Metadata::read(&mut src).unwrap();
            let mut storage = OwnedReaderStorage::for_metadata(&meta, Limits::default()).unwrap();
            let mut reader = storage.open(src).unwrap();
            let got: Vec<Value> = samples(&mut reader)
                .map(|s| {
                    let s = s.unwrap();
                    let frames: Vec<Value> = s
                        .frames
                        .iter()
                        .map(|f| {
                            let loc = f.location.map(|l| json!([l.lineno, l.end_lineno, l.col, l.end_col]));
                            json!([&*f.filename, &*f.funcname, loc, f.opcode])
                        })
                        .collect();
                    json!({"ts": s.timestamp_us, "iid": s.interpreter_id, "tid": s.thread_id, "status": s.status, "frames": frames})
                })
                .collect();
            assert_eq!(got, want, "{file}");
            checked += 1;
        }
    }
    assert_eq!(checked, 28);
}

#[test]
fn iteration_ends_after_an_error() {
    let file = fixtures::vectors("cpython-3.15.2/04_pop_push.x86_64.bin");
    let mut bytes = std::fs::read(file).unwrap();
    bytes[64 + 12] = 9; // encoding byte of the first record
    let mut src = tachyon_core::io::Cursor::new(&bytes[..]);
    let meta = Metadata::read(&mut src).unwrap();
    let mut storage = OwnedReaderStorage::for_metadata(&meta, Limits::default()).unwrap();
    let mut reader = storage.open(tachyon_core::io::Cursor::new(&bytes[..])).unwrap();
    let mut it = samples(&mut reader);
    assert!(it.next().unwrap().is_err());
    assert!(it.next().is_none());
}

/// A REPEAT run is handed to collectors as CPython's replay makes its calls: one call per
/// stretch of equal statuses, in parts of at most `CALL_PART` timestamps, a part after a full
/// one of the same status marked `continued`. The reference applies that rule one entry at a
/// time, over the core reader's own entries; the file has stretches from one entry to three
/// parts long, changes just before, at and after a part's end, and runs longer than a batch.
#[test]
fn runs_are_handed_over_in_calls_of_equal_status_and_bounded_parts() {
    use tachyon::model::{Call, Collector, FrameTable, Times, CALL_PART};
    use tachyon::tachyon::source::replay;
    use tachyon_core::storage::{VecWriterStorage, WriterCapacity};
    use tachyon_core::{Frame, Record, Writer, WriterConfig};

    let stretches = [1, 2, CALL_PART - 1, 1, CALL_PART, CALL_PART, 1, CALL_PART + 1, 3 * CALL_PART + 5, 7, 1, 2];
    let cap = WriterCapacity { string_bytes: 1 << 12, strings: 16, frames: 16, threads: 2, rle_budget: 1 << 20 };
    let mut storage = VecWriterStorage::new(cap).unwrap();
    let config = WriterConfig::new(1_000, 1_000);
    let mut w = Writer::new(tachyon::memory::VecSink::default(), storage.storage(), config).unwrap();
    let stack = [Frame::new(b"a.py", b"f"), Frame::new(b"a.py", b"main")];
    let mut ts = 1_000;
    for (k, &n) in stretches.iter().enumerate() {
        for _ in 0..n {
            ts += 1 + (k as u64 % 3) * 200;
            w.write_thread_sample(ts, 0, 7, (k % 2) as u8 * 8 + (k % 3) as u8, stack.iter().copied()).unwrap();
        }
    }
    w.finish().unwrap();
    let file = w.into_inner().into_inner();

    type Seen = (Vec<u64>, u8, bool);
    // The rule, one entry at a time.
    let meta = Metadata::read(&mut tachyon_core::io::Cursor::new(&file[..])).unwrap();
    let mut storage = OwnedReaderStorage::for_metadata(&meta, Limits::default()).unwrap();
    let mut reader = storage.open(tachyon_core::io::Cursor::new(&file[..])).unwrap();
    let mut want: Vec<Seen> = Vec::new();
    while let Some(record) = reader.next_item().unwrap() {
        match record {
            Record::Sample(s) => want.push((vec![s.timestamp_us], s.status, false)),
            Record::Repeat(mut run) => {
                let mut part: Option<Seen> = None;
                while let Some(e) = run.next_entry().unwrap() {
                    if let Some(p) = part.as_mut() {
                        if p.1 == e.status && p.0.len() < CALL_PART {
                            p.0.push(e.timestamp_us);
                            continue;
                        }
                        let continued = p.1 == e.status;
                        want.push(part.take().unwrap());
                        part = Some((vec![e.timestamp_us], e.status, continued));
                    } else {
                        part = Some((vec![e.timestamp_us], e.status, false));
                    }
                }
                want.extend(part);
            }
        }
    }
    assert!(want.iter().any(|c| c.2) && want.iter().any(|c| c.0.len() == CALL_PART), "the file has full parts");

    struct Calls(Vec<Seen>);
    impl Collector for Calls {
        fn collect(&mut self, _: &FrameTable, call: &Call<'_>) {
            let Times::Stamped(times) = call.times else { panic!("timestamps") };
            self.0.push((times.to_vec(), call.status, call.continued));
        }
    }
    let mut reader = storage.open(tachyon_core::io::Cursor::new(&file[..])).unwrap();
    let frames = tachyon::tachyon::source::frame_table(reader.tables());
    let mut got = Calls(Vec::new());
    let samples = replay(&mut reader, &frames, &mut got, &mut |_| {}).unwrap();
    assert_eq!(samples, stretches.iter().sum::<usize>() as u64);
    assert_eq!(got.0.len(), want.len());
    for (k, (g, w)) in got.0.iter().zip(&want).enumerate() {
        assert!(
            g == w,
            "call {k}: {} timestamps, status {}, continued {}; want {}, {}, {}",
            g.0.len(),
            g.1,
            g.2,
            w.0.len(),
            w.1,
            w.2
        );
    }
}
