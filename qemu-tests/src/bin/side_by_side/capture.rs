//! The capture ring's own costs, in this process (the whole-run overheads of real workloads
//! are `scripts/capture-bench.sh`'s): a push per sample for 8-, 32- and 128-frame stacks
//! (ids and code pairs), and the drain — pop, resolve, intern, encode into a writer over
//! memory — in samples a second.

use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};

use tachyon::memory::VecSink;
use tachyon_core::capture::{entry_words, Capture, Drain, Taken};
use tachyon_core::storage::{VecWriterStorage, WriterCapacity};
use tachyon_core::{Frame, FrameId, Writer, WriterConfig};

const RING_WORDS: usize = 1 << 20;

fn ring_words() -> Vec<AtomicU32> {
    (0..RING_WORDS).map(|_| AtomicU32::new(0)).collect()
}

fn taken(i: u64) -> Taken {
    Taken { timestamp_us: 1_000 + i * 100, interpreter_id: 0, thread_id: 1 + i % 4, status: 3 }
}

/// Nanoseconds a push: batches that fill most of the ring, timed push by push loop, the
/// ring emptied (untimed) between batches; the median batch of `budget` of them (at least 5).
fn push_ns(depth: usize, code: bool, budget: Duration) -> f64 {
    let words = ring_words();
    // As a profiler's ring: its length unknown to the compiler (a C caller's has any length)
    // and its address known to the world (a handler and a drain thread share it). Without
    // the second, the compiler proved the ring local to the timed loop and kept its position
    // and counts in registers, storing them once a batch, which no real push can do (seen in
    // the machine code of the ring before issue 38).
    let ring = Capture::new(std::hint::black_box(&words[..]));
    let ring = std::hint::black_box(&ring);
    let ids: Vec<FrameId> = (0..depth as u32).map(FrameId).collect();
    let pairs: Vec<(u64, u32)> = (0..depth as u64).map(|d| (0x7f00_0000_0000 + d * 64, d as u32)).collect();
    let batch = RING_WORDS / entry_words(depth, code) - 1;
    let mut per_batch = Vec::new();
    let start = Instant::now();
    while start.elapsed() < budget || per_batch.len() < 5 {
        let t = Instant::now();
        for i in 0..batch as u64 {
            let result = if code { ring.push_code(taken(i), &pairs) } else { ring.push_ids(taken(i), &ids) };
            assert!(result.is_ok());
        }
        per_batch.push(t.elapsed().as_nanos() as f64 / batch as f64);
        while ring.pop(|_| ()).is_some() {}
    }
    per_batch.sort_by(f64::total_cmp);
    per_batch[per_batch.len() / 2]
}

/// Samples a second through `Drain::drain` into a writer over memory: the ring filled
/// (untimed), then drained (timed); the median of `budget` of rounds (at least 5).
fn drain_rate(depth: usize, code: bool, budget: Duration) -> f64 {
    let words = ring_words();
    let ring = Capture::new(std::hint::black_box(&words[..]));
    let ring = std::hint::black_box(&ring);
    let capacity = WriterCapacity { string_bytes: 1 << 16, strings: 1024, frames: 1024, threads: 8, rle_budget: 16384 };
    let mut storage = VecWriterStorage::new(capacity).unwrap();
    let mut writer = Writer::new(VecSink::default(), storage.storage(), WriterConfig::new(0, 100)).unwrap();
    let names: Vec<Vec<u8>> = (0..depth).map(|d| format!("function_{d}").into_bytes()).collect();
    let ids: Vec<FrameId> = names.iter().map(|n| writer.intern_frame(Frame::new(b"engine.c", n)).unwrap()).collect();
    let leaked: &'static [Vec<u8>] = Box::leak(names.into_boxed_slice());
    let resolver = move |code: u64, _offset: u32| Frame::new(b"engine.c", &leaked[code as usize % leaked.len()]);
    let batch = RING_WORDS / entry_words(depth, code) - 1;
    let mut drain = Drain::new();
    let mut rates = Vec::new();
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < budget || rates.len() < 5 {
        for _ in 0..batch {
            // Stacks that change between samples (a rotating innermost frame), as a running
            // program's do: no sample collapses into a REPEAT run.
            let mut stack = ids.clone();
            stack.rotate_left((n % depth as u64) as usize);
            let pairs: Vec<(u64, u32)> = stack.iter().map(|id| (u64::from(id.0), 7)).collect();
            let pushed = if code { ring.push_code(taken(n), &pairs) } else { ring.push_ids(taken(n), &stack) };
            assert!(pushed.is_ok());
            n += 1;
        }
        let t = Instant::now();
        let taken = drain.drain(ring, &mut writer, &resolver, usize::MAX).unwrap();
        rates.push(taken as f64 / t.elapsed().as_secs_f64());
    }
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

/// Prints the table; each figure is the median of `budget` of batches (a second for the
/// documented figures; the test command's smoke run gives less).
pub fn capture_costs(budget: Duration) {
    println!("The capture ring's own costs (this process; medians):\n");
    println!("| stack depth | push, frame ids | push, (code, offset) pairs | drain + encode, frame ids | drain + resolve + encode, code pairs |");
    println!("|---:|---:|---:|---:|---:|");
    for depth in [8, 32, 128] {
        println!(
            "| {depth} | {:.1} ns | {:.1} ns | {:.2} M samples/s | {:.2} M samples/s |",
            push_ns(depth, false, budget),
            push_ns(depth, true, budget),
            drain_rate(depth, false, budget) / 1e6,
            drain_rate(depth, true, budget) / 1e6
        );
    }
    println!();
}
