//! Caller-owned storage: the writer's interners and thread table, the reader's tables.
//!
//! Nothing here allocates. Every table is a slice the caller lends: static arrays on
//! firmware ([`StaticWriterStorage`], [`StaticReaderStorage`], whose capacity rules are
//! checked at compile time), `Vec`s on hosts (`VecWriterStorage`, `VecReaderStorage` behind
//! the `alloc` feature), or any slices through [`WriterBuffers`] and [`ReaderBuffers`].
//! Memory use is therefore a formula of the chosen capacities; `docs/memory.md` gives it.
//!
//! One module per part: `index` (keyed hashing and the open-addressing slot index), `strings`
//! and `frames` (the interners), `threads` (the writer's thread table), `writer` and
//! `reader` (each side's slices, checked, and fixed arrays for a `static`), `vec` (`Vec`s,
//! feature `alloc`); the `Table` both thread tables grow in is here.

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

mod frames;
mod index;
mod reader;
mod strings;
mod threads;
#[cfg(feature = "alloc")]
mod vec;
mod writer;

pub(crate) use frames::*;
pub use reader::*;
pub use strings::*;
pub use threads::*;
#[cfg(feature = "alloc")]
pub use vec::*;
pub use writer::*;

/// A table the reader fills as it goes: a borrowed slice of fixed length, or (feature `alloc`)
/// a `Vec` it may lengthen as the file's data asks for more.
pub(crate) enum Table<'a, T> {
    Fixed(&'a mut [T]),
    #[cfg(feature = "alloc")]
    Growable(&'a mut alloc::vec::Vec<T>),
}

impl<T: Copy> Table<'_, T> {
    #[inline]
    pub(crate) fn as_slice(&self) -> &[T] {
        match self {
            Table::Fixed(s) => s,
            #[cfg(feature = "alloc")]
            Table::Growable(v) => v,
        }
    }

    #[inline]
    pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
        match self {
            Table::Fixed(s) => s,
            #[cfg(feature = "alloc")]
            Table::Growable(v) => v,
        }
    }

    /// Makes the table at least `len` long, doubling a growable one so that growth costs
    /// amortised constant time per element; false if it cannot (fixed, or out of memory).
    pub(crate) fn grow(&mut self, len: usize, fill: T) -> bool {
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

    /// Gives a growable table's memory back (a fixed one keeps its slice, which is the
    /// caller's).
    fn release(&mut self) {
        #[cfg(feature = "alloc")]
        if let Table::Growable(v) = self {
            v.clear();
            v.shrink_to_fit();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::index::hash_thread;
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
        t.push_rle(a, &[9], 0);
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
        assert_eq!({ s.threads.get(0).prev_ts }, 5);
        assert_eq!(s.threads.find_or_create(8, 0, 5), Err(Resource::Threads));
    }

    /// The RAM formulas of `docs/memory.md`, checked against the real layout.
    #[cfg(target_pointer_width = "64")]
    #[test]
    fn ram_formulas_match_layout() {
        fn writer(b: usize, s: usize, f: usize, t: usize, r: usize, st: usize) -> usize {
            // The storage's fields are at most 4-byte aligned (the thread entries are packed).
            (b + 16 * s + 40 * f + (1076 + r) * t + st).next_multiple_of(4)
        }
        fn reader(b: usize, s: usize, f: usize, t: usize, rb: usize) -> usize {
            (b + 8 * s + 28 * f + 1060 * t + rb).next_multiple_of(4)
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
