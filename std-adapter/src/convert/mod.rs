//! Outputs: every format a profile can be converted into, each one module, all listed in
//! one registry ([`OutputKind`], with [`Output`] carrying each one's options). An output reads
//! the hub ([`crate::model`]): it replays a [`Source`] once into its collector, aggregating on
//! frame ids, and writes at the end; memory grows with distinct stacks and frames, not with
//! samples (except where the format itself lists every sample: Firefox profiler and
//! speedscope). An input may also pass itself through to its own format without the hub
//! (Tachyon re-encoding, which keeps CPython's records byte for byte). A conversion as a
//! user asks for it, options and all, is a [`crate::request::ConvertRequest`].

pub mod collapsed;
pub mod flamegraph;
pub mod gecko;
pub mod jsonl;
pub mod speedscope;

use std::fmt;
use std::io;

use tachyon_core::Compression;

use crate::gperftools::write as gperftools;
use crate::model::stacks::StackCounts;
use crate::model::Source;
use crate::mojo::write as mojo;
use crate::otlp::write as otlp;
pub use crate::output::{at, ConvertError, Destination, Output, OutputKind};
use crate::pprof::write as pprof;
use crate::pstats::replay as pstats;
use crate::tachyon::write as tachyon;

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
    // An input that writes its own format needs nothing of the hub: it goes first, so that
    // preparing (which may read the whole file for its frames) is left to the hub's outputs.
    if let Some(done) = source.pass_through(output, &mut dest, progress) {
        return done;
    }
    source.prepare(output).map_err(ConvertError::Read)?;
    let info = source.info().clone();
    let unsupported = |why| ConvertError::Unsupported { output: output.kind(), input: info.kind, why };
    match output {
        Output::Gecko if !info.timestamps => {
            return Err(unsupported(
                "the Firefox profiler needs a time for every sample, and this input counts samples without times",
            ))
        }
        Output::Perfetto if !info.timestamps => {
            return Err(unsupported(
                "a Perfetto trace puts every sample on a timeline, and this input counts samples without times",
            ))
        }
        Output::Tachyon { big_endian, compression } => {
            let (big, compression) =
                (big_endian.unwrap_or(cfg!(target_endian = "big")), compression.unwrap_or(Compression::None));
            let sink = dest.seekable().map_err(ConvertError::Write)?;
            return tachyon_from_hub(source, sink, big, compression, progress)?
                .finish()
                .map(|()| info.expected_samples);
        }
        Output::Heatmap { title, source_roots } => {
            let Destination::File(dir) = dest else {
                return Err(unsupported("a heatmap is a folder of pages: give it a folder to write (-o DIR)"));
            };
            let mut c = crate::html::heatmap::LineCounts::default();
            let n = source.replay(&mut c, progress).map_err(ConvertError::Read)?;
            crate::html::heatmap::write_heatmap(&c, &info, title, source_roots, dir)?;
            return Ok(n);
        }
        Output::Gperftools { word, big_endian } => {
            let endian = match big_endian {
                Some(true) => tachyon_core::RunTimeEndian::Big,
                Some(false) => tachyon_core::RunTimeEndian::Little,
                None => tachyon_core::RunTimeEndian::default(),
            };
            return dest.write_buffered(|out| {
                gperftools::write_from_hub(source, gperftools::IoSink(out), *word, endian, progress)
            });
        }
        _ => {}
    }
    dest.write_with(|out| write_streamed(source, output, &info, out, progress))
}

/// Writes every output that is written front to back (all but Tachyon and gperftools).
fn write_streamed<S: Source>(
    source: &mut S,
    output: &Output,
    info: &crate::model::SourceInfo,
    out: &mut dyn io::Write,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, ConvertError<S::Error>> {
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
            c.finish(source.frames());
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
            io::Write::write_all(&mut out, crate::pstats::dot::dot(&stats).map_err(io::Error::other)?.as_bytes())?;
            n
        }
        Output::Perfetto => {
            let mut c = crate::perfetto::write::PerfettoWriter::new(&mut out, info);
            let n = source.replay(&mut c, progress).map_err(ConvertError::Read)?;
            c.finish()?;
            n
        }
        Output::Callgrind => {
            let mut c = crate::callgrind::write::CallgrindCollector::default();
            let n = source.replay(&mut c, progress).map_err(ConvertError::Read)?;
            c.write(&mut out)?;
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
            c.finish(source.frames());
            flamegraph::write_threads(&c, source.frames(), title, &mut out)?;
            n
        }
        Output::FlamegraphHtml { title } => {
            let mut c = crate::html::tree::CallTree::new(info.naming);
            let n = source.replay(&mut c, progress).map_err(ConvertError::Read)?;
            c.finish();
            crate::html::flame::write_flamegraph(&c, &source.frames().functions, info, title, &mut out)?;
            n
        }
        Output::Gecko => {
            let mut c = gecko::GeckoCollector::default();
            let n = source.replay(&mut c, progress).map_err(ConvertError::Read)?;
            c.write(source.frames(), info.start_time_us as f64 / 1000.0, &mut out)?;
            n
        }
        Output::Speedscope { name } => {
            let mut c = speedscope::SpeedscopeCollector::default();
            let n = source.replay(&mut c, progress).map_err(ConvertError::Read)?;
            c.write(source.frames(), name, interval_us, &mut out)?;
            n
        }
        Output::Pprof => {
            let mut c = StackCounts::new();
            let n = source.replay(&mut c, progress).map_err(ConvertError::Read)?;
            pprof::write_gzipped(&c, source.frames(), info, source.written_unix_us(), &mut out)?;
            n
        }
        Output::Otlp { json, service_name } => {
            let mut c = if info.timestamps { StackCounts::with_times() } else { StackCounts::new() };
            let n = source.replay(&mut c, progress).map_err(ConvertError::Read)?;
            let written = source.written_unix_us();
            let request = otlp::Request::new(&c, source.frames(), info, written, service_name.as_deref());
            if *json {
                request.write_json(&mut out)?;
            } else {
                request.write_protobuf(&mut out)?;
            }
            n
        }
        Output::Jsonl { run_id } => {
            let mut c = jsonl::JsonlCollector::default();
            let n = source.replay(&mut c, progress).map_err(ConvertError::Read)?;
            let id = run_id.clone().unwrap_or_else(jsonl::random_run_id);
            c.write(interval_us, info.cpython_mode, &id, &mut out)?;
            n
        }
        Output::Tachyon { .. }
        | Output::Gperftools { .. }
        | Output::Austin
        | Output::Mojo { .. }
        | Output::Heatmap { .. } => {
            unreachable!("written above")
        }
    };
    io::Write::flush(&mut out)?;
    Ok(n)
}

/// Collapsed lines of a whole profile (for differential flame graphs).
pub fn collapsed_lines<S: Source>(
    source: &mut S,
    progress: &mut dyn FnMut(u64),
) -> Result<Vec<(String, u64)>, ConvertError<S::Error>> {
    source.prepare(&Output::Collapsed).map_err(ConvertError::Read)?;
    let info = source.info();
    let mut c = collapsed::CollapsedCollector::new(info.naming, info.threads);
    source.replay(&mut c, progress).map_err(ConvertError::Read)?;
    c.finish(source.frames());
    Ok(c.lines(source.frames()))
}
