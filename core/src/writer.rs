//! The encoder (spec section 5): interning, encoding choice, per-thread REPEAT buffering,
//! finish order and the header written last with one seek.
//!
//! # What the sink holds after an error
//!
//! Records are staged whole in the caller's staging buffer and handed to the sink (or to
//! zstd) only between records. Every sink write is all-or-nothing from the writer's point of
//! view: it counts as done only when the sink accepted every byte. After a sink error the
//! file holds 64 zero bytes, the sample bytes accepted so far and possibly part of the failed
//! write; the writer keeps the unwritten bytes, seeks back to its last good position on the
//! next call and rewrites them. So after a transient error `finish` (itself retryable)
//! still yields a valid file with every sample that was accepted. A capacity or format limit
//! refuses only the sample that hit it.

use embedded_io::{Seek, SeekFrom, Write};

use crate::endian::{Endianity, NativeEndian};
use crate::error::{FormatLimit, WriteError};
use crate::header::{Compression, Footer, Header, ProfilingConfig, Stats, CPYTHON_VERSION, HEADER_SIZE};
use crate::records::{
    choose_change, max_repeat_record_len, Encoding, Prefix, StackChange, WriteCounts, MAX_RLE_ENTRY_LEN,
    MAX_STACK_DEPTH, MAX_STACK_RECORD_LEN,
};
use crate::storage::{FrameInterner, Resource, WriterStorage};
use crate::tables::{FrameEntry, Location, MAX_FRAME_ENTRY_LEN, NO_OPCODE};
use crate::varint::{self, MAX_VARINT_LEN};

#[cfg(feature = "zstd")]
use crate::compression::ZstdOut;

/// One frame of a sample, as the runtime sees it. Names are bytes: invalid UTF-8 (a torn
/// read, a lone surrogate) is stored as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// File name.
    pub filename: &'a [u8],
    /// Function name.
    pub funcname: &'a [u8],
    /// Source location; `None` is the same frame as all four parts `-1`.
    pub location: Option<Location>,
    /// Opcode; `None` and `Some(255)` are the same frame.
    pub opcode: Option<u8>,
}

impl<'a> Frame<'a> {
    /// A frame with no location and no opcode.
    pub fn new(filename: &'a [u8], funcname: &'a [u8]) -> Self {
        Frame { filename, funcname, location: None, opcode: None }
    }

    /// With a location.
    pub fn at(self, location: Location) -> Self {
        Frame { location: Some(location), ..self }
    }
}

/// An interned frame, for runtimes that intern once and then pass ids
/// ([`Writer::intern_frame`], [`Writer::write_thread_sample_ids`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(transparent)]
pub struct FrameId(pub u32);

/// The constructor arguments of CPython's `BinaryWriter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterConfig {
    /// `start_time_us`; the first delta of each thread is relative to it.
    pub start_time_us: u64,
    /// `sample_interval_us`.
    pub sample_interval_us: u64,
    /// Header compression field, and so how the sample region is written: `Zstd` compresses
    /// it with the storage's compressor (feature `zstd`, `WriterStorage::with_zstd`); any
    /// other value is stored as given and the region is raw, as in CPython.
    pub compression: Compression,
    /// Mode and capture features.
    pub profiling: ProfilingConfig,
    /// Python version bytes of the header.
    pub python_version: [u8; 3],
}

impl WriterConfig {
    /// Uncompressed, mode and features unknown, version 3.15.2.
    pub fn new(start_time_us: u64, sample_interval_us: u64) -> Self {
        WriterConfig {
            start_time_us,
            sample_interval_us,
            compression: Compression::None,
            profiling: ProfilingConfig::default(),
            python_version: CPYTHON_VERSION,
        }
    }

    /// The same configuration with another header compression field (so another sample
    /// region encoding).
    pub fn with_compression(self, compression: Compression) -> Self {
        WriterConfig { compression, ..self }
    }

    /// The header of a file written with this configuration before anything is counted:
    /// counts and the tables' offsets zero (what a journal or a stream sends ahead of the
    /// samples, for the receiver to write the file's header from).
    pub fn header_template(&self) -> Header {
        Header {
            python_version: self.python_version,
            start_time_us: self.start_time_us,
            sample_interval_us: self.sample_interval_us,
            sample_count: 0,
            thread_count: 0,
            string_table_offset: 0,
            frame_table_offset: 0,
            compression: self.compression,
            config: self.profiling,
        }
    }

    /// The configuration a header says it was written with (what a receiver writes the
    /// file again with).
    pub fn of_header(header: &Header) -> Self {
        WriterConfig {
            start_time_us: header.start_time_us,
            sample_interval_us: header.sample_interval_us,
            compression: header.compression,
            profiling: header.config,
            python_version: header.python_version,
        }
    }
}

/// Streams a Tachyon file into a `Write + Seek` sink in byte order `E`.
pub struct Writer<'s, W: Write + Seek, E: Endianity = NativeEndian> {
    sink: W,
    endian: E,
    store: WriterStorage<'s>,
    /// Staged bytes are `staging[staged_from..staged]`.
    staged_from: usize,
    staged: usize,
    config: WriterConfig,
    sample_count: u64,
    stats: Option<Stats>,
    /// File bytes the sink has accepted, the zero header included.
    committed: u64,
    /// False after a failed write: the next write seeks back to `committed` first.
    positioned: bool,
    /// Set once the sample region is complete, so a failed finish restarts the tables here.
    tables_start: Option<u64>,
    /// Set by the first `finish` call: from then on only `finish` may be called.
    finishing: bool,
    finished: bool,
    limit_reached: bool,
    counts: WriteCounts,
    scratch: [u32; MAX_STACK_DEPTH],
    #[cfg(feature = "zstd")]
    zstd: Option<ZstdOut<'s>>,
}

/// Key of a frame in the recent-frame cache, from where its names live and its location: a
/// runtime passes the same name buffers for the same code object, so this finds it without
/// hashing the names. A hit is always confirmed by content ([`Writer::is_frame`]), so a
/// reused buffer can never yield a wrong id.
#[inline]
fn recent_key(frame: &Frame<'_>) -> u64 {
    let loc = frame.location.unwrap_or(Location::NONE);
    let mut h = (frame.filename.as_ptr() as usize as u64) ^ ((frame.filename.len() as u64) << 40);
    h = h.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (frame.funcname.as_ptr() as usize as u64).rotate_left(23);
    h ^= (frame.funcname.len() as u64) << 48 ^ u64::from(loc.lineno as u32) ^ (u64::from(loc.col as u32) << 24);
    h ^= u64::from(frame.opcode.unwrap_or(NO_OPCODE)) << 56 ^ u64::from(loc.end_lineno as u32) << 8;
    h.wrapping_mul(0xd6e8_feb8_6659_fd93)
}

impl<'s, W: Write + Seek> Writer<'s, W, NativeEndian> {
    /// A writer in this machine's byte order, as CPython writes. Does no I/O yet: the zero
    /// header is written with the first flush. With `config.compression` set to
    /// [`Compression::Zstd`] the storage must carry a compressor
    /// (`WriterStorage::with_zstd`), else this is [`WriteError::CompressorMissing`].
    pub fn new(sink: W, storage: WriterStorage<'s>, config: WriterConfig) -> Result<Self, WriteError<W::Error>> {
        Self::with_endian(sink, storage, config, NativeEndian::default())
    }
}

impl<'s, W: Write + Seek, E: Endianity> Writer<'s, W, E> {
    /// A writer in an explicit byte order (to produce big-endian files on x86, say);
    /// otherwise as [`Writer::new`].
    pub fn with_endian(
        sink: W,
        storage: WriterStorage<'s>,
        config: WriterConfig,
        endian: E,
    ) -> Result<Self, WriteError<W::Error>> {
        #[cfg(feature = "zstd")]
        let has_compressor = storage.zstd.is_some();
        #[cfg(not(feature = "zstd"))]
        let has_compressor = false;
        if config.compression == Compression::Zstd && !has_compressor {
            return Err(WriteError::CompressorMissing);
        }
        Ok(Self::build(sink, storage, config, endian))
    }

    fn build(sink: W, store: WriterStorage<'s>, config: WriterConfig, endian: E) -> Self {
        // The compressor moves out of the storage so that compressing can borrow the staging
        // buffer at the same time; unused (dropped) when the region is raw.
        #[cfg(feature = "zstd")]
        let (store, zstd) = {
            let mut store = store;
            let zstd = store.zstd.take().filter(|_| config.compression == Compression::Zstd);
            (store, zstd)
        };
        Writer {
            sink,
            endian,
            store,
            staged_from: 0,
            staged: 0,
            config,
            sample_count: 0,
            stats: None,
            committed: 0,
            positioned: false,
            tables_start: None,
            finishing: false,
            finished: false,
            limit_reached: false,
            counts: WriteCounts::default(),
            scratch: [0; MAX_STACK_DEPTH],
            #[cfg(feature = "zstd")]
            zstd,
        }
    }

    // ------------------------------------------------------------------ public API

    /// Writes one thread sample from frames given innermost first. Only the innermost 256 are
    /// kept; deeper ones are neither interned nor written (spec 5.4).
    pub fn write_thread_sample<'f, I>(
        &mut self,
        timestamp_us: u64,
        interpreter_id: u32,
        thread_id: u64,
        status: u8,
        frames: I,
    ) -> Result<(), WriteError<W::Error>>
    where
        I: IntoIterator<Item = Frame<'f>>,
    {
        let thread = self.begin_sample(interpreter_id, thread_id)?;
        let mut depth = 0;
        for frame in frames.into_iter().take(MAX_STACK_DEPTH) {
            let id = self.intern(&frame)?;
            self.scratch[depth] = id;
            depth += 1;
        }
        self.record(thread, timestamp_us, status, depth)
    }

    /// Interns a frame and returns its id, for [`Self::write_thread_sample_ids`].
    pub fn intern_frame(&mut self, frame: Frame<'_>) -> Result<FrameId, WriteError<W::Error>> {
        self.check_open()?;
        self.intern(&frame).map(FrameId)
    }

    /// Adds a frame as a new table entry even if an equal frame is already interned, and
    /// returns its id. For copying another file's frame table entry by entry: CPython keeps
    /// frames that differ only in location parts the format cannot store (an end line of -1
    /// beside a known line is stored as a zero delta, like an end line equal to the line), so
    /// such a table can hold entries that decode alike. [`Self::intern_frame`] keeps finding
    /// the first of them.
    pub fn append_frame(&mut self, frame: Frame<'_>) -> Result<FrameId, WriteError<W::Error>> {
        self.check_open()?;
        self.store_frame(&frame, FrameInterner::push).map(FrameId)
    }

    /// Writes one thread sample from interned frame ids, innermost first (the first 256 are
    /// kept).
    pub fn write_thread_sample_ids(
        &mut self,
        timestamp_us: u64,
        interpreter_id: u32,
        thread_id: u64,
        status: u8,
        frames: &[FrameId],
    ) -> Result<(), WriteError<W::Error>> {
        self.write_thread_sample_ids_from(timestamp_us, interpreter_id, thread_id, status, frames.iter().copied())
    }

    /// As [`Self::write_thread_sample_ids`] from any iterator of ids (a capture ring's entry,
    /// say): they go straight into the writer's stack buffer, with no slice to fill first.
    pub fn write_thread_sample_ids_from(
        &mut self,
        timestamp_us: u64,
        interpreter_id: u32,
        thread_id: u64,
        status: u8,
        frames: impl IntoIterator<Item = FrameId>,
    ) -> Result<(), WriteError<W::Error>> {
        let known = self.store.frames.entries().len();
        let mut depth = 0;
        // Checked before the thread is looked up, so a refused sample changes nothing.
        for (slot, id) in self.scratch.iter_mut().zip(frames) {
            if id.0 as usize >= known {
                return Err(WriteError::UnknownFrameId { id: id.0 });
            }
            *slot = id.0;
            depth += 1;
        }
        let thread = self.begin_sample(interpreter_id, thread_id)?;
        self.record(thread, timestamp_us, status, depth)
    }

    /// Writes one more sample of a thread with the stack of its previous sample (an empty
    /// stack for a thread not seen yet): what a REPEAT entry holds. The same bytes as passing
    /// that stack again, without the stack to copy and compare; re-encoding a file's REPEAT
    /// runs, or a runtime whose thread has not moved, can use it.
    pub fn repeat_thread_sample(
        &mut self,
        timestamp_us: u64,
        interpreter_id: u32,
        thread_id: u64,
        status: u8,
    ) -> Result<(), WriteError<W::Error>> {
        let thread = self.begin_sample(interpreter_id, thread_id)?;
        self.repeat(thread, timestamp_us, status)
    }

    /// Emits the thread's pending REPEAT run now if it has no room for another entry; true if
    /// it did. A writer ends a full run only when the thread's next sample comes (so records
    /// written meanwhile come first), and that is where a file holds it: copying a file record
    /// by record (re-encoding) reads the run there and must end it there too, because the
    /// thread's next sample comes from a later record.
    pub fn end_full_run(&mut self, interpreter_id: u32, thread_id: u64) -> Result<bool, WriteError<W::Error>> {
        self.check_open()?;
        let Some(thread) = self.store.threads.find(thread_id, interpreter_id) else {
            return Ok(false);
        };
        if self.store.threads.get(thread).rle_count == 0 || !self.run_is_full(thread) {
            return Ok(false);
        }
        self.flush_run(thread)?;
        Ok(true)
    }

    /// Records `set_stats()`; the last call wins. Values CPython rejects are refused.
    pub fn set_stats(&mut self, stats: Stats) -> Result<(), WriteError<W::Error>> {
        self.check_open()?;
        if !stats.is_valid() {
            return Err(WriteError::InvalidStats);
        }
        self.stats = Some(stats);
        Ok(())
    }

    /// Flushes pending REPEAT runs in thread-creation order, ends the sample region, writes
    /// the tables, the stats trailer and the footer, then seeks to 0 for the header. Returns
    /// the file size. After an error it can be called again (and nothing else can: samples
    /// and stats are refused with [`WriteError::Finished`] from the first call on); after
    /// success it returns [`WriteError::Finished`].
    pub fn finish(&mut self) -> Result<u64, WriteError<W::Error>> {
        // `end_samples` refuses a finished writer.
        let tables_start = self.end_samples()?;
        // Always seek to the tables: a retry after a failed table write starts them again.
        self.positioned = false;
        let (frame_table_offset, file_size) = self.write_tables(tables_start)?;
        let header = self.header(tables_start, frame_table_offset).encode(self.endian);
        self.positioned = false;
        write_at(&mut self.sink, &mut self.positioned, 0, &header)?;
        self.sink.flush().map_err(|error| WriteError::Sink { offset: file_size, error })?;
        self.finished = true;
        Ok(file_size)
    }

    /// Starts the next file on the same tables, after [`Self::finish`]: the sink (replaced
    /// first through [`Self::get_mut`], or one that now writes elsewhere) gets a new file
    /// whose header says `start_time_us`, with every string and frame interned so far (in
    /// the same order, so every [`FrameId`] stays valid: a capture ring's entries rely on
    /// that), no threads, no samples, no stats, and a new compressed frame. Does no I/O.
    /// A rotating writer calls this to begin each period; [`WriteError::NotFinished`]
    /// if the current file was not finished.
    pub fn restart(&mut self, start_time_us: u64) -> Result<(), WriteError<W::Error>> {
        if !self.finished {
            return Err(WriteError::NotFinished);
        }
        #[cfg(feature = "zstd")]
        if let Some(zstd) = self.zstd.as_mut() {
            zstd.get().restart().map_err(|e| WriteError::Zstd { code: e.0 })?;
        }
        self.store.threads.clear();
        self.config.start_time_us = start_time_us;
        self.staged_from = 0;
        self.staged = 0;
        self.sample_count = 0;
        self.stats = None;
        self.committed = 0;
        self.positioned = false;
        self.tables_start = None;
        self.finishing = false;
        self.finished = false;
        self.limit_reached = false;
        self.counts = WriteCounts::default();
        Ok(())
    }

    /// True once [`Self::finish`] succeeded (until [`Self::restart`]).
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The start time the current file's header gives.
    pub fn start_time_us(&self) -> u64 {
        self.config.start_time_us
    }

    /// The first part of [`Self::finish`]: ends the pending REPEAT runs (in thread-creation
    /// order) and the sample region; returns where the tables start. Samples are refused
    /// from here on; a second call returns the same offset. A journal sends the offset
    /// before the tables, so a stream cut while they are written is salvaged from the
    /// samples alone.
    pub(crate) fn end_samples(&mut self) -> Result<u64, WriteError<W::Error>> {
        if self.finished {
            return Err(WriteError::Finished);
        }
        self.finishing = true;
        if let Some(start) = self.tables_start {
            return Ok(start);
        }
        for thread in 0..self.store.threads.len() {
            if self.store.threads.get(thread).rle_count > 0 {
                self.flush_run(thread)?;
            }
        }
        self.end_sample_region()?;
        self.tables_start = Some(self.committed);
        Ok(self.committed)
    }

    /// Ends every thread's pending REPEAT run (in thread-creation order), hands every staged
    /// byte to the sink and flushes it: after it returns, the sink holds every sample written
    /// so far (with zstd, the bytes the compressor still holds reach the sink only with its
    /// next block or `finish`). A recording that must survive its process's death flushes
    /// on an interval (`transport::JournalWriter` does). Ending runs early makes
    /// them shorter than CPython would, never different in meaning; a writer that is never
    /// flushed writes CPython's bytes. After an error it can be called again.
    pub fn flush(&mut self) -> Result<(), WriteError<W::Error>> {
        self.check_open()?;
        for thread in 0..self.store.threads.len() {
            if self.store.threads.get(thread).rle_count > 0 {
                self.flush_run(thread)?;
            }
        }
        self.flush_staging(false)?;
        self.sink.flush().map_err(|error| WriteError::Sink { offset: self.committed, error })
    }

    /// String `index` of the string table as it stands (in the order `finish` writes it).
    pub fn string(&self, index: u32) -> Option<&[u8]> {
        self.store.strings.table().get(index)
    }

    /// Frame `index` of the frame table as it stands.
    pub fn frame_entry(&self, index: u32) -> Option<FrameEntry> {
        self.store.frames.entries().get(index as usize).copied()
    }

    /// The header `finish` would write if nothing more came, with the tables' offsets and the
    /// counts still zero: what a receiver of a cut stream starts from (byte order, version,
    /// start time, interval, compression, profiling configuration).
    pub fn header_template(&self) -> Header {
        self.config.header_template()
    }

    /// The sink beside string `index`, for a journal that sends the table through the sink
    /// itself (a journal record does not move the sink's position, so unlike
    /// [`Self::get_mut`] the writer need not seek again).
    #[cfg(feature = "transport")]
    pub(crate) fn sink_and_string(&mut self, index: u32) -> (&mut W, Option<&[u8]>) {
        (&mut self.sink, self.store.strings.table().get(index))
    }

    /// The sink, for a journal record (see [`Self::sink_and_string`]).
    #[cfg(feature = "transport")]
    pub(crate) fn sink_in_place(&mut self) -> &mut W {
        &mut self.sink
    }

    /// The byte order the file is written in.
    pub fn endian(&self) -> E {
        self.endian
    }

    /// The stats `set_stats` recorded, if any.
    pub fn stats(&self) -> Option<Stats> {
        self.stats
    }

    /// Records, frames and bytes written so far, as CPython's `BinaryWriter.get_stats()`
    /// counts them ([`WriteCounts`]).
    pub fn write_counts(&self) -> WriteCounts {
        self.counts
    }

    /// Thread samples written so far (REPEAT ones included).
    pub fn sample_count(&self) -> u64 {
        self.sample_count
    }

    /// Distinct threads so far.
    pub fn thread_count(&self) -> usize {
        self.store.threads.len()
    }

    /// Distinct strings so far.
    pub fn string_count(&self) -> usize {
        self.store.strings.table().len()
    }

    /// Distinct frames so far.
    pub fn frame_count(&self) -> usize {
        self.store.frames.entries().len()
    }

    /// True once a capacity or format limit refused a sample (CPython's `limit_reached`).
    pub fn limit_reached(&self) -> bool {
        self.limit_reached
    }

    /// The sink.
    pub fn get_ref(&self) -> &W {
        &self.sink
    }

    /// The sink, mutably (to repair it after an error, say). Moving its position is harmless:
    /// the writer seeks back to its own position before the next write.
    pub fn get_mut(&mut self) -> &mut W {
        self.positioned = false;
        &mut self.sink
    }

    /// Gives the sink back (finish first for a valid file).
    pub fn into_inner(self) -> W {
        self.sink
    }

    // ------------------------------------------------------------------ sample path

    /// Samples, frames and stats are accepted only before `finish` is first called, even if
    /// that call failed: the sample region may already be closed.
    fn check_open(&self) -> Result<(), WriteError<W::Error>> {
        if self.finishing {
            Err(WriteError::Finished)
        } else {
            Ok(())
        }
    }

    fn limit<T>(&mut self, e: WriteError<W::Error>) -> Result<T, WriteError<W::Error>> {
        self.limit_reached = true;
        Err(e)
    }

    /// Checks the writer is open and the sample limit, then finds or creates the thread.
    fn begin_sample(&mut self, interpreter_id: u32, thread_id: u64) -> Result<usize, WriteError<W::Error>> {
        self.check_open()?;
        if self.sample_count == u64::MAX {
            return self.limit(WriteError::Limit(FormatLimit::Samples));
        }
        match self.store.threads.find_or_create(thread_id, interpreter_id, self.config.start_time_us) {
            Ok(t) => Ok(t),
            Err(resource) => self.limit(WriteError::Capacity { resource }),
        }
    }

    /// True when interned frame `id` has exactly this content.
    #[inline]
    fn is_frame(&self, id: u32, frame: &Frame<'_>) -> bool {
        let Some(e) = self.store.frames.entries().get(id as usize) else {
            return false;
        };
        let strings = self.store.strings.table();
        e.location == frame.location.unwrap_or(Location::NONE)
            && e.opcode == frame.opcode.unwrap_or(NO_OPCODE)
            && strings.get(e.filename) == Some(frame.filename)
            && strings.get(e.funcname) == Some(frame.funcname)
    }

    /// The frame's id: from the recent-frame cache when it holds this frame, else by
    /// interning. Either way the strings and key were interned in spec 5.4's order the first
    /// time this content was seen, so the tables are the same as without the cache.
    #[inline]
    fn intern(&mut self, frame: &Frame<'_>) -> Result<u32, WriteError<W::Error>> {
        let key = recent_key(frame);
        if let Some(id) = self.store.recent.get(key) {
            if self.is_frame(id, frame) {
                return Ok(id);
            }
        }
        let id = self.intern_uncached(frame)?;
        self.store.recent.set(key, id);
        Ok(id)
    }

    /// Interns file name, function name, then the 7-field key (spec 5.4 order).
    fn intern_uncached(&mut self, frame: &Frame<'_>) -> Result<u32, WriteError<W::Error>> {
        self.store_frame(frame, FrameInterner::intern)
    }

    /// Interns the names of `frame`, then hands its table entry to `add` (look up or insert,
    /// or always insert); a full table or an oversized name is a limit.
    fn store_frame(
        &mut self,
        frame: &Frame<'_>,
        add: fn(&mut FrameInterner<'s>, FrameEntry) -> Result<u32, Resource>,
    ) -> Result<u32, WriteError<W::Error>> {
        if frame.filename.len() > u32::MAX as usize || frame.funcname.len() > u32::MAX as usize {
            return self.limit(WriteError::Limit(FormatLimit::StringLength));
        }
        let stored = self.store.strings.intern(frame.filename).and_then(|filename| {
            let funcname = self.store.strings.intern(frame.funcname)?;
            let entry = FrameEntry {
                filename,
                funcname,
                location: frame.location.unwrap_or(Location::NONE),
                opcode: frame.opcode.unwrap_or(NO_OPCODE),
            };
            add(&mut self.store.frames, entry)
        });
        match stored {
            Ok(id) => Ok(id),
            Err(resource) => self.limit(WriteError::Capacity { resource }),
        }
    }

    /// Encodes the sample whose stack is `scratch[..depth]` (spec 5.5–5.7).
    fn record(&mut self, thread: usize, ts: u64, status: u8, depth: usize) -> Result<(), WriteError<W::Error>> {
        // A stack record's encoding, its one or two counts, and how many frames it lists.
        let (encoding, first, second) =
            match choose_change(self.store.threads.prev_stack(thread), &self.scratch[..depth]) {
                StackChange::Repeat => return self.repeat(thread, ts, status),
                StackChange::Full => (Encoding::Full, depth, None),
                StackChange::Suffix { shared, push } => (Encoding::Suffix, shared, Some(push)),
                StackChange::PopPush { pop, push } => (Encoding::PopPush, pop, Some(push)),
            };
        // Room first, so a refused sample changes nothing.
        if let Err(resource) = self.store.threads.reserve_stack(thread, depth) {
            return self.limit(WriteError::Capacity { resource });
        }
        if self.store.threads.get(thread).rle_count > 0 {
            self.flush_run(thread)?;
        }
        self.make_room(MAX_STACK_RECORD_LEN)?;
        let record_start = self.staged;
        let t = *self.store.threads.get(thread);
        let prefix = Prefix { thread_id: t.thread_id, interpreter_id: t.interpreter_id, encoding: encoding as u8 };
        self.stage(&prefix.encode(self.endian));
        self.stage_varint(ts.wrapping_sub(t.prev_ts));
        self.stage(&[status]);
        self.stage_varint(first as u64);
        if let Some(second) = second {
            self.stage_varint(second as u64);
        }
        // FULL lists the whole stack; SUFFIX and POP_PUSH the `push` innermost frames.
        let listed = second.unwrap_or(depth);
        for i in 0..listed {
            self.stage_varint(u64::from(self.scratch[i]));
        }
        let counts = &mut self.counts;
        counts.records.add(encoding);
        counts.frames_written += listed as u64;
        counts.frames_saved += (depth - listed) as u64;
        counts.bytes_written += (self.staged - record_start) as u64;
        let (store, scratch) = (&mut self.store, &self.scratch);
        store.threads.set_prev_stack(thread, &scratch[..depth]);
        store.threads.get_mut(thread).prev_ts = ts;
        self.sample_count += 1;
        Ok(())
    }

    /// Adds a sample with the thread's previous stack to its pending REPEAT run.
    fn repeat(&mut self, thread: usize, ts: u64, status: u8) -> Result<(), WriteError<W::Error>> {
        if self.run_is_full(thread) {
            self.flush_run(thread)?;
        }
        let t = *self.store.threads.get(thread);
        let mut delta = [0u8; MAX_VARINT_LEN];
        let n = varint::encode_u64(ts.wrapping_sub(t.prev_ts), &mut delta);
        if let Err(resource) = self.store.threads.reserve_rle(thread, n + 1) {
            return self.limit(WriteError::Capacity { resource });
        }
        self.store.threads.push_rle(thread, &delta[..n], status);
        self.store.threads.get_mut(thread).prev_ts = ts;
        self.sample_count += 1;
        Ok(())
    }

    /// A run ends when its next entry might not fit in the budget, whatever that entry's size
    /// (CPython's rule, spec 5.7).
    fn run_is_full(&self, thread: usize) -> bool {
        self.store.threads.get(thread).rle_len as usize + MAX_RLE_ENTRY_LEN > self.store.threads.rle_budget()
    }

    /// Emits the thread's pending run as one REPEAT record and clears it.
    fn flush_run(&mut self, thread: usize) -> Result<(), WriteError<W::Error>> {
        self.make_room(max_repeat_record_len(self.store.threads.rle_budget()))?;
        let record_start = self.staged;
        let t = *self.store.threads.get(thread);
        self.stage(
            &Prefix { thread_id: t.thread_id, interpreter_id: t.interpreter_id, encoding: Encoding::Repeat as u8 }
                .encode(self.endian),
        );
        self.stage_varint(u64::from(t.rle_count));
        let run = self.store.threads.rle(thread);
        let end = self.staged + run.len();
        self.store.staging[self.staged..end].copy_from_slice(run);
        self.staged = end;
        let depth = self.store.threads.prev_stack(thread).len() as u64;
        let counts = &mut self.counts;
        counts.records.repeat += 1;
        counts.repeat_samples += u64::from(t.rle_count);
        counts.frames_saved += u64::from(t.rle_count) * depth;
        counts.bytes_written += (end - record_start) as u64;
        let t = self.store.threads.get_mut(thread);
        t.rle_len = 0;
        t.rle_count = 0;
        Ok(())
    }

    // ------------------------------------------------------------------ staging and sink

    #[inline]
    fn stage(&mut self, bytes: &[u8]) {
        let end = self.staged + bytes.len();
        self.store.staging[self.staged..end].copy_from_slice(bytes);
        self.staged = end;
    }

    #[inline]
    fn stage_varint(&mut self, v: u64) {
        let mut buf = [0u8; MAX_VARINT_LEN];
        let n = varint::encode_u64(v, &mut buf);
        self.stage(&buf[..n]);
    }

    /// Ensures `n` free staging bytes, flushing the staged records if needed.
    fn make_room(&mut self, n: usize) -> Result<(), WriteError<W::Error>> {
        if self.store.staging.len() - self.staged < n {
            self.flush_staging(false)?;
        }
        Ok(())
    }

    /// Hands the staged bytes to the sink (raw) or to zstd, ending the frame when `end`.
    /// On success the staging buffer is empty.
    fn flush_staging(&mut self, end: bool) -> Result<(), WriteError<W::Error>> {
        #[cfg(feature = "zstd")]
        if self.zstd.is_some() {
            return self.compress_staging(end);
        }
        let _ = end;
        let bytes = &self.store.staging[self.staged_from..self.staged];
        Self::sink_write(&mut self.sink, &mut self.committed, &mut self.positioned, bytes)?;
        self.staged_from = 0;
        self.staged = 0;
        Ok(())
    }

    #[cfg(feature = "zstd")]
    fn compress_staging(&mut self, end: bool) -> Result<(), WriteError<W::Error>> {
        let Some(z) = self.zstd.as_mut().map(ZstdOut::get) else {
            return Ok(());
        };
        loop {
            let pending = z.pending();
            if !pending.is_empty() {
                let n = pending.len();
                Self::sink_write(&mut self.sink, &mut self.committed, &mut self.positioned, pending)?;
                z.consume_pending(n);
            }
            let input = &self.store.staging[self.staged_from..self.staged];
            if input.is_empty() && (!end || z.is_finished()) {
                break;
            }
            // As CPython: the input always goes in with "continue" and the frame is ended on
            // empty input. Ending on the last input instead would tell zstd the whole size,
            // and it would write a content size into the frame header.
            let progress = z.compress(input, end && input.is_empty()).map_err(|e| WriteError::Zstd { code: e.0 })?;
            self.staged_from += progress.consumed;
        }
        self.staged_from = 0;
        self.staged = 0;
        Ok(())
    }

    fn end_sample_region(&mut self) -> Result<(), WriteError<W::Error>> {
        self.flush_staging(true)?;
        // An empty raw region still needs the zero header reserved before the tables.
        Self::sink_write(&mut self.sink, &mut self.committed, &mut self.positioned, &[])
    }

    /// Writes `bytes` at `committed`, reserving the 64-byte header first if nothing was
    /// written yet; advances `committed` only when every byte was accepted.
    fn sink_write(
        sink: &mut W,
        committed: &mut u64,
        positioned: &mut bool,
        bytes: &[u8],
    ) -> Result<(), WriteError<W::Error>> {
        if *committed == 0 {
            write_at(sink, positioned, 0, &[0; HEADER_SIZE])?;
            *committed = HEADER_SIZE as u64;
        }
        write_at(sink, positioned, *committed, bytes)?;
        *committed += bytes.len() as u64;
        Ok(())
    }

    // ------------------------------------------------------------------ finish parts

    /// Writes string table, frame table, trailer and footer from `start`; returns the file
    /// size. The staging buffer (empty now) batches the small writes. Returns the frame
    /// table offset and the file size.
    fn write_tables(&mut self, start: u64) -> Result<(u64, u64), WriteError<W::Error>> {
        let mut out = TableOut { pos: start, used: 0 };
        for i in 0..self.store.strings.table().len() as u32 {
            let len = self.store.strings.table().get(i).map_or(0, <[u8]>::len);
            let mut buf = [0u8; MAX_VARINT_LEN];
            let n = varint::encode_u64(len as u64, &mut buf);
            self.table_put(&mut out, &buf[..n])?;
            // Strings longer than the staging buffer go straight to the sink.
            if len > self.store.staging.len() - out.used {
                self.table_flush(&mut out)?;
                if len > self.store.staging.len() {
                    let bytes = self.store.strings.table().get(i).unwrap_or(&[]);
                    write_at(&mut self.sink, &mut self.positioned, out.pos, bytes)?;
                    out.pos += len as u64;
                    continue;
                }
            }
            let end = out.used + len;
            let bytes = self.store.strings.table().get(i).unwrap_or(&[]);
            self.store.staging[out.used..end].copy_from_slice(bytes);
            out.used = end;
        }
        let frames_start = out.pos + out.used as u64;
        for i in 0..self.store.frames.entries().len() {
            let mut buf = [0u8; MAX_FRAME_ENTRY_LEN];
            let n = self.store.frames.entries()[i].encode(&mut buf);
            self.table_put(&mut out, &buf[..n])?;
        }
        if let Some(stats) = self.stats {
            self.table_put(&mut out, &stats.encode(self.endian))?;
        }
        let file_size = out.pos + out.used as u64 + crate::header::FOOTER_SIZE as u64;
        let footer = Footer {
            string_count: self.store.strings.table().len() as u32,
            frame_count: self.store.frames.entries().len() as u32,
            file_size,
        };
        self.table_put(&mut out, &footer.encode(self.endian))?;
        self.table_flush(&mut out)?;
        Ok((frames_start, file_size))
    }

    fn table_put(&mut self, out: &mut TableOut, bytes: &[u8]) -> Result<(), WriteError<W::Error>> {
        if bytes.len() > self.store.staging.len() - out.used {
            self.table_flush(out)?;
        }
        self.store.staging[out.used..out.used + bytes.len()].copy_from_slice(bytes);
        out.used += bytes.len();
        Ok(())
    }

    fn table_flush(&mut self, out: &mut TableOut) -> Result<(), WriteError<W::Error>> {
        write_at(&mut self.sink, &mut self.positioned, out.pos, &self.store.staging[..out.used])?;
        out.pos += out.used as u64;
        out.used = 0;
        Ok(())
    }

    fn header(&self, string_table_offset: u64, frame_table_offset: u64) -> Header {
        Header {
            sample_count: self.sample_count,
            thread_count: self.store.threads.len() as u32,
            string_table_offset,
            frame_table_offset,
            ..self.config.header_template()
        }
    }
}

/// Position of batched table output: `used` staging bytes are due at file offset `pos`.
struct TableOut {
    pos: u64,
    used: usize,
}

/// Writes `bytes` at file `offset`. `positioned` says the sink is already there (writes are
/// sequential); otherwise it seeks first. After a failure the position is unknown, so the
/// next write seeks again — this is what lets a failed write be redone in place.
fn write_at<W: Write + Seek>(
    sink: &mut W,
    positioned: &mut bool,
    offset: u64,
    bytes: &[u8],
) -> Result<(), WriteError<W::Error>> {
    if !*positioned {
        sink.seek(SeekFrom::Start(offset)).map_err(|error| WriteError::Sink { offset, error })?;
        *positioned = true;
    }
    write_fully(sink, bytes, offset).inspect_err(|_| *positioned = false)
}

/// `write_all` that never panics: a sink returning `Ok(0)` is an error, not a loop or panic.
fn write_fully<W: Write>(sink: &mut W, mut bytes: &[u8], mut offset: u64) -> Result<(), WriteError<W::Error>> {
    while !bytes.is_empty() {
        match sink.write(bytes) {
            Ok(0) => return Err(WriteError::SinkWroteZero { offset }),
            Ok(n) => {
                bytes = &bytes[n.min(bytes.len())..];
                offset += n as u64;
            }
            Err(error) => return Err(WriteError::Sink { offset, error }),
        }
    }
    Ok(())
}
