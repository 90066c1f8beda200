//! The MOJO reader and writer on real files written by Austin 3.7.0, their version 1 and 2
//! re-encodings and hand-made edge cases (`qemu-tests/vectors/mojo-austin-3.7/`, see its
//! README): every event where the vectors' event dumps put it, with its fields and bytes;
//! every file re-encodes to its own bytes (older versions too); bad files give the rule and
//! the offset, never a panic. The tables' and samples' tests are here too (about 900 lines in
//! all, over the project's 800): they read the same vectors through the same helpers, which a
//! split would copy or move behind a shared module every other test binary compiles.

use tachyon_test_kit::Broken;

use tachyon_core::io::{Cursor, CursorError};
use tachyon_core::mojo::varint;
use tachyon_core::mojo::{Event, FrameDef, ReadError, Reader, Rule, WriteError, Writer, MIN_WINDOW};

macro_rules! vector {
    ($path:literal) => {
        ($path, include_bytes!(concat!("../../qemu-tests/vectors/mojo-austin-3.7/", $path)) as &[u8])
    };
}

const REAL: [(&str, &[u8]); 6] = [
    vector!("a37_full_small_threads_py311.mojo"),
    vector!("a37_gc_small_py311.mojo"),
    vector!("a37_memory_small_py311.mojo"),
    vector!("a37_wall_simple_py311.mojo"),
    vector!("a37_wall_small_py311.mojo"),
    vector!("a37p_native_kernel_py311.mojo"),
];

const DERIVED: [(&str, &[u8]); 2] =
    [vector!("derived/v1_from_a37_wall_simple.mojo"), vector!("derived/v2_from_a37_wall_simple.mojo")];

/// The event dumps: every event of the small files with its offset, fields and bytes.
const DUMPS: [(&str, &[u8], &str); 4] = [
    (
        "a37_full_small_threads_py311",
        include_bytes!("../../qemu-tests/vectors/mojo-austin-3.7/a37_full_small_threads_py311.mojo"),
        include_str!("../../qemu-tests/vectors/mojo-austin-3.7/expected/a37_full_small_threads_py311.events.jsonl"),
    ),
    (
        "a37_gc_small_py311",
        include_bytes!("../../qemu-tests/vectors/mojo-austin-3.7/a37_gc_small_py311.mojo"),
        include_str!("../../qemu-tests/vectors/mojo-austin-3.7/expected/a37_gc_small_py311.events.jsonl"),
    ),
    (
        "a37_memory_small_py311",
        include_bytes!("../../qemu-tests/vectors/mojo-austin-3.7/a37_memory_small_py311.mojo"),
        include_str!("../../qemu-tests/vectors/mojo-austin-3.7/expected/a37_memory_small_py311.events.jsonl"),
    ),
    (
        "a37_wall_small_py311",
        include_bytes!("../../qemu-tests/vectors/mojo-austin-3.7/a37_wall_small_py311.mojo"),
        include_str!("../../qemu-tests/vectors/mojo-austin-3.7/expected/a37_wall_small_py311.events.jsonl"),
    ),
];

/// An event with owned strings, to outlive the reader's window.
type Owned = Event<Vec<u8>>;

/// The version, every event with its offset, and how reading ended.
type ReadAll = (u8, Vec<(u64, Owned)>, Result<(), ReadError<CursorError>>);

fn read_all(file: &[u8], window: usize) -> ReadAll {
    let mut buf = vec![0u8; window];
    let mut reader = match Reader::open(Cursor::new(file), &mut buf) {
        Ok(r) => r,
        Err(e) => return (0, Vec::new(), Err(e)),
    };
    let version = reader.version();
    let mut events = Vec::new();
    loop {
        match reader.next_item() {
            Ok(Some((offset, event))) => events.push((offset, event.map(<[u8]>::to_vec))),
            Ok(None) => return (version, events, Ok(())),
            Err(e) => return (version, events, Err(e)),
        }
    }
}

fn write_all(version: u8, events: &[(u64, Owned)]) -> Vec<u8> {
    let mut out = vec![0u8; 4 << 20];
    let mut staging = [0u8; 4096];
    let mut w = Writer::new(Cursor::new(&mut out[..]), &mut staging, version).unwrap();
    for (_, e) in events {
        w.write(&e.as_bytes()).unwrap();
    }
    let len = w.get_ref().position() as usize;
    out.truncate(len);
    out
}

#[test]
fn every_file_reencodes_to_its_own_bytes() {
    for (name, file) in REAL.iter().chain(&DERIVED) {
        let (version, events, end) = read_all(file, 64 << 10);
        end.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(events.len() > 100, "{name}: {} events", events.len());
        assert!(write_all(version, &events) == *file, "{name}: re-encoded bytes differ");
    }
}

#[test]
fn older_versions_are_written_as_the_derived_files_hold_them() {
    // The derived files are a37_wall_simple as version 1 and 2: the same events, with the
    // fields those versions have.
    let (version, events, end) = read_all(REAL[3].1, 64 << 10);
    end.unwrap();
    assert_eq!(version, 3);
    assert!(write_all(1, &events) == DERIVED[0].1, "version 1");
    assert!(write_all(2, &events) == DERIVED[1].1, "version 2");
    let (v1, v1_events, _) = read_all(DERIVED[0].1, 64 << 10);
    assert_eq!(v1, 1);
    // Version 1 frames have no span beyond the line; version 1 and 2 stacks no iid.
    let frames = v1_events.iter().filter_map(|(_, e)| match e {
        Event::Frame(d) => Some(*d),
        _ => None,
    });
    assert!(frames.clone().count() > 10);
    assert!(frames.into_iter().all(|d| (d.line_end, d.column, d.column_end) == (0, 0, 0)));
}

#[test]
fn small_windows_read_the_same_events() {
    for (name, file) in REAL {
        let (_, want, _) = read_all(file, 64 << 10);
        for window in [MIN_WINDOW, 97, 256] {
            let (_, got, end) = read_all(file, window);
            match end {
                Ok(()) => assert_eq!(got, want, "{name} window {window}"),
                // Only an event longer than the window stops it (a long path or symbol).
                Err(ReadError::TooLarge { offset, window: w }) => {
                    assert_eq!(w, window);
                    assert_eq!(got[..], want[..got.len()], "{name} window {window}");
                    assert_eq!(want[got.len()].0, offset, "{name} window {window}");
                }
                Err(e) => panic!("{name} window {window}: {e}"),
            }
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn events_are_where_the_event_dumps_put_them() {
    for (name, file, dump) in DUMPS {
        let (_, events, end) = read_all(file, 64 << 10);
        end.unwrap();
        let expected: Vec<serde_json::Value> = dump
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|v: &serde_json::Value| v["ev"] != "header")
            .collect();
        assert_eq!(events.len(), expected.len(), "{name}");
        for (i, ((offset, event), want)) in events.iter().zip(&expected).enumerate() {
            let at = format!("{name} event {i} at {offset}");
            assert_eq!(*offset, want["off"].as_u64().unwrap(), "{at}");
            let end = events.get(i + 1).map_or(file.len(), |(o, _)| *o as usize);
            let bytes = &file[*offset as usize..end];
            assert_eq!(hex(bytes), want["raw"].as_str().unwrap(), "{at}");
            // The dumps' text fields write the recording folder `/tmp/research` as `<research>`
            // (their `raw` bytes are the file's).
            let text = |v: &[u8]| String::from_utf8(v.to_vec()).unwrap().replace("/tmp/research", "<research>");
            let num = |k: &str| want[k].as_u64().unwrap_or_else(|| panic!("{at}: {k}"));
            match (event, want["ev"].as_str().unwrap()) {
                (Event::Metadata { key, value }, "metadata") => {
                    assert_eq!(
                        (text(key), text(value)),
                        (want["key"].as_str().unwrap().into(), want["value"].as_str().unwrap().into()),
                        "{at}"
                    );
                }
                (Event::Stack { pid, iid, tid }, "stack") => {
                    assert_eq!(
                        (*pid, *iid, text(tid)),
                        (num("pid"), num("iid"), want["tid"].as_str().unwrap().into()),
                        "{at}"
                    );
                }
                (Event::String { key, value }, "string") => {
                    assert_eq!((*key, text(value)), (num("key"), want["value"].as_str().unwrap().into()), "{at}");
                }
                (Event::Frame(d), "frame") => {
                    let fields = (d.key, d.filename, d.scope, d.line, d.line_end, d.column, d.column_end);
                    let wanted = (
                        num("key"),
                        num("filename_key"),
                        num("scope_key"),
                        num("line"),
                        num("line_end"),
                        num("column"),
                        num("column_end"),
                    );
                    assert_eq!(fields, wanted, "{at}");
                }
                (Event::FrameRef { key }, "frame_ref") => assert_eq!(*key, num("key"), "{at}"),
                (Event::Time(t), "metric_time") => assert_eq!(*t, want["value"].as_i64().unwrap(), "{at}"),
                (Event::Memory(m), "metric_memory") => assert_eq!(*m, want["value"].as_i64().unwrap(), "{at}"),
                (Event::Idle, "idle") | (Event::Gc, "gc") => {}
                (e, kind) => panic!("{at}: read {e:?}, the dump says {kind}"),
            }
        }
        // Negative memory deltas are in them (the sign bit in use).
        if name.contains("memory") {
            assert!(events.iter().any(|(_, e)| matches!(e, Event::Memory(m) if *m < 0)), "{name}");
        }
    }
}

macro_rules! edge {
    ($name:literal) => {
        include_bytes!(concat!("../../qemu-tests/vectors/mojo-austin-3.7/synthetic_edge/", $name, ".mojo")) as &[u8]
    };
}

#[test]
fn edge_cases_give_the_documented_events_or_rules() {
    let events = |file: &[u8]| {
        let (version, events, end) = read_all(file, 4096);
        (version, events.into_iter().map(|(_, e)| e).collect::<Vec<_>>(), end)
    };
    let last = |file: &[u8]| events(file).1.pop().unwrap();
    // What both real readers read.
    assert_eq!(last(edge!("neg_time")), Event::Time(-5));
    assert_eq!(last(edge!("nonminimal_varint")), Event::Time(5));
    let (_, evs, _) = events(edge!("nonhex_tid"));
    assert!(evs.contains(&Event::Stack { pid: 42, iid: 0, tid: b"main".to_vec() }));
    assert_eq!(events(edge!("string_ref_event")).1.iter().filter(|e| **e == Event::StringRef { key: 3 }).count(), 1);
    // Version 4 is read; its events are accepted in a version 3 file (as 2.4.0 does).
    let (v4, evs, end) = events(edge!("version4_header"));
    assert_eq!((v4, end), (4, Ok(())));
    assert!(evs.contains(&Event::Frame(FrameDef {
        key: 7,
        filename: 2,
        scope: 3,
        line: 10,
        line_end: 10,
        column: 1,
        column_end: 5
    })));
    assert_eq!(last(edge!("event13_in_v3")), Event::StackRepeat);
    // Definitions that break the tables' rules are still well-formed events: their meaning
    // is the sample resolver's.
    for file in [
        edge!("cross_pid_ref"),
        edge!("undefined_frame_ref"),
        edge!("undefined_string_key0"),
        edge!("string_before_stack"),
        edge!("redefine_string"),
        edge!("unknown_scope_key1"),
        edge!("ok_minimal"),
    ] {
        assert_eq!(events(file).2, Ok(()));
    }
    // Rules, at the event's offset.
    assert_eq!(events(edge!("truncated_tail")).2, Err(ReadError::Format { offset: 46, rule: Rule::Truncated }));
    assert_eq!(
        events(edge!("version0_header")).2,
        Err(ReadError::Format { offset: 0, rule: Rule::Version { version: 0 } })
    );
}

#[test]
fn hostile_varints_and_ids_are_named() {
    let ok = edge!("ok_minimal");
    let with = |tail: &[u8]| [ok, tail].concat();
    let end = |file: &[u8]| read_all(file, 4096).2;
    let at = ok.len() as u64;
    // A frame key of more than 64 bits, and one of eleven bytes.
    let over = with(&[5, 0xbf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x04]);
    assert_eq!(end(&over), Err(ReadError::Format { offset: at, rule: Rule::VarintOverflow }));
    let long = with(&[5, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00]);
    assert_eq!(end(&long), Err(ReadError::Format { offset: at, rule: Rule::VarintOverflow }));
    // u64::MAX is a real frame key.
    let max = with(&[5, 0xbf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x03]);
    assert_eq!(read_all(&max, 4096).1.last().unwrap().1, Event::FrameRef { key: u64::MAX });
    // A negative key; a time beyond i64.
    assert_eq!(end(&with(&[5, 0x41])), Err(ReadError::Format { offset: at, rule: Rule::OutOfRange }));
    let huge_time = with(&[9, 0xbf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x03]);
    assert_eq!(end(&huge_time), Err(ReadError::Format { offset: at, rule: Rule::OutOfRange }));
    assert_eq!(
        read_all(&with(&[10, 0xc0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02]), 4096).1.last().unwrap().1,
        Event::Memory(i64::MIN)
    );
    // Unknown ids, and files that are not MOJO.
    for id in [0u8, 17, 0xff] {
        assert_eq!(end(&with(&[id])), Err(ReadError::Format { offset: at, rule: Rule::UnknownEvent { id } }));
    }
    assert_eq!(end(b"MOX\x03"), Err(ReadError::Format { offset: 0, rule: Rule::NotMojo }));
    assert_eq!(end(b"MO"), Err(ReadError::Format { offset: 0, rule: Rule::Truncated }));
    assert_eq!(end(b""), Err(ReadError::Format { offset: 0, rule: Rule::Truncated }));
    assert_eq!(end(b"MOJ\x05"), Err(ReadError::Format { offset: 0, rule: Rule::Version { version: 5 } }));
    // A string longer than the window is a capacity error at its event.
    let mut long_string = ok.to_vec();
    long_string.push(1);
    long_string.extend(std::iter::repeat(b'k').take(500));
    long_string.extend([0, b'v', 0]);
    assert_eq!(read_all(&long_string, MIN_WINDOW).2, Err(ReadError::TooLarge { offset: at, window: MIN_WINDOW }));
    assert_eq!(read_all(&long_string, 4096).2, Ok(()));
}

#[test]
#[cfg_attr(target_endian = "big", ignore = "MOJO has no byte order: run on the host (4 s under qemu-s390x)")]
fn every_truncation_is_events_then_the_rule() {
    for (name, file) in REAL.iter().filter(|(n, _)| n.contains("small")) {
        let (_, all, _) = read_all(file, 64 << 10);
        let boundaries: std::collections::BTreeSet<u64> = all.iter().map(|(o, _)| *o).collect();
        for len in 0..file.len() {
            let (_, got, end) = read_all(&file[..len], 4096);
            assert_eq!(got[..], all[..got.len()], "{name} cut at {len}");
            match end {
                Ok(()) => assert!(boundaries.contains(&(len as u64)), "{name} cut at {len}"),
                Err(ReadError::Format { offset, rule: Rule::Truncated }) => {
                    assert!(offset == 0 || offset == all[got.len()].0, "{name} cut at {len}")
                }
                Err(e) => panic!("{name} cut at {len}: {e}"),
            }
        }
    }
}

#[test]
fn the_writer_refuses_what_readers_would_misread() {
    let mut out = [0u8; 256];
    let mut staging = [0u8; 32];
    assert!(matches!(Writer::new(Cursor::new(&mut out[..]), &mut staging, 0), Err(WriteError::Version { version: 0 })));
    let mut w = Writer::new(Cursor::new(&mut out[..]), &mut staging, 3).unwrap();
    assert_eq!(w.write(&Event::StackRepeat), Err(WriteError::NotInVersion { id: 13, version: 3 }));
    assert_eq!(w.write(&Event::String { key: 2, value: &b"a\0b"[..] }), Err(WriteError::NulInString));
    assert_eq!(w.write(&Event::String { key: 2, value: &[b'x'; 40][..] }), Err(WriteError::TooLarge { staging: 32 }));
    w.write(&Event::Stack { pid: 42, iid: 0, tid: &b"2a"[..] }).unwrap();
    w.write(&Event::Memory(-86016)).unwrap();
    assert_eq!(w.events(), 2);
    let len = w.get_ref().position() as usize;
    // Nothing of the refused calls went out.
    assert_eq!(&out[..len], b"MOJ\x03\x02\x2a\x00\x32\x61\x00\x0a\xc0\xc0\x0a");
}

/// A sink that fails its `n`-th write, with an error or by taking a few bytes only.
struct Flaky {
    out: Vec<u8>,
    calls: usize,
    fail_at: usize,
    short: bool,
}

impl embedded_io::ErrorType for Flaky {
    type Error = Broken;
}

impl embedded_io::Write for Flaky {
    fn write(&mut self, buf: &[u8]) -> Result<usize, Broken> {
        self.calls += 1;
        if self.calls == self.fail_at {
            if self.short && buf.len() > 1 {
                self.out.extend_from_slice(&buf[..buf.len() / 2]);
                return Ok(buf.len() / 2);
            }
            return Err(Broken);
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> Result<(), Broken> {
        Ok(())
    }
}

#[test]
fn a_failing_sink_leaves_a_file_of_exactly_the_accepted_events() {
    let (version, events, _) = read_all(REAL[4].1, 64 << 10);
    for short in [false, true] {
        for fail_at in 1..60 {
            let mut staging = [0u8; 4096];
            let sink = Flaky { out: Vec::new(), calls: 0, fail_at, short };
            let mut w = match Writer::new(sink, &mut staging, version) {
                Ok(w) => w,
                Err(WriteError::Sink { accepted: true, .. }) if fail_at == 1 => continue,
                Err(e) => panic!("{e}"),
            };
            let mut accepted = Vec::new();
            for (_, e) in events.iter().take(50) {
                match w.write(&e.as_bytes()) {
                    Ok(()) => accepted.push(e.clone()),
                    Err(WriteError::Sink { accepted: false, .. }) => {}
                    Err(e) => panic!("{e}"),
                }
            }
            w.finish().unwrap();
            // Finished: later events are refused and leave the file as it is.
            let (_, last) = &events[0];
            assert!(matches!(w.write(&last.as_bytes()), Err(WriteError::Finished)));
            let file = w.into_inner().out;
            let (_, back, end) = read_all(&file, 4096);
            assert_eq!(end, Ok(()), "fail at {fail_at}, short {short}");
            assert_eq!(back.into_iter().map(|(_, e)| e).collect::<Vec<_>>(), accepted, "fail at {fail_at}");
        }
    }
}

/// A sink whose flush fails a given number of times.
struct FlushFails {
    out: Vec<u8>,
    failures: usize,
}

impl embedded_io::ErrorType for FlushFails {
    type Error = Broken;
}

impl embedded_io::Write for FlushFails {
    fn write(&mut self, buf: &[u8]) -> Result<usize, Broken> {
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> Result<(), Broken> {
        if self.failures > 0 {
            self.failures -= 1;
            return Err(Broken);
        }
        Ok(())
    }
}

#[test]
fn finish_is_retried_after_a_failed_flush_and_ends_the_file_once() {
    let (version, events, _) = read_all(REAL[4].1, 64 << 10);
    let mut staging = [0u8; 4096];
    let mut w = Writer::new(FlushFails { out: Vec::new(), failures: 2 }, &mut staging, version).unwrap();
    for (_, e) in events.iter().take(20) {
        w.write(&e.as_bytes()).unwrap();
    }
    // Events are still taken while finishing fails; the file ends when it succeeds.
    assert!(matches!(w.finish(), Err(WriteError::Sink { .. })));
    w.write(&events[20].1.as_bytes()).unwrap();
    assert!(matches!(w.finish(), Err(WriteError::Sink { .. })));
    w.finish().unwrap();
    assert!(matches!(w.write(&events[21].1.as_bytes()), Err(WriteError::Finished)));
    let (_, back, end) = read_all(&w.into_inner().out, 4096);
    assert_eq!(end, Ok(()));
    assert_eq!(back.len(), 21);
}

#[test]
fn varints_of_every_width_round_trip_through_events() {
    let mut out = vec![0u8; 4096];
    let mut staging = [0u8; 64];
    let mut w = Writer::new(Cursor::new(&mut out[..]), &mut staging, 4).unwrap();
    let mut want = Vec::new();
    for bits in 0..64 {
        let key = (1u64 << bits) | 1;
        w.write(&Event::FrameRef { key }).unwrap();
        want.push(Event::FrameRef { key });
        let m = -((1i64 << bits.min(62)) + 1);
        w.write(&Event::Memory(m)).unwrap();
        want.push(Event::Memory(m));
    }
    let len = w.get_ref().position() as usize;
    let (_, got, end) = read_all(&out[..len], MIN_WINDOW);
    assert_eq!(end, Ok(()));
    assert_eq!(got.into_iter().map(|(_, e)| e).collect::<Vec<_>>(), want);
    let mut buf = [0u8; varint::MAX_LEN];
    assert_eq!(varint::encode(false, u64::MAX, &mut buf), 10);
}

/// Tables over Vec storage of the given sizes.
struct Storage {
    strings: Vec<tachyon_core::mojo::StringSlot>,
    frames: Vec<tachyon_core::mojo::FrameSlot>,
    bytes: Vec<u8>,
}

impl Storage {
    fn new(strings: usize, frames: usize, bytes: usize) -> Self {
        Storage {
            strings: vec![tachyon_core::mojo::StringSlot::EMPTY; strings],
            frames: vec![tachyon_core::mojo::FrameSlot::EMPTY; frames],
            bytes: vec![0; bytes],
        }
    }

    fn tables(&mut self, seed: u64) -> tachyon_core::mojo::Tables<'_> {
        tachyon_core::mojo::Tables::new(&mut self.strings, &mut self.frames, &mut self.bytes, seed)
    }
}

/// Applies a file's definitions in order (keys belong to the last STACK's pid) and calls
/// `on_ref` with each frame reference's pid and key.
fn define_all(
    tables: &mut tachyon_core::mojo::Tables<'_>,
    events: &[(u64, Owned)],
    mut on_ref: impl FnMut(&tachyon_core::mojo::Tables<'_>, usize, u64, u64),
) -> Result<(), tachyon_core::mojo::TableError> {
    let mut pid = None;
    for (i, (_, e)) in events.iter().enumerate() {
        match e {
            Event::Stack { pid: p, .. } => pid = Some(*p),
            Event::String { key, value } => tables.define_string(pid.expect("a STACK first"), *key, value)?,
            Event::Frame(d) => tables.define_frame(pid.expect("a STACK first"), *d)?,
            Event::FrameRef { key } => on_ref(tables, i, pid.expect("a STACK first"), *key),
            _ => {}
        }
    }
    Ok(())
}

#[test]
fn frame_references_resolve_to_the_names_the_dumps_give() {
    for (name, file, dump) in DUMPS {
        let (_, events, _) = read_all(file, 64 << 10);
        let expected: Vec<serde_json::Value> = dump
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|v: &serde_json::Value| v["ev"] != "header")
            .collect();
        for seed in [0, 0x5eed, u64::MAX] {
            let mut storage = Storage::new(256, 256, 16 << 10);
            let mut tables = storage.tables(seed);
            let mut refs = 0;
            define_all(&mut tables, &events, |t, i, pid, key| {
                let want = &expected[i];
                let f = t.frame(pid, key).unwrap_or_else(|| panic!("{name}: frame {key} of {pid}"));
                let text = |v: &[u8]| String::from_utf8(v.to_vec()).unwrap().replace("/tmp/research", "<research>");
                assert_eq!(text(f.filename), want["filename"].as_str().unwrap(), "{name} event {i}");
                assert_eq!(text(f.scope), want["scope"].as_str().unwrap(), "{name} event {i}");
                let span = (f.def.line, f.def.line_end, f.def.column, f.def.column_end);
                let n = |k: &str| want[k].as_u64().unwrap();
                assert_eq!(span, (n("line"), n("line_end"), n("column"), n("column_end")), "{name} event {i}");
                refs += 1;
            })
            .unwrap();
            assert!(refs > 50, "{name}: {refs} references");
        }
    }
}

#[test]
fn definitions_follow_the_real_readers_rules() {
    let events = |file: &[u8]| read_all(file, 4096).1;
    let mut storage = Storage::new(64, 64, 4096);
    // A redefined string names the frames defined after it; frames defined before keep theirs.
    let mut tables = storage.tables(7);
    define_all(&mut tables, &events(edge!("redefine_string")), |_, _, _, _| {}).unwrap();
    assert_eq!(tables.frame(42, 7).unwrap().scope, b"fn");
    assert_eq!(tables.frame(42, 8).unwrap().scope, b"fn2");
    assert_eq!(tables.string(42, 3), Some(&b"fn2"[..]));
    // Key 1 is "<unknown>" without a definition.
    let mut tables = storage.tables(7);
    define_all(&mut tables, &events(edge!("unknown_scope_key1")), |_, _, _, _| {}).unwrap();
    assert_eq!(tables.frame(42, 7).unwrap().scope, b"<unknown>");
    // Key 0 is not special: undefined.
    let mut tables = storage.tables(7);
    let err = define_all(&mut tables, &events(edge!("undefined_string_key0")), |_, _, _, _| {});
    assert_eq!(err, Err(tachyon_core::mojo::TableError::UndefinedString { pid: 42, key: 0 }));
    // Keys are per process: pid 43 cannot use pid 42's frame 7; an undefined key is absent.
    let mut tables = storage.tables(7);
    let mut seen = Vec::new();
    define_all(&mut tables, &events(edge!("cross_pid_ref")), |t, _, pid, key| seen.push(t.frame(pid, key).is_some()))
        .unwrap();
    assert_eq!(seen, [true, false]);
    let mut tables = storage.tables(7);
    let mut seen = Vec::new();
    define_all(&mut tables, &events(edge!("undefined_frame_ref")), |t, _, pid, key| {
        seen.push(t.frame(pid, key).is_some())
    })
    .unwrap();
    assert_eq!(seen, [false]);
}

#[test]
fn key_floods_fill_the_callers_storage_and_stop() {
    use tachyon_core::mojo::{TableError, TableResource};
    let mut storage = Storage::new(1024, 1024, 1 << 20);
    let mut tables = storage.tables(0x1234);
    // A million distinct string keys: 895 fit (7/8 of the slots), then each is refused.
    let mut refused = 0;
    for key in 2..1_000_002u64 {
        match tables.define_string(42, key, b"s") {
            Ok(()) => {}
            Err(TableError::Capacity(TableResource::Strings)) => refused += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!((tables.string_count(), refused), (895, 1_000_000 - 895));
    // Redefining a key in a full table still works; every defined key is still found.
    tables.define_string(42, 2, b"again").unwrap();
    assert_eq!(tables.string(42, 2), Some(&b"again"[..]));
    assert!((3..897).all(|k| tables.string(42, k) == Some(&b"s"[..])));
    assert_eq!(tables.string(42, 897), None);
    // Frames likewise, and names past the arena.
    for key in 0..2_000u64 {
        let def = FrameDef { key, filename: 2, scope: 1, line: 1, line_end: 1, column: 0, column_end: 0 };
        if let Err(e) = tables.define_frame(42, def) {
            assert_eq!(e, TableError::Capacity(TableResource::Frames));
        }
    }
    assert_eq!(tables.frame_count(), 895);
    let mut small = Storage::new(16, 16, 10);
    let mut tables = small.tables(0);
    tables.define_string(1, 2, b"0123456789").unwrap();
    assert_eq!(tables.define_string(1, 3, b"x"), Err(TableError::Capacity(TableResource::NameBytes)));
    // No storage at all: refusals, never a panic.
    let mut none = Storage::new(0, 0, 0);
    let mut tables = none.tables(0);
    assert_eq!(tables.define_string(1, 2, b""), Err(TableError::Capacity(TableResource::Strings)));
    assert_eq!(tables.frame(1, 2), None);
}

#[cfg(feature = "alloc")]
#[test]
fn growable_tables_grow_to_their_limits_and_keep_every_definition() {
    use tachyon_core::mojo::{Limits, TableError, TableResource, Tables};
    let limits = Limits { string_slots: 1 << 12, frame_slots: 1 << 12, name_bytes: 1 << 16 };
    let mut tables = Tables::growable(limits, 99);
    for key in 2..3000u64 {
        tables.define_string(7, key, format!("s{key}").as_bytes()).unwrap();
        let def = FrameDef { key, filename: key, scope: 1, line: key, line_end: 0, column: 0, column_end: 0 };
        tables.define_frame(7, def).unwrap();
    }
    for key in 2..3000u64 {
        assert_eq!(tables.string(7, key), Some(format!("s{key}").as_bytes()));
        let f = tables.frame(7, key).unwrap();
        assert_eq!((f.filename, f.scope, f.def.line), (format!("s{key}").as_bytes(), &b"<unknown>"[..], key));
    }
    // 7/8 of 4,096 slots, then the limit.
    let mut key = 3000;
    let err = loop {
        if let Err(e) = tables.define_string(7, key, b"x") {
            break e;
        }
        key += 1;
    };
    assert_eq!((err, tables.string_count()), (TableError::Capacity(TableResource::Strings), 3583));
    let mut small = Tables::growable(Limits { string_slots: 64, frame_slots: 64, name_bytes: 100 }, 1);
    small.define_string(1, 2, &[b'a'; 100]).unwrap();
    assert_eq!(small.define_string(1, 3, b"b"), Err(TableError::Capacity(TableResource::NameBytes)));
}

/// The samples dumps: every sample of each real and derived file (`{pid, iid, tid, frames,
/// time, memory, idle, gc}`, INVALID, kernel and GC markers among the frames), made by the
/// format research and checked there against austin-python 2.4.0's reader.
fn expected_samples(name: &str) -> Vec<serde_json::Value> {
    let path = format!(
        "{}/../qemu-tests/vectors/mojo-austin-3.7/expected/{name}.samples.jsonl.gz",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap()), &mut text)
        .unwrap();
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["kind"] == "sample")
        .collect()
}

/// A sample as the dumps write it (the GC marker last among the frames: Austin writes GC
/// after the frame references; fields the file's version lacks are null, as austin-python
/// has them).
fn sample_json(s: &tachyon_core::mojo::Sample<'_>, version: u8) -> serde_json::Value {
    let since = |v: u8, x: u64| (version >= v).then_some(x);
    use tachyon_core::mojo::Frame;
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let mut frames: Vec<serde_json::Value> = s
        .frames()
        .map(|f| match f {
            Frame::Defined(f) => serde_json::json!({
                "filename": text(f.filename), "scope": text(f.scope), "line": f.def.line,
                "line_end": since(2, f.def.line_end), "column": since(2, f.def.column),
                "column_end": since(2, f.def.column_end),
            }),
            Frame::Invalid => serde_json::json!({"invalid": true}),
            Frame::Kernel(k) => serde_json::json!({"kernel": text(k)}),
        })
        .collect();
    if s.gc {
        frames.push(serde_json::json!({"gc": true}));
    }
    serde_json::json!({
        "kind": "sample", "pid": s.pid, "iid": since(3, s.iid), "tid": text(s.tid), "frames": frames,
        "time": s.time, "memory": s.memory, "idle": s.idle, "gc": s.gc,
    })
}

/// Every sample of `file` as [`sample_json`] writes it, through `samples`.
fn samples_of(file: &[u8], mut samples: tachyon_core::mojo::Samples<'_>) -> Result<Vec<serde_json::Value>, String> {
    let mut window = vec![0u8; 4096];
    let mut reader = Reader::open(Cursor::new(file), &mut window).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let version = reader.version();
    while let Some((offset, event)) = reader.next_item().map_err(|e| e.to_string())? {
        if samples.push(offset, &event).map_err(|e| e.to_string())? {
            out.push(sample_json(&samples.sample().unwrap(), version));
        }
    }
    if samples.finish() {
        out.push(sample_json(&samples.sample().unwrap(), version));
    }
    assert!(!samples.finish(), "a second end finishes nothing");
    Ok(out)
}

/// Sample storage over Vecs of the given sizes.
struct SampleBuffers {
    items: Vec<tachyon_core::mojo::ItemSlot>,
    text: Vec<u8>,
    threads: Vec<tachyon_core::mojo::ThreadSlot>,
    history: Vec<u64>,
}

impl SampleBuffers {
    fn new(items: usize, text: usize, threads: usize, depth: usize) -> Self {
        SampleBuffers {
            items: vec![tachyon_core::mojo::ItemSlot::EMPTY; items],
            text: vec![0; text],
            threads: vec![tachyon_core::mojo::ThreadSlot::EMPTY; threads],
            history: vec![0; threads * depth],
        }
    }

    fn storage(&mut self) -> tachyon_core::mojo::SampleStorage<'_> {
        tachyon_core::mojo::SampleStorage::new(&mut self.items, &mut self.text, &mut self.threads, &mut self.history)
    }
}

const SAMPLE_LIMITS: tachyon_core::mojo::SampleLimits =
    tachyon_core::mojo::SampleLimits { frames: 1 << 16, text: 1 << 20, threads: 1 << 16, history_depth: 1024 };
const TABLE_LIMITS: tachyon_core::mojo::Limits =
    tachyon_core::mojo::Limits { string_slots: 1 << 20, frame_slots: 1 << 20, name_bytes: 1 << 26 };

#[test]
fn samples_are_the_ones_the_dumps_give() {
    let derived = DERIVED.iter().map(|(n, f)| (n.trim_start_matches("derived/"), *f));
    for (name, file) in REAL.iter().copied().chain(derived) {
        let name = name.trim_end_matches(".mojo");
        let want = expected_samples(name);
        assert!(!want.is_empty(), "{name}");
        let growable = tachyon_core::mojo::Samples::new(
            tachyon_core::mojo::Tables::growable(TABLE_LIMITS, 7),
            tachyon_core::mojo::SampleStorage::growable(SAMPLE_LIMITS),
        );
        let got = samples_of(file, growable).unwrap();
        assert_eq!(got.len(), want.len(), "{name}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "{name}: sample {i}");
        }
        // Caller storage just large enough gives the same samples.
        let mut tables = Storage::new(1 << 12, 1 << 12, 1 << 18);
        let mut buffers = SampleBuffers::new(256, 4096, 16, 256);
        let fixed = tachyon_core::mojo::Samples::new(tables.tables(3), buffers.storage());
        assert_eq!(samples_of(file, fixed).unwrap(), got, "{name}");
    }
}

/// Version 4 files made by `qemu-tests/vectors/mojo-v4/mk.py`, with what austin-python
/// 2.4.0's reader yields for them (see that folder's README).
const V4: [(&str, &[u8], &str); 2] = [
    (
        "stack_repeat",
        include_bytes!("../../qemu-tests/vectors/mojo-v4/stack_repeat.mojo"),
        include_str!("../../qemu-tests/vectors/mojo-v4/stack_repeat.samples.jsonl"),
    ),
    (
        "tasks",
        include_bytes!("../../qemu-tests/vectors/mojo-v4/tasks.mojo"),
        include_str!("../../qemu-tests/vectors/mojo-v4/tasks.samples.jsonl"),
    ),
];

/// A sample as austin-python 2.4.0 yields it: no INVALID or kernel markers, idle and gc
/// null without full mode and GC metadata (these files have neither).
fn as_2_4(mut sample: serde_json::Value) -> serde_json::Value {
    let frames = sample["frames"].as_array().unwrap().iter().filter(|f| f.get("filename").is_some()).cloned().collect();
    sample["frames"] = serde_json::Value::Array(frames);
    sample["idle"] = serde_json::Value::Null;
    sample["gc"] = serde_json::Value::Null;
    sample
}

#[test]
fn version_4_samples_are_the_real_readers() {
    for (name, file, dump) in V4 {
        let want: Vec<serde_json::Value> = dump
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|v| v["kind"] == "sample")
            .collect();
        let mut samples = tachyon_core::mojo::Samples::new(
            tachyon_core::mojo::Tables::growable(TABLE_LIMITS, 9),
            tachyon_core::mojo::SampleStorage::growable(SAMPLE_LIMITS),
        );
        // The running task is not in `sample_json`: compare it from the dump separately.
        let mut window = vec![0u8; 4096];
        let mut reader = Reader::open(Cursor::new(file), &mut window).unwrap();
        let mut got = Vec::new();
        let mut take = |s: &tachyon_core::mojo::Sample<'_>| {
            let mut v = as_2_4(sample_json(s, 4));
            v["running_task"] = serde_json::json!(s.running_task);
            got.push(v);
        };
        while let Some((offset, event)) = reader.next_item().unwrap() {
            if samples.push(offset, &event).unwrap() {
                take(&samples.sample().unwrap());
            }
        }
        if samples.finish() {
            take(&samples.sample().unwrap());
        }
        assert_eq!(got, want, "{name}");
        assert!(got.len() >= 3, "{name}");
    }
}

#[test]
fn sample_storage_limits_are_capacity_errors_and_history_only_when_a_repeat_needs_it() {
    use tachyon_core::mojo::{Problem, SampleError, SampleResource, Samples};
    let stack = |tid: &'static [u8]| Event::Stack { pid: 1, iid: 0, tid };
    let define = [
        Event::String { key: 2, value: &b"a.py"[..] },
        Event::String { key: 3, value: &b"f"[..] },
        Event::Frame(FrameDef { key: 9, filename: 2, scope: 3, line: 1, line_end: 1, column: 0, column_end: 0 }),
    ];
    // A stack deeper than the frame slots.
    let mut tables = Storage::new(64, 64, 1024);
    let mut buffers = SampleBuffers::new(4, 64, 4, 4);
    let mut samples = Samples::new(tables.tables(1), buffers.storage());
    samples.push(0, &stack(b"1")).unwrap();
    for (i, e) in define.iter().enumerate() {
        samples.push(i as u64 + 1, e).unwrap();
    }
    for offset in 10..14 {
        samples.push(offset, &Event::FrameRef { key: 9 }).unwrap();
    }
    assert_eq!(
        samples.push(14, &Event::FrameRef { key: 9 }),
        Err(SampleError { offset: 14, problem: Problem::Capacity(SampleResource::Frames) })
    );
    // The sample so far is whole: it ends with the next STACK.
    assert!(samples.push(15, &stack(b"1")).unwrap());
    assert_eq!(samples.sample().unwrap().frames().len(), 4);
    // Kernel symbols and tids beyond the text.
    assert_eq!(
        samples.push(16, &Event::FrameKernel { symbol: &[b'k'; 64][..] }),
        Err(SampleError { offset: 16, problem: Problem::Capacity(SampleResource::Text) })
    );

    // Two thread slots of history keep one thread (7/8 full at most): the others' frames are
    // lost, which is fine until a repeat needs them.
    let mut tables = Storage::new(64, 64, 1024);
    let mut buffers = SampleBuffers::new(16, 64, 2, 8);
    let mut samples = Samples::new(tables.tables(1), buffers.storage());
    let tids: [&[u8]; 3] = [b"1", b"2", b"3"];
    let mut offset = 0;
    for tid in tids {
        offset += 1;
        samples.push(offset, &stack(tid)).unwrap();
        if offset == 1 {
            for e in &define {
                samples.push(offset, e).unwrap();
            }
        }
        samples.push(offset, &Event::FrameRef { key: 9 }).unwrap();
    }
    offset += 1;
    samples.push(offset, &stack(b"3")).unwrap();
    assert_eq!(
        samples.push(99, &Event::StackRepeat),
        Err(SampleError { offset: 99, problem: Problem::Capacity(SampleResource::History) })
    );
}

#[test]
fn sample_events_before_a_stack_or_of_undefined_keys_are_named() {
    use tachyon_core::mojo::{Problem, SampleError, Samples};
    let mut tables = Storage::new(64, 64, 1024);
    let mut buffers = SampleBuffers::new(16, 64, 4, 8);
    let mut samples = Samples::new(tables.tables(1), buffers.storage());
    // Markers before any STACK belong to no sample; everything else of a sample is an error.
    samples.push(0, &Event::FrameInvalid).unwrap();
    samples.push(0, &Event::FrameKernel { symbol: &b"k"[..] }).unwrap();
    samples.push(0, &Event::Metadata { key: &b"k"[..], value: &b"v"[..] }).unwrap();
    for e in [
        Event::Gc,
        Event::Idle,
        Event::Time(1),
        Event::FrameRef { key: 1 },
        Event::StackRepeat,
        Event::TaskRunning { task: 1 },
    ] {
        assert_eq!(samples.push(5, &e), Err(SampleError { offset: 5, problem: Problem::NoStack }), "{e:?}");
    }
    assert!(!samples.finish());
    samples.push(6, &Event::Stack { pid: 4, iid: 0, tid: &b"2a"[..] }).unwrap();
    assert_eq!(
        samples.push(7, &Event::FrameRef { key: 3 }),
        Err(SampleError { offset: 7, problem: Problem::UndefinedFrame { pid: 4, key: 3 } })
    );
    assert_eq!(
        samples.push(8, &Event::TaskStack { task: 1, name: 5, frames: 0 }),
        Err(SampleError { offset: 8, problem: Problem::UndefinedString { pid: 4, key: 5 } })
    );
    // An empty stack is a sample.
    samples.push(9, &Event::Time(3)).unwrap();
    assert!(samples.finish());
    let s = samples.sample().unwrap();
    assert_eq!((s.pid, s.tid, s.time, s.frames().len(), s.offset), (4, &b"2a"[..], Some(3), 0, 6));
}

/// A file still being written, read as it grows: a reader resumed at each cut where the last
/// one stopped gives the events and samples of the whole file, and at every cut the samples
/// finished plus the one [pending](tachyon_core::mojo::Samples::pending) are those of the file
/// ending at the last whole event before the cut (read by a reader of the whole file).
#[test]
#[cfg_attr(target_endian = "big", ignore = "MOJO has no byte order: run on the host")]
fn a_file_read_as_it_grows_gives_the_samples_of_each_whole_prefix() {
    let small = REAL.iter().filter(|(n, _)| n.contains("small")).copied();
    let v4 = V4.iter().map(|(n, f, _)| (*n, *f));
    for (name, file) in small.chain(v4) {
        let (version, all, end) = read_all(file, 64 << 10);
        assert_eq!(end, Ok(()), "{name}");
        let header = all[0].0;
        let boundaries: Vec<u64> = all.iter().map(|(o, _)| *o).chain([file.len() as u64]).collect();
        let mut samples = tachyon_core::mojo::Samples::new(
            tachyon_core::mojo::Tables::growable(TABLE_LIMITS, 5),
            tachyon_core::mojo::SampleStorage::growable(SAMPLE_LIMITS),
        );
        let (mut at, mut finished, mut events) = (header, Vec::new(), Vec::new());
        let mut window = vec![0u8; MIN_WINDOW];
        for len in header as usize..=file.len() {
            let mut reader = Reader::resume(Cursor::new(&file[at as usize..len]), &mut window, version, at).unwrap();
            while let Some((offset, event)) = reader.next_item().unwrap() {
                events.push((offset, event.map(<[u8]>::to_vec)));
                if samples.push(offset, &event).unwrap() {
                    finished.push(sample_json(&samples.sample().unwrap(), version));
                }
            }
            at = reader.offset();
            let whole = *boundaries.iter().rev().find(|&&b| b <= len as u64).unwrap();
            assert_eq!(at, whole, "{name} cut at {len}");
            let mut now = finished.clone();
            now.extend(samples.pending().map(|s| sample_json(&s, version)));
            let fresh = tachyon_core::mojo::Samples::new(
                tachyon_core::mojo::Tables::growable(TABLE_LIMITS, 5),
                tachyon_core::mojo::SampleStorage::growable(SAMPLE_LIMITS),
            );
            assert_eq!(now, samples_of(&file[..whole as usize], fresh).unwrap(), "{name} cut at {len}");
        }
        assert_eq!(events, all, "{name}");
        assert!(finished.len() >= 2, "{name}");
    }
}

#[test]
fn a_resumed_reader_refuses_what_a_whole_reader_refuses() {
    let mut window = vec![0u8; MIN_WINDOW];
    let version = |version| Reader::resume(Cursor::new(&[][..]), &mut [0u8; MIN_WINDOW], version, 4).err();
    assert_eq!(version(0), Some(ReadError::Format { offset: 0, rule: Rule::Version { version: 0 } }));
    assert_eq!(version(5), Some(ReadError::Format { offset: 0, rule: Rule::Version { version: 5 } }));
    let small = Reader::resume(Cursor::new(&[][..]), &mut window[..MIN_WINDOW - 1], 3, 4).err();
    assert_eq!(small, Some(ReadError::WindowTooSmall { len: MIN_WINDOW - 1, needed: MIN_WINDOW }));
    // An unknown event is named at its offset; a string longer than the window is a capacity
    // error even where the source ends, not a wait for more that would never end.
    let mut reader = Reader::resume(Cursor::new(&[99u8][..]), &mut window, 3, 40).unwrap();
    assert_eq!(reader.next_item().err(), Some(ReadError::Format { offset: 40, rule: Rule::UnknownEvent { id: 99 } }));
    let long = [&[1u8][..], &[b'k'; MIN_WINDOW]].concat();
    let mut reader = Reader::resume(Cursor::new(&long[..]), &mut window, 3, 40).unwrap();
    assert_eq!(reader.next_item().err(), Some(ReadError::TooLarge { offset: 40, window: MIN_WINDOW }));
}
