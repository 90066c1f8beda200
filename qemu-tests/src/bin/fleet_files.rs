//! A fleet of profiles made of a few real ones, for the fleet-scale merge test and benchmark
//! (scripts/fleet.sh, docs/fleet.md).
//!
//! `fleet_files OUT_DIR COUNT PROFILE…` writes COUNT Tachyon files into OUT_DIR,
//! `fleet-00000.pyb` …, the i-th a copy of PROFILE number `i % n` re-encoded by this crate's
//! writer (the hub's Tachyon output) with its thread ids raised by `(i + 1) << 20` and its
//! times by `i` × 10 s: what a fleet of processes running the same code would send.
//! `fleet_files --pprof OUT_DIR COUNT PROFILE…` writes the same profiles as gzipped pprof,
//! `fleet-00000.pb.gz` … (the fleet benchmark's input: one process instead of a `tachyon
//! convert` per file).
//!
//! `fleet_files --rotate PREFIX PERIODS PERIOD_MS` is a capture-path writer in real time, for
//! the follower's test (`python/tests/test_follow.py`): a journaled rotating writer
//! (`tachyon::tachyon::rotate`) gets a sample every 10 ms on two threads for PERIODS periods
//! of PERIOD_MS each, flushed every 100 ms of samples (its flush policy), so that its live period is a stream and each
//! finished one is replaced by its Tachyon file; every sample of period k has the leaf
//! function `period_k`, so each file's stacks are its own.

use std::path::PathBuf;

use tachyon::model::{Call, Collector, FrameTable, Source, SourceInfo};
use tachyon::output::{ConvertError, Destination, Output};
use tachyon::profile::{Profile, SourceOptions};

/// `inner` with thread ids and times moved.
struct Shifted<S> {
    inner: S,
    info: SourceInfo,
    tid: u64,
    us: u64,
}

struct ShiftCalls<'a> {
    out: &'a mut dyn Collector,
    tid: u64,
    us: u64,
    times: Vec<u64>,
}

impl Collector for ShiftCalls<'_> {
    fn collect(&mut self, frames: &FrameTable, call: &Call<'_>) {
        self.times.clear();
        self.times.extend(call.timestamps_us().iter().map(|t| t + self.us));
        let times = match call.times {
            tachyon::model::Times::Stamped(_) => tachyon::model::Times::Stamped(&self.times),
            counted => counted,
        };
        self.out.collect(frames, &Call { times, thread_id: call.thread_id + self.tid, ..*call });
    }
}

impl<S: Source> Source for Shifted<S> {
    type Error = S::Error;

    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn frames(&self) -> &FrameTable {
        self.inner.frames()
    }

    fn prepare(&mut self, output: &Output) -> Result<(), Self::Error> {
        self.inner.prepare(output)?;
        self.info = self.inner.info().clone();
        self.info.start_time_us += self.us;
        Ok(())
    }

    fn replay(&mut self, collector: &mut dyn Collector, progress: &mut dyn FnMut(u64)) -> Result<u64, Self::Error> {
        let mut calls = ShiftCalls { out: collector, tid: self.tid, us: self.us, times: Vec::new() };
        self.inner.replay(&mut calls, progress)
    }
}

/// `--rotate PREFIX PERIODS PERIOD_MS` (see the module's docs).
fn rotate(prefix: &str, periods: u64, period_ms: u64) {
    use tachyon::tachyon::rotate::{RotatingWriter, Rotation};
    use tachyon_core::capture::Taken;
    use tachyon_core::storage::{VecWriterStorage, WriterCapacity};
    use tachyon_core::transport::FlushPolicy;
    use tachyon_core::{Frame, NativeEndian, WriterConfig};

    let capacity = WriterCapacity { string_bytes: 1 << 16, strings: 4096, frames: 4096, threads: 8, rle_budget: 16384 };
    let mut storage = VecWriterStorage::new(capacity).expect("storage");
    let mut scratch = vec![0u8; 1 << 16];
    let clock = std::time::Instant::now();
    let start_us = 1_000_000;
    let every_us = period_ms * 1000;
    let rotation = Rotation { every_us, every_bytes: 0 };
    let journal = Some((&mut scratch[..], FlushPolicy { every_samples: 0, every_us: 100_000 }));
    let mut w = RotatingWriter::create(
        std::path::Path::new(prefix),
        storage.storage(),
        WriterConfig::new(start_us, 10_000),
        NativeEndian::default(),
        rotation,
        journal,
    )
    .expect("the first period");
    let end_us = start_us + periods * every_us;
    let mut ts = start_us;
    while ts < end_us {
        // Real time: the follower sees the live period grow and each one end.
        let due = std::time::Duration::from_micros(ts - start_us);
        if let Some(wait) = due.checked_sub(clock.elapsed()) {
            std::thread::sleep(wait);
        }
        let leaf = format!("period_{}", (ts - start_us) / every_us);
        for thread in [1, 2] {
            let taken = Taken { timestamp_us: ts, interpreter_id: 0, thread_id: thread, status: 0 };
            let frames = [Frame::new(b"rotating.py", leaf.as_bytes()), Frame::new(b"rotating.py", b"main")];
            w.write_thread_sample(taken, frames).expect("a sample");
        }
        ts += 10_000;
    }
    w.finish().expect("the last period");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, prefix, periods, period_ms] = &args[..] {
        if flag == "--rotate" {
            rotate(prefix, periods.parse().expect("PERIODS"), period_ms.parse().expect("PERIOD_MS"));
            return;
        }
    }
    let pprof = args.first().is_some_and(|a| a == "--pprof");
    let [out, count, inputs @ ..] = &args[usize::from(pprof)..] else {
        eprintln!(
            "usage: fleet_files [--pprof] OUT_DIR COUNT PROFILE... | fleet_files --rotate PREFIX PERIODS PERIOD_MS"
        );
        std::process::exit(2);
    };
    let count: u64 = count.parse().expect("COUNT");
    assert!(!inputs.is_empty(), "no PROFILE");
    let out = PathBuf::from(out);
    std::fs::create_dir_all(&out).expect("OUT_DIR");
    let mut profiles: Vec<Profile> =
        inputs.iter().map(|p| Profile::open(std::path::Path::new(p)).expect("a profile")).collect();
    let options = SourceOptions { replayable: true, symbolize: None, ..SourceOptions::default() };
    for i in 0..count {
        let profile = &mut profiles[(i % inputs.len() as u64) as usize];
        let inner = profile.source(&options).expect("a source");
        let info = inner.info().clone();
        let mut shifted = Shifted { inner, info, tid: (i + 1) << 20, us: i * 10_000_000 };
        let (path, output) = if pprof {
            (out.join(format!("fleet-{i:05}.pb.gz")), Output::Pprof)
        } else {
            (out.join(format!("fleet-{i:05}.pyb")), Output::Tachyon { big_endian: Some(false), compression: None })
        };
        tachyon::convert::convert(&mut shifted, &output, Destination::File(&path), &mut |_| {})
            .map_err(|e: ConvertError<_>| format!("{}: {e}", path.display()))
            .expect("written");
    }
}
