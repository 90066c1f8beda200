//! Property test: random sample streams round-trip write → read in both byte orders,
//! compressed and not. The expected view comes from the input by the reader rules of spec 4
//! (not from the code under test); samples are compared per thread, since REPEAT runs are
//! deferred and file order is not time order across threads.

use proptest::prelude::*;
use tachyon_core::io::Cursor;
use tachyon_core::storage::{ReaderCapacity, VecReaderStorage, VecWriterStorage, WriterCapacity};
use tachyon_core::{BigEndian, Endianity, Frame, LittleEndian, Location, Reader, Writer, WriterConfig};
use tachyon_test_kit::roundtrip::{model, read_back, PerThread, Written};

#[derive(Debug, Clone)]
struct In {
    ts: u64,
    iid: u32,
    tid: u64,
    status: u8,
    frames: Vec<usize>,
}

#[derive(Debug, Clone)]
struct PoolFrame {
    file: Vec<u8>,
    func: Vec<u8>,
    loc: Option<Location>,
    op: Option<u8>,
}

impl PoolFrame {
    fn frame(&self) -> Frame<'_> {
        Frame { filename: &self.file, funcname: &self.func, location: self.loc, opcode: self.op }
    }
}

fn edge_int() -> impl Strategy<Value = i32> {
    prop_oneof![Just(-1), Just(0), Just(i32::MAX), Just(i32::MIN), -3..300i32, any::<i32>()]
}

fn pool_frame() -> impl Strategy<Value = PoolFrame> {
    let name = prop_oneof![
        Just(b"main.py".to_vec()),
        Just(b"\xed\xa0\x80surrogate".to_vec()),
        Just("héllo→".as_bytes().to_vec()),
        prop::collection::vec(any::<u8>(), 0..20),
    ];
    let loc = prop::option::of((edge_int(), edge_int(), edge_int(), edge_int()).prop_map(|(a, b, c, d)| Location {
        lineno: a,
        end_lineno: b,
        col: c,
        end_col: d,
    }));
    (name.clone(), name, loc, prop::option::of(any::<u8>())).prop_map(|(file, func, loc, op)| PoolFrame {
        file,
        func,
        loc,
        op,
    })
}

fn stream() -> impl Strategy<Value = (Vec<PoolFrame>, Vec<In>)> {
    prop::collection::vec(pool_frame(), 1..12).prop_flat_map(|pool| {
        let n = pool.len();
        let stack = prop_oneof![
            4 => prop::collection::vec(0..n, 0..6),
            1 => prop::collection::vec(0..n, 250..300),
        ];
        // Runs of equal stacks so REPEAT records appear; timestamps may go backwards.
        let sample = (any::<u64>(), 0..2u32, 0..4u64, any::<u8>(), stack, 1..5usize);
        prop::collection::vec(sample, 0..60).prop_map(move |raw| {
            let mut out = Vec::new();
            for (ts, iid, tid, status, frames, repeat) in raw {
                for k in 0..repeat {
                    out.push(In {
                        ts: ts.wrapping_add(k as u64 * 7),
                        iid,
                        tid,
                        status: status.wrapping_add(k as u8 % 2),
                        frames: frames.clone(),
                    });
                }
            }
            (pool.clone(), out)
        })
    })
}

fn write<E: Endianity>(pool: &[PoolFrame], samples: &[In], e: E, zstd: bool) -> Vec<u8> {
    let cap = WriterCapacity { string_bytes: 1 << 16, strings: 64, frames: 64, threads: 16, rle_budget: 16384 };
    let mut storage = VecWriterStorage::new(cap).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let cfg = WriterConfig::new(12_345, 1000);
    let frames = |f: &In| -> Vec<Frame<'_>> { f.frames.iter().map(|&i| pool[i].frame()).collect() };
    let sink = Cursor::new(&mut buf[..]);
    #[cfg(feature = "zstd")]
    let (mut ws, mut out) = (
        vec![0u64; tachyon_core::compression::workspace_words(tachyon_core::compression::compressor_workspace_bytes())],
        vec![0u8; 4096],
    );
    let mut w = if zstd {
        #[cfg(feature = "zstd")]
        {
            let c = tachyon_core::compression::Compressor::new(&mut ws, &mut out).unwrap();
            Writer::with_endian(
                sink,
                storage.storage().with_zstd(c),
                cfg.with_compression(tachyon_core::Compression::Zstd),
                e,
            )
            .unwrap()
        }
        #[cfg(not(feature = "zstd"))]
        unreachable!()
    } else {
        Writer::with_endian(sink, storage.storage(), cfg, e).unwrap()
    };
    for s in samples {
        w.write_thread_sample(s.ts, s.iid, s.tid, s.status, frames(s)).unwrap();
    }
    let n = w.finish().unwrap() as usize;
    buf.truncate(n);
    buf
}

fn read(file: &[u8], zstd: bool) -> PerThread {
    let cap = ReaderCapacity { string_bytes: 1 << 16, strings: 64, frames: 64, threads: 16, read_buffer: 128 };
    let mut storage = VecReaderStorage::new(cap).unwrap();
    #[cfg(feature = "zstd")]
    let (mut ws, mut input) = (
        vec![
            0u64;
            tachyon_core::compression::workspace_words(tachyon_core::compression::decompressor_workspace_bytes(21))
        ],
        vec![0u8; 64],
    );
    let mut r = if zstd {
        #[cfg(feature = "zstd")]
        {
            let d = tachyon_core::compression::Decompressor::new(&mut ws, &mut input, 21).unwrap();
            Reader::open_zstd(Cursor::new(file), storage.storage(), d).unwrap()
        }
        #[cfg(not(feature = "zstd"))]
        unreachable!()
    } else {
        Reader::open(Cursor::new(file), storage.storage()).unwrap()
    };
    read_back(&mut r).unwrap()
}

fn model_of(pool: &[PoolFrame], samples: &[In]) -> PerThread {
    model(samples.iter().map(|s| Written {
        thread_id: s.tid,
        interpreter_id: s.iid,
        timestamp_us: s.ts,
        status: s.status,
        frames: s.frames.iter().map(|&i| pool[i].frame()),
    }))
}

fn modes() -> Vec<bool> {
    if cfg!(feature = "zstd") {
        vec![false, true]
    } else {
        vec![false]
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn round_trips_in_both_orders((pool, samples) in stream()) {
        let want = model_of(&pool, &samples);
        for zstd in modes() {
            let le = write(&pool, &samples, LittleEndian, zstd);
            let be = write(&pool, &samples, BigEndian, zstd);
            prop_assert_eq!(&read(&le, zstd), &want);
            prop_assert_eq!(&read(&be, zstd), &want);
            if !zstd {
                prop_assert_eq!(le.len(), be.len());
            }
        }
    }
}
