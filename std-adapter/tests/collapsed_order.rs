//! The collapsed output's order on the cases its fast ordering must get right, against a
//! reference written here the plain way (count every stack by its frames' keys, build every
//! text, sort by count, text and first appearance, as CPython's `Counter` and `sorted` do):
//! names where one is a prefix of another and the next byte sorts below `;` (`f:1` and `f:12`),
//! thread ids likewise (`12` and `123`), ties in count, and names that collide once the
//! directory is dropped (`/a/x.py` and `/b/x.py`), which take the direct way.

use std::collections::HashMap;

use tachyon::convert::{convert, Destination, Output};
use tachyon::memory::VecSink;
use tachyon::tachyon::source::TachyonSource;
use tachyon::tachyon::storage::{Limits, OwnedReaderStorage};
use tachyon_core::io::Cursor;
use tachyon_core::reader::Metadata;
use tachyon_core::storage::{VecWriterStorage, WriterCapacity};
use tachyon_core::{Frame, Location, Writer, WriterConfig};

type Key = (String, i32, String);

fn frame(file: &'static str, func: &'static str, line: i32) -> (Frame<'static>, Key) {
    let loc = Location { lineno: line, end_lineno: line, col: 0, end_col: 1 };
    (Frame::new(file.as_bytes(), func.as_bytes()).at(loc), (file.to_owned(), line, func.to_owned()))
}

/// Writes `samples` (thread id, stack innermost first) and returns the file and the
/// reference lines.
fn case(samples: &[(u64, Vec<(Frame<'static>, Key)>)]) -> (Vec<u8>, String) {
    let cap = WriterCapacity { string_bytes: 1 << 12, strings: 64, frames: 64, threads: 8, rle_budget: 16384 };
    let mut storage = VecWriterStorage::new(cap).unwrap();
    let mut w = Writer::new(VecSink::default(), storage.storage(), WriterConfig::new(1_000, 1_000)).unwrap();
    let mut counts: HashMap<(u64, Vec<Key>), (u64, usize)> = HashMap::new();
    for (i, (tid, stack)) in samples.iter().enumerate() {
        w.write_thread_sample(1_000 + i as u64, 0, *tid, 0, stack.iter().map(|(f, _)| *f)).unwrap();
        if stack.is_empty() {
            // Samples without a stack are left out, as by CPython's collectors.
            continue;
        }
        let key = (*tid, stack.iter().rev().map(|(_, k)| k.clone()).collect::<Vec<_>>());
        let next = counts.len();
        counts.entry(key).or_insert((0, next)).0 += 1;
    }
    w.finish().unwrap();
    let file = w.into_inner().into_inner();
    let mut lines: Vec<(String, u64, usize)> = counts
        .into_iter()
        .map(|((tid, keys), (n, first))| {
            let mut text = format!("tid:{tid}");
            for (file, line, func) in keys {
                let base = file.rsplit('/').next().unwrap();
                text += &format!(";{base}:{func}:{line}");
            }
            (text, n, first)
        })
        .collect();
    lines.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)).then(a.2.cmp(&b.2)));
    let want = lines.into_iter().map(|(t, n, _)| format!("{t} {n}\n")).collect();
    (file, want)
}

fn ours(file: &[u8]) -> String {
    let meta = Metadata::read(&mut Cursor::new(file)).unwrap();
    let mut storage = OwnedReaderStorage::for_metadata(&meta, Limits::default()).unwrap();
    let mut reader = storage.open(Cursor::new(file)).unwrap();
    let mut out = Vec::new();
    convert(&mut TachyonSource::new(&mut reader), &Output::Collapsed, Destination::Stream(&mut out), &mut |_| {})
        .unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn prefixes_below_the_separator_and_thread_ids() {
    let main = frame("/app/main.py", "main", 3);
    let f1 = frame("/app/x.py", "f", 1);
    let f12 = frame("/app/x.py", "f", 12);
    let g = frame("/app/x.py", "g", 7);
    let h = frame("/app/x.py", "h", 9);
    let s = |frames: &[&(Frame<'static>, Key)]| frames.iter().map(|f| (*f).clone()).collect::<Vec<_>>();
    let mut samples = Vec::new();
    for tid in [12u64, 123, 1, 1234] {
        samples.push((tid, s(&[&f1, &main])));
        samples.push((tid, s(&[&g, &f1, &main])));
        samples.push((tid, s(&[&f12, &main])));
        samples.push((tid, s(&[&g, &f12, &main])));
        samples.push((tid, s(&[&main])));
        samples.push((tid, s(&[&f1, &f12, &main])));
        samples.push((tid, s(&[&g, &f1, &main])));
        samples.push((tid, s(&[&h, &f1, &main])));
        samples.push((tid, vec![]));
    }
    let (file, want) = case(&samples);
    assert_eq!(ours(&file), want);
    // The case the fast ordering has to get right: "f:1;" sorts after "f:12", and "12;"
    // after "123;".
    let at = |line: &str| want.find(line).unwrap_or_else(|| panic!("{line} missing"));
    assert!(at("tid:12;main.py:main:3;x.py:f:12;x.py:g:7 1\n") < at("tid:12;main.py:main:3;x.py:f:1;x.py:h:9 1\n"));
    assert!(at("tid:123;main.py:main:3 1\n") < at("tid:12;main.py:main:3 1\n"));
}

#[test]
fn names_that_collide_without_their_directory() {
    let a = frame("/a/x.py", "work", 5);
    let b = frame("/b/x.py", "work", 5);
    let main = frame("/app/main.py", "main", 3);
    let samples = vec![
        (7u64, vec![b.clone(), main.clone()]),
        (7, vec![a.clone(), main.clone()]),
        (7, vec![a.clone(), main.clone()]),
        (7, vec![b.clone(), main.clone()]),
        (7, vec![main.clone()]),
    ];
    let (file, want) = case(&samples);
    let got = ours(&file);
    assert_eq!(got, want);
    // Two lines with the same text, in the order first seen.
    assert_eq!(got.matches("tid:7;main.py:main:3;x.py:work:5 2").count(), 2);
}
