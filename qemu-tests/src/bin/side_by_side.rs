//! Side by side with the real CPython 3.15.2 (x86_64): writer and reader speed, bytes per
//! sample and reader peak memory, on the same streams and files, in one run. Prints a
//! Markdown table. Needs `scripts/oracle.sh` first.
//!
//! ```text
//! cargo run --release -p qemu-tests --bin side_by_side -- [--samples N] [--out DIR]
//! ```
//!
//! Our writer runs in this process on a stream prepared beforehand (string API and frame-id
//! API); CPython's writer gets prebuilt `InterpreterInfo` objects and only its write loop is
//! timed. Each reader runs in its own process so its peak RSS is its own: CPython's
//! `BinaryReader.replay` into a collector that does nothing, ours streaming every sample.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use qemu_tests::gen::Rng;
use serde_json::{json, Value};
use tachyon::open::{Limits, OwnedReaderStorage};
use tachyon_core::compression::{compressor_workspace_bytes, workspace_words, Compressor};
use tachyon_core::io::Cursor;
use tachyon_core::reader::Metadata;
use tachyon_core::storage::{VecWriterStorage, WriterCapacity};
use tachyon_core::{Frame, FrameId, Location, Writer, WriterConfig};

const THREADS: u64 = 8;
const POOL: usize = 4000;

/// One thread's sample in a tick: thread id, status, stack of pool indices.
type ThreadSample = (u64, u8, Vec<u32>);

struct Stream {
    frames: Vec<(String, String, Location)>,
    /// Per tick: timestamp and each thread's (tid, status, stack of pool indices).
    ticks: Vec<(u64, Vec<ThreadSample>)>,
}

/// 8 threads, stacks 10–40 deep, about 80 % of samples repeating the previous stack.
fn stream(samples: u64, seed: u64) -> Stream {
    let mut r = Rng::new(seed);
    let frames = (0..POOL)
        .map(|i| {
            let line = (i % 900) as i32 + 1;
            (
                format!("/usr/lib/python3.15/site-packages/pkg{}/module_{}.py", i % 37, i % 211),
                format!("function_{i}"),
                Location { lineno: line, end_lineno: line + 2, col: 4, end_col: 30 },
            )
        })
        .collect();
    let mut stacks: Vec<Vec<u32>> =
        (0..THREADS).map(|_| (0..10 + r.below(31)).map(|_| r.below(POOL as u64) as u32).collect()).collect();
    let mut ticks = Vec::new();
    for tick in 0..samples / THREADS {
        let mut threads = Vec::new();
        for (t, stack) in stacks.iter_mut().enumerate() {
            if r.chance(20) {
                let pop = (1 + r.below(4) as usize).min(stack.len() - 1);
                stack.drain(..pop);
                for _ in 0..1 + r.below(4) {
                    if stack.len() < 40 {
                        stack.insert(0, r.below(POOL as u64) as u32);
                    }
                }
                while stack.len() < 10 {
                    stack.insert(0, r.below(POOL as u64) as u32);
                }
            }
            let status = if r.chance(2) { 4 } else { 5 };
            threads.push((1000 + t as u64, status, stack.clone()));
        }
        ticks.push((1_000_000 + tick * 1000, threads));
    }
    Stream { frames, ticks }
}

fn stream_json(s: &Stream) -> Value {
    json!({
        "start": 1_000_000u64,
        "interval": 1000,
        "frames": s.frames.iter().map(|(f, n, l)| json!([f, n, [l.lineno, l.end_lineno, l.col, l.end_col]])).collect::<Vec<_>>(),
        "ticks": s.ticks.iter().map(|(ts, th)| json!([ts, th.iter().map(|(t, st, stack)| json!([t, st, stack])).collect::<Vec<_>>()])).collect::<Vec<_>>(),
    })
}

/// Writes the stream with our writer; returns (seconds, bytes).
fn ours_write(s: &Stream, zstd: bool, ids: bool) -> (f64, Vec<u8>) {
    let cap = WriterCapacity { string_bytes: 1 << 20, strings: 16384, frames: 8192, threads: 16, rle_budget: 16384 };
    let mut storage = VecWriterStorage::new(cap).unwrap();
    let mut out = vec![0u8; 256 << 20];
    let mut ws = vec![0u64; if zstd { workspace_words(compressor_workspace_bytes()) } else { 0 }];
    let mut zbuf = vec![0u8; 128 << 10];
    let start = Instant::now();
    let cfg = WriterConfig::new(1_000_000, 1000);
    let sink = Cursor::new(&mut out[..]);
    let mut w = if zstd {
        Writer::new_zstd(sink, storage.storage(), cfg, Compressor::new(&mut ws, &mut zbuf).unwrap()).unwrap()
    } else {
        Writer::new(sink, storage.storage(), cfg).unwrap()
    };
    let frame = |i: u32| {
        let (f, n, l) = &s.frames[i as usize];
        Frame { filename: f.as_bytes(), funcname: n.as_bytes(), location: Some(*l), opcode: None }
    };
    let pool: Vec<FrameId> =
        if ids { (0..POOL as u32).map(|i| w.intern_frame(frame(i)).unwrap()).collect() } else { Vec::new() };
    let mut scratch = Vec::with_capacity(64);
    for (ts, threads) in &s.ticks {
        for (tid, status, stack) in threads {
            if ids {
                scratch.clear();
                scratch.extend(stack.iter().map(|&i| pool[i as usize]));
                w.write_thread_sample_ids(*ts, 0, *tid, *status, &scratch).unwrap();
            } else {
                w.write_thread_sample(*ts, 0, *tid, *status, stack.iter().map(|&i| frame(i))).unwrap();
            }
        }
    }
    let n = w.finalize().unwrap() as usize;
    let secs = start.elapsed().as_secs_f64();
    out.truncate(n);
    (secs, out)
}

fn python(args: &[&str]) -> Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new(root.join("scripts/oracle-python.sh"))
        .arg("amd64")
        .arg(root.join("qemu-tests/oracle/cpython_bench.py"))
        .args(args)
        .output()
        .expect("run the oracle (scripts/oracle.sh first)");
    assert!(out.status.success(), "CPython {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Our reader over a file, in this process (called in a child by `ours_read`).
fn read_here(path: &str) {
    let mut src = tachyon::file::FileSource::open(Path::new(path)).unwrap();
    let start = Instant::now();
    let meta = Metadata::read(&mut src).unwrap();
    let mut storage = OwnedReaderStorage::for_metadata(&meta, Limits::default()).unwrap();
    let mut r = storage.open(src).unwrap();
    let mut n = 0u64;
    while r.next_sample().unwrap().is_some() {
        n += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    let hwm = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:").map(|v| v.trim().trim_end_matches(" kB").parse::<u64>().unwrap()))
        .unwrap();
    println!("{}", json!({"seconds": secs, "samples": n, "maxrss_kb": hwm}));
}

fn ours_read(path: &Path) -> Value {
    let out = Command::new(std::env::current_exe().unwrap()).arg("--read").arg(path).output().unwrap();
    assert!(out.status.success(), "our reader on {}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn best<T>(runs: usize, mut f: impl FnMut() -> (f64, T)) -> (f64, T) {
    let mut best = f();
    for _ in 1..runs {
        let r = f();
        if r.0 < best.0 {
            best = r;
        }
    }
    best
}

fn rate(samples: f64, secs: f64) -> String {
    format!("{:.2} M/s", samples / secs / 1e6)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--read") {
        return read_here(&args[i + 1]);
    }
    let arg = |name: &str| args.iter().position(|a| a == name).map(|i| args[i + 1].clone());
    let samples: u64 = arg("--samples").map_or(500_000, |s| s.parse().unwrap());
    let dir = PathBuf::from(arg("--out").unwrap_or_else(|| "target/side-by-side".into()));
    std::fs::create_dir_all(&dir).unwrap();

    let s = stream(samples, 2026);
    let stream_path = dir.join("stream.json");
    std::fs::write(&stream_path, stream_json(&s).to_string()).unwrap();
    let n = (s.ticks.len() as u64 * THREADS) as f64;
    println!("stream: {n} thread samples, {THREADS} threads, stacks 10–40, ~80 % repeats\n");
    println!("| write | CPython 3.15.2 | ours, string API | ours, frame-id API | string / CPython | frame-id / CPython | bytes/sample | same bytes |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut files = Vec::new();
    for (label, zstd) in [("raw", false), ("zstd", true)] {
        let theirs_path = dir.join(format!("cpython-{label}.bin"));
        let c = python(&[
            "write",
            stream_path.to_str().unwrap(),
            theirs_path.to_str().unwrap(),
            if zstd { "1" } else { "0" },
        ]);
        let c_secs = c["seconds"].as_f64().unwrap();
        let (s_secs, bytes) = best(3, || ours_write(&s, zstd, false));
        let (i_secs, _) = best(3, || ours_write(&s, zstd, true));
        let theirs = std::fs::read(&theirs_path).unwrap();
        let ours_path = dir.join(format!("ours-{label}.bin"));
        std::fs::write(&ours_path, &bytes).unwrap();
        println!(
            "| {label} | {} | {} | {} | {:.1}× | {:.1}× | {:.2} | {} |",
            rate(n, c_secs),
            rate(n, s_secs),
            rate(n, i_secs),
            c_secs / s_secs,
            c_secs / i_secs,
            bytes.len() as f64 / n,
            if bytes == theirs { "yes" } else { "NO" }
        );
        files.push(ours_path);
    }
    // A 4× longer stream shows whether reader memory grows with the sample count.
    let big = stream(samples * 4, 2027);
    for (label, zstd) in [("raw", false), ("zstd", true)] {
        let (_, bytes) = ours_write(&big, zstd, true);
        let p = dir.join(format!("ours-4x-{label}.bin"));
        std::fs::write(&p, bytes).unwrap();
        files.push(p);
    }
    if let Some(real) = std::env::var_os("TACHYON_REAL_PROFILES") {
        let mut largest: Vec<PathBuf> = std::fs::read_dir(real)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "pyb"))
            .collect();
        largest.sort_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0));
        files.extend(largest.pop());
    }
    println!(
        "\n| read | samples | file bytes | CPython 3.15.2 | ours | ours / CPython | CPython peak RSS | our peak RSS |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for f in &files {
        let c = python(&["read", f.to_str().unwrap()]);
        let o = (0..3)
            .map(|_| ours_read(f))
            .min_by(|a, b| a["seconds"].as_f64().partial_cmp(&b["seconds"].as_f64()).unwrap())
            .unwrap();
        let count = c["samples"].as_f64().unwrap();
        assert_eq!(c["samples"], o["samples"], "sample counts differ on {}", f.display());
        let (cs, os) = (c["seconds"].as_f64().unwrap(), o["seconds"].as_f64().unwrap());
        println!(
            "| {} | {count} | {} | {} | {} | {:.1}× | {} MB | {} MB |",
            f.file_name().unwrap().to_string_lossy(),
            std::fs::metadata(f).unwrap().len(),
            rate(count, cs),
            rate(count, os),
            cs / os,
            c["maxrss_kb"].as_u64().unwrap() / 1024,
            o["maxrss_kb"].as_u64().unwrap() / 1024,
        );
    }
}
