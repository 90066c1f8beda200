//! The writer's thread table: each thread's previous stack and pending REPEAT run, fixed
//! or grown by use.

use super::index::*;
use super::*;

/// One writer thread: `(thread_id, interpreter_id)`, timestamp of its last sample, its
/// previous stack and its pending REPEAT run, and where in the two arenas those are kept.
/// The places are in the entry itself, so the per-sample path reads one entry whether the
/// storage is fixed or grown by use.
// Packed to 4-byte alignment and the arenas' places in `u32`s (the storage keeps both arenas
// below 4 Gi entries): 44 bytes where `usize` places and 8-byte alignment took 56 (a million
// threads, 12 MB). Fields are only ever copied, never borrowed, so no reference is unaligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, packed(4))]
pub struct WriterThread {
    pub(crate) thread_id: u64,
    pub(crate) prev_ts: u64,
    /// Where the previous stack starts in the stack arena.
    pub(super) stack_start: u32,
    /// Where the REPEAT bytes start in the REPEAT arena.
    pub(super) rle_start: u32,
    pub(crate) interpreter_id: u32,
    pub(crate) rle_len: u32,
    pub(crate) rle_count: u32,
    /// REPEAT bytes the thread has room for at `rle_start`.
    pub(super) rle_room: u32,
    pub(crate) depth: u16,
    /// Stack ids the thread has room for at `stack_start`.
    pub(super) stack_room: u16,
}

impl WriterThread {
    /// An unused entry, for initialising storage.
    pub const EMPTY: WriterThread = WriterThread {
        thread_id: 0,
        prev_ts: 0,
        stack_start: 0,
        rle_start: 0,
        interpreter_id: 0,
        rle_len: 0,
        rle_count: 0,
        rle_room: 0,
        depth: 0,
        stack_room: 0,
    };
}

/// Smallest REPEAT chunk on growable storage: a run of one short entry.
pub(super) const MIN_RLE_CHUNK: usize = 16;

/// `n` entries, or as many as either arena may have if that is fewer: a thread's places in
/// them are `u32`s (on a 32-bit target, no fewer than `n`).
fn within_arena(n: usize) -> usize {
    u32::try_from(n).unwrap_or(u32::MAX) as usize
}

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
    pub(super) entries: Table<'a, WriterThread>,
    pub(super) count: usize,
    /// Open-addressing index over `entries` (see [`slot_find`]).
    pub(super) slots: Table<'a, u32>,
    /// Key of the thread hash (see [`WriterStorage::with_seed`]).
    pub(super) seed: u64,
    pub(super) stacks: Table<'a, u32>,
    pub(super) rle: Table<'a, u8>,
    pub(super) stacks_used: usize,
    pub(super) rle_used: usize,
    pub(super) rle_budget: usize,
    /// Most threads: fixed storage's capacity, or the growable limit.
    pub(super) capacity: usize,
}

impl<'a> WriterThreads<'a> {
    pub(super) fn fixed(
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
            .min(within_arena(stacks.len()) / MAX_STACK_DEPTH)
            .min(within_arena(rle.len()) / rle_budget);
        WriterThreads {
            entries: Table::Fixed(entries),
            count: 0,
            slots: Table::Fixed(slots),
            seed: 0,
            stacks: Table::Fixed(stacks),
            rle: Table::Fixed(rle),
            stacks_used: 0,
            rle_used: 0,
            rle_budget,
            capacity,
        }
    }

    #[cfg(feature = "alloc")]
    pub(super) fn growable(v: &'a mut GrowableThreads, rle_budget: usize, max_threads: usize) -> Self {
        v.slots.clear();
        v.slots.resize(16, 0);
        WriterThreads {
            entries: Table::Growable(&mut v.entries),
            count: 0,
            slots: Table::Growable(&mut v.slots),
            seed: 0,
            stacks: Table::Growable(&mut v.stacks),
            rle: Table::Growable(&mut v.rle),
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

    /// Forgets every thread (a writer's next file starts with none), keeping the memory.
    pub(crate) fn clear(&mut self) {
        self.count = 0;
        self.stacks_used = 0;
        self.rle_used = 0;
        self.slots.as_mut_slice().fill(0);
    }

    pub(crate) fn rle_budget(&self) -> usize {
        self.rle_budget
    }

    #[inline]
    pub(super) fn lookup(&self, thread_id: u64, interpreter_id: u32) -> Result<usize, usize> {
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
        let pairs = self.entries.as_slice()[..self.count].iter().map(|t| (t.thread_id, t.interpreter_id));
        if make_room(&mut self.slots, self.count, pairs, self.seed)? {
            slot = match self.lookup(thread_id, interpreter_id) {
                Err(slot) => slot,
                Ok(_) => unreachable!("the pair was missing before the rehash"),
            };
        }
        let i = self.count;
        // Fixed storage gives each thread its whole share now; growable storage, nothing
        // until it is needed.
        let (stack_start, stack_room, rle_start, rle_room) = if self.stacks.is_growable() {
            (0, 0, 0, 0)
        } else {
            // The capacity keeps both products within the arenas' `u32` places.
            (
                (i * MAX_STACK_DEPTH) as u32,
                MAX_STACK_DEPTH as u16,
                (i * self.rle_budget) as u32,
                u32::try_from(self.rle_budget).unwrap_or(u32::MAX),
            )
        };
        self.entries.as_mut_slice()[i] = WriterThread {
            thread_id,
            interpreter_id,
            prev_ts: start,
            stack_start,
            stack_room,
            rle_start,
            rle_room,
            ..WriterThread::EMPTY
        };
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

    /// The thread's previous stack, innermost first.
    pub(crate) fn prev_stack(&self, i: usize) -> &[u32] {
        let t = &self.entries.as_slice()[i];
        let start = t.stack_start as usize;
        &self.stacks.as_slice()[start..start + usize::from(t.depth)]
    }

    /// Makes room for a previous stack of `depth` ids (at most 256), keeping the current one.
    /// Only growable storage ever grows: fixed storage gave every thread room for 256.
    #[inline]
    pub(crate) fn reserve_stack(&mut self, i: usize, depth: usize) -> Result<(), Resource> {
        let t = self.entries.as_slice()[i];
        if depth <= usize::from(t.stack_room) {
            return Ok(());
        }
        self.move_stack(i, t, depth)
    }

    #[cold]
    fn move_stack(&mut self, i: usize, t: WriterThread, depth: usize) -> Result<(), Resource> {
        // A fixed arena is shared out between threads: nothing moves in it.
        if !self.stacks.is_growable() {
            return Err(Resource::Stacks);
        }
        let len = depth.next_power_of_two().clamp(MIN_CHUNK, MAX_STACK_DEPTH);
        let start = self.stacks_used;
        let end = start.checked_add(len).filter(|&e| within_arena(e) == e).ok_or(Resource::Stacks)?;
        if !self.stacks.grow(end, 0) {
            return Err(Resource::Stacks);
        }
        let kept = usize::from(t.depth);
        let old = t.stack_start as usize;
        self.stacks.as_mut_slice().copy_within(old..old + kept, start);
        self.stacks_used = end;
        let e = &mut self.entries.as_mut_slice()[i];
        e.stack_start = start as u32;
        // `len` is at most MAX_STACK_DEPTH (256).
        e.stack_room = len as u16;
        Ok(())
    }

    /// Sets the previous stack; [`Self::reserve_stack`] made room for it.
    pub(crate) fn set_prev_stack(&mut self, i: usize, stack: &[u32]) {
        let t = &mut self.entries.as_mut_slice()[i];
        t.depth = stack.len() as u16;
        let start = t.stack_start as usize;
        self.stacks.as_mut_slice()[start..start + stack.len()].copy_from_slice(stack);
    }

    /// The thread's pending run bytes.
    pub(crate) fn rle(&self, i: usize) -> &[u8] {
        let t = &self.entries.as_slice()[i];
        let start = t.rle_start as usize;
        &self.rle.as_slice()[start..start + t.rle_len as usize]
    }

    /// Makes room for `extra` more run bytes, keeping the pending ones; the caller checked
    /// the budget.
    #[inline]
    pub(crate) fn reserve_rle(&mut self, i: usize, extra: usize) -> Result<(), Resource> {
        let t = self.entries.as_slice()[i];
        let need = t.rle_len as usize + extra;
        if need <= t.rle_room as usize {
            return Ok(());
        }
        self.move_rle(i, t, need)
    }

    #[cold]
    fn move_rle(&mut self, i: usize, t: WriterThread, need: usize) -> Result<(), Resource> {
        if !self.rle.is_growable() {
            return Err(Resource::Threads);
        }
        let kept = t.rle_len as usize;
        let len = need.next_power_of_two().max(MIN_RLE_CHUNK).min(self.rle_budget).max(need);
        // The budget bounds a REPEAT record, whose lengths are u32.
        let room = u32::try_from(len).map_err(|_| Resource::Threads)?;
        let start = self.rle_used;
        let end = start.checked_add(len).filter(|&e| within_arena(e) == e).ok_or(Resource::Threads)?;
        if !self.rle.grow(end, 0) {
            return Err(Resource::Threads);
        }
        let old = t.rle_start as usize;
        self.rle.as_mut_slice().copy_within(old..old + kept, start);
        self.rle_used = end;
        let e = &mut self.entries.as_mut_slice()[i];
        e.rle_start = start as u32;
        e.rle_room = room;
        Ok(())
    }

    /// Appends one REPEAT entry, its timestamp delta (a varint) and status byte, straight
    /// into the thread's bytes; [`Self::reserve_rle`] made room for it.
    #[inline]
    pub(crate) fn push_rle(&mut self, i: usize, delta: &[u8], status: u8) {
        let t = &mut self.entries.as_mut_slice()[i];
        let start = t.rle_start as usize + t.rle_len as usize;
        t.rle_len += delta.len() as u32 + 1;
        t.rle_count += 1;
        let end = start + delta.len();
        let rle = self.rle.as_mut_slice();
        rle[start..end].copy_from_slice(delta);
        rle[end] = status;
    }
}
