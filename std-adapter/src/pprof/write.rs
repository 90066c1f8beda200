//! pprof: a gzipped `profile.proto` message (github.com/google/pprof, proto/profile.proto),
//! encoded by prost from the message definitions below, which `go tool pprof` reads.
//!
//! Content: two sample types, `samples/count` and `<mode>/nanoseconds` (samples × interval;
//! `wall` unless the input says `cpu`, `gil` ...); one sample per distinct (thread, stack),
//! with a numeric `thread_id` label (`-tagfocus`, `-tagshow`) where the input has threads;
//! locations and functions as [`crate::model::stacks`] makes them (a native frame without a
//! symbol has no line: go pprof then shows the address, and can symbolise it from the
//! binaries itself). Samples with an empty stack are left out, as CPython's collectors leave
//! them out. `time_nanos` and `duration_nanos` are Unix time as the OTLP output gives it
//! ([`SourceInfo::unix_span`]): a CPython file's monotonic clock is placed so that its last
//! sample is when the file was written (it was the monotonic reading itself, which go pprof
//! showed as a date in January 1970).

use std::io::{self, Write};

use prost::Message;

use super::proto::{Function, Label, Line, Location, Mapping, Profile, Sample, ValueType};
use crate::hash::StringIndex;
use crate::model::stacks::{Locations, StackCounts};
use crate::model::{FrameTable, SourceInfo};

/// Writes the profile of the samples `counts` holds, of `info`'s input whose file was written
/// at `written_unix_us` (µs since the epoch; it dates a monotonic clock's samples), gzipped as
/// pprof files are. Each sample is encoded and compressed as it is made: only the tables a
/// sample points into (strings, locations, functions, mappings) are held until the end,
/// never the samples (for a million threads, a sample each: about 10 MB where the whole
/// message took 400).
///
/// A message is its fields in any order, and prost writes a message's fields in the order of
/// their tags; so the sample types (tag 1), then each sample (2), then the rest (3–14), each
/// encoded by prost, are byte for byte `Profile::encode` of the whole.
pub fn write_gzipped(
    counts: &StackCounts,
    frames: &FrameTable,
    info: &SourceInfo,
    written_unix_us: Option<u64>,
    out: &mut impl Write,
) -> io::Result<()> {
    let (interval_us, mode) = (info.sample_interval_us, &*info.mode);
    let mut strings = StringIndex::default();
    let mut id = |s: &str| i64::from(strings.id(s));
    id("");
    let samples_type = ValueType { r#type: id("samples"), unit: id("count") };
    let time_type = ValueType { r#type: id(mode), unit: id("nanoseconds") };
    let thread_key = id("thread_id");
    let interval_ns = i64::try_from(interval_us.saturating_mul(1000)).unwrap_or(i64::MAX);

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

    // Samples are small writes: gathered into 64 KiB pieces before the compressor, which
    // compressed them about 40 % worse one by one (and then wrote other bytes than the
    // whole message's).
    let mut gz =
        io::BufWriter::with_capacity(1 << 16, flate2::write::GzEncoder::new(out, flate2::Compression::default()));
    let head = Profile { sample_type: vec![samples_type, time_type.clone()], ..Profile::default() };
    gz.write_all(&head.encode_to_vec())?;

    let mut tables = Locations::new(frames);
    let mut functions: Vec<Function> = Vec::new();
    let mut locations: Vec<Location> = Vec::new();
    let mut sample = Sample::default();
    let mut encoded = Vec::new();
    for entry in counts.entries() {
        sample.location_id.clear();
        for &frame in entry.frames {
            let i = tables.location(frame) as usize;
            // Locations and functions are numbered as made: encode the new ones.
            for f in &tables.functions[functions.len()..] {
                let name = id(f.name);
                let next = functions.len() as u64 + 1;
                functions.push(Function {
                    id: next,
                    name,
                    system_name: name,
                    filename: id(f.filename),
                    start_line: f.start_line,
                });
            }
            for l in &tables.locations[locations.len()..] {
                let next = locations.len() as u64 + 1;
                locations.push(Location {
                    id: next,
                    mapping_id: l.mapping.map_or(0, |m| u64::from(m) + 1),
                    address: l.address,
                    line: l
                        .lines
                        .iter()
                        .map(|l| Line { function_id: u64::from(l.function) + 1, line: l.line })
                        .collect(),
                });
            }
            sample.location_id.push(i as u64 + 1);
        }
        let n = i64::try_from(entry.samples).unwrap_or(i64::MAX);
        sample.value.clear();
        sample.value.extend([n, n.saturating_mul(interval_ns)]);
        sample.label.clear();
        if info.threads {
            sample.label.push(Label { key: thread_key, str: 0, num: entry.thread_id as i64 });
        }
        // Field 2, length-delimited: the key byte (2 << 3 | 2), the length, the message.
        encoded.clear();
        encoded.push(0x12);
        sample.encode_length_delimited(&mut encoded).map_err(io::Error::other)?;
        gz.write_all(&encoded)?;
    }
    let comment = id(concat!("converted by tachyon ", env!("CARGO_PKG_VERSION")));
    // Unix time where anything says how (as the OTLP output), the profile's own otherwise.
    let (first, last) = (counts.first_us(), counts.last_us());
    let (start_us, end_us) = match info.unix_span(written_unix_us, first, last) {
        Some(span) => (span.start_us, span.end_us),
        None => (info.start_time_us, last.unwrap_or(info.start_time_us)),
    };
    let time_nanos = i64::try_from(start_us.saturating_mul(1000)).unwrap_or(i64::MAX);
    let duration_nanos = i64::try_from(end_us.saturating_sub(start_us).saturating_mul(1000)).unwrap_or(0);
    let rest = Profile {
        default_sample_type: time_type.r#type,
        sample_type: Vec::new(),
        sample: Vec::new(),
        mapping: mappings,
        location: locations,
        function: functions,
        string_table: strings.into_strings(),
        time_nanos,
        duration_nanos,
        period_type: Some(time_type),
        period: interval_ns,
        comment: vec![comment],
    };
    gz.write_all(&rest.encode_to_vec())?;
    gz.into_inner().map_err(io::IntoInnerError::into_error)?.finish()?;
    Ok(())
}
