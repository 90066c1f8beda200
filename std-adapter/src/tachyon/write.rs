//! Re-encoding: a file's samples written again through the core writer, in another byte
//! order or compression. The frame table is copied entry by entry before the first sample
//! (entries that decode alike stay separate, as CPython wrote them) and samples are replayed
//! in file order, a REPEAT run that filled its buffer ended where the file has it, which
//! reproduces CPython's tables and records: CPython's files (the shared vectors, real
//! profiles) re-encode to themselves byte for byte when order and compression are kept. Not
//! always, though: a thread whose first sample had an empty stack starts with a
//! deferred REPEAT record, so the file does not say when the writer created it, and that
//! order decides the final flush; every thread's samples still come back, in order.

use embedded_io::{Read, Seek, Write};
use tachyon_core::reader::{Record, RunEntry};
use tachyon_core::records::CPYTHON_RLE_BUDGET;
use tachyon_core::storage::WriterCapacity;
use tachyon_core::writer::{Frame, FrameId, WriterConfig};
use tachyon_core::{Compression, Endianity, ReadError, Reader, WriteError};

use tachyon_core::header::ProfilingConfig;
use tachyon_core::writer::Writer;

use crate::model::{Call, Collector, FrameTable, Source, Ticker, Times};
use crate::output::ConvertError;
use crate::tachyon::storage::OwnedWriterStorage;

/// Writes every sample of `reader` into `sink` in byte order `endian`, with `compression`
/// (default: the input's); returns the sink.
pub fn reencode<R, W, E>(
    reader: &mut Reader<'_, R>,
    sink: W,
    endian: E,
    compression: Option<Compression>,
    progress: &mut dyn FnMut(u64),
) -> Result<W, ConvertError<ReadError<R::Error>>>
where
    R: Read + Seek,
    W: Write + Seek,
    W::Error: std::fmt::Debug,
    E: Endianity,
{
    let meta = *reader.metadata();
    let tables = reader.tables();
    let strings: Vec<&[u8]> = (0..tables.string_count() as u32).filter_map(|i| tables.string(i)).collect();
    let cap = WriterCapacity {
        string_bytes: strings.iter().map(|s| s.len()).sum::<usize>().max(1),
        strings: strings.len().max(1),
        frames: tables.frame_count().max(1),
        // The writer's thread table grows with the threads the samples use: the header's
        // count is the file's claim, checked only as samples arrive.
        threads: usize::MAX,
        rle_budget: CPYTHON_RLE_BUDGET,
    };
    let compression = compression.unwrap_or(meta.header.compression);
    let mut storage = OwnedWriterStorage::new(cap, compression).map_err(|e| ConvertError::Encode(e.to_string()))?;
    let config = WriterConfig {
        start_time_us: meta.header.start_time_us,
        sample_interval_us: meta.header.sample_interval_us,
        compression,
        profiling: meta.header.config,
        python_version: meta.header.python_version,
    };
    let werr = |e: WriteError<W::Error>| ConvertError::Encode(e.to_string());
    let mut writer = storage.writer(sink, config, endian).map_err(werr)?;

    // Source frame id → output frame id, from the stored entries (the resolved view drops
    // the columns of a frame without a line). A frame naming a missing string is never used
    // by a sample the reader lets through, so it gets a placeholder.
    let mut ids: Vec<FrameId> = Vec::with_capacity(tables.frame_count());
    for id in 0..tables.frame_count() as u32 {
        let entry = tables.frame_entry(id);
        let names = entry.and_then(|e| Some((e, tables.string(e.filename)?, tables.string(e.funcname)?)));
        ids.push(match names {
            Some((e, filename, funcname)) => writer
                .append_frame(Frame { filename, funcname, location: Some(e.location), opcode: Some(e.opcode) })
                .map_err(werr)?,
            None => FrameId(0),
        });
    }
    let mut stack: Vec<FrameId> = Vec::new();
    let mut batch = vec![RunEntry { timestamp_us: 0, status: 0 }; 4096];
    let mut ticker = Ticker::default();
    while let Some(record) = reader.next_item().map_err(ConvertError::Read)? {
        match record {
            Record::Sample(s) => {
                stack.clear();
                stack.extend(s.stack.iter().map(|&id| ids[id as usize]));
                writer
                    .write_thread_sample_ids(s.timestamp_us, s.interpreter_id, s.thread_id, s.status, &stack)
                    .map_err(werr)?;
            }
            // The writer's previous stack for the thread is this run's stack, mapped: every
            // sample before it was written in file order.
            Record::Repeat(mut run) => {
                let (iid, tid) = (run.interpreter_id, run.thread_id);
                loop {
                    let n = run.read_entries(&mut batch).map_err(ConvertError::Read)?;
                    if n == 0 {
                        break;
                    }
                    for e in &batch[..n] {
                        writer.repeat_thread_sample(e.timestamp_us, iid, tid, e.status).map_err(werr)?;
                    }
                }
                // A run that filled its buffer ended at its thread's next sample, which is
                // read later: end it here, where the file has it.
                writer.end_full_run(iid, tid).map_err(werr)?;
            }
        }
        ticker.tick(reader.samples_decoded(), progress);
    }
    progress(reader.samples_decoded());
    if let Some(stats) = meta.stats {
        writer.set_stats(stats).map_err(werr)?;
    }
    writer.finish().map_err(werr)?;
    Ok(writer.into_inner())
}

/// Most samples written from an input that counts samples without times (each gets a time
/// of its own): more is a value that is not a sample count (pprof's nanoseconds).
pub const MAX_COUNTED_SAMPLES: u64 = 100_000_000;

/// What the first pass over a source finds: its threads and its samples.
#[derive(Default)]
struct Census {
    threads: std::collections::HashSet<(u32, u64)>,
    samples: u64,
}

impl Collector for Census {
    fn collect(&mut self, _frames: &FrameTable, call: &Call<'_>) {
        self.threads.insert((call.interpreter_id, call.thread_id));
        self.samples = self.samples.saturating_add(call.samples());
    }
}

/// Writes a call at a time through the core writer; keeps the first error.
struct HubWriter<'s, W: Write + Seek, E: Endianity> {
    writer: Writer<'s, W, E>,
    ids: Vec<FrameId>,
    stack: Vec<FrameId>,
    /// The next synthetic time (µs) for samples without one, and the step.
    clock_us: u64,
    step_us: u64,
    error: Option<String>,
}

impl<W: Write + Seek, E: Endianity> Collector for HubWriter<'_, W, E>
where
    W::Error: std::fmt::Debug,
{
    fn collect(&mut self, _frames: &FrameTable, call: &Call<'_>) {
        if self.error.is_some() {
            return;
        }
        self.stack.clear();
        self.stack.extend(call.stack.iter().map(|&id| self.ids[id as usize]));
        let (iid, tid, status) = (call.interpreter_id, call.thread_id, call.status);
        let mut times = TimeSource::new(call, &mut self.clock_us, self.step_us);
        let result = (|| {
            // A continued part repeats the stack its first part wrote.
            if !call.continued {
                match times.next() {
                    Some(t) => self.writer.write_thread_sample_ids(t, iid, tid, status, &self.stack)?,
                    None => return Ok(()),
                }
            }
            for t in times {
                self.writer.repeat_thread_sample(t, iid, tid, status)?;
            }
            Ok(())
        })();
        if let Err(e) = result {
            let e: WriteError<W::Error> = e;
            self.error = Some(e.to_string());
        }
    }
}

/// A call's sample times: its own, or the next ticks of the synthetic clock.
enum TimeSource<'a> {
    Stamped(std::slice::Iter<'a, u64>),
    Counted { left: u64, clock: &'a mut u64, step: u64 },
}

impl<'a> TimeSource<'a> {
    fn new(call: &Call<'a>, clock: &'a mut u64, step: u64) -> Self {
        match call.times {
            Times::Stamped(t) => TimeSource::Stamped(t.iter()),
            Times::Counted(n) => TimeSource::Counted { left: n, clock, step },
        }
    }
}

impl Iterator for TimeSource<'_> {
    type Item = u64;
    fn next(&mut self) -> Option<u64> {
        match self {
            TimeSource::Stamped(t) => t.next().copied(),
            TimeSource::Counted { left: 0, .. } => None,
            TimeSource::Counted { left, clock, step } => {
                *left -= 1;
                let t = **clock;
                **clock = clock.saturating_add(*step);
                Some(t)
            }
        }
    }
}

/// Writes the samples of any source (one that can replay twice: every input but Tachyon,
/// which re-encodes itself) as a Tachyon file into `sink`: frames as the hub names them (a
/// bare address's frame filed under its mapping's file), threads as the source has them,
/// and for samples counted without times, times made up from the profile's start and
/// interval, one interval apart in file order. Refuses more than [`MAX_COUNTED_SAMPLES`]
/// counted samples.
pub fn write_from_hub<S, W, E>(
    source: &mut S,
    sink: W,
    endian: E,
    compression: Compression,
    progress: &mut dyn FnMut(u64),
) -> Result<W, ConvertError<S::Error>>
where
    S: Source,
    W: Write + Seek,
    W::Error: std::fmt::Debug,
    E: Endianity,
{
    let mut census = Census::default();
    source.replay(&mut census, &mut |_| {}).map_err(ConvertError::Read)?;
    let info = source.info().clone();
    if !info.timestamps && census.samples > MAX_COUNTED_SAMPLES {
        return Err(ConvertError::Encode(format!(
            "{} samples counted, more than the {MAX_COUNTED_SAMPLES} a Tachyon file is made of from an input \
             without times (for pprof, count samples: --sample-index samples)",
            census.samples
        )));
    }
    let frames = source.frames();
    let filename = |f: &crate::model::FrameInfo| frames.file_of(f).to_owned();
    let mut strings: std::collections::HashSet<String> = std::collections::HashSet::new();
    for f in &frames.frames {
        strings.insert(filename(f));
        strings.insert(f.funcname.clone());
    }
    let cap = WriterCapacity {
        string_bytes: strings.iter().map(String::len).sum::<usize>().max(1),
        strings: strings.len().max(1),
        frames: frames.frames.len().max(1),
        threads: census.threads.len().max(1),
        rle_budget: CPYTHON_RLE_BUDGET,
    };
    let mut storage = OwnedWriterStorage::new(cap, compression).map_err(|e| ConvertError::Encode(e.to_string()))?;
    let mode = info.cpython_mode;
    let config = WriterConfig {
        start_time_us: info.start_time_us,
        sample_interval_us: info.sample_interval_us,
        compression,
        profiling: ProfilingConfig { mode, capture_features: None },
        python_version: tachyon_core::header::CPYTHON_VERSION,
    };
    let werr = |e: WriteError<W::Error>| ConvertError::Encode(e.to_string());
    let mut writer = storage.writer(sink, config, endian).map_err(werr)?;
    let mut ids = Vec::with_capacity(frames.frames.len());
    for f in &frames.frames {
        let file = filename(f);
        let frame = Frame {
            filename: file.as_bytes(),
            funcname: f.funcname.as_bytes(),
            location: f.location,
            opcode: f.opcode,
        };
        ids.push(writer.intern_frame(frame).map_err(werr)?);
    }
    let mut hub = HubWriter {
        writer,
        ids,
        stack: Vec::new(),
        clock_us: info.start_time_us,
        step_us: info.sample_interval_us.max(1),
        error: None,
    };
    let n = source.replay(&mut hub, progress).map_err(ConvertError::Read)?;
    if let Some(e) = hub.error {
        return Err(ConvertError::Encode(e));
    }
    hub.writer.finish().map_err(werr)?;
    progress(n);
    Ok(hub.writer.into_inner())
}
