//! pprof `profile.proto` files (gzipped or not) as a [`Source`]: each sample is one call of
//! its chosen value, its locations the frames.
//!
//! A protobuf message has no order to stream in, so the file is decoded whole (memory grows
//! with the file, at most [`MAX_PPROF_BYTES`] decompressed). The value a call counts is
//! the sample type chosen as go pprof chooses it (`--sample-index`: a name or a 0-based
//! index; by default the profile's `default_sample_type`, else the last). A location is one
//! frame per line, innermost first (pprof's order: the last line is the function the others
//! were inlined into), or one `0x…` frame for an address without lines. A numeric
//! `thread_id` label (ours) gives the thread. Samples whose value is 0 or less add nothing
//! and are skipped.

use std::io::Read;

use prost::Message;
use tachyon_core::kind::FileKind;
use tachyon_core::tables::Location as Span;

use super::proto::{malformed, Profile};
use super::samples::{self, Broken, Locations as _};
use super::tables::{LocationRow, Tables};
use crate::hash::IdMap;
use crate::model::{
    Call, Clock, Collector, FrameNames, FrameRef, FrameTable, Mapping, NamedCollector, Naming, Source, SourceInfo,
    Ticker, Times, MAX_WEIGHT_TOTAL,
};
use crate::symbolize::{symbol_frames, Symbolizer};

/// Most bytes of a profile decoded (after gunzip).
pub const MAX_PPROF_BYTES: u64 = 1 << 30;

/// Why a pprof file cannot be read.
#[derive(Debug)]
pub enum PprofError {
    /// Reading the file failed.
    Io(std::io::Error),
    /// The gzip stream is damaged: the decompressor failed once it had taken `offset` bytes
    /// of the file.
    Gzip {
        /// File bytes the decompressor had consumed.
        offset: u64,
        /// What it said.
        error: std::io::Error,
    },
    /// The decompressed message is larger than [`MAX_PPROF_BYTES`].
    TooLarge,
    /// Not a `perftools.profiles.Profile` message; where the message first breaks the wire
    /// format or the schema, when that can be found ([`malformed`]).
    Decode {
        /// What the decoder said (the rule, with the path of fields it was in).
        error: prost::DecodeError,
        /// Offset in the (decompressed) message and the rule, from our own walk.
        at: Option<(u64, String)>,
    },
    /// A field refers to what the message does not have.
    Invalid(String),
}

impl std::fmt::Display for PprofError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PprofError::Io(e) => write!(f, "{e}"),
            PprofError::Gzip { offset, error } => write!(f, "gzip stream, at file offset {offset}: {error}"),
            PprofError::TooLarge => write!(f, "more than {MAX_PPROF_BYTES} bytes of profile once decompressed"),
            PprofError::Decode { error, at: Some((offset, rule)) } => {
                write!(f, "not a profile.proto message: at message offset {offset}: {rule} ({error})")
            }
            PprofError::Decode { error, at: None } => write!(f, "not a profile.proto message: {error}"),
            PprofError::Invalid(why) => write!(f, "invalid pprof profile: {why}"),
        }
    }
}

impl std::error::Error for PprofError {}

/// Which sample value calls count.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SampleIndex {
    /// The profile's `default_sample_type`, else the last (go pprof's default).
    #[default]
    Default,
    /// By position.
    Index(usize),
    /// By type name (`samples`, `cpu`, `alloc_space`, …).
    Name(String),
    /// The first type counted in `count` units, else as [`SampleIndex::Default`]: for
    /// outputs made of samples (Tachyon, gperftools), where a time would be a sample per
    /// nanosecond.
    Counts,
}

impl std::str::FromStr for SampleIndex {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.parse::<usize>() {
            Ok(i) => SampleIndex::Index(i),
            Err(_) => SampleIndex::Name(s.to_owned()),
        })
    }
}

/// A decoded pprof profile.
pub struct PprofSource {
    /// Every field but the samples.
    tables: Tables,
    samples: Samples,
    sample_count: usize,
    info: SourceInfo,
    /// Mapped files, by start.
    mappings: Vec<Mapping>,
    /// Per location (by position), its mapping's index in `mappings`.
    location_mapping: Vec<Option<u32>>,
    /// Per line of the tables, its function's position there ([`NO_FUNCTION`] for an id no
    /// function has): found once a line, not by id for every frame a file's samples name.
    line_function: Vec<u32>,
    /// Per frame id, its location's position and its line's (a location without lines is
    /// one frame, its address).
    frame_at: Vec<(u32, u32)>,
    /// The frame table, made when first asked for ([`Source::replay_named`] lends the names
    /// where they lie instead).
    frames: std::sync::OnceLock<FrameTable>,
    /// Location id → the frame ids standing for it.
    frames_of: LocationFrames,
    /// Some location is a bare address in a mapping: something to symbolise.
    bare_in_mapping: bool,
    value: usize,
    thread_key: Option<i64>,
}

/// The samples: read where they lie in the message when it reads so (see [`samples`]),
/// else as prost decoded them.
enum Samples {
    InPlace(Vec<u8>),
    Decoded(Vec<super::proto::Sample>),
}

/// What one pass over the samples found, before the tables are looked at: how many there
/// are, each value index's sum of positive values, every label key.
#[derive(Default)]
struct Tally {
    samples: usize,
    sums: Vec<u64>,
    label_keys: IdMap<i64, ()>,
    last_label_key: Option<i64>,
}

impl Tally {
    fn add(&mut self, values: &[i64], label_keys: impl Iterator<Item = i64>) {
        self.samples += 1;
        if self.sums.len() < values.len() {
            self.sums.resize(values.len(), 0);
        }
        for (sum, &v) in self.sums.iter_mut().zip(values) {
            *sum = sum.saturating_add(v.max(0) as u64);
        }
        for key in label_keys {
            // (Nearly every sample has the same keys: a look-up each only when one is new.)
            if self.last_label_key != Some(key) {
                self.label_keys.insert(key, ());
                self.last_label_key = Some(key);
            }
        }
    }

    fn decoded(samples: &[super::proto::Sample]) -> Tally {
        let mut tally = Tally::default();
        for sample in samples {
            tally.add(&sample.value, sample.label.iter().map(|l| l.key));
        }
        tally
    }
}

/// Location id → the frames standing for it. Ids are nearly always 1..=n (go's and ours): a
/// table by id then replaces a hash look-up per frame of every sample (a merge of deep stacks
/// spent a sixth of its time there). Its length is bounded by the locations the message holds
/// (four times, and 16), not by the ids' values; other ids go into a map.
enum LocationFrames {
    /// `(first, end)` by id; `NONE` where no location has the id.
    ById(Vec<(u32, u32)>),
    Map(IdMap<u64, (u32, u32)>),
}

/// No location (a range no frame table reaches: the table's length is a `u32`).
const NONE: (u32, u32) = (u32::MAX, u32::MAX);

/// No location, in [`LocationFrames::one_frame`]'s table.
const NO_FRAME: u32 = u32::MAX;

/// No function, in [`PprofSource::line_function`].
const NO_FUNCTION: u32 = u32::MAX;

/// The position in the tables of the function of `location`'s line `line`, by the
/// lines' `line_function` (see [`PprofSource::line_function`]).
fn line_function_of(line_function: &[u32], location: &LocationRow, line: usize) -> Option<usize> {
    let at = (location.lines.0 as usize).checked_add(line)?;
    line_function.get(at).filter(|&&f| f != NO_FUNCTION).map(|&f| f as usize)
}

impl LocationFrames {
    /// Empty, for the ids of `count` locations.
    fn for_ids(mut ids: impl Iterator<Item = u64>, count: usize) -> Self {
        let bound = count.saturating_mul(4).saturating_add(16);
        if ids.all(|id| id < bound as u64) {
            LocationFrames::ById(vec![NONE; bound])
        } else {
            LocationFrames::Map(IdMap::default())
        }
    }

    /// The frames of location `id`, `(first, end)`.
    #[inline]
    fn get(&self, id: u64) -> Option<(u32, u32)> {
        match self {
            LocationFrames::ById(table) => {
                usize::try_from(id).ok().and_then(|i| table.get(i)).copied().filter(|&frames| frames != NONE)
            }
            LocationFrames::Map(map) => map.get(&id).copied(),
        }
    }

    /// Each id's frame when every location is one frame and the ids index a table
    /// ([`NO_FRAME`] where no location has the id): what a replay maps ids by.
    fn one_frame(&self) -> Option<Vec<u32>> {
        let LocationFrames::ById(table) = self else { return None };
        let one = |&(first, end): &(u32, u32)| (first, end) == NONE || end == first.wrapping_add(1);
        table
            .iter()
            .all(one)
            .then(|| table.iter().map(|&(first, _)| if first == NONE.0 { NO_FRAME } else { first }).collect())
    }

    /// Sets `id`'s frames; `id` is one of the ids it was made for (`for_ids` checked each
    /// against the table's length).
    fn insert(&mut self, id: u64, frames: (u32, u32)) {
        match self {
            LocationFrames::ById(table) => {
                let slot = usize::try_from(id).ok().and_then(|i| table.get_mut(i));
                debug_assert!(slot.is_some(), "location {id} was not among the ids the table was made for");
                if let Some(slot) = slot {
                    *slot = frames;
                }
            }
            LocationFrames::Map(map) => {
                map.insert(id, frames);
            }
        }
    }
}

impl PprofSource {
    /// Reads and decodes a profile, gzipped or not, choosing the sample value by `index`.
    pub fn open(mut input: impl Read, index: &SampleIndex) -> Result<Self, PprofError> {
        let mut head = [0u8; 2];
        let mut raw = Vec::new();
        let n = read_up_to(&mut input, &mut head)?;
        let gzipped = head[..n] == [0x1f, 0x8b];
        let chained = (&head[..n]).chain(input);
        if gzipped {
            gunzip(std::io::BufReader::new(chained), &mut raw)?;
        } else {
            limited(chained, MAX_PPROF_BYTES, &mut raw)?;
        }
        PprofSource::decode(raw, gzipped, index)
    }

    /// [`PprofSource::open`] of a file's bytes: decompressed straight from them, into a
    /// buffer of the size the gzip trailer states when that is plausible (a merge of small
    /// files spent a fifth of its time in buffers: two of 8 KiB a file, and the output grown
    /// by doubling; measured).
    pub fn from_bytes(file: &[u8], index: &SampleIndex) -> Result<Self, PprofError> {
        if !file.starts_with(&[0x1f, 0x8b]) {
            let mut raw = Vec::new();
            limited(file, MAX_PPROF_BYTES, &mut raw)?;
            return PprofSource::decode(raw, false, index);
        }
        let mut raw = crate::memory::take_kept(&KEPT_MESSAGE);
        raw.reserve(gunzipped_size_hint(file));
        if !gunzip_whole(file, &mut raw) {
            raw.clear();
            gunzip(file, &mut raw)?;
        }
        PprofSource::decode(raw, true, index)
    }

    /// A decompressed message decoded.
    fn decode(raw: Vec<u8>, gzipped: bool, index: &SampleIndex) -> Result<Self, PprofError> {
        // The samples read in place, or, where the message breaks that reading's rules, as
        // prost decodes them (or refuses them, with its error).
        let mut tally = Tally::default();
        let mut sample = samples::Sample::default();
        let in_place = Tables::read_with(&raw, crate::memory::take_kept(&KEPT_TABLES), |body| {
            sample.read_without_locations(body)?;
            tally.add(&sample.values, sample.labels.iter().map(|&(key, _)| key));
            Ok(())
        });
        let (tables, samples, tally) = match in_place {
            Ok(tables) => (tables, Samples::InPlace(raw), tally),
            Err(Broken) => decoded(raw)?,
        };
        let mut source = PprofSource::new(tables, samples, &tally, index)?;
        source.info.kind = FileKind::Pprof { gzipped };
        Ok(source)
    }

    fn new(tables: Tables, samples: Samples, tally: &Tally, index: &SampleIndex) -> Result<Self, PprofError> {
        let string = |i: i64| -> Result<&str, PprofError> {
            usize::try_from(i).ok().and_then(|i| tables.string(i)).ok_or_else(|| {
                PprofError::Invalid(format!("string index {i} past the table's {}", tables.string_count()))
            })
        };
        let types = tables.sample_type.len();
        if types == 0 {
            return Err(PprofError::Invalid("no sample types".to_owned()));
        }
        let value = match index {
            SampleIndex::Index(i) if *i < types => *i,
            SampleIndex::Index(i) => {
                return Err(PprofError::Invalid(format!("--sample-index {i}: the profile has {types} sample types")))
            }
            SampleIndex::Name(name) => {
                let mut found = None;
                for (i, t) in tables.sample_type.iter().enumerate() {
                    if string(t.r#type)? == name {
                        found = Some(i);
                    }
                }
                found
                    .ok_or_else(|| PprofError::Invalid(format!("--sample-index {name}: no sample type of that name")))?
            }
            SampleIndex::Counts if tables.sample_type.iter().any(|t| string(t.unit).is_ok_and(|u| u == "count")) => {
                tables.sample_type.iter().position(|t| string(t.unit).is_ok_and(|u| u == "count")).unwrap_or(0)
            }
            SampleIndex::Default | SampleIndex::Counts => {
                let mut chosen = types - 1;
                if tables.default_sample_type != 0 {
                    for (i, t) in tables.sample_type.iter().enumerate() {
                        if t.r#type == tables.default_sample_type {
                            chosen = i;
                        }
                    }
                }
                chosen
            }
        };
        let mode = string(tables.sample_type[value].r#type)?.to_owned();

        // Mappings, sorted by start for the frame table; pprof ids → positions.
        let mut mappings: Vec<(u64, Mapping)> = Vec::with_capacity(tables.mapping.len());
        for m in &tables.mapping {
            let mapping = Mapping {
                start: m.memory_start,
                limit: m.memory_limit,
                offset: m.file_offset,
                file: string(m.filename)?.to_owned(),
                build_id: string(m.build_id)?.to_owned(),
            };
            mappings.push((m.id, mapping));
        }
        mappings.sort_by_key(|(_, m)| m.start);
        let mapping_of: IdMap<u64, u32> = mappings.iter().enumerate().map(|(i, (id, _))| (*id, i as u32)).collect();
        let line_function: Vec<u32> = {
            let functions: IdMap<u64, u32> =
                tables.function.iter().enumerate().map(|(i, f)| (f.id, i as u32)).collect();
            tables.lines.iter().map(|l| functions.get(&l.function_id).copied().unwrap_or(NO_FUNCTION)).collect()
        };

        // Each location's frames numbered, and the names they will take checked (the table
        // itself is made when asked for: see `frame`).
        let mut frames_of = LocationFrames::for_ids(tables.location.iter().map(|l| l.id), tables.location.len());
        let mut frame_at = Vec::with_capacity(tables.location.len());
        let mut location_mapping = Vec::with_capacity(tables.location.len());
        let mut bare_in_mapping = false;
        for (i, location) in tables.location.iter().enumerate() {
            let first = frame_at.len() as u32;
            let lines = tables.lines_of(location);
            for line in 0..lines.len() {
                if let Some(f) = line_function_of(&line_function, location, line).map(|f| &tables.function[f]) {
                    string(f.name)?;
                    string(f.filename)?;
                }
            }
            frame_at.extend((0..lines.len().max(1) as u32).map(|line| (i as u32, line)));
            let mapping = mapping_of.get(&location.mapping_id).copied();
            bare_in_mapping |= lines.is_empty() && location.address != 0 && mapping.is_some();
            location_mapping.push(mapping);
            frames_of.insert(location.id, (first, frame_at.len() as u32));
        }
        let mappings = mappings.into_iter().map(|(_, m)| m).collect();

        let thread_key =
            (0..tables.string_count()).position(|i| tables.string(i) == Some("thread_id")).map(|i| i as i64);
        let threads = thread_key.is_some_and(|k| tally.label_keys.contains_key(&k));
        // What the interval measures (go's legacy parser writes `cpu` for gperftools, we write
        // CPython's mode), whichever value is counted.
        let cpython_mode = match &tables.period_type {
            Some(t) => tachyon_core::header::ProfilingMode::from_name(string(t.r#type)?),
            None => None,
        };
        let period_ns = match &tables.period_type {
            Some(t) if string(t.unit)? == "nanoseconds" => tables.period.max(0) as u64,
            _ => 0,
        };
        let expected_samples = tally.sums.get(value).copied().unwrap_or(0);
        if expected_samples > MAX_WEIGHT_TOTAL {
            return Err(PprofError::Invalid(
                "the counted values add up to more than 2^63 - 1, the most a pprof or OTLP value holds".to_owned(),
            ));
        }
        let info = SourceInfo {
            kind: FileKind::Pprof { gzipped: false },
            start_time_us: tables.time_nanos.max(0) as u64 / 1000,
            sample_interval_us: period_ns / 1000,
            mode: mode.into(),
            cpython_mode,
            expected_samples,
            timestamps: false,
            threads,
            naming: Naming::Native,
            clock: if tables.time_nanos > 0 { Clock::Unix } else { Clock::None },
        };
        Ok(PprofSource {
            tables,
            samples,
            sample_count: tally.samples,
            info,
            mappings,
            location_mapping,
            line_function,
            frame_at,
            frames: std::sync::OnceLock::new(),
            frames_of,
            bare_in_mapping,
            value,
            thread_key,
        })
    }
}

impl PprofSource {
    /// What `tachyon info` shows: sample types (the counted one marked), period, counts of
    /// samples, locations, functions and mappings, time span.
    pub fn facts(&self, file_bytes: u64) -> serde_json::Value {
        let p = &self.tables;
        let string = |i: i64| usize::try_from(i).ok().and_then(|i| p.string(i)).unwrap_or("");
        let types: Vec<String> =
            p.sample_type.iter().map(|t| format!("{}/{}", string(t.r#type), string(t.unit))).collect();
        serde_json::json!({
            "gzipped": matches!(self.info.kind, FileKind::Pprof { gzipped: true }),
            "sample_types": types,
            "counted": types.get(self.value),
            "period": p.period_type.as_ref().map(|t| format!("{} {}/{}", p.period, string(t.r#type), string(t.unit))),
            "samples": self.sample_count,
            "counted_total": self.info.expected_samples,
            "locations": p.location.len(),
            "functions": p.function.len(),
            "mappings": p.mapping.len(),
            "time_nanos": p.time_nanos,
            "duration_nanos": p.duration_nanos,
            "file_bytes": file_bytes,
        })
    }
}

impl PprofSource {
    /// The frame table, made on first use.
    fn table(&self) -> &FrameTable {
        self.frames.get_or_init(|| {
            let mut table = FrameTable::default();
            table.mappings = self.mappings.clone();
            table.frames.reserve(self.frame_at.len());
            for id in 0..self.frame_at.len() as u32 {
                table.push(self.frame(id).to_info());
            }
            table
        })
    }
}

impl FrameNames for PprofSource {
    /// Frame `id`: a frame per line of its location, innermost first (pprof's order: the last
    /// line is the function the others were inlined into); a bare address (`0x…`) for a
    /// location without lines. Names that do not resolve are empty (`new` refused those
    /// out of the string table's range).
    fn frame(&self, id: u32) -> FrameRef<'_> {
        self.numbered_frame(id).0
    }

    /// As [`Self::frame`], with the string table's numbers of its names.
    fn numbered_frame(&self, id: u32) -> (FrameRef<'_>, [Option<u32>; 2]) {
        // (Every id of a stack is a frame's: `frames_of` numbers them.)
        let Some((&(at, line), Some(location))) =
            self.frame_at.get(id as usize).map(|at| (at, self.tables.location.get(at.0 as usize)))
        else {
            return (FrameRef::default(), [None, None]);
        };
        let lines = self.tables.lines_of(location);
        let address = (location.address != 0).then_some(location.address);
        let mapping = self.location_mapping.get(at as usize).copied().flatten();
        let bare = || std::borrow::Cow::Owned(format!("{:#x}", location.address));
        let Some(l) = lines.get(line as usize) else {
            let frame = FrameRef {
                filename: "",
                funcname: bare(),
                location: None,
                opcode: None,
                address,
                mapping,
                anonymous: true,
                hidden: false,
                inlined: false,
            };
            return (frame, [None, None]);
        };
        // A name and its number, when it is one of the table's strings.
        let string = |i: i64| {
            let at = usize::try_from(i).ok()?;
            Some((self.tables.string(at)?, u32::try_from(at).ok()?))
        };
        let (funcname, filename) = match line_function_of(&self.line_function, location, line as usize) {
            Some(f) => (string(self.tables.function[f].name), string(self.tables.function[f].filename)),
            None => (None, None),
        };
        // (An empty funcname is replaced by the address: not the table's string.)
        let numbers = [filename.map(|(_, n)| n), funcname.filter(|&(s, _)| !s.is_empty()).map(|(_, n)| n)];
        let (funcname, filename) = (funcname.map_or("", |(s, _)| s), filename.map_or("", |(s, _)| s));
        let lineno = i32::try_from(l.line).ok().filter(|&l| l > 0);
        let frame = FrameRef {
            filename,
            funcname: if funcname.is_empty() { bare() } else { std::borrow::Cow::Borrowed(funcname) },
            location: lineno.map(|l| Span { lineno: l, end_lineno: l, col: -1, end_col: -1 }),
            opcode: None,
            address,
            mapping,
            anonymous: false,
            hidden: false,
            inlined: (line as usize) + 1 < lines.len(),
        };
        (frame, numbers)
    }

    fn mapping(&self, index: u32) -> &Mapping {
        // (Every index a frame has is a mapping's: `new` made them.)
        static NO_MAPPING: Mapping =
            Mapping { start: 0, limit: 0, offset: 0, file: String::new(), build_id: String::new() };
        self.mappings.get(index as usize).unwrap_or(&NO_MAPPING)
    }
}

impl PprofSource {
    /// Names the bare addresses (locations without lines, in a mapping) from the binaries
    /// `symbolizer` finds, as for gperftools profiles; other locations stay as they are.
    pub fn symbolize(&mut self, symbolizer: &mut Symbolizer) {
        // Most profiles have names for every location: the table stays as it is (rebuilding
        // it was a sixth of a merge of small files, measured).
        if !self.bare_in_mapping {
            return;
        }
        self.table();
        let old = self.frames.take().unwrap_or_default();
        let mut frames = FrameTable::default();
        frames.mappings = old.mappings.clone();
        for location in &self.tables.location {
            let Some((start, end)) = self.frames_of.get(location.id) else { continue };
            let range = start..end;
            let first = frames.frames.len() as u32;
            let bare = (range.len() == 1).then(|| old.frame(range.start)).filter(|f| f.anonymous);
            let found = match bare.map(|f| (f.address, f.mapping)) {
                Some((Some(address), Some(m))) => symbolizer.symbolize(&old.mappings[m as usize], address),
                _ => Vec::new(),
            };
            if found.is_empty() {
                for id in range {
                    frames.push(old.frame(id).clone());
                }
            } else {
                let (address, mapping) = (location.address, old.frame(range.start).mapping);
                for frame in symbol_frames(found, address, mapping) {
                    frames.push(frame);
                }
            }
            self.frames_of.insert(location.id, (first, frames.frames.len() as u32));
        }
        self.frames = std::sync::OnceLock::from(frames);
    }
}

/// A sample that read when the file was opened and not now: cannot happen (the bytes are the
/// same), but is an error rather than a panic.
fn broken_again(_: Broken) -> PprofError {
    PprofError::Invalid("a sample read differently the second time".to_owned())
}

/// The message decoded whole by prost (its error located where it refuses it), the samples
/// taken out of it, and their tally.
fn decoded(raw: Vec<u8>) -> Result<(Tables, Samples, Tally), PprofError> {
    let mut profile = Profile::decode(&raw[..]).map_err(|error| PprofError::Decode { error, at: malformed(&raw) })?;
    drop(raw);
    let samples = std::mem::take(&mut profile.sample);
    let tally = Tally::decoded(&samples);
    Ok((Tables::of(profile), Samples::Decoded(samples), tally))
}

/// Room for what gzip file `file` decompresses to, as its trailer states it (ISIZE, the last
/// member's size mod 2^32): a hint only, so trusted up to 64 times the file's size, a ratio
/// far above any profile's, and [`MAX_PPROF_BYTES`]; and a byte more, for the read that
/// finds the end.
fn gunzipped_size_hint(file: &[u8]) -> usize {
    let stated = match file.len().checked_sub(4).and_then(|at| file.get(at..)) {
        Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]) as usize,
        _ => 0,
    };
    stated.min(file.len().saturating_mul(64)).min(MAX_PPROF_BYTES as usize) + 1
}

/// Decompresses `file` in one call when it is what pprof writers write (go's and ours): one
/// gzip member with no optional header fields, whose trailer states a size that fits the
/// room `raw` has. False leaves the file to [`gunzip`], which reads every other shape and
/// names where a broken file breaks. One call, into the buffer, with an inflater the thread
/// keeps from file to file: the stream set one up twice a file and read through a buffer
/// of its own (1,111 small files merged on one thread: 954 M instructions, 932 M this way;
/// measured).
fn gunzip_whole(file: &[u8], raw: &mut Vec<u8>) -> bool {
    // ID1 ID2, CM = deflate, FLG = none; MTIME, XFL and OS are not read.
    let [0x1f, 0x8b, 8, 0, _, _, _, _, _, _, member @ ..] = file else { return false };
    let Some((deflated, &[c0, c1, c2, c3, s0, s1, s2, s3])) = member.split_last_chunk::<8>() else { return false };
    let (crc, size) = (u32::from_le_bytes([c0, c1, c2, c3]), u32::from_le_bytes([s0, s1, s2, s3]) as usize);
    if size >= raw.capacity() || size as u64 > MAX_PPROF_BYTES {
        return false;
    }
    raw.clear();
    raw.resize(size, 0);
    let ended = INFLATER.with_borrow_mut(|inflater| {
        let inflater = inflater.get_or_insert_with(|| zlib_rs::Inflate::new(false, 15));
        inflater.reset(false);
        let done = inflater.decompress(deflated, raw, zlib_rs::InflateFlush::Finish);
        matches!(done, Ok(zlib_rs::Status::StreamEnd))
            && inflater.total_in() == deflated.len() as u64
            && inflater.total_out() == size as u64
    });
    ended && zlib_rs::crc32::crc32(0, raw) == crc
}

/// A profile's tables and decompressed message are kept by the thread that dropped it, for
/// the next it opens, when the message is at most this size (so that a thread does not hold
/// a large profile's memory after it): a merge of small files made a few dozen allocations
/// a file growing the tables (1,111 small files on one thread: 891 M instructions, 870 M
/// this way; measured).
const KEPT_MESSAGE_BYTES: usize = 1 << 20;

impl Drop for PprofSource {
    fn drop(&mut self) {
        let Samples::InPlace(raw) = &mut self.samples else { return };
        if raw.capacity() > KEPT_MESSAGE_BYTES {
            return;
        }
        let mut raw = std::mem::take(raw);
        raw.clear();
        crate::memory::keep(&KEPT_MESSAGE, raw);
        crate::memory::keep(&KEPT_TABLES, std::mem::take(&mut self.tables));
    }
}

thread_local! {
    /// See [`KEPT_MESSAGE_BYTES`].
    static KEPT_TABLES: std::cell::RefCell<Tables> = std::cell::RefCell::new(Tables::default());
    static KEPT_MESSAGE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    /// A raw-deflate inflater, kept by the thread that used it.
    static INFLATER: std::cell::RefCell<Option<zlib_rs::Inflate>> = const { std::cell::RefCell::new(None) };
}

/// Decompresses every gzip member of `input` into `raw`, at most [`MAX_PPROF_BYTES`].
fn gunzip(input: impl std::io::BufRead, raw: &mut Vec<u8>) -> Result<(), PprofError> {
    // The decompressor takes exactly what it uses from a buffered reader, so the bytes
    // consumed when it fails say where the stream broke.
    let mut counted = Consumed { inner: input, consumed: 0 };
    limited(flate2::bufread::MultiGzDecoder::new(&mut counted), MAX_PPROF_BYTES, raw).map_err(|e| match e {
        PprofError::Io(error) => PprofError::Gzip { offset: counted.consumed, error },
        e => e,
    })
}

/// A buffered reader that counts the bytes its caller consumed.
struct Consumed<R> {
    inner: R,
    consumed: u64,
}

impl<R: std::io::BufRead> Read for Consumed<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.consumed += n as u64;
        Ok(n)
    }
}

impl<R: std::io::BufRead> std::io::BufRead for Consumed<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, n: usize) {
        self.consumed += n as u64;
        self.inner.consume(n);
    }
}

fn read_up_to(input: &mut impl Read, buf: &mut [u8]) -> Result<usize, PprofError> {
    let mut n = 0;
    while n < buf.len() {
        match input.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(PprofError::Io(e)),
        }
    }
    Ok(n)
}

/// Reads the message into `out`, refusing it once it passes `limit` bytes: at most
/// `limit + 1` bytes are ever read from `input` (a decompressor, for a gzipped file), so a
/// gzip bomb costs no more.
fn limited(input: impl Read, limit: u64, out: &mut Vec<u8>) -> Result<(), PprofError> {
    input.take(limit + 1).read_to_end(out).map_err(PprofError::Io)?;
    if out.len() as u64 > limit {
        return Err(PprofError::TooLarge);
    }
    Ok(())
}

impl Source for PprofSource {
    type Error = PprofError;

    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn frames(&self) -> &FrameTable {
        self.table()
    }

    fn replay(&mut self, collector: &mut dyn Collector, progress: &mut dyn FnMut(u64)) -> Result<u64, PprofError> {
        let frames = self.table();
        self.calls(&mut |call| collector.collect(frames, call), progress)
    }

    fn replay_named(
        &mut self,
        collector: &mut dyn NamedCollector,
        progress: &mut dyn FnMut(u64),
    ) -> Option<Result<u64, PprofError>> {
        if self.frames.get().is_some() {
            return None;
        }
        Some(self.calls(&mut |call| collector.collect(&*self, call), progress))
    }
}

impl PprofSource {
    /// Every sample that counts as a call, in file order; the sample count.
    fn calls(&self, collect: &mut dyn FnMut(&Call<'_>), progress: &mut dyn FnMut(u64)) -> Result<u64, PprofError> {
        let one_frame = self.frames_of.one_frame();
        let mut stack = StackOf { frames_of: &self.frames_of, one_frame, frames: Vec::new(), missing: None };
        let mut ticker = Ticker::default();
        let mut done = 0u64;
        // A sample whose stack is on `stack`; `missing`, a location id the stack lacks, is an
        // error only in a sample that counts.
        let mut each = |stack: &[u32], missing: Option<u64>, values: &[i64], thread: Option<i64>| {
            let count = values.get(self.value).copied().unwrap_or(0);
            if count <= 0 {
                return Ok(());
            }
            if let Some(id) = missing {
                return Err(PprofError::Invalid(format!("a sample names location {id}, which is not in the profile")));
            }
            let call = Call {
                times: Times::Counted(count as u64),
                interpreter_id: 0,
                thread_id: thread.map_or(0, |num| num as u64),
                status: 0,
                stack,
                continued: false,
            };
            collect(&call);
            done = done.saturating_add(count as u64);
            ticker.tick(done, progress);
            Ok(())
        };
        match &self.samples {
            Samples::InPlace(message) => {
                let mut sample = samples::Sample::default();
                for body in samples::bodies(&message[self.tables.samples.clone()]) {
                    // (Read once already, whole, when the file was opened.)
                    stack.clear();
                    sample.read_each_location(body.map_err(broken_again)?, &mut stack).map_err(broken_again)?;
                    let thread = self.thread_key.and_then(|k| sample.label_num(k));
                    each(&stack.frames, stack.missing, &sample.values, thread)?;
                }
            }
            Samples::Decoded(decoded) => {
                for sample in decoded {
                    stack.clear();
                    for &id in &sample.location_id {
                        stack.location(id);
                    }
                    let thread = self.thread_key.and_then(|k| sample.label.iter().find(|l| l.key == k)).map(|l| l.num);
                    each(&stack.frames, stack.missing, &sample.value, thread)?;
                }
            }
        }
        progress(done);
        Ok(done)
    }
}

/// A sample's stack as its location ids are read: each location's frames, innermost first.
struct StackOf<'a> {
    frames_of: &'a LocationFrames,
    /// The frame of each location id when every location is one frame (see
    /// [`LocationFrames::one_frame`]).
    one_frame: Option<Vec<u32>>,
    frames: Vec<u32>,
    /// The first location id no location has (an error only in a sample that counts).
    missing: Option<u64>,
}

impl StackOf<'_> {
    fn clear(&mut self) {
        self.frames.clear();
        self.missing = None;
    }
}

impl samples::Locations for StackOf<'_> {
    // Inlined into the reading of every id (see `Sample::read_each_location`).
    #[inline(always)]
    fn location(&mut self, id: u64) {
        match self.frames_of.get(id) {
            // Most locations are one frame (no inlining): pushed as such.
            Some((first, end)) if end == first.wrapping_add(1) => self.frames.push(first),
            Some((first, end)) => self.frames.extend(first..end),
            None => self.missing = self.missing.or(Some(id)),
        }
    }

    fn packed(&mut self, ids: &[u8]) -> Result<(), Broken> {
        let Some(one_frame) = &self.one_frame else {
            return samples::each_packed(ids, self);
        };
        let missing = one_frame_each(ids, one_frame, &mut self.frames)?;
        self.missing = self.missing.or(missing);
        Ok(())
    }
}

/// Packed location ids onto `frames` by `one_frame` (each location one frame); the first id
/// no location has. A function of its own, called once a sample: inlined into the replay,
/// its loop kept the vector and the table in memory for want of registers, and through
/// [`StackOf::location`] (for locations of several frames) likewise — the two together a sixth
/// of a merge of deep CPython profiles, whose locations are one frame each.
#[inline(never)]
fn one_frame_each(ids: &[u8], one_frame: &[u32], frames: &mut Vec<u32>) -> Result<Option<u64>, Broken> {
    // Each id takes a byte at least: room made at once, and written by index (a push kept
    // the vector's length in memory, for the growth it might call).
    let start = frames.len();
    frames.resize(start + ids.len(), 0);
    let (out, mut n) = (&mut frames[start..], 0);
    let mut missing = None;
    let mut rest = ids;
    while !rest.is_empty() {
        let id;
        (id, rest) = samples::split_varint(rest)?;
        match (usize::try_from(id).ok().and_then(|i| one_frame.get(i)), out.get_mut(n)) {
            (Some(&frame), Some(slot)) if frame != NO_FRAME => {
                *slot = frame;
                n += 1;
            }
            _ => missing = missing.or(Some(id)),
        }
    }
    frames.truncate(start + n);
    Ok(missing)
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;
    use crate::pprof::proto::Location;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    /// Packed varints of `ids`.
    fn packed_ids(ids: &[u64]) -> Vec<u8> {
        let mut out = Vec::new();
        for &id in ids {
            prost::encoding::encode_varint(id, &mut out);
        }
        out
    }

    #[test]
    fn the_one_frame_table_maps_ids_as_the_locations_do() {
        // Locations 1..=200 (ids past 127 take two bytes), one frame each, 7 and 150 absent.
        let mut frames_of = LocationFrames::for_ids(1..=200, 200);
        for id in (1..=200u64).filter(|&id| id != 7 && id != 150) {
            let frame = 1000 + id as u32;
            frames_of.insert(id, (frame, frame + 1));
        }
        let table = frames_of.one_frame().expect("every location is one frame");
        let cases: [&[u64]; 6] = [&[1, 2, 3], &[127, 128, 129, 200], &[5, 7, 9], &[150, 1], &[201, 1 << 40, 3], &[]];
        for ids in cases {
            let bytes = packed_ids(ids);
            let mut general = StackOf { frames_of: &frames_of, one_frame: None, frames: vec![42], missing: None };
            samples::each_packed(&bytes, &mut general).unwrap();
            let mut frames = vec![42];
            let missing = one_frame_each(&bytes, &table, &mut frames).unwrap();
            assert_eq!((&frames, missing), (&general.frames, general.missing), "ids {ids:?}");
            // By hand: each present id's frame after what was there, the first absent id.
            let want: Vec<u32> = std::iter::once(42)
                .chain(
                    ids.iter()
                        .filter(|&&id| (1..=200).contains(&id) && id != 7 && id != 150)
                        .map(|&id| 1000 + id as u32),
                )
                .collect();
            assert_eq!(frames, want, "ids {ids:?}");
            assert_eq!(missing, ids.iter().copied().find(|id| !(1..=200).contains(id) || *id == 7 || *id == 150));
        }
        // A varint cut short is refused, as the general reading refuses it.
        assert_eq!(one_frame_each(&[0x81], &table, &mut Vec::new()), Err(Broken));
        // A location of two frames: no one-frame table.
        frames_of.insert(3, (5, 7));
        assert!(frames_of.one_frame().is_none());
    }

    #[test]
    fn a_message_up_to_the_limit_is_read_whole() {
        let mut out = Vec::new();
        limited(&[7u8; 1000][..], 1000, &mut out).unwrap();
        assert_eq!(out, [7u8; 1000]);
    }

    #[test]
    fn a_message_past_the_limit_is_refused_gzipped_or_not() {
        let mut out = Vec::new();
        assert!(matches!(limited(&[7u8; 1001][..], 1000, &mut out), Err(PprofError::TooLarge)));
        let bomb = gzip(&[0u8; 100_000]);
        assert!(bomb.len() < 1000, "{} bytes", bomb.len());
        let mut out = Vec::new();
        let decoder = flate2::read::MultiGzDecoder::new(&bomb[..]);
        assert!(matches!(limited(decoder, 1000, &mut out), Err(PprofError::TooLarge)));
        assert_eq!(out.len(), 1001, "decompressed no further than one byte past the limit");
    }

    /// A small valid message: two samples over one location and function.
    fn message() -> Vec<u8> {
        use crate::pprof::proto::{Function, Line, Sample, ValueType};
        let profile = Profile {
            sample_type: vec![ValueType { r#type: 1, unit: 2 }],
            sample: vec![Sample { location_id: vec![1], value: vec![5], label: vec![] }; 2],
            location: vec![Location { id: 1, line: vec![Line { function_id: 1, line: 7 }], ..Default::default() }],
            function: vec![Function { id: 1, name: 3, ..Default::default() }],
            string_table: vec!["".into(), "samples".into(), "count".into(), "main".into()],
            ..Default::default()
        };
        profile.encode_to_vec()
    }

    #[test]
    fn malformed_messages_are_located_where_the_decoder_refuses_them() {
        let good = message();
        assert!(Profile::decode(&good[..]).is_ok());
        assert_eq!(malformed(&good), None);
        // Hand-made faults, each refused by prost too; offsets and rules counted by hand.
        let cases: [(&[u8], u64, &str); 6] = [
            // Field 2 (sample), 10 bytes declared, 3 there.
            (&[0x12, 10, 0x08, 0x01, 0x10], 0, "Profile.sample: 10 bytes declared, 3 left in Profile"),
            // Field 2 as a varint.
            (&[0x10, 0x01], 0, "Profile.sample: wire type 0 where the schema has length-delimited"),
            // string_table entry "\xff".
            (&[0x32, 1, 0xff], 2, "Profile.string_table: a string that is not UTF-8"),
            // A sample whose packed values end inside a varint.
            (&[0x12, 3, 0x12, 1, 0x80], 4, "Profile.sample[0].value: a packed varint that does not end"),
            // A location with a line, then one whose second line has function_id as
            // length-delimited past its end (indexes count within each parent).
            (
                &[0x22, 4, 0x22, 2, 0x08, 1, 0x22, 6, 0x22, 0, 0x22, 2, 0x0a, 5],
                12,
                "Profile.location[1].line[1].function_id: 5 bytes declared, 0 left in Profile.location[1].line[1]",
            ),
            // time_nanos, then a key that does not end.
            (&[0x48, 0x01, 0x80], 2, "Profile: a field key that is not a whole varint"),
        ];
        for (bytes, offset, rule) in cases {
            assert!(Profile::decode(bytes).is_err(), "prost takes {bytes:?}");
            assert_eq!(malformed(bytes), Some((offset, rule.to_owned())), "{bytes:?}");
        }
    }

    /// The merged profile (pprof, gzipped) of `bytes` folded as a merge folds it, the frame
    /// table made first (`table_first`) or not (the names lent where they lie).
    fn folded(bytes: &[u8], table_first: bool) -> Vec<u8> {
        use crate::model::fold::{Fold, FoldOptions};
        use crate::output::{Destination, Output};
        let mut source = PprofSource::from_bytes(bytes, &SampleIndex::Default).unwrap();
        if table_first {
            source.frames();
        }
        let mut fold = Fold::new(FoldOptions { threads: true });
        fold.add(&mut source, &Output::Pprof, &mut |_| {}).unwrap();
        let mut out = Vec::new();
        crate::convert::convert(
            &mut fold.finish().unwrap(),
            &Output::Pprof,
            Destination::Stream(&mut out),
            &mut |_| {},
        )
        .unwrap();
        out
    }

    #[test]
    fn a_fold_of_the_names_lent_is_the_fold_of_the_frame_table() {
        use crate::pprof::proto::{Function, Label, Line, Mapping, Sample, ValueType};
        // Inlined lines, a bare address, a line of no function, a location no counted sample
        // names (its mapping used by no other), threads.
        let mapping = |id, start| Mapping {
            id,
            memory_start: start,
            memory_limit: start + 0x1000,
            filename: 7,
            ..Default::default()
        };
        let line = |function_id, line| Line { function_id, line };
        let sample = |location_id: Vec<u64>, value, thread| Sample {
            location_id,
            value: vec![value],
            label: vec![Label { key: 6, str: 0, num: thread }],
        };
        let made = Profile {
            sample_type: vec![ValueType { r#type: 1, unit: 2 }],
            sample: vec![sample(vec![1, 2, 3], 3, 7), sample(vec![3, 1], 2, 8), sample(vec![4], 0, 7)],
            mapping: vec![mapping(1, 0x1000), mapping(2, 0x8000)],
            location: vec![
                Location { id: 1, mapping_id: 1, address: 0x1010, line: vec![line(1, 3), line(2, 5)] },
                Location { id: 2, mapping_id: 1, address: 0x1234, line: vec![] },
                Location { id: 3, mapping_id: 0, address: 0x2000, line: vec![line(99, 1)] },
                Location { id: 4, mapping_id: 2, address: 0x8010, line: vec![] },
            ],
            function: vec![
                Function { id: 1, name: 3, filename: 5, ..Default::default() },
                Function { id: 2, name: 4, filename: 5, ..Default::default() },
            ],
            string_table: ["", "samples", "count", "inner", "outer", "a.py", "thread_id", "/bin/app"]
                .map(String::from)
                .to_vec(),
            ..Default::default()
        }
        .encode_to_vec();
        // Written by go tool pprof from libprofiler's recording (addresses in mappings).
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../qemu-tests/fixtures/recorded/gperftools-2.10/x86_64/go-pprof.pb.gz"
        );
        for bytes in [made, std::fs::read(path).unwrap()] {
            let lent = folded(&bytes, false);
            assert_eq!(lent, folded(&bytes, true));
            assert!(lent.len() > 100);
        }
    }

    #[test]
    fn a_damaged_gzip_stream_is_located_in_the_file() {
        let mut file = gzip(&message().repeat(200));
        let middle = file.len() / 2;
        file[middle] ^= 0xff;
        match PprofSource::open(&file[..], &SampleIndex::Default) {
            Err(PprofError::Gzip { offset, .. }) => {
                assert!((10..=file.len() as u64).contains(&offset), "offset {offset} of {}", file.len())
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("a damaged stream was read"),
        }
    }

    /// A thread keeps a file's storage for its next (the tables, the message, the fold's
    /// look-up tables): each file folds to the same bytes after any other, larger or smaller,
    /// as on a thread of its own that has kept nothing.
    #[test]
    fn a_file_read_in_the_storage_of_the_one_before_reads_as_on_its_own() {
        // Written by go tool pprof from libprofiler's recordings on two machines.
        let recorded = |machine: &str| {
            let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../qemu-tests/fixtures/recorded/gperftools-2.10/");
            std::fs::read(format!("{dir}{machine}/go-pprof.pb.gz")).unwrap()
        };
        let files = [recorded("x86_64"), three_locations([9, 4, 6], None), recorded("s390x")];
        // The file's tables as read, and its fold.
        let read = |f: &[u8]| {
            let tables = PprofSource::from_bytes(f, &SampleIndex::Default).unwrap().tables.clone();
            (tables, folded(f, false))
        };
        let alone: Vec<_> = files
            .iter()
            .map(|f| {
                let f = f.clone();
                std::thread::spawn(move || read(&f)).join().unwrap()
            })
            .collect();
        assert!(alone[0].1 != alone[1].1 && alone[1].1 != alone[2].1);
        std::thread::spawn(move || {
            for order in [[0, 1, 2, 0, 2, 1], [2, 1, 0, 1, 2, 0]] {
                for i in order {
                    assert!(read(&files[i]) == alone[i], "file {i} in the order {order:?}");
                }
            }
        })
        .join()
        .unwrap();
    }

    /// What a source opened from `bytes` gives: its calls, or its error as shown.
    fn outcome(source: Result<PprofSource, PprofError>) -> Result<Vec<(u64, Vec<u32>)>, String> {
        struct Stacks(Vec<(u64, Vec<u32>)>);
        impl Collector for Stacks {
            fn collect(&mut self, _: &FrameTable, call: &Call<'_>) {
                self.0.push((call.samples(), call.stack.to_vec()));
            }
        }
        let mut source = source.map_err(|e| e.to_string())?;
        let mut stacks = Stacks(Vec::new());
        source.replay(&mut stacks, &mut |_| {}).map_err(|e| e.to_string())?;
        Ok(stacks.0)
    }

    #[test]
    fn a_file_in_memory_reads_as_the_same_file_streamed_whole_cut_or_flipped() {
        let raw = three_locations([1, 2, 3], None);
        let named = {
            let mut encoder =
                flate2::GzBuilder::new().filename("cpu.pb").write(Vec::new(), flate2::Compression::fast());
            encoder.write_all(&raw).unwrap();
            encoder.finish().unwrap()
        };
        let two_members = [gzip(&raw[..9]), gzip(&raw[9..])].concat();
        let trailing = [gzip(&raw), vec![0x1f, 0x8b, 0]].concat();
        // The trailer again after the trailer: the last 8 bytes state the right CRC and size.
        let trailer_twice = [gzip(&raw), gzip(&raw)[gzip(&raw).len() - 8..].to_vec()].concat();
        // What the one-call reading takes, and what it leaves to the stream.
        let whole = |file: &[u8]| {
            let mut room = Vec::with_capacity(gunzipped_size_hint(file));
            gunzip_whole(file, &mut room).then_some(room)
        };
        assert_eq!(whole(&gzip(&raw)), Some(raw.clone()));
        for other in [&named, &two_members, &trailing, &trailer_twice] {
            assert_eq!(whole(other), None);
        }
        // Bytes after the last member are refused, located alike.
        for file in [trailing, trailer_twice] {
            let after = outcome(PprofSource::from_bytes(&file, &SampleIndex::Default));
            assert!(after.is_err());
            assert_eq!(after, outcome(PprofSource::open(&file[..], &SampleIndex::Default)));
        }
        for file in [gzip(&raw), raw.clone(), two_members, named] {
            assert_eq!(gunzipped_size_hint(&file[..3]), 1);
            let whole = outcome(PprofSource::from_bytes(&file, &SampleIndex::Default));
            assert_eq!(whole.as_ref().map(Vec::len), Ok(2));
            for cut in 0..=file.len() {
                let (a, b) = (&file[..cut], &file[..cut]);
                assert_eq!(
                    outcome(PprofSource::from_bytes(a, &SampleIndex::Default)),
                    outcome(PprofSource::open(b, &SampleIndex::Default)),
                    "cut at {cut}"
                );
            }
            for at in 0..file.len() {
                let mut flipped = file.clone();
                flipped[at] ^= 0x55;
                assert_eq!(
                    outcome(PprofSource::from_bytes(&flipped, &SampleIndex::Default)),
                    outcome(PprofSource::open(&flipped[..], &SampleIndex::Default)),
                    "flipped at {at}"
                );
            }
        }
    }

    #[test]
    fn a_gzip_trailer_stating_a_wrong_size_is_refused_and_sizes_no_buffer_past_the_file() {
        let mut file = gzip(&three_locations([1, 2, 3], None));
        let (at, len) = (file.len() - 4, file.len());
        assert_eq!(gunzipped_size_hint(&file), three_locations([1, 2, 3], None).len() + 1);
        for (stated, hint) in [(0u32, 1), (1, 2), (u32::MAX, len * 64 + 1)] {
            file[at..].copy_from_slice(&stated.to_le_bytes());
            assert_eq!(gunzipped_size_hint(&file), hint);
            // (A size it could not have made is refused by the decompressor's own check.)
            match PprofSource::from_bytes(&file, &SampleIndex::Default) {
                Err(PprofError::Gzip { offset, .. }) => assert_eq!(offset, file.len() as u64),
                other => panic!("stated {stated}: {:?}", outcome(other)),
            }
        }
    }

    /// Two samples over three locations with the ids given (each a function of its own,
    /// named `f0`, `f1`, `f2`), the first sample naming `missing` too when given.
    fn three_locations(ids: [u64; 3], missing: Option<u64>) -> Vec<u8> {
        use crate::pprof::proto::{Function, Line, Sample, ValueType};
        let mut first = vec![ids[0], ids[1], ids[2]];
        first.extend(missing);
        Profile {
            sample_type: vec![ValueType { r#type: 1, unit: 2 }],
            sample: vec![
                Sample { location_id: first, value: vec![3], label: vec![] },
                Sample { location_id: vec![ids[2], ids[0]], value: vec![4], label: vec![] },
            ],
            location: (0..3)
                .map(|i| Location {
                    id: ids[i],
                    line: vec![Line { function_id: i as u64 + 1, line: 1 }],
                    ..Default::default()
                })
                .collect(),
            function: (0..3).map(|i| Function { id: i + 1, name: 3 + i as i64, ..Default::default() }).collect(),
            string_table: ["", "samples", "count", "f0", "f1", "f2"].map(String::from).to_vec(),
            ..Default::default()
        }
        .encode_to_vec()
    }

    /// (samples, function names innermost first) of every call.
    fn calls(bytes: &[u8]) -> Result<Vec<(u64, Vec<String>)>, PprofError> {
        struct Names(Vec<(u64, Vec<String>)>);
        impl Collector for Names {
            fn collect(&mut self, frames: &FrameTable, call: &Call<'_>) {
                let names = call.stack.iter().map(|&id| frames.frame(id).funcname.clone()).collect();
                self.0.push((call.samples(), names));
            }
        }
        let mut source = PprofSource::open(bytes, &SampleIndex::Default)?;
        let mut names = Names(Vec::new());
        source.replay(&mut names, &mut |_| {})?;
        Ok(names.0)
    }

    #[test]
    fn locations_are_found_whether_their_ids_are_dense_or_far_apart() {
        let want = vec![
            (3, vec!["f0".to_owned(), "f1".to_owned(), "f2".to_owned()]),
            (4, vec!["f2".to_owned(), "f0".to_owned()]),
        ];
        // 1..=3 (go's and ours), then ids past any table by id (a hash look-up each).
        for ids in [[1, 2, 3], [3, 1, 2], [7, 1 << 40, u64::MAX]] {
            assert_eq!(calls(&three_locations(ids, None)).unwrap(), want, "ids {ids:?}");
        }
        // An id no location has, inside and outside the table's range.
        for (ids, missing) in [([1, 2, 3], 4), ([1, 2, 3], 1 << 40), ([7, 1 << 40, u64::MAX], 8)] {
            match calls(&three_locations(ids, Some(missing))) {
                Err(PprofError::Invalid(why)) => {
                    assert_eq!(why, format!("a sample names location {missing}, which is not in the profile"))
                }
                other => {
                    panic!("ids {ids:?}, missing {missing}: {:?}", other.map(|c| c.len()).map_err(|e| e.to_string()))
                }
            }
        }
    }

    #[test]
    fn an_endless_message_ends_at_the_limit() {
        let mut out = Vec::new();
        assert!(matches!(limited(std::io::repeat(0), 1 << 16, &mut out), Err(PprofError::TooLarge)));
        assert_eq!(out.len(), (1 << 16) + 1);
    }
}
