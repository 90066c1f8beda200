//! Writes a small multi-threaded profile with fixed-capacity storage, in this machine's byte
//! order and in the other one, reads both back and prints what it found.
//!
//! `cargo run --release -p tachyon-core --example roundtrip [-- OUT.bin]` also saves the
//! native file, which CPython 3.15's `profiling.sampling replay` can read.

use tachyon_core::io::Cursor;
use tachyon_core::storage::{StaticReaderStorage, StaticWriterStorage};
use tachyon_core::text::Lossy;
use tachyon_core::{BigEndian, Endianity, Frame, LittleEndian, Location, Reader, Stats, Writer, WriterConfig};

/// 4 KiB of names, 64 strings, 64 frames, 4 threads, CPython's REPEAT budget.
type Storage = StaticWriterStorage<4096, 64, 64, 4>;

const FUNCS: [&[u8]; 5] = [b"main", b"serve", b"handle", b"parse", b"tokenize"];

fn write<E: Endianity>(endian: E, out: &mut [u8]) -> usize {
    let mut storage = Box::new(Storage::new());
    let config = WriterConfig::new(1_000_000, 1000);
    let mut w = Writer::with_endian(Cursor::new(out), storage.storage(), config, endian).expect("writer");
    for tick in 0..1000u64 {
        for thread in 0..3u64 {
            // Each thread's stack deepens and shrinks slowly, so most samples repeat.
            let depth = 1 + ((tick / (40 + thread * 10)) % FUNCS.len() as u64) as usize;
            let frames = FUNCS[..depth].iter().rev().enumerate().map(|(i, name)| {
                Frame::new(b"/srv/app.py", name).at(Location {
                    lineno: 10 * i as i32 + 1,
                    end_lineno: 10 * i as i32 + 1,
                    col: 4,
                    end_col: 20,
                })
            });
            let status = if thread == 0 { 33 } else { 4 }; // main thread has the GIL
            w.write_thread_sample(1_000_000 + tick * 1000, 0, 100 + thread, status, frames).expect("sample");
        }
    }
    w.set_stats(Stats { duration_sec: 1.0, sample_rate: 1000.0, error_rate: Some(0.0), missed_samples: None })
        .expect("stats");
    w.finish().expect("finish") as usize
}

fn read(file: &[u8]) -> (u64, usize, String) {
    let mut storage = Box::new(StaticReaderStorage::<4096, 64, 64, 4>::new());
    let mut r = Reader::open(Cursor::new(file), storage.storage()).expect("open");
    let (mut samples, mut deepest, mut leaf) = (0u64, 0usize, String::new());
    while let Some(s) = r.next_sample().expect("sample") {
        samples += 1;
        if s.stack.len() > deepest {
            deepest = s.stack.len();
            leaf = s.frames().next().map(|f| Lossy(f.funcname).to_string()).unwrap_or_default();
        }
    }
    (samples, deepest, leaf)
}

fn main() {
    let mut native = vec![0u8; 64 << 10];
    let mut foreign = vec![0u8; 64 << 10];
    let n = write(tachyon_core::NativeEndian::default(), &mut native);
    let f =
        if cfg!(target_endian = "big") { write(LittleEndian, &mut foreign) } else { write(BigEndian, &mut foreign) };
    for (label, file) in [("native", &native[..n]), ("foreign-endian", &foreign[..f])] {
        let (samples, deepest, leaf) = read(file);
        println!(
            "{label:>15}: {} bytes, magic {:?}, {samples} thread samples, deepest stack {deepest} ({leaf})",
            file.len(),
            String::from_utf8_lossy(&file[..4])
        );
    }
    if let Some(path) = std::env::args().nth(1) {
        std::fs::write(&path, &native[..n]).expect("write file");
        println!("wrote {path}");
    }
}
