//! A fold as bytes, to hand a partial fold from one process to another (the workers of a
//! distributed merge): a protobuf message of its own ([`FoldMessage`]), read back by
//! [`Fold::from_bytes`], which checks every index and rebuilds the fold through
//! [`Fold::combine`], so bytes from elsewhere cannot make a fold that breaks its rules.

use prost::Message;

use tachyon_core::header::ProfilingMode;

use super::{Facts, Fold, FoldOptions, Log};
use crate::model::{FrameRef, Mapping};

/// A fold.
#[derive(Clone, PartialEq, Message)]
pub struct FoldMessage {
    /// Format version (1).
    #[prost(uint32, tag = "1")]
    pub version: u32,
    /// Threads kept.
    #[prost(bool, tag = "2")]
    pub threads: bool,
    /// The facts; absent for an empty fold.
    #[prost(message, optional, tag = "3")]
    pub facts: Option<FactsMessage>,
    /// Mappings.
    #[prost(message, repeated, tag = "4")]
    pub mappings: Vec<MappingMessage>,
    /// Frames.
    #[prost(message, repeated, tag = "5")]
    pub frames: Vec<FrameMessage>,
    /// Stacks.
    #[prost(message, repeated, tag = "6")]
    pub stacks: Vec<StackMessage>,
    /// Samples folded.
    #[prost(uint64, tag = "7")]
    pub samples: u64,
    /// Profiles folded.
    #[prost(uint64, tag = "8")]
    pub profiles: u64,
}

/// [`super::Fold`]'s facts.
#[derive(Clone, PartialEq, Message)]
pub struct FactsMessage {
    /// Mode.
    #[prost(string, tag = "1")]
    pub mode: String,
    /// CPython's mode number, if any.
    #[prost(uint32, optional, tag = "2")]
    pub cpython_mode: Option<u32>,
    /// Input formats.
    #[prost(string, repeated, tag = "3")]
    pub kinds: Vec<String>,
    /// Unit of the counts, µs.
    #[prost(uint64, tag = "4")]
    pub unit_us: u64,
    /// Python naming.
    #[prost(bool, tag = "5")]
    pub python_naming: bool,
    /// Some input had threads.
    #[prost(bool, tag = "6")]
    pub any_threads: bool,
    /// Earliest start, Unix µs.
    #[prost(uint64, optional, tag = "7")]
    pub start_unix_us: Option<u64>,
    /// Latest end, Unix µs.
    #[prost(uint64, optional, tag = "8")]
    pub end_unix_us: Option<u64>,
}

/// A mapping.
#[derive(Clone, PartialEq, Message)]
pub struct MappingMessage {
    /// First address.
    #[prost(uint64, tag = "1")]
    pub start: u64,
    /// One past the last.
    #[prost(uint64, tag = "2")]
    pub limit: u64,
    /// File offset.
    #[prost(uint64, tag = "3")]
    pub offset: u64,
    /// File.
    #[prost(string, tag = "4")]
    pub file: String,
    /// Build id.
    #[prost(string, tag = "5")]
    pub build_id: String,
}

/// A frame.
#[derive(Clone, PartialEq, Message)]
pub struct FrameMessage {
    /// File name.
    #[prost(string, tag = "1")]
    pub filename: String,
    /// Function name.
    #[prost(string, tag = "2")]
    pub funcname: String,
    /// `[lineno, end_lineno, col, end_col]`, or empty.
    #[prost(sint32, repeated, tag = "3")]
    pub location: Vec<i32>,
    /// Opcode.
    #[prost(uint32, optional, tag = "4")]
    pub opcode: Option<u32>,
    /// Address.
    #[prost(uint64, optional, tag = "5")]
    pub address: Option<u64>,
    /// Index of its mapping.
    #[prost(uint32, optional, tag = "6")]
    pub mapping: Option<u32>,
    /// Anonymous, hidden, inlined (bits 0, 1, 2).
    #[prost(uint32, tag = "7")]
    pub flags: u32,
}

/// A stack and its count.
#[derive(Clone, PartialEq, Message)]
pub struct StackMessage {
    /// Thread id.
    #[prost(uint64, tag = "1")]
    pub thread_id: u64,
    /// Frame indices, innermost first.
    #[prost(uint32, repeated, tag = "2")]
    pub frames: Vec<u32>,
    /// Samples.
    #[prost(uint64, tag = "3")]
    pub count: u64,
}

impl Fold {
    /// The fold as bytes ([`FoldMessage`]).
    pub fn to_bytes(&self) -> Vec<u8> {
        let message = FoldMessage {
            version: 1,
            threads: self.options.threads,
            facts: self.facts.as_ref().map(|f| FactsMessage {
                mode: f.mode.clone(),
                cpython_mode: f.cpython_mode.map(|m| m as u32),
                kinds: f.kinds.iter().map(|k| k.to_string()).collect(),
                unit_us: f.unit_us,
                python_naming: f.python_naming,
                any_threads: f.any_threads,
                start_unix_us: f.start_unix_us,
                end_unix_us: f.end_unix_us,
            }),
            mappings: self
                .mappings
                .iter()
                .map(|m| MappingMessage {
                    start: m.start,
                    limit: m.limit,
                    offset: m.offset,
                    file: m.file.clone(),
                    build_id: m.build_id.clone(),
                })
                .collect(),
            frames: self
                .frames()
                .iter()
                .map(|f| self.frame_ref(f))
                .map(|f| FrameMessage {
                    filename: f.filename.to_owned(),
                    funcname: f.funcname.into_owned(),
                    location: f.location.map_or_else(Vec::new, |l| vec![l.lineno, l.end_lineno, l.col, l.end_col]),
                    opcode: f.opcode.map(u32::from),
                    address: f.address,
                    mapping: f.mapping,
                    flags: u32::from(f.anonymous) | u32::from(f.hidden) << 1 | u32::from(f.inlined) << 2,
                })
                .collect(),
            stacks: self
                .stacks
                .iter()
                .zip(&self.counts)
                .map(|(key, count)| StackMessage {
                    thread_id: u64::from(key[0]) | (u64::from(key[1]) << 32),
                    frames: key[2..].to_vec(),
                    count: *count,
                })
                .collect(),
            samples: self.samples,
            profiles: self.profiles,
        };
        message.encode_to_vec()
    }

    /// A fold from [`Fold::to_bytes`]'s bytes; every index checked.
    pub fn from_bytes(bytes: &[u8]) -> Result<Fold, String> {
        let m = FoldMessage::decode(bytes).map_err(|e| format!("not a fold: {e}"))?;
        if m.version != 1 {
            return Err(format!("a fold of version {}, this library reads version 1", m.version));
        }
        let options = FoldOptions { threads: m.threads };
        let facts = match m.facts {
            None => None,
            Some(f) => Some(Facts {
                mode: f.mode,
                cpython_mode: match f.cpython_mode {
                    None => None,
                    Some(n) => {
                        Some(ProfilingMode::from_value(i64::from(n)).ok_or_else(|| format!("bad CPython mode {n}"))?)
                    }
                },
                kinds: {
                    let mut kinds = Vec::new();
                    for k in &f.kinds {
                        let kind = ["gperftools", "mojo", "pprof", "tachyon"]
                            .into_iter()
                            .find(|&known| known == k)
                            .ok_or_else(|| format!("unknown input format {k:?}"))?;
                        if let Err(at) = kinds.binary_search(&kind) {
                            kinds.insert(at, kind);
                        }
                    }
                    kinds
                },
                unit_us: f.unit_us,
                python_naming: f.python_naming,
                any_threads: f.any_threads,
                start_unix_us: f.start_unix_us,
                end_unix_us: f.end_unix_us,
            }),
        };
        if facts.is_none() && !(m.frames.is_empty() && m.stacks.is_empty()) {
            return Err("stacks without the facts of their profiles".into());
        }
        let mappings: Vec<Mapping> = m
            .mappings
            .into_iter()
            .map(|m| Mapping { start: m.start, limit: m.limit, offset: m.offset, file: m.file, build_id: m.build_id })
            .collect();
        let mut raw = Fold { options, facts, mappings, log: Some(Log::default()), ..Fold::default() };
        for (i, f) in m.frames.into_iter().enumerate() {
            let location = match f.location[..] {
                [] => None,
                [lineno, end_lineno, col, end_col] => {
                    Some(tachyon_core::tables::Location { lineno, end_lineno, col, end_col })
                }
                _ => return Err(format!("frame {i}: a location has four numbers")),
            };
            if f.mapping.is_some_and(|m| m as usize >= raw.mappings.len()) || f.flags > 7 {
                return Err(format!("frame {i}: a mapping out of range or unknown flags"));
            }
            let opcode = match f.opcode {
                None => None,
                Some(o) => Some(u8::try_from(o).map_err(|_| format!("frame {i}: opcode {o}"))?),
            };
            let frame = FrameRef {
                filename: &f.filename,
                funcname: std::borrow::Cow::Borrowed(&f.funcname),
                location,
                opcode,
                address: f.address,
                mapping: f.mapping,
                anonymous: f.flags & 1 != 0,
                hidden: f.flags & 2 != 0,
                inlined: f.flags & 4 != 0,
            };
            let frame = raw.intern(&frame, frame.mapping);
            raw.frame(frame);
        }
        // The stacks as a part's log, as they come: the fold they are combined into below
        // finds each.
        let mut log = Log::default();
        for (i, s) in m.stacks.into_iter().enumerate() {
            if s.frames.is_empty() || s.frames.iter().any(|&f| f as usize >= raw.frames().len()) {
                return Err(format!("stack {i}: empty, or a frame out of range"));
            }
            if !options.threads && s.thread_id != 0 {
                return Err(format!("stack {i}: a thread in a fold without threads"));
            }
            log.push([s.thread_id as u32, (s.thread_id >> 32) as u32].into_iter().chain(s.frames), s.count);
        }
        (raw.log, raw.samples, raw.profiles) = (Some(log), m.samples, m.profiles);
        // Through combine: indexes built, duplicates merged.
        let mut fold = Fold::new(options);
        fold.combine(raw)?;
        Ok(fold)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fold::tests::{add, folded, profile};
    use tachyon_core::kind::FileKind;

    #[test]
    fn bytes_round_trip_and_bad_bytes_are_refused() {
        let mut fold = Fold::new(FoldOptions { threads: true });
        add(&mut fold, profile(FileKind::Tachyon, "wall", 1000, &[(3, &["a", "b"], 2), (4, &["a"], 1)])).unwrap();
        let bytes = fold.to_bytes();
        let back = Fold::from_bytes(&bytes).unwrap();
        assert_eq!(back.to_bytes(), bytes);
        assert_eq!(folded(back), folded(fold));
        assert!(Fold::from_bytes(b"\xff\xff").is_err());
        // A stack naming a frame that is not there.
        let mut m = FoldMessage::decode(&bytes[..]).unwrap();
        m.stacks[0].frames.push(99);
        let e = Fold::from_bytes(&m.encode_to_vec()).unwrap_err();
        assert_eq!(e, "stack 0: empty, or a frame out of range");
    }
}
