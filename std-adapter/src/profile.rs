//! One type over every input format, as `object::read::File` is over `FileKind`: a
//! [`Profile`] is a file whose format its first bytes named, and gives what the commands
//! `info`, `verify` and `dump` need whatever that format is, so that each takes every input
//! and refuses only what a format cannot give, naming the format.
//!
//! - [`Profile::info`]: the format's facts, as one JSON object.
//! - [`Profile::verify`]: the format's whole reader over the whole file; the first error
//!   names the offset and the rule (for pprof, the rule and the message's field path: its
//!   decoder does not say where).
//! - [`Profile::dump`]: the samples as JSON lines. Tachyon keeps CPython's reader's shape
//!   byte for byte and MOJO the shape of austin-python 2.4.0's reader; gperftools and pprof
//!   profiles give one line per stack record in the hub's shape ([`write_dump_line`]); a
//!   pstats file gives one line per function entry ([`crate::pstats::dump`]).
//! - [`Profile::source`]: the profile as the hub's [`Source`] ([`AnySource`]), which
//!   [`crate::convert::convert`] writes into any output. Where an input writes its own format
//!   better than the hub can (Tachyon and gperftools re-encoded byte for byte, MOJO into
//!   Austin's formats, pstats into its table, file and graph), it does so through the one
//!   mechanism the hub has for it, [`Source::pass_through`].

use std::fmt;
use std::io::{self, Read as _, Write};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use tachyon_core::header::HEADER_SIZE;
use tachyon_core::kind::{FileKind, DETECT_BYTES};
use tachyon_core::reader::{Metadata, Record};
use tachyon_core::{HeaderLayout, Reader, RunTimeEndian};

use crate::file::FileSource;
use crate::gperftools::source::GperftoolsSource;
use crate::model::{Call, Collector, FrameInfo, FrameTable, NamedCollector, Source, SourceInfo};
use crate::mojo::source::{MojoMetric, MojoSource};
use crate::native::{Named, NamedCounts};
use crate::output::{ConvertError, Destination, Output};
use crate::pprof::source::{PprofSource, SampleIndex};
use crate::pstats::source::{PstatsOptions, PstatsSource};
use crate::symbolize::Symbolizer;
use crate::tachyon::source::{TachyonFile, TachyonSource};
use crate::tachyon::storage::{Limits, OwnedReaderStorage};

/// Why a profile could not be opened, read or written out.
#[derive(Debug)]
pub enum ProfileError {
    /// The file could not be opened or read.
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        error: io::Error,
    },
    /// Not a format this crate reads.
    UnknownFormat {
        /// The file.
        path: PathBuf,
    },
    /// The format's reader refused the file; the error names the offset and the rule.
    Invalid {
        /// The file.
        path: PathBuf,
        /// Its format.
        kind: FileKind,
        /// The reader's error.
        error: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Writing the output failed.
    Write(io::Error),
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProfileError::Io { path, error } => write!(f, "{}: {error}", path.display()),
            ProfileError::UnknownFormat { path } => write!(
                f,
                "{}: not a profile format tachyon knows (Tachyon, gperftools CPU profile, pprof, MOJO, pstats)",
                path.display()
            ),
            ProfileError::Invalid { path, kind, error } => {
                write!(f, "{}: not a valid {}: {error}", path.display(), kind.title())
            }
            ProfileError::Write(e) => write!(f, "writing the output: {e}"),
        }
    }
}

impl std::error::Error for ProfileError {}

/// Where a refused file broke its format, and which rule: what [`ProfileError::site`] gives
/// for programs (the Python package's exceptions) that want more than the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorSite {
    /// Byte offset, where the format's reader gives one.
    pub offset: Option<u64>,
    /// The offset is in a Tachyon file's decompressed sample region, not in the file.
    pub decompressed: bool,
    /// The rule's name (its variant in the format's `Rule`, or the error's kind).
    pub rule: String,
}

/// The name of a rule or error kind: its `Debug` form up to the first field.
fn variant_name(debug: String) -> String {
    debug.split([' ', '{', '(']).next().unwrap_or_default().to_string()
}

impl ErrorSite {
    /// Where a Tachyon reader's error happened and which rule (for an error without a rule,
    /// its kind: `Io`, `UnexpectedEof`, `Capacity`).
    pub fn of_tachyon<E: fmt::Debug>(e: &tachyon_core::ReadError<E>) -> ErrorSite {
        let (offset, decompressed) = match e.position() {
            tachyon_core::Position::File(o) => (o, false),
            tachyon_core::Position::Decompressed(o) => (o, true),
        };
        let rule = match e.rule() {
            Some(rule) => variant_name(format!("{rule:?}")),
            None => variant_name(format!("{e:?}")),
        };
        ErrorSite { offset: Some(offset), decompressed, rule }
    }
}

impl ProfileError {
    /// Where the file broke its format and which rule, for a file a reader refused.
    pub fn site(&self) -> Option<ErrorSite> {
        let ProfileError::Invalid { error, .. } = self else { return None };
        let at = |offset: Option<u64>, rule: String| Some(ErrorSite { offset, decompressed: false, rule });
        let error: &(dyn std::error::Error + 'static) = error.as_ref();
        if let Some(e) = error.downcast_ref::<tachyon_core::ReadError<io::Error>>() {
            return Some(ErrorSite::of_tachyon(e));
        }
        if let Some(e) = error.downcast_ref::<crate::gperftools::source::GperftoolsError<io::Error>>() {
            use tachyon_core::gperftools::ReadError as R;
            return match e {
                crate::gperftools::source::GperftoolsError::Read(R::Format { offset, rule }) => {
                    at(Some(*offset), variant_name(format!("{rule:?}")))
                }
                crate::gperftools::source::GperftoolsError::Read(R::Io { offset, .. } | R::TooLarge { offset, .. }) => {
                    at(Some(*offset), variant_name(format!("{e:?}").replacen("Read(", "", 1)))
                }
                crate::gperftools::source::GperftoolsError::CountsTooLarge { offset } => {
                    at(Some(*offset), "CountsTooLarge".into())
                }
                other => at(None, variant_name(format!("{other:?}").replacen("Read(", "", 1))),
            };
        }
        if let Some(e) = error.downcast_ref::<crate::mojo::SamplesError<io::Error>>() {
            use tachyon_core::mojo::ReadError as R;
            return match e {
                crate::mojo::SamplesError::Read(R::Format { offset, rule }) => {
                    at(Some(*offset), variant_name(format!("{rule:?}")))
                }
                crate::mojo::SamplesError::Read(R::Io { offset, .. } | R::TooLarge { offset, .. }) => {
                    at(Some(*offset), variant_name(format!("{e:?}").replacen("Read(", "", 1)))
                }
                other => {
                    at(None, variant_name(format!("{other:?}").replacen("Read(", "", 1).replacen("Sample(", "", 1)))
                }
            };
        }
        if let Some(e) = error.downcast_ref::<crate::pprof::source::PprofError>() {
            use crate::pprof::source::PprofError as P;
            return match e {
                P::Gzip { offset, .. } => at(Some(*offset), "Gzip".into()),
                P::Decode { at: Some((offset, rule)), .. } => {
                    Some(ErrorSite { offset: Some(*offset), decompressed: true, rule: rule.clone() })
                }
                other => at(None, variant_name(format!("{other:?}"))),
            };
        }
        let pstats = |e: &crate::pstats::PstatsError| match e {
            crate::pstats::PstatsError::Marshal(m) => at(Some(m.offset as u64), variant_name(format!("{:?}", m.rule))),
            crate::pstats::PstatsError::Shape { offset, .. } => at(Some(*offset as u64), "Shape".into()),
        };
        if let Some(e) = error.downcast_ref::<crate::pstats::PstatsError>() {
            return pstats(e);
        }
        if let Some(e) = error.downcast_ref::<crate::pstats::source::PstatsSourceError>() {
            return match e {
                crate::pstats::source::PstatsSourceError::Load(e) => pstats(e),
                crate::pstats::source::PstatsSourceError::Print(_) => at(None, "Print".into()),
            };
        }
        at(None, "Invalid".into())
    }

    /// The reader of `kind` refused the file at `path` with `error`.
    pub fn invalid(path: &Path, kind: FileKind, error: impl std::error::Error + Send + Sync + 'static) -> Self {
        ProfileError::Invalid { path: path.to_owned(), kind, error: Box::new(error) }
    }
}

/// What [`Profile::verify`] read of a valid file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// Samples (Tachyon thread samples, gperftools and pprof counts, MOJO STACK events); for
    /// pstats, function entries.
    pub samples: u64,
    /// What the count is of, for people: `thread samples`, `samples`, `functions`.
    pub unit: &'static str,
    /// Further facts worth a line (threads, records, quirks readers accept).
    pub details: Vec<String>,
}

/// How [`Profile::source`] reads a profile: what each input format needs told.
#[derive(Debug, Clone, Default)]
pub struct SourceOptions {
    /// pprof: the sample value counted.
    pub sample_index: SampleIndex,
    /// MOJO: what a sample weighs.
    pub metric: MojoMetric,
    /// gperftools and pprof: symbolise native addresses from the binaries the profile's
    /// mappings name, also looked for in these folders; Tachyon: name its native frames
    /// ([`crate::native`]) the same way; `None` leaves addresses as they are.
    pub symbolize: Option<Vec<PathBuf>>,
    /// pstats: how the table is printed and the file written again.
    pub pstats: PstatsOptions,
    /// Tachyon: a source that can replay more than once (each replay opens the file again),
    /// for the hub's Tachyon and gperftools writers and for several files in turn; a
    /// single-pass source reads the file once.
    pub replayable: bool,
}

/// A profile as the hub's [`Source`], whatever its format; errors name the file and the
/// format ([`ProfileError`]).
pub struct AnySource<'p> {
    path: PathBuf,
    kind: FileKind,
    inner: Inner<'p>,
    /// The source's native frames named (Tachyon inputs that hold any), for every consumer.
    named: Option<Named>,
    warnings: Vec<String>,
    /// The file's modification time when it was opened, µs since the Unix epoch.
    written_unix_us: Option<u64>,
}

enum Inner<'p> {
    Tachyon(TachyonSource<'p, 'p, FileSource>),
    TachyonFile(TachyonFile),
    Gperftools(GperftoolsSource<FileSource>),
    // (Boxed: its tables make it the largest by far.)
    Pprof(Box<PprofSource>),
    Mojo(MojoSource<FileSource>),
    Pstats(PstatsSource),
}

impl AnySource<'_> {
    /// What the symboliser could not do (a binary not found, say), for the user.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// How the native frames (`module+0xADDRESS`, [`crate::native`]) of a Tachyon input
    /// fared; `None` when it has none or symbolising was not asked for.
    pub fn native_counts(&self) -> Option<NamedCounts> {
        self.named.as_ref().map(Named::counts)
    }
}

/// Runs `$body` on the source inside, as `$s`, whatever its format.
macro_rules! each {
    ($inner:expr, $s:ident => $body:expr) => {
        match $inner {
            Inner::Tachyon($s) => $body,
            Inner::TachyonFile($s) => $body,
            Inner::Gperftools($s) => $body,
            Inner::Pprof($s) => $body,
            Inner::Mojo($s) => $body,
            Inner::Pstats($s) => $body,
        }
    };
}

impl Source for AnySource<'_> {
    type Error = ProfileError;

    fn info(&self) -> &SourceInfo {
        each!(&self.inner, s => s.info())
    }

    fn frames(&self) -> &FrameTable {
        match &self.named {
            Some(named) => named.frames(),
            None => each!(&self.inner, s => s.frames()),
        }
    }

    fn replay(&mut self, collector: &mut dyn Collector, progress: &mut dyn FnMut(u64)) -> Result<u64, Self::Error> {
        let (path, kind) = (&self.path, self.kind);
        let mut expanding;
        let collector: &mut dyn Collector = match &self.named {
            Some(named) => {
                expanding = named.collector(collector);
                &mut expanding
            }
            None => collector,
        };
        each!(&mut self.inner, s => s.replay(collector, progress).map_err(|e| ProfileError::invalid(path, kind, e)))
    }

    fn replay_named(
        &mut self,
        collector: &mut dyn NamedCollector,
        progress: &mut dyn FnMut(u64),
    ) -> Option<Result<u64, Self::Error>> {
        // Native frames named here are the expanding collector's, not the source's.
        if self.named.is_some() {
            return None;
        }
        let (path, kind) = (&self.path, self.kind);
        each!(&mut self.inner, s => s
            .replay_named(collector, progress)
            .map(|done| done.map_err(|e| ProfileError::invalid(path, kind, e))))
    }

    fn written_unix_us(&self) -> Option<u64> {
        self.written_unix_us
    }

    fn prepare(&mut self, output: &Output) -> Result<(), Self::Error> {
        let (path, kind) = (&self.path, self.kind);
        each!(&mut self.inner, s => s.prepare(output).map_err(|e| ProfileError::invalid(path, kind, e)))
    }

    fn pass_through(
        &mut self,
        output: &Output,
        dest: &mut Destination<'_>,
        progress: &mut dyn FnMut(u64),
    ) -> Option<Result<u64, ConvertError<Self::Error>>> {
        // The file's own bytes would keep the native frames unnamed.
        if self.named.is_some() {
            return None;
        }
        let (path, kind) = (&self.path, self.kind);
        each!(&mut self.inner, s => s
            .pass_through(output, dest, progress)
            .map(|done| done.map_err(|e| e.map_read(|e| ProfileError::invalid(path, kind, e)))))
    }
}

/// A profile file, its format detected from its first bytes.
pub struct Profile {
    path: PathBuf,
    kind: FileKind,
    len: u64,
    /// A Tachyon file's reader storage, kept for the profile's life: a command that ends
    /// soon after may forget the profile rather than hand megabytes back piece by piece.
    storage: Option<Box<OwnedReaderStorage>>,
    /// A small pprof file's bytes, read whole when it was opened (see [`READ_WHOLE_PPROF`]).
    contents: Option<Vec<u8>>,
    /// Its modification time when it was opened, µs since the Unix epoch.
    written_unix_us: Option<u64>,
}

/// pprof files up to this size are read whole when opened: their source reads every byte
/// anyway, and opening, sizing and reading the file a second time cost a merge of thousands
/// of small files more than a tenth of its system time.
const READ_WHOLE_PPROF: u64 = 1 << 20;

/// Files up to this size are read whole before their format is known, in one system call
/// rather than three (the first bytes, the rest, the end): little to read for a format that
/// reads the file its own way, and a merge of thousands of small pprof files spent a tenth
/// of its time in the kernel.
const READ_WHOLE_FIRST: u64 = 64 << 10;

/// Reads all of `file`, stated to be `len` bytes long, into `bytes`, asking for a byte more
/// than that: a read that returns exactly `len` bytes found the end. Only a file that was
/// not that size by then, or a read that stopped short, takes further reads.
fn read_whole(file: &mut std::fs::File, len: u64, bytes: &mut Vec<u8>) -> io::Result<()> {
    let len = len as usize;
    bytes.resize(len + 1, 0);
    let n = loop {
        match io::Read::read(file, bytes) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            read => break read?,
        }
    };
    bytes.truncate(n);
    if n != len {
        io::Read::read_to_end(file, bytes)?;
    }
    Ok(())
}

impl Profile {
    /// Opens `path` and detects its format (nothing more is read); an unknown format is
    /// [`ProfileError::UnknownFormat`].
    pub fn open(path: &Path) -> Result<Profile, ProfileError> {
        let io = |error| ProfileError::Io { path: path.to_owned(), error };
        let mut file = std::fs::File::open(path).map_err(io)?;
        let metadata = file.metadata().map_err(io)?;
        let len = metadata.len();
        let written = metadata.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
        let written_unix_us = written.map(|d| d.as_micros() as u64);
        let mut prefix = Vec::new();
        let whole = len <= READ_WHOLE_FIRST;
        if whole {
            read_whole(&mut file, len, &mut prefix).map_err(io)?;
        } else {
            (&mut file).take(DETECT_BYTES as u64).read_to_end(&mut prefix).map_err(io)?;
        }
        let kind = FileKind::detect(prefix.get(..DETECT_BYTES).unwrap_or(&prefix));
        if kind == FileKind::Unknown {
            return Err(ProfileError::UnknownFormat { path: path.to_owned() });
        }
        let contents = match kind {
            FileKind::Pprof { .. } if whole => Some(prefix),
            FileKind::Pprof { .. } if len <= READ_WHOLE_PPROF => {
                // (Read as a plain reader: `File`'s own read_to_end sizes the file again first.)
                prefix.reserve_exact((len as usize + 1).saturating_sub(prefix.len()));
                io::Read::by_ref(&mut file).take(u64::MAX).read_to_end(&mut prefix).map_err(io)?;
                Some(prefix)
            }
            _ => None,
        };
        Ok(Profile { path: path.to_owned(), kind, len, storage: None, contents, written_unix_us })
    }

    /// The format.
    pub fn kind(&self) -> FileKind {
        self.kind
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Samples the file says it holds (a Tachyon header's count; 0 where a format does not
    /// say or the header cannot be read), for progress only.
    pub fn expected_samples(&self) -> u64 {
        let meta = match self.kind {
            FileKind::Tachyon => self.file().ok().and_then(|mut f| Metadata::read(&mut f).ok()),
            _ => None,
        };
        meta.map_or(0, |m| m.header.sample_count)
    }

    fn invalid(&self, error: impl std::error::Error + Send + Sync + 'static) -> ProfileError {
        ProfileError::invalid(&self.path, self.kind, error)
    }

    fn file(&self) -> Result<FileSource, ProfileError> {
        FileSource::open(&self.path).map_err(|error| ProfileError::Io { path: self.path.clone(), error })
    }

    /// A Tachyon file's reader (metadata checked, tables loaded into storage sized from
    /// them).
    pub fn tachyon_reader(&mut self) -> Result<Reader<'_, FileSource>, ProfileError> {
        let mut src = self.file()?;
        let meta = Metadata::read(&mut src).map_err(|e| self.invalid(e))?;
        let storage = OwnedReaderStorage::for_metadata(&meta, Limits::default()).map_err(|e| self.invalid(e))?;
        let (path, kind) = (&self.path, self.kind);
        self.storage.insert(Box::new(storage)).open_file(src).map_err(|e| ProfileError::invalid(path, kind, e))
    }

    /// A gperftools profile as a source, addresses unsymbolised.
    pub fn gperftools_source(&self) -> Result<GperftoolsSource<FileSource>, ProfileError> {
        GperftoolsSource::open(self.file()?).map_err(|e| self.invalid(e))
    }

    /// A pprof profile as a source, counting the value `index` names, unsymbolised.
    pub fn pprof_source(&self, index: &SampleIndex) -> Result<PprofSource, ProfileError> {
        let read;
        let file = match &self.contents {
            Some(contents) => contents,
            None => {
                read =
                    std::fs::read(&self.path).map_err(|error| ProfileError::Io { path: self.path.clone(), error })?;
                &read
            }
        };
        PprofSource::from_bytes(file, index).map_err(|e| self.invalid(e))
    }

    /// A MOJO file as a source, weighed by `metric`.
    pub fn mojo_source(&self, metric: MojoMetric) -> Result<MojoSource<FileSource>, ProfileError> {
        Ok(MojoSource::open(self.file()?, metric))
    }

    /// The profile as the hub's source, read as `options` say.
    pub fn source(&mut self, options: &SourceOptions) -> Result<AnySource<'_>, ProfileError> {
        let mut warnings = Vec::new();
        let mut symbolize = |symbolize: &mut dyn FnMut(&mut Symbolizer)| {
            if let Some(paths) = &options.symbolize {
                let mut symbolizer = Symbolizer::new(paths.clone());
                symbolize(&mut symbolizer);
                warnings.extend(symbolizer.warnings().iter().cloned());
            }
        };
        let (path, kind, written_unix_us) = (self.path.clone(), self.kind, self.written_unix_us);
        let inner = match kind {
            FileKind::Tachyon if options.replayable => {
                Inner::TachyonFile(TachyonFile::open(&self.path).map_err(|e| self.invalid(e))?)
            }
            FileKind::Tachyon => Inner::Tachyon(TachyonSource::owning(self.tachyon_reader()?)),
            FileKind::Gperftools => {
                let mut source = self.gperftools_source()?;
                symbolize(&mut |s| source.symbolize(s));
                Inner::Gperftools(source)
            }
            FileKind::Pprof { .. } => {
                let mut source = self.pprof_source(&options.sample_index)?;
                symbolize(&mut |s| source.symbolize(s));
                Inner::Pprof(Box::new(source))
            }
            FileKind::Mojo => Inner::Mojo(self.mojo_source(options.metric)?),
            FileKind::Marshal => Inner::Pstats(
                PstatsSource::open(&self.path, options.pstats.clone())
                    .map_err(|error| ProfileError::Io { path: self.path.clone(), error })?,
            ),
            FileKind::Unknown => return Err(ProfileError::UnknownFormat { path }),
        };
        let mut named = None;
        if let Inner::Tachyon(_) | Inner::TachyonFile(_) = &inner {
            symbolize(&mut |s| named = Named::of(each!(&inner, i => i.frames()), s));
        }
        Ok(AnySource { path, kind, inner, named, warnings, written_unix_us })
    }

    /// A pstats file, loaded whole.
    pub fn pstats(&self) -> Result<crate::pstats::Stats, ProfileError> {
        let bytes = crate::file::Contents::of(&self.path)
            .map_err(|error| ProfileError::Io { path: self.path.clone(), error })?;
        crate::pstats::load(&bytes).map_err(|e| self.invalid(e))
    }

    /// The format's facts as one JSON object (without the format, which [`Profile::kind`]
    /// gives). For Tachyon, `records` also decodes every record and counts them by kind,
    /// calling `progress` with the samples so far.
    pub fn info(&mut self, records: bool, progress: &mut dyn FnMut(u64)) -> Result<Value, ProfileError> {
        let len = self.len;
        match self.kind {
            FileKind::Tachyon => {
                let path = self.path.clone();
                let mut reader = self.tachyon_reader()?;
                let meta = *reader.metadata();
                let tables = reader.tables();
                // CPython's get_info(), exactly; then what this command adds.
                let mut v = crate::tachyon::view::info(&meta, tables.string_count(), tables.frame_count());
                let (h, config) = (&meta.header, meta.header.config);
                v["compression"] = json!(h.compression.name());
                v["mode_name"] = json!(config.mode.map(|m| m.name()));
                v["capture_feature_names"] = json!(config.capture_features.map(|c| c.names().collect::<Vec<_>>()));
                v["byte_order"] = json!(if meta.endian == RunTimeEndian::Big { "big" } else { "little" });
                v["header_layout"] = json!(match meta.layout {
                    HeaderLayout::V3_15_2 => "3.15.2",
                    HeaderLayout::Dec2025 => "dec-2025",
                });
                v["file_bytes"] = json!(meta.file_len);
                v["sample_region_bytes"] = json!(meta.header.string_table_offset - HEADER_SIZE as u64);
                if records {
                    drain(&mut reader, progress)
                        .map_err(|error| ProfileError::invalid(&path, FileKind::Tachyon, error))?;
                    let c = reader.record_counts();
                    v["decompressed_sample_region_bytes"] = json!(reader.sample_region_bytes());
                    v["records"] =
                        json!({"repeat": c.repeat, "full": c.full, "suffix": c.suffix, "pop_push": c.pop_push});
                }
                Ok(v)
            }
            FileKind::Gperftools => crate::gperftools::info(self.file()?, len).map_err(|e| self.invalid(e)),
            FileKind::Pprof { .. } => Ok(self.pprof_source(&SampleIndex::Default)?.facts(len)),
            FileKind::Mojo => crate::mojo::info(self.file()?, len).map_err(|e| self.invalid(e)),
            FileKind::Marshal => {
                let stats = self.pstats()?;
                Ok(json!({
                    "file_bytes": len,
                    "functions": stats.entries.len(),
                    "caller_edges": stats.entries.iter().map(|e| e.callers.len()).sum::<usize>(),
                    "sampled_marker": stats.sampled,
                }))
            }
            FileKind::Unknown => Err(ProfileError::UnknownFormat { path: self.path.clone() }),
        }
    }

    /// Reads the whole file with the format's reader; the first error names the offset and
    /// the rule. `progress` is called with the samples so far (Tachyon).
    pub fn verify(&mut self, progress: &mut dyn FnMut(u64)) -> Result<Verified, ProfileError> {
        let len = self.len;
        match self.kind {
            FileKind::Tachyon => {
                let path = self.path.clone();
                let mut reader = self.tachyon_reader()?;
                drain(&mut reader, progress).map_err(|error| ProfileError::invalid(&path, FileKind::Tachyon, error))?;
                Ok(Verified {
                    samples: reader.samples_decoded(),
                    unit: "thread samples",
                    details: vec![format!("{} threads", reader.threads_seen())],
                })
            }
            FileKind::Gperftools => {
                let facts = crate::gperftools::info(self.file()?, len).map_err(|e| self.invalid(e))?;
                let mut details = vec![format!("{} records", facts["records"])];
                let quirks: Vec<&str> =
                    facts["quirks"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
                if !quirks.is_empty() {
                    details.push(format!("accepted as google-pprof accepts them: {}", quirks.join(", ")));
                }
                Ok(Verified { samples: facts["samples"].as_u64().unwrap_or(0), unit: "samples", details })
            }
            FileKind::Pprof { .. } => {
                let mut source = self.pprof_source(&SampleIndex::Counts)?;
                let samples = source.replay(&mut Discard, &mut |_| {}).map_err(|e| self.invalid(e))?;
                let stacks = format!("{} locations", source.frames().frames.len());
                Ok(Verified { samples, unit: "samples", details: vec![stacks] })
            }
            FileKind::Mojo => {
                let samples = crate::mojo::for_each(self.file()?, |_, _| Ok::<(), std::convert::Infallible>(()))
                    .map_err(|e| match e {
                        crate::mojo::Either::Ours(e) => self.invalid(e),
                        crate::mojo::Either::Theirs(never) => match never {},
                    })?;
                Ok(Verified { samples, unit: "samples", details: Vec::new() })
            }
            FileKind::Marshal => {
                let stats = self.pstats()?;
                let edges = stats.entries.iter().map(|e| e.callers.len()).sum::<usize>();
                Ok(Verified {
                    samples: stats.entries.len() as u64,
                    unit: "functions",
                    details: vec![format!("{edges} caller edges")],
                })
            }
            FileKind::Unknown => Err(ProfileError::UnknownFormat { path: self.path.clone() }),
        }
    }

    /// Writes the samples to `out` as JSON lines (see the module's documentation for each
    /// format's shape); returns how many lines were samples (or pstats entries).
    pub fn dump(&mut self, out: &mut dyn Write, progress: &mut dyn FnMut(u64)) -> Result<u64, ProfileError> {
        let mut out = io::BufWriter::with_capacity(1 << 16, out);
        let n = match self.kind {
            FileKind::Tachyon => {
                let path = self.path.clone();
                let mut reader = self.tachyon_reader()?;
                dump_tachyon(&mut reader, &mut out, progress).map_err(|e| match e {
                    DumpError::Read(error) => ProfileError::invalid(&path, FileKind::Tachyon, error),
                    DumpError::Write(e) => ProfileError::Write(e),
                })?
            }
            FileKind::Gperftools => dump_source(&mut self.gperftools_source()?, &mut out, progress, self)?,
            FileKind::Pprof { .. } => {
                dump_source(&mut self.pprof_source(&SampleIndex::Counts)?, &mut out, progress, self)?
            }
            FileKind::Mojo => crate::mojo::dump(self.file()?, &mut out).map_err(|e| match e {
                crate::mojo::SamplesError::Write(e) => ProfileError::Write(e),
                e => self.invalid(e),
            })?,
            FileKind::Marshal => crate::pstats::dump(&self.pstats()?, &mut out).map_err(ProfileError::Write)?,
            FileKind::Unknown => return Err(ProfileError::UnknownFormat { path: self.path.clone() }),
        };
        out.flush().map_err(ProfileError::Write)?;
        Ok(n)
    }
}

/// Decodes and checks every remaining record as a reader of the samples would, without
/// building the stacks no one reads ([`Reader::check_to_end`]).
fn drain(
    reader: &mut Reader<'_, FileSource>,
    progress: &mut dyn FnMut(u64),
) -> Result<(), tachyon_core::ReadError<io::Error>> {
    let mut ticker = crate::model::Ticker::default();
    reader.check_to_end(|done| ticker.tick(done, progress)).map(drop)
}

enum DumpError {
    Read(tachyon_core::ReadError<io::Error>),
    Write(io::Error),
}

/// CPython's reader's lines, byte for byte: one per thread sample in file order.
fn dump_tachyon(
    reader: &mut Reader<'_, FileSource>,
    out: &mut impl Write,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, DumpError> {
    let mut lines = crate::tachyon::view::SampleLines::default();
    let mut ticker = crate::model::Ticker::default();
    while let Some(record) = reader.next_item().map_err(DumpError::Read)? {
        match record {
            Record::Sample(s) => lines.write(out, &s).map_err(DumpError::Write)?,
            Record::Repeat(mut run) => {
                // A run's frames are rendered once for all its lines.
                lines.set_stack(run.tables(), run.stack).map_err(DumpError::Write)?;
                while let Some(e) = run.next_entry().map_err(DumpError::Read)? {
                    lines
                        .write_line(out, e.timestamp_us, run.interpreter_id, run.thread_id, e.status)
                        .map_err(DumpError::Write)?;
                }
            }
        }
        ticker.tick(reader.samples_decoded(), progress);
    }
    Ok(reader.samples_decoded())
}

/// A collector that keeps nothing (a whole reading, for `verify`).
struct Discard;

impl Collector for Discard {
    fn collect(&mut self, _: &FrameTable, _: &Call<'_>) {}
}

/// Writes one call of the hub as a JSON line, the shape `dump` gives of gperftools and
/// pprof profiles: `{"count", "tid", "frames"}` (`count`: samples, the value of pprof's
/// `count` sample type where it has one), frames innermost first as
/// `[filename, funcname, [lineno, end_lineno, col, end_col] | null, address | null]`
/// (`filename` is the mapped binary for a native frame without line information, the
/// address a hexadecimal string; names are not symbolised).
pub fn write_dump_line(frames: &FrameTable, call: &Call<'_>, out: &mut impl Write) -> io::Result<()> {
    let frame = |f: &FrameInfo| {
        json!([
            frames.file_of(f),
            f.funcname,
            f.location.map(|l| json!([l.lineno, l.end_lineno, l.col, l.end_col])),
            f.address.map(|a| format!("{a:#x}")),
        ])
    };
    let line = json!({
        "count": call.samples(),
        "tid": call.thread_id,
        "frames": call.stack.iter().map(|&id| frame(frames.frame(id))).collect::<Vec<_>>(),
    });
    serde_json::to_writer(&mut *out, &line)?;
    out.write_all(b"\n")
}

/// Writes every call of `source` with [`write_dump_line`]; returns the samples.
fn dump_source<S: Source>(
    source: &mut S,
    out: &mut impl Write,
    progress: &mut dyn FnMut(u64),
    profile: &Profile,
) -> Result<u64, ProfileError>
where
    S::Error: std::error::Error + Send + Sync + 'static,
{
    struct Lines<'w, W: Write> {
        out: &'w mut W,
        failed: Option<io::Error>,
    }
    impl<W: Write> Collector for Lines<'_, W> {
        fn collect(&mut self, frames: &FrameTable, call: &Call<'_>) {
            if self.failed.is_none() {
                self.failed = write_dump_line(frames, call, self.out).err();
            }
        }
    }
    let mut lines = Lines { out, failed: None };
    let n = source.replay(&mut lines, progress).map_err(|e| profile.invalid(e))?;
    match lines.failed {
        Some(e) => Err(ProfileError::Write(e)),
        None => Ok(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small file is read whole whether the size stated when it was opened is its size, or
    /// it grew or shrank since.
    #[test]
    fn a_small_file_reads_whole_whatever_size_was_stated() {
        let path = std::env::temp_dir().join(format!("tachyon-read-whole-{}", std::process::id()));
        let contents: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &contents).unwrap();
        for stated in [0, 1, 4999, 5000, 5001, 9000] {
            let mut file = std::fs::File::open(&path).unwrap();
            let mut bytes = vec![7; 3];
            read_whole(&mut file, stated, &mut bytes).unwrap();
            assert!(bytes == contents, "stated {stated}: {} bytes read", bytes.len());
        }
        std::fs::remove_file(&path).unwrap();
    }
}
