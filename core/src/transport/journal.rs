//! A writer whose framed stream survives being cut: each new string and frame goes out in a
//! journal record ahead of the sample bytes that use it, and the samples are flushed on a
//! policy, so a process killed mid-run leaves a stream a receiver rebuilds a file from.

use embedded_io::Write;

use super::{FramedSink, Record, SinkError};
use crate::capture::{Taken, Target};
use crate::endian::{Endianity, NativeEndian};
use crate::error::WriteError;
use crate::header::{Compression, Stats};
use crate::storage::WriterStorage;
use crate::tables::MAX_FRAME_ENTRY_LEN;
use crate::writer::{Frame, FrameId, Writer, WriterConfig};

/// When a [`JournalWriter`] flushes on its own (each `0` means never by that measure).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlushPolicy {
    /// After this many samples since the last flush.
    pub every_samples: u64,
    /// When a sample's timestamp is this many microseconds past the last flush's.
    pub every_us: u64,
}

type Error<L> = WriteError<SinkError<<L as embedded_io::ErrorType>::Error>>;

/// A [`Writer`] over a [`FramedSink`] that journals its tables into the stream (see the
/// module's wire format) and flushes by a [`FlushPolicy`]. A complete stream rebuilds the
/// very bytes a seekable writer given the same calls (flushes included) makes; a stream cut
/// anywhere keeps every sample up to the last frame that arrived whole.
///
/// Each call journals what the one before it interned before doing its own work, so the
/// journal precedes any sample bytes that need it even after a failed send (the failed
/// records go out with the next call).
pub struct JournalWriter<'s, 'b, L: Write, E: Endianity = NativeEndian> {
    writer: Writer<'s, FramedSink<'b, L>, E>,
    /// Strings and frames of the tables journaled so far.
    strings: u32,
    frames: u32,
    /// Stats journaled last.
    stats: Option<Stats>,
    policy: FlushPolicy,
    samples_since_flush: u64,
    flushed_at_us: Option<u64>,
    /// `Tables` was sent.
    tables_sent: bool,
    /// The header template was sent on this stream.
    header_sent: bool,
}

/// The least scratch a [`JournalWriter`] takes: a 64-byte header fits one frame.
pub const JOURNAL_MIN_SCRATCH: usize = 128;

impl<'s, 'b, L: Write> JournalWriter<'s, 'b, L, NativeEndian> {
    /// A journaled stream on `link` in this machine's byte order; sends `Begin` and the
    /// header template. `scratch` must hold [`JOURNAL_MIN_SCRATCH`] bytes, and the sample
    /// region must be uncompressed (zstd holds bytes back across flushes, so a cut stream
    /// could not be decoded): otherwise [`SinkError::ScratchTooSmall`] or
    /// [`SinkError::Compressed`].
    pub fn new(
        link: L,
        scratch: &'b mut [u8],
        storage: WriterStorage<'s>,
        config: WriterConfig,
        policy: FlushPolicy,
    ) -> Result<Self, Error<L>> {
        Self::with_endian(link, scratch, storage, config, policy, NativeEndian::default())
    }
}

impl<'s, 'b, L: Write, E: Endianity> JournalWriter<'s, 'b, L, E> {
    /// As [`JournalWriter::new`], in byte order `endian`.
    pub fn with_endian(
        link: L,
        scratch: &'b mut [u8],
        storage: WriterStorage<'s>,
        config: WriterConfig,
        policy: FlushPolicy,
        endian: E,
    ) -> Result<Self, Error<L>> {
        let refuse = |error| Err(WriteError::Sink { offset: 0, error });
        if scratch.len() < JOURNAL_MIN_SCRATCH {
            return refuse(SinkError::ScratchTooSmall);
        }
        if config.compression != Compression::None {
            return refuse(SinkError::Compressed);
        }
        let sink = FramedSink::new(link, scratch).map_err(|error| WriteError::Sink { offset: 0, error })?;
        let writer = Writer::with_endian(sink, storage, config, endian)?;
        let mut journal = JournalWriter {
            writer,
            strings: 0,
            frames: 0,
            stats: None,
            policy,
            samples_since_flush: 0,
            flushed_at_us: None,
            tables_sent: false,
            header_sent: false,
        };
        journal.journal()?;
        Ok(journal)
    }

    /// Interns a frame (see [`Writer::intern_frame`]).
    pub fn intern_frame(&mut self, frame: Frame<'_>) -> Result<FrameId, Error<L>> {
        self.journal()?;
        let id = self.writer.intern_frame(frame)?;
        self.journal()?;
        Ok(id)
    }

    /// Writes a sample from frames (see [`Writer::write_thread_sample`]).
    pub fn write_thread_sample<'f, I>(&mut self, taken: Taken, frames: I) -> Result<(), Error<L>>
    where
        I: IntoIterator<Item = Frame<'f>>,
    {
        self.journal()?;
        let t = taken;
        let written = self.writer.write_thread_sample(t.timestamp_us, t.interpreter_id, t.thread_id, t.status, frames);
        self.after_sample(t.timestamp_us, written)
    }

    /// Writes a sample from frame ids (see [`Writer::write_thread_sample_ids`]).
    pub fn write_thread_sample_ids(&mut self, taken: Taken, frames: &[FrameId]) -> Result<(), Error<L>> {
        self.write_thread_sample_ids_from(taken, frames.iter().copied())
    }

    /// As [`Self::write_thread_sample_ids`] from any iterator of ids (see
    /// [`Writer::write_thread_sample_ids_from`]).
    pub fn write_thread_sample_ids_from(
        &mut self,
        taken: Taken,
        frames: impl IntoIterator<Item = FrameId>,
    ) -> Result<(), Error<L>> {
        self.journal()?;
        let t = taken;
        let written =
            self.writer.write_thread_sample_ids_from(t.timestamp_us, t.interpreter_id, t.thread_id, t.status, frames);
        self.after_sample(t.timestamp_us, written)
    }

    /// Records the stats (see [`Writer::set_stats`]); they go into the journal with the
    /// next flush.
    pub fn set_stats(&mut self, stats: Stats) -> Result<(), Error<L>> {
        self.writer.set_stats(stats)
    }

    /// Journals what is new, ends pending REPEAT runs and sends every staged sample
    /// ([`Writer::flush`]), then flushes the link.
    pub fn flush(&mut self) -> Result<(), Error<L>> {
        self.journal()?;
        self.journal_stats()?;
        self.writer.flush()?;
        self.samples_since_flush = 0;
        Ok(())
    }

    /// Finishes the file ([`Writer::finish`]) and ends the stream (`End`); returns the
    /// file's size. Can be called again after an error.
    pub fn finish(&mut self) -> Result<u64, Error<L>> {
        self.journal()?;
        // Where the samples end, before the tables: a receiver of a stream cut in what
        // follows reads no table bytes as samples. Sent once (a retry finds it sent).
        self.journal_stats()?;
        // (The writer finishes only after this was sent, so a retry never finds it unsent.)
        if !self.tables_sent {
            let offset = self.writer.end_samples()?;
            self.send(&Record::Tables { offset })?;
            self.tables_sent = true;
        }
        let size = match self.writer.finish() {
            Ok(size) => size,
            // Finished before, the stream's `End` failed: only `End` is left to send.
            Err(WriteError::Finished) => self.writer.get_ref().length(),
            Err(e) => return Err(e),
        };
        self.writer.get_mut().finish().map_err(|error| WriteError::Sink { offset: size, error })?;
        Ok(size)
    }

    /// Starts the next file on `link` after [`Self::finish`], with the same tables (every
    /// [`FrameId`] stays valid) and a header saying `start_time_us` (see
    /// [`Writer::restart`]); gives back the old link. The new stream journals every string
    /// and frame again, so it rebuilds on its own. No I/O until the next call.
    /// [`WriteError::NotFinished`] unless the current stream was finished.
    pub fn restart(&mut self, link: L, start_time_us: u64) -> Result<L, Error<L>> {
        if !self.writer.is_finished() || !self.writer.get_ref().is_ended() {
            return Err(WriteError::NotFinished);
        }
        let old = self.writer.get_mut().restart(link);
        self.writer.restart(start_time_us)?;
        self.strings = 0;
        self.frames = 0;
        self.stats = None;
        self.samples_since_flush = 0;
        self.flushed_at_us = None;
        self.tables_sent = false;
        self.header_sent = false;
        Ok(old)
    }

    /// The writer (its counts, its tables).
    pub fn writer(&self) -> &Writer<'s, FramedSink<'b, L>, E> {
        &self.writer
    }

    /// The link (finish first for a complete stream).
    pub fn into_inner(self) -> L {
        self.writer.into_inner().into_inner()
    }

    fn after_sample(&mut self, timestamp_us: u64, written: Result<(), Error<L>>) -> Result<(), Error<L>> {
        // Whatever happened, what the call interned is journaled now.
        self.journal()?;
        written?;
        self.samples_since_flush += 1;
        let flushed_at = *self.flushed_at_us.get_or_insert(timestamp_us);
        let by_count = self.policy.every_samples > 0 && self.samples_since_flush >= self.policy.every_samples;
        let by_time = self.policy.every_us > 0 && timestamp_us.saturating_sub(flushed_at) >= self.policy.every_us;
        if by_count || by_time {
            self.flush()?;
            self.flushed_at_us = Some(timestamp_us);
        }
        Ok(())
    }

    /// Sends the header template if this stream has none yet, then the strings and frames
    /// interned since the last journal.
    fn journal(&mut self) -> Result<(), Error<L>> {
        if !self.header_sent {
            let header = self.writer.header_template().encode(self.writer.endian());
            self.send(&Record::Header { bytes: &header })?;
            self.header_sent = true;
        }
        while let (sink, Some(string)) = self.writer.sink_and_string(self.strings) {
            sink.send_journal(&Record::String { bytes: string, continues: false }).map_err(sink_error(sink))?;
            self.strings += 1;
        }
        while let Some(entry) = self.writer.frame_entry(self.frames) {
            let mut bytes = [0u8; MAX_FRAME_ENTRY_LEN];
            let n = entry.encode(&mut bytes);
            self.send(&Record::Frame { bytes: bytes.get(..n).unwrap_or(&[]) })?;
            self.frames += 1;
        }
        Ok(())
    }

    /// Sends the stats if they changed since they were last sent.
    fn journal_stats(&mut self) -> Result<(), Error<L>> {
        if self.writer.stats() != self.stats {
            if let Some(stats) = self.writer.stats() {
                self.send(&Record::Stats { bytes: &stats.encode(self.writer.endian()) })?;
            }
            self.stats = self.writer.stats();
        }
        Ok(())
    }

    fn send(&mut self, record: &Record<'_>) -> Result<(), Error<L>> {
        let sink = self.writer.sink_in_place();
        sink.send_journal(record).map_err(sink_error(sink))
    }
}

fn sink_error<L: Write>(sink: &FramedSink<'_, L>) -> impl FnOnce(SinkError<L::Error>) -> Error<L> {
    let offset = sink.length();
    move |error| WriteError::Sink { offset, error }
}

impl<L: Write, E: Endianity> Target for JournalWriter<'_, '_, L, E> {
    type Error = SinkError<L::Error>;

    fn write_ids<I: IntoIterator<Item = FrameId>>(
        &mut self,
        taken: Taken,
        frames: I,
    ) -> Result<(), WriteError<Self::Error>> {
        self.write_thread_sample_ids_from(taken, frames)
    }

    fn write_frames<'f, I: IntoIterator<Item = Frame<'f>>>(
        &mut self,
        taken: Taken,
        frames: I,
    ) -> Result<(), WriteError<Self::Error>> {
        self.write_thread_sample(taken, frames)
    }

    fn set_stats(&mut self, stats: Stats) -> Result<(), WriteError<Self::Error>> {
        JournalWriter::set_stats(self, stats)
    }
}
