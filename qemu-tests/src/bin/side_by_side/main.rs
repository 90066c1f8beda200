//! Side by side with the real CPython 3.15.2 (x86_64). Prints Markdown tables.
//!
//! ```text
//! cargo build --release -p tachyon && cargo run --release -p qemu-tests --features tools --bin side_by_side [-- --runs N --samples N --out DIR]
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
//!    --collapsed`, whose outputs must be identical; `tachyon convert --to flamegraph-html`
//!    against `replay --flamegraph` (time and page size; the trees are compared node for node
//!    by the test command) and `--to heatmap` against `replay --heatmap`. Output files are removed before each run.
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
//! 5. **The capture ring** (`capture`): a push per sample for 8-, 32- and 128-frame stacks, and
//!    the drain's samples a second into a writer (in this process; `scripts/capture-bench.sh`
//!    adds the whole-run overheads of real workloads).
//!
//! 6. **Large files** (`large`): CPython 3.15.2's `BinaryWriter` fed the samples of committed
//!    real recordings 20 and 2,500 times over (`qemu-tests/oracle/make_large_profiles.py`,
//!    written once into `--out`), `tachyon verify` against CPython's no-op replay and
//!    `zstd -d`, `convert --to collapsed` against `replay --collapsed`, with MB/s and samples/s.
//!
//! `--only tachyon|synthetic|gperftools|mojo|pstats|capture|large` runs one part; `--seconds S`
//! times each of the capture ring's figures over S seconds of batches (1 by default).

mod capture;
mod cpython;
mod gperftools;
mod large;
mod mojo;
mod pstats;
mod runner;

use std::path::PathBuf;

use cpython::{read_here, real_profiles, synthetic, Goals};
use gperftools::gperftools_profiles;
use mojo::mojo_profiles;
use pstats::pstats_file;
use runner::*;
use tachyon_test_kit::fixtures::root;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--read") {
        return read_here(&args[i + 1]);
    }
    if args.iter().any(|a| a == "--runner") {
        return runner_main();
    }
    let arg = |name: &str| args.iter().position(|a| a == name).map(|i| args[i + 1].clone());
    let only = arg("--only");
    let part = |name: &str| only.as_deref().map_or(true, |o| o == name);
    if part("capture") {
        let seconds: f64 = arg("--seconds").map_or(1.0, |s| s.parse().unwrap());
        capture::capture_costs(std::time::Duration::from_secs_f64(seconds));
        if only.is_some() {
            return;
        }
    }
    let mut runner = Runner::start();
    let samples: u64 = arg("--samples").map_or(500_000, |s| s.parse().unwrap());
    let runs: usize = arg("--runs").map_or(11, |s| s.parse().unwrap());
    let dir = PathBuf::from(arg("--out").unwrap_or_else(|| "target/side-by-side".into()));
    std::fs::create_dir_all(&dir).unwrap();
    let long =
        std::env::var_os("TACHYON_LONG_PROFILES").map_or_else(|| root().join("target/long-profiles"), PathBuf::from);

    if part("large") {
        large::large_profiles(&mut runner, &dir, runs);
    }
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
        "Goals: `verify` ≥ 15× CPython on raw files: lowest {:.1}×; ≤ 1.3× `zstd -d` on zstd files: highest {:.2}×; `convert --to collapsed` ≥ 20× CPython: lowest {:.1}×; `--to flamegraph-html` ≥ 20× CPython's `--flamegraph`: lowest {:.1}×; `--to heatmap` ≥ 20× CPython's `--heatmap`: lowest {:.1}×; `verify`'s peak RSS {}–{} over {}–{} samples.\n",
        min(&goals.verify_raw),
        max(&goals.verify_zstd),
        min(&goals.collapsed),
        min(&goals.flamegraph),
        min(&goals.heatmap),
        mb(rss.0),
        mb(rss.1),
        span.0,
        span.1
    );
    if part("synthetic") {
        synthetic(samples, &dir);
    }
}
