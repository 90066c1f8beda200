//! Tachyon: the real profiles CPython 3.15.2 recorded, against CPython's reader and
//! `zstd -d`, and the synthetic stream.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use qemu_tests::gen::Rng;
use serde_json::{json, Value};
use tachyon::file::FileSource;
use tachyon::tachyon::compress::ThreadedCompressor;
use tachyon::tachyon::storage::{Limits, OwnedReaderStorage};
use tachyon_core::compression::{compressor_workspace_bytes, workspace_words, Compressor, RegionCompressor};
use tachyon_core::io::Cursor;
use tachyon_core::reader::Metadata;
use tachyon_core::storage::{VecWriterStorage, WriterCapacity};
use tachyon_core::{Compression, Frame, FrameId, Location, Writer, WriterConfig};

use super::runner::*;
use tachyon_test_kit::fixtures::root;

/// What a file holds, as our reader in this process reads it.
pub(super) struct Counts {
    pub(super) samples: u64,
    pub(super) repeats: u64,
    /// FULL, SUFFIX and POP_PUSH records.
    pub(super) others: u64,
    /// Bytes of the sample region as decoded (decompressed, for a zstd file).
    pub(super) region_bytes: u64,
}

pub(super) fn counts(file: &Path) -> Counts {
    let mut src = FileSource::open(file).unwrap();
    let meta = Metadata::read(&mut src).unwrap();
    let mut storage = OwnedReaderStorage::for_metadata(&meta, Limits::default()).unwrap();
    let mut r = storage.open(src).unwrap();
    while r.next_item().unwrap().is_some() {}
    let c = r.record_counts();
    Counts {
        samples: r.samples_decoded(),
        repeats: c.repeat,
        others: c.full + c.suffix + c.pop_push,
        region_bytes: r.sample_region_bytes(),
    }
}

/// `tachyon verify` of `file`, and for a zstd file `zstd -d` of its sample region alone
/// (extracted into `work` first), the floor of reading it: their runs alternated, as the two
/// make a ratio.
pub(super) fn verify_and_zstd_floor(
    runner: &mut Runner,
    work: &Path,
    name: &str,
    file: &Path,
    runs: usize,
) -> (Measured, Option<Measured>) {
    let verify = with(tachyon_argv(), &["verify", "--quiet", file.to_str().unwrap()]);
    let bytes = std::fs::read(file).unwrap();
    let meta = Metadata::read(&mut Cursor::new(&bytes[..])).unwrap();
    if !meta.is_compressed() {
        return (runner.median(runs, &verify, None), None);
    }
    let zst = work.join(format!("{name}.region.zst"));
    std::fs::write(&zst, &bytes[64..meta.header.string_table_offset as usize]).unwrap();
    let zstd = ["zstd", "-d", "-q", "-c"].map(String::from).to_vec();
    let (ours, floor) = runner.alternated(runs, &verify, &with(zstd, &[zst.to_str().unwrap()]));
    (ours, Some(floor))
}

/// CPython's `replay --collapsed` against `tachyon convert --to collapsed` on `file`, writing
/// into `work`; the outputs must be identical. Returns both measurements and the output's
/// bytes.
pub(super) fn collapsed_side_by_side(
    runner: &mut Runner,
    work: &Path,
    name: &str,
    file: &str,
    runs: usize,
) -> (Measured, Measured, u64) {
    let theirs_out = work.join(format!("{name}.cpython.collapsed"));
    let ours_out = work.join(format!("{name}.ours.collapsed"));
    let (to, oo) = (theirs_out.display().to_string(), ours_out.display().to_string());
    let replay = ["-m", "profiling.sampling", "replay", "--collapsed", "-o", &to, file];
    let cpc = runner.median(runs.min(3), &with(python_argv(), &replay), Some(&theirs_out));
    let convert = ["convert", "--quiet", file, "--to", "collapsed", "-o", &oo];
    let oc = runner.median(runs, &with(tachyon_argv(), &convert), Some(&ours_out));
    let ours = std::fs::read(&ours_out).unwrap();
    assert!(std::fs::read(&theirs_out).unwrap() == ours, "{name}: collapsed outputs differ");
    (cpc, oc, ours.len() as u64)
}

#[derive(Default)]
pub(super) struct Goals {
    pub(super) verify_raw: Vec<f64>,
    pub(super) verify_zstd: Vec<f64>,
    pub(super) collapsed: Vec<f64>,
    pub(super) flamegraph: Vec<f64>,
    pub(super) heatmap: Vec<f64>,
    pub(super) rss: Vec<u64>,
    pub(super) samples: Vec<u64>,
}

pub(super) fn real_profiles(runner: &mut Runner, dir: &Path, work: &Path, runs: usize, goals: &mut Goals) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e} (record them: make_real_profiles.sh --long DIR)", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pyb"))
        .collect();
    files.sort();
    files.push(root().join("examples/stdlib_work.pyb"));
    assert!(
        Command::new("zstd").arg("--version").output().is_ok(),
        "the zstd command is missing (apt-get install zstd)"
    );
    let cpython_runs = runs.min(3);
    println!("| profile | samples | REPEAT / other records | bytes | CPython replay, no-op collector | `tachyon verify` | speed-up | `zstd -d` of the sample region | verify ÷ `zstd -d` | peak RSS: CPython / ours |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut collapsed_rows = Vec::new();
    let mut flamegraph_rows = Vec::new();
    let mut heatmap_rows = Vec::new();
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let f = file.to_str().unwrap().to_owned();
        let Counts { samples, repeats, others, .. } = counts(file);
        let bytes = std::fs::metadata(file).unwrap().len();
        let bench = root().join("qemu-tests/oracle/cpython_bench.py").display().to_string();
        let cp = runner.median(cpython_runs, &with(python_argv(), &[&bench, "read", &f]), None);
        let (ours, zstd) = verify_and_zstd_floor(runner, work, &name, file, runs);
        let speedup = cp.seconds / ours.seconds;
        let floor = if let Some(z) = zstd {
            goals.verify_zstd.push(ours.seconds / z.seconds);
            format!("{} | {:.2}×", ms(&z), ours.seconds / z.seconds)
        } else {
            goals.verify_raw.push(speedup);
            "— | —".to_owned()
        };
        goals.rss.push(ours.rss_kb);
        goals.samples.push(samples);
        println!(
            "| {name} | {samples} | {repeats} / {others} | {bytes} | {} | {} | {speedup:.1}× | {floor} | {} / {} |",
            ms(&cp),
            ms(&ours),
            mb(cp.rss_kb),
            mb(ours.rss_kb)
        );

        let (cpc, oc, out_bytes) = collapsed_side_by_side(runner, work, &name, &f, runs);
        goals.collapsed.push(cpc.seconds / oc.seconds);
        // The flame graph pages: CPython's `--flamegraph` against ours (their trees are compared
        // node for node by the test command; here, time and size).
        let theirs_page = work.join(format!("{name}.cpython.html"));
        let ours_page = work.join(format!("{name}.ours.html"));
        let (tp, op) = (theirs_page.display().to_string(), ours_page.display().to_string());
        let replay = ["-m", "profiling.sampling", "replay", "--flamegraph", "-o", &tp, &f];
        let cpf = runner.median(cpython_runs, &with(python_argv(), &replay), Some(&theirs_page));
        let convert = ["convert", "--quiet", &f, "--to", "flamegraph-html", "-o", &op];
        let of = runner.median(runs, &with(tachyon_argv(), &convert), Some(&ours_page));
        goals.flamegraph.push(cpf.seconds / of.seconds);
        let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
        flamegraph_rows.push(format!(
            "| {name} | {samples} | {} | {} | {:.1}× | {:.2} MB / {:.2} MB | {} / {} |",
            ms(&cpf),
            ms(&of),
            cpf.seconds / of.seconds,
            size(&theirs_page) as f64 / 1e6,
            size(&ours_page) as f64 / 1e6,
            mb(cpf.rss_kb),
            mb(of.rss_kb)
        ));
        // The heatmaps: folders of pages.
        let theirs_dir = work.join(format!("{name}.cpython.heatmap"));
        let ours_dir = work.join(format!("{name}.ours.heatmap"));
        let (td, od) = (theirs_dir.display().to_string(), ours_dir.display().to_string());
        let replay = ["-m", "profiling.sampling", "replay", "--heatmap", "-o", &td, &f];
        let cph = runner.median(cpython_runs, &with(python_argv(), &replay), Some(&theirs_dir));
        let convert = ["convert", "--quiet", &f, "--to", "heatmap", "-o", &od];
        let oh = runner.median(runs, &with(tachyon_argv(), &convert), Some(&ours_dir));
        goals.heatmap.push(cph.seconds / oh.seconds);
        heatmap_rows.push(format!(
            "| {name} | {samples} | {} | {} | {:.1}× | {} / {} |",
            ms(&cph),
            ms(&oh),
            cph.seconds / oh.seconds,
            mb(cph.rss_kb),
            mb(oh.rss_kb)
        ));
        collapsed_rows.push(format!(
            "| {name} | {samples} | {out_bytes} | {} | {} | {:.1}× | yes | {} / {} |",
            ms(&cpc),
            ms(&oc),
            cpc.seconds / oc.seconds,
            mb(cpc.rss_kb),
            mb(oc.rss_kb)
        ));
    }
    println!();
    println!("| profile | samples | output bytes | CPython `replay --collapsed` | `tachyon convert --to collapsed` | speed-up | same output | peak RSS: CPython / ours |");
    println!("|---|---|---|---|---|---|---|---|");
    for row in collapsed_rows {
        println!("{row}");
    }
    println!();
    println!("| profile | samples | CPython `replay --flamegraph` | `tachyon convert --to flamegraph-html` | speed-up | page: CPython's / ours | peak RSS: CPython / ours |");
    println!("|---|---|---|---|---|---|---|");
    for row in flamegraph_rows {
        println!("{row}");
    }
    println!();
    println!("| profile | samples | CPython `replay --heatmap` | `tachyon convert --to heatmap` | speed-up | peak RSS: CPython / ours |");
    println!("|---|---|---|---|---|---|");
    for row in heatmap_rows {
        println!("{row}");
    }
}

// ---------------------------------------------------------------------------------------
// The synthetic stream.

pub(super) const THREADS: u64 = 8;
pub(super) const POOL: usize = 4000;

/// One thread's sample in a tick: thread id, status, stack of pool indices.
type ThreadSample = (u64, u8, Vec<u32>);

pub(super) struct Stream {
    pub(super) frames: Vec<(String, String, Location)>,
    /// Per tick: timestamp and each thread's (tid, status, stack of pool indices).
    pub(super) ticks: Vec<(u64, Vec<ThreadSample>)>,
}

/// 8 threads, stacks 10–40 deep, about 80 % of samples repeating the previous stack.
pub(super) fn stream(samples: u64, seed: u64) -> Stream {
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

pub(super) fn stream_json(s: &Stream) -> Value {
    json!({
        "start": 1_000_000u64,
        "interval": 1000,
        "frames": s.frames.iter().map(|(f, n, l)| json!([f, n, [l.lineno, l.end_lineno, l.col, l.end_col]])).collect::<Vec<_>>(),
        "ticks": s.ticks.iter().map(|(ts, th)| json!([ts, th.iter().map(|(t, st, stack)| json!([t, st, stack])).collect::<Vec<_>>()])).collect::<Vec<_>>(),
    })
}

/// How our writer compresses.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Zstd {
    None,
    InThread,
    SecondThread,
}

/// Writes the stream with our writer; returns (seconds, bytes).
pub(super) fn ours_write(s: &Stream, zstd: Zstd, ids: bool) -> (f64, Vec<u8>) {
    let cap = WriterCapacity { string_bytes: 1 << 20, strings: 16384, frames: 8192, threads: 16, rle_budget: 16384 };
    let mut storage = VecWriterStorage::new(cap).unwrap();
    let mut out = vec![0u8; 256 << 20];
    let mut ws = vec![0u64; if zstd == Zstd::InThread { workspace_words(compressor_workspace_bytes()) } else { 0 }];
    let mut zbuf = vec![0u8; 128 << 10];
    let start = Instant::now();
    let mut threaded = (zstd == Zstd::SecondThread).then(|| ThreadedCompressor::spawn().unwrap());
    let cfg = WriterConfig::new(1_000_000, 1000);
    let sink = Cursor::new(&mut out[..]);
    let mut w = match (zstd, &mut threaded) {
        (Zstd::SecondThread, Some(t)) => {
            let c: &mut dyn RegionCompressor = t;
            Writer::new(sink, storage.storage().with_zstd(c), cfg.with_compression(Compression::Zstd)).unwrap()
        }
        (Zstd::InThread, _) => Writer::new(
            sink,
            storage.storage().with_zstd(Compressor::new(&mut ws, &mut zbuf).unwrap()),
            cfg.with_compression(Compression::Zstd),
        )
        .unwrap(),
        _ => Writer::new(sink, storage.storage(), cfg).unwrap(),
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
    let n = w.finish().unwrap() as usize;
    let secs = start.elapsed().as_secs_f64();
    out.truncate(n);
    (secs, out)
}

pub(super) fn cpython_bench(args: &[&str]) -> Value {
    let bench = root().join("qemu-tests/oracle/cpython_bench.py").display().to_string();
    let argv = with(python_argv(), &[&bench]);
    let out = Command::new(&argv[0]).args(&argv[1..]).args(args).output().unwrap();
    assert!(out.status.success(), "CPython {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Our reader over a file, in this process (called in a child by `ours_read`).
pub(super) fn read_here(path: &str) {
    let start = Instant::now();
    let mut src = FileSource::open(Path::new(path)).unwrap();
    let meta = Metadata::read(&mut src).unwrap();
    let mut storage = OwnedReaderStorage::for_metadata(&meta, Limits::default()).unwrap();
    let mut r = storage.open_file(src).unwrap();
    while r.next_item().unwrap().is_some() {}
    let secs = start.elapsed().as_secs_f64();
    println!("{}", json!({"seconds": secs, "samples": r.samples_decoded()}));
}

pub(super) fn ours_read(path: &Path) -> Value {
    let out = Command::new(std::env::current_exe().unwrap()).arg("--read").arg(path).output().unwrap();
    assert!(out.status.success(), "our reader on {}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

pub(super) fn best<T>(runs: usize, mut f: impl FnMut() -> (f64, T)) -> (f64, T) {
    let mut best = f();
    for _ in 1..runs {
        let r = f();
        if r.0 < best.0 {
            best = r;
        }
    }
    best
}

pub(super) fn rate(samples: f64, secs: f64) -> String {
    format!("{:.2} M/s", samples / secs / 1e6)
}

pub(super) fn synthetic(samples: u64, dir: &Path) {
    let s = stream(samples, 2026);
    let stream_path = dir.join("stream.json");
    std::fs::write(&stream_path, stream_json(&s).to_string()).unwrap();
    let n = (s.ticks.len() as u64 * THREADS) as f64;
    println!(
        "Synthetic stream: {n} thread samples, {THREADS} threads, stacks 10–40, ~80 % repeats (in-process times)\n"
    );
    println!("| write | CPython 3.15.2 | ours, string API | ours, frame-id API | ours, frame-id API, zstd in a second thread | frame-id / CPython | bytes/sample | same bytes |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut files = Vec::new();
    for (label, zstd) in [("raw", Zstd::None), ("zstd", Zstd::InThread)] {
        let theirs_path = dir.join(format!("cpython-{label}.bin"));
        let compression = if zstd == Zstd::None { "0" } else { "1" };
        let c = cpython_bench(&["write", stream_path.to_str().unwrap(), theirs_path.to_str().unwrap(), compression]);
        let c_secs = c["seconds"].as_f64().unwrap();
        let (s_secs, bytes) = best(3, || ours_write(&s, zstd, false));
        let (i_secs, id_bytes) = best(3, || ours_write(&s, zstd, true));
        let threaded = if zstd == Zstd::None {
            "—".to_owned()
        } else {
            let (t_secs, t_bytes) = best(3, || ours_write(&s, Zstd::SecondThread, true));
            assert!(t_bytes == id_bytes, "the second-thread compressor wrote other bytes");
            format!("{} ({:.1}× CPython)", rate(n, t_secs), c_secs / t_secs)
        };
        let theirs = std::fs::read(&theirs_path).unwrap();
        let ours_path = dir.join(format!("ours-{label}.bin"));
        std::fs::write(&ours_path, &bytes).unwrap();
        println!(
            "| {label} | {} | {} | {} | {threaded} | {:.1}× | {:.2} | {} |",
            rate(n, c_secs),
            rate(n, s_secs),
            rate(n, i_secs),
            c_secs / i_secs,
            bytes.len() as f64 / n,
            if bytes == theirs { "yes" } else { "NO" }
        );
        files.push(ours_path);
    }
    println!("\n| read (synthetic) | samples | file bytes | CPython 3.15.2 | ours | ours / CPython |");
    println!("|---|---|---|---|---|---|");
    for f in &files {
        let c = cpython_bench(&["read", f.to_str().unwrap()]);
        let o = (0..3)
            .map(|_| ours_read(f))
            .min_by(|a, b| a["seconds"].as_f64().partial_cmp(&b["seconds"].as_f64()).unwrap())
            .unwrap();
        let count = c["samples"].as_f64().unwrap();
        assert_eq!(c["samples"], o["samples"], "sample counts differ on {}", f.display());
        let (cs, os) = (c["seconds"].as_f64().unwrap(), o["seconds"].as_f64().unwrap());
        println!(
            "| {} | {count} | {} | {} | {} | {:.1}× |",
            f.file_name().unwrap().to_string_lossy(),
            std::fs::metadata(f).unwrap().len(),
            rate(count, cs),
            rate(count, os),
            cs / os,
        );
    }
}
