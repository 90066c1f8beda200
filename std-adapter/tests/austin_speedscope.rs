//! speedscope JSON as `austin2speedscope` (austin-python 1.7.1) writes it: hand-written
//! Austin text and MOJO files exercising how it reads lines, against the real tools' output
//! for each (`qemu-tests/vectors/austin2speedscope/`, golden outputs; the recorded and
//! committed MOJO files are checked against the real tool in
//! `qemu-tests/tests/mojo_recorded.rs`); the texts it fails on fail here too; and MOJO read
//! as events (the fast way) gives the same bytes as its text read line by line.

use std::io::Write as _;
use std::path::PathBuf;
use tachyon_test_kit::fixtures;

use tachyon::mojo::austin::austin_text;
use tachyon::mojo::speedscope::{from_mojo, FinishError, Profiles, SpeedscopeError};
use tachyon_core::mojo::{Event, FrameDef};

fn golden() -> PathBuf {
    fixtures::vectors("austin2speedscope")
}

/// Our JSON of `text`, written into the reader in pieces of `chunk` bytes.
fn json(text: &[u8], name: &str, chunk: usize) -> Result<Vec<u8>, FinishError> {
    let mut profiles = Profiles::default();
    for piece in text.chunks(chunk) {
        profiles.write_all(piece).unwrap();
    }
    let mut out = Vec::new();
    profiles.finish(name, &mut out)?;
    Ok(out)
}

#[test]
fn hand_written_texts_give_the_real_tools_json() {
    for name in ["quirks_full", "quirks_memory", "quirks_cpu"] {
        let text = std::fs::read(golden().join(format!("{name}.austin"))).unwrap();
        let want = std::fs::read(golden().join(format!("{name}.speedscope.json"))).unwrap();
        // Whole, and in pieces that split lines and `\r\n` pairs.
        for chunk in [text.len(), 1, 2, 7] {
            let got = json(&text, &format!("{name}.austin"), chunk).unwrap();
            assert!(
                got == want,
                "{name} (pieces of {chunk}):\n ours: {}\nreal: {}",
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want)
            );
        }
    }
}

#[test]
fn texts_austin2speedscope_fails_on_fail() {
    let fails = |text: &str| match json(text.as_bytes(), "x", text.len().max(1)) {
        Err(FinishError::Text(e)) => e,
        other => panic!("{text:?}: {other:?}"),
    };
    assert_eq!(fails("P1;T0:1;a:f:1 5\n"), SpeedscopeError::NoMode);
    assert_eq!(fails(""), SpeedscopeError::NoMode);
    assert_eq!(fails("# mode: gil\nP1;T0:1;a:f:1 5\n"), SpeedscopeError::UnknownMode("gil".into()));
    // Lines count from 1: the header's two, the dropped first sample, then this one.
    assert_eq!(fails("# mode: full\nP1;T0:1;a:f:1 5\nP1;T0:1;a:f:1 5\n"), SpeedscopeError::OneMetricInFullMode(3));
    assert_eq!(fails("# mode: wall\nP1;T0:1;a:f:1 5\nP1 5\n"), SpeedscopeError::NoThread(3));
}

#[test]
fn hand_made_mojo_files_give_the_real_tools_text_and_json() {
    for name in ["quirks_wall", "quirks_full"] {
        let mojo = std::fs::read(golden().join(format!("{name}.mojo"))).unwrap();
        let want_text = std::fs::read(golden().join(format!("{name}.mojo.austin"))).unwrap();
        let want_json = std::fs::read(golden().join(format!("{name}.mojo.speedscope.json"))).unwrap();
        let mut text = Vec::new();
        austin_text(&mojo[..], &mut text).unwrap();
        assert!(text == want_text, "{name}: ours:\n{}", String::from_utf8_lossy(&text));
        let mut json = Vec::new();
        from_mojo(&mojo[..], &format!("{name}.mojo.austin"), &mut json).unwrap();
        assert!(
            json == want_json,
            "{name}:\n ours: {}\nreal: {}",
            String::from_utf8_lossy(&json),
            String::from_utf8_lossy(&want_json)
        );
    }
}

/// The JSON of a MOJO file read as events and read as its text line by line, or the
/// error of each.
fn both_ways(mojo: &[u8]) -> (Result<Vec<u8>, String>, Result<Vec<u8>, String>) {
    let mut fast = Vec::new();
    let fast = from_mojo(mojo, "t", &mut fast).map(|_| fast).map_err(|e| e.to_string());
    let mut profiles = Profiles::default();
    let slow = match austin_text(mojo, &mut profiles) {
        Ok(_) => {
            let mut out = Vec::new();
            profiles.finish("t", &mut out).map(|()| out).map_err(|e| e.to_string())
        }
        Err(e) => Err(e.to_string()),
    };
    (fast, slow)
}

fn assert_same_both_ways(what: &str, mojo: &[u8]) {
    let (fast, slow) = both_ways(mojo);
    let show = |r: &Result<Vec<u8>, String>| match r {
        Ok(json) => String::from_utf8_lossy(json).into_owned(),
        Err(e) => format!("error: {e}"),
    };
    assert!(fast == slow, "{what}:\n events: {}\n   text: {}", show(&fast), show(&slow));
}

/// MOJO events, written by our writer, after `MOJ` and version 3.
fn mojo_file(events: &[Event<&[u8]>]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut staging = vec![0u8; 1 << 16];
    let mut w = tachyon_core::mojo::Writer::new(tachyon::memory::IoSink(&mut out), &mut staging, 3).unwrap();
    for e in events {
        w.write(e).unwrap();
    }
    w.flush().unwrap();
    out
}

fn frame(key: u64, filename: u64, scope: u64, line: u64) -> Event<&'static [u8]> {
    Event::Frame(FrameDef { key, filename, scope, line, line_end: line, column: 0, column_end: 0 })
}

#[test]
fn every_committed_mojo_file_reads_the_same_as_events_and_as_text() {
    let vectors = fixtures::root().join("qemu-tests/vectors");
    let mut files: Vec<_> = [
        "mojo-austin-3.7",
        "mojo-austin-3.7/derived",
        "mojo-austin-3.7/synthetic_edge",
        "mojo-v4",
        "austin2speedscope",
    ]
    .iter()
    .flat_map(|d| std::fs::read_dir(vectors.join(d)).unwrap().map(|e| e.unwrap().path()))
    .filter(|p| p.extension().is_some_and(|x| x == "mojo"))
    .collect();
    files.sort();
    assert!(files.len() >= 27, "{} files", files.len());
    let mut succeeded = 0;
    for path in &files {
        let mojo = std::fs::read(path).unwrap();
        assert_same_both_ways(&path.display().to_string(), &mojo);
        succeeded += usize::from(both_ways(&mojo).0.is_ok());
    }
    assert!(succeeded >= 15, "{succeeded} of {} files convert", files.len());
}

/// What `mojo2austin` fails on but our text has a form for, and text the real tools were
/// not run on: the same both ways.
#[test]
fn odd_files_read_the_same_as_events_and_as_text() {
    let names: [Event<&[u8]>; 6] = [
        Event::String { key: 2, value: b"app.py" },
        Event::String { key: 3, value: b"main" },
        Event::String { key: 4, value: b"caf\xe9.py" },
        Event::String { key: 5, value: b"f\rg" },
        Event::String { key: 6, value: b"L7" },
        frame(1, 2, 3, 1),
    ];
    let more = [frame(2, 4, 3, 2), frame(3, 5, 3, 3), frame(4, 6, 3, 4), frame(5, 2, 3, 5)];
    let stack = |tid: &'static [u8]| Event::Stack { pid: 1, iid: 0, tid };
    let with = |mode: &'static [u8], body: &[Event<&'static [u8]>]| {
        let mut events: Vec<Event<&[u8]>> = vec![Event::Metadata { key: b"mode", value: mode }, stack(b"1")];
        events.extend_from_slice(&names);
        events.extend_from_slice(&more);
        events.extend_from_slice(&[Event::FrameRef { key: 1 }, Event::Time(1)]);
        events.extend_from_slice(body);
        mojo_file(&events)
    };
    use Event::{FrameRef as R, Gc, Idle, Memory, Time};
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("a name that is not UTF-8", with(b"wall", &[stack(b"1"), R { key: 1 }, R { key: 2 }, Time(5)])),
        ("a thread id that is not UTF-8", with(b"wall", &[stack(b"\xff1"), R { key: 1 }, Time(5)])),
        ("a \\r in a name", with(b"wall", &[stack(b"1"), R { key: 3 }, Time(5), stack(b"1"), R { key: 1 }, Time(6)])),
        ("a \\r in a thread id", with(b"wall", &[stack(b"1\r2"), R { key: 1 }, Time(5)])),
        ("a frame file `L7`", with(b"wall", &[stack(b"1"), R { key: 1 }, R { key: 4 }, Time(5)])),
        (
            "time only in full mode",
            with(b"full", &[stack(b"1"), R { key: 1 }, Time(5), stack(b"1"), R { key: 1 }, Time(6)]),
        ),
        ("memory only in full mode", with(b"full", &[stack(b"1"), R { key: 1 }, Memory(-5), stack(b"1")])),
        ("idle first in full mode", with(b"full", &[stack(b"1"), R { key: 1 }, Idle, Time(5), Memory(2), stack(b"1")])),
        ("two times in a wall line", with(b"wall", &[stack(b"1"), R { key: 1 }, Time(5), Time(6)])),
        ("a GC frame first", with(b"wall", &[stack(b"1"), Gc, R { key: 1 }, Time(5)])),
        (
            "the largest times",
            with(b"full", &[stack(b"1"), R { key: 1 }, Time(i64::MAX), Memory(i64::MIN), stack(b"1")]),
        ),
        ("no mode", mojo_file(&[stack(b"1"), names[0], names[1], names[5], R { key: 1 }, Time(5)])),
        ("an unknown mode", with(b"gil", &[stack(b"1"), R { key: 1 }, Time(5)])),
        ("a frame not defined", with(b"wall", &[stack(b"1"), R { key: 1 }, R { key: 9 }, Time(5)])),
        (
            "mode after the first sample",
            mojo_file(&[
                stack(b"1"),
                names[0],
                names[1],
                names[5],
                R { key: 1 },
                Time(5),
                Event::Metadata { key: b"mode", value: b"cpu" },
                stack(b"1"),
                R { key: 1 },
                Time(6),
            ]),
        ),
    ];
    for (what, mojo) in &cases {
        assert_same_both_ways(what, mojo);
    }
    // Some of them are ones austin2speedscope fails on.
    assert!(cases.iter().filter(|(_, m)| both_ways(m).0.is_err()).count() >= 3);
}

/// Many lines, most read as events and some as text (a name holding `;`), each bringing a
/// new frame: the frames are numbered in the order the lines use them first, across
/// buffers of text, and the stacks are the same.
#[test]
fn lines_read_as_events_and_as_text_keep_their_order() {
    let mut strings = Vec::new();
    for i in 0..3000u64 {
        strings.push((i, format!("f{i}{}", if i % 7 == 3 { ";x" } else { "" })));
    }
    let mut events: Vec<Event<&[u8]>> = vec![Event::Metadata { key: b"mode", value: b"wall" }];
    for (i, name) in &strings {
        let tid: &[u8] = [b"1".as_slice(), b"2", b"3"][*i as usize % 3];
        events.push(Event::Stack { pid: 1, iid: 0, tid });
        events.push(Event::String { key: i + 2, value: name.as_bytes() });
        events.push(frame(i + 1, i + 2, i + 2, *i));
        if *i > 0 {
            events.push(frame(100_000 + i, i + 1, i + 1, 1));
            events.push(Event::FrameRef { key: 100_000 + i });
        }
        events.push(Event::FrameRef { key: i + 1 });
        events.push(Event::Time(*i as i64));
    }
    let mojo = mojo_file(&events);
    assert_same_both_ways("3000 lines", &mojo);
    let (fast, _) = both_ways(&mojo);
    let json = String::from_utf8(fast.unwrap()).unwrap();
    // 2999 lines, some skipped for a name with `;`, in three threads.
    assert_eq!(json.matches("profile for").count(), 3, "{}", &json[..json.len().min(2000)]);
}
