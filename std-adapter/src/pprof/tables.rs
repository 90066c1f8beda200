//! A `perftools.profiles.Profile`'s fields but its samples, read where they lie: the strings
//! checked UTF-8 once and kept end to end in one buffer, each location's lines in one vector
//! for all.
//! prost makes a string per entry of the string table and a vector per location, and a
//! merge of thousands of small files spent about a tenth of its time making and freeing them
//! (measured).
//!
//! The fields read (the rest skipped by wire type, as prost skips fields it does not know):
//!
//! | message | field | number, wire type |
//! |---|---|---|
//! | `Profile` | `sample_type`, `mapping`, `location`, `function` | 1, 3, 4, 5: length-delimited (repeated) |
//! | `Profile` | `string_table` | 6, length-delimited UTF-8 (repeated) |
//! | `Profile` | `time_nanos`, `duration_nanos`, `period`, `default_sample_type` | 9, 10, 12, 14: varint |
//! | `Profile` | `period_type` | 11, length-delimited (merged when repeated) |
//! | `Profile` | `comment` | 13, varint or packed (repeated) |
//! | `ValueType` | `type`, `unit` | 1, 2: varint |
//! | `Mapping` | `id` … `has_inline_frames` | 1–10: varint |
//! | `Location` | `id`, `mapping_id`, `address` | 1–3: varint |
//! | `Location` | `line` | 4, length-delimited (repeated) |
//! | `Line` | `function_id`, `line` | 1, 2: varint |
//! | `Function` | `id`, `name`, `system_name`, `filename`, `start_line` | 1–5: varint |
//!
//! The samples (2) are left where they are ([`super::samples`]). A singular field given twice
//! keeps the last, as prost does. Whatever prost would refuse, and a little it would take (a
//! group), is [`Broken`]: the caller then has prost decode the message, so this reading
//! never gives what prost would not.

use super::proto::{Function, Line, Location, Mapping, Profile, ValueType};
use super::samples::{delimited, key, skip, varint, Broken, LENGTH, VARINT};

/// The fields of a profile but its samples.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Tables {
    pub(super) sample_type: Vec<ValueType>,
    pub(super) mapping: Vec<Mapping>,
    /// Each location, its lines `lines[first..end]`.
    pub(super) location: Vec<LocationRow>,
    pub(super) lines: Vec<Line>,
    pub(super) function: Vec<Function>,
    pub(super) strings: Strings,
    pub(super) time_nanos: i64,
    pub(super) duration_nanos: i64,
    pub(super) period_type: Option<ValueType>,
    pub(super) period: i64,
    pub(super) default_sample_type: i64,
    /// Where the samples lie in the message read in place: from the first one's key to the
    /// last one's end (empty without samples, and in prost's tables). Go and this project
    /// write the samples before the tables, so a pass over the samples stops there instead
    /// of skipping every location, function and string after them.
    pub(super) samples: std::ops::Range<usize>,
}

/// A location without its lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct LocationRow {
    pub(super) id: u64,
    pub(super) mapping_id: u64,
    pub(super) address: u64,
    pub(super) lines: (u32, u32),
}

/// The string table: end to end in one buffer, or prost's strings.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Strings {
    /// The strings, and where each ends in them.
    Packed(String, Vec<u32>),
    Owned(Vec<String>),
}

impl Default for Strings {
    fn default() -> Self {
        Strings::Owned(Vec::new())
    }
}

impl Tables {
    /// The tables of the message `raw`, read where they lie; `raw` is at most 4 GiB (places
    /// are `u32`s).
    #[cfg(test)]
    pub(super) fn read(raw: &[u8]) -> Result<Tables, Broken> {
        Tables::read_with(raw, Tables::default(), |_| Ok(()))
    }

    /// [`Tables::read`], handing each sample's message to `each_sample` as it is passed: a
    /// first pass over the samples made in the same walk (a walk of its own over the samples
    /// was 1.4% of the instructions of a merge of small files, measured).
    /// The tables are made in the storage of `spare` (its contents dropped).
    pub(super) fn read_with(
        raw: &[u8],
        spare: Tables,
        mut each_sample: impl FnMut(&[u8]) -> Result<(), Broken>,
    ) -> Result<Tables, Broken> {
        u32::try_from(raw.len()).map_err(|_| Broken)?;
        let (mut t, mut text, mut ends) = spare.emptied();
        let mut at = 0;
        let mut samples: Option<std::ops::Range<usize>> = None;
        while at < raw.len() {
            let field_at = at;
            match key(raw, &mut at)? {
                (1, LENGTH) => t.sample_type.push(value_type(delimited(raw, &mut at)?, ValueType::default())?),
                (3, LENGTH) => t.mapping.push(mapping(delimited(raw, &mut at)?)?),
                (4, LENGTH) => {
                    let row = location(delimited(raw, &mut at)?, &mut t.lines)?;
                    t.location.push(row);
                }
                (5, LENGTH) => t.function.push(function(delimited(raw, &mut at)?)?),
                (6, LENGTH) => {
                    text.push_str(std::str::from_utf8(delimited(raw, &mut at)?).map_err(|_| Broken)?);
                    ends.push(text.len() as u32);
                }
                (9, VARINT) => t.time_nanos = varint(raw, &mut at)? as i64,
                (10, VARINT) => t.duration_nanos = varint(raw, &mut at)? as i64,
                (11, LENGTH) => {
                    let merged = value_type(delimited(raw, &mut at)?, t.period_type.clone().unwrap_or_default())?;
                    t.period_type = Some(merged);
                }
                (12, VARINT) => t.period = varint(raw, &mut at)? as i64,
                (13, VARINT) => drop(varint(raw, &mut at)?),
                (13, LENGTH) => {
                    let packed = delimited(raw, &mut at)?;
                    let mut p = 0;
                    while p < packed.len() {
                        varint(packed, &mut p)?;
                    }
                }
                (14, VARINT) => t.default_sample_type = varint(raw, &mut at)? as i64,
                // The samples, read elsewhere, and a known field of another wire type.
                (2, LENGTH) => {
                    each_sample(delimited(raw, &mut at)?)?;
                    samples = Some(samples.map_or(field_at, |s| s.start)..at);
                }
                (1..=6 | 9..=14, _) => return Err(Broken),
                (_, wire) => skip(raw, &mut at, wire)?,
            }
        }
        t.strings = Strings::Packed(text, ends);
        t.samples = samples.unwrap_or_default();
        Ok(t)
    }

    /// Empty tables in this one's storage, and its string table's two buffers, emptied.
    fn emptied(self) -> (Tables, String, Vec<u32>) {
        let Tables { mut sample_type, mut mapping, mut location, mut lines, mut function, strings, .. } = self;
        sample_type.clear();
        mapping.clear();
        location.clear();
        lines.clear();
        function.clear();
        let (mut text, mut ends) = match strings {
            Strings::Packed(text, ends) => (text, ends),
            Strings::Owned(_) => (String::new(), Vec::new()),
        };
        text.clear();
        ends.clear();
        let t = Tables { sample_type, mapping, location, lines, function, ..Tables::default() };
        (t, text, ends)
    }

    /// The tables of prost's decoding (its samples left out).
    pub(super) fn of(profile: Profile) -> Tables {
        let mut lines = Vec::new();
        let location = profile
            .location
            .into_iter()
            .map(|l: Location| {
                let first = lines.len() as u32;
                lines.extend(l.line);
                LocationRow {
                    id: l.id,
                    mapping_id: l.mapping_id,
                    address: l.address,
                    lines: (first, lines.len() as u32),
                }
            })
            .collect();
        Tables {
            sample_type: profile.sample_type,
            mapping: profile.mapping,
            location,
            lines,
            function: profile.function,
            strings: Strings::Owned(profile.string_table),
            time_nanos: profile.time_nanos,
            duration_nanos: profile.duration_nanos,
            period_type: profile.period_type,
            period: profile.period,
            default_sample_type: profile.default_sample_type,
            samples: 0..0,
        }
    }

    /// How many strings the table has.
    pub(super) fn string_count(&self) -> usize {
        match &self.strings {
            Strings::Packed(_, ends) => ends.len(),
            Strings::Owned(strings) => strings.len(),
        }
    }

    /// String `i` of the table.
    pub(super) fn string(&self, i: usize) -> Option<&str> {
        match &self.strings {
            Strings::Packed(text, ends) => {
                let end = *ends.get(i)? as usize;
                let start = if i == 0 { 0 } else { ends[i - 1] as usize };
                text.get(start..end)
            }
            Strings::Owned(strings) => strings.get(i).map(String::as_str),
        }
    }

    /// The lines of `location`.
    pub(super) fn lines_of(&self, location: &LocationRow) -> &[Line] {
        let (first, end) = location.lines;
        self.lines.get(first as usize..end as usize).unwrap_or_default()
    }
}

/// Each field of a message whose known fields (numbered 1 to `known`) are all varints: a
/// known one handed to `set` as `(number, value)`, another of the wrong wire type
/// [`Broken`], the rest skipped.
fn varint_fields(body: &[u8], known: u64, mut set: impl FnMut(u64, u64)) -> Result<(), Broken> {
    let mut at = 0;
    while at < body.len() {
        match key(body, &mut at)? {
            (number, VARINT) if number <= known => set(number, varint(body, &mut at)?),
            (number, _) if number <= known => return Err(Broken),
            (_, wire) => skip(body, &mut at, wire)?,
        }
    }
    Ok(())
}

/// A `ValueType` message merged into `into`.
fn value_type(body: &[u8], mut into: ValueType) -> Result<ValueType, Broken> {
    varint_fields(body, 2, |number, v| match number {
        1 => into.r#type = v as i64,
        _ => into.unit = v as i64,
    })?;
    Ok(into)
}

fn mapping(body: &[u8]) -> Result<Mapping, Broken> {
    let mut m = Mapping::default();
    varint_fields(body, 10, |number, v| match number {
        1 => m.id = v,
        2 => m.memory_start = v,
        3 => m.memory_limit = v,
        4 => m.file_offset = v,
        5 => m.filename = v as i64,
        6 => m.build_id = v as i64,
        7 => m.has_functions = v != 0,
        8 => m.has_filenames = v != 0,
        9 => m.has_line_numbers = v != 0,
        _ => m.has_inline_frames = v != 0,
    })?;
    Ok(m)
}

/// A `Location` message, its lines appended to `lines`.
fn location(body: &[u8], lines: &mut Vec<Line>) -> Result<LocationRow, Broken> {
    let mut row = LocationRow::default();
    let first = lines.len();
    let mut at = 0;
    while at < body.len() {
        match key(body, &mut at)? {
            (1, VARINT) => row.id = varint(body, &mut at)?,
            (2, VARINT) => row.mapping_id = varint(body, &mut at)?,
            (3, VARINT) => row.address = varint(body, &mut at)?,
            (4, LENGTH) => lines.push(line(delimited(body, &mut at)?)?),
            (1..=4, _) => return Err(Broken),
            (_, wire) => skip(body, &mut at, wire)?,
        }
    }
    let places = (u32::try_from(first), u32::try_from(lines.len()));
    let (Ok(first), Ok(end)) = places else { return Err(Broken) };
    row.lines = (first, end);
    Ok(row)
}

fn line(body: &[u8]) -> Result<Line, Broken> {
    let mut l = Line::default();
    varint_fields(body, 2, |number, v| match number {
        1 => l.function_id = v,
        _ => l.line = v as i64,
    })?;
    Ok(l)
}

fn function(body: &[u8]) -> Result<Function, Broken> {
    let mut f = Function::default();
    varint_fields(body, 5, |number, v| match number {
        1 => f.id = v,
        2 => f.name = v as i64,
        3 => f.system_name = v as i64,
        4 => f.filename = v as i64,
        _ => f.start_line = v as i64,
    })?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;

    use prost::Message;

    use super::*;
    use crate::pprof::proto::Sample;
    use crate::pprof::samples;

    /// `tables` with its strings as strings, `raw` the message it was read from.
    fn owned(mut tables: Tables) -> Tables {
        let strings = (0..tables.string_count()).map(|i| tables.string(i).unwrap().to_owned()).collect();
        tables.strings = Strings::Owned(strings);
        // (Places in the message, which prost's tables do not keep.)
        tables.samples = 0..0;
        tables
    }

    /// What prost makes of `raw`, as tables, or its refusal.
    fn prost(raw: &[u8]) -> Option<Tables> {
        Profile::decode(raw).ok().map(|p| Tables::of(Profile { sample: Vec::new(), ..p }))
    }

    /// A message with every field read here, several lines a location, samples between the
    /// tables, and what prost skips or merges: unknown fields of each wire type, a singular
    /// field given twice, `period_type` given twice, packed and unpacked comments.
    fn every_field() -> Vec<u8> {
        let profile = Profile {
            sample_type: vec![ValueType { r#type: 1, unit: 2 }, ValueType { r#type: 3, unit: 4 }],
            sample: vec![Sample { location_id: vec![1, 2], value: vec![5, 6], label: vec![] }],
            mapping: vec![Mapping {
                id: 1,
                memory_start: 0x1000,
                memory_limit: u64::MAX,
                file_offset: 7,
                filename: 5,
                build_id: 6,
                has_functions: true,
                has_filenames: false,
                has_line_numbers: true,
                has_inline_frames: true,
            }],
            location: vec![
                Location {
                    id: 1,
                    mapping_id: 1,
                    address: 0x1234,
                    line: vec![Line { function_id: 1, line: -3 }, Line { function_id: 2, line: 1 << 40 }],
                },
                Location { id: 2, mapping_id: 0, address: 0, line: vec![] },
            ],
            function: vec![
                Function { id: 1, name: 7, system_name: 8, filename: 9, start_line: 12 },
                Function { id: 2, name: 8, system_name: 0, filename: 9, start_line: -1 },
            ],
            string_table: ["", "samples", "count", "cpu", "nanoseconds", "/bin/app", "0a0b", "main", "läuft", "a.py"]
                .map(String::from)
                .to_vec(),
            time_nanos: 11,
            duration_nanos: 12,
            period_type: Some(ValueType { r#type: 3, unit: 4 }),
            period: 1_000_000,
            comment: vec![7, 8],
            default_sample_type: 3,
        };
        let mut raw = profile.encode_to_vec();
        raw.extend([0x38, 0x05]); // drop_frames (7), unknown to this schema
        raw.extend([0x7a, 0x02, b'h', b'i']); // doc_url (15)
        raw.extend([0x9d, 0x06, 1, 2, 3, 4]); // field 99, fixed32
        raw.extend([0x99, 0x06, 1, 2, 3, 4, 5, 6, 7, 8]); // field 99, fixed64
        raw.extend([0x48, 0x2a]); // time_nanos again: the last counts
        raw.extend([0x5a, 0x02, 0x10, 0x01]); // period_type again, its unit only: merged
        raw.extend([0x68, 0x09]); // a comment unpacked
        raw
    }

    #[test]
    fn tables_read_in_place_are_what_prost_decodes() {
        let raw = every_field();
        let read = owned(Tables::read(&raw).unwrap());
        assert_eq!(Some(read.clone()), prost(&raw));
        assert_eq!((read.time_nanos, read.period_type.clone()), (42, Some(ValueType { r#type: 3, unit: 1 })));
        assert_eq!(read.lines_of(&read.location[0]).len(), 2);
    }

    #[test]
    fn a_known_field_of_another_wire_type_is_refused_as_prost_refuses_it() {
        // A field `number` of wire type `wire`, with a value of that type.
        let field = |number: u8, wire: u8| -> Vec<u8> {
            let mut bytes = vec![number << 3 | wire];
            bytes.extend(match wire {
                0 => vec![0x01],
                1 => vec![0; 8],
                2 => vec![0x00],
                _ => vec![0; 4],
            });
            bytes
        };
        // Per message: where it sits in a Profile (0: at the top), its fields and the wire
        // type each must have (2: length-delimited, 0: varint; 13 takes both).
        // (A field's number and the wire types it may have.)
        type Fields<'a> = &'a [(u8, &'a [u8])];
        let messages: [(Option<u8>, Fields); 6] = [
            (
                None,
                &[
                    (1, &[2]),
                    (3, &[2]),
                    (4, &[2]),
                    (5, &[2]),
                    (6, &[2]),
                    (9, &[0]),
                    (10, &[0]),
                    (11, &[2]),
                    (12, &[0]),
                    (13, &[0, 2]),
                    (14, &[0]),
                ],
            ),
            (Some(1), &[(1, &[0]), (2, &[0])]),
            (
                Some(3),
                &[
                    (1, &[0]),
                    (2, &[0]),
                    (3, &[0]),
                    (4, &[0]),
                    (5, &[0]),
                    (6, &[0]),
                    (7, &[0]),
                    (8, &[0]),
                    (9, &[0]),
                    (10, &[0]),
                ],
            ),
            (Some(4), &[(1, &[0]), (2, &[0]), (3, &[0]), (4, &[2])]),
            (Some(5), &[(1, &[0]), (2, &[0]), (3, &[0]), (4, &[0]), (5, &[0])]),
            (Some(4), &[(1, &[0]), (2, &[0])]),
        ];
        let mut refused = 0;
        for (i, (inside, fields)) in messages.iter().enumerate() {
            for &(number, right) in *fields {
                for wire in [0, 1, 2, 5] {
                    let mut body = field(number, wire);
                    if i == 5 {
                        // A Line, inside a Location's field 4.
                        body = [vec![0x22, body.len() as u8], body].concat();
                    }
                    let raw = match inside {
                        None => body,
                        Some(outer) => [vec![outer << 3 | 2, body.len() as u8], body].concat(),
                    };
                    let prost_takes = prost(&raw).is_some();
                    let read = Tables::read(&raw);
                    if right.contains(&wire) {
                        assert!(prost_takes && read.is_ok(), "message {i} field {number} wire {wire}: {raw:02x?}");
                    } else {
                        assert!(!prost_takes, "prost takes message {i} field {number} wire {wire}");
                        assert_eq!(read, Err(Broken), "message {i} field {number} wire {wire}: {raw:02x?}");
                        refused += 1;
                    }
                }
            }
        }
        assert!(refused > 80, "{refused}");
    }

    /// The message's tables read here, if they are and its samples are too (what the pprof
    /// source takes without prost).
    fn in_place(raw: &[u8]) -> Option<Tables> {
        let mut sample = samples::Sample::default();
        let samples_read = samples::bodies(raw).all(|body| body.and_then(|b| sample.read_without_locations(b)).is_ok());
        let read = Tables::read(raw).ok()?;
        // The samples where the tables say they lie are every sample of the message.
        let (within, all) = (samples::bodies(&raw[read.samples.clone()]), samples::bodies(raw));
        assert!(within.eq(all), "the samples at {:?}", read.samples);
        samples_read.then_some(read)
    }

    /// Cut at every byte and each byte flipped: whatever this reading takes, prost takes as
    /// the same tables (and the reading takes most of what prost takes).
    fn never_more_than_prost(raw: &[u8]) {
        let (mut taken, mut by_prost) = (0, 0);
        let mut check = |bytes: &[u8], what: &str| {
            let prost = prost(bytes);
            by_prost += usize::from(prost.is_some() && samples::bodies(bytes).all(|b| b.is_ok()));
            if let Some(read) = in_place(bytes) {
                assert_eq!(Some(owned(read)), prost, "{what}");
                taken += 1;
            }
        };
        for cut in 0..=raw.len() {
            check(&raw[..cut], &format!("cut at {cut}"));
        }
        for at in 0..raw.len() {
            for flip in [0x01, 0x80, 0xff] {
                let mut bytes = raw.to_vec();
                bytes[at] ^= flip;
                check(&bytes, &format!("byte {at} ^ {flip:#x}"));
            }
        }
        assert!(taken * 10 >= by_prost * 9, "{taken} variants read here, {by_prost} by prost");
    }

    #[test]
    fn a_message_cut_or_flipped_is_read_as_prost_reads_it_or_not_at_all() {
        never_more_than_prost(&every_field());
    }

    #[test]
    fn go_pprofs_own_file_is_read_as_prost_reads_it_cut_or_flipped() {
        // Written by go tool pprof from libprofiler's recording (the fixture's README).
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../qemu-tests/fixtures/recorded/gperftools-2.10/x86_64/go-pprof.pb.gz"
        );
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap()).read_to_end(&mut raw).unwrap();
        let read = owned(Tables::read(&raw).unwrap());
        assert!(read.location.len() > 10 && read.string_count() > 5, "{read:?}");
        assert_eq!(Some(read), prost(&raw));
        never_more_than_prost(&raw);
    }
}
