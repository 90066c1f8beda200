//! Outputs: every format a profile can be converted into, each one module, all listed in
//! one registry ([`OutputKind`], with [`Output`] carrying each one's options). An output reads
//! the hub ([`crate::model`]): it replays a [`Source`] once into its collector, aggregating on
//! frame ids, and writes at the end; memory grows with distinct stacks and frames, not with
//! samples (except where the format itself lists every sample: Firefox profiler and
//! speedscope). An input may also pass itself through to its own format without the hub
//! (Tachyon re-encoding, which keeps CPython's records byte for byte).

pub mod austin;
pub mod austin_speedscope;
pub mod collapsed;
pub mod flamegraph;
pub mod gecko;
pub mod gperftools;
pub mod jsonl;
pub mod mojo;
pub mod pprof;
pub mod pstats;
pub mod speedscope;
pub mod tachyon;

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::Path;

use clap::ValueEnum;

use tachyon_core::gperftools::RunTimeWord;
use tachyon_core::kind::FileKind;
use tachyon_core::Compression;

use crate::model::Source;

/// Strings numbered in the order first met, as the string tables of the jsonl, Firefox
/// profiler and pprof formats are.
#[derive(Debug, Default, Clone)]
pub struct StringIndex {
    list: Vec<String>,
    ids: HashMap<String, u32>,
}

impl StringIndex {
    /// The id of `s`, numbering it if it is new.
    pub fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.list.len() as u32;
        self.list.push(s.to_owned());
        self.ids.insert(s.to_owned(), i);
        i
    }

    /// The strings, by id.
    pub fn strings(&self) -> &[String] {
        &self.list
    }

    /// The strings, by id, owned.
    pub fn into_strings(self) -> Vec<String> {
        self.list
    }
}

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

/// Every output format: the one list the command, its help and its checks are made from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputKind {
    /// Collapsed stacks, byte-identical to CPython's `replay --collapsed`.
    Collapsed,
    /// The marshal file of CPython's `replay --pstats -o` (pstats.Stats loads it).
    Pstats,
    /// The table CPython's `replay` prints.
    PstatsText,
    /// An SVG flame graph.
    Flamegraph,
    /// Firefox Profiler JSON with the content of CPython's `replay --gecko`.
    Gecko,
    /// speedscope JSON, one sampled profile per thread.
    Speedscope,
    /// Gzipped pprof profile.proto (go tool pprof).
    Pprof,
    /// CPython's `replay --jsonl` aggregate records.
    Jsonl,
    /// Tachyon again, in another byte order or compression.
    Tachyon,
    /// A gperftools CPU profile (from a gperftools input: re-encoded, byte-identical unless
    /// another slot width or byte order is asked for).
    Gperftools,
    /// Austin's text format, as austin-python's `mojo2austin` writes it (of a MOJO input, or
    /// of the MOJO file `--to mojo` makes).
    Austin,
    /// Austin's MOJO (from MOJO input: re-encoded, byte-identical unless another version is
    /// asked for; from any other: what Austin would have written for its samples).
    Mojo,
    /// Graphviz DOT: the call graph gprof2dot draws with `-f pstats` (of a pstats input, or
    /// of the pstats file `--to pstats` makes).
    Dot,
}

impl OutputKind {
    /// The command-line options (long names) that belong to this output alone.
    pub fn options(self) -> &'static [&'static str] {
        match self {
            OutputKind::Pstats => &["pstats-compat", "keep-sampled-marker"],
            OutputKind::PstatsText => &["sort", "limit", "no-summary", "strip-dirs", "callers", "callees"],
            OutputKind::Flamegraph => &["title"],
            OutputKind::Tachyon => &["byte-order", "compression"],
            OutputKind::Gperftools => &["byte-order", "word-size"],
            OutputKind::Mojo => &["mojo-version"],
            _ => &[],
        }
    }

    /// The outputs an option belongs to.
    pub fn owning(option: &str) -> impl Iterator<Item = OutputKind> + '_ {
        OutputKind::value_variants().iter().copied().filter(move |k| k.options().contains(&option))
    }
}

/// The name `--to` takes (clap's, from the variant's name).
impl fmt::Display for OutputKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.to_possible_value() {
            Some(v) => f.write_str(v.get_name()),
            None => Ok(()),
        }
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
        sort: pstats::SortOrder,
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
    /// Firefox Profiler JSON, as `replay --gecko`.
    Gecko,
    /// speedscope JSON, one sampled profile per thread; `name` titles it.
    Speedscope {
        /// Title (usually the input's file name).
        name: String,
    },
    /// Gzipped pprof `profile.proto`.
    Pprof,
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
}

impl Output {
    /// Which output this is.
    pub fn kind(&self) -> OutputKind {
        match self {
            Output::Collapsed => OutputKind::Collapsed,
            Output::Pstats { .. } => OutputKind::Pstats,
            Output::PstatsText { .. } => OutputKind::PstatsText,
            Output::Flamegraph { .. } => OutputKind::Flamegraph,
            Output::Gecko => OutputKind::Gecko,
            Output::Speedscope { .. } => OutputKind::Speedscope,
            Output::Pprof => OutputKind::Pprof,
            Output::Jsonl { .. } => OutputKind::Jsonl,
            Output::Tachyon { .. } => OutputKind::Tachyon,
            Output::Gperftools { .. } => OutputKind::Gperftools,
            Output::Austin => OutputKind::Austin,
            Output::Mojo { .. } => OutputKind::Mojo,
            Output::Dot => OutputKind::Dot,
        }
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
}

/// [`tachyon::write_from_hub`] in the byte order asked for.
fn tachyon_from_hub<S: Source, W>(
    source: &mut S,
    sink: W,
    big: bool,
    compression: Compression,
    progress: &mut dyn FnMut(u64),
) -> Result<W, ConvertError<S::Error>>
where
    W: embedded_io::Write + embedded_io::Seek,
    W::Error: fmt::Debug,
{
    if big {
        tachyon::write_from_hub(source, sink, tachyon_core::BigEndian, compression, progress)
    } else {
        tachyon::write_from_hub(source, sink, tachyon_core::LittleEndian, compression, progress)
    }
}

/// Converts every sample of `source` into `output` at `dest`; returns the sample count. An
/// input's own format is written by the input itself when it can keep it as it was
/// ([`Source::pass_through`]: Tachyon re-encoding).
pub fn convert<S: Source>(
    source: &mut S,
    output: &Output,
    dest: Destination<'_>,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, ConvertError<S::Error>> {
    let mut dest = dest;
    source.prepare(output);
    if let Some(done) = source.pass_through(output, &mut dest, progress) {
        return done;
    }
    let info = source.info().clone();
    let unsupported = |why| ConvertError::Unsupported { output: output.kind(), input: info.kind, why };
    match output {
        Output::Gecko if !info.timestamps => {
            return Err(unsupported(
                "the Firefox profiler needs a time for every sample, and this input counts samples without times",
            ))
        }
        Output::Tachyon { big_endian, compression } => {
            let (big, compression) =
                (big_endian.unwrap_or(cfg!(target_endian = "big")), compression.unwrap_or(Compression::None));
            return match dest {
                Destination::File(p) => {
                    crate::file::create(p).map_err(|e| ConvertError::Write(at(p, e))).and_then(|sink| {
                        let sink = tachyon_from_hub(source, sink, big, compression, progress)?;
                        sink.0.into_inner().map(drop).map_err(|e| ConvertError::Write(at(p, e.into_error())))
                    })
                }
                Destination::Stream(w) => {
                    tachyon_from_hub(source, crate::memory::VecSink::default(), big, compression, progress)
                        .and_then(|sink| Ok(w.write_all(&sink.into_inner())?))
                }
            }
            .map(|()| info.expected_samples);
        }
        Output::Gperftools { word, big_endian } => {
            let endian = match big_endian {
                Some(true) => tachyon_core::RunTimeEndian::Big,
                Some(false) => tachyon_core::RunTimeEndian::Little,
                None => tachyon_core::RunTimeEndian::default(),
            };
            return match dest {
                Destination::File(p) => {
                    let file = std::fs::File::create(p).map_err(|e| ConvertError::Write(at(p, e)))?;
                    let mut out = io::BufWriter::new(file);
                    let n = gperftools::write_from_hub(source, gperftools::IoSink(&mut out), *word, endian, progress)?;
                    io::Write::flush(&mut out).map_err(|e| ConvertError::Write(at(p, e)))?;
                    Ok(n)
                }
                Destination::Stream(w) => {
                    gperftools::write_from_hub(source, gperftools::IoSink(w), *word, endian, progress)
                }
            };
        }
        _ => {}
    }
    let mut file;
    let out: &mut dyn io::Write = match dest {
        Destination::File(p) => {
            file = std::fs::File::create(p).map_err(|e| ConvertError::Write(at(p, e)))?;
            &mut file
        }
        Destination::Stream(w) => w,
    };
    // Austin's formats buffer their own output.
    match output {
        Output::Mojo { version } => return mojo::write_from_hub(source, out, *version, progress),
        Output::Austin => return mojo::austin_from_hub(source, out, progress),
        _ => {}
    }
    let mut out = io::BufWriter::with_capacity(1 << 16, out);
    let interval_us = info.sample_interval_us;
    let collapsed = || collapsed::CollapsedCollector::new(info.naming, info.threads);
    let n = match output {
        Output::Collapsed => {
            let mut c = collapsed();
            let n = source.replay(&mut c, progress).map_err(ConvertError::Read)?;
            c.write(source.frames(), &mut out)?;
            n
        }
        Output::Pstats { compat } => {
            let mut c = pstats::PstatsCollector::default();
            let n = source.replay(&mut c, progress).map_err(ConvertError::Read)?;
            pstats::write_marshal(&c.rows(source.frames(), interval_us), *compat, &mut out)?;
            n
        }
        Output::Dot => {
            // gprof2dot draws a sampled profile from its pstats file: the same file here.
            let mut c = pstats::PstatsCollector::default();
            let n = source.replay(&mut c, progress).map_err(ConvertError::Read)?;
            let mut file = Vec::new();
            pstats::write_marshal(&c.rows(source.frames(), interval_us), false, &mut file)?;
            // pstats cannot load a profile without samples (an empty dict), so gprof2dot draws
            // nothing of it.
            let stats = crate::pstats::load(&file).map_err(|_| {
                io::Error::other("no samples: pstats cannot load an empty profile, nor gprof2dot draw it")
            })?;
            io::Write::write_all(&mut out, crate::dot::dot(&stats).map_err(io::Error::other)?.as_bytes())?;
            n
        }
        Output::PstatsText { sort, limit, summary } => {
            let mut c = pstats::PstatsCollector::default();
            let n = source.replay(&mut c, progress).map_err(ConvertError::Read)?;
            let rows = c.rows(source.frames(), interval_us);
            pstats::write_text(&rows, *sort, *limit, *summary, info.cpython_mode, &mut out)?;
            n
        }
        Output::Flamegraph { title } => {
            let mut c = collapsed();
            let n = source.replay(&mut c, progress).map_err(ConvertError::Read)?;
            flamegraph::write(&c.lines(source.frames()), title, &mut out)?;
            n
        }
        Output::Gecko => {
            let mut c = gecko::GeckoCollector::default();
            let n = source.replay(&mut c, progress).map_err(ConvertError::Read)?;
            c.write(info.start_time_us as f64 / 1000.0, &mut out)?;
            n
        }
        Output::Speedscope { name } => {
            let mut c = speedscope::SpeedscopeCollector::default();
            let n = source.replay(&mut c, progress).map_err(ConvertError::Read)?;
            c.write(source.frames(), name, interval_us, &mut out)?;
            n
        }
        Output::Pprof => {
            let mut c = pprof::PprofCollector::default();
            let n = source.replay(&mut c, progress).map_err(ConvertError::Read)?;
            let profile = c.profile(source.frames(), &info);
            pprof::write_gzipped(&profile, &mut out)?;
            n
        }
        Output::Jsonl { run_id } => {
            let mut c = jsonl::JsonlCollector::default();
            let n = source.replay(&mut c, progress).map_err(ConvertError::Read)?;
            let id = run_id.clone().unwrap_or_else(jsonl::random_run_id);
            c.write(interval_us, info.cpython_mode, &id, &mut out)?;
            n
        }
        Output::Tachyon { .. } | Output::Gperftools { .. } | Output::Austin | Output::Mojo { .. } => {
            unreachable!("written above")
        }
    };
    io::Write::flush(&mut out)?;
    Ok(n)
}

/// `e`, naming the file it happened to.
pub(crate) fn at(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// Collapsed lines of a whole profile (for differential flame graphs).
pub fn collapsed_lines<S: Source>(
    source: &mut S,
    progress: &mut dyn FnMut(u64),
) -> Result<Vec<(String, u64)>, ConvertError<S::Error>> {
    let info = source.info();
    let mut c = collapsed::CollapsedCollector::new(info.naming, info.threads);
    source.replay(&mut c, progress).map_err(ConvertError::Read)?;
    Ok(c.lines(source.frames()))
}
