//! The hub written as an OTLP `ExportProfilesServiceRequest`: the request laid out from a
//! [`StackCounts`] aggregate ([`Request::new`]), then written as protobuf
//! ([`Request::write_protobuf`]) or as OTLP/JSON ([`Request::write_json`]), each sample as it
//! is made from its entry (the samples are never held: they are most of a request).

use std::collections::HashMap;
use std::io::{self, Write};

use prost::Message;

use super::proto::{
    AnyValue, Function, InstrumentationScope, KeyValue, KeyValueAndUnit, Line, Location, Mapping, Profile,
    ProfilesDictionary, Resource, Sample, Stack, Value, ValueType,
};
use super::{attribute, DEFAULT_SERVICE_NAME, SCOPE_NAME};
use crate::hash::{StringIndex, ThreadNumbers};
use crate::model::stacks::{Entry, Locations, StackCounts};
use crate::model::{FrameTable, SourceInfo, UnixSpan};

/// The dictionary's attribute table of string values, each distinct (key, value) once after
/// the zero entry (the threads' integer attributes follow it: [`Request`]).
struct Attributes {
    table: Vec<KeyValueAndUnit>,
    index: HashMap<(i32, String), i32>,
}

impl Attributes {
    fn new() -> Self {
        Attributes { table: vec![KeyValueAndUnit::default()], index: HashMap::new() }
    }

    fn index(&mut self, key: i32, value: &str) -> i32 {
        let next = index(self.table.len());
        let table = &mut self.table;
        *self.index.entry((key, value.to_owned())).or_insert_with(|| {
            table.push(KeyValueAndUnit {
                key_strindex: key,
                value: Some(AnyValue { value: Some(Value::StringValue(value.to_owned())) }),
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

/// The request for the samples a [`StackCounts`] holds, laid out: everything but the samples,
/// which [`write_protobuf`](Request::write_protobuf) and [`write_json`](Request::write_json)
/// make from the aggregate's entries as they write them.
///
/// It holds what a sample points into — the dictionary's strings, mappings, locations,
/// functions, stacks and attributes — and per entry its thread's attribute: memory follows
/// the distinct stacks and threads, never the samples (a million threads of one sample each:
/// about 40 MB beside the aggregate, where the whole request as messages took 530).
pub struct Request<'c> {
    counts: &'c StackCounts,
    resource: Resource,
    scope: InstrumentationScope,
    /// The two profiles without their samples (samples/count, then the mode in ns).
    profiles: [Profile; 2],
    /// The dictionary but for its stack table and the threads' attributes.
    tables: ProfilesDictionary,
    /// The stack table alone (the dictionary's last field: the threads' attributes, which
    /// end the attribute table, come before it).
    stacks: ProfilesDictionary,
    /// The `thread.id` attributes follow the dictionary's own, numbered from here, one per
    /// distinct thread in the order entries first reach it.
    first_thread_attribute: i32,
    thread_key: i32,
    thread_ids: ThreadNumbers,
    /// Per entry, its thread's number among `thread_ids` (empty without threads).
    entry_thread: Vec<u32>,
    threads: bool,
    timestamps: bool,
    interval_ns: i64,
    /// Added to a sample's time to make it Unix time.
    offset_us: i128,
}

impl<'c> Request<'c> {
    /// The request for `counts` of `info`'s input: one resource named `service_name`
    /// (OpenTelemetry's `unknown_service` when `None`), one scope (this converter, with the
    /// input's format and the profiling mode), one profile per sample type (`samples` in
    /// `count`, then `<mode>` in `nanoseconds`), each sample keyed by stack and thread and
    /// carrying its timestamps when `counts` kept them. Times are Unix time: a profile on a
    /// monotonic clock is placed so that its last sample is at `written_unix_us` (when the
    /// file was written), a profile without times is dated then.
    pub fn new(
        counts: &'c StackCounts,
        frames: &FrameTable,
        info: &SourceInfo,
        written_unix_us: Option<u64>,
        service_name: Option<&str>,
    ) -> Self {
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
                    vec![attributes.index(id(attribute::BUILD_ID_GNU), &m.build_id)]
                } else {
                    Vec::new()
                },
            }))
            .collect();

        // The stack table is the distinct stacks, in the order entries first reach them
        // (which is their ids' order), after the empty stack OTLP's index 0 is; locations are
        // made as the stacks first reach them.
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
                    attribute_indices: vec![attributes
                        .index(frame_type, if l.mapping.is_some() || l.address != 0 { "native" } else { "cpython" })],
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
        let interval_ns = i64::try_from(info.sample_interval_us.saturating_mul(1000)).unwrap_or(i64::MAX);
        let thread_key = id(attribute::THREAD_ID);

        // Each distinct thread's attribute, numbered in the order entries first reach it.
        let (mut thread_ids, mut entry_thread) = (ThreadNumbers::new(), Vec::new());
        if info.threads {
            entry_thread.reserve_exact(counts.len());
            entry_thread.extend(counts.entries().map(|entry| thread_ids.number(0, entry.thread_id).0));
        }

        let time_unix_nano = ns(span.start_us);
        let duration_nano = (span.end_us - span.start_us).saturating_mul(1000);
        let time_type = ValueType { type_strindex: id(&info.mode), unit_strindex: id("nanoseconds") };
        let profile = |sample_type: ValueType| Profile {
            sample_type: Some(sample_type),
            samples: Vec::new(),
            time_unix_nano,
            duration_nano,
            period_type: Some(time_type.clone()),
            period: interval_ns,
            attribute_indices: Vec::new(),
        };
        let profiles = [
            profile(ValueType { type_strindex: id("samples"), unit_strindex: id("count") }),
            profile(time_type.clone()),
        ];

        let scope = InstrumentationScope {
            name: SCOPE_NAME.to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            attributes: vec![
                key_value(attribute::INPUT_FORMAT, info.kind.name()),
                key_value(attribute::MODE, &info.mode),
            ],
        };
        let resource = Resource {
            attributes: vec![key_value(attribute::SERVICE_NAME, service_name.unwrap_or(DEFAULT_SERVICE_NAME))],
        };
        Request {
            counts,
            resource,
            scope,
            profiles,
            first_thread_attribute: index(attributes.table.len()),
            tables: ProfilesDictionary {
                mapping_table: mappings,
                location_table,
                function_table,
                string_table: strings.into_strings(),
                attribute_table: attributes.table,
                stack_table: Vec::new(),
            },
            stacks: ProfilesDictionary { stack_table, ..ProfilesDictionary::default() },
            thread_key,
            thread_ids,
            entry_thread,
            threads: info.threads,
            timestamps: info.timestamps,
            interval_ns,
            offset_us: span.offset_us,
        }
    }

    /// Entry `index_of_entry`'s sample in profile `profile` (0: counts, 1: time), into
    /// `sample`'s storage.
    fn sample(&self, entry: &Entry<'_>, index_of_entry: usize, profile: usize, sample: &mut Sample) {
        self.fill(entry, index_of_entry, sample);
        self.values(entry, profile, sample);
    }

    /// What entry `index_of_entry`'s samples share in both profiles: stack, thread attribute,
    /// and its timestamps when every sample of it has one (none otherwise).
    fn fill(&self, entry: &Entry<'_>, index_of_entry: usize, sample: &mut Sample) {
        sample.stack_index = index(entry.stack as usize + 1);
        sample.attribute_indices.clear();
        if self.threads {
            let number = self.entry_thread.get(index_of_entry).copied().unwrap_or(0);
            sample.attribute_indices.push(self.first_thread_attribute.saturating_add(index(number as usize)));
        }
        let offset_us = self.offset_us;
        let unix_ns = |t_us: u64| ns((i128::from(t_us) + offset_us).clamp(0, i128::from(u64::MAX)) as u64);
        sample.timestamps_unix_nano.clear();
        sample.timestamps_unix_nano.extend(entry.times_us().map(unix_ns));
        let stamps = sample.timestamps_unix_nano.len();
        if !(self.timestamps && stamps != 0 && stamps as u64 == entry.samples) {
            sample.timestamps_unix_nano.clear();
        }
    }

    /// The values of a [`fill`](Request::fill)ed sample in profile `profile`: one per
    /// timestamp (1, or the interval), else the total (samples, or samples × interval).
    fn values(&self, entry: &Entry<'_>, profile: usize, sample: &mut Sample) {
        sample.values.clear();
        let stamps = sample.timestamps_unix_nano.len();
        if stamps != 0 {
            sample.values.resize(stamps, if profile == 0 { 1 } else { self.interval_ns });
        } else {
            let n = i64::try_from(entry.samples).unwrap_or(i64::MAX);
            sample.values.push(if profile == 0 { n } else { n.saturating_mul(self.interval_ns) });
        }
    }

    /// The `thread.id` attribute of thread `thread_id`.
    fn thread_attribute(&self, thread_id: u64) -> KeyValueAndUnit {
        KeyValueAndUnit {
            key_strindex: self.thread_key,
            value: Some(AnyValue { value: Some(Value::IntValue(thread_id as i64)) }),
            unit_strindex: 0,
        }
    }

    /// The request as protobuf (what OTLP/HTTP sends with `Content-Type:
    /// application/x-protobuf`), byte for byte what prost encodes of the whole message.
    ///
    /// Written as it is made: a message is its fields in any order, prost writes them in the
    /// order of their tags, and a message inside another is its length and then its fields;
    /// so the samples' lengths are added up first (one pass over the entries), then each
    /// enclosing message's key and length is written, then its fields — the samples as each
    /// entry makes them.
    pub fn write_protobuf(&self, out: &mut impl Write) -> io::Result<()> {
        use prost::encoding::{encode_key, encode_varint, encoded_len_varint, message, WireType};
        // A length-delimited field's key (tags below 16: one byte) and length, and a field's
        // whole length.
        let head = |tag: u32, len: u64, buf: &mut Vec<u8>| {
            encode_key(tag, WireType::LengthDelimited, buf);
            encode_varint(len, buf);
        };
        let field_len = |len: usize| (1 + encoded_len_varint(len as u64) + len) as u64;

        let mut sample = Sample::default();
        let mut samples_len = [0u64; 2];
        for (i, entry) in self.counts.entries().enumerate() {
            // The entry's times walked once for both profiles' lengths.
            self.fill(&entry, i, &mut sample);
            for (p, total) in samples_len.iter_mut().enumerate() {
                self.values(&entry, p, &mut sample);
                *total += field_len(sample.encoded_len());
            }
        }
        let profile_len: Vec<u64> =
            self.profiles.iter().zip(samples_len).map(|(p, samples)| p.encoded_len() as u64 + samples).collect();
        let scope_profiles_len = message::encoded_len(1, &self.scope) as u64
            + profile_len.iter().map(|&len| 1 + encoded_len_varint(len) as u64 + len).sum::<u64>();
        let resource_profiles_len = message::encoded_len(1, &self.resource) as u64
            + 1
            + encoded_len_varint(scope_profiles_len) as u64
            + scope_profiles_len;

        let mut buf = Vec::new();
        head(1, resource_profiles_len, &mut buf);
        message::encode(1, &self.resource, &mut buf);
        head(2, scope_profiles_len, &mut buf);
        message::encode(1, &self.scope, &mut buf);
        out.write_all(&buf)?;
        for (p, (profile, len)) in self.profiles.iter().zip(&profile_len).enumerate() {
            buf.clear();
            head(2, *len, &mut buf);
            // The sample type (tag 1), the samples (2), the rest (3 on).
            Profile { sample_type: profile.sample_type.clone(), ..Profile::default() }.encode(&mut buf)?;
            out.write_all(&buf)?;
            for (i, entry) in self.counts.entries().enumerate() {
                self.sample(&entry, i, p, &mut sample);
                buf.clear();
                buf.push(0x12);
                sample.encode_length_delimited(&mut buf)?;
                out.write_all(&buf)?;
            }
            buf.clear();
            Profile { sample_type: None, ..profile.clone() }.encode(&mut buf)?;
            out.write_all(&buf)?;
        }

        // The dictionary: its tables up to its own attributes (tags 1–6), the threads'
        // attributes (6), the stack table (7).
        let threads_len: u64 =
            self.thread_ids.iter().map(|(_, t)| message::encoded_len(6, &self.thread_attribute(t)) as u64).sum();
        buf.clear();
        head(2, self.tables.encoded_len() as u64 + threads_len + self.stacks.encoded_len() as u64, &mut buf);
        self.tables.encode(&mut buf)?;
        out.write_all(&buf)?;
        for (_, t) in self.thread_ids.iter() {
            buf.clear();
            message::encode(6, &self.thread_attribute(t), &mut buf);
            out.write_all(&buf)?;
        }
        buf.clear();
        self.stacks.encode(&mut buf)?;
        out.write_all(&buf)
    }

    /// The request as OTLP/JSON (`Content-Type: application/json`): protobuf's JSON mapping
    /// with lowerCamelCase keys, fields at their default value left out, 64-bit integers as
    /// decimal strings; written as it is made, as [`write_protobuf`](Request::write_protobuf).
    pub fn write_json(&self, out: &mut impl Write) -> io::Result<()> {
        let mut j = Json { out, first: true };
        let mut sample = Sample::default();
        j.object(|j| {
            j.key("resourceProfiles")?;
            j.out.write_all(b"[")?;
            j.object(|j| {
                j.message("resource", Some(&self.resource), |j, r| {
                    j.list("attributes", &r.attributes, key_value_json)
                })?;
                j.key("scopeProfiles")?;
                j.out.write_all(b"[")?;
                j.object(|j| {
                    j.message("scope", Some(&self.scope), |j, s| {
                        j.string("name", &s.name)?;
                        j.string("version", &s.version)?;
                        j.list("attributes", &s.attributes, key_value_json)
                    })?;
                    j.list("profiles", (0..2).map(|p| (p, &self.profiles[p])), |j, (p, profile)| {
                        j.object(|j| profile_json(j, profile, self, p, &mut sample))
                    })
                })?;
                j.out.write_all(b"]")
            })?;
            j.out.write_all(b"]")?;
            let (d, stacks) = (&self.tables, &self.stacks.stack_table);
            j.key("dictionary")?;
            j.object(|j| {
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
                let threads = self.thread_ids.iter().map(|(_, t)| self.thread_attribute(t));
                j.list("attributeTable", d.attribute_table.iter().cloned().chain(threads), |j, a| {
                    j.object(|j| {
                        j.int32("keyStrindex", a.key_strindex)?;
                        j.message("value", a.value.as_ref(), any_value_json)?;
                        j.int32("unitStrindex", a.unit_strindex)
                    })
                })?;
                j.list("stackTable", stacks, |j, s| j.object(|j| j.int32s("locationIndices", &s.location_indices)))
            })
        })?;
        j.out.write_all(b"\n")
    }
}

/// A time in µs as ns, saturating.
fn ns(t_us: u64) -> u64 {
    t_us.min(u64::MAX / 1000) * 1000
}

/// A profile's fields, its samples made from `request`'s entries as they are written.
fn profile_json<W: Write>(
    j: &mut Json<'_, W>,
    p: &Profile,
    request: &Request<'_>,
    profile: usize,
    sample: &mut Sample,
) -> io::Result<()> {
    j.message("sampleType", p.sample_type.as_ref(), value_type_json)?;
    j.list("samples", request.counts.entries().enumerate(), |j, (i, entry)| {
        request.sample(&entry, i, profile, sample);
        let s = &*sample;
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
    fn list<I: IntoIterator>(
        &mut self,
        key: &str,
        items: I,
        mut item: impl FnMut(&mut Self, I::Item) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut items = items.into_iter().peekable();
        if items.peek().is_none() {
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
