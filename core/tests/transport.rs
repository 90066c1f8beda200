//! The framed transport: a profile written through [`FramedSink`] and replayed by
//! [`Receiver`] is byte for byte the file the same writer makes in RAM, in both byte orders
//! and with any scratch size; frames lost, damaged or out of place are refused by name.

use crate::common::link::{replay, Link};
use crate::common::{decode_all, writer_storage, SMALL_READER};
use tachyon_core::io::Cursor;
use tachyon_core::transport::{chunk_for, FramedSink, Receiver, StreamError, MIN_SCRATCH};
use tachyon_core::{BigEndian, Endianity, Frame, LittleEndian, Writer, WriterConfig};

const FILES: [&[u8]; 3] = [b"/app/main.py", b"/app/work.py", b"/usr/lib/python3.15/json/decoder.py"];
const FUNCS: [&[u8]; 4] = [b"main", b"work", b"decode", b"<module>"];

/// `n` samples of three threads, deterministic.
fn samples<W: embedded_io::Write + embedded_io::Seek, E: Endianity>(w: &mut Writer<'_, W, E>, n: u64) {
    for i in 0..n {
        let depth = 1 + (i % 7) as usize;
        let frames: Vec<Frame<'_>> =
            (0..depth).map(|d| Frame::new(FILES[(i as usize + d) % 3], FUNCS[(d * 3 + i as usize) % 4])).collect();
        w.write_thread_sample(1_000_000 + i * 1000, 0, 10 + i % 3, 1, frames.iter().copied()).unwrap();
    }
}

fn in_ram<E: Endianity>(endian: E, n: u64) -> Vec<u8> {
    let mut buf = vec![0u8; 1 << 20];
    let mut storage = writer_storage();
    let mut w =
        Writer::with_endian(Cursor::new(&mut buf[..]), storage.storage(), WriterConfig::new(1_000_000, 1000), endian)
            .unwrap();
    samples(&mut w, n);
    w.finish().unwrap();
    let len = w.into_inner().written_len();
    buf.truncate(len);
    buf
}

fn streamed<E: Endianity>(endian: E, n: u64, scratch_len: usize) -> (Vec<u8>, u64) {
    let mut scratch = vec![0u8; scratch_len];
    let sink = FramedSink::new(Link::default(), &mut scratch).unwrap();
    let mut storage = writer_storage();
    let mut w = Writer::with_endian(sink, storage.storage(), WriterConfig::new(1_000_000, 1000), endian).unwrap();
    samples(&mut w, n);
    w.finish().unwrap();
    let mut sink = w.into_inner();
    let length = sink.finish().unwrap();
    (sink.into_inner().0, length)
}

#[test]
fn a_streamed_file_is_the_ram_file() {
    for (ram, streams) in [
        (in_ram(LittleEndian, 400), [64, 200, 4096].map(|s| streamed(LittleEndian, 400, s))),
        (in_ram(BigEndian, 400), [64, 200, 4096].map(|s| streamed(BigEndian, 400, s))),
    ] {
        assert!(ram.len() > 2000, "{}", ram.len());
        assert_eq!(decode_all(&ram, SMALL_READER).unwrap().len(), 400);
        for (capture, length) in streams {
            assert_eq!(length, ram.len() as u64);
            assert!(replay(&capture).unwrap() == ram);
        }
    }
}

#[test]
fn lost_damaged_and_misplaced_frames_are_refused() {
    // Each damaged capture is replayed whole: a small one.
    let (capture, _) = streamed(LittleEndian, 40, 100);
    let ram = in_ram(LittleEndian, 40);
    let mut refused = 0;
    // Every byte cut out, every byte with a bit flipped: refused, or (a cut zero between
    // two frames, a flipped bit that reads back the same values) the same file.
    for at in 0..capture.len() {
        let mut cut = capture.clone();
        cut.remove(at);
        let mut flipped = capture.clone();
        flipped[at] ^= 0x10;
        for damaged in [cut, flipped] {
            match replay(&damaged) {
                Ok(file) => assert!(file == ram, "damage at {at} gave another file"),
                Err(_) => refused += 1,
            }
        }
    }
    assert!(refused > capture.len(), "{refused} of {}", 2 * capture.len());
    // A whole frame left out is a gap, named.
    let ends: Vec<usize> = capture.iter().enumerate().filter(|(_, &b)| b == 0).map(|(i, _)| i).collect();
    let mut dropped = capture[..ends[2] + 1].to_vec();
    dropped.extend_from_slice(&capture[ends[3] + 1..]);
    assert!(replay(&dropped).unwrap_err().starts_with("frames 3 to 3 are missing"), "{:?}", replay(&dropped));
    // The stream cut before its End.
    assert_eq!(replay(&capture[..ends[ends.len() - 2] + 1]).unwrap_err(), "no End");
}

#[test]
fn the_receiver_refuses_streams_no_sink_sends() {
    use tachyon_core::transport::{Frame as Wire, Record};
    let frame = |seq, record| Wire { seq, record, crc: [0; 4] };
    let begin = Record::Begin { magic: *b"TCHF", version: 1 };
    let write = |offset, bytes| Record::Write { offset, bytes };
    let run = |frames: &[Wire<'_>]| {
        let mut r = Receiver::new();
        frames.iter().try_for_each(|f| r.accept(f).map(drop))
    };
    assert_eq!(run(&[frame(0, write(0, b"ab"))]), Err(StreamError::NoBegin));
    assert_eq!(run(&[frame(0, begin), frame(1, begin)]), Err(StreamError::NoBegin));
    assert_eq!(
        run(&[frame(0, Record::Begin { magic: *b"TCHF", version: 2 })]),
        Err(StreamError::NotOurs { magic: *b"TCHF", version: 2 })
    );
    assert_eq!(
        run(&[frame(0, begin), frame(1, write(0, b"ab")), frame(2, write(3, b"c"))]),
        Err(StreamError::Hole { offset: 3, length: 2 })
    );
    assert_eq!(
        run(&[frame(0, begin), frame(1, write(0, b"ab")), frame(2, Record::End { length: 3 })]),
        Err(StreamError::Length { said: 3, made: 2 })
    );
    assert_eq!(
        run(&[frame(0, begin), frame(1, Record::End { length: 0 }), frame(2, write(0, b"a"))]),
        Err(StreamError::AfterEnd)
    );
    assert_eq!(run(&[frame(0, begin), frame(2, write(0, b"a"))]), Err(StreamError::Gap { expected: 1, got: 2 }));
    // Rewriting what is there (the header at the end) is what the writer does.
    assert_eq!(
        run(&[
            frame(0, begin),
            frame(1, write(0, b"ab")),
            frame(2, write(0, b"x")),
            frame(3, Record::End { length: 2 })
        ]),
        Ok(())
    );
}

#[test]
fn a_scratch_buffer_too_small_is_refused() {
    let mut scratch = [0u8; MIN_SCRATCH - 1];
    assert!(FramedSink::new(Link::default(), &mut scratch).is_err());
    assert!(chunk_for(MIN_SCRATCH) > 0);
}
