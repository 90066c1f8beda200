//! Conversion speed and memory against CPython 3.15.2's `replay --collapsed`, on files of a
//! million samples and more made from the real profile in `examples/` (its samples repeated
//! with shifted timestamps, zstd like CPython's default). Prints a table.
//!
//!     cargo run --release -p qemu-tests --features oracle --bin convert_bench [-- MILLIONS...]
//!
//! Each measurement runs in its own process and reports that process's peak RSS (VmHWM):
//! CPython through `qemu-tests/oracle/cpython_bench.py collapsed`, ours by re-running this
//! binary with `--convert FORMAT FILE OUT`. The `tachyon` command's wall time (process start
//! included) is measured too. CPython's and our collapsed outputs must be identical.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::{json, Value};
use tachyon::convert::{convert, Format};
use tachyon::file::{FileSource, StdIo};
use tachyon::open::{Limits, OwnedReaderStorage, OwnedWriterStorage};
use tachyon_core::reader::Metadata;
use tachyon_core::storage::WriterCapacity;
use tachyon_core::writer::{Frame, FrameId, WriterConfig};
use tachyon_core::{Compression, NativeEndian};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:").map(|v| v.trim().trim_end_matches(" kB").parse::<u64>().unwrap()))
        .unwrap()
}

/// Writes `examples/stdlib_work.pyb`'s samples over and over until `target` samples.
fn make_file(target: u64, path: &Path) {
    let src_path = root().join("examples/stdlib_work.pyb");
    let mut src = FileSource::open(&src_path).unwrap();
    let meta = Metadata::read(&mut src).unwrap();
    let mut storage = OwnedReaderStorage::for_metadata(&meta, Limits::default()).unwrap();
    let mut reader = storage.open(src).unwrap();
    let tables = reader.tables();
    let frames: Vec<(Vec<u8>, Vec<u8>, tachyon_core::tables::FrameEntry)> = (0..tables.frame_count() as u32)
        .map(|i| {
            let e = *tables.frame_entry(i).unwrap();
            (tables.string(e.filename).unwrap().to_vec(), tables.string(e.funcname).unwrap().to_vec(), e)
        })
        .collect();
    let mut samples: Vec<(u64, u32, u64, u8, Vec<u32>)> = Vec::new();
    while let Some(s) = reader.next_sample().unwrap() {
        samples.push((s.timestamp_us, s.interpreter_id, s.thread_id, s.status, s.stack.to_vec()));
    }
    let span = samples.last().unwrap().0 - meta.header.start_time_us + 1000;
    let cap = WriterCapacity { string_bytes: 1 << 16, strings: 1024, frames: 1024, threads: 16, rle_budget: 16_384 };
    let mut wstore = OwnedWriterStorage::new(cap, Compression::Zstd).unwrap();
    let config = WriterConfig {
        start_time_us: meta.header.start_time_us,
        sample_interval_us: meta.header.sample_interval_us,
        compression: Compression::Zstd,
        profiling: meta.header.config,
        python_version: meta.header.python_version,
    };
    let sink = StdIo(std::io::BufWriter::new(std::fs::File::create(path).unwrap()));
    let mut w = wstore.writer(sink, config, NativeEndian::default()).unwrap();
    let ids: Vec<FrameId> = frames
        .iter()
        .map(|(f, n, e)| {
            w.append_frame(Frame { filename: f, funcname: n, location: Some(e.location), opcode: Some(e.opcode) })
                .unwrap()
        })
        .collect();
    let mut written = 0u64;
    let mut stack = Vec::new();
    'outer: for round in 0.. {
        for (ts, iid, tid, status, ids_in) in &samples {
            stack.clear();
            stack.extend(ids_in.iter().map(|&i| ids[i as usize]));
            w.write_thread_sample_ids(ts + round * span, *iid, *tid, *status, &stack).unwrap();
            written += 1;
            if written == target {
                break 'outer;
            }
        }
    }
    w.finalize().unwrap();
}

/// Child mode: one conversion in this process, timed, with its peak RSS.
fn convert_here(format: &str, file: &str, out: &str) {
    let start = Instant::now();
    let mut src = FileSource::open(Path::new(file)).unwrap();
    let meta = Metadata::read(&mut src).unwrap();
    let mut storage = OwnedReaderStorage::for_metadata(&meta, Limits::default()).unwrap();
    let mut reader = storage.open(src).unwrap();
    let mut sink = std::io::BufWriter::with_capacity(1 << 16, std::fs::File::create(out).unwrap());
    let samples = if format == "dump" {
        let mut n = 0u64;
        let mut lines = tachyon::view::SampleLines::default();
        while let Some(s) = reader.next_sample().unwrap() {
            lines.write(&mut sink, &s).unwrap();
            n += 1;
        }
        n
    } else {
        convert(&mut reader, &Format::Collapsed, &mut sink, &mut |_| {}).unwrap()
    };
    std::io::Write::flush(&mut sink).unwrap();
    let seconds = start.elapsed().as_secs_f64();
    println!("{}", json!({"seconds": seconds, "samples": samples, "maxrss_kb": peak_rss_kb()}));
}

fn child(args: &[&str]) -> Value {
    let out = Command::new(std::env::current_exe().unwrap()).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn cpython(file: &Path, out: &Path) -> Value {
    let o = Command::new(root().join("scripts/oracle-python.sh"))
        .arg("amd64")
        .arg(root().join("qemu-tests/oracle/cpython_bench.py"))
        .arg("collapsed")
        .arg(file)
        .arg(out)
        .output()
        .expect("run the oracle (scripts/oracle.sh first)");
    assert!(o.status.success(), "CPython: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Wall time of the `tachyon` command (built next to this binary).
fn command_seconds(args: &[&str]) -> f64 {
    let exe = std::env::current_exe().unwrap().with_file_name("tachyon");
    assert!(exe.exists(), "build the tachyon command first (cargo build --release -p tachyon)");
    let start = Instant::now();
    let status = Command::new(exe).args(args).arg("--quiet").status().unwrap();
    assert!(status.success());
    start.elapsed().as_secs_f64()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--convert") {
        return convert_here(&args[2], &args[3], &args[4]);
    }
    let millions: Vec<u64> =
        if args.len() > 1 { args[1..].iter().map(|a| a.parse().expect("millions")).collect() } else { vec![1, 4] };
    let work = root().join("target/convert-bench");
    std::fs::create_dir_all(&work).unwrap();
    println!("| samples | file | CPython replay --collapsed | ours convert --to collapsed | ours dump | `tachyon convert` command | speed-up (collapsed) |");
    println!("|---|---|---|---|---|---|---|");
    for m in millions {
        let file = work.join(format!("{m}M.pyb"));
        make_file(m * 1_000_000, &file);
        let size = std::fs::metadata(&file).unwrap().len();
        let f = file.to_str().unwrap();
        let cp_out = work.join(format!("{m}M.cpython.txt"));
        let our_out = work.join(format!("{m}M.ours.txt"));
        let dump_out = work.join(format!("{m}M.dump.jsonl"));
        let cp = cpython(&file, &cp_out);
        let best = |format: &str, out: &Path| {
            (0..3)
                .map(|_| child(&["--convert", format, f, out.to_str().unwrap()]))
                .min_by(|a, b| a["seconds"].as_f64().partial_cmp(&b["seconds"].as_f64()).unwrap())
                .unwrap()
        };
        let ours = best("collapsed", &our_out);
        let dump = best("dump", &dump_out);
        assert_eq!(std::fs::read(&cp_out).unwrap(), std::fs::read(&our_out).unwrap(), "collapsed outputs differ");
        let cmd = (0..3)
            .map(|_| command_seconds(&["convert", f, "--to", "collapsed", "-o", our_out.to_str().unwrap()]))
            .fold(f64::INFINITY, f64::min);
        let n = cp["samples"].as_f64().unwrap();
        let cell = |v: &Value| {
            let s = v["seconds"].as_f64().unwrap();
            format!("{s:.2} s, {:.2} M/s, {} MB", n / s / 1e6, v["maxrss_kb"].as_u64().unwrap() / 1024)
        };
        println!(
            "| {n} | {} KB zstd | {} | {} | {} | {cmd:.2} s | {:.0}× |",
            size / 1024,
            cell(&cp),
            cell(&ours),
            cell(&dump),
            cp["seconds"].as_f64().unwrap() / ours["seconds"].as_f64().unwrap()
        );
    }
}
