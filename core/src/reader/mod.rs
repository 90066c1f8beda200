//! The decoder (spec section 9): byte order and layout from the header, every count checked
//! before it is trusted, then the records streamed in file order through a window in the
//! caller's storage (a zstd region is decompressed through the same bounded window, here or
//! by a [`RegionSource`] of the caller's).
//!
//! A REPEAT record comes out as one [`Run`]: the stack once, then its timestamps and statuses
//! decoded on demand, so a consumer pays per run what it pays per stack
//! ([`Reader::next_item`]); [`Reader::next_sample`] gives the same samples one by one.
//! Records are decoded from the window in one piece whenever it holds the largest possible
//! record, with a single bounds check per field rather than a refill check per byte.
//!
//! Replay follows CPython 3.15.2 exactly, quirks included (spec 9.3): a POP_PUSH popping more
//! frames than the stack has keeps nothing, a SUFFIX pushing nothing keeps the innermost
//! `shared` frames, a REPEAT with count 0 creates its thread. Unlike CPython, nothing is
//! buffered whole: memory stays what the caller lent, time is linear in the file size.
//!
//! One module per part: `metadata` (header, footer, stats), `window` (the byte streams and
//! the caller's window), `records` (a record's bytes, samples and runs), `tables` (strings
//! and frames); the [`Reader`] that walks them is here.

use embedded_io::{Read, Seek, SeekFrom};

use crate::endian::RunTimeEndian;
use crate::error::{Position, ReadError, Rule};
use crate::header::{
    decode_stats, stats_prefix_len, Compression, Footer, Header, HeaderError, HeaderLayout, Stats, StatsTail,
    FOOTER_SIZE, HEADER_SIZE, STATS_VERSION,
};
/// Where a reader's record counts are defined (the writer counts the same way).
pub use crate::records::RecordCounts;
use crate::records::{Encoding, Prefix, MAX_RLE_ENTRY_LEN, MAX_STACK_DEPTH, PREFIX_LEN};
use crate::storage::{Keep, ReaderStorage, ReaderThreads, Resource, StringTable, Table};
use crate::tables::{frame_from_fields, FrameEntry, FrameField, Location};
use crate::varint::{self, VarintError, MAX_VARINT_LEN};

#[cfg(feature = "zstd")]
use crate::compression::Decompressor;

mod metadata;
mod records;
mod tables;
mod window;

pub use metadata::*;
pub use records::*;
pub use tables::*;
pub use window::*;

type Res<T, E> = Result<T, ReadError<E>>;

/// Streams the samples of a Tachyon file.
pub struct Reader<'s, R: Read + Seek> {
    meta: Metadata,
    tables: Tables<'s>,
    threads: ReaderThreads<'s>,
    stream: Stream<'s, R>,
}

/// CPython's cap on a decompressed sample region: 1 GiB. Decoding time is linear in the
/// decompressed size, which zstd lets grow about 30,000-fold over the file size; the cap
/// keeps a small hostile file from keeping a reader busy.
pub const DEFAULT_MAX_DECOMPRESSED: u64 = 1 << 30;

impl<'s, R: Read + Seek> Reader<'s, R> {
    /// Opens a file: metadata checks, then the string and frame tables into `storage`. A
    /// compressed file opens, but its samples need `Reader::open_zstd` (feature `zstd`) or
    /// [`Reader::open_with_region`].
    pub fn open(source: R, storage: ReaderStorage<'s>) -> Res<Self, R::Error> {
        Self::open_inner(source, storage, |meta| if meta.is_compressed() { Region::Unavailable } else { Region::Raw })
    }

    /// Opens a file whose sample region may be zstd-compressed, decoding it through
    /// `decompressor` (its window limit bounds the memory a hostile frame can ask for).
    #[cfg(feature = "zstd")]
    pub fn open_zstd(source: R, storage: ReaderStorage<'s>, decompressor: Decompressor<'s>) -> Res<Self, R::Error> {
        Self::open_inner(source, storage, |meta| {
            if meta.is_compressed() {
                Region::Zstd(ZstdState { dec: decompressor, produced: 0, limit: DEFAULT_MAX_DECOMPRESSED })
            } else {
                Region::Raw
            }
        })
    }

    /// Opens a file whose sample region comes from `region`: its bytes as the reader would
    /// read them (decompressed, for a compressed file), from another thread, say. The source
    /// is then only read for the metadata and the tables.
    pub fn open_with_region(
        source: R,
        storage: ReaderStorage<'s>,
        region: &'s mut dyn RegionSource<R::Error>,
    ) -> Res<Self, R::Error> {
        Self::open_inner(source, storage, |_| Region::External(region))
    }

    /// Opens a file that is still being written: the metadata and tables from `source` (as
    /// far as they are known: a file rebuilt from what a writer sent so far), the sample
    /// region from `region` as it grows. Unlike a finished file's reader:
    ///
    /// - [`Self::next_item`] gives `Ok(None)` when `region` has no bytes now, and goes on
    ///   where it stopped when called again after `region` got more; `region` must end each
    ///   read on a record boundary (a record cut short is [`Rule::TruncatedRecord`]);
    /// - the header's sample and thread counts are not checked (they are the finished
    ///   file's; the thread table is bounded by the storage's capacity alone);
    /// - the tables may grow: [`Self::reload_tables`].
    pub fn open_growing(
        source: R,
        storage: ReaderStorage<'s>,
        region: &'s mut dyn RegionSource<R::Error>,
    ) -> Res<Self, R::Error> {
        let mut reader = Self::open_inner(source, storage, |_| Region::External(region))?;
        reader.stream.growing = true;
        reader.stream.region_end = None;
        Ok(reader)
    }

    /// Reads the metadata and tables again, from `source`, which replaces the reader's: the
    /// tables of a file still being written, grown since the reader opened (a reader opened
    /// with [`Self::open_growing`]). Strings and frames already read must keep their
    /// indices (a writer only appends to its tables); the threads' stacks are kept. Only
    /// between records, when [`Self::next_item`] has given `Ok(None)`: otherwise nothing is
    /// read and the result is `Ok(false)`. Growable storage grows with the tables; fixed
    /// storage gives a capacity error when they no longer fit.
    pub fn reload_tables(&mut self, mut source: R) -> Res<bool, R::Error> {
        let between = self.stream.run.remaining == 0 && self.stream.input.window.available().is_empty();
        if !self.stream.growing || !between {
            return Ok(false);
        }
        let meta = Metadata::read(&mut source)?;
        let pos = self.stream.input.window.pos;
        let window = &mut self.stream.input.window;
        self.tables.strings.clear();
        self.tables.frame_count = 0;
        self.tables.trusted_limit = 0;
        let loaded = load_strings(&mut source, &meta, window, &mut self.tables)
            .and_then(|()| load_frames(&mut source, &meta, window, &mut self.tables));
        window.reset(pos);
        loaded?;
        self.tables.trust();
        self.stream.input.source = source;
        self.meta = meta;
        Ok(true)
    }

    fn open_inner(
        mut source: R,
        storage: ReaderStorage<'s>,
        region: impl FnOnce(&Metadata) -> Region<'s, R::Error>,
    ) -> Res<Self, R::Error> {
        let meta = Metadata::read(&mut source)?;
        let ReaderStorage { strings, frames, threads, read_buffer } = storage;
        let mut window = Window { buf: read_buffer, start: 0, end: 0, pos: 0 };
        let mut tables = Tables { strings, frames, frame_count: 0, trusted_limit: 0 };
        load_strings(&mut source, &meta, &mut window, &mut tables)?;
        load_frames(&mut source, &meta, &mut window, &mut tables)?;
        tables.trust();
        let region = region(&meta);
        let start = HEADER_SIZE as u64;
        if !matches!(region, Region::External(_)) {
            source.seek(SeekFrom::Start(start)).map_err(io_err(start))?;
        }
        let decompressed = meta.is_compressed();
        window.reset(if decompressed { 0 } else { start });
        let input =
            Input { source, window, file_pos: start, file_end: meta.header.string_table_offset, region, decompressed };
        let stream = Stream {
            input,
            run: Pending { thread: 0, remaining: 0 },
            done: false,
            growing: false,
            region_end: (!decompressed).then_some(meta.header.string_table_offset),
            decoded: 0,
            counts: RecordCounts::default(),
        };
        Ok(Reader { meta, tables, threads, stream })
    }

    /// Sets the largest decompressed sample region accepted (default
    /// [`DEFAULT_MAX_DECOMPRESSED`], CPython's 1 GiB) when this reader decompresses; beyond
    /// it, reading fails with [`Rule::ZstdTooLarge`].
    #[cfg(feature = "zstd")]
    pub fn set_max_decompressed(&mut self, bytes: u64) {
        if let Region::Zstd(state) = &mut self.stream.input.region {
            state.limit = bytes;
        }
    }

    /// Header, footer and stats.
    pub fn metadata(&self) -> &Metadata {
        &self.meta
    }

    /// String and frame tables.
    pub fn tables(&self) -> &Tables<'s> {
        &self.tables
    }

    /// Records of each kind read so far.
    pub fn record_counts(&self) -> RecordCounts {
        self.stream.counts
    }

    /// Bytes of the (decompressed) sample region consumed so far; after the last sample, its
    /// whole size.
    pub fn sample_region_bytes(&self) -> u64 {
        let start = if self.meta.is_compressed() { 0 } else { HEADER_SIZE as u64 };
        self.stream.input.window.pos.saturating_sub(start)
    }

    /// Thread samples decoded so far.
    pub fn samples_decoded(&self) -> u64 {
        self.stream.decoded
    }

    /// Distinct threads seen so far.
    pub fn threads_seen(&self) -> usize {
        self.threads.len()
    }

    /// Ends the stream (as if it had been read to the end: [`Self::next_item`] gives
    /// `Ok(None)` after it) and gives back what growable storage's thread table grew to — a
    /// file of a million threads: about 40 MB, which a converter need not hold while it
    /// writes what it collected. The tables (strings, frames) stay; fixed storage keeps its
    /// slices.
    pub fn release_threads(&mut self) {
        self.stream.done = true;
        self.stream.run.remaining = 0;
        self.threads.release();
    }

    /// Gives the source back.
    pub fn into_inner(self) -> R {
        self.stream.input.source
    }

    /// The next record in file order, `Ok(None)` at the end: a sample with a new stack, or a
    /// REPEAT run whose samples share one stack (so a consumer can pay per run what it pays
    /// per stack). Entries of a previous run left unread are decoded first. At the end the
    /// decoded count is checked against the header (CPython's check after replay). After an
    /// error the stream is over.
    pub fn next_item(&mut self) -> Res<Option<Record<'_, 's, R>>, R::Error> {
        if self.stream.done {
            return Ok(None);
        }
        let decoded = self.finish_run().and_then(|()| self.decode_record());
        match decoded {
            Ok(Decoded::Sample { thread, status, encoding }) => {
                Ok(Some(Record::Sample(self.sample(thread, status, encoding))))
            }
            Ok(Decoded::Run { thread, count }) => {
                let record = self.stream.counts.total() - 1;
                let (stack, entry) = self.threads.stack_and_entry(thread);
                Ok(Some(Record::Repeat(Run {
                    interpreter_id: entry.interpreter_id,
                    thread_id: entry.thread_id,
                    stack,
                    count,
                    record,
                    tables: &self.tables,
                    entry,
                    stream: &mut self.stream,
                })))
            }
            Ok(Decoded::End) => {
                self.stream.done = !self.stream.growing;
                Ok(None)
            }
            Err(e) => Err(self.stream.fail(e)),
        }
    }

    /// The next thread sample in file order, `Ok(None)` at the end; REPEAT runs come one
    /// sample at a time. Same checks as [`Self::next_item`].
    pub fn next_sample(&mut self) -> Res<Option<Sample<'_>>, R::Error> {
        loop {
            if self.stream.done {
                return Ok(None);
            }
            if self.stream.run.remaining > 0 {
                let thread = self.stream.run.thread;
                let (_, entry) = self.threads.stack_and_entry(thread);
                let mut status = 0;
                if let Err(e) = self.stream.entries(1, entry, |_, s| status = s) {
                    return Err(self.stream.fail(e));
                }
                return Ok(Some(self.sample(thread, status, Encoding::Repeat)));
            }
            match self.decode_record() {
                Ok(Decoded::Sample { thread, status, encoding }) => {
                    return Ok(Some(self.sample(thread, status, encoding)));
                }
                Ok(Decoded::Run { .. }) => {}
                Ok(Decoded::End) => {
                    self.stream.done = !self.stream.growing;
                    return Ok(None);
                }
                Err(e) => return Err(self.stream.fail(e)),
            }
        }
    }

    fn sample(&self, thread: usize, status: u8, encoding: Encoding) -> Sample<'_> {
        let t = self.threads.get(thread);
        Sample {
            timestamp_us: t.prev_ts,
            interpreter_id: t.interpreter_id,
            thread_id: t.thread_id,
            status,
            stack: self.threads.stack(thread),
            encoding,
            record: self.stream.counts.total() - 1,
            tables: &self.tables,
        }
    }

    /// Decodes what is left of the pending run, advancing its thread's clock.
    #[inline(always)]
    fn finish_run(&mut self) -> Res<(), R::Error> {
        if self.stream.run.remaining == 0 {
            return Ok(());
        }
        let entry = self.threads.entry(self.stream.run.thread);
        self.stream.skip_entries(entry).map(drop)
    }

    /// Decodes and checks every record left, as [`Self::next_item`] would to its end, without
    /// building the stacks no one will read: each thread's depth is kept (the next record's
    /// counts are checked against it) and each frame index checked against the tables, the
    /// errors and counts those of reading every sample. Returns the samples decoded, and
    /// calls `progress` with the count so far every 65,536 records. The stream is over after
    /// it, as after the last record. A file still being written
    /// ([`Self::open_growing`]) is read as by [`Self::next_item`], to where it ends now, and
    /// may be read on.
    pub fn check_to_end(&mut self, mut progress: impl FnMut(u64)) -> Res<u64, R::Error> {
        const TICK: u32 = 1 << 16;
        let mut records = 0u32;
        let mut count = |records: &mut u32, decoded: u64| {
            *records = records.wrapping_add(1);
            if *records % TICK == 0 {
                progress(decoded);
            }
        };
        if self.stream.growing {
            while self.next_item()?.is_some() {
                count(&mut records, self.stream.decoded);
            }
            return Ok(self.stream.decoded);
        }
        while !self.stream.done {
            // Records the window holds whole go through `check_held`, up to the next record
            // that reports progress; that one, and any it leaves, one at a time.
            if self.stream.run.remaining == 0 {
                let budget = TICK - 1 - records % TICK;
                match self.check_held(budget) {
                    Ok(n) => records = records.wrapping_add(n),
                    Err(e) => return Err(self.stream.fail(e)),
                }
            }
            count(&mut records, self.stream.decoded);
            let checked = self.finish_run().and_then(|()| self.decode_record_as::<false>());
            match checked {
                Ok(Decoded::End) => self.stream.done = true,
                Ok(_) => {}
                Err(e) => return Err(self.stream.fail(e)),
            }
        }
        Ok(self.stream.decoded)
    }

    /// [`Self::check_to_end`]'s loop over the records the window holds whole: up to `budget`
    /// of them decoded one after another where they lie, by the rules of
    /// [`Self::decode_record_as`] (the same [`record_head`] and [`record_body`], the same
    /// errors at the same offsets), without the steps a record that may cross the window's
    /// end needs per record. A REPEAT record's entries follow it at once. Returns the
    /// records done; it stops early where the window cannot hold the largest record, which
    /// the caller's one-at-a-time path then reads. No run may be pending.
    fn check_held(&mut self, budget: u32) -> Res<u32, R::Error> {
        let mut done = 0u32;
        while done < budget {
            let input = &mut self.stream.input;
            if input.window.buf.len() < LARGEST_RECORD {
                return Ok(done);
            }
            if input.window.available().len() < LARGEST_RECORD && !input.fill(LARGEST_RECORD)? {
                return Ok(done);
            }
            let Stream { input, counts, decoded, region_end, growing, .. } = &mut self.stream;
            let at = input.positions();
            let mut held = Held { bytes: input.window.available(), used: 0, base: input.window.pos };
            let mut run = None;
            while done < budget && held.bytes.len() - held.used >= LARGEST_RECORD {
                let record_at = RecordBytes::<R::Error>::offset(&held);
                let head = &held.bytes[held.used..];
                let (thread, encoding) = record_head(head, record_at, at, &self.meta, &mut self.threads, *growing)?;
                held.used += PREFIX_LEN;
                // Most stack records are short ones (`short_stack_body`); the rest, and any
                // record that breaks a rule, go through `record_body`.
                if encoding != Encoding::Repeat {
                    let limit = self.tables.trusted_index_limit();
                    // One look-up of the thread's entry for its depth and its update.
                    let entry = self.threads.entry(thread);
                    if let Some((len, delta, kept, push)) =
                        short_stack_body(&held.bytes[held.used..], encoding, entry.depth(), limit)
                    {
                        entry.set_depth(Keep::Bottom(kept), push, delta);
                        held.used += len;
                        done += 1;
                        counts.add(encoding);
                        *decoded += 1;
                        continue;
                    }
                }
                let body = record_body::<false, _, _>(
                    &mut held,
                    at,
                    *region_end,
                    &self.tables,
                    &mut self.threads,
                    thread,
                    encoding,
                )?;
                done += 1;
                counts.add(encoding);
                match body {
                    Body::Run { count } => {
                        run = Some(Pending { thread, remaining: count });
                        break;
                    }
                    Body::Stack { .. } => *decoded += 1,
                }
            }
            let used = held.used;
            input.window.consume(used);
            if let Some(pending) = run {
                self.stream.run = pending;
                self.stream.skip_entries(self.threads.entry(pending.thread))?;
            }
        }
        Ok(done)
    }

    /// Decodes the next record (the pending run is finished): a stack record into its
    /// thread's stack, or a REPEAT record's count.
    fn decode_record(&mut self) -> Res<Decoded, R::Error> {
        self.decode_record_as::<true>()
    }

    /// [`Self::decode_record`], keeping the threads' stacks (`BUILD`) or only their depths.
    #[inline(always)]
    fn decode_record_as<const BUILD: bool>(&mut self) -> Res<Decoded, R::Error> {
        let input = &mut self.stream.input;
        let record_at = input.window.pos;
        let whole = input.ensure_record()?;
        // Short of a prefix only at the region's end: a window that cannot hold the largest
        // record still holds more than a prefix.
        if input.window.available().len() < PREFIX_LEN {
            let trailing = input.window.available().len() as u64;
            if trailing != 0 {
                return Err(ReadError::format(input.at(record_at), Rule::TruncatedRecord { trailing }));
            }
            let declared = self.meta.header.sample_count;
            if self.stream.decoded != declared && !self.stream.growing {
                let rule = Rule::SampleCountMismatch { declared, decoded: self.stream.decoded };
                return Err(ReadError::format(input.at(record_at), rule));
            }
            return Ok(Decoded::End);
        }
        let at = input.positions();
        let head = input.window.available();
        let (thread, encoding) = record_head(head, record_at, at, &self.meta, &mut self.threads, self.stream.growing)?;
        let input = &mut self.stream.input;
        input.window.consume(PREFIX_LEN);
        let region_end = self.stream.region_end;
        let (tables, threads) = (&self.tables, &mut self.threads);
        let body = if whole {
            let mut held = Held { bytes: input.window.available(), used: 0, base: input.window.pos };
            let body = record_body::<BUILD, _, _>(&mut held, at, region_end, tables, threads, thread, encoding);
            let used = held.used;
            input.window.consume(used);
            body?
        } else {
            record_body::<BUILD, _, _>(&mut Streamed { input }, at, region_end, tables, threads, thread, encoding)?
        };
        let stream = &mut self.stream;
        stream.counts.add(encoding);
        match body {
            Body::Run { count } => {
                stream.run = Pending { thread, remaining: count };
                Ok(Decoded::Run { thread, count })
            }
            Body::Stack { status } => {
                stream.decoded += 1;
                Ok(Decoded::Sample { thread, status, encoding })
            }
        }
    }
}

/// A record's prefix, the first [`PREFIX_LEN`] of `bytes`, at stream offset `record_at`
/// (positioned by `at`): its thread, created on first sight within the header's thread
/// count (any count while the file is `growing`), and its encoding.
#[inline(always)]
fn record_head<E>(
    bytes: &[u8],
    record_at: u64,
    at: impl Fn(u64) -> Position,
    meta: &Metadata,
    threads: &mut ReaderThreads<'_>,
    growing: bool,
) -> Res<(usize, Encoding), E> {
    let mut pb = [0u8; PREFIX_LEN];
    pb.copy_from_slice(&bytes[..PREFIX_LEN]);
    let p = Prefix::decode(&pb, meta.endian);
    let thread = match threads.find(p.thread_id, p.interpreter_id) {
        Ok(i) => i,
        Err(slot) => {
            let (declared, found) = (meta.header.thread_count, threads.len() as u64 + 1);
            if found > u64::from(declared) && !growing {
                return Err(ReadError::format(at(record_at), Rule::TooManyThreads { declared, found }));
            }
            let capacity = threads.capacity();
            threads
                .create(slot, p.thread_id, p.interpreter_id, meta.header.start_time_us)
                .map_err(|resource| ReadError::Capacity { position: at(record_at), resource, capacity })?
        }
    };
    let Some(encoding) = Encoding::from_byte(p.encoding) else {
        return Err(ReadError::format(at(record_at + 12), Rule::UnknownEncoding { encoding: p.encoding }));
    };
    Ok((thread, encoding))
}
