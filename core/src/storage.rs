//! Caller-owned storage: the writer's interners and thread table, the reader's tables.
//!
//! Nothing here allocates. Every table is a slice the caller lends: static arrays on
//! firmware ([`StaticWriterStorage`], [`StaticReaderStorage`], whose capacity rules are
//! checked at compile time), `Vec`s on hosts (`VecWriterStorage`, `VecReaderStorage` behind
//! the `alloc` feature), or any slices through [`WriterBuffers`] and [`ReaderBuffers`].
//! Memory use is therefore a formula of the chosen capacities; `docs/memory.md` gives it.

use crate::records::{max_record_len, CPYTHON_RLE_BUDGET, MAX_RLE_ENTRY_LEN, MAX_STACK_DEPTH};
use crate::tables::FrameEntry;

/// Which caller-provided table ran out of room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Resource {
    /// String-table entries.
    Strings,
    /// Bytes of the string arena.
    StringBytes,
    /// Frame-table entries.
    Frames,
    /// Thread-table entries.
    Threads,
    /// Frame ids of the current or previous stacks (growable storage that could not grow).
    Stacks,
}

/// A set of storage slices that cannot work together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum StorageError {
    /// A hash-slot table must have more slots than its table has entries.
    TooFewSlots(Resource),
    /// `stacks` must hold 256 frame ids per thread entry.
    StacksTooSmall,
    /// `rle` must hold `rle_budget` bytes per thread entry.
    RleTooSmall,
    /// The run budget must fit at least one REPEAT entry (11 bytes).
    RleBudgetTooSmall,
    /// The staging buffer must hold the largest record (see `records::max_record_len`).
    StagingTooSmall,
    /// The reader's window must hold at least `MIN_READ_BUFFER` bytes.
    ReadBufferTooSmall,
    /// The capacities ask for more memory than `usize` can address (32-bit targets).
    CapacityOverflow,
}

impl core::fmt::Display for StorageError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            StorageError::TooFewSlots(r) => write!(f, "hash slots for {r:?} must outnumber the entries"),
            StorageError::StacksTooSmall => f.write_str("stack storage must hold 256 frame ids per thread"),
            StorageError::RleTooSmall => f.write_str("RLE storage must hold rle_budget bytes per thread"),
            StorageError::RleBudgetTooSmall => f.write_str("RLE budget must be at least 11 bytes"),
            StorageError::StagingTooSmall => f.write_str("staging buffer smaller than the largest record"),
            StorageError::ReadBufferTooSmall => f.write_str("read buffer smaller than MIN_READ_BUFFER"),
            StorageError::CapacityOverflow => f.write_str("capacities exceed the address space"),
        }
    }
}

impl core::error::Error for StorageError {}

/// Smallest read window a reader accepts: a record prefix plus a longest varint, with slack.
pub const MIN_READ_BUFFER: usize = 64;

// ---------------------------------------------------------------------------------------
// Hashing and the slot index shared by every interner.

const K: u64 = 0x9e37_79b9_7f4a_7c15;

/// A finalising mix so that nearby keys spread over the whole table.
#[inline]
fn mix(mut x: u64) -> u64 {
    x ^= x >> 32;
    x = x.wrapping_mul(0xd6e8_feb8_6659_fd93);
    x ^= x >> 32;
    x = x.wrapping_mul(0xd6e8_feb8_6659_fd93);
    x ^ (x >> 32)
}

/// Word-at-a-time hash of a byte string, keyed by `seed` (names can come from a hostile file
/// being converted: with a secret seed, colliding names cannot be planned).
#[inline]
fn hash_bytes(seed: u64, bytes: &[u8]) -> u64 {
    let mut h = (bytes.len() as u64).wrapping_mul(K) ^ seed;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K).rotate_left(29);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K).rotate_left(29);
    }
    mix(h)
}

/// Open-addressing index from a hash to an entry held elsewhere: slot value 0 is empty,
/// otherwise entry index + 1. Linear probing; the caller keeps the entry count below the
/// slot count so a probe always ends.
struct SlotIndex<'a> {
    slots: &'a mut [u32],
    /// Key of the hash (see [`WriterStorage::with_seed`]).
    seed: u64,
}

impl<'a> SlotIndex<'a> {
    fn new(slots: &'a mut [u32]) -> Self {
        slots.fill(0);
        SlotIndex { slots, seed: 0 }
    }

    /// Entries this index can hold (one slot always stays empty).
    fn capacity(&self) -> usize {
        self.slots.len().saturating_sub(1).min(u32::MAX as usize - 1)
    }

    /// `Ok(index)` of the entry for which `is_match` holds, or `Err(slot)` where it would go.
    #[inline]
    fn find(&self, hash: u64, is_match: impl FnMut(u32) -> bool) -> Result<u32, usize> {
        slot_find(self.slots, hash, is_match)
    }

    #[inline]
    fn occupy(&mut self, slot: usize, index: u32) {
        self.slots[slot] = index + 1;
    }
}

/// Linear probing over `slots` (0 = empty, otherwise entry index + 1): `Ok(index)` of the
/// entry for which `is_match` holds, or `Err(slot)` where it would go. At least one slot must
/// be empty so that a probe always ends.
#[inline]
fn slot_find(slots: &[u32], hash: u64, mut is_match: impl FnMut(u32) -> bool) -> Result<u32, usize> {
    let len = slots.len();
    // Multiply-shift maps the hash onto any table length, not only powers of two.
    let mut pos = (((hash >> 32) * len as u64) >> 32) as usize;
    loop {
        match slots[pos] {
            0 => return Err(pos),
            stored if is_match(stored - 1) => return Ok(stored - 1),
            _ => pos = if pos + 1 == len { 0 } else { pos + 1 },
        }
    }
}

// ---------------------------------------------------------------------------------------
// Strings.

/// Where a string lives in the arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    start: u32,
    len: u32,
}

impl Span {
    /// An empty span, for initialising storage.
    pub const EMPTY: Span = Span { start: 0, len: 0 };
}

/// Strings in index order, bytes packed in one arena.
pub struct StringTable<'a> {
    arena: &'a mut [u8],
    used: usize,
    spans: &'a mut [Span],
    count: usize,
}

impl<'a> StringTable<'a> {
    fn new(arena: &'a mut [u8], spans: &'a mut [Span]) -> Self {
        StringTable { arena, used: 0, spans, count: 0 }
    }

    /// Number of strings.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when there are no strings.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes of string `index`.
    #[inline]
    pub fn get(&self, index: u32) -> Option<&[u8]> {
        let span = *self.spans[..self.count].get(index as usize)?;
        self.arena.get(span.start as usize..span.start as usize + span.len as usize)
    }

    /// Appends a string of `len` bytes filled by `fill`; its index, or which resource ran out.
    /// The arena offset is a `u32`, so one table holds at most 4 GiB of string bytes.
    pub(crate) fn push_with<E>(
        &mut self,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<Result<u32, Resource>, E> {
        if self.count >= self.spans.len() {
            return Ok(Err(Resource::Strings));
        }
        let arena_limit = self.arena.len().min(u32::MAX as usize);
        if len > arena_limit - self.used {
            return Ok(Err(Resource::StringBytes));
        }
        let start = self.used;
        fill(&mut self.arena[start..start + len])?;
        self.spans[self.count] = Span { start: start as u32, len: len as u32 };
        self.used += len;
        self.count += 1;
        Ok(Ok(self.count as u32 - 1))
    }

    fn push(&mut self, bytes: &[u8]) -> Result<u32, Resource> {
        let r: Result<_, core::convert::Infallible> = self.push_with(bytes.len(), |dst| {
            dst.copy_from_slice(bytes);
            Ok(())
        });
        match r {
            Ok(v) => v,
            Err(never) => match never {},
        }
    }

    /// Strings in index order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        (0..self.count as u32).filter_map(|i| self.get(i))
    }
}

/// The writer's string interner: first-seen order, deduplicated by bytes.
pub(crate) struct StringInterner<'a> {
    table: StringTable<'a>,
    index: SlotIndex<'a>,
}

impl<'a> StringInterner<'a> {
    pub(crate) fn table(&self) -> &StringTable<'a> {
        &self.table
    }

    /// The index of `bytes`, interning it if new.
    #[inline]
    pub(crate) fn intern(&mut self, bytes: &[u8]) -> Result<u32, Resource> {
        let hash = hash_bytes(self.index.seed, bytes);
        let table = &self.table;
        match self.index.find(hash, |i| table.get(i) == Some(bytes)) {
            Ok(i) => Ok(i),
            Err(slot) => {
                if self.table.len() >= self.index.capacity() {
                    return Err(Resource::Strings);
                }
                let i = self.table.push(bytes)?;
                self.index.occupy(slot, i);
                Ok(i)
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Frames.

#[inline]
fn hash_frame(seed: u64, f: &FrameEntry) -> u64 {
    let l = f.location;
    let a = u64::from(f.filename) | (u64::from(f.funcname) << 32);
    let b = u64::from(l.lineno as u32) | (u64::from(l.end_lineno as u32) << 32);
    let c = u64::from(l.col as u32) | (u64::from(l.end_col as u32) << 32);
    let mut h = (a ^ seed).wrapping_mul(K);
    h = (h ^ b).wrapping_mul(K).rotate_left(29);
    h = (h ^ c ^ (u64::from(f.opcode) << 56)).wrapping_mul(K);
    mix(h)
}

/// The writer's frame interner keyed by all seven absolute fields (spec 5.4).
pub(crate) struct FrameInterner<'a> {
    entries: &'a mut [FrameEntry],
    count: usize,
    index: SlotIndex<'a>,
}

impl<'a> FrameInterner<'a> {
    pub(crate) fn entries(&self) -> &[FrameEntry] {
        &self.entries[..self.count]
    }

    #[inline]
    pub(crate) fn intern(&mut self, frame: FrameEntry) -> Result<u32, Resource> {
        let hash = hash_frame(self.index.seed, &frame);
        let entries = &self.entries[..self.count];
        match self.index.find(hash, |i| entries[i as usize] == frame) {
            Ok(i) => Ok(i),
            Err(slot) => {
                if self.count >= self.entries.len().min(self.index.capacity()) {
                    return Err(Resource::Frames);
                }
                self.entries[self.count] = frame;
                let i = self.count as u32;
                self.count += 1;
                self.index.occupy(slot, i);
                Ok(i)
            }
        }
    }

    /// Appends `frame` as a new entry even when an equal one exists (lookups keep finding
    /// the first), for copying a table whose entries coincide after decoding.
    pub(crate) fn push(&mut self, frame: FrameEntry) -> Result<u32, Resource> {
        let hash = hash_frame(self.index.seed, &frame);
        let entries = &self.entries[..self.count];
        let vacant = self.index.find(hash, |i| entries[i as usize] == frame).err();
        if self.count >= self.entries.len().min(self.index.capacity()) {
            return Err(Resource::Frames);
        }
        self.entries[self.count] = frame;
        let i = self.count as u32;
        self.count += 1;
        if let Some(slot) = vacant {
            self.index.occupy(slot, i);
        }
        Ok(i)
    }
}

/// A direct-mapped cache from a cheap key to a frame id (id + 1, 0 = empty), one slot per
/// frame of capacity; the writer confirms every hit by content.
pub(crate) struct RecentFrames<'a> {
    slots: &'a mut [u32],
}

impl RecentFrames<'_> {
    #[inline]
    fn slot(&self, key: u64) -> usize {
        (((key >> 32) * self.slots.len() as u64) >> 32) as usize
    }

    #[inline]
    pub(crate) fn get(&self, key: u64) -> Option<u32> {
        let v = *self.slots.get(self.slot(key))?;
        v.checked_sub(1)
    }

    #[inline]
    pub(crate) fn set(&mut self, key: u64, id: u32) {
        let slot = self.slot(key);
        if let Some(s) = self.slots.get_mut(slot) {
            *s = id.saturating_add(1);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Threads.

#[inline]
fn hash_thread(seed: u64, thread_id: u64, interpreter_id: u32) -> u64 {
    // Keyed before the mix: `mix` alone can be inverted, so without a secret seed a file can
    // hold thread ids that all land in one slot (quadratic reading; see `with_seed`).
    mix(thread_id ^ u64::from(interpreter_id).wrapping_mul(K) ^ seed)
}

/// One writer thread: `(thread_id, interpreter_id)`, timestamp of its last sample, depth of
/// its previous stack and its pending REPEAT run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterThread {
    pub(crate) thread_id: u64,
    pub(crate) prev_ts: u64,
    pub(crate) interpreter_id: u32,
    pub(crate) rle_len: u32,
    pub(crate) rle_count: u32,
    pub(crate) depth: u16,
}

impl WriterThread {
    /// An unused entry, for initialising storage.
    pub const EMPTY: WriterThread =
        WriterThread { thread_id: 0, prev_ts: 0, interpreter_id: 0, rle_len: 0, rle_count: 0, depth: 0 };
}

/// Where a thread of growable writer storage keeps its previous stack and its REPEAT bytes:
/// a chunk of each of two arenas (see [`WriterThreads`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ThreadChunks {
    stack: usize,
    stack_len: usize,
    rle: usize,
    rle_len: usize,
}

impl ThreadChunks {
    const EMPTY: ThreadChunks = ThreadChunks { stack: 0, stack_len: 0, rle: 0, rle_len: 0 };
}

/// Smallest REPEAT chunk on growable storage: a run of one short entry.
const MIN_RLE_CHUNK: usize = 16;

/// The writer's thread table in creation order, with each thread's previous stack and its
/// pending REPEAT bytes.
///
/// On fixed storage every thread has a whole 256-id stack and an `rle_budget`-byte REPEAT
/// buffer from the start, as many threads as the slices allow. On growable storage (a
/// converter writes the threads a file names, however many it claims) a thread's stack and
/// its REPEAT buffer are chunks of two arenas, each the smallest power of two that holds what
/// it has needed so far (at most 256 ids and the budget): a larger need moves it to a new
/// chunk at the arena's end, which at most doubles the arena, as the reader's stacks do. So
/// memory follows what the threads hold, never a count an input states, and memory that
/// cannot be had is a capacity error, not an abort.
pub(crate) struct WriterThreads<'a> {
    entries: Table<'a, WriterThread>,
    count: usize,
    /// Open-addressing index over `entries` (see [`slot_find`]).
    slots: Table<'a, u32>,
    /// Key of the thread hash (see [`WriterStorage::with_seed`]).
    seed: u64,
    stacks: Table<'a, u32>,
    rle: Table<'a, u8>,
    /// Growable storage only (empty on fixed): each thread's chunks of `stacks` and `rle`.
    chunks: Table<'a, ThreadChunks>,
    stacks_used: usize,
    rle_used: usize,
    rle_budget: usize,
    /// Most threads: fixed storage's capacity, or the growable limit.
    capacity: usize,
}

impl<'a> WriterThreads<'a> {
    fn fixed(
        entries: &'a mut [WriterThread],
        slots: &'a mut [u32],
        stacks: &'a mut [u32],
        rle: &'a mut [u8],
        rle_budget: usize,
    ) -> Self {
        slots.fill(0);
        let capacity = entries
            .len()
            .min(slots.len() - 1)
            .min(u32::MAX as usize - 1)
            .min(stacks.len() / MAX_STACK_DEPTH)
            .min(rle.len() / rle_budget);
        WriterThreads {
            entries: Table::Fixed(entries),
            count: 0,
            slots: Table::Fixed(slots),
            seed: 0,
            stacks: Table::Fixed(stacks),
            rle: Table::Fixed(rle),
            chunks: Table::Fixed(&mut []),
            stacks_used: 0,
            rle_used: 0,
            rle_budget,
            capacity,
        }
    }

    #[cfg(feature = "alloc")]
    fn growable(v: &'a mut GrowableThreads, rle_budget: usize, max_threads: usize) -> Self {
        v.slots.clear();
        v.slots.resize(16, 0);
        WriterThreads {
            entries: Table::Growable(&mut v.entries),
            count: 0,
            slots: Table::Growable(&mut v.slots),
            seed: 0,
            stacks: Table::Growable(&mut v.stacks),
            rle: Table::Growable(&mut v.rle),
            chunks: Table::Growable(&mut v.chunks),
            stacks_used: 0,
            rle_used: 0,
            rle_budget,
            // Slot values are u32.
            capacity: max_threads.min(u32::MAX as usize - 1),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.count
    }

    pub(crate) fn rle_budget(&self) -> usize {
        self.rle_budget
    }

    #[inline]
    fn lookup(&self, thread_id: u64, interpreter_id: u32) -> Result<usize, usize> {
        let entries = &self.entries.as_slice()[..self.count];
        slot_find(self.slots.as_slice(), hash_thread(self.seed, thread_id, interpreter_id), |i| {
            let t = &entries[i as usize];
            t.thread_id == thread_id && t.interpreter_id == interpreter_id
        })
        .map(|i| i as usize)
    }

    /// The entry for the pair, if it exists.
    pub(crate) fn find(&self, thread_id: u64, interpreter_id: u32) -> Option<usize> {
        self.lookup(thread_id, interpreter_id).ok()
    }

    /// The entry for the pair, created with `prev_ts = start` if new.
    #[inline]
    pub(crate) fn find_or_create(
        &mut self,
        thread_id: u64,
        interpreter_id: u32,
        start: u64,
    ) -> Result<usize, Resource> {
        let mut slot = match self.lookup(thread_id, interpreter_id) {
            Ok(i) => return Ok(i),
            Err(slot) => slot,
        };
        if self.count >= self.capacity || !self.entries.grow(self.count + 1, WriterThread::EMPTY) {
            return Err(Resource::Threads);
        }
        if self.chunks.is_growable() {
            if !self.chunks.grow(self.count + 1, ThreadChunks::EMPTY) {
                return Err(Resource::Threads);
            }
            // Growable slots stay at most half full, so probes stay short.
            if 2 * (self.count + 1) >= self.slots.as_slice().len() {
                if !self.slots.grow(4 * (self.count + 1), 0) {
                    return Err(Resource::Threads);
                }
                let entries = &self.entries.as_slice()[..self.count];
                rebuild_index(
                    self.slots.as_mut_slice(),
                    entries.iter().map(|t| (t.thread_id, t.interpreter_id)),
                    self.seed,
                );
                slot = match self.lookup(thread_id, interpreter_id) {
                    Err(slot) => slot,
                    Ok(_) => unreachable!("the pair was missing before the rehash"),
                };
            }
            self.chunks.as_mut_slice()[self.count] = ThreadChunks::EMPTY;
        }
        let i = self.count;
        self.entries.as_mut_slice()[i] =
            WriterThread { thread_id, interpreter_id, prev_ts: start, ..WriterThread::EMPTY };
        self.count += 1;
        self.slots.as_mut_slice()[slot] = i as u32 + 1;
        Ok(i)
    }

    pub(crate) fn get(&self, i: usize) -> &WriterThread {
        &self.entries.as_slice()[i]
    }

    pub(crate) fn get_mut(&mut self, i: usize) -> &mut WriterThread {
        &mut self.entries.as_mut_slice()[i]
    }

    /// Where thread `i`'s stack and REPEAT bytes start: its chunks, or its fixed share.
    #[inline]
    fn starts(&self, i: usize) -> (usize, usize) {
        match self.chunks.as_slice().get(i) {
            Some(c) => (c.stack, c.rle),
            None => (i * MAX_STACK_DEPTH, i * self.rle_budget),
        }
    }

    /// The thread's previous stack, innermost first.
    pub(crate) fn prev_stack(&self, i: usize) -> &[u32] {
        let depth = usize::from(self.entries.as_slice()[i].depth);
        let start = self.starts(i).0;
        &self.stacks.as_slice()[start..start + depth]
    }

    /// Makes room for a previous stack of `depth` ids (at most 256), keeping the current one.
    pub(crate) fn reserve_stack(&mut self, i: usize, depth: usize) -> Result<(), Resource> {
        let Some(&c) = self.chunks.as_slice().get(i) else { return Ok(()) };
        if depth <= c.stack_len {
            return Ok(());
        }
        let len = depth.next_power_of_two().clamp(MIN_CHUNK, MAX_STACK_DEPTH);
        let start = self.stacks_used;
        let end = start.checked_add(len).ok_or(Resource::Stacks)?;
        if !self.stacks.grow(end, 0) {
            return Err(Resource::Stacks);
        }
        let kept = usize::from(self.entries.as_slice()[i].depth);
        self.stacks.as_mut_slice().copy_within(c.stack..c.stack + kept, start);
        self.stacks_used = end;
        self.chunks.as_mut_slice()[i] = ThreadChunks { stack: start, stack_len: len, ..c };
        Ok(())
    }

    /// Sets the previous stack; [`Self::reserve_stack`] made room for it.
    pub(crate) fn set_prev_stack(&mut self, i: usize, stack: &[u32]) {
        let start = self.starts(i).0;
        self.stacks.as_mut_slice()[start..start + stack.len()].copy_from_slice(stack);
        self.entries.as_mut_slice()[i].depth = stack.len() as u16;
    }

    /// The thread's pending run bytes.
    pub(crate) fn rle(&self, i: usize) -> &[u8] {
        let len = self.entries.as_slice()[i].rle_len as usize;
        let start = self.starts(i).1;
        &self.rle.as_slice()[start..start + len]
    }

    /// Makes room for `extra` more run bytes, keeping the pending ones; the caller checked
    /// the budget.
    pub(crate) fn reserve_rle(&mut self, i: usize, extra: usize) -> Result<(), Resource> {
        let Some(&c) = self.chunks.as_slice().get(i) else { return Ok(()) };
        let kept = self.entries.as_slice()[i].rle_len as usize;
        let need = kept + extra;
        if need <= c.rle_len {
            return Ok(());
        }
        let len = need.next_power_of_two().max(MIN_RLE_CHUNK).min(self.rle_budget).max(need);
        let start = self.rle_used;
        let end = start.checked_add(len).ok_or(Resource::Threads)?;
        if !self.rle.grow(end, 0) {
            return Err(Resource::Threads);
        }
        self.rle.as_mut_slice().copy_within(c.rle..c.rle + kept, start);
        self.rle_used = end;
        self.chunks.as_mut_slice()[i] = ThreadChunks { rle: start, rle_len: len, ..c };
        Ok(())
    }

    /// Appends one REPEAT entry; [`Self::reserve_rle`] made room for it.
    pub(crate) fn push_rle(&mut self, i: usize, entry: &[u8]) {
        let start = self.starts(i).1 + self.entries.as_slice()[i].rle_len as usize;
        self.rle.as_mut_slice()[start..start + entry.len()].copy_from_slice(entry);
        let t = &mut self.entries.as_mut_slice()[i];
        t.rle_len += entry.len() as u32;
        t.rle_count += 1;
    }
}

/// Refills an emptied index with `pairs` in entry order (entry `i` at its probe's end).
fn rebuild_index(slots: &mut [u32], pairs: impl Iterator<Item = (u64, u32)>, seed: u64) {
    slots.fill(0);
    for (i, (thread_id, interpreter_id)) in pairs.enumerate() {
        if let Err(slot) = slot_find(slots, hash_thread(seed, thread_id, interpreter_id), |_| false) {
            slots[slot] = i as u32 + 1;
        }
    }
}

/// The slices a writer works in. Capacities follow from the lengths: strings =
/// `min(string_spans, string_slots − 1)`, frames = `min(frames, frame_slots − 1)`, threads =
/// `min(threads, thread_slots − 1, stacks / 256, rle / rle_budget)`. Give each slot table
/// about twice its entry count for short probes.
pub struct WriterBuffers<'a> {
    /// Arena for string bytes.
    pub string_bytes: &'a mut [u8],
    /// One span per string.
    pub string_spans: &'a mut [Span],
    /// Hash slots for strings.
    pub string_slots: &'a mut [u32],
    /// Frame table.
    pub frames: &'a mut [FrameEntry],
    /// Hash slots for frames.
    pub frame_slots: &'a mut [u32],
    /// Recent-frame cache for the string API (any length; one per frame is a good size,
    /// empty disables it). It only saves hashing; output does not depend on it.
    pub frame_cache: &'a mut [u32],
    /// Thread table.
    pub threads: &'a mut [WriterThread],
    /// Hash slots for threads.
    pub thread_slots: &'a mut [u32],
    /// Previous stacks, 256 ids per thread.
    pub stacks: &'a mut [u32],
    /// REPEAT buffers, `rle_budget` bytes per thread.
    pub rle: &'a mut [u8],
    /// Bytes per thread REPEAT run; [`CPYTHON_RLE_BUDGET`] for CPython-identical files, smaller
    /// to save RAM (files stay valid, REPEAT records are just split earlier).
    pub rle_budget: usize,
    /// Staging for the sample region; at least `records::max_record_len(rle_budget)`.
    pub staging: &'a mut [u8],
}

/// Validated writer storage, ready for [`crate::writer::Writer::new`].
pub struct WriterStorage<'a> {
    pub(crate) strings: StringInterner<'a>,
    pub(crate) frames: FrameInterner<'a>,
    pub(crate) threads: WriterThreads<'a>,
    pub(crate) recent: RecentFrames<'a>,
    pub(crate) staging: &'a mut [u8],
    /// The zstd compressor, used only when the configuration says `Compression::Zstd`.
    #[cfg(feature = "zstd")]
    pub(crate) zstd: Option<crate::compression::ZstdOut<'a>>,
}

impl<'a> WriterStorage<'a> {
    /// Keys the hashes of the string, frame and thread tables with `seed`. The writer's input
    /// is usually the runtime's own, but a converter writes names and thread ids from a file
    /// that may be hostile: without a secret seed (the default is 0) they can be chosen to
    /// collide, and writing takes time quadratic in their count. The file written is the
    /// same whatever the seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.strings.index.seed = seed;
        self.frames.index.seed = seed;
        self.threads.seed = seed;
        self
    }

    /// Adds a zstd compressor: a [`crate::compression::Compressor`] over the caller's
    /// workspace, or a caller's [`crate::compression::RegionCompressor`] (one on another
    /// thread, say). It is memory like the rest of the storage; whether the sample region is
    /// compressed is said once, by [`crate::writer::WriterConfig::compression`], and a
    /// configuration without zstd leaves the compressor unused.
    #[cfg(feature = "zstd")]
    pub fn with_zstd(self, compressor: impl Into<crate::compression::ZstdOut<'a>>) -> Self {
        WriterStorage { zstd: Some(compressor.into()), ..self }
    }

    /// Checks that the slices fit together.
    pub fn new(b: WriterBuffers<'a>) -> Result<Self, StorageError> {
        Self::build(b, None)
    }

    /// [`Self::new`], or with `growable` threads in place of the buffers' (then empty) ones.
    fn build(b: WriterBuffers<'a>, growable: Option<WriterThreads<'a>>) -> Result<Self, StorageError> {
        if b.string_slots.len() <= 1 {
            return Err(StorageError::TooFewSlots(Resource::Strings));
        }
        if b.frame_slots.len() <= 1 {
            return Err(StorageError::TooFewSlots(Resource::Frames));
        }
        if b.rle_budget < MAX_RLE_ENTRY_LEN || b.rle_budget > u32::MAX as usize {
            return Err(StorageError::RleBudgetTooSmall);
        }
        if b.staging.len() < max_record_len(b.rle_budget) {
            return Err(StorageError::StagingTooSmall);
        }
        let threads = match growable {
            Some(threads) => threads,
            None if b.thread_slots.len() <= 1 => return Err(StorageError::TooFewSlots(Resource::Threads)),
            None => WriterThreads::fixed(b.threads, b.thread_slots, b.stacks, b.rle, b.rle_budget),
        };
        Ok(WriterStorage {
            strings: StringInterner {
                table: StringTable::new(b.string_bytes, b.string_spans),
                index: SlotIndex::new(b.string_slots),
            },
            frames: FrameInterner { entries: b.frames, count: 0, index: SlotIndex::new(b.frame_slots) },
            threads,
            recent: RecentFrames {
                slots: {
                    b.frame_cache.fill(0);
                    b.frame_cache
                },
            },
            staging: b.staging,
            #[cfg(feature = "zstd")]
            zstd: None,
        })
    }
}

/// Writer storage in fixed arrays, for a `static` on firmware. Hash slots are twice each
/// capacity. Compile-time checks: `STAGING >= records::max_record_len(RLE)`, `RLE >= 11`.
///
/// RAM: `STRING_BYTES + 16·STRINGS + 40·FRAMES + (1064 + RLE)·THREADS + STAGING` bytes
/// rounded up to 8 (on 64-bit targets; a test checks the formula against the compiler's
/// layout).
pub struct StaticWriterStorage<
    const STRING_BYTES: usize,
    const STRINGS: usize,
    const FRAMES: usize,
    const THREADS: usize,
    const RLE: usize = CPYTHON_RLE_BUDGET,
    const STAGING: usize = { max_record_len(CPYTHON_RLE_BUDGET) },
> {
    string_bytes: [u8; STRING_BYTES],
    string_spans: [Span; STRINGS],
    string_slots: [[u32; 2]; STRINGS],
    frames: [FrameEntry; FRAMES],
    frame_slots: [[u32; 2]; FRAMES],
    frame_cache: [u32; FRAMES],
    threads: [WriterThread; THREADS],
    thread_slots: [[u32; 2]; THREADS],
    stacks: [[u32; MAX_STACK_DEPTH]; THREADS],
    rle: [[u8; RLE]; THREADS],
    staging: [u8; STAGING],
}

impl<
        const STRING_BYTES: usize,
        const STRINGS: usize,
        const FRAMES: usize,
        const THREADS: usize,
        const RLE: usize,
        const STAGING: usize,
    > StaticWriterStorage<STRING_BYTES, STRINGS, FRAMES, THREADS, RLE, STAGING>
{
    /// Zeroed storage; usable in a `static`.
    pub const fn new() -> Self {
        const {
            assert!(RLE >= MAX_RLE_ENTRY_LEN, "RLE budget must hold one 11-byte REPEAT entry");
            assert!(STAGING >= max_record_len(RLE), "STAGING must hold the largest record");
            assert!(STRINGS >= 1 && FRAMES >= 1 && THREADS >= 1, "capacities must be at least 1");
        }
        StaticWriterStorage {
            string_bytes: [0; STRING_BYTES],
            string_spans: [Span::EMPTY; STRINGS],
            string_slots: [[0; 2]; STRINGS],
            frames: [FrameEntry::EMPTY; FRAMES],
            frame_slots: [[0; 2]; FRAMES],
            frame_cache: [0; FRAMES],
            threads: [WriterThread::EMPTY; THREADS],
            thread_slots: [[0; 2]; THREADS],
            stacks: [[0; MAX_STACK_DEPTH]; THREADS],
            rle: [[0; RLE]; THREADS],
            staging: [0; STAGING],
        }
    }

    /// Lends the arrays to a writer (clearing what a previous writer left).
    pub fn storage(&mut self) -> WriterStorage<'_> {
        let buffers = WriterBuffers {
            string_bytes: &mut self.string_bytes,
            string_spans: &mut self.string_spans,
            string_slots: self.string_slots.as_flattened_mut(),
            frames: &mut self.frames,
            frame_slots: self.frame_slots.as_flattened_mut(),
            frame_cache: &mut self.frame_cache,
            threads: &mut self.threads,
            thread_slots: self.thread_slots.as_flattened_mut(),
            stacks: self.stacks.as_flattened_mut(),
            rle: self.rle.as_flattened_mut(),
            rle_budget: RLE,
            staging: &mut self.staging,
        };
        match WriterStorage::new(buffers) {
            Ok(s) => s,
            // The const assertions in `new` rule every error out.
            Err(_) => unreachable!("static storage validated at compile time"),
        }
    }
}

impl<
        const STRING_BYTES: usize,
        const STRINGS: usize,
        const FRAMES: usize,
        const THREADS: usize,
        const RLE: usize,
        const STAGING: usize,
    > Default for StaticWriterStorage<STRING_BYTES, STRINGS, FRAMES, THREADS, RLE, STAGING>
{
    fn default() -> Self {
        Self::new()
    }
}

// ---------------------------------------------------------------------------------------
// Reader storage.

/// A table the reader fills as it goes: a borrowed slice of fixed length, or (feature `alloc`)
/// a `Vec` it may lengthen as the file's data asks for more.
pub(crate) enum Table<'a, T> {
    Fixed(&'a mut [T]),
    #[cfg(feature = "alloc")]
    Growable(&'a mut alloc::vec::Vec<T>),
}

impl<T: Copy> Table<'_, T> {
    #[inline]
    fn as_slice(&self) -> &[T] {
        match self {
            Table::Fixed(s) => s,
            #[cfg(feature = "alloc")]
            Table::Growable(v) => v,
        }
    }

    #[inline]
    fn as_mut_slice(&mut self) -> &mut [T] {
        match self {
            Table::Fixed(s) => s,
            #[cfg(feature = "alloc")]
            Table::Growable(v) => v,
        }
    }

    /// Makes the table at least `len` long, doubling a growable one so that growth costs
    /// amortised constant time per element; false if it cannot (fixed, or out of memory).
    fn grow(&mut self, len: usize, fill: T) -> bool {
        match self {
            Table::Fixed(s) => {
                let _ = fill;
                s.len() >= len
            }
            #[cfg(feature = "alloc")]
            Table::Growable(v) => {
                if v.len() >= len {
                    return true;
                }
                let target = len.max(v.len().saturating_mul(2));
                // try_reserve: running out of memory is a capacity error, not an abort.
                if v.try_reserve_exact(target - v.len()).is_err() && v.try_reserve_exact(len - v.len()).is_err() {
                    return false;
                }
                let target = target.min(v.capacity());
                v.resize(target, fill);
                true
            }
        }
    }

    fn is_growable(&self) -> bool {
        !matches!(self, Table::Fixed(_))
    }
}

/// One reader thread: its pair, its timestamp and its current stack, which lives end-aligned
/// in the thread's chunk of the stack arena (innermost first, so pops and pushes touch only
/// the front and the frames a record keeps never move).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaderThread {
    pub(crate) thread_id: u64,
    pub(crate) prev_ts: u64,
    pub(crate) interpreter_id: u32,
    /// First arena slot of the chunk.
    chunk: u32,
    /// Slots in the chunk.
    chunk_len: u16,
    /// Frames in the current stack.
    depth: u16,
}

impl ReaderThread {
    /// An unused entry, for initialising storage.
    pub const EMPTY: ReaderThread =
        ReaderThread { thread_id: 0, prev_ts: 0, interpreter_id: 0, chunk: 0, chunk_len: 0, depth: 0 };
}

/// Which frames of a thread's current stack a record keeps below the frames it pushes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    /// The outermost `n` frames (FULL keeps none; SUFFIX and POP_PUSH keep the bottom).
    Bottom(usize),
    /// The innermost `n` frames, moved to the bottom: CPython's SUFFIX with nothing pushed.
    Innermost(usize),
}

/// The reader's thread table with each thread's current stack.
///
/// On fixed storage every thread gets a whole 256-slot chunk when it appears, as many
/// threads as the slices allow. On growable storage a thread's chunk is the smallest power
/// of two (at least 4) that holds its deepest stack so far: a deeper stack moves it to a new
/// chunk twice the size at the end of the arena, leaving the old one unused, which at most
/// doubles the arena (the old chunks of one thread sum to less than its current one). So
/// memory follows what the threads hold — about 60 bytes for a thread with a shallow stack —
/// never the count a header declares.
pub(crate) struct ReaderThreads<'a> {
    entries: Table<'a, ReaderThread>,
    count: usize,
    /// Open-addressing index over `entries` (see [`SlotIndex`]).
    slots: Table<'a, u32>,
    arena: Table<'a, u32>,
    arena_used: usize,
    /// Most threads: fixed storage's capacity, or the growable limit.
    capacity: usize,
    /// Key of the thread hash (see [`ReaderStorage::with_seed`]).
    seed: u64,
}

/// Smallest chunk on growable storage.
const MIN_CHUNK: usize = 4;

impl<'a> ReaderThreads<'a> {
    fn fixed(entries: &'a mut [ReaderThread], slots: &'a mut [u32], stacks: &'a mut [u32]) -> Self {
        slots.fill(0);
        let capacity = entries.len().min(slots.len() - 1).min(stacks.len() / MAX_STACK_DEPTH);
        ReaderThreads {
            entries: Table::Fixed(entries),
            count: 0,
            slots: Table::Fixed(slots),
            arena: Table::Fixed(stacks),
            arena_used: 0,
            capacity,
            seed: 0,
        }
    }

    #[cfg(feature = "alloc")]
    fn growable(
        entries: &'a mut alloc::vec::Vec<ReaderThread>,
        slots: &'a mut alloc::vec::Vec<u32>,
        stacks: &'a mut alloc::vec::Vec<u32>,
        max_threads: usize,
    ) -> Self {
        slots.clear();
        slots.resize(16, 0);
        ReaderThreads {
            entries: Table::Growable(entries),
            count: 0,
            slots: Table::Growable(slots),
            arena: Table::Growable(stacks),
            arena_used: 0,
            // Chunk offsets are u32, and so are slot values.
            capacity: max_threads.min(u32::MAX as usize - 1),
            seed: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// Most threads this table can hold.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// The entry for the pair: `Ok(i)` if known, `Err(slot)` if new, which [`Self::create`]
    /// then fills.
    #[inline]
    pub(crate) fn find(&self, thread_id: u64, interpreter_id: u32) -> Result<usize, usize> {
        let entries = &self.entries.as_slice()[..self.count];
        slot_find(self.slots.as_slice(), hash_thread(self.seed, thread_id, interpreter_id), |i| {
            let t = &entries[i as usize];
            t.thread_id == thread_id && t.interpreter_id == interpreter_id
        })
        .map(|i| i as usize)
    }

    /// Adds the pair found missing at `slot`; `Err` names what ran out.
    pub(crate) fn create(
        &mut self,
        mut slot: usize,
        thread_id: u64,
        interpreter_id: u32,
        start_ts: u64,
    ) -> Result<usize, Resource> {
        if self.count >= self.capacity || !self.entries.grow(self.count + 1, ReaderThread::EMPTY) {
            return Err(Resource::Threads);
        }
        // Growable slots stay at most half full, so probes stay short.
        if self.slots.is_growable() && 2 * (self.count + 1) >= self.slots.as_slice().len() {
            self.rehash(4 * (self.count + 1))?;
            slot = match self.find(thread_id, interpreter_id) {
                Err(slot) => slot,
                Ok(_) => unreachable!("the pair was missing before the rehash"),
            };
        }
        let mut entry = ReaderThread { thread_id, interpreter_id, prev_ts: start_ts, ..ReaderThread::EMPTY };
        if !self.arena.is_growable() {
            // Fixed storage: a whole chunk now, so a valid file never runs out mid-stack.
            entry.chunk = self.arena_used as u32;
            entry.chunk_len = MAX_STACK_DEPTH as u16;
            self.arena_used += MAX_STACK_DEPTH;
        }
        let i = self.count;
        self.entries.as_mut_slice()[i] = entry;
        self.count += 1;
        self.slots.as_mut_slice()[slot] = i as u32 + 1;
        Ok(i)
    }

    /// Rebuilds the growable index with `len` slots.
    fn rehash(&mut self, len: usize) -> Result<(), Resource> {
        if !self.slots.grow(len, 0) {
            return Err(Resource::Threads);
        }
        let entries = &self.entries.as_slice()[..self.count];
        rebuild_index(self.slots.as_mut_slice(), entries.iter().map(|t| (t.thread_id, t.interpreter_id)), self.seed);
        Ok(())
    }

    pub(crate) fn get(&self, i: usize) -> &ReaderThread {
        &self.entries.as_slice()[i]
    }

    /// The thread's current stack, innermost first.
    #[inline]
    pub(crate) fn stack(&self, i: usize) -> &[u32] {
        let t = &self.entries.as_slice()[i];
        let end = t.chunk as usize + usize::from(t.chunk_len);
        &self.arena.as_slice()[end - usize::from(t.depth)..end]
    }

    /// The thread's current stack and its entry, for a REPEAT run that reads one and
    /// advances the other's timestamp.
    #[inline]
    pub(crate) fn stack_and_entry(&mut self, i: usize) -> (&[u32], &mut ReaderThread) {
        let t = &mut self.entries.as_mut_slice()[i];
        let end = t.chunk as usize + usize::from(t.chunk_len);
        (&self.arena.as_slice()[end - usize::from(t.depth)..end], t)
    }

    /// Makes the thread's stack `keep` followed (outward) by `push` new innermost frames and
    /// returns the slots for those frames, innermost first, for the caller to fill. The caller
    /// has checked `keep` against the current depth and the total against 256.
    pub(crate) fn reshape(&mut self, i: usize, keep: Keep, push: usize) -> Result<&mut [u32], Resource> {
        let kept = match keep {
            Keep::Bottom(n) | Keep::Innermost(n) => n,
        };
        let depth = kept + push;
        let t = self.entries.as_slice()[i];
        let (mut chunk, mut chunk_len) = (t.chunk as usize, usize::from(t.chunk_len));
        if depth > chunk_len {
            // Only growable storage gets here: fixed chunks hold 256.
            let len = depth.next_power_of_two().clamp(MIN_CHUNK, MAX_STACK_DEPTH);
            let start = self.arena_used;
            let end = start.checked_add(len).filter(|&e| e <= u32::MAX as usize).ok_or(Resource::Stacks)?;
            if !self.arena.grow(end, 0) {
                return Err(Resource::Stacks);
            }
            let old_end = chunk + chunk_len;
            // Only the bottom frames survive a growth (Keep::Innermost never grows).
            self.arena.as_mut_slice().copy_within(old_end - kept..old_end, end - kept);
            self.arena_used = end;
            chunk = start;
            chunk_len = len;
        }
        let end = chunk + chunk_len;
        let arena = self.arena.as_mut_slice();
        if let Keep::Innermost(n) = keep {
            let old_top = end - usize::from(t.depth);
            arena.copy_within(old_top..old_top + n, end - n);
        }
        let t = &mut self.entries.as_mut_slice()[i];
        t.chunk = chunk as u32;
        t.chunk_len = chunk_len as u16;
        t.depth = depth as u16;
        Ok(&mut arena[end - depth..end - kept])
    }
}

/// The slices a reader works in. Capacities: strings = `string_spans` (bytes =
/// `string_bytes`), frames = `frames`, threads = `min(threads, thread_slots − 1, stacks / 256)`.
pub struct ReaderBuffers<'a> {
    /// Arena for string bytes.
    pub string_bytes: &'a mut [u8],
    /// One span per string.
    pub string_spans: &'a mut [Span],
    /// Frame table.
    pub frames: &'a mut [FrameEntry],
    /// Thread table.
    pub threads: &'a mut [ReaderThread],
    /// Hash slots for threads.
    pub thread_slots: &'a mut [u32],
    /// Current stacks, 256 ids per thread.
    pub stacks: &'a mut [u32],
    /// Window over the (decompressed) byte stream; at least [`MIN_READ_BUFFER`] bytes.
    pub read_buffer: &'a mut [u8],
}

/// Validated reader storage, ready for [`crate::reader::Reader::open`].
pub struct ReaderStorage<'a> {
    pub(crate) strings: StringTable<'a>,
    pub(crate) frames: &'a mut [FrameEntry],
    pub(crate) threads: ReaderThreads<'a>,
    pub(crate) read_buffer: &'a mut [u8],
}

impl<'a> ReaderStorage<'a> {
    /// Checks that the slices fit together.
    pub fn new(b: ReaderBuffers<'a>) -> Result<Self, StorageError> {
        if b.thread_slots.len() <= 1 {
            return Err(StorageError::TooFewSlots(Resource::Threads));
        }
        if b.read_buffer.len() < MIN_READ_BUFFER {
            return Err(StorageError::ReadBufferTooSmall);
        }
        Ok(ReaderStorage {
            strings: StringTable::new(b.string_bytes, b.string_spans),
            frames: b.frames,
            threads: ReaderThreads::fixed(b.threads, b.thread_slots, b.stacks),
            read_buffer: b.read_buffer,
        })
    }

    /// Most threads a file may have.
    pub fn thread_capacity(&self) -> usize {
        self.threads.capacity()
    }

    /// Keys the thread table's hash with `seed`. Without a secret seed (the default is 0) a
    /// crafted file can hold thread ids whose hashes all collide, and reading it takes time
    /// quadratic in its thread count; give a random seed wherever files come from outside
    /// (the `tachyon` crate does). What is read is the same whatever the seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.threads.seed = seed;
        self
    }
}

/// Reader storage in fixed arrays, for a `static` on firmware.
///
/// RAM: `STRING_BYTES + 8·STRINGS + 28·FRAMES + 1064·THREADS + READ_BUFFER` bytes (on
/// 64-bit targets; a test checks the formula against the compiler's layout).
pub struct StaticReaderStorage<
    const STRING_BYTES: usize,
    const STRINGS: usize,
    const FRAMES: usize,
    const THREADS: usize,
    const READ_BUFFER: usize = 4096,
> {
    string_bytes: [u8; STRING_BYTES],
    string_spans: [Span; STRINGS],
    frames: [FrameEntry; FRAMES],
    threads: [ReaderThread; THREADS],
    thread_slots: [[u32; 2]; THREADS],
    stacks: [[u32; MAX_STACK_DEPTH]; THREADS],
    read_buffer: [u8; READ_BUFFER],
}

impl<
        const STRING_BYTES: usize,
        const STRINGS: usize,
        const FRAMES: usize,
        const THREADS: usize,
        const READ_BUFFER: usize,
    > StaticReaderStorage<STRING_BYTES, STRINGS, FRAMES, THREADS, READ_BUFFER>
{
    /// Zeroed storage; usable in a `static`.
    pub const fn new() -> Self {
        const {
            assert!(READ_BUFFER >= MIN_READ_BUFFER, "READ_BUFFER must be at least MIN_READ_BUFFER");
            assert!(THREADS >= 1, "THREADS must be at least 1");
        }
        StaticReaderStorage {
            string_bytes: [0; STRING_BYTES],
            string_spans: [Span::EMPTY; STRINGS],
            frames: [FrameEntry::EMPTY; FRAMES],
            threads: [ReaderThread::EMPTY; THREADS],
            thread_slots: [[0; 2]; THREADS],
            stacks: [[0; MAX_STACK_DEPTH]; THREADS],
            read_buffer: [0; READ_BUFFER],
        }
    }

    /// Lends the arrays to a reader.
    pub fn storage(&mut self) -> ReaderStorage<'_> {
        let buffers = ReaderBuffers {
            string_bytes: &mut self.string_bytes,
            string_spans: &mut self.string_spans,
            frames: &mut self.frames,
            threads: &mut self.threads,
            thread_slots: self.thread_slots.as_flattened_mut(),
            stacks: self.stacks.as_flattened_mut(),
            read_buffer: &mut self.read_buffer,
        };
        match ReaderStorage::new(buffers) {
            Ok(s) => s,
            Err(_) => unreachable!("static storage validated at compile time"),
        }
    }
}

impl<
        const STRING_BYTES: usize,
        const STRINGS: usize,
        const FRAMES: usize,
        const THREADS: usize,
        const READ_BUFFER: usize,
    > Default for StaticReaderStorage<STRING_BYTES, STRINGS, FRAMES, THREADS, READ_BUFFER>
{
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "alloc")]
mod vec_backed {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;

    /// Capacities of a `Vec`-backed writer storage.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct WriterCapacity {
        /// Bytes of all distinct strings.
        pub string_bytes: usize,
        /// Distinct strings.
        pub strings: usize,
        /// Distinct frames.
        pub frames: usize,
        /// Most distinct `(thread, interpreter)` pairs. The thread table starts empty and
        /// grows as threads appear, so this costs nothing until samples use it.
        pub threads: usize,
        /// REPEAT budget per thread ([`CPYTHON_RLE_BUDGET`] for CPython-identical output).
        pub rle_budget: usize,
    }

    impl WriterCapacity {
        /// A desktop configuration: 16 MiB of strings, 256 Ki strings and frames, 1024 threads.
        pub const DESKTOP: WriterCapacity = WriterCapacity {
            string_bytes: 16 << 20,
            strings: 256 << 10,
            frames: 256 << 10,
            threads: 1024,
            rle_budget: CPYTHON_RLE_BUDGET,
        };

        /// Bytes allocated up front (`docs/memory.md`'s formula; threads come on top as they
        /// appear); `None` if that exceeds `usize`.
        pub fn ram_bytes(&self) -> Option<usize> {
            let slots = |n: usize| n.checked_mul(2)?.checked_add(1)?.checked_mul(4);
            let parts = [
                Some(self.string_bytes),
                self.strings.checked_mul(core::mem::size_of::<Span>()),
                slots(self.strings),
                self.frames.checked_mul(core::mem::size_of::<FrameEntry>() + 4),
                slots(self.frames),
                Some(max_record_len(self.rle_budget)),
            ];
            parts.into_iter().try_fold(0usize, |sum, part| sum.checked_add(part?))
        }
    }

    /// The thread table of a [`VecWriterStorage`], grown by use (see [`WriterThreads`]).
    #[derive(Default)]
    pub(crate) struct GrowableThreads {
        pub(crate) entries: Vec<WriterThread>,
        pub(crate) slots: Vec<u32>,
        pub(crate) stacks: Vec<u32>,
        pub(crate) rle: Vec<u8>,
        pub(crate) chunks: Vec<ThreadChunks>,
    }

    /// Writer storage in `Vec`s: string and frame tables of the given capacities, allocated
    /// once; a thread table that grows with the threads written.
    pub struct VecWriterStorage {
        cap: WriterCapacity,
        string_bytes: Vec<u8>,
        string_spans: Vec<Span>,
        string_slots: Vec<u32>,
        frames: Vec<FrameEntry>,
        frame_slots: Vec<u32>,
        frame_cache: Vec<u32>,
        threads: GrowableThreads,
        staging: Vec<u8>,
    }

    impl VecWriterStorage {
        /// Allocates the string and frame tables and the staging buffer once, up front. Sizes
        /// are computed with checked arithmetic, so capacities beyond the address space (easy
        /// on 32-bit targets) are an error, not a wrapped size.
        pub fn new(cap: WriterCapacity) -> Result<Self, StorageError> {
            let rle_budget = cap.rle_budget.max(MAX_RLE_ENTRY_LEN);
            let cap = WriterCapacity { rle_budget, threads: cap.threads.max(1), ..cap };
            cap.ram_bytes().ok_or(StorageError::CapacityOverflow)?;
            Ok(VecWriterStorage {
                cap,
                string_bytes: vec![0; cap.string_bytes],
                string_spans: vec![Span::EMPTY; cap.strings],
                string_slots: vec![0; 2 * cap.strings + 1],
                frames: vec![FrameEntry::EMPTY; cap.frames],
                frame_slots: vec![0; 2 * cap.frames + 1],
                frame_cache: vec![0; cap.frames],
                threads: GrowableThreads::default(),
                staging: vec![0; max_record_len(rle_budget)],
            })
        }

        /// The capacities this storage was made with.
        pub fn capacity(&self) -> WriterCapacity {
            self.cap
        }

        /// Lends the tables to a writer.
        pub fn storage(&mut self) -> WriterStorage<'_> {
            let threads = WriterThreads::growable(&mut self.threads, self.cap.rle_budget, self.cap.threads);
            let buffers = WriterBuffers {
                string_bytes: &mut self.string_bytes,
                string_spans: &mut self.string_spans,
                string_slots: &mut self.string_slots,
                frames: &mut self.frames,
                frame_slots: &mut self.frame_slots,
                frame_cache: &mut self.frame_cache,
                threads: &mut [],
                thread_slots: &mut [],
                stacks: &mut [],
                rle: &mut [],
                rle_budget: self.cap.rle_budget,
                staging: &mut self.staging,
            };
            match WriterStorage::build(buffers, Some(threads)) {
                Ok(s) => s,
                Err(_) => unreachable!("sizes derived from one capacity set"),
            }
        }

        /// Bytes the thread table holds now (entries, index, stacks and REPEAT buffers),
        /// which grows with the threads written.
        pub fn thread_bytes(&self) -> usize {
            let t = &self.threads;
            t.entries.capacity() * core::mem::size_of::<WriterThread>()
                + t.chunks.capacity() * core::mem::size_of::<ThreadChunks>()
                + (t.slots.capacity() + t.stacks.capacity()) * 4
                + t.rle.capacity()
        }
    }

    /// Capacities of a `Vec`-backed reader storage.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ReaderCapacity {
        /// Bytes of all strings.
        pub string_bytes: usize,
        /// Strings.
        pub strings: usize,
        /// Frames.
        pub frames: usize,
        /// Most threads. The thread table starts empty and grows as threads appear in the
        /// samples, so this costs nothing until the file uses it.
        pub threads: usize,
        /// Window over the sample stream.
        pub read_buffer: usize,
    }

    impl ReaderCapacity {
        /// A desktop configuration: 64 MiB of strings, 1 Mi strings and frames, threads
        /// without limit, a 256 KiB window.
        pub const DESKTOP: ReaderCapacity = ReaderCapacity {
            string_bytes: 64 << 20,
            strings: 1 << 20,
            frames: 1 << 20,
            threads: usize::MAX,
            read_buffer: 256 << 10,
        };

        /// Bytes allocated up front (`docs/memory.md`'s formula; threads come on top as they
        /// appear); `None` if that exceeds `usize`.
        pub fn ram_bytes(&self) -> Option<usize> {
            let parts = [
                Some(self.string_bytes),
                self.strings.checked_mul(core::mem::size_of::<Span>()),
                self.frames.checked_mul(core::mem::size_of::<FrameEntry>()),
                Some(self.read_buffer.max(MIN_READ_BUFFER)),
            ];
            parts.into_iter().try_fold(0usize, |sum, part| sum.checked_add(part?))
        }
    }

    /// Reader storage in `Vec`s of the given capacities; the thread table grows with use.
    pub struct VecReaderStorage {
        string_bytes: Vec<u8>,
        string_spans: Vec<Span>,
        frames: Vec<FrameEntry>,
        threads: Vec<ReaderThread>,
        thread_slots: Vec<u32>,
        stacks: Vec<u32>,
        read_buffer: Vec<u8>,
        max_threads: usize,
    }

    impl VecReaderStorage {
        /// Allocates the string and frame tables and the window once, up front; capacities
        /// beyond the address space are an error (see [`VecWriterStorage::new`]).
        pub fn new(cap: ReaderCapacity) -> Result<Self, StorageError> {
            cap.ram_bytes().ok_or(StorageError::CapacityOverflow)?;
            Ok(VecReaderStorage {
                string_bytes: vec![0; cap.string_bytes],
                string_spans: vec![Span::EMPTY; cap.strings],
                frames: vec![FrameEntry::EMPTY; cap.frames],
                threads: Vec::new(),
                thread_slots: Vec::new(),
                stacks: Vec::new(),
                read_buffer: vec![0; cap.read_buffer.max(MIN_READ_BUFFER)],
                max_threads: cap.threads.max(1),
            })
        }

        /// Lends the tables to a reader.
        pub fn storage(&mut self) -> ReaderStorage<'_> {
            ReaderStorage {
                strings: StringTable::new(&mut self.string_bytes, &mut self.string_spans),
                frames: &mut self.frames,
                threads: ReaderThreads::growable(
                    &mut self.threads,
                    &mut self.thread_slots,
                    &mut self.stacks,
                    self.max_threads,
                ),
                read_buffer: &mut self.read_buffer,
            }
        }

        /// Bytes the thread table holds now (entries, index and stacks), which grows with
        /// the threads a file uses.
        pub fn thread_bytes(&self) -> usize {
            self.threads.capacity() * core::mem::size_of::<ReaderThread>()
                + (self.thread_slots.capacity() + self.stacks.capacity()) * 4
        }
    }
}

#[cfg(feature = "alloc")]
use vec_backed::GrowableThreads;
#[cfg(feature = "alloc")]
pub use vec_backed::{ReaderCapacity, VecReaderStorage, VecWriterStorage, WriterCapacity};

#[cfg(test)]
mod tests {
    use super::*;

    /// Growing a thread's chunks keeps what they hold: a sample refused after its room was
    /// made (a sink error, say) leaves the previous stack and the pending run as they were.
    #[cfg(feature = "alloc")]
    #[test]
    fn growing_a_threads_chunks_keeps_its_stack_and_run() {
        let mut v = GrowableThreads::default();
        let mut t = WriterThreads::growable(&mut v, 64, 8);
        let a = t.find_or_create(7, 0, 0).unwrap();
        let b = t.find_or_create(8, 0, 0).unwrap();
        t.reserve_stack(a, 3).unwrap();
        t.set_prev_stack(a, &[1, 2, 3]);
        t.reserve_rle(a, 2).unwrap();
        t.push_rle(a, &[9, 0]);
        t.reserve_stack(b, 1).unwrap();
        t.set_prev_stack(b, &[5]);
        t.reserve_stack(a, 200).unwrap();
        t.reserve_rle(a, 40).unwrap();
        assert_eq!((t.prev_stack(a), t.rle(a)), (&[1, 2, 3][..], &[9, 0][..]));
        assert_eq!((t.prev_stack(b), t.rle(b)), (&[5][..], &[][..]));
        assert_eq!(t.find(7, 0), Some(a));
        assert_eq!(t.find_or_create(9, 0, 0), Ok(2));
    }

    #[test]
    fn interner_dedups_and_keeps_first_seen_order() {
        let mut st = StaticWriterStorage::<64, 4, 4, 1, 16, 1314>::new();
        let mut s = st.storage();
        assert_eq!(s.strings.intern(b"a.py"), Ok(0));
        assert_eq!(s.strings.intern(b"main"), Ok(1));
        assert_eq!(s.strings.intern(b"a.py"), Ok(0));
        assert_eq!(s.strings.intern(b""), Ok(2));
        assert_eq!(s.strings.intern(b"x"), Ok(3));
        assert_eq!(s.strings.intern(b"y"), Err(Resource::Strings));
        assert_eq!(s.strings.intern(b"main"), Ok(1));
        let got: [&[u8]; 4] = [b"a.py", b"main", b"", b"x"];
        assert!(s.strings.table().iter().eq(got.iter().copied()));
    }

    #[test]
    fn arena_bytes_run_out_before_entries() {
        let mut st = StaticWriterStorage::<5, 8, 4, 1, 16, 1314>::new();
        let mut s = st.storage();
        assert_eq!(s.strings.intern(b"abcd"), Ok(0));
        assert_eq!(s.strings.intern(b"ef"), Err(Resource::StringBytes));
        assert_eq!(s.strings.intern(b"e"), Ok(1));
    }

    #[test]
    fn frames_and_threads_fill_to_capacity() {
        let mut st = StaticWriterStorage::<8, 2, 2, 2, 16, 1314>::new();
        let mut s = st.storage();
        let f = |line| FrameEntry {
            location: crate::tables::Location { lineno: line, ..crate::tables::Location::NONE },
            ..FrameEntry::EMPTY
        };
        assert_eq!(s.frames.intern(f(1)), Ok(0));
        assert_eq!(s.frames.intern(f(2)), Ok(1));
        assert_eq!(s.frames.intern(f(1)), Ok(0));
        assert_eq!(s.frames.intern(f(3)), Err(Resource::Frames));
        assert_eq!(s.threads.find_or_create(7, 0, 5), Ok(0));
        assert_eq!(s.threads.find_or_create(7, 1, 5), Ok(1));
        assert_eq!(s.threads.find_or_create(7, 0, 9), Ok(0));
        assert_eq!(s.threads.get(0).prev_ts, 5);
        assert_eq!(s.threads.find_or_create(8, 0, 5), Err(Resource::Threads));
    }

    /// The RAM formulas of `docs/memory.md`, checked against the real layout.
    #[cfg(target_pointer_width = "64")]
    #[test]
    fn ram_formulas_match_layout() {
        fn writer(b: usize, s: usize, f: usize, t: usize, r: usize, st: usize) -> usize {
            (b + 16 * s + 40 * f + (1064 + r) * t + st).next_multiple_of(8)
        }
        fn reader(b: usize, s: usize, f: usize, t: usize, rb: usize) -> usize {
            (b + 8 * s + 28 * f + 1064 * t + rb).next_multiple_of(8)
        }
        assert_eq!(
            core::mem::size_of::<StaticWriterStorage<2048, 128, 128, 2, 256, 1314>>(),
            writer(2048, 128, 128, 2, 256, 1314)
        );
        assert_eq!(core::mem::size_of::<StaticWriterStorage<1000, 7, 9, 3>>(), writer(1000, 7, 9, 3, 16384, 16402));
        assert_eq!(core::mem::size_of::<StaticReaderStorage<2048, 128, 128, 2, 512>>(), reader(2048, 128, 128, 2, 512));
        assert_eq!(core::mem::size_of::<StaticReaderStorage<999, 5, 3, 1, 64>>(), reader(999, 5, 3, 1, 64));
    }

    #[cfg(feature = "alloc")]
    #[test]
    fn capacities_beyond_the_address_space_are_an_error() {
        let huge =
            WriterCapacity { string_bytes: 1, strings: usize::MAX / 8, frames: 1, threads: 1, rle_budget: 16384 };
        assert!(huge.ram_bytes().is_none());
        assert_eq!(VecWriterStorage::new(huge).err(), Some(StorageError::CapacityOverflow));
        // Threads are a limit, not an allocation: any count costs nothing until used.
        let unbounded =
            WriterCapacity { string_bytes: 1, strings: 1, frames: 1, threads: usize::MAX, rle_budget: 16384 };
        let storage = VecWriterStorage::new(unbounded).unwrap();
        assert_eq!(storage.thread_bytes(), 0);
        // The desktop figure of `docs/memory.md`: 16 MiB + 8·S + (2S+1)·4 + 32·F + (2F+1)·4 + 16,402.
        assert_eq!(WriterCapacity::DESKTOP.ram_bytes(), Some(31_473_690));
        let huge = ReaderCapacity { string_bytes: 1, strings: usize::MAX / 2, frames: 1, threads: 1, read_buffer: 64 };
        assert_eq!(VecReaderStorage::new(huge).err(), Some(StorageError::CapacityOverflow));
    }

    #[test]
    fn bad_buffers_are_rejected() {
        let mut staging = [0u8; 100];
        let mut empty_u32: [u32; 0] = [];
        let mut slots = [0u32; 4];
        let mut slots2 = [0u32; 4];
        let mut slots3 = [0u32; 4];
        let b = WriterBuffers {
            string_bytes: &mut [],
            string_spans: &mut [],
            string_slots: &mut slots,
            frames: &mut [],
            frame_slots: &mut slots2,
            frame_cache: &mut [],
            threads: &mut [],
            thread_slots: &mut slots3,
            stacks: &mut empty_u32,
            rle: &mut [],
            rle_budget: 16,
            staging: &mut staging,
        };
        assert_eq!(WriterStorage::new(b).err(), Some(StorageError::StagingTooSmall));
    }

    /// `mix` undone: the attacker's tool against an unkeyed table.
    fn unmix(mut y: u64) -> u64 {
        const M: u64 = 0xd6e8_feb8_6659_fd93;
        // Newton's iteration for the inverse of an odd number modulo 2^64.
        let mut inverse = M;
        for _ in 0..6 {
            inverse = inverse.wrapping_mul(2u64.wrapping_sub(M.wrapping_mul(inverse)));
        }
        y ^= y >> 32;
        y = y.wrapping_mul(inverse);
        y ^= y >> 32;
        y = y.wrapping_mul(inverse);
        y ^ (y >> 32)
    }

    /// Most thread ids of `ids` that share one home slot in a table of `len` slots.
    fn largest_pile(seed: u64, ids: &[u64], len: usize) -> usize {
        let mut piles = [0usize; 4096];
        for &id in ids {
            let hash = hash_thread(seed, id, 0);
            piles[(((hash >> 32) * len as u64) >> 32) as usize] += 1;
        }
        piles[..len].iter().copied().max().unwrap_or(0)
    }

    #[test]
    fn a_seed_scatters_thread_ids_crafted_to_collide() {
        // Ids whose unkeyed hashes share their high half: every one lands in the same slot,
        // whatever the table's size, so each new thread probes past all the others.
        let mut crafted = [0u64; 2000];
        for (i, id) in crafted.iter_mut().enumerate() {
            *id = unmix((0x1234_5678 << 32) | i as u64);
        }
        assert_eq!(hash_thread(0, crafted[7], 0) >> 32, 0x1234_5678);
        assert_eq!(largest_pile(0, &crafted, 4096), 2000);
        // Keyed, they spread like any ids: about half a thread per slot, piles of a few.
        for seed in [1, 0x243f_6a88_85a3_08d3, u64::MAX] {
            let pile = largest_pile(seed, &crafted, 4096);
            assert!(pile <= 8, "seed {seed:#x}: a pile of {pile}");
        }
    }
}
