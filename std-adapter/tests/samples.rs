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
