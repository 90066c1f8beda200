//! pprof: a gzipped `profile.proto` message (github.com/google/pprof, proto/profile.proto),
//! encoded by prost from the message definitions below, which `go tool pprof` reads.
//!
//! Content: two sample types, `samples/count` and `<mode>/nanoseconds` (samples × interval;
//! `wall` unless the input says `cpu`, `gil` ...); one sample per distinct (thread, stack),
//! with a numeric `thread_id` label (`-tagfocus`, `-tagshow`) where the input has threads;
//! one function per `(funcname, filename)` with the first line seen as `start_line`. A
//! Python frame's location is its `(function, line)`; a native frame's is its address, in
//! its mapping, with the function and line when a symbol was found and without any when not
//! (go pprof then shows the address, and can symbolise it from the binaries itself). Samples
//! with an empty stack are left out, as CPython's collectors leave them out.

use std::collections::HashMap;
use std::io::{self, Write};

use prost::Message;

use super::proto::{Function, Label, Line, Location, Mapping, Profile, Sample, ValueType};
use crate::hash::StringIndex;
use crate::model::{Call, Collector, FrameTable, SourceInfo};

/// Counts samples per (thread, stack) and remembers the time span.
#[derive(Debug, Default)]
pub struct PprofCollector {
    /// Per frame id, the frame standing for its location: the first frame of its function
    /// key for a Python frame, itself for a native one.
    location_frame: Vec<u32>,
    /// `[tid low, tid high, location frames leaf → root]` → samples, in first-seen order.
    stacks: HashMap<Box<[u32]>, usize>,
    counts: Vec<(Box<[u32]>, u64)>,
    key: Vec<u32>,
    last_us: Option<u64>,
}

impl Collector for PprofCollector {
    fn collect(&mut self, frames: &FrameTable, s: &Call<'_>) {
        let last = s.timestamps_us().iter().copied().max().unwrap_or(0);
        self.last_us = Some(self.last_us.map_or(last, |t| t.max(last)));
        if s.stack.is_empty() {
            return;
        }
        if self.location_frame.len() != frames.frames.len() {
            let mut first_of_function: Vec<Option<u32>> = vec![None; frames.functions.len()];
            self.location_frame = (0..frames.frames.len() as u32)
                .map(|id| match frames.frame(id).address {
                    Some(_) => id,
                    None => *first_of_function[frames.function(id) as usize].get_or_insert(id),
                })
                .collect();
        }
        self.key.clear();
        self.key.extend([s.thread_id as u32, (s.thread_id >> 32) as u32]);
        // An inlined frame is a line of its caller's location (the next frame, same address).
        let location_frame = &self.location_frame;
        self.key.extend(s.stack.iter().filter(|&&id| !frames.frame(id).inlined).map(|&id| location_frame[id as usize]));
        match self.stacks.get(&self.key[..]) {
            Some(&i) => self.counts[i].1 += s.samples(),
            None => {
                self.stacks.insert(self.key.clone().into_boxed_slice(), self.counts.len());
                self.counts.push((self.key.clone().into_boxed_slice(), s.samples()));
            }
        }
    }
}

impl PprofCollector {
    /// The profile message of the samples of `info`'s input.
    pub fn profile(&self, frames: &FrameTable, info: &SourceInfo) -> Profile {
        let (start_time_us, interval_us, mode) = (info.start_time_us, info.sample_interval_us, &*info.mode);
        let mut strings = StringIndex::default();
        let mut id = |s: &str| i64::from(strings.id(s));
        id("");
        let samples_type = ValueType { r#type: id("samples"), unit: id("count") };
        let time_type = ValueType { r#type: id(mode), unit: id("nanoseconds") };
        let thread_key = id("thread_id");
        let interval_ns = i64::try_from(interval_us.saturating_mul(1000)).unwrap_or(i64::MAX);

        let mut functions: Vec<Function> = Vec::new();
        let mut function_ids: HashMap<(&str, &str), u64> = HashMap::new();
        // A mapping is symbolised when any of its frames has a name of its own.
        let mut symbolised = vec![false; frames.mappings.len()];
        for f in frames.frames.iter().filter(|f| !f.anonymous) {
            if let Some(m) = f.mapping {
                symbolised[m as usize] = true;
            }
        }
        let mappings: Vec<Mapping> = frames
            .mappings
            .iter()
            .zip(symbolised)
            .enumerate()
            .map(|(i, (m, symbolised))| Mapping {
                id: i as u64 + 1,
                memory_start: m.start,
                memory_limit: m.limit,
                file_offset: m.offset,
                filename: id(&m.file),
                build_id: id(&m.build_id),
                has_functions: symbolised,
                has_filenames: symbolised,
                has_line_numbers: symbolised,
                has_inline_frames: symbolised,
            })
            .collect();
        let mut locations: Vec<Location> = Vec::new();
        // Location frame → location id, made on first use.
        let mut location_of: Vec<u64> = vec![0; frames.frames.len()];
        let mut samples = Vec::with_capacity(self.counts.len());
        for (key, count) in &self.counts {
            let tid = u64::from(key[0]) | (u64::from(key[1]) << 32);
            let mut location_id = Vec::with_capacity(key.len() - 2);
            for &k in &key[2..] {
                if location_of[k as usize] == 0 {
                    let frame = frames.frame(k);
                    // The frames inlined at this address come just before it, innermost first,
                    // as pprof's lines are.
                    let mut first = k;
                    while first > 0
                        && frames.frame(first - 1).inlined
                        && frames.frame(first - 1).address == frame.address
                    {
                        first -= 1;
                    }
                    let mut line = Vec::new();
                    for l in first..=k {
                        if frames.frame(l).anonymous {
                            continue;
                        }
                        let f = &frames.functions[frames.function(l) as usize];
                        let next = functions.len() as u64 + 1;
                        let function_id = *function_ids.entry((&f.funcname, &f.filename)).or_insert_with(|| {
                            let name = id(&f.funcname);
                            functions.push(Function {
                                id: next,
                                name,
                                system_name: name,
                                filename: id(&f.filename),
                                start_line: i64::from(f.lineno),
                            });
                            next
                        });
                        line.push(Line { function_id, line: i64::from(f.lineno) });
                    }
                    let id = locations.len() as u64 + 1;
                    locations.push(Location {
                        id,
                        mapping_id: frame.mapping.map_or(0, |m| u64::from(m) + 1),
                        address: frame.address.unwrap_or(0),
                        line,
                    });
                    location_of[k as usize] = id;
                }
                location_id.push(location_of[k as usize]);
            }
            let n = i64::try_from(*count).unwrap_or(i64::MAX);
            let label = if info.threads { vec![Label { key: thread_key, str: 0, num: tid as i64 }] } else { vec![] };
            samples.push(Sample { location_id, value: vec![n, n.saturating_mul(interval_ns)], label });
        }
        let comment = id(concat!("converted by tachyon ", env!("CARGO_PKG_VERSION")));
        let time_nanos = i64::try_from(start_time_us.saturating_mul(1000)).unwrap_or(i64::MAX);
        let end_us = self.last_us.unwrap_or(start_time_us);
        let duration_nanos = i64::try_from(end_us.saturating_sub(start_time_us).saturating_mul(1000)).unwrap_or(0);
        Profile {
            default_sample_type: time_type.r#type,
            sample_type: vec![samples_type, time_type.clone()],
            sample: samples,
            mapping: mappings,
            location: locations,
            function: functions,
            string_table: strings.into_strings(),
            time_nanos,
            duration_nanos,
            period_type: Some(time_type),
            period: interval_ns,
            comment: vec![comment],
        }
    }
}

/// Writes `profile` gzipped, as pprof files are.
pub fn write_gzipped(profile: &Profile, out: &mut impl Write) -> io::Result<()> {
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    gz.write_all(&profile.encode_to_vec())?;
    gz.finish()?;
    Ok(())
}
