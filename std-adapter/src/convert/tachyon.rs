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

use super::ConvertError;
use crate::model::Ticker;
use crate::open::OwnedWriterStorage;

/// Most threads the output gets room for (the header's count is only an upper bound). The
/// writer's thread table is fixed at creation, with a 16 KiB REPEAT buffer per thread as
/// CPython's, so a file with more threads than this is refused with a capacity error.
const MAX_THREADS: usize = 1 << 16;

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
        threads: (meta.header.thread_count as usize).clamp(1, MAX_THREADS),
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
    while let Some(record) = reader.next_record().map_err(ConvertError::Read)? {
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
    writer.finalize().map_err(werr)?;
    Ok(writer.into_inner())
}
