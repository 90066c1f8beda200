//! The worst case of the thread lookups, before and after keying their hash (issue 15).
//!
//! `cargo run --release -p qemu-tests --features tools --bin thread_collisions -- [THREADS]` writes a file of
//! THREADS threads (one sample each) whose ids are crafted against the core's unkeyed thread
//! hash (its finalising mix undone, so that every id's hash has the same high half and lands
//! in the same slot of any table), and one of ordinary ids, then reads each with the hash
//! unkeyed (seed 0: what the core did before) and keyed (a random seed: what the `tachyon`
//! crate does now). Prints a table; synthetic files, labelled so.

use std::time::{Duration, Instant};

use tachyon_core::io::Cursor;
use tachyon_core::storage::{ReaderCapacity, VecReaderStorage, VecWriterStorage, WriterCapacity};
use tachyon_core::{Frame, Reader, Writer, WriterConfig};

/// The core's mix (`storage.rs`), undone: an attacker's tool, so it lives here, not there.
fn unmix(mut y: u64) -> u64 {
    const M: u64 = 0xd6e8_feb8_6659_fd93;
    let mut inverse = M;
    for _ in 0..6 {
        inverse = inverse.wrapping_mul(2u64.wrapping_sub(M.wrapping_mul(inverse)));
    }
    y ^= y >> 32;
    y = y.wrapping_mul(inverse);
    y ^= y >> 32;
    y = y.wrapping_mul(inverse);
    y ^ (y >> 32)
}

fn seed() -> u64 {
    tachyon::hash::IdHash::default().key()
}

fn write(ids: &[u64], seed: u64) -> (Vec<u8>, Duration) {
    let cap = WriterCapacity { string_bytes: 64, strings: 4, frames: 4, threads: ids.len() + 1, rle_budget: 64 };
    let mut storage = VecWriterStorage::new(cap).unwrap();
    let mut buf = vec![0u8; ids.len() * 32 + 4096];
    let start = Instant::now();
    let mut w =
        Writer::new(Cursor::new(&mut buf[..]), storage.storage().with_seed(seed), WriterConfig::new(1, 1)).unwrap();
    for (i, &tid) in ids.iter().enumerate() {
        w.write_thread_sample(10 + i as u64, 0, tid, 0, [Frame::new(b"a.py", b"f")]).unwrap();
    }
    let len = w.finish().unwrap() as usize;
    let took = start.elapsed();
    buf.truncate(len);
    (buf, took)
}

fn read(file: &[u8], threads: usize, seed: u64) -> Duration {
    let cap = ReaderCapacity { string_bytes: 64, strings: 4, frames: 4, threads, read_buffer: 4096 };
    let mut storage = VecReaderStorage::new(cap).unwrap();
    let start = Instant::now();
    let mut r = Reader::open(Cursor::new(file), storage.storage().with_seed(seed)).unwrap();
    let mut n = 0;
    while r.next_sample().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, threads);
    start.elapsed()
}

fn main() {
    let n: usize = std::env::args().nth(1).map_or(40_000, |a| a.parse().expect("THREADS"));
    let ordinary: Vec<u64> = (1..=n as u64).collect();
    let crafted: Vec<u64> = (0..n as u64).map(|i| unmix((0x1234_5678 << 32) | i)).collect();
    println!("Synthetic files: {n} threads of one sample each.\n");
    println!("| thread ids | file bytes | write, unkeyed | write, keyed | read, unkeyed | read, keyed |");
    println!("|---|---|---|---|---|---|");
    for (label, ids) in [("ordinary (1, 2, 3, …)", &ordinary), ("crafted to collide", &crafted)] {
        let (file, write_unkeyed) = write(ids, 0);
        let (again, write_keyed) = write(ids, seed());
        assert!(again == file, "the seed changed the file");
        let (read_unkeyed, read_keyed) = (read(&file, n, 0), read(&file, n, seed()));
        println!(
            "| {label} | {} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms |",
            file.len(),
            write_unkeyed.as_secs_f64() * 1e3,
            write_keyed.as_secs_f64() * 1e3,
            read_unkeyed.as_secs_f64() * 1e3,
            read_keyed.as_secs_f64() * 1e3
        );
    }
}
