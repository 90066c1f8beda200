//! A pstats file (cProfile, `profile`, CPython 3.15's sampler and tracer) as a [`Source`].
//!
//! A pstats file holds per-function totals and caller→callee edges, not the stacks the hub
//! carries, so it replays no samples: it writes its own outputs itself
//! ([`Source::pass_through`]) — the table `pstats.Stats.print_stats` prints
//! (`--to pstats-text`, with `sort_stats` keys and restrictions as Python takes them), the
//! file again as `pstats.Stats.dump_stats` writes it (`--to pstats`), the graph gprof2dot
//! draws of it (`--to dot`) and that graph in Callgrind's format (`--to callgrind`) — and
//! refuses every other output, saying why. The file is loaded
//! once the output is known: the table needs only what it prints.

use std::fmt;
use std::path::Path;

use tachyon_core::kind::FileKind;

use crate::file::Contents;
use crate::model::{Clock, Collector, FrameTable, Naming, Source, SourceInfo};
use crate::output::{ConvertError, Destination, Output};
use crate::pstats::{PrintOptions, PstatsError};

/// How a pstats file is printed and written again.
#[derive(Debug, Clone, Default)]
pub struct PstatsOptions {
    /// `print_stats`'s sort keys, restrictions, `strip_dirs`, callers or callees.
    pub print: PrintOptions,
    /// `--to pstats`: keep 3.15's `("__sampled__",)` marker (left out by default, so that
    /// every Python 3 loads the file).
    pub keep_sampled_marker: bool,
}

/// Why a pstats file could not be read or printed.
#[derive(Debug)]
pub enum PstatsSourceError {
    /// The file is not one `pstats.Stats` loads.
    Load(PstatsError),
    /// Python would raise while printing it (a value of a shape the table cannot show).
    Print(String),
}

impl fmt::Display for PstatsSourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PstatsSourceError::Load(e) => write!(f, "{e}"),
            PstatsSourceError::Print(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for PstatsSourceError {}

/// A pstats file, its bytes read (or mapped), loaded when an output asks.
pub struct PstatsSource {
    bytes: Contents,
    options: PstatsOptions,
    info: SourceInfo,
    frames: FrameTable,
}

impl PstatsSource {
    /// Reads the file at `path`; the print options' header line is the file's, as
    /// `Stats(path)` makes it.
    pub fn open(path: &Path, mut options: PstatsOptions) -> std::io::Result<Self> {
        let bytes = Contents::of(path)?;
        if options.print.files.is_empty() {
            options.print.files = vec![crate::pstats::ctime_line(path)];
        }
        let info = SourceInfo {
            kind: FileKind::Marshal,
            start_time_us: 0,
            sample_interval_us: 0,
            mode: "".into(),
            cpython_mode: None,
            expected_samples: 0,
            timestamps: false,
            threads: false,
            naming: Naming::Python,
            clock: Clock::None,
        };
        Ok(PstatsSource { bytes, options, info, frames: FrameTable::default() })
    }

    /// The bytes of `output` (one of the three this file makes).
    fn render(&self, output: &Output) -> Result<Vec<u8>, ConvertError<PstatsSourceError>> {
        let load = |e| ConvertError::Read(PstatsSourceError::Load(e));
        let print = &self.options.print;
        Ok(match output {
            Output::PstatsText { .. } => {
                let stats = crate::pstats::load_for_print(&self.bytes, print).map_err(load)?;
                let text = crate::pstats::print(&stats, print)
                    .map_err(|e| ConvertError::Read(PstatsSourceError::Print(e.to_string())))?;
                // The process usually ends next: handing a hundred thousand entries back to
                // the allocator one by one would only cost time (a tenth of a large table's
                // printing).
                std::mem::forget(stats);
                text.into_bytes()
            }
            Output::Dot => {
                let stats = crate::pstats::load(&self.bytes).map_err(load)?;
                crate::pstats::dot::dot(&stats)
                    .map_err(|e| ConvertError::Read(PstatsSourceError::Print(e)))?
                    .into_bytes()
            }
            Output::Callgrind => {
                use crate::pstats::callgrind::{callgrind, CallgrindError};
                let stats = crate::pstats::load(&self.bytes).map_err(load)?;
                let mut out = Vec::new();
                callgrind(&stats, &mut out).map_err(|e| match e {
                    CallgrindError::Shape(e) => ConvertError::Read(PstatsSourceError::Print(e)),
                    CallgrindError::Write(e) => ConvertError::Write(e),
                })?;
                out
            }
            _ => {
                let stats = crate::pstats::load(&self.bytes).map_err(load)?;
                let mut out = Vec::with_capacity(self.bytes.len());
                crate::pstats::write(&stats, self.options.keep_sampled_marker, &mut out)
                    .map_err(|e| ConvertError::Encode(e.to_string()))?;
                out
            }
        })
    }
}

impl Source for PstatsSource {
    type Error = PstatsSourceError;

    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn frames(&self) -> &FrameTable {
        &self.frames
    }

    /// No samples: a pstats file has no stacks (its outputs come from
    /// [`Source::pass_through`], which refuses every other).
    fn replay(&mut self, _: &mut dyn Collector, _: &mut dyn FnMut(u64)) -> Result<u64, Self::Error> {
        Ok(0)
    }

    fn pass_through(
        &mut self,
        output: &Output,
        dest: &mut Destination<'_>,
        _progress: &mut dyn FnMut(u64),
    ) -> Option<Result<u64, ConvertError<Self::Error>>> {
        if !matches!(output, Output::PstatsText { .. } | Output::Pstats { .. } | Output::Dot | Output::Callgrind) {
            return Some(Err(ConvertError::Unsupported {
                output: output.kind(),
                input: FileKind::Marshal,
                why: "pstats keeps only caller→callee edges, not the stacks that output is made of (--to pstats-text, \
                      --to pstats, --to dot or --to callgrind read it)",
            }));
        }
        let written = self
            .render(output)
            .and_then(|bytes| dest.write_with(|out| out.write_all(&bytes).map_err(ConvertError::Write)));
        Some(written.map(|()| 0))
    }
}
