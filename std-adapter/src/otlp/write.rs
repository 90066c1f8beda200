//! The hub written as an OTLP `ExportProfilesServiceRequest`: the request made of a
//! [`StackCounts`] aggregate ([`request`]), then encoded as protobuf ([`write_protobuf`]) or
//! as OTLP/JSON ([`write_json`]).

use std::collections::HashMap;
use std::io::{self, Write};

use prost::Message;

use super::proto::{
    AnyValue, ExportProfilesServiceRequest, Function, InstrumentationScope, KeyValue, KeyValueAndUnit, Line, Location,
    Mapping, Profile, ProfilesDictionary, Resource, ResourceProfiles, Sample, ScopeProfiles, Stack, Value, ValueType,
};
use super::{attribute, DEFAULT_SERVICE_NAME, SCOPE_NAME};
use crate::hash::StringIndex;
use crate::model::stacks::{Locations, StackCounts};
use crate::model::{FrameTable, SourceInfo, UnixSpan};

/// The dictionary's attribute table, each distinct (key, value) once after the zero entry.
struct Attributes {
    table: Vec<KeyValueAndUnit>,
    index: HashMap<(i32, AttributeValue), i32>,
}

#[derive(Clone, PartialEq, Eq, Hash)]
enum AttributeValue {
    Str(String),
    Int(i64),
}

impl Attributes {
    fn new() -> Self {
        Attributes { table: vec![KeyValueAndUnit::default()], index: HashMap::new() }
    }

    fn index(&mut self, key: i32, value: AttributeValue) -> i32 {
        let next = index(self.table.len());
        let table = &mut self.table;
        *self.index.entry((key, value)).or_insert_with_key(|(key, value)| {
            let value = match value {
                AttributeValue::Str(s) => Value::StringValue(s.clone()),
                AttributeValue::Int(i) => Value::IntValue(*i),
            };
            table.push(KeyValueAndUnit {
                key_strindex: *key,
                value: Some(AnyValue { value: Some(value) }),
                unit_strindex: 0,
            });
            next
        })
    }
}

/// A table index as OTLP's `int32` fields hold it (no table of this size fits in memory; the
/// cap keeps the conversion total).
fn index(i: usize) -> i32 {
    i32::try_from(i).unwrap_or(i32::MAX)
}

fn key_value(key: &str, value: &str) -> KeyValue {
    KeyValue { key: key.to_owned(), value: Some(AnyValue { value: Some(Value::StringValue(value.to_owned())) }) }
}

/// A build id as a GNU build id attribute when it is one (hexadecimal); other kinds of ids
/// (Go's) have no attribute of the semantic conventions that says which kind they are.
fn is_gnu_build_id(id: &str) -> bool {
    !id.is_empty() && id.len() % 2 == 0 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The request for the samples `counts` holds of `info`'s input: one resource named
/// `service_name` (OpenTelemetry's `unknown_service` when `None`), one scope (this converter,
/// with the input's format and the profiling mode), one profile per sample type (`samples`
/// in `count`, then `<mode>` in `nanoseconds`), each sample keyed by stack and thread and
/// carrying its timestamps when `counts` kept them. Times are Unix time: a profile on a
/// monotonic clock is placed so that its last sample is at `written_unix_us` (when the file
/// was written), a profile without times is dated then.
pub fn request(
    counts: &StackCounts,
    frames: &FrameTable,
    info: &SourceInfo,
    written_unix_us: Option<u64>,
    service_name: Option<&str>,
) -> ExportProfilesServiceRequest {
    let mut strings = StringIndex::default();
    let mut id = |s: &str| index(strings.id(s) as usize);
    id("");
    let mut attributes = Attributes::new();

    let mappings = std::iter::once(Mapping::default())
        .chain(frames.mappings.iter().map(|m| Mapping {
            memory_start: m.start,
            memory_limit: m.limit,
            file_offset: m.offset,
            filename_strindex: id(&m.file),
            attribute_indices: if is_gnu_build_id(&m.build_id) {
                vec![attributes.index(id(attribute::BUILD_ID_GNU), AttributeValue::Str(m.build_id.clone()))]
            } else {
                Vec::new()
            },
        }))
        .collect();

    // The stack table is the distinct stacks, in the order entries first reach them (which
    // is their ids' order), after the empty stack OTLP's index 0 is; locations are made as
    // the stacks first reach them.
    let mut tables = Locations::new(frames);
    let stack_table: Vec<Stack> = std::iter::once(Stack::default())
        .chain(counts.stacks().iter().map(|frames| Stack {
            location_indices: frames.iter().map(|&f| index(tables.location(f) as usize + 1)).collect(),
        }))
        .collect();
    let frame_type = id(attribute::FRAME_TYPE);
    let location_table = std::iter::once(Location::default())
        .chain(tables.locations.iter().map(|l| {
            Location {
                mapping_index: l.mapping.map_or(0, |m| index(m as usize + 1)),
                address: l.address,
                lines: l
                    .lines
                    .iter()
                    .map(|line| Line {
                        function_index: index(line.function as usize + 1),
                        line: line.line,
                        column: line.column,
                    })
                    .collect(),
                attribute_indices: vec![attributes.index(
                    frame_type,
                    AttributeValue::Str(
                        if l.mapping.is_some() || l.address != 0 { "native" } else { "cpython" }.into(),
                    ),
                )],
            }
        }))
        .collect();
    let function_table = std::iter::once(Function::default())
        .chain(tables.functions.iter().map(|f| {
            let name = id(f.name);
            Function {
                name_strindex: name,
                system_name_strindex: name,
                filename_strindex: id(f.filename),
                start_line: f.start_line,
            }
        }))
        .collect();

    // Unix time where anything says how, the profile's own times otherwise.
    let (first, last) = (counts.first_us(), counts.last_us());
    let span = info.unix_span(written_unix_us, first, last).unwrap_or_else(|| {
        let (start_us, end_us) = info.own_span(first, last);
        UnixSpan { start_us, end_us, offset_us: 0 }
    });
    let ns = |t_us: u64| t_us.min(u64::MAX / 1000) * 1000;
    let unix_ns = |t_us: u64| ns((i128::from(t_us) + span.offset_us).clamp(0, i128::from(u64::MAX)) as u64);
    let interval_ns = i64::try_from(info.sample_interval_us.saturating_mul(1000)).unwrap_or(i64::MAX);
    let thread_key = id(attribute::THREAD_ID);
    let mut count_samples = Vec::with_capacity(counts.len());
    let mut time_samples = Vec::with_capacity(counts.len());
    for stack in counts.entries() {
        let stack_index = index(stack.stack as usize + 1);
        let attribute_indices = if info.threads {
            vec![attributes.index(thread_key, AttributeValue::Int(stack.thread_id as i64))]
        } else {
            Vec::new()
        };
        let n = i64::try_from(stack.samples).unwrap_or(i64::MAX);
        let stamps: Vec<u64> = stack.times_us().map(unix_ns).collect();
        let timed = info.timestamps && !stamps.is_empty() && stamps.len() as u64 == stack.samples;
        let (counts_of, times_of, timestamps_unix_nano) = if timed {
            (vec![1; stamps.len()], vec![interval_ns; stamps.len()], stamps)
        } else {
            (vec![n], vec![n.saturating_mul(interval_ns)], Vec::new())
        };
        count_samples.push(Sample {
            stack_index,
            attribute_indices: attribute_indices.clone(),
            values: counts_of,
            timestamps_unix_nano: timestamps_unix_nano.clone(),
        });
        time_samples.push(Sample { stack_index, attribute_indices, values: times_of, timestamps_unix_nano });
    }

    let time_unix_nano = ns(span.start_us);
    let duration_nano = (span.end_us - span.start_us).saturating_mul(1000);
    let time_type = ValueType { type_strindex: id(&info.mode), unit_strindex: id("nanoseconds") };
    let profile = |sample_type: ValueType, samples: Vec<Sample>| Profile {
        sample_type: Some(sample_type),
        samples,
        time_unix_nano,
        duration_nano,
        period_type: Some(time_type.clone()),
        period: interval_ns,
        attribute_indices: Vec::new(),
    };
    let profiles = vec![
        profile(ValueType { type_strindex: id("samples"), unit_strindex: id("count") }, count_samples),
        profile(time_type.clone(), time_samples),
    ];

    let scope = InstrumentationScope {
        name: SCOPE_NAME.to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        attributes: vec![key_value(attribute::INPUT_FORMAT, info.kind.name()), key_value(attribute::MODE, &info.mode)],
    };
    let resource =
        Resource { attributes: vec![key_value(attribute::SERVICE_NAME, service_name.unwrap_or(DEFAULT_SERVICE_NAME))] };
    ExportProfilesServiceRequest {
        resource_profiles: vec![ResourceProfiles {
            resource: Some(resource),
            scope_profiles: vec![ScopeProfiles { scope: Some(scope), profiles }],
        }],
        dictionary: Some(ProfilesDictionary {
            mapping_table: mappings,
            location_table,
            function_table,
            string_table: strings.into_strings(),
            attribute_table: attributes.table,
            stack_table,
        }),
    }
}

/// The request as protobuf (what OTLP/HTTP sends with `Content-Type: application/x-protobuf`).
pub fn write_protobuf(request: &ExportProfilesServiceRequest, out: &mut impl Write) -> io::Result<()> {
    out.write_all(&request.encode_to_vec())
}

/// The request as OTLP/JSON (`Content-Type: application/json`): protobuf's JSON mapping with
/// lowerCamelCase keys, fields at their default value left out, 64-bit integers as decimal
/// strings.
pub fn write_json(request: &ExportProfilesServiceRequest, out: &mut impl Write) -> io::Result<()> {
    let mut j = Json { out, first: true };
    j.object(|j| {
        j.list("resourceProfiles", &request.resource_profiles, |j, r| {
            j.object(|j| {
                j.message("resource", r.resource.as_ref(), |j, r| j.list("attributes", &r.attributes, key_value_json))?;
                j.list("scopeProfiles", &r.scope_profiles, |j, s| {
                    j.object(|j| {
                        j.message("scope", s.scope.as_ref(), |j, s| {
                            j.string("name", &s.name)?;
                            j.string("version", &s.version)?;
                            j.list("attributes", &s.attributes, key_value_json)
                        })?;
                        j.list("profiles", &s.profiles, |j, p| j.object(|j| profile_json(j, p)))
                    })
                })
            })
        })?;
        j.message("dictionary", request.dictionary.as_ref(), |j, d| {
            j.list("mappingTable", &d.mapping_table, |j, m| {
                j.object(|j| {
                    j.int64("memoryStart", m.memory_start as i128)?;
                    j.int64("memoryLimit", m.memory_limit as i128)?;
                    j.int64("fileOffset", m.file_offset as i128)?;
                    j.int32("filenameStrindex", m.filename_strindex)?;
                    j.int32s("attributeIndices", &m.attribute_indices)
                })
            })?;
            j.list("locationTable", &d.location_table, |j, l| {
                j.object(|j| {
                    j.int32("mappingIndex", l.mapping_index)?;
                    j.int64("address", l.address as i128)?;
                    j.list("lines", &l.lines, |j, line| {
                        j.object(|j| {
                            j.int32("functionIndex", line.function_index)?;
                            j.int64("line", line.line as i128)?;
                            j.int64("column", line.column as i128)
                        })
                    })?;
                    j.int32s("attributeIndices", &l.attribute_indices)
                })
            })?;
            j.list("functionTable", &d.function_table, |j, f| {
                j.object(|j| {
                    j.int32("nameStrindex", f.name_strindex)?;
                    j.int32("systemNameStrindex", f.system_name_strindex)?;
                    j.int32("filenameStrindex", f.filename_strindex)?;
                    j.int64("startLine", f.start_line as i128)
                })
            })?;
            j.list("stringTable", &d.string_table, |j, s| j.quoted(s))?;
            j.list("attributeTable", &d.attribute_table, |j, a| {
                j.object(|j| {
                    j.int32("keyStrindex", a.key_strindex)?;
                    j.message("value", a.value.as_ref(), any_value_json)?;
                    j.int32("unitStrindex", a.unit_strindex)
                })
            })?;
            j.list("stackTable", &d.stack_table, |j, s| j.object(|j| j.int32s("locationIndices", &s.location_indices)))
        })
    })?;
    j.out.write_all(b"\n")
}

fn profile_json<W: Write>(j: &mut Json<'_, W>, p: &Profile) -> io::Result<()> {
    j.message("sampleType", p.sample_type.as_ref(), value_type_json)?;
    j.list("samples", &p.samples, |j, s| {
        j.object(|j| {
            j.int32("stackIndex", s.stack_index)?;
            j.int32s("attributeIndices", &s.attribute_indices)?;
            j.int64s("values", s.values.iter().map(|&v| v as i128), s.values.len())?;
            j.int64s(
                "timestampsUnixNano",
                s.timestamps_unix_nano.iter().map(|&v| v as i128),
                s.timestamps_unix_nano.len(),
            )
        })
    })?;
    j.int64("timeUnixNano", p.time_unix_nano as i128)?;
    j.int64("durationNano", p.duration_nano as i128)?;
    j.message("periodType", p.period_type.as_ref(), value_type_json)?;
    j.int64("period", p.period as i128)?;
    j.int32s("attributeIndices", &p.attribute_indices)
}

fn value_type_json<W: Write>(j: &mut Json<'_, W>, v: &ValueType) -> io::Result<()> {
    j.int32("typeStrindex", v.type_strindex)?;
    j.int32("unitStrindex", v.unit_strindex)
}

fn key_value_json<W: Write>(j: &mut Json<'_, W>, kv: &KeyValue) -> io::Result<()> {
    j.object(|j| {
        j.string("key", &kv.key)?;
        j.message("value", kv.value.as_ref(), any_value_json)
    })
}

fn any_value_json<W: Write>(j: &mut Json<'_, W>, v: &AnyValue) -> io::Result<()> {
    match &v.value {
        // A oneof member is written even at its default value: it says which member is set.
        Some(Value::StringValue(s)) => {
            j.key("stringValue")?;
            j.quoted(s)
        }
        Some(Value::IntValue(i)) => {
            j.key("intValue")?;
            write!(j.out, "\"{i}\"")
        }
        None => Ok(()),
    }
}

/// Writes JSON objects field by field, leaving out fields at their default value.
struct Json<'w, W: Write> {
    out: &'w mut W,
    /// No field written yet in the current object or list.
    first: bool,
}

impl<W: Write> Json<'_, W> {
    fn separator(&mut self) -> io::Result<()> {
        if !std::mem::replace(&mut self.first, false) {
            self.out.write_all(b",")?;
        }
        Ok(())
    }

    fn key(&mut self, key: &str) -> io::Result<()> {
        self.separator()?;
        write!(self.out, "\"{key}\":")
    }

    fn quoted(&mut self, s: &str) -> io::Result<()> {
        serde_json::to_writer(&mut *self.out, s).map_err(io::Error::from)
    }

    /// `{…}` with the fields `fields` writes.
    fn object(&mut self, fields: impl FnOnce(&mut Self) -> io::Result<()>) -> io::Result<()> {
        self.out.write_all(b"{")?;
        let outer = std::mem::replace(&mut self.first, true);
        fields(self)?;
        self.first = outer;
        self.out.write_all(b"}")
    }

    fn string(&mut self, key: &str, s: &str) -> io::Result<()> {
        if s.is_empty() {
            return Ok(());
        }
        self.key(key)?;
        self.quoted(s)
    }

    fn int32(&mut self, key: &str, v: i32) -> io::Result<()> {
        if v == 0 {
            return Ok(());
        }
        self.key(key)?;
        write!(self.out, "{v}")
    }

    /// A 64-bit integer, as a string (JSON readers hold integers exactly only up to 2^53).
    fn int64(&mut self, key: &str, v: i128) -> io::Result<()> {
        if v == 0 {
            return Ok(());
        }
        self.key(key)?;
        write!(self.out, "\"{v}\"")
    }

    fn int32s(&mut self, key: &str, v: &[i32]) -> io::Result<()> {
        if v.is_empty() {
            return Ok(());
        }
        self.key(key)?;
        self.out.write_all(b"[")?;
        for (i, x) in v.iter().enumerate() {
            write!(self.out, "{}{x}", if i == 0 { "" } else { "," })?;
        }
        self.out.write_all(b"]")
    }

    fn int64s(&mut self, key: &str, v: impl Iterator<Item = i128>, len: usize) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        self.key(key)?;
        self.out.write_all(b"[")?;
        for (i, x) in v.enumerate() {
            write!(self.out, "{}\"{x}\"", if i == 0 { "" } else { "," })?;
        }
        self.out.write_all(b"]")
    }

    /// A message field, left out when unset.
    fn message<T>(
        &mut self,
        key: &str,
        m: Option<&T>,
        fields: impl FnOnce(&mut Self, &T) -> io::Result<()>,
    ) -> io::Result<()> {
        let Some(m) = m else { return Ok(()) };
        self.key(key)?;
        self.object(|j| fields(j, m))
    }

    /// A repeated field, left out when empty.
    fn list<T>(
        &mut self,
        key: &str,
        items: &[T],
        mut item: impl FnMut(&mut Self, &T) -> io::Result<()>,
    ) -> io::Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        self.key(key)?;
        self.out.write_all(b"[")?;
        let outer = std::mem::replace(&mut self.first, true);
        for x in items {
            self.separator()?;
            // An item is a value, not a field: it opens no separator of its own.
            self.first = true;
            item(self, x)?;
            self.first = false;
        }
        self.first = outer;
        self.out.write_all(b"]")
    }
}
