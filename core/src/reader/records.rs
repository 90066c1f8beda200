//! Records (spec sections 5 and 9): the bytes of one record, held in the window or streamed
//! through it, the samples and REPEAT runs they become, and the record rules written once
//! over both.

use super::*;

/// The delta bytes of a word of two-byte REPEAT entries (delta, status, …): the even bytes,
/// each a 16-bit lane.
const DELTAS: u64 = 0x00ff_00ff_00ff_00ff;

/// The sum of a word's four 16-bit lanes, by one multiply (the lanes' sum must fit 16 bits).
#[inline(always)]
fn sum_of_lanes(lanes: u64) -> u64 {
    lanes.wrapping_mul(0x0001_0001_0001_0001) >> 48
}

/// The sum of the deltas of eight two-byte entries (the even bytes, each below 128): the
/// two words' delta bytes added lane by lane (at most 254 a lane), then the lanes summed.
#[inline(always)]
fn sum_of_deltas(entries: [u8; 16]) -> u64 {
    sum_of_lanes((block_word(&entries, 0) & DELTAS) + (block_word(&entries, 1) & DELTAS))
}

/// Bytes handled per block by the word-at-a-time checks: eight words.
const BLOCK: usize = 64;

/// A block of 0xff bytes and a block of zeros: its 64-byte windows are the masks that keep
/// a block's first bytes ([`first_bytes`]).
const MASKS: [u8; 2 * BLOCK] = {
    let mut m = [0u8; 2 * BLOCK];
    let mut i = 0;
    while i < BLOCK {
        m[i] = 0xff;
        i += 1;
    }
    m
};

/// The mask keeping a block's first `n` ≤ 64 bytes.
#[inline(always)]
fn first_bytes(n: usize) -> &'static [u8] {
    &MASKS[BLOCK - n..2 * BLOCK - n]
}

/// Word `k` of a block.
#[inline(always)]
fn block_word(block: &[u8], k: usize) -> u64 {
    let mut c = [0u8; 8];
    c.copy_from_slice(&block[8 * k..8 * k + 8]);
    u64::from_le_bytes(c)
}

/// Over the bytes of a 64-byte block that `mask` keeps, read as REPEAT entries of two bytes:
/// the continuation bits of the delta bytes (zero if each delta is one byte) and the sum of
/// the deltas.
#[inline(always)]
fn two_byte_entries_block(block: &[u8], mask: &[u8]) -> (u64, u64) {
    const CONTINUED: u64 = 0x0080_0080_0080_0080;
    // Two words at a time into two accumulators each, which the compiler keeps in one
    // vector register where the target has them.
    let (mut continued, mut lanes) = ([0u64; 2], [0u64; 2]);
    for k in 0..BLOCK / 16 {
        for j in 0..2 {
            let w = block_word(block, 2 * k + j) & block_word(mask, 2 * k + j);
            continued[j] |= w & CONTINUED;
            // Each 16-bit lane sums four bytes (at most 1020): a set continuation bit makes
            // the sum meaningless, and then it is not used.
            lanes[j] += w & DELTAS;
        }
    }
    let lanes = lanes[0] + lanes[1];
    (continued[0] | continued[1], sum_of_lanes(lanes))
}

/// Continuation bits of four REPEAT entries of three bytes (a two-byte delta and the status):
/// set in each entry's first byte, clear in its second.
pub(super) const THREE_BYTE_CONTINUED: u128 = 0x80 | 0x80 << 24 | 0x80 << 48 | 0x80 << 72;
pub(super) const THREE_BYTE_ENDED: u128 = THREE_BYTE_CONTINUED << 8;

/// Four REPEAT entries `(delta, status)` if `bytes` starts with four of three bytes each:
/// sampling intervals of 128 µs to 16 ms give two-byte deltas, so this is what real runs
/// are made of. One 16-byte load, a check of the continuation bits, fixed shifts.
#[inline(always)]
pub(super) fn four_three_byte_entries(bytes: &[u8]) -> Option<[(u64, u8); 4]> {
    let mut c = [0u8; 16];
    c.copy_from_slice(bytes.get(..16)?);
    let x = u128::from_le_bytes(c);
    if x & THREE_BYTE_CONTINUED != THREE_BYTE_CONTINUED || x & THREE_BYTE_ENDED != 0 {
        return None;
    }
    Some(core::array::from_fn(|k| {
        let e = (x >> (24 * k)) as u32;
        (u64::from(e & 0x7f) | u64::from((e >> 8) & 0x7f) << 7, (e >> 16) as u8)
    }))
}

/// Continuation bits of eight REPEAT entries of two bytes (a one-byte delta and the status):
/// the deltas', each clear.
pub(super) const TWO_BYTE_CONTINUED: u128 = 0x0080_0080_0080_0080_0080_0080_0080_0080;

/// The 16 bytes of eight REPEAT entries (delta, status, delta, status, …) if `bytes` starts
/// with eight of two bytes each: intervals under 128 µs (8 kHz and faster) give one-byte
/// deltas, so a fast sampler's runs are made of these. One 16-byte load and one check of the
/// continuation bits.
#[inline(always)]
pub(super) fn eight_two_byte_entries(bytes: &[u8]) -> Option<[u8; 16]> {
    let c: [u8; 16] = bytes.get(..16)?.try_into().ok()?;
    (u128::from_le_bytes(c) & TWO_BYTE_CONTINUED == 0).then_some(c)
}

/// Two REPEAT entries and their length in bytes if `bytes` starts with two whose deltas take
/// one or two bytes: decoded from one 8-byte word with shifts and masks, without a branch on
/// the lengths (which the data decides, so they predict badly).
#[inline(always)]
pub(super) fn two_short_entries(bytes: &[u8]) -> Option<([(u64, u8); 2], usize)> {
    let mut c = [0u8; 8];
    c.copy_from_slice(bytes.get(..8)?);
    let w = u64::from_le_bytes(c);
    let two_a = (w >> 7) & 1;
    let w_b = w >> (8 * (2 + two_a));
    let two_b = (w_b >> 7) & 1;
    if two_a & (w >> 15) != 0 || two_b & (w_b >> 15) != 0 {
        return None;
    }
    let entry = |w: u64, two: u64| ((w & 0x7f) | (((w >> 8) & 0x7f) * two) << 7, (w >> (8 * (1 + two))) as u8);
    Some(([entry(w, two_a), entry(w_b, two_b)], (4 + two_a + two_b) as usize))
}

/// Whether the `len` bytes at `at` in `bytes` are all one-byte frame indices (below 0x80)
/// below `limit`. Frame tables of real profiles put the frames met first, the hot ones,
/// first, so most records list only such indices. Up to 64 are checked in one pass
/// ([`short_run_below`]) where `bytes` has 64 from `at`; longer runs 16 bytes at a time, a
/// run's last 16 bytes overlapping the ones before; a run shorter than 16 without 64 bytes
/// after it (near the window's end) byte by byte.
#[inline(always)]
pub(super) fn one_byte_indices_below(bytes: &[u8], at: usize, len: usize, limit: u32) -> bool {
    let add = ONES * u64::from(0x80 - limit.min(0x80));
    if len <= SHORT_RUN {
        if let Some(window) = bytes.get(at..at + SHORT_RUN) {
            return short_run_below(window, len, add);
        }
        if len < 16 {
            return bytes[at..at + len].iter().all(|&b| b < 0x80 && u32::from(b) < limit);
        }
    }
    let sixteen = |from: usize| {
        let run = &bytes[from..from + 16];
        at_or_above(block_word(run, 0), add) | at_or_above(block_word(run, 1), add)
    };
    let mut bad = 0;
    let mut off = 0;
    while off + 16 < len {
        bad |= sixteen(at + off);
        off += 16;
    }
    bad | sixteen(at + len - 16) == 0
}

/// The high bit of each byte of `x`, read as eight one-byte frame indices, that is not an
/// index below the limit `add` stands for (`0x80 - limit` in each byte, 0 for a limit of 0x80
/// or more): set where the byte is 0x80 or more, or reaches 0x80 when `add` is added. With
/// every high bit clear no byte carries into the next; with one set, `x` reports it, whatever
/// the sum (which may then carry into the bytes after it, and out of the word).
#[inline(always)]
fn at_or_above(x: u64, add: u64) -> u64 {
    (x | x.wrapping_add(add)) & HIGH
}

const HIGH: u64 = u64::from_le_bytes([0x80; 8]);
const ONES: u64 = u64::from_le_bytes([1; 8]);

/// Runs up to this long are checked in one pass, with one branch (at most 32 or more) where a
/// branch per 16 bytes would follow a length that varies from record to record (real records
/// push 0 to 100 frames, most fewer than 64).
const SHORT_RUN: usize = BLOCK;

/// [`one_byte_indices_below`] for a run of `len` ≤ [`SHORT_RUN`] at the start of `window`
/// (which is that long): the four or eight words that hold the run read whole, the bytes
/// past the run masked off after `add` is added (a carry only runs on past the run).
#[inline(always)]
fn short_run_below(window: &[u8], len: usize, add: u64) -> bool {
    let mask = first_bytes(len);
    let mut bad = 0;
    // Half a block where that holds the run: most records of slower samplers push fewer
    // than 32 frames, and the words past it cost more than the branch.
    let words = if len <= BLOCK / 2 { BLOCK / 16 } else { BLOCK / 8 };
    for k in 0..words {
        bad |= at_or_above(block_word(window, k), add) & block_word(mask, k);
    }
    bad == 0
}

/// The largest record a reader accepts: the prefix, a 10-byte delta, the status, two 10-byte
/// counts and 256 indices of 10 bytes each (CPython reads non-minimal varints).
pub(super) const LARGEST_RECORD: usize =
    PREFIX_LEN + MAX_VARINT_LEN + 1 + 2 * MAX_VARINT_LEN + MAX_STACK_DEPTH * MAX_VARINT_LEN;

/// Where a record's frame indices go: the thread's stack slots, or, for a check that keeps
/// no stacks ([`Reader::check_to_end`]), only their count.
pub(super) trait Indices {
    fn count(&self) -> usize;
    fn set(&mut self, k: usize, index: u32);
    /// Sets all of them from one-byte indices (`run` is `count` long).
    fn set_bytes(&mut self, run: &[u8]);
}

impl Indices for [u32] {
    #[inline(always)]
    fn count(&self) -> usize {
        self.len()
    }

    #[inline(always)]
    fn set(&mut self, k: usize, index: u32) {
        self[k] = index;
    }

    #[inline(always)]
    fn set_bytes(&mut self, run: &[u8]) {
        for (slot, &b) in self.iter_mut().zip(run) {
            *slot = u32::from(b);
        }
    }
}

/// Indices checked and dropped.
pub(super) struct Dropped(pub(super) usize);

impl Indices for Dropped {
    #[inline(always)]
    fn count(&self) -> usize {
        self.0
    }

    #[inline(always)]
    fn set(&mut self, _: usize, _: u32) {}

    #[inline(always)]
    fn set_bytes(&mut self, _: &[u8]) {}
}

/// The bytes of one record after its prefix, seen either in the window, which holds all of
/// it (or all the region has left), or through the window with refills, for windows smaller
/// than the largest record. The record rules are written once over this.
pub(super) trait RecordBytes<E> {
    /// Stream offset of the next byte.
    fn offset(&self) -> u64;
    fn varint(&mut self) -> Res<Result<u64, VarintError>, E>;
    fn byte(&mut self) -> Res<Option<u8>, E>;

    #[inline]
    fn varint32(&mut self) -> Res<Result<u32, VarintError>, E> {
        Ok(self.varint()?.and_then(|v| u32::try_from(v).map_err(|_| VarintError::Exceeds32Bits)))
    }

    /// One frame index (spec 2: a `uvarint32`), checked against the tables as CPython checks
    /// it, positioned by `at`.
    #[inline(always)]
    fn frame_index(&mut self, tables: &Tables<'_>, at: &impl Fn(u64) -> Position) -> Res<u32, E> {
        let pos = self.offset();
        let index = self.varint32()?.map_err(|_| ReadError::format(at(pos), Rule::MalformedStackVarint))?;
        tables.check_frame(index).map_err(|rule| ReadError::format(at(pos), rule))?;
        Ok(index)
    }

    /// Fills `slots` with frame indices ([`Self::frame_index`] each).
    #[inline]
    fn frame_indices<S: Indices + ?Sized>(
        &mut self,
        slots: &mut S,
        tables: &Tables<'_>,
        at: &impl Fn(u64) -> Position,
    ) -> Res<(), E> {
        for k in 0..slots.count() {
            slots.set(k, self.frame_index(tables, at)?);
        }
        Ok(())
    }
}

/// A record held in the window: decoding needs no bounds check beyond the slice's own.
pub(super) struct Held<'b> {
    pub(super) bytes: &'b [u8],
    pub(super) used: usize,
    pub(super) base: u64,
}

impl<E> RecordBytes<E> for Held<'_> {
    #[inline]
    fn offset(&self) -> u64 {
        self.base + self.used as u64
    }

    #[inline]
    fn varint(&mut self) -> Res<Result<u64, VarintError>, E> {
        let rest = self.bytes.get(self.used..).unwrap_or_default();
        Ok(varint::decode_u64(rest).map(|(v, n)| {
            self.used += n;
            v
        }))
    }

    #[inline]
    fn byte(&mut self) -> Res<Option<u8>, E> {
        let b = self.bytes.get(self.used).copied();
        self.used += usize::from(b.is_some());
        Ok(b)
    }

    /// The common case in a tight loop: a one- or two-byte index below the frame count of
    /// tables whose frames are all valid. Anything else (a longer or malformed varint, an
    /// index out of range, a table with a bad frame) goes through the general path for that
    /// one index, which reports the error.
    #[inline(always)]
    fn frame_indices<S: Indices + ?Sized>(
        &mut self,
        slots: &mut S,
        tables: &Tables<'_>,
        at: &impl Fn(u64) -> Position,
    ) -> Res<(), E> {
        let limit = tables.trusted_index_limit();
        let bytes = self.bytes;
        // Most records list one-byte indices only (see `one_byte_indices_below`): checked as
        // words, then copied out.
        if let Some(run) = bytes.get(self.used..self.used + slots.count()) {
            if one_byte_indices_below(bytes, self.used, run.len(), limit) {
                slots.set_bytes(run);
                self.used += run.len();
                return Ok(());
            }
        }
        let mut used = self.used;
        for k in 0..slots.count() {
            match bytes.get(used..used + 2) {
                Some(&[b0, _]) if b0 < 0x80 && u32::from(b0) < limit => {
                    slots.set(k, u32::from(b0));
                    used += 1;
                    continue;
                }
                Some(&[b0, b1]) if b1 < 0x80 => {
                    let index = u32::from(b0 & 0x7f) | u32::from(b1) << 7;
                    if index < limit {
                        slots.set(k, index);
                        used += 2;
                        continue;
                    }
                }
                _ => {}
            }
            self.used = used;
            slots.set(k, RecordBytes::<E>::frame_index(self, tables, at)?);
            used = self.used;
        }
        self.used = used;
        Ok(())
    }
}

/// A record read through a window smaller than the largest record.
pub(super) struct Streamed<'a, 's, R: Read + Seek> {
    pub(super) input: &'a mut Input<'s, R>,
}

impl<R: Read + Seek> RecordBytes<R::Error> for Streamed<'_, '_, R> {
    fn offset(&self) -> u64 {
        self.input.window.pos
    }

    fn varint(&mut self) -> Res<Result<u64, VarintError>, R::Error> {
        self.input.ensure(MAX_VARINT_LEN)?;
        let w = &mut self.input.window;
        Ok(varint::decode_u64(w.available()).map(|(v, n)| {
            w.consume(n);
            v
        }))
    }

    fn byte(&mut self) -> Res<Option<u8>, R::Error> {
        if !self.input.ensure(1)? {
            return Ok(None);
        }
        let w = &mut self.input.window;
        let b = w.available().first().copied();
        w.consume(usize::from(b.is_some()));
        Ok(b)
    }
}

/// One thread sample, in file order.
#[derive(Clone, Copy)]
pub struct Sample<'r> {
    /// Timestamp, µs (deltas summed modulo 2^64 from the header's start time).
    pub timestamp_us: u64,
    /// Interpreter id.
    pub interpreter_id: u32,
    /// Thread id.
    pub thread_id: u64,
    /// Status byte (bit flags, spec 2.1).
    pub status: u8,
    /// Frame ids, innermost first.
    pub stack: &'r [u32],
    /// Kind of record the sample came from.
    pub encoding: Encoding,
    /// Ordinal of that record in the sample region (0-based). Samples of one REPEAT record
    /// share it, which is how CPython's replay batches them (spec 9.4).
    pub record: u64,
    pub(super) tables: &'r Tables<'r>,
}

impl<'r> Sample<'r> {
    /// The stack resolved to names and locations, innermost first.
    pub fn frames(&self) -> impl Iterator<Item = ResolvedFrame<'r>> + 'r {
        let tables = self.tables;
        self.stack.iter().filter_map(move |&id| tables.frame(id))
    }

    /// The tables the ids refer to.
    pub fn tables(&self) -> &'r Tables<'r> {
        self.tables
    }
}

impl core::fmt::Debug for Sample<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Sample")
            .field("timestamp_us", &self.timestamp_us)
            .field("interpreter_id", &self.interpreter_id)
            .field("thread_id", &self.thread_id)
            .field("status", &self.status)
            .field("stack", &self.stack)
            .field("encoding", &self.encoding)
            .field("record", &self.record)
            .finish()
    }
}

/// One record of the sample region, as [`Reader::next_item`] yields it.
pub enum Record<'r, 's, R: Read + Seek> {
    /// A FULL, SUFFIX or POP_PUSH record: one sample with a new stack.
    Sample(Sample<'r>),
    /// A REPEAT record: samples of one thread with its current stack, whose timestamps and
    /// statuses the [`Run`] decodes on demand.
    Repeat(Run<'r, 's, R>),
}

/// The samples of one REPEAT record: one thread, one stack, `count` (timestamp, status)
/// entries decoded one by one as they are asked for. Entries left unread when the run is
/// dropped are still decoded and checked (and the thread's clock advanced) by the reader's
/// next call; [`Reader::next_sample`] would yield them one by one.
pub struct Run<'r, 's, R: Read + Seek> {
    /// Interpreter id.
    pub interpreter_id: u32,
    /// Thread id.
    pub thread_id: u64,
    /// The stack of every sample of the run: frame ids, innermost first.
    pub stack: &'r [u32],
    /// Samples in the run, as the record declares.
    pub count: u32,
    /// Ordinal of the record in the sample region (0-based).
    pub record: u64,
    pub(super) tables: &'r Tables<'r>,
    /// The run's thread, whose `prev_ts` each entry advances.
    pub(super) entry: &'r mut crate::storage::ReaderThread,
    pub(super) stream: &'r mut Stream<'s, R>,
}

/// One sample of a [`Run`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunEntry {
    /// Timestamp, µs.
    pub timestamp_us: u64,
    /// Status byte.
    pub status: u8,
}

impl<'r, R: Read + Seek> Run<'r, '_, R> {
    /// Entries not read yet.
    pub fn remaining(&self) -> u32 {
        self.stream.run.remaining
    }

    /// The next sample of the run, `Ok(None)` after the last. After an error the reader's
    /// stream is over.
    #[inline]
    pub fn next_entry(&mut self) -> Res<Option<RunEntry>, R::Error> {
        let mut next = None;
        match self.stream.entries(1, self.entry, |timestamp_us, status| next = Some(RunEntry { timestamp_us, status }))
        {
            Ok(_) => Ok(next),
            Err(e) => Err(self.stream.fail(e)),
        }
    }

    /// Decodes the next entries into `out`, as many as fit and the run has; returns how many
    /// (0 after the last). Faster than [`Self::next_entry`] for long runs.
    pub fn read_entries(&mut self, out: &mut [RunEntry]) -> Res<usize, R::Error> {
        let max = u32::try_from(out.len()).unwrap_or(u32::MAX);
        let mut slots = out.iter_mut();
        let filled = self.stream.entries(max, self.entry, |timestamp_us, status| {
            if let Some(slot) = slots.next() {
                *slot = RunEntry { timestamp_us, status };
            }
        });
        filled.map(|n| n as usize).map_err(|e| self.stream.fail(e))
    }

    /// Decodes and checks the entries left; returns how many there were.
    pub fn skip(&mut self) -> Res<u32, R::Error> {
        self.stream.skip_entries(self.entry).map_err(|e| self.stream.fail(e))
    }

    /// The stack resolved to names and locations, innermost first.
    pub fn frames(&self) -> impl Iterator<Item = ResolvedFrame<'r>> + 'r {
        let tables = self.tables;
        self.stack.iter().filter_map(move |&id| tables.frame(id))
    }

    /// The tables the ids refer to.
    pub fn tables(&self) -> &'r Tables<'r> {
        self.tables
    }
}

impl<R: Read + Seek> Iterator for Run<'_, '_, R> {
    type Item = Res<RunEntry, R::Error>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_entry().transpose()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.remaining() as usize;
        (0, Some(n))
    }
}

impl<R: Read + Seek> core::fmt::Debug for Run<'_, '_, R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Run")
            .field("interpreter_id", &self.interpreter_id)
            .field("thread_id", &self.thread_id)
            .field("stack", &self.stack)
            .field("count", &self.count)
            .field("remaining", &self.remaining())
            .field("record", &self.record)
            .finish()
    }
}

/// The REPEAT record being read: its thread and the entries left (0: none).
#[derive(Debug, Clone, Copy)]
pub(super) struct Pending {
    pub(super) thread: usize,
    pub(super) remaining: u32,
}

/// Decoding state of the sample region, apart from the threads.
pub(super) struct Stream<'s, R: Read + Seek> {
    pub(super) input: Input<'s, R>,
    pub(super) run: Pending,
    /// The region ended, or an error ended it.
    pub(super) done: bool,
    /// The file is still being written: the region's end is only where it ends now
    /// ([`Reader::open_growing`]).
    pub(super) growing: bool,
    /// Where the sample region ends, where its length is known: a raw file's, not a
    /// compressed one's nor one still being written (set once at open, read per record).
    pub(super) region_end: Option<u64>,
    pub(super) decoded: u64,
    pub(super) counts: RecordCounts,
}

/// What a record decoded to.
pub(super) enum Decoded {
    /// A sample of `thread` with its new stack.
    Sample { thread: usize, status: u8, encoding: Encoding },
    /// A REPEAT record of `thread` with `count` entries to read.
    Run { thread: usize, count: u32 },
    /// The region is over and its sample count checked.
    End,
}

/// The body of a record after its prefix.
pub(super) enum Body {
    /// A stack record, its thread's stack and clock updated.
    Stack {
        status: u8,
    },
    Run {
        count: u32,
    },
}

impl<R: Read + Seek> Stream<'_, R> {
    /// Ends the stream on `e` and hands it back.
    #[cold]
    pub(super) fn fail(&mut self, e: ReadError<R::Error>) -> ReadError<R::Error> {
        self.done = true;
        self.run.remaining = 0;
        e
    }

    /// Decodes up to `max` entries of the pending run (fewer if it has fewer left), adding
    /// each delta to the thread's `prev_ts` and handing each timestamp and status to `each`; returns how
    /// many. Entries are decoded straight from the window in a tight loop while it holds at
    /// least the longest entry (11 bytes), so there is one length check per entry and a
    /// refill only per window.
    #[inline]
    pub(super) fn entries(
        &mut self,
        max: u32,
        thread: &mut crate::storage::ReaderThread,
        each: impl FnMut(u64, u8),
    ) -> Res<u32, R::Error> {
        self.entries_as::<true>(max, thread, each)
    }

    /// Decodes and checks the entries left of the pending run, advancing the thread's clock,
    /// for no one: as [`Self::entries`] without handing each out, so that eight one-byte
    /// deltas are summed at once.
    #[inline]
    pub(super) fn skip_entries(&mut self, thread: &mut crate::storage::ReaderThread) -> Res<u32, R::Error> {
        self.entries_as::<false>(u32::MAX, thread, |_, _| {})
    }

    /// [`Self::entries`], handing each entry to `each` (`EACH`) or only counting it.
    #[inline(always)]
    fn entries_as<const EACH: bool>(
        &mut self,
        max: u32,
        thread: &mut crate::storage::ReaderThread,
        mut each: impl FnMut(u64, u8),
    ) -> Res<u32, R::Error> {
        let want = max.min(self.run.remaining);
        let mut done = 0;
        let mut ts = thread.prev_ts;
        let result = loop {
            if done == want {
                break Ok(());
            }
            let input = &mut self.input;
            if input.window.end - input.window.start < MAX_RLE_ENTRY_LEN {
                if let Err(e) = input.fill(MAX_RLE_ENTRY_LEN) {
                    break Err(e);
                }
            }
            let at = input.window.pos;
            let bytes = input.window.available();
            let mut used = 0;
            let mut failed = None;
            // Fewer than 11 bytes after a refill means the region ends within them: one
            // entry, whose varint or status may then be cut off.
            let short = bytes.len() < MAX_RLE_ENTRY_LEN;
            while done < want {
                let rest = bytes.get(used..).unwrap_or_default();
                if rest.len() < MAX_RLE_ENTRY_LEN && !(short && used == 0) {
                    break;
                }
                // A run's deltas mostly take as many bytes as the one before: the first
                // byte picks the fast path to try, one branch that predicts well.
                let one_byte_delta = rest.first().is_some_and(|&b| b < 0x80);
                if !EACH && one_byte_delta {
                    if let Some(block) = rest.get(..BLOCK) {
                        // Up to 32 entries at once: where the run ends within them, the bytes
                        // after it are masked off rather than branched on.
                        let n = (want - done).min(32) as usize;
                        let (continued, sum) = two_byte_entries_block(block, first_bytes(2 * n));
                        if continued == 0 {
                            ts = ts.wrapping_add(sum);
                            used += 2 * n;
                            done += n as u32;
                            continue;
                        }
                        // A longer delta among them: the entries before it one by one (at
                        // least the first; the loop stops at that delta, within the block);
                        // the next turn reads it.
                        let mut k = 0;
                        while block[2 * k] < 0x80 {
                            ts = ts.wrapping_add(u64::from(block[2 * k]));
                            k += 1;
                        }
                        used += 2 * k;
                        done += k as u32;
                        continue;
                    }
                }
                if one_byte_delta && want - done >= 8 {
                    if let Some(eight) = eight_two_byte_entries(rest) {
                        if EACH {
                            for entry in eight.chunks_exact(2) {
                                ts = ts.wrapping_add(u64::from(entry[0]));
                                each(ts, entry[1]);
                            }
                        } else {
                            ts = ts.wrapping_add(sum_of_deltas(eight));
                        }
                        used += 16;
                        done += 8;
                        continue;
                    }
                }
                if !one_byte_delta && want - done >= 4 {
                    if let Some(four) = four_three_byte_entries(rest) {
                        for (delta, status) in four {
                            ts = ts.wrapping_add(delta);
                            each(ts, status);
                        }
                        used += 12;
                        done += 4;
                        continue;
                    }
                }
                if want - done >= 2 {
                    if let Some((two, len)) = two_short_entries(rest) {
                        for (delta, status) in two {
                            ts = ts.wrapping_add(delta);
                            each(ts, status);
                        }
                        used += len;
                        done += 2;
                        continue;
                    }
                }
                let Ok((delta, n)) = varint::decode_u64(rest) else {
                    failed = Some(ReadError::format(input.at(at + used as u64), Rule::MalformedRleDelta));
                    break;
                };
                let Some(&status) = rest.get(n) else {
                    failed = Some(ReadError::format(input.at(at + (used + n) as u64), Rule::TruncatedRle));
                    break;
                };
                ts = ts.wrapping_add(delta);
                each(ts, status);
                used += n + 1;
                done += 1;
            }
            input.window.consume(used);
            if let Some(e) = failed {
                break Err(e);
            }
        };
        thread.prev_ts = ts;
        self.run.remaining -= done;
        self.decoded += u64::from(done);
        result.map(|()| done)
    }
}

/// Reads a record body through `b`: a REPEAT count, or a stack record into the thread's
/// stack, or without `BUILD` into its depth alone (spec 2 and the checks of 9.3, CPython's
/// quirks included). `region_end` is where the sample region ends, where that is known.
#[inline(always)]
pub(super) fn record_body<const BUILD: bool, E, B: RecordBytes<E>>(
    b: &mut B,
    at: impl Fn(u64) -> Position,
    region_end: Option<u64>,
    tables: &Tables<'_>,
    threads: &mut ReaderThreads<'_>,
    thread: usize,
    encoding: Encoding,
) -> Res<Body, E> {
    if encoding == Encoding::Repeat {
        let pos = b.offset();
        let count = b.varint32()?.map_err(|_| ReadError::format(at(pos), Rule::MalformedRleCount))?;
        // Where the region's length is known, reject counts it cannot hold, as CPython.
        if let Some(end) = region_end {
            let left = end.saturating_sub(b.offset());
            if u64::from(count) > left / 2 {
                return Err(ReadError::format(at(pos), Rule::RleCountTooLarge { count, max: left / 2 }));
            }
        }
        return Ok(Body::Run { count });
    }
    let pos = b.offset();
    let delta = b.varint()?.map_err(|_| ReadError::format(at(pos), Rule::MalformedDelta))?;
    let status = b.byte()?.ok_or_else(|| ReadError::format(at(b.offset()), Rule::TruncatedStatus))?;
    let count = |b: &mut B| -> Res<u32, E> {
        let pos = b.offset();
        b.varint32()?.map_err(|_| ReadError::format(at(pos), Rule::MalformedStackVarint))
    };
    let first = count(b)?;
    let second = if encoding == Encoding::Full { 0 } else { count(b)? };
    let depth = threads.depth(thread);
    let counts_at = at(b.offset());
    let too_deep = |total: u64| ReadError::format(counts_at, Rule::FinalStackTooDeep { depth: total });
    // Which old frames survive, and how many new ones follow.
    let (keep, push) = match encoding {
        Encoding::Full => {
            if first as usize > MAX_STACK_DEPTH {
                return Err(ReadError::format(counts_at, Rule::StackTooDeep { depth: first }));
            }
            (Keep::Bottom(0), first as usize)
        }
        Encoding::Suffix => {
            let (shared, push) = (first as usize, second as usize);
            if shared > depth {
                let rule = Rule::SharedExceedsDepth { shared: first, depth: depth as u32 };
                return Err(ReadError::format(counts_at, rule));
            }
            let total = shared as u64 + u64::from(second);
            if total > MAX_STACK_DEPTH as u64 {
                return Err(too_deep(total));
            }
            // CPython quirk: with nothing pushed the innermost `shared` frames stay.
            (if push == 0 { Keep::Innermost(shared) } else { Keep::Bottom(shared) }, push)
        }
        Encoding::PopPush | Encoding::Repeat => {
            // CPython quirk: popping more than the depth leaves an empty stack.
            let kept = depth.saturating_sub(first as usize);
            let total = kept as u64 + u64::from(second);
            if total > MAX_STACK_DEPTH as u64 {
                return Err(too_deep(total));
            }
            (Keep::Bottom(kept), second as usize)
        }
    };
    let capacity = threads.capacity();
    // The thread's clock advances here, before its frames are checked: after an error the
    // stream is over, so no later record sees it.
    if BUILD {
        let slots = threads.reshape(thread, keep, push, delta).map_err(|resource| ReadError::Capacity {
            position: counts_at,
            resource,
            capacity,
        })?;
        b.frame_indices(slots, tables, &at)?;
    } else {
        threads.set_depth(thread, keep, push, delta);
        b.frame_indices(&mut Dropped(push), tables, &at)?;
    }
    Ok(Body::Stack { status })
}

/// A stack record's body as [`record_body`] without `BUILD` reads it, where its delta takes
/// one or two bytes (intervals under 16 ms), its counts one byte each and its frame indices
/// one byte each below `limit` (what most records of real files are): `(bytes used, delta,
/// frames kept, frames pushed)`, the fields read from one word and the indices checked by
/// [`one_byte_indices_below`] in one pass. `None` for anything else,
/// which `record_body` then reads, reporting the rule a record breaks. `bytes` starts after
/// the prefix and holds the largest record's body.
#[inline(always)]
pub(super) fn short_stack_body(
    bytes: &[u8],
    encoding: Encoding,
    depth: usize,
    limit: u32,
) -> Option<(usize, u64, usize, usize)> {
    let mut c = [0u8; 8];
    c.copy_from_slice(bytes.get(..8)?);
    let x = u64::from_le_bytes(c);
    // 1 where the delta takes two bytes (the first's continuation bit), and then its second
    // byte's bits above the first's seven.
    let two = (x >> 7) & 1;
    let delta = (x & 0x7f) | ((x >> 1) & 0x3f80 & 0u64.wrapping_sub(two));
    // The status (any byte), then the counts.
    let w = (x >> (8 + 8 * two)) as u32;
    // All ones for a FULL record, for a SUFFIX one: the encoding chooses by masks rather than
    // branches, which the data would pick record by record and so predict badly.
    let full = 0usize.wrapping_sub(usize::from(encoding == Encoding::Full));
    let suffix = 0usize.wrapping_sub(usize::from(encoding == Encoding::Suffix));
    // The counts' continuation bits: FULL has one count, the byte after it a frame index.
    let continued = 0x0080_8000 & !(full as u32 & 0x0080_0000);
    let first = (w >> 8) as usize & 0x7f;
    let second = (w >> 16) as usize & 0x7f;
    let push = (first & full) | (second & !full);
    let kept = !full & ((first & suffix) | (depth.saturating_sub(first) & !suffix));
    let broken = (two & (x >> 15) != 0)
        | (w & continued != 0)
        | ((suffix != 0) & (first > depth))
        | (kept + push > MAX_STACK_DEPTH);
    if broken {
        return None;
    }
    let header = 4 + two as usize - (full & 1);
    if !one_byte_indices_below(bytes, header, push, limit) {
        return None;
    }
    Some((header + push, delta, kept, push))
}

#[cfg(test)]
mod tests {
    use super::{one_byte_indices_below, short_stack_body};
    use crate::records::Encoding;

    /// The one-word reading of a stack record against bodies written out by hand: deltas of
    /// one and two bytes, each encoding, and each shape it leaves to `record_body`.
    #[test]
    fn short_stack_records_are_read_as_written() {
        let read = |body: &[u8], encoding, depth, limit| {
            let mut bytes = [0u8; 96];
            bytes[..body.len()].copy_from_slice(body);
            short_stack_body(&bytes, encoding, depth, limit)
        };
        // (bytes used, delta, kept, pushed)
        assert_eq!(read(&[20, 7, 3, 1, 2, 3], Encoding::Full, 9, 10), Some((6, 20, 0, 3)));
        assert_eq!(read(&[0xe8, 0x07, 0, 2, 5, 6], Encoding::Full, 0, 10), Some((6, 1000, 0, 2)));
        assert_eq!(read(&[0x98, 0x75, 0x81, 4, 2, 7, 8], Encoding::Suffix, 4, 10), Some((7, 15000, 4, 2)));
        assert_eq!(read(&[5, 0, 6, 1, 9], Encoding::PopPush, 4, 10), Some((5, 5, 0, 1)));
        assert_eq!(read(&[5, 0, 1, 0], Encoding::PopPush, 4, 10), Some((4, 5, 3, 0)));
        // FULL has one count: the byte after it is not one, whatever its high bit.
        assert_eq!(read(&[20, 0, 0, 0x85], Encoding::Full, 3, 10), Some((3, 20, 0, 0)));
        // Left to `record_body`: a three-byte delta, a two-byte count, SUFFIX sharing more than
        // the depth, more than 256 frames, an index at the limit, a two-byte index.
        assert_eq!(read(&[0xa0, 0x8d, 0x06, 0, 1, 1], Encoding::Full, 0, 10), None);
        assert_eq!(read(&[20, 0, 0xc8, 0x01], Encoding::Full, 0, 10), None);
        assert_eq!(read(&[20, 0, 5, 0], Encoding::Suffix, 4, 10), None);
        assert_eq!(read(&[20, 0, 0, 100], Encoding::PopPush, 200, 10), None);
        assert_eq!(read(&[20, 0, 2, 3, 10], Encoding::Full, 0, 10), None);
        assert_eq!(read(&[20, 0, 1, 0x85, 0x01], Encoding::Full, 0, 1000), None);
    }

    /// The word-at-a-time check agrees with the plain one on every length up to three words,
    /// for limits below, at and above 0x80, with bytes just below and at the limit, high bytes
    /// and bytes after the run that must not count.
    #[test]
    fn one_byte_indices_are_checked_as_byte_by_byte() {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for limit in [0, 1, 2, 5, 64, 127, 128, 129, 200, 1 << 20] {
            for len in 0..=140 {
                for trial in 0..100 {
                    let mut bytes = [0u8; 160];
                    for b in bytes.iter_mut() {
                        let r = next();
                        *b = match r % 4 {
                            0 => (r >> 8) as u8,
                            1 => (limit.min(0x80) as u8).wrapping_sub(1 + (r >> 8) as u8 % 2),
                            _ => (r >> 8) as u8 % limit.clamp(1, 0x80) as u8,
                        };
                    }
                    let at = (next() % 16) as usize;
                    // Short slices take the byte-by-byte branch for short runs.
                    let end = if trial % 3 == 0 { at + len } else { bytes.len() };
                    let run = &bytes[at..at + len];
                    let want = run.iter().all(|&b| b < 0x80 && u32::from(b) < limit);
                    assert_eq!(one_byte_indices_below(&bytes[..end], at, len, limit), want, "{run:?} below {limit}");
                }
            }
        }
    }
}
