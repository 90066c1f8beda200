//! Side by side with the real CPython 3.15.2 (x86_64). Prints Markdown tables.
//!
//! ```text
//! cargo build --release -p tachyon && cargo run --release -p qemu-tests --bin side_by_side [-- --runs N --samples N --out DIR]
//! ```
//!
//! Needs `scripts/oracle.sh`, the `zstd` command (Debian's `zstd`), and the long real
//! profiles: `TACHYON_LONG_PROFILES` (default `target/long-profiles`), recorded by
//! `qemu-tests/oracle/make_real_profiles.sh --long DIR` as root, as the test command does.
//!
//! 1. **Real profiles** (the main tables): whole command against whole command, each in its
//!    own process, wall time (median of `--runs`, default 11 for ours and `zstd`, 3 for
//!    CPython) and peak RSS (`wait4`'s `ru_maxrss`). `tachyon verify` against `python3.15`
//!    replaying the file into a collector that does nothing, and for zstd files against
//!    `zstd -d` of the same sample region (the floor: decompressing without decoding);
//!    `tachyon convert --to collapsed` against `python3.15 -m profiling.sampling replay
//!    --collapsed`, whose outputs must be identical. Output files are removed before each run.
//! 2. **Synthetic stream** (labelled so): CPython's writer (prebuilt `InterpreterInfo`s, only
//!    the write loop timed) and ours in this process, and both readers on the files written.
//! 3. **A large gperftools CPU profile**: the real one the test command records
//!    (`TACHYON_GPERFTOOLS_PROFILES`, default `target/gperftools-profiles`), its records
//!    written again by our writer, cycling, until there are `--records` (default 1,000,000),
//!    with the real maps text; converted to pprof and to collapsed stacks by `tachyon`,
//!    beside `go tool pprof -raw` and google-pprof 2.10 `--collapsed` on the same file, all
//!    symbolising with the moved binaries (`--binary-path`, `PPROF_BINARY_PATH`, the program
//!    argument). Also the real file itself, to show memory follows distinct stacks.
//!
//! 4. **A large MOJO file**: the real wall and full mode files Austin 3.7.0 records during the
//!    test command (`TACHYON_MOJO_PROFILES`, default `target/mojo-profiles`), their samples
//!    written again by our writer, cycling, until there are `--mojo-samples` (default
//!    1,000,000); `--to austin` against austin-python 1.7.1's `mojo2austin`, `--to
//!    speedscope` against its `austin2speedscope` on `mojo2austin`'s text (the virtual
//!    environment of `record.sh`, `TACHYON_AUSTIN_DIR`); the outputs must be identical.
//!
//! `--only tachyon|synthetic|gperftools|mojo|pstats` runs one part.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
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

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

// ---------------------------------------------------------------------------------------
// Whole processes.

/// One process's wall time and peak resident set.
#[derive(Debug, Clone, Copy)]
struct Measured {
    seconds: f64,
    rss_kb: u64,
}

/// Runs `argv` to its end; its wall time and `ru_maxrss`. Called in the runner process only
/// (see [`Runner`]).
// wait4 below reaps the child (std's `wait` cannot report its rusage), which clippy cannot see.
#[allow(clippy::zombie_processes)]
fn run_once(argv: &[String]) -> Measured {
    let start = Instant::now();
    let child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let child = child.unwrap_or_else(|e| panic!("{}: {e}", argv[0]));
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value; wait4 fills it for the child we spawned.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our child's; status and usage are valid for writes.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let seconds = start.elapsed().as_secs_f64();
    assert_eq!(waited, pid, "wait4");
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "{argv:?} failed");
    Measured { seconds, rss_kb: usage.ru_maxrss as u64 }
}

/// Starts the measured commands from a small process of its own. Linux carries a parent's
/// peak RSS over `fork` and `exec` into the child's `ru_maxrss`, and this process grows to
/// hundreds of megabytes; the runner, started first thing, stays at a few.
struct Runner {
    child: std::process::Child,
    input: std::process::ChildStdin,
    output: std::io::BufReader<std::process::ChildStdout>,
}

impl Runner {
    fn start() -> Runner {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .arg("--runner")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let input = child.stdin.take().unwrap();
        let output = std::io::BufReader::new(child.stdout.take().unwrap());
        Runner { child, input, output }
    }

    /// Ends the runner: its input closed, it returns from its loop; then it is reaped.
    fn finish(self) {
        let Runner { mut child, input, output } = self;
        drop(input);
        drop(output);
        let status = child.wait().expect("the runner");
        assert!(status.success(), "the runner failed: {status}");
    }

    /// One run of `argv`, `remove` deleted first.
    fn run(&mut self, argv: &[String], remove: Option<&Path>) -> Measured {
        use std::io::{BufRead, Write};
        let request = json!({"argv": argv, "remove": remove.map(|p| p.display().to_string())});
        writeln!(self.input, "{request}").unwrap();
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).expect("the runner's answer");
        Measured { seconds: v["seconds"].as_f64().unwrap(), rss_kb: v["rss_kb"].as_u64().unwrap() }
    }

    /// The median wall time and the largest peak RSS of `runs` runs.
    fn median(&mut self, runs: usize, argv: &[String], remove: Option<&Path>) -> Measured {
        let mut all: Vec<Measured> = (0..runs).map(|_| self.run(argv, remove)).collect();
        all.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
        Measured { seconds: all[runs / 2].seconds, rss_kb: all.iter().map(|m| m.rss_kb).max().unwrap_or(0) }
    }
}

/// The runner's side: one JSON request a line, one JSON answer a line.
fn runner_main() {
    use std::io::{BufRead, Write};
    let mut out = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if let Some(path) = v["remove"].as_str() {
            let _ = std::fs::remove_file(path);
        }
        let argv: Vec<String> = v["argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_owned()).collect();
        let m = run_once(&argv);
        writeln!(out, "{}", json!({"seconds": m.seconds, "rss_kb": m.rss_kb})).unwrap();
        out.flush().unwrap();
    }
}

/// The oracle's python3.15, started directly (the wrapper script's shell is not timed).
fn python_argv() -> Vec<String> {
    let home = std::env::var_os("HOME").expect("HOME");
    let dir = std::env::var_os("TACHYON_ORACLE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(home).join(".cache/tachyon-oracle"));
    assert!(dir.join("ready").exists(), "CPython oracle not set up: run scripts/oracle.sh first");
    let r = dir.join("root-amd64");
    let p = |rel: &str| r.join(rel).display().to_string();
    vec![
        p("usr/lib64/ld-linux-x86-64.so.2"),
        "--library-path".into(),
        p("usr/lib/x86_64-linux-gnu"),
        p("usr/bin/python3.15"),
    ]
}

fn tachyon_argv() -> Vec<String> {
    let exe = std::env::current_exe().unwrap().with_file_name("tachyon");
    assert!(exe.exists(), "build the command first: cargo build --release -p tachyon");
    vec![exe.display().to_string()]
}

/// `argv` followed by `more`.
fn with(mut argv: Vec<String>, more: &[&str]) -> Vec<String> {
    argv.extend(more.iter().map(|s| s.to_string()));
    argv
}

fn ms(m: &Measured) -> String {
    if m.seconds < 1.0 {
        format!("{:.1} ms", m.seconds * 1e3)
    } else {
        format!("{:.2} s", m.seconds)
    }
}

fn mb(kb: u64) -> String {
    format!("{:.0} MB", kb as f64 / 1024.0)
}

/// Samples and records of a file, read by our reader in this process.
fn counts(file: &Path) -> (u64, u64, u64) {
    let mut src = FileSource::open(file).unwrap();
    let meta = Metadata::read(&mut src).unwrap();
    let mut storage = OwnedReaderStorage::for_metadata(&meta, Limits::default()).unwrap();
    let mut r = storage.open(src).unwrap();
    while r.next_record().unwrap().is_some() {}
    let c = r.record_counts();
    (r.samples_decoded(), c.repeat, c.full + c.suffix + c.pop_push)
}

/// The sample region of a zstd file, alone, for `zstd -d`.
fn region(file: &Path, out: &Path) {
    let bytes = std::fs::read(file).unwrap();
    let meta = Metadata::read(&mut Cursor::new(&bytes[..])).unwrap();
    std::fs::write(out, &bytes[64..meta.header.string_table_offset as usize]).unwrap();
}

#[derive(Default)]
struct Goals {
    verify_raw: Vec<f64>,
    verify_zstd: Vec<f64>,
    collapsed: Vec<f64>,
    rss: Vec<u64>,
    samples: Vec<u64>,
}

fn real_profiles(runner: &mut Runner, dir: &Path, work: &Path, runs: usize, goals: &mut Goals) {
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
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let f = file.to_str().unwrap().to_owned();
        let (samples, repeats, others) = counts(file);
        let bytes = std::fs::metadata(file).unwrap().len();
        let compressed = Metadata::read(&mut FileSource::open(file).unwrap()).unwrap().is_compressed();
        let bench = root().join("qemu-tests/oracle/cpython_bench.py").display().to_string();
        let cp = runner.median(cpython_runs, &with(python_argv(), &[&bench, "read", &f]), None);
        let ours = runner.median(runs, &with(tachyon_argv(), &["verify", "--quiet", &f]), None);
        let speedup = cp.seconds / ours.seconds;
        let floor = if compressed {
            let zst = work.join(format!("{name}.region.zst"));
            region(file, &zst);
            let zstd = ["zstd", "-d", "-q", "-c"].map(String::from).to_vec();
            let z = runner.median(runs, &with(zstd, &[zst.to_str().unwrap()]), None);
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

        let theirs_out = work.join(format!("{name}.cpython.collapsed"));
        let ours_out = work.join(format!("{name}.ours.collapsed"));
        let (to, oo) = (theirs_out.display().to_string(), ours_out.display().to_string());
        let replay = ["-m", "profiling.sampling", "replay", "--collapsed", "-o", &to, &f];
        let cpc = runner.median(cpython_runs, &with(python_argv(), &replay), Some(&theirs_out));
        let convert = ["convert", "--quiet", &f, "--to", "collapsed", "-o", &oo];
        let oc = runner.median(runs, &with(tachyon_argv(), &convert), Some(&ours_out));
        let same = std::fs::read(&theirs_out).unwrap() == std::fs::read(&ours_out).unwrap();
        assert!(same, "{name}: collapsed outputs differ");
        let out_bytes = std::fs::metadata(&ours_out).unwrap().len();
        goals.collapsed.push(cpc.seconds / oc.seconds);
        collapsed_rows.push(format!(
            "| {name} | {samples} | {out_bytes} | {} | {} | {:.1}× | {} | {} / {} |",
            ms(&cpc),
            ms(&oc),
            cpc.seconds / oc.seconds,
            if same { "yes" } else { "NO" },
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
}

// ---------------------------------------------------------------------------------------
// The synthetic stream.

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

/// How our writer compresses.
#[derive(Clone, Copy, PartialEq)]
enum Zstd {
    None,
    InThread,
    SecondThread,
}

/// Writes the stream with our writer; returns (seconds, bytes).
fn ours_write(s: &Stream, zstd: Zstd, ids: bool) -> (f64, Vec<u8>) {
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
    let n = w.finalize().unwrap() as usize;
    let secs = start.elapsed().as_secs_f64();
    out.truncate(n);
    (secs, out)
}

fn cpython_bench(args: &[&str]) -> Value {
    let bench = root().join("qemu-tests/oracle/cpython_bench.py").display().to_string();
    let argv = with(python_argv(), &[&bench]);
    let out = Command::new(&argv[0]).args(&argv[1..]).args(args).output().unwrap();
    assert!(out.status.success(), "CPython {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Our reader over a file, in this process (called in a child by `ours_read`).
fn read_here(path: &str) {
    let start = Instant::now();
    let mut src = FileSource::open(Path::new(path)).unwrap();
    let meta = Metadata::read(&mut src).unwrap();
    let mut storage = OwnedReaderStorage::for_metadata(&meta, Limits::default()).unwrap();
    let mut r = storage.open_file(src).unwrap();
    while r.next_record().unwrap().is_some() {}
    let secs = start.elapsed().as_secs_f64();
    println!("{}", json!({"seconds": secs, "samples": r.samples_decoded()}));
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

fn synthetic(samples: u64, dir: &Path) {
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

// ---------------------------------------------------------------------------------------
// gperftools.

/// Writes `records` records cycling through the real file's (counts and stacks as read), in
/// its slot width and byte order, then libprofiler's trailer and the real maps text.
fn big_gperftools(real: &Path, out: &Path, records: usize) {
    use tachyon_core::gperftools::{End, Header, Item, Reader, Writer as GWriter, LARGEST_RECORD_WINDOW};
    let bytes = std::fs::read(real).unwrap();
    let mut window = vec![0u8; LARGEST_RECORD_WINDOW];
    let mut reader = Reader::open(Cursor::new(&bytes[..]), &mut window).unwrap();
    let header: Header = *reader.header();
    let mut read: Vec<(u64, Vec<u64>)> = Vec::new();
    let mut end = None;
    while let Some(item) = reader.next_item().unwrap() {
        match item {
            Item::Record(r) => read.push((r.count, r.pcs.iter().collect())),
            Item::End(e) => end = Some(e),
            Item::ExtraHeaderWord(_) => {}
        }
    }
    let word = reader.word();
    let skip = end.and_then(|e: End| e.text_skip(word)).unwrap() as usize;
    let mut tail = Vec::new();
    let mut rest = reader.into_tail();
    let mut chunk = [0u8; 4096];
    loop {
        let n = rest.read(&mut chunk).unwrap();
        if n == 0 {
            break;
        }
        tail.extend_from_slice(&chunk[..n]);
    }
    let mut staging = vec![0u8; 4096];
    let sink = tachyon::file::create(out).unwrap();
    let mut w = GWriter::with_format(sink, &mut staging, header.word, header.endian, &header).unwrap();
    for (count, pcs) in read.iter().cycle().take(records) {
        w.write_record(*count, pcs).unwrap();
    }
    w.finish(&tail[skip..]).unwrap();
    w.into_inner().0.into_inner().unwrap();
}

fn gperftools_profiles(runner: &mut Runner, work: &Path, records: usize, runs: usize) {
    let recorded = std::env::var_os("TACHYON_GPERFTOOLS_PROFILES")
        .map_or_else(|| root().join("target/gperftools-profiles"), PathBuf::from)
        .join("x86_64");
    let real = recorded.join("workload.prof");
    assert!(real.exists(), "{}: record it with qemu-tests/oracle/gperftools/record.sh", real.display());
    let bins = recorded.join("bins");
    let big = work.join("big.prof");
    big_gperftools(&real, &big, records);
    println!(
        "A gperftools CPU profile of {records} records ({} bytes) written by our writer from the real one          libprofiler recorded ({} bytes), symbolised by every tool:
",
        std::fs::metadata(&big).unwrap().len(),
        std::fs::metadata(&real).unwrap().len()
    );
    println!("| file | command | wall | peak RSS | ÷ ours |");
    println!("|---|---|---|---|---|");
    let slow_runs = runs.min(3);
    for file in [&big, &real] {
        let f = file.display().to_string();
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let pb = work.join("out.pb.gz");
        let folded = work.join("out.collapsed");
        let bin_path = bins.display().to_string();
        let ours_pprof = with(
            tachyon_argv(),
            &["convert", "--quiet", &f, "--to", "pprof", "--binary-path", &bin_path, "-o", pb.to_str().unwrap()],
        );
        let ours_collapsed = with(
            tachyon_argv(),
            &[
                "convert",
                "--quiet",
                &f,
                "--to",
                "collapsed",
                "--binary-path",
                &bin_path,
                "-o",
                folded.to_str().unwrap(),
            ],
        );
        let pprof_env = format!("PPROF_BINARY_PATH={bin_path}");
        let go = ["env", &pprof_env, "go", "tool", "pprof", "-raw", &f].map(String::from).to_vec();
        let program = bins.join("workload").display().to_string();
        let perl = ["google-pprof", "--collapsed", &program, &f].map(String::from).to_vec();
        let op = runner.median(runs, &ours_pprof, Some(&pb));
        let oc = runner.median(runs, &ours_collapsed, Some(&folded));
        let g = runner.median(slow_runs, &go, None);
        let p = runner.median(slow_runs, &perl, None);
        let row = |label: &str, m: &Measured, ours: &Measured| {
            println!("| {name} | {label} | {} | {} | {:.1}× |", ms(m), mb(m.rss_kb), m.seconds / ours.seconds);
        };
        row("`tachyon convert --to pprof`", &op, &op);
        row("`go tool pprof -raw`", &g, &op);
        row("`tachyon convert --to collapsed`", &oc, &oc);
        row("google-pprof `--collapsed`", &p, &oc);
        let faster = g.seconds.min(p.seconds);
        println!(
            "| {name} | goal: ≥ 20× the faster real tool ({}) | pprof {:.1}×, collapsed {:.1}× | | |",
            ms(&Measured { seconds: faster, rss_kb: 0 }),
            faster / op.seconds,
            faster / oc.seconds
        );
    }
    println!();
}

/// A MOJO file of at least `samples` samples made by our writer from the real one `real`:
/// its events once (metadata, definitions, samples), then its samples' events again (no
/// definitions: the keys are defined already), cycling, then its closing metadata. Returns
/// the samples written.
fn big_mojo(real: &Path, out: &Path, samples: u64) -> u64 {
    use tachyon_core::mojo::{Event, Reader, Writer as MWriter};
    let bytes = std::fs::read(real).unwrap();
    let mut window = vec![0u8; 1 << 20];
    let mut reader = Reader::open(Cursor::new(&bytes[..]), &mut window).unwrap();
    let version = reader.version();
    let mut all: Vec<Event<Vec<u8>>> = Vec::new();
    while let Some((_, e)) = reader.next_event().unwrap() {
        all.push(e.map(<[u8]>::to_vec));
    }
    // The closing metadata: after the last sample's events.
    let tail_start = all.iter().rposition(|e| !matches!(e, Event::Metadata { .. })).map_or(0, |i| i + 1);
    let first_stack = all.iter().position(|e| matches!(e, Event::Stack { .. })).expect("a sample");
    let body: Vec<&Event<Vec<u8>>> = all[first_stack..tail_start]
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::Stack { .. }
                    | Event::FrameRef { .. }
                    | Event::FrameInvalid
                    | Event::FrameKernel { .. }
                    | Event::Gc
                    | Event::Idle
                    | Event::Time(_)
                    | Event::Memory(_)
            )
        })
        .collect();
    let per_cycle = body.iter().filter(|e| matches!(e, Event::Stack { .. })).count() as u64;
    let mut staging = vec![0u8; 1 << 20];
    let mut file = std::io::BufWriter::new(std::fs::File::create(out).unwrap());
    let mut w = MWriter::new(tachyon::memory::IoSink(&mut file), &mut staging, version).unwrap();
    let mut written = per_cycle;
    for e in &all[..tail_start] {
        w.write(&e.as_bytes()).unwrap();
    }
    while written < samples {
        for e in &body {
            w.write(&e.as_bytes()).unwrap();
        }
        written += per_cycle;
    }
    for e in &all[tail_start..] {
        w.write(&e.as_bytes()).unwrap();
    }
    w.flush().unwrap();
    written
}

/// Austin's converters on a large MOJO file beside ours: `mojo2austin` against `--to austin`,
/// `austin2speedscope` (on `mojo2austin`'s text, as Austin's tools chain them) against `--to
/// speedscope` of the MOJO file; the outputs must be identical. Also the real file itself, to
/// show our memory does not follow the samples.
fn mojo_profiles(runner: &mut Runner, work: &Path, samples: u64, runs: usize) {
    let recorded =
        std::env::var_os("TACHYON_MOJO_PROFILES").map_or_else(|| root().join("target/mojo-profiles"), PathBuf::from);
    let austin = std::env::var_os("TACHYON_AUSTIN_DIR")
        .map_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/tachyon-austin"), PathBuf::from);
    let tool = |name: &str| austin.join("austin-3.7/bin").join(name).display().to_string();
    let slow_runs = runs.min(3);
    println!("| file | samples | bytes | command | wall | peak RSS | ÷ ours | same output |");
    println!("|---|---|---|---|---|---|---|---|");
    for mode in ["wall", "full"] {
        let real = recorded.join(format!("{mode}.mojo"));
        assert!(real.exists(), "{}: record it with qemu-tests/oracle/austin/record.sh", real.display());
        let big = work.join(format!("big-{mode}.mojo"));
        let n = big_mojo(&real, &big, samples);
        for (file, n) in [(&big, n), (&real, 0)] {
            let f = file.display().to_string();
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            let n = if n == 0 {
                tachyon::mojo::info(FileSource::open(file).unwrap(), 0).unwrap()["samples"].as_u64().unwrap()
            } else {
                n
            };
            let bytes = std::fs::metadata(file).unwrap().len();
            let (ours_text, theirs_text) = (work.join("ours.austin"), work.join(format!("{name}.austin")));
            let (ours_json, theirs_json) = (work.join("ours.json"), work.join("theirs.json"));
            let oa = runner.median(
                runs,
                &with(tachyon_argv(), &["convert", "--quiet", &f, "--to", "austin", "-o", ours_text.to_str().unwrap()]),
                Some(&ours_text),
            );
            let ta = runner.median(
                slow_runs,
                &[tool("mojo2austin"), f.clone(), theirs_text.display().to_string()],
                Some(&theirs_text),
            );
            // austin2speedscope names its JSON after its input: ours gets the same name.
            let os = runner.median(
                runs,
                &with(
                    tachyon_argv(),
                    &["convert", "--quiet", &f, "--to", "speedscope", "-o", ours_json.to_str().unwrap()],
                ),
                Some(&ours_json),
            );
            let ts = runner.median(
                slow_runs,
                &[tool("austin2speedscope"), theirs_text.display().to_string(), theirs_json.display().to_string()],
                Some(&theirs_json),
            );
            let same_text = std::fs::read(&ours_text).unwrap() == std::fs::read(&theirs_text).unwrap();
            let ours_doc: Value = serde_json::from_slice(&std::fs::read(&ours_json).unwrap()).unwrap();
            let mut theirs_doc: Value = serde_json::from_slice(&std::fs::read(&theirs_json).unwrap()).unwrap();
            theirs_doc["name"] = ours_doc["name"].clone();
            let same_json = ours_doc == theirs_doc;
            assert!(same_text && same_json, "{name}: outputs differ (text {same_text}, speedscope {same_json})");
            let row = |label: &str, m: &Measured, ours: &Measured| {
                println!(
                    "| {name} | {n} | {bytes} | {label} | {} | {} | {:.1}× | yes |",
                    ms(m),
                    mb(m.rss_kb),
                    m.seconds / ours.seconds
                );
            };
            row("`tachyon convert --to austin`", &oa, &oa);
            row("`mojo2austin`", &ta, &oa);
            row("`tachyon convert --to speedscope`", &os, &os);
            row("`austin2speedscope` (on the text)", &ts, &os);
            row(
                "`mojo2austin` + `austin2speedscope`",
                &Measured { seconds: ta.seconds + ts.seconds, rss_kb: ta.rss_kb.max(ts.rss_kb) },
                &os,
            );
        }
    }
    println!();
}

/// A pstats file of at least `functions` functions made by our writer from a real cProfile
/// file: its entries copied under new directories (`copyN/`), callers pointing into the same
/// copy, until there are enough.
fn big_pstats(real: &Path, out: &Path, functions: usize) -> usize {
    use tachyon::pstats::{load, write, Entry, Key, Name, NameId, Stats};
    let stats = load(&std::fs::read(real).unwrap()).unwrap();
    let mut big = Stats { names: Vec::new(), entries: Vec::new(), sampled: false, total_tt: None };
    let mut ids: std::collections::HashMap<String, NameId> = std::collections::HashMap::new();
    let mut intern = |names: &mut Vec<Name>, text: String| {
        *ids.entry(text.clone()).or_insert_with(|| {
            names.push(Name::Str(text.into()));
            NameId(names.len() as u32 - 1)
        })
    };
    let text = |id: NameId| stats.name(id).to_string();
    let mut copy = 0;
    while big.entries.len() < functions {
        // Files under a directory of the copy's; built-ins keep their file "~" and take the
        // copy's number in their names.
        let mut rename = |names: &mut Vec<Name>, k: &Key| {
            let (file, name) = (text(k.filename), text(k.name));
            let (file, name) =
                if file == "~" { (file, format!("{name}#{copy}")) } else { (format!("copy{copy}/{file}"), name) };
            Key { filename: intern(names, file), line: k.line, name: intern(names, name) }
        };
        for e in &stats.entries {
            let key = rename(&mut big.names, &e.key);
            let callers = e.callers.iter().map(|(k, c)| (rename(&mut big.names, k), c.clone())).collect();
            big.entries.push(Entry { key, callers, ..e.clone() });
        }
        copy += 1;
    }
    let mut bytes = Vec::new();
    write(&big, false, &mut bytes).unwrap();
    std::fs::write(out, bytes).unwrap();
    big.entries.len()
}

/// pstats: printing the cumulative table and drawing the call graph of a large file, beside
/// Python 3.11's pstats and gprof2dot.
fn pstats_file(runner: &mut Runner, work: &Path, functions: usize, runs: usize) {
    let recorded = std::env::var_os("TACHYON_PSTATS_PROFILES")
        .map_or_else(|| root().join("target/pstats-profiles"), PathBuf::from);
    let real = recorded.join("c311.pstats");
    assert!(real.exists(), "{}: record it with qemu-tests/oracle/pstats/record.sh", real.display());
    let tools = std::env::var_os("TACHYON_TOOLS_DIR")
        .map_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/tachyon-tools"), PathBuf::from);
    assert!(tools.join("gprof2dot.py").exists(), "run scripts/viewer-tools.sh first (gprof2dot)");
    let big = work.join("big.pstats");
    let n = big_pstats(&real, &big, functions);
    let f = big.display().to_string();
    let bytes = std::fs::metadata(&big).unwrap().len();
    let slow_runs = runs.min(3);
    let (ours_text, theirs_text) = (work.join("ours.pstats.txt"), work.join("theirs.pstats.txt"));
    let (ours_dot, theirs_dot) = (work.join("ours.dot"), work.join("theirs.dot"));
    let python = "/usr/bin/python3.11".to_string();
    let print = "import pstats, sys; pstats.Stats(sys.argv[1], stream=open(sys.argv[2], 'w')).sort_stats('cumulative').print_stats()";
    let ot = runner.median(
        runs,
        &with(
            tachyon_argv(),
            &["convert", &f, "--to", "pstats-text", "--sort", "cumulative", "-o", ours_text.to_str().unwrap()],
        ),
        Some(&ours_text),
    );
    let tt = runner.median(
        slow_runs,
        &[python.clone(), "-c".into(), print.into(), f.clone(), theirs_text.display().to_string()],
        Some(&theirs_text),
    );
    let od = runner.median(
        runs,
        &with(tachyon_argv(), &["convert", &f, "--to", "dot", "-o", ours_dot.to_str().unwrap()]),
        Some(&ours_dot),
    );
    let td = runner.median(
        slow_runs,
        &[
            python,
            tools.join("gprof2dot.py").display().to_string(),
            "-f".into(),
            "pstats".into(),
            f.clone(),
            "-o".into(),
            theirs_dot.display().to_string(),
        ],
        Some(&theirs_dot),
    );
    let same_text = std::fs::read(&ours_text).unwrap() == std::fs::read(&theirs_text).unwrap();
    let same_dot = std::fs::read(&ours_dot).unwrap() == std::fs::read(&theirs_dot).unwrap();
    assert!(same_text && same_dot, "pstats outputs differ (text {same_text}, dot {same_dot})");
    println!("| file | functions | bytes | command | wall | peak RSS | ÷ ours | same output |");
    println!("|---|---|---|---|---|---|---|---|");
    let row = |label: &str, m: &Measured, ours: &Measured| {
        println!(
            "| big.pstats | {n} | {bytes} | {label} | {} | {} | {:.1}× | yes |",
            ms(m),
            mb(m.rss_kb),
            m.seconds / ours.seconds
        );
    };
    row("`tachyon convert --to pstats-text --sort cumulative`", &ot, &ot);
    row("Python 3.11 `Stats(f).sort_stats('cumulative').print_stats()`", &tt, &ot);
    row("`tachyon convert --to dot`", &od, &od);
    row("`gprof2dot -f pstats` (Python 3.11)", &td, &od);
    println!();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--read") {
        return read_here(&args[i + 1]);
    }
    if args.iter().any(|a| a == "--runner") {
        return runner_main();
    }
    let mut runner = Runner::start();
    let arg = |name: &str| args.iter().position(|a| a == name).map(|i| args[i + 1].clone());
    let samples: u64 = arg("--samples").map_or(500_000, |s| s.parse().unwrap());
    let runs: usize = arg("--runs").map_or(11, |s| s.parse().unwrap());
    let dir = PathBuf::from(arg("--out").unwrap_or_else(|| "target/side-by-side".into()));
    std::fs::create_dir_all(&dir).unwrap();
    let long =
        std::env::var_os("TACHYON_LONG_PROFILES").map_or_else(|| root().join("target/long-profiles"), PathBuf::from);
    let only = arg("--only");
    let part = |name: &str| only.as_deref().map_or(true, |o| o == name);
    if part("mojo") {
        let mojo_samples: u64 = arg("--mojo-samples").map_or(1_000_000, |s| s.parse().unwrap());
        mojo_profiles(&mut runner, &dir, mojo_samples, runs);
    }
    if part("pstats") {
        let functions: usize = arg("--functions").map_or(100_000, |s| s.parse().unwrap());
        pstats_file(&mut runner, &dir, functions, runs);
    }
    if part("gperftools") {
        let records: usize = arg("--records").map_or(1_000_000, |s| s.parse().unwrap());
        gperftools_profiles(&mut runner, &dir, records, runs);
    }
    if !part("tachyon") {
        runner.finish();
        if part("synthetic") {
            synthetic(samples, &dir);
        }
        return;
    }

    println!("Real profiles written by CPython 3.15.2's sampler (whole commands):\n");
    let mut goals = Goals::default();
    real_profiles(&mut runner, &long, &dir, runs, &mut goals);
    runner.finish();
    let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    println!();
    let low_high = |v: &[u64]| (v.iter().copied().min().unwrap_or(0), v.iter().copied().max().unwrap_or(0));
    let (rss, span) = (low_high(&goals.rss), low_high(&goals.samples));
    println!(
        "Goals: `verify` ≥ 15× CPython on raw files: lowest {:.1}×; ≤ 1.3× `zstd -d` on zstd files: highest {:.2}×; `convert --to collapsed` ≥ 20× CPython: lowest {:.1}×; `verify`'s peak RSS {}–{} over {}–{} samples.\n",
        min(&goals.verify_raw),
        max(&goals.verify_zstd),
        min(&goals.collapsed),
        mb(rss.0),
        mb(rss.1),
        span.0,
        span.1
    );
    if part("synthetic") {
        synthetic(samples, &dir);
    }
}
