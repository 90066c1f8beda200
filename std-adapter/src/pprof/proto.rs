//! `profile.proto` (github.com/google/pprof, proto/profile.proto): the messages, as prost
//! encodes and decodes them (the fields this crate reads and writes), and the schema walk that
//! says where a message that does not decode first breaks the wire format or the schema.

use prost::Message;

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

/// What a field of `profile.proto` holds, for [`malformed`].
#[derive(Clone, Copy, PartialEq)]
enum Field {
    /// An integer or bool: a varint, or a packed run of them for a repeated one.
    Number,
    /// UTF-8 text.
    Text,
    /// A nested message of the schema numbered so.
    Message(usize),
}

/// A field of the schema: its number, its name, what it holds.
type FieldDef = (u32, &'static str, Field);

/// The schema of `perftools.profiles` (profile.proto): per message, its fields by number.
/// Messages: 0 Profile, 1 ValueType, 2 Sample, 3 Label, 4 Mapping, 5 Location, 6 Line,
/// 7 Function.
const SCHEMA: [(&str, &[FieldDef]); 8] = {
    use Field::{Message as M, Number as N, Text as T};
    [
        (
            "Profile",
            &[
                (1, "sample_type", M(1)),
                (2, "sample", M(2)),
                (3, "mapping", M(4)),
                (4, "location", M(5)),
                (5, "function", M(7)),
                (6, "string_table", T),
                (7, "drop_frames", N),
                (8, "keep_frames", N),
                (9, "time_nanos", N),
                (10, "duration_nanos", N),
                (11, "period_type", M(1)),
                (12, "period", N),
                (13, "comment", N),
                (14, "default_sample_type", N),
                (15, "doc_url", N),
            ],
        ),
        ("ValueType", &[(1, "type", N), (2, "unit", N)]),
        ("Sample", &[(1, "location_id", N), (2, "value", N), (3, "label", M(3))]),
        ("Label", &[(1, "key", N), (2, "str", N), (3, "num", N), (4, "num_unit", N)]),
        (
            "Mapping",
            &[
                (1, "id", N),
                (2, "memory_start", N),
                (3, "memory_limit", N),
                (4, "file_offset", N),
                (5, "filename", N),
                (6, "build_id", N),
                (7, "has_functions", N),
                (8, "has_filenames", N),
                (9, "has_line_numbers", N),
                (10, "has_inline_frames", N),
            ],
        ),
        ("Location", &[(1, "id", N), (2, "mapping_id", N), (3, "address", N), (4, "line", M(6)), (5, "is_folded", N)]),
        ("Line", &[(1, "function_id", N), (2, "line", N), (3, "column", N)]),
        ("Function", &[(1, "id", N), (2, "name", N), (3, "system_name", N), (4, "filename", N), (5, "start_line", N)]),
    ]
};

/// Where `message` first breaks the protobuf wire format or profile.proto's schema: its
/// offset and the rule, naming the fields it is in (`Profile.sample[3].value`); `None`
/// when the walk finds nothing (the decoder's own error then stands alone). Nested messages
/// are walked with an explicit stack, never deeper than the schema's three levels.
pub fn malformed(message: &[u8]) -> Option<(u64, String)> {
    // Per open message: its type, where it ends, its path, and how many of each nested
    // message type it has held so far (for the path's indexes).
    let mut stack: Vec<(usize, usize, String, [u64; 8])> = vec![(0, message.len(), "Profile".to_owned(), [0; 8])];
    let mut at = 0usize;
    let varint = |at: &mut usize, end: usize| -> Option<u64> {
        let mut value = 0u64;
        for shift in 0..10 {
            let b = *message.get(*at).filter(|_| *at < end)?;
            *at += 1;
            value |= u64::from(b & 0x7f) << (7 * shift);
            if b & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    };
    while let Some((ty, end, path, _)) = stack.last().cloned() {
        if at >= end {
            stack.pop();
            continue;
        }
        let start = at;
        let Some(key) = varint(&mut at, end) else {
            return Some((start as u64, format!("{path}: a field key that is not a whole varint")));
        };
        let (number, wire) = ((key >> 3) as u32, key & 7);
        let (name, field) = match SCHEMA[ty].1.iter().find(|f| f.0 == number) {
            Some(&(_, name, field)) => (name, Some(field)),
            None => ("", None),
        };
        let here = if name.is_empty() { format!("{path}.{number}") } else { format!("{path}.{name}") };
        match (wire, field) {
            (0, Some(Field::Number) | None) => {
                if varint(&mut at, end).is_none() {
                    return Some((start as u64, format!("{here}: a varint that does not end")));
                }
            }
            (1, None) => at += 8,
            (5, None) => at += 4,
            (2, _) => {
                let Some(len) = varint(&mut at, end) else {
                    return Some((start as u64, format!("{here}: a length that is not a whole varint")));
                };
                if len > (end - at) as u64 {
                    return Some((start as u64, format!("{here}: {len} bytes declared, {} left in {path}", end - at)));
                }
                let (body, next) = (at, at + len as usize);
                at = next;
                match field {
                    Some(Field::Text) if std::str::from_utf8(&message[body..next]).is_err() => {
                        return Some((body as u64, format!("{here}: a string that is not UTF-8")));
                    }
                    Some(Field::Number) => {
                        let mut p = body;
                        while p < next {
                            let value = p;
                            if varint(&mut p, next).is_none() {
                                return Some((value as u64, format!("{here}: a packed varint that does not end")));
                            }
                        }
                    }
                    Some(Field::Message(inner)) => {
                        let counts = stack.last_mut().map(|frame| &mut frame.3[inner]);
                        let i = counts.map_or(0, |n| std::mem::replace(n, *n + 1));
                        stack.push((inner, next, format!("{here}[{i}]"), [0; 8]));
                        at = body;
                    }
                    _ => {}
                }
            }
            (3 | 4, _) => return Some((start as u64, format!("{here}: a group, which proto3 does not have"))),
            (6.., _) => return Some((start as u64, format!("{here}: wire type {wire}, which does not exist"))),
            (_, Some(f)) => {
                let want = if f == Field::Number { "a varint" } else { "length-delimited" };
                return Some((start as u64, format!("{here}: wire type {wire} where the schema has {want}")));
            }
        }
        if at > end {
            return Some((start as u64, format!("{here}: a fixed-width value past the end of {path}")));
        }
    }
    None
}
