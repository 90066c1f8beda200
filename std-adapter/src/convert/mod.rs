//! Conversions of a Tachyon file into the formats people view profiles in. Each one replays
//! the file once ([`crate::replay`]), aggregating on frame ids, and writes its output at the
//! end; memory grows with distinct stacks and frames, not with samples (except where the
//! format itself lists every sample: Firefox profiler and speedscope).

pub mod collapsed;
pub mod flamegraph;
pub mod gecko;
pub mod jsonl;
pub mod pprof;
pub mod pstats;
pub mod speedscope;
pub mod tachyon;

use std::collections::HashMap;
use std::fmt;
use std::io;

use embedded_io::{Read, Seek};
use tachyon_core::{ReadError, Reader};

use crate::replay::{replay, Collector, FrameTable};

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

/// Why a conversion failed.
#[derive(Debug)]
pub enum ConvertError<E = io::Error> {
    /// The input is bad or unreadable.
    Read(ReadError<E>),
    /// Writing the output failed.
    Write(io::Error),
    /// The writer refused a sample or its storage could not be sized (re-encoding).
    Encode(String),
}

impl<E: fmt::Debug> fmt::Display for ConvertError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConvertError::Read(e) => write!(f, "{e}"),
            ConvertError::Write(e) => write!(f, "writing the output: {e}"),
            ConvertError::Encode(e) => write!(f, "encoding: {e}"),
        }
    }
}

impl<E: fmt::Debug> std::error::Error for ConvertError<E> {}

impl<E> From<io::Error> for ConvertError<E> {
    fn from(e: io::Error) -> Self {
        ConvertError::Write(e)
    }
}

/// Replays every sample of `reader` into `collector`; returns the decoded frame table and the
/// sample count.
pub fn collect<R: Read + Seek>(
    reader: &mut Reader<'_, R>,
    collector: &mut dyn Collector,
    progress: &mut dyn FnMut(u64),
) -> Result<(FrameTable, u64), ConvertError<R::Error>> {
    let frames = FrameTable::new(reader.tables());
    let n = replay(reader, &frames, collector, progress).map_err(ConvertError::Read)?;
    Ok((frames, n))
}

/// A text or binary output format and its options.
#[derive(Debug, Clone, PartialEq)]
pub enum Format {
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
}

/// Converts every sample of `reader` into `format` on `out`; returns the sample count.
pub fn convert<R: Read + Seek>(
    reader: &mut Reader<'_, R>,
    format: &Format,
    out: &mut dyn io::Write,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, ConvertError<R::Error>> {
    let header = reader.metadata().header;
    let mode = header.config.mode.map(|m| m.value());
    let mut out = io::BufWriter::with_capacity(1 << 16, out);
    let n = match format {
        Format::Collapsed => {
            let mut c = collapsed::CollapsedCollector::default();
            let (frames, n) = collect(reader, &mut c, progress)?;
            c.write(&frames, &mut out)?;
            n
        }
        Format::Pstats { compat } => {
            let mut c = pstats::PstatsCollector::default();
            let (frames, n) = collect(reader, &mut c, progress)?;
            pstats::write_marshal(&c.rows(&frames, header.sample_interval_us), *compat, &mut out)?;
            n
        }
        Format::PstatsText { sort, limit, summary } => {
            let mut c = pstats::PstatsCollector::default();
            let (frames, n) = collect(reader, &mut c, progress)?;
            let rows = c.rows(&frames, header.sample_interval_us);
            pstats::write_text(&rows, *sort, *limit, *summary, mode, &mut out)?;
            n
        }
        Format::Flamegraph { title } => {
            let mut c = collapsed::CollapsedCollector::default();
            let (frames, n) = collect(reader, &mut c, progress)?;
            flamegraph::write(&c.lines(&frames), title, &mut out)?;
            n
        }
        Format::Gecko => {
            let mut c = gecko::GeckoCollector::default();
            let (_, n) = collect(reader, &mut c, progress)?;
            c.write(header.start_time_us as f64 / 1000.0, &mut out)?;
            n
        }
        Format::Speedscope { name } => {
            let mut c = speedscope::SpeedscopeCollector::default();
            let (frames, n) = collect(reader, &mut c, progress)?;
            c.write(&frames, name, header.sample_interval_us, &mut out)?;
            n
        }
        Format::Pprof => {
            let mut c = pprof::PprofCollector::default();
            let (frames, n) = collect(reader, &mut c, progress)?;
            let mode = jsonl::mode_name(mode.unwrap_or(0));
            let profile = c.profile(&frames, header.start_time_us, header.sample_interval_us, mode);
            pprof::write_gzipped(&profile, &mut out)?;
            n
        }
        Format::Jsonl { run_id } => {
            let mut c = jsonl::JsonlCollector::default();
            let (_, n) = collect(reader, &mut c, progress)?;
            let id = run_id.clone().unwrap_or_else(jsonl::random_run_id);
            c.write(header.sample_interval_us, mode, &id, &mut out)?;
            n
        }
    };
    io::Write::flush(&mut out)?;
    Ok(n)
}

/// Collapsed lines of a whole file (for differential flame graphs).
pub fn collapsed_lines<R: Read + Seek>(
    reader: &mut Reader<'_, R>,
    progress: &mut dyn FnMut(u64),
) -> Result<Vec<(String, u64)>, ConvertError<R::Error>> {
    let mut c = collapsed::CollapsedCollector::default();
    let (frames, _) = collect(reader, &mut c, progress)?;
    Ok(c.lines(&frames))
}
