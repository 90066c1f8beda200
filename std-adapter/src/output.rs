//! What a conversion is asked for and what it can fail with: the outputs with their options
//! ([`Output`], listed in [`OutputKind`]), where an output goes ([`Destination`]) and why a
//! conversion failed ([`ConvertError`]). Inputs (each format's `source` module) and outputs
//! ([`crate::convert`]) both depend on this module and it on neither (it uses only the
//! shared `file` and `memory`), so the hub's types have
//! one home and the modules no cycle.

use std::fmt;
use std::io;
use std::path::Path;

use crate::choice::Choice;
use tachyon_core::gperftools::RunTimeWord;
use tachyon_core::kind::FileKind;
use tachyon_core::Compression;

use crate::file::FileSink;
use crate::memory::VecSink;

/// Why a conversion failed; `E` is what reading the input fails with.
#[derive(Debug)]
pub enum ConvertError<E> {
    /// The input is bad or unreadable.
    Read(E),
    /// Writing the output failed.
    Write(io::Error),
    /// The writer refused a sample or its storage could not be sized (re-encoding).
    Encode(String),
    /// The output needs what the input does not have.
    Unsupported {
        /// The output.
        output: OutputKind,
        /// The input's format.
        input: FileKind,
        /// What is missing.
        why: &'static str,
    },
}

impl<E> ConvertError<E> {
    /// The same error with the input's error made another type.
    pub fn map_read<F>(self, f: impl FnOnce(E) -> F) -> ConvertError<F> {
        match self {
            ConvertError::Read(e) => ConvertError::Read(f(e)),
            ConvertError::Write(e) => ConvertError::Write(e),
            ConvertError::Encode(e) => ConvertError::Encode(e),
            ConvertError::Unsupported { output, input, why } => ConvertError::Unsupported { output, input, why },
        }
    }
}

impl<E: fmt::Display> fmt::Display for ConvertError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConvertError::Read(e) => write!(f, "{e}"),
            ConvertError::Write(e) => write!(f, "writing the output: {e}"),
            ConvertError::Encode(e) => write!(f, "encoding: {e}"),
            ConvertError::Unsupported { output, input, why } => {
                write!(f, "cannot convert a {} --to {output}: {why}", input.title())
            }
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for ConvertError<E> {}

impl<E> From<io::Error> for ConvertError<E> {
    fn from(e: io::Error) -> Self {
        ConvertError::Write(e)
    }
}

crate::choices! {
    /// Every output format: the one list the command, its help and its checks are made from.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum OutputKind {
        /// Collapsed stacks, byte-identical to CPython's `replay --collapsed`.
        Collapsed = "collapsed",
        /// The marshal file of CPython's `replay --pstats -o` (pstats.Stats loads it).
        Pstats = "pstats",
        /// The table CPython's `replay` prints.
        PstatsText = "pstats-text",
        /// An SVG flame graph.
        Flamegraph = "flamegraph",
        /// An interactive flame graph: one offline HTML page (zoom, search, threads) with the
        /// numbers of CPython's `replay --flamegraph`.
        FlamegraphHtml = "flamegraph-html",
        /// Samples per source line: a folder with an index of the source files and a page per
        /// file (`-o DIR`), with the counts of CPython's `replay --heatmap`.
        Heatmap = "heatmap",
        /// Firefox Profiler JSON with the content of CPython's `replay --gecko`.
        Gecko = "gecko",
        /// speedscope JSON, one sampled profile per thread.
        Speedscope = "speedscope",
        /// Gzipped pprof profile.proto (go tool pprof).
        Pprof = "pprof",
        /// OpenTelemetry profiles: an OTLP `ExportProfilesServiceRequest` in protobuf.
        Otlp = "otlp",
        /// The same request in OTLP/JSON.
        OtlpJson = "otlp-json",
        /// CPython's `replay --jsonl` aggregate records.
        Jsonl = "jsonl",
        /// Tachyon again, in another byte order or compression.
        Tachyon = "tachyon",
        /// A gperftools CPU profile (from a gperftools input: re-encoded, byte-identical unless
        /// another slot width or byte order is asked for).
        Gperftools = "gperftools",
        /// Austin's text format, as austin-python's `mojo2austin` writes it (of a MOJO input, or
        /// of the MOJO file `--to mojo` makes).
        Austin = "austin",
        /// Austin's MOJO (from MOJO input: re-encoded, byte-identical unless another version is
        /// asked for; from any other: what Austin would have written for its samples).
        Mojo = "mojo",
        /// Graphviz DOT: the call graph gprof2dot draws with `-f pstats` (of a pstats input, or
        /// of the pstats file `--to pstats` makes).
        Dot = "dot",
        /// Callgrind's format (KCachegrind, `callgrind_annotate`): samples per function and
        /// source line, calls with their inclusive samples (of a pstats input: its times, ns).
        Callgrind = "callgrind",
        /// A Perfetto trace: a `stack_sample` packet per sample, frames and stacks interned.
        Perfetto = "perfetto",
    }
}

impl OutputKind {
    /// The command-line options (long names) that belong to this output alone.
    pub fn options(self) -> &'static [&'static str] {
        match self {
            OutputKind::Pstats => &["pstats-compat", "keep-sampled-marker"],
            OutputKind::PstatsText => &["sort", "limit", "no-summary", "strip-dirs", "callers", "callees"],
            OutputKind::Flamegraph | OutputKind::FlamegraphHtml => &["title"],
            OutputKind::Heatmap => &["title", "source-root"],
            OutputKind::Tachyon => &["byte-order", "compression"],
            OutputKind::Gperftools => &["byte-order", "word-size"],
            OutputKind::Mojo => &["mojo-version"],
            OutputKind::Otlp | OutputKind::OtlpJson => &["service-name"],
            _ => &[],
        }
    }

    /// Whether the output is bytes rather than UTF-8 text (an API returning it in memory
    /// gives bytes or a string by this). Every kind is listed, so a new one must say.
    pub fn is_binary(self) -> bool {
        match self {
            OutputKind::Pstats
            | OutputKind::Pprof
            | OutputKind::Otlp
            | OutputKind::Tachyon
            | OutputKind::Gperftools
            | OutputKind::Mojo
            | OutputKind::Perfetto => true,
            OutputKind::Collapsed
            | OutputKind::PstatsText
            | OutputKind::Flamegraph
            | OutputKind::FlamegraphHtml
            | OutputKind::Heatmap
            | OutputKind::Gecko
            | OutputKind::Speedscope
            | OutputKind::OtlpJson
            | OutputKind::Jsonl
            | OutputKind::Austin
            | OutputKind::Dot
            | OutputKind::Callgrind => false,
        }
    }

    /// The outputs an option belongs to.
    pub fn owning(option: &str) -> impl Iterator<Item = OutputKind> + '_ {
        OutputKind::ALL.iter().map(|(k, _, _)| *k).filter(move |k| k.options().contains(&option))
    }
}

/// An output with its options.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Collapsed stacks, as `replay --collapsed`.
    Collapsed,
    /// The marshal file of `replay --pstats -o`; `compat` leaves out 3.15's marker key.
    Pstats {
        /// Loadable by Pythons before 3.15.
        compat: bool,
    },
    /// The table `replay` prints.
    PstatsText {
        /// Row order.
        sort: SortOrder,
        /// Most rows (CPython's default is 15).
        limit: Option<usize>,
        /// With the "interesting functions" summary.
        summary: bool,
    },
    /// An SVG flame graph titled `title`.
    Flamegraph {
        /// Title.
        title: String,
    },
    /// The interactive flame graph page titled `title` ([`crate::html::flame`]).
    FlamegraphHtml {
        /// Title.
        title: String,
    },
    /// The line heatmap: a folder of pages ([`crate::html::heatmap`]).
    Heatmap {
        /// Title of the index.
        title: String,
        /// `(OLD, NEW)`: a source path starting with OLD is read from NEW and the rest.
        source_roots: Vec<(String, String)>,
    },
    /// Firefox Profiler JSON, as `replay --gecko`.
    Gecko,
    /// speedscope JSON, one sampled profile per thread; `name` titles it.
    Speedscope {
        /// Title (usually the input's file name).
        name: String,
    },
    /// Gzipped pprof `profile.proto`.
    Pprof,
    /// An OTLP profiles request ([`crate::otlp`]).
    Otlp {
        /// OTLP/JSON instead of protobuf.
        json: bool,
        /// The resource's `service.name` (default: `unknown_service`).
        service_name: Option<String>,
    },
    /// `replay --jsonl`; `run_id` defaults to a random UUID.
    Jsonl {
        /// Tag of every line.
        run_id: Option<String>,
    },
    /// Tachyon.
    Tachyon {
        /// Big-endian output; default: the input's byte order.
        big_endian: Option<bool>,
        /// Default: the input's compression.
        compression: Option<Compression>,
    },
    /// A gperftools CPU profile.
    Gperftools {
        /// Slot width; default: the input's.
        word: Option<RunTimeWord>,
        /// Big-endian slots; default: the input's byte order.
        big_endian: Option<bool>,
    },
    /// Austin's text format.
    Austin,
    /// MOJO.
    Mojo {
        /// Version 1 to 4; default: the input's.
        version: Option<u8>,
    },
    /// The call graph gprof2dot draws of the profile's pstats file.
    Dot,
    /// Callgrind's format.
    Callgrind,
    /// A Perfetto trace.
    Perfetto,
}

impl Output {
    /// Which output this is.
    pub fn kind(&self) -> OutputKind {
        match self {
            Output::Collapsed => OutputKind::Collapsed,
            Output::Pstats { .. } => OutputKind::Pstats,
            Output::PstatsText { .. } => OutputKind::PstatsText,
            Output::Flamegraph { .. } => OutputKind::Flamegraph,
            Output::FlamegraphHtml { .. } => OutputKind::FlamegraphHtml,
            Output::Heatmap { .. } => OutputKind::Heatmap,
            Output::Gecko => OutputKind::Gecko,
            Output::Speedscope { .. } => OutputKind::Speedscope,
            Output::Pprof => OutputKind::Pprof,
            Output::Otlp { json: false, .. } => OutputKind::Otlp,
            Output::Otlp { json: true, .. } => OutputKind::OtlpJson,
            Output::Jsonl { .. } => OutputKind::Jsonl,
            Output::Tachyon { .. } => OutputKind::Tachyon,
            Output::Gperftools { .. } => OutputKind::Gperftools,
            Output::Austin => OutputKind::Austin,
            Output::Mojo { .. } => OutputKind::Mojo,
            Output::Dot => OutputKind::Dot,
            Output::Callgrind => OutputKind::Callgrind,
            Output::Perfetto => OutputKind::Perfetto,
        }
    }
}

crate::choices! {
    /// Sort orders of the printed table (CPython's `--sort`, same names on the command line).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum SortOrder {
        /// Direct samples, descending (the default).
        Nsamples = "nsamples",
        /// Direct time, descending.
        Tottime = "tottime",
        /// Cumulative time, descending.
        Cumtime = "cumtime",
        /// Direct share, descending.
        SamplePct = "sample-pct",
        /// Cumulative share, descending.
        CumulPct = "cumul-pct",
        /// Cumulative samples, descending.
        NsamplesCumul = "nsamples-cumul",
        /// Python's `str()` of the key, ascending.
        Name = "name",
    }
}

/// Where an output goes.
pub enum Destination<'a> {
    /// A file, created (a Tachyon output is written in place: its header comes last).
    File(&'a Path),
    /// A stream (a Tachyon output is made in memory first: the stream cannot seek).
    Stream(&'a mut dyn io::Write),
}

impl Destination<'_> {
    /// Runs `write` over the destination as a stream: the file, created, or the stream
    /// itself. Outputs that need to seek (Tachyon) do not come here.
    pub fn write_with<T, E>(
        &mut self,
        write: impl FnOnce(&mut dyn io::Write) -> Result<T, ConvertError<E>>,
    ) -> Result<T, ConvertError<E>> {
        match self {
            Destination::File(p) => {
                let mut file = std::fs::File::create(*p).map_err(|e| ConvertError::Write(at(p, e)))?;
                write(&mut file)
            }
            Destination::Stream(w) => write(&mut **w),
        }
    }

    /// Runs `write` over the destination for a writer that does not buffer itself (the
    /// gperftools writer): a file is created, buffered and flushed, its errors naming it; a
    /// stream is written as it is.
    pub fn write_buffered<T, E>(
        &mut self,
        write: impl FnOnce(&mut dyn io::Write) -> Result<T, ConvertError<E>>,
    ) -> Result<T, ConvertError<E>> {
        match self {
            Destination::File(p) => {
                let file = std::fs::File::create(*p).map_err(|e| ConvertError::Write(at(p, e)))?;
                let mut out = io::BufWriter::new(file);
                let done = write(&mut out)?;
                io::Write::flush(&mut out).map_err(|e| ConvertError::Write(at(p, e)))?;
                Ok(done)
            }
            Destination::Stream(w) => write(&mut **w),
        }
    }

    /// A sink for a writer that seeks (Tachyon's writes its header last): the file, created,
    /// or memory for a stream, which cannot seek; [`SeekableSink::finish`] ends it.
    pub fn seekable(&mut self) -> io::Result<SeekableSink<'_>> {
        Ok(match self {
            Destination::File(p) => SeekableSink::File(crate::file::create(p).map_err(|e| at(p, e))?, p),
            Destination::Stream(w) => SeekableSink::Memory(VecSink::default(), &mut **w),
        })
    }
}

/// A [`Destination`] as a `Write + Seek` sink (see [`Destination::seekable`]).
pub enum SeekableSink<'a> {
    /// The file, buffered.
    File(FileSink, &'a Path),
    /// Memory, copied to the stream at the end.
    Memory(VecSink, &'a mut dyn io::Write),
}

impl SeekableSink<'_> {
    /// Flushes the file, or copies the bytes to the stream.
    pub fn finish<E>(self) -> Result<(), ConvertError<E>> {
        match self {
            SeekableSink::File(sink, p) => {
                sink.0.into_inner().map(drop).map_err(|e| ConvertError::Write(at(p, e.into_error())))
            }
            SeekableSink::Memory(sink, w) => Ok(w.write_all(&sink.into_inner())?),
        }
    }
}

impl embedded_io::ErrorType for SeekableSink<'_> {
    type Error = io::Error;
}

impl embedded_io::Write for SeekableSink<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            SeekableSink::File(sink, _) => sink.write(buf),
            SeekableSink::Memory(sink, _) => sink.write(buf).map_err(|never| match never {}),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            SeekableSink::File(sink, _) => embedded_io::Write::flush(sink),
            SeekableSink::Memory(sink, _) => embedded_io::Write::flush(sink).map_err(|never| match never {}),
        }
    }
}

impl embedded_io::Seek for SeekableSink<'_> {
    fn seek(&mut self, to: embedded_io::SeekFrom) -> io::Result<u64> {
        match self {
            SeekableSink::File(sink, _) => sink.seek(to),
            SeekableSink::Memory(sink, _) => sink.seek(to).map_err(|never| match never {}),
        }
    }
}

/// `e`, naming the file it happened to.
pub fn at(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}
