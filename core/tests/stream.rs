//! The streaming encoder (`tachyon_core::stream`): its frames byte for byte against a table
//! written by hand (CRC by Python's `zlib.crc32`, COBS by the textbook's loop), each
//! definition sent once, every sample read back as written, and what it refuses. The file a
//! host makes of a stream is tested in the std layer (`tests/stream.rs` there).

use crate::common::link::Link;
use tachyon_core::capture::Taken;
use tachyon_core::stream::{self, Body, Item, ItemRule, StreamWriter, WriteError, MIN_BUFFER};
use tachyon_core::{Frame, LittleEndian, Location, WriterConfig};

/// The frames of a capture, each its COBS bytes without the closing `0x00`.
fn pieces(capture: &[u8]) -> Vec<Vec<u8>> {
    let mut pieces: Vec<Vec<u8>> = capture.split(|&b| b == 0).map(<[u8]>::to_vec).collect();
    assert_eq!(pieces.pop(), Some(vec![]), "a capture ends with a frame's 0x00");
    pieces
}

fn taken(timestamp_us: u64, thread_id: u64) -> Taken {
    Taken { timestamp_us, interpreter_id: 0, thread_id, status: 0 }
}

#[test]
fn frames_are_the_wire_tables_bytes() {
    let (mut buffer, mut sent) = ([0u8; 96], [0u32; 1]);
    let config = WriterConfig::new(1_000, 100);
    let mut w = StreamWriter::with_endian(Link::default(), &mut buffer, &mut sent, config, LittleEndian).unwrap();
    let at = Location { lineno: 5, end_lineno: 5, col: -1, end_col: -1 };
    let frame = Frame::new(b"a.py", b"f").at(at);
    w.write_sample(taken(1_100, 7), &[3], |_| frame).unwrap();
    assert_eq!(w.finish().unwrap(), 1);
    let capture = w.into_inner().0;
    let frames = pieces(&capture);
    assert_eq!(frames.len(), 4);
    // Begin: as the transport's postcard encodes `Record::Begin { magic: *b"TCHS", version: 1 }`.
    let begin = [0x01, 0x01, 0x0a, 0x54, 0x43, 0x48, 0x53, 0x01, 0xdf, 0xa3, 0x46, 0x41];
    assert_eq!(frames[0], begin);
    // Header: seq 1, kind 1, the template as the writer encodes it, then the CRC.
    let mut header = frames[1].clone();
    match stream::decode(&mut header).unwrap() {
        stream::StreamFrame { seq: 1, body: Body::Header(h) } => {
            assert_eq!(h, &config.header_template().encode(LittleEndian))
        }
        other => panic!("{other:?}"),
    }
    // Items (seq 2): Define 3 = a.py:f line 5; Thread 0/7; Sample 1100 µs status 0 [3];
    // Counts 0 0. Then End (seq 3) of 1 sample.
    let items = [
        0x12, 0x02, 0x02, 0x01, 0x03, 0x04, 0x61, 0x2e, 0x70, 0x79, 0x01, 0x66, 0x0a, 0x0a, 0x01, 0x01, 0xff, 0x02,
        0x05, 0x07, 0x03, 0xcc, 0x08, 0x04, 0x01, 0x03, 0x05, 0x01, 0x05, 0xb5, 0x2e, 0x75, 0xc4,
    ];
    assert_eq!(frames[2], items);
    assert_eq!(frames[3], [0x08, 0x03, 0x03, 0x01, 0x1e, 0x04, 0x2d, 0xa1]);
}

#[test]
fn the_begin_frame_reads_as_the_transports_begin_of_another_magic() {
    let (mut buffer, mut sent) = ([0u8; MIN_BUFFER], [0u32; 1]);
    let w = StreamWriter::new(Link::default(), &mut buffer, &mut sent, WriterConfig::new(0, 1)).unwrap();
    let capture = w.into_inner().0;
    let mut first = pieces(&capture)[0].clone();
    let mut scratch = [0u8; 64];
    let frame = tachyon_core::transport::decode(&mut first, &mut scratch).unwrap();
    let begin = tachyon_core::transport::Record::Begin { magic: *b"TCHS", version: 1 };
    assert_eq!((frame.seq, frame.record), (0, begin));
}

/// A varied workload: three threads, stacks 1–40 deep over 300 ids, times that go back once.
fn workload() -> Vec<(Taken, Vec<u32>)> {
    let mut state = 0x2545_f491u32;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        state
    };
    (0..2_000u64)
        .map(|i| {
            let depth = 1 + next() as usize % 40;
            let ids = (0..depth).map(|_| next() % 300).collect();
            let ts = if i == 1_000 { 5 } else { 10_000 + i * 97 };
            let t = Taken { timestamp_us: ts, interpreter_id: (i % 2) as u32, thread_id: i % 3, status: (i % 4) as u8 };
            (t, ids)
        })
        .collect()
}

fn frame_of(id: u32) -> Frame<'static> {
    const NAMES: [&[u8]; 4] = [b"main", b"parse", b"eval_expression", b""];
    let line = id as i32 - 7;
    let frame = Frame::new(b"src/app.py", NAMES[id as usize % 4]);
    let frame = if id % 5 == 0 {
        frame
    } else {
        frame.at(Location { lineno: line, end_lineno: line + 1, col: 0, end_col: -1 })
    };
    Frame { opcode: (id % 3 == 0).then_some((id % 200) as u8), ..frame }
}

#[test]
fn every_sample_reads_back_and_each_definition_goes_once() {
    let work = workload();
    let (mut buffer, mut sent) = ([0u8; 200], [0u32; stream::ids_words(300)]);
    let mut w = StreamWriter::new(Link::default(), &mut buffer, &mut sent, WriterConfig::new(0, 97)).unwrap();
    let mut defined = vec![0u32; 300];
    for (t, ids) in &work {
        w.write_sample(*t, ids, |id| {
            defined[id as usize] += 1;
            frame_of(id)
        })
        .unwrap();
    }
    w.set_dropped_upstream(17);
    assert_eq!(w.finish().unwrap(), work.len() as u64);
    assert!(defined.iter().all(|&n| n <= 1), "a definition went twice: {defined:?}");
    let capture = w.into_inner().0;
    let (mut got, mut definitions, mut counts) = (Vec::new(), 0, None);
    for (seq, mut piece) in pieces(&capture).into_iter().enumerate() {
        let frame = stream::decode(&mut piece).unwrap();
        assert_eq!(frame.seq, seq as u32);
        if let Body::Items(items) = frame.body {
            for item in items {
                match item.unwrap() {
                    Item::Define { id, frame } => {
                        assert_eq!(frame, frame_of(id));
                        definitions += 1;
                    }
                    Item::Sample { taken, ids } => got.push((taken, ids.collect::<Vec<_>>())),
                    Item::Counts { dropped, refused } => counts = Some((dropped, refused)),
                }
            }
        }
    }
    assert_eq!(got, work);
    assert_eq!(definitions, defined.iter().filter(|&&n| n == 1).count());
    assert_eq!(counts, Some((17, 0)));
}

#[test]
fn what_the_writer_cannot_send_is_refused_and_counted() {
    let mut small = [0u8; MIN_BUFFER - 1];
    let mut sent = [0u32; 1];
    let config = WriterConfig::new(0, 1);
    assert!(matches!(
        StreamWriter::new(Link::default(), &mut small, &mut sent, config),
        Err(WriteError::BufferTooSmall { buffer }) if buffer == MIN_BUFFER - 1
    ));
    let mut buffer = [0u8; MIN_BUFFER];
    let mut w = StreamWriter::new(Link::default(), &mut buffer, &mut sent, config).unwrap();
    // An id past the 32 the bitmap holds.
    assert_eq!(w.write_sample(taken(1, 1), &[1, 32], frame_of), Err(WriteError::IdOutOfRange { id: 32, ids: 32 }));
    // A definition longer than an empty frame.
    let long = [b'x'; MIN_BUFFER];
    let err = w.write_sample(taken(2, 1), &[2], |_| Frame::new(&long, b"f"));
    assert_eq!(err, Err(WriteError::TooLarge { buffer: MIN_BUFFER }));
    assert_eq!(w.refused(), 2);
    w.write_sample(taken(3, 1), &[1], frame_of).unwrap();
    assert_eq!(w.finish(), Ok(1));
    assert_eq!(w.write_sample(taken(4, 1), &[1], frame_of), Err(WriteError::Finished));
    assert_eq!(w.finish(), Err(WriteError::Finished));
}

#[test]
fn items_that_break_a_rule_are_refused_by_offset() {
    // Each body: seq 2, kind Items, then the items, the CRC appended here.
    let cases: [(&[u8], usize, ItemRule); 5] = [
        (&[3, 0, 0, 0], 0, ItemRule::NoThread),
        (&[2, 0, 1, 3, 0, 0, 1], 3, ItemRule::Cut),
        (&[2, 0, 1, 9], 3, ItemRule::UnknownItem(9)),
        (&[2, 0, 1, 3, 0, 0, 0x81, 0x02], 3, ItemRule::TooDeep),
        (
            &[2, 0, 1, 4, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 3, 1, 0, 0],
            14,
            ItemRule::TimeOverflow,
        ),
    ];
    for (items, offset, rule) in cases {
        let mut covered = vec![2, 2];
        covered.extend_from_slice(items);
        let crc = tachyon_core::transport::crc32(&covered).to_le_bytes();
        covered.extend_from_slice(&crc);
        // COBS by hand: no zero may remain; these bodies' zeros are encoded by the loop.
        let mut wire = Vec::new();
        for block in covered.split(|&b| b == 0) {
            wire.push(block.len() as u8 + 1);
            wire.extend_from_slice(block);
        }
        let frame = stream::decode(&mut wire).unwrap();
        let Body::Items(items) = frame.body else { panic!("not items") };
        let errors: Vec<_> = items.filter_map(Result::err).collect();
        assert_eq!(errors.len(), 1, "{rule:?}");
        assert_eq!((errors[0].offset, errors[0].rule), (offset, rule));
    }
}
