//! A writer's next file (`Writer::restart`, `JournalWriter::restart`: what rotation does each
//! period): every period's file is byte for byte the file a fresh writer makes when it first
//! interns the frames the earlier periods interned, in the same order, and then writes the
//! period's samples — raw, zstd, both byte orders, and through a journaled stream.

use tachyon_core::io::Cursor;
use tachyon_core::transport::{FlushPolicy, JournalWriter};
use tachyon_core::{BigEndian, Compression, Endianity, Frame, LittleEndian, WriteError, Writer, WriterConfig};

use crate::common::link::{replay, Link};
use crate::common::{decode_all, writer_storage, SMALL_READER};

const FILES: [&[u8]; 4] = [b"/app/main.py", b"/app/work.py", b"/usr/lib/python3.15/json/decoder.py", b"/app/new.py"];
const FUNCS: [&[u8]; 5] = [b"main", b"work", b"decode", b"<module>", b"later"];

/// One sample: timestamp, thread, status, frames innermost first.
type Sample = (u64, u64, u8, Vec<Frame<'static>>);

/// Period `p`'s samples: each period brings threads and frames the earlier ones did not have
/// (period 2 a new file name, period 3 a new function), and drops some of the old threads.
fn period(p: u64) -> Vec<Sample> {
    (0..300u64)
        .map(|i| {
            let depth = 1 + (i % 6) as usize;
            let frames = (0..depth)
                .map(|d| {
                    let file = (i as usize + d) % (2 + p.min(2) as usize);
                    let func = (d * 3 + i as usize) % (3 + p.min(2) as usize);
                    Frame::new(FILES[file], FUNCS[func])
                })
                .collect();
            (1_000_000 * (p + 1) + i * 997, 10 + p + i % 3, (i % 4) as u8, frames)
        })
        .collect()
}

fn config(start: u64, zstd: bool) -> WriterConfig {
    let c = WriterConfig::new(start, 1000);
    if zstd {
        c.with_compression(Compression::Zstd)
    } else {
        c
    }
}

fn period_start(p: u64) -> u64 {
    1_000_000 * (p + 1)
}

/// A writer's tables and, for zstd, its compressor's workspace.
struct Storage {
    tables: tachyon_core::storage::VecWriterStorage,
    workspace: Vec<u64>,
    out: Vec<u8>,
}

impl Storage {
    fn new() -> Self {
        let words = tachyon_core::compression::workspace_words(tachyon_core::compression::compressor_workspace_bytes());
        Storage { tables: writer_storage(), workspace: vec![0; words], out: vec![0; 4096] }
    }

    fn get(&mut self, zstd: bool) -> tachyon_core::storage::WriterStorage<'_> {
        if zstd {
            let compressor = tachyon_core::compression::Compressor::new(&mut self.workspace, &mut self.out).unwrap();
            self.tables.storage().with_zstd(compressor)
        } else {
            self.tables.storage()
        }
    }
}

/// What a fresh writer makes of period `p`: the earlier periods' frames interned first.
fn fresh<E: Endianity>(endian: E, p: u64, zstd: bool) -> Vec<u8> {
    let mut buf = vec![0u8; 1 << 20];
    let mut storage = Storage::new();
    let mut w =
        Writer::with_endian(Cursor::new(&mut buf[..]), storage.get(zstd), config(period_start(p), zstd), endian)
            .unwrap();
    for earlier in 0..p {
        for (_, _, _, frames) in period(earlier) {
            for f in frames {
                w.intern_frame(f).unwrap();
            }
        }
    }
    for (ts, tid, status, frames) in period(p) {
        w.write_thread_sample(ts, 0, tid, status, frames).unwrap();
    }
    let n = w.finish().unwrap() as usize;
    buf.truncate(n);
    buf
}

/// Three periods through one writer restarted on a new buffer each time.
fn rotated<E: Endianity>(endian: E, zstd: bool) -> Vec<Vec<u8>> {
    let mut bufs = [vec![0u8; 1 << 20], vec![0u8; 1 << 20], vec![0u8; 1 << 20]];
    let mut storage = Storage::new();
    let [b0, b1, b2] = &mut bufs;
    let mut sinks = [Cursor::new(&mut b1[..]), Cursor::new(&mut b2[..])].into_iter();
    let mut w = Writer::with_endian(Cursor::new(&mut b0[..]), storage.get(zstd), config(period_start(0), zstd), endian)
        .unwrap();
    let mut lens = Vec::new();
    for p in 0..3 {
        if p > 0 {
            // Not finished yet: refused, nothing changed.
            let before = w.sample_count();
            assert!(matches!(w.restart(period_start(p)), Err(WriteError::NotFinished)));
            assert_eq!(w.sample_count(), before);
            lens.push(w.finish().unwrap() as usize);
            *w.get_mut() = sinks.next().unwrap();
            w.restart(period_start(p)).unwrap();
            assert_eq!((w.sample_count(), w.thread_count(), w.start_time_us()), (0, 0, period_start(p)));
        }
        for (ts, tid, status, frames) in period(p) {
            w.write_thread_sample(ts, 0, tid, status, frames).unwrap();
        }
    }
    lens.push(w.finish().unwrap() as usize);
    drop((w, sinks));
    bufs.into_iter()
        .zip(lens)
        .map(|(mut b, n)| {
            b.truncate(n);
            b
        })
        .collect()
}

#[test]
fn every_period_is_the_file_a_fresh_writer_makes() {
    for zstd in [false, true] {
        for (files, want) in [
            (rotated(LittleEndian, zstd), [0, 1, 2].map(|p| fresh(LittleEndian, p, zstd))),
            (rotated(BigEndian, zstd), [0, 1, 2].map(|p| fresh(BigEndian, p, zstd))),
        ] {
            for (p, (file, want)) in files.iter().zip(&want).enumerate() {
                assert!(file == want, "period {p} (zstd {zstd}) differs from a fresh writer's file");
                // Each period holds its own samples only, and reads alone.
                if !zstd {
                    assert_eq!(decode_all(file, SMALL_READER).unwrap().len(), 300, "period {p}");
                }
            }
        }
    }
}

#[test]
fn a_restarted_journal_streams_each_period_on_its_own() {
    let mut scratch = vec![0u8; 512];
    let mut storage = writer_storage();
    let policy = FlushPolicy { every_samples: 50, every_us: 0 };
    let mut j = JournalWriter::with_endian(
        Link::default(),
        &mut scratch,
        storage.storage(),
        config(period_start(0), false),
        policy,
        BigEndian,
    )
    .unwrap();
    let mut streams = Vec::new();
    for p in 0..3 {
        if p > 0 {
            assert!(matches!(j.restart(Link::default(), period_start(p)), Err(WriteError::NotFinished)));
            j.finish().unwrap();
            streams.push(j.restart(Link::default(), period_start(p)).unwrap().0);
        }
        for (ts, tid, status, frames) in period(p) {
            let taken = tachyon_core::capture::Taken { timestamp_us: ts, interpreter_id: 0, thread_id: tid, status };
            j.write_thread_sample(taken, frames).unwrap();
        }
    }
    j.finish().unwrap();
    streams.push(j.into_inner().0);
    // A fresh journal of period 2 alone, its earlier frames interned first, makes the same
    // file (the journal records come in another order: the restarted one sends its tables
    // at once).
    let mut scratch2 = vec![0u8; 512];
    let mut storage2 = writer_storage();
    let mut alone = JournalWriter::with_endian(
        Link::default(),
        &mut scratch2,
        storage2.storage(),
        config(period_start(2), false),
        policy,
        BigEndian,
    )
    .unwrap();
    for earlier in 0..2 {
        for (_, _, _, frames) in period(earlier) {
            for f in frames {
                alone.intern_frame(f).unwrap();
            }
        }
    }
    for (ts, tid, status, frames) in period(2) {
        let taken = tachyon_core::capture::Taken { timestamp_us: ts, interpreter_id: 0, thread_id: tid, status };
        alone.write_thread_sample(taken, frames).unwrap();
    }
    alone.finish().unwrap();
    assert!(
        replay(&streams[2]).unwrap() == replay(&alone.into_inner().0).unwrap(),
        "period 2 differs from a fresh journal's file"
    );
    for (p, stream) in streams.iter().enumerate() {
        // A flush every 50 samples ends REPEAT runs early, so compare with a fresh plain
        // writer only by content: every sample there, in a file of its own.
        let file = replay(stream).unwrap();
        assert_eq!(decode_all(&file, SMALL_READER).unwrap().len(), 300, "period {p}");
    }
}
