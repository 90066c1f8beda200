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

use super::StringIndex;
use crate::model::{Call, Collector, FrameTable, SourceInfo};

/// `perftools.profiles.Profile`, the fields this writer uses.
#[derive(Clone, PartialEq, Message)]
pub struct Profile {
    /// What each sample value means.
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    /// The samples.
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    /// Mapped binaries referenced by locations.
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    /// Locations referenced by samples.
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    /// Functions referenced by locations.
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    /// Strings; index 0 must be "".
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    /// Start of collection, ns since the epoch.
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    /// Length of collection, ns.
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    /// Kind of the sampling period.
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    /// Sampling period.
    #[prost(int64, tag = "12")]
    pub period: i64,
    /// Free-form notes (string indices).
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// Index of the sample type shown by default (string index of its type).
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// `ValueType`: type and unit as string indices.
#[derive(Clone, PartialEq, Message)]
pub struct ValueType {
    /// Type (string index).
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    /// Unit (string index).
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// `Sample`: a stack (leaf first) and its values.
#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    /// Location ids, leaf first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    /// One value per sample type.
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    /// Labels.
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// `Label`: a key with a string or numeric value.
#[derive(Clone, PartialEq, Message)]
pub struct Label {
    /// Key (string index).
    #[prost(int64, tag = "1")]
    pub key: i64,
    /// String value (string index).
    #[prost(int64, tag = "2")]
    pub str: i64,
    /// Numeric value.
    #[prost(int64, tag = "3")]
    pub num: i64,
}

/// `Mapping`: a mapped binary.
#[derive(Clone, PartialEq, Message)]
pub struct Mapping {
    /// Id (non-zero).
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// First address.
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    /// One past the last address.
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    /// Offset in the file of `memory_start`.
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    /// File name (string index).
    #[prost(int64, tag = "5")]
    pub filename: i64,
    /// Build id (string index).
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    /// Locations in this mapping carry function names (pprof does not symbolise them again).
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    /// … and file names.
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    /// … and line numbers.
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    /// … and the functions inlined at each address.
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

/// `Location`: an address, or one source line of a function, or both.
#[derive(Clone, PartialEq, Message)]
pub struct Location {
    /// Id (non-zero).
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Mapping id (0 = none).
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    /// Address (0 = none).
    #[prost(uint64, tag = "3")]
    pub address: u64,
    /// The line.
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

/// `Line`: function and line number.
#[derive(Clone, PartialEq, Message)]
pub struct Line {
    /// Function id.
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    /// Line number (0 = unknown).
    #[prost(int64, tag = "2")]
    pub line: i64,
}

/// `Function`: name and file as string indices.
#[derive(Clone, PartialEq, Message)]
pub struct Function {
    /// Id (non-zero).
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Name (string index).
    #[prost(int64, tag = "2")]
    pub name: i64,
    /// System name (string index).
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    /// File name (string index).
    #[prost(int64, tag = "4")]
    pub filename: i64,
    /// First line seen.
    #[prost(int64, tag = "5")]
    pub start_line: i64,
}

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
