//! What a reader works in: the thread table with each thread's current stack, the caller's
//! slices ([`ReaderBuffers`]) checked into [`ReaderStorage`]; fixed arrays for a `static`
//! ([`StaticReaderStorage`]).

use super::index::*;
use super::*;

/// One reader thread: its pair, its timestamp and its current stack, which lives end-aligned
/// in the thread's chunk of the stack arena (innermost first, so pops and pushes touch only
/// the front and the frames a record keeps never move).
// Packed to 4-byte alignment: 28 bytes where the `u64`s would pad it to 32 (a million
// threads, 4 MB). Fields are only ever copied, never borrowed, so no reference is unaligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, packed(4))]
pub struct ReaderThread {
    pub(crate) thread_id: u64,
    pub(crate) prev_ts: u64,
    pub(crate) interpreter_id: u32,
    /// First arena slot of the chunk.
    pub(super) chunk: u32,
    /// Slots in the chunk.
    pub(super) chunk_len: u16,
    /// Frames in the current stack.
    pub(super) depth: u16,
}

impl ReaderThread {
    /// An unused entry, for initialising storage.
    pub const EMPTY: ReaderThread =
        ReaderThread { thread_id: 0, prev_ts: 0, interpreter_id: 0, chunk: 0, chunk_len: 0, depth: 0 };

    /// Frames in the current stack.
    #[inline]
    pub(crate) fn depth(&self) -> usize {
        usize::from(self.depth)
    }

    /// What [`ReaderThreads::reshape`] does to the depth and clock, leaving the frames
    /// alone: for a check that keeps no stacks, after which the stacks are not read again.
    #[inline]
    pub(crate) fn set_depth(&mut self, keep: Keep, push: usize, delta: u64) {
        self.depth = (keep.count() + push) as u16;
        self.prev_ts = self.prev_ts.wrapping_add(delta);
    }
}

/// Which frames of a thread's current stack a record keeps below the frames it pushes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    /// The outermost `n` frames (FULL keeps none; SUFFIX and POP_PUSH keep the bottom).
    Bottom(usize),
    /// The innermost `n` frames, moved to the bottom: CPython's SUFFIX with nothing pushed.
    Innermost(usize),
}

impl Keep {
    /// Frames kept.
    #[inline]
    pub(crate) fn count(self) -> usize {
        match self {
            Keep::Bottom(n) | Keep::Innermost(n) => n,
        }
    }
}

/// The reader's thread table with each thread's current stack.
///
/// On fixed storage every thread gets a whole 256-slot chunk when it appears, as many
/// threads as the slices allow. On growable storage a thread's chunk is the smallest power
/// of two that holds its deepest stack so far: a deeper stack moves it to a new
/// chunk twice the size at the end of the arena, leaving the old one unused, which at most
/// doubles the arena (the old chunks of one thread sum to less than its current one). So
/// memory follows what the threads hold — about 44 bytes for a thread with a one-frame stack —
/// never the count a header declares.
pub(crate) struct ReaderThreads<'a> {
    pub(super) entries: Table<'a, ReaderThread>,
    pub(super) count: usize,
    /// Open-addressing index over `entries` (see [`SlotIndex`]).
    pub(super) slots: Table<'a, u32>,
    pub(super) arena: Table<'a, u32>,
    pub(super) arena_used: usize,
    /// Most threads: fixed storage's capacity, or the growable limit.
    pub(super) capacity: usize,
    /// Key of the thread hash (see [`ReaderStorage::with_seed`]).
    pub(super) seed: u64,
    /// The pair found or made last and its entry: records of one thread come in stretches,
    /// so it is compared before anything is searched, here rather than in the table. `None`
    /// before the first thread and after [`Self::release`].
    pub(super) last: Option<(u64, u32, usize)>,
}

/// Up to this many threads a lookup compares the entries instead of hashing.
const FEW_THREADS: usize = 8;

/// Smallest chunk on growable storage: one frame, so a thread seen with a one-frame stack
/// holds one slot (a million such threads: 4 MB, where a 4-slot start took 16 MB). A deeper
/// stack moves the chunk to the next power of two, which wastes at most its own size.
pub(super) const MIN_CHUNK: usize = 1;

impl<'a> ReaderThreads<'a> {
    pub(super) fn fixed(entries: &'a mut [ReaderThread], slots: &'a mut [u32], stacks: &'a mut [u32]) -> Self {
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
            last: None,
        }
    }

    #[cfg(feature = "alloc")]
    pub(super) fn growable(
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
            last: None,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// Gives the growable tables' memory back once the reader has read its last record: no
    /// thread is looked up after it, and [`Self::len`] still tells how many there were.
    pub(crate) fn release(&mut self) {
        self.entries.release();
        self.slots.release();
        self.arena.release();
        self.arena_used = 0;
        self.last = None;
    }

    /// Most threads this table can hold.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// The entry for the pair: `Ok(i)` if known, `Err(slot)` if new, which [`Self::create`]
    /// then fills.
    #[inline(always)]
    pub(crate) fn find(&mut self, thread_id: u64, interpreter_id: u32) -> Result<usize, usize> {
        if let Some((t, i, entry)) = self.last {
            if (t, i) == (thread_id, interpreter_id) {
                return Ok(entry);
            }
        }
        self.search(thread_id, interpreter_id)
    }

    /// [`Self::find`] past the entry found last.
    fn search(&mut self, thread_id: u64, interpreter_id: u32) -> Result<usize, usize> {
        let entries = &self.entries.as_slice()[..self.count];
        // Most profiles have a few threads, whose records interleave: comparing a few entries
        // costs less than hashing. A miss still goes to the index, which names the free slot.
        if entries.len() <= FEW_THREADS {
            if let Some(i) = entries.iter().position(|t| t.thread_id == thread_id && t.interpreter_id == interpreter_id)
            {
                self.last = Some((thread_id, interpreter_id, i));
                return Ok(i);
            }
        }
        let found = slot_find(self.slots.as_slice(), hash_thread(self.seed, thread_id, interpreter_id), |i| {
            let t = &entries[i as usize];
            t.thread_id == thread_id && t.interpreter_id == interpreter_id
        });
        if let Ok(i) = found {
            self.last = Some((thread_id, interpreter_id, i as usize));
        }
        found.map(|i| i as usize)
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
        let pairs = self.entries.as_slice()[..self.count].iter().map(|t| (t.thread_id, t.interpreter_id));
        if make_room(&mut self.slots, self.count, pairs, self.seed)? {
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
        self.last = Some((thread_id, interpreter_id, i));
        self.slots.as_mut_slice()[slot] = i as u32 + 1;
        Ok(i)
    }

    pub(crate) fn get(&self, i: usize) -> &ReaderThread {
        &self.entries.as_slice()[i]
    }

    /// Frames in the thread's current stack.
    #[inline]
    pub(crate) fn depth(&self, i: usize) -> usize {
        self.entries.as_slice()[i].depth()
    }

    /// The thread's entry (its clock), without its stack.
    #[inline]
    pub(crate) fn entry(&mut self, i: usize) -> &mut ReaderThread {
        &mut self.entries.as_mut_slice()[i]
    }

    /// [`ReaderThread::set_depth`] of the thread.
    #[inline]
    pub(crate) fn set_depth(&mut self, i: usize, keep: Keep, push: usize, delta: u64) {
        self.entries.as_mut_slice()[i].set_depth(keep, push, delta);
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

    /// Makes the thread's stack `keep` followed (outward) by `push` new innermost frames,
    /// advances its clock by `delta`, and returns the slots for those frames, innermost
    /// first, for the caller to fill. The caller has checked `keep` against the current depth
    /// and the total against 256.
    #[inline(always)]
    pub(crate) fn reshape(&mut self, i: usize, keep: Keep, push: usize, delta: u64) -> Result<&mut [u32], Resource> {
        let kept = keep.count();
        let depth = kept + push;
        let t = &mut self.entries.as_mut_slice()[i];
        let (chunk, chunk_len, old_depth) = (t.chunk as usize, usize::from(t.chunk_len), usize::from(t.depth));
        if depth > chunk_len {
            return self.reshape_moving(i, kept, depth, delta);
        }
        t.depth = depth as u16;
        t.prev_ts = t.prev_ts.wrapping_add(delta);
        let end = chunk + chunk_len;
        let arena = self.arena.as_mut_slice();
        if let Keep::Innermost(n) = keep {
            let old_top = end - old_depth;
            arena.copy_within(old_top..old_top + n, end - n);
        }
        Ok(&mut arena[end - depth..end - kept])
    }

    /// [`Self::reshape`] for a stack deeper than its chunk: only growable storage gets here
    /// (fixed chunks hold 256), and only the bottom frames survive (`Keep::Innermost` never
    /// grows a stack).
    #[cold]
    fn reshape_moving(&mut self, i: usize, kept: usize, depth: usize, delta: u64) -> Result<&mut [u32], Resource> {
        let len = depth.next_power_of_two().clamp(MIN_CHUNK, MAX_STACK_DEPTH);
        let start = self.arena_used;
        let end = start.checked_add(len).filter(|&e| e <= u32::MAX as usize).ok_or(Resource::Stacks)?;
        if !self.arena.grow(end, 0) {
            return Err(Resource::Stacks);
        }
        let t = &mut self.entries.as_mut_slice()[i];
        let old_end = t.chunk as usize + usize::from(t.chunk_len);
        t.chunk = start as u32;
        t.chunk_len = len as u16;
        t.depth = depth as u16;
        t.prev_ts = t.prev_ts.wrapping_add(delta);
        let arena = self.arena.as_mut_slice();
        arena.copy_within(old_end - kept..old_end, end - kept);
        self.arena_used = end;
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
    pub(crate) frames: Table<'a, FrameEntry>,
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
            frames: Table::Fixed(b.frames),
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
    pub(super) string_bytes: [u8; STRING_BYTES],
    pub(super) string_spans: [Span; STRINGS],
    pub(super) frames: [FrameEntry; FRAMES],
    pub(super) threads: [ReaderThread; THREADS],
    pub(super) thread_slots: [[u32; 2]; THREADS],
    pub(super) stacks: [[u32; MAX_STACK_DEPTH]; THREADS],
    pub(super) read_buffer: [u8; READ_BUFFER],
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
