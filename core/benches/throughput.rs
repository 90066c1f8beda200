//! Encode and decode throughput on a realistic synthetic stream: 500k thread samples,
//! 8 threads, stacks 10–40 deep, about 80% of samples repeating the previous stack.
//! Reported per thread sample (criterion's elements/s); bytes per sample are printed.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::hint::black_box;
use tachyon_core::compression::{
    compressor_workspace_bytes, decompressor_workspace_bytes, workspace_words, Compressor, Decompressor,
    CPYTHON_WINDOW_LOG,
};
use tachyon_core::io::Cursor;
use tachyon_core::storage::{ReaderCapacity, VecReaderStorage, VecWriterStorage, WriterCapacity};
use tachyon_core::{Compression, Frame, FrameId, Location, Reader, Writer, WriterConfig};

const THREADS: usize = 8;
const SAMPLES: usize = 500_000;
const POOL: usize = 4000;

struct Stream {
    names: Vec<(Vec<u8>, Vec<u8>, Location)>,
    /// Per thread sample: thread, status, stack (pool indices, innermost first).
    samples: Vec<(u64, u8, Vec<u32>)>,
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

fn stream() -> Stream {
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let names = (0..POOL)
        .map(|i| {
            let file = format!("/usr/lib/python3.15/site-packages/pkg{}/module_{}.py", i % 37, i % 211).into_bytes();
            let func = format!("function_{i}").into_bytes();
            let line = (i % 900) as i32 + 1;
            (file, func, Location { lineno: line, end_lineno: line + 2, col: 4, end_col: 30 })
        })
        .collect();
    let mut stacks: Vec<Vec<u32>> = (0..THREADS)
        .map(|_| (0..10 + xorshift(&mut rng) % 31).map(|_| (xorshift(&mut rng) % POOL as u64) as u32).collect())
        .collect();
    let mut samples = Vec::with_capacity(SAMPLES);
    while samples.len() < SAMPLES {
        for (t, stack) in stacks.iter_mut().enumerate() {
            if xorshift(&mut rng) % 100 >= 80 {
                // Pop a few innermost frames, push a few, keep depth in 10..=40.
                let pop = (1 + xorshift(&mut rng) % 4).min(stack.len() as u64 - 1) as usize;
                stack.drain(..pop);
                let push = 1 + xorshift(&mut rng) % 4;
                for _ in 0..push {
                    if stack.len() < 40 {
                        stack.insert(0, (xorshift(&mut rng) % POOL as u64) as u32);
                    }
                }
                while stack.len() < 10 {
                    stack.insert(0, (xorshift(&mut rng) % POOL as u64) as u32);
                }
            }
            let status = if xorshift(&mut rng) % 50 == 0 { 4 } else { 5 };
            samples.push((t as u64, status, stack.clone()));
        }
    }
    samples.truncate(SAMPLES);
    Stream { names, samples }
}

const CAP: WriterCapacity =
    WriterCapacity { string_bytes: 1 << 20, strings: 16384, frames: 8192, threads: 16, rle_budget: 16384 };

fn frame(s: &Stream, i: u32) -> Frame<'_> {
    let (f, n, l) = &s.names[i as usize];
    Frame { filename: f, funcname: n, location: Some(*l), opcode: None }
}

/// Encodes the stream; `ids` switches to the frame-id API.
fn encode(
    s: &Stream,
    out: &mut [u8],
    storage: &mut VecWriterStorage,
    zstd: Option<(&mut [u64], &mut [u8])>,
    ids: bool,
) -> usize {
    let cfg = WriterConfig::new(0, 1000);
    let sink = Cursor::new(out);
    let mut w = match zstd {
        Some((ws, buf)) => Writer::new(
            sink,
            storage.storage().with_zstd(Compressor::new(ws, buf).unwrap()),
            cfg.with_compression(Compression::Zstd),
        )
        .unwrap(),
        None => Writer::new(sink, storage.storage(), cfg).unwrap(),
    };
    let pool: Vec<FrameId> =
        if ids { (0..POOL as u32).map(|i| w.intern_frame(frame(s, i)).unwrap()).collect() } else { Vec::new() };
    let mut scratch = Vec::with_capacity(64);
    for (n, (tid, status, stack)) in s.samples.iter().enumerate() {
        let ts = (n / THREADS) as u64 * 1000;
        if ids {
            scratch.clear();
            scratch.extend(stack.iter().map(|&i| pool[i as usize]));
            w.write_thread_sample_ids(ts, 0, *tid, *status, &scratch).unwrap();
        } else {
            w.write_thread_sample(ts, 0, *tid, *status, stack.iter().map(|&i| frame(s, i))).unwrap();
        }
    }
    w.finish().unwrap() as usize
}

fn decode(file: &[u8], storage: &mut VecReaderStorage, zstd: Option<(&mut [u64], &mut [u8])>) -> u64 {
    let src = Cursor::new(file);
    let mut r = match zstd {
        Some((ws, buf)) => {
            Reader::open_zstd(src, storage.storage(), Decompressor::new(ws, buf, CPYTHON_WINDOW_LOG).unwrap()).unwrap()
        }
        None => Reader::open(src, storage.storage()).unwrap(),
    };
    let mut frames = 0u64;
    while let Some(sample) = r.next_sample().unwrap() {
        frames += sample.stack.len() as u64;
    }
    frames
}

fn benches(c: &mut Criterion) {
    let s = stream();
    let mut wstore = VecWriterStorage::new(CAP).unwrap();
    let mut cws = vec![0u64; workspace_words(compressor_workspace_bytes())];
    let mut cbuf = vec![0u8; 128 << 10];
    let mut out = vec![0u8; 64 << 20];
    let raw_len = encode(&s, &mut out, &mut wstore, None, false);
    let raw = out[..raw_len].to_vec();
    let z_len = encode(&s, &mut out, &mut wstore, Some((&mut cws, &mut cbuf)), false);
    let zst = out[..z_len].to_vec();
    let frames: usize = s.samples.iter().map(|x| x.2.len()).sum();
    println!(
        "stream: {SAMPLES} thread samples, {THREADS} threads, {:.1} frames/sample; raw file {raw_len} B ({:.2} B/sample), zstd file {z_len} B ({:.2} B/sample)",
        frames as f64 / SAMPLES as f64,
        raw_len as f64 / SAMPLES as f64,
        z_len as f64 / SAMPLES as f64
    );

    let mut g = c.benchmark_group("encode");
    g.sample_size(10).throughput(Throughput::Elements(SAMPLES as u64));
    g.bench_function("strings/raw", |b| b.iter(|| black_box(encode(&s, &mut out, &mut wstore, None, false))));
    g.bench_function("frame_ids/raw", |b| b.iter(|| black_box(encode(&s, &mut out, &mut wstore, None, true))));
    g.bench_function("strings/zstd", |b| {
        b.iter(|| black_box(encode(&s, &mut out, &mut wstore, Some((&mut cws, &mut cbuf)), false)))
    });
    g.bench_function("frame_ids/zstd", |b| {
        b.iter(|| black_box(encode(&s, &mut out, &mut wstore, Some((&mut cws, &mut cbuf)), true)))
    });
    g.finish();

    let rcap =
        ReaderCapacity { string_bytes: 1 << 20, strings: 16384, frames: 8192, threads: 16, read_buffer: 64 << 10 };
    let mut rstore = VecReaderStorage::new(rcap).unwrap();
    let mut dws = vec![0u64; workspace_words(decompressor_workspace_bytes(CPYTHON_WINDOW_LOG))];
    let mut dbuf = vec![0u8; 64 << 10];
    let mut g = c.benchmark_group("decode");
    g.sample_size(10).throughput(Throughput::Elements(SAMPLES as u64));
    g.bench_function("raw", |b| {
        b.iter_batched(|| (), |_| black_box(decode(&raw, &mut rstore, None)), BatchSize::SmallInput)
    });
    g.bench_function("zstd", |b| b.iter(|| black_box(decode(&zst, &mut rstore, Some((&mut dws, &mut dbuf))))));
    g.finish();
}

criterion_group!(throughput, benches);
criterion_main!(throughput);
