//! A fleet of profiles made of a few real ones, for the fleet-scale merge test and benchmark
//! (scripts/fleet.sh, docs/fleet.md).
//!
//! `fleet_files OUT_DIR COUNT PROFILE…` writes COUNT Tachyon files into OUT_DIR,
//! `fleet-00000.pyb` …, the i-th a copy of PROFILE number `i % n` re-encoded by this crate's
//! writer (the hub's Tachyon output) with its thread ids raised by `(i + 1) << 20` and its
//! times by `i` × 10 s: what a fleet of processes running the same code would send.

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

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [out, count, inputs @ ..] = &args[..] else {
        eprintln!("usage: fleet_files OUT_DIR COUNT PROFILE...");
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
        let path = out.join(format!("fleet-{i:05}.pyb"));
        let output = Output::Tachyon { big_endian: Some(false), compression: None };
        tachyon::convert::convert(&mut shifted, &output, Destination::File(&path), &mut |_| {})
            .map_err(|e: ConvertError<_>| format!("{}: {e}", path.display()))
            .expect("written");
    }
}
