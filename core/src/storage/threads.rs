//! The writer's thread table: each thread's previous stack and pending REPEAT run, fixed
//! or grown by use.

use super::index::*;
use super::*;

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
    pub(super) stack: usize,
    pub(super) stack_len: usize,
    pub(super) rle: usize,
    pub(super) rle_len: usize,
}

impl ThreadChunks {
    pub(super) const EMPTY: ThreadChunks = ThreadChunks { stack: 0, stack_len: 0, rle: 0, rle_len: 0 };
}

/// Smallest REPEAT chunk on growable storage: a run of one short entry.
pub(super) const MIN_RLE_CHUNK: usize = 16;

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
    /// Growable storage only (empty on fixed): each thread's chunks of `stacks` and `rle`.
    pub(super) chunks: Table<'a, ThreadChunks>,
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
        if self.chunks.is_growable() {
            if !self.chunks.grow(self.count + 1, ThreadChunks::EMPTY) {
                return Err(Resource::Threads);
            }
            self.chunks.as_mut_slice()[self.count] = ThreadChunks::EMPTY;
        }
        let pairs = self.entries.as_slice()[..self.count].iter().map(|t| (t.thread_id, t.interpreter_id));
        if make_room(&mut self.slots, self.count, pairs, self.seed)? {
            slot = match self.lookup(thread_id, interpreter_id) {
                Err(slot) => slot,
                Ok(_) => unreachable!("the pair was missing before the rehash"),
            };
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
    pub(super) fn starts(&self, i: usize) -> (usize, usize) {
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
