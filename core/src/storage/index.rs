//! Hashing and the open-addressing slot index every interner and thread table uses.

use super::{Resource, Table};

pub(super) const K: u64 = 0x9e37_79b9_7f4a_7c15;

/// A finalising mix so that nearby keys spread over the whole table.
#[inline]
pub(super) fn mix(mut x: u64) -> u64 {
    x ^= x >> 32;
    x = x.wrapping_mul(0xd6e8_feb8_6659_fd93);
    x ^= x >> 32;
    x = x.wrapping_mul(0xd6e8_feb8_6659_fd93);
    x ^ (x >> 32)
}

/// Word-at-a-time hash of a byte string, keyed by `seed` (names can come from a hostile file
/// being converted: with a secret seed, colliding names cannot be planned).
#[inline]
pub(super) fn hash_bytes(seed: u64, bytes: &[u8]) -> u64 {
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
pub(super) struct SlotIndex<'a> {
    pub(super) slots: Table<'a, u32>,
    /// Key of the hash (see [`WriterStorage::with_seed`]).
    pub(super) seed: u64,
}

impl<'a> SlotIndex<'a> {
    pub(super) fn new(slots: &'a mut [u32]) -> Self {
        slots.fill(0);
        SlotIndex { slots: Table::Fixed(slots), seed: 0 }
    }

    /// An index in a `Vec` that grows with its entries (what it held before is forgotten).
    #[cfg(feature = "alloc")]
    pub(super) fn growable(slots: &'a mut alloc::vec::Vec<u32>) -> Self {
        slots.clear();
        // A probe needs an empty slot to end on: never an empty table.
        slots.resize(GROWABLE_START_SLOTS, 0);
        SlotIndex { slots: Table::Growable(slots), seed: 0 }
    }

    /// Entries this index can hold (one slot always stays empty); a growable one, as many as
    /// the format's u32 indices allow.
    pub(super) fn capacity(&self) -> usize {
        let slots = if self.slots.is_growable() { usize::MAX } else { self.slots.as_slice().len() };
        slots.saturating_sub(1).min(u32::MAX as usize - 1)
    }

    /// `Ok(index)` of the entry for which `is_match` holds, or `Err(slot)` where it would go.
    #[inline]
    pub(super) fn find(&self, hash: u64, is_match: impl FnMut(u32) -> bool) -> Result<u32, usize> {
        slot_find(self.slots.as_slice(), hash, is_match)
    }

    /// The empty slot where an entry of `hash` would go.
    pub(super) fn vacant(&self, hash: u64) -> usize {
        // A probe that matches nothing always ends on an empty slot (`Err`).
        slot_find(self.slots.as_slice(), hash, |_| false).err().unwrap_or_default()
    }

    #[inline]
    pub(super) fn occupy(&mut self, slot: usize, index: u32) {
        self.slots.as_mut_slice()[slot] = index + 1;
    }

    /// Makes a growable index ready for entry number `count` as [`make_room`] does for
    /// threads, refilled from the entries' hashes in order; true if it was rebuilt (a vacant
    /// slot found before has moved). A fixed index is left as it is.
    pub(super) fn make_room(
        &mut self,
        count: usize,
        hashes: impl Iterator<Item = u64>,
        resource: Resource,
    ) -> Result<bool, Resource> {
        if !self.slots.is_growable() || 2 * (count + 1) < self.slots.as_slice().len() {
            return Ok(false);
        }
        if !self.slots.grow(4 * (count + 1), 0) {
            return Err(resource);
        }
        let slots = self.slots.as_mut_slice();
        slots.fill(0);
        for (i, hash) in hashes.enumerate() {
            if let Err(slot) = slot_find(slots, hash, |_| false) {
                slots[slot] = i as u32 + 1;
            }
        }
        Ok(true)
    }
}

/// Slots a growable index starts with.
#[cfg(feature = "alloc")]
const GROWABLE_START_SLOTS: usize = 64;

/// Linear probing over `slots` (0 = empty, otherwise entry index + 1): `Ok(index)` of the
/// entry for which `is_match` holds, or `Err(slot)` where it would go. At least one slot must
/// be empty so that a probe always ends.
#[inline]
pub(super) fn slot_find(slots: &[u32], hash: u64, mut is_match: impl FnMut(u32) -> bool) -> Result<u32, usize> {
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

#[inline]
pub(super) fn hash_thread(seed: u64, thread_id: u64, interpreter_id: u32) -> u64 {
    // Keyed before the mix: `mix` alone can be inverted, so without a secret seed a file can
    // hold thread ids that all land in one slot (quadratic reading; see `with_seed`).
    mix(thread_id ^ u64::from(interpreter_id).wrapping_mul(K) ^ seed)
}

/// Makes a growable thread index ready for entry number `count`: past half full it grows to
/// four slots an entry and is refilled from `pairs` (the entries so far, in order), so
/// probes stay short. True if it was rebuilt (a free slot found before has moved); fixed
/// indexes are left as they are.
pub(super) fn make_room(
    slots: &mut Table<'_, u32>,
    count: usize,
    pairs: impl Iterator<Item = (u64, u32)>,
    seed: u64,
) -> Result<bool, Resource> {
    if !slots.is_growable() || 2 * (count + 1) < slots.as_slice().len() {
        return Ok(false);
    }
    if !slots.grow(4 * (count + 1), 0) {
        return Err(Resource::Threads);
    }
    rebuild_index(slots.as_mut_slice(), pairs, seed);
    Ok(true)
}

/// Refills an emptied index with `pairs` in entry order (entry `i` at its probe's end).
pub(super) fn rebuild_index(slots: &mut [u32], pairs: impl Iterator<Item = (u64, u32)>, seed: u64) {
    slots.fill(0);
    for (i, (thread_id, interpreter_id)) in pairs.enumerate() {
        if let Err(slot) = slot_find(slots, hash_thread(seed, thread_id, interpreter_id), |_| false) {
            slots[slot] = i as u32 + 1;
        }
    }
}
