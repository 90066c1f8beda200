//! Frames: the writer's frame interner and the recent-frame cache.

use super::index::*;
use super::*;

#[inline]
pub(super) fn hash_frame(seed: u64, f: &FrameEntry) -> u64 {
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
    pub(super) entries: Table<'a, FrameEntry>,
    pub(super) count: usize,
    pub(super) index: SlotIndex<'a>,
}

impl<'a> FrameInterner<'a> {
    pub(crate) fn entries(&self) -> &[FrameEntry] {
        &self.entries.as_slice()[..self.count]
    }

    /// Room for one more entry (a growable table grows, and its index with it); the vacant
    /// slot found for `hash` before, or where it moved to (`None`, for an entry the index
    /// will not hold, stays `None`).
    fn make_room(&mut self, hash: u64, slot: Option<usize>) -> Result<Option<usize>, Resource> {
        if self.count >= self.index.capacity() || !self.entries.grow(self.count + 1, FrameEntry::EMPTY) {
            return Err(Resource::Frames);
        }
        let seed = self.index.seed;
        let rehash = self.entries.as_slice()[..self.count].iter().map(|e| hash_frame(seed, e));
        let rebuilt = self.index.make_room(self.count, rehash, Resource::Frames)?;
        Ok(if rebuilt { slot.map(|_| self.index.vacant(hash)) } else { slot })
    }

    #[inline]
    pub(crate) fn intern(&mut self, frame: FrameEntry) -> Result<u32, Resource> {
        let hash = hash_frame(self.index.seed, &frame);
        let entries = &self.entries.as_slice()[..self.count];
        match self.index.find(hash, |i| entries[i as usize] == frame) {
            Ok(i) => Ok(i),
            Err(slot) => {
                let slot = self.make_room(hash, Some(slot))?.unwrap_or(slot);
                self.entries.as_mut_slice()[self.count] = frame;
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
        let entries = &self.entries.as_slice()[..self.count];
        let vacant = self.index.find(hash, |i| entries[i as usize] == frame).err();
        // With an equal entry there (`vacant` is None), the index keeps finding that one.
        let vacant = self.make_room(hash, vacant)?;
        self.entries.as_mut_slice()[self.count] = frame;
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
    pub(super) slots: &'a mut [u32],
}

impl RecentFrames<'_> {
    #[inline]
    pub(super) fn slot(&self, key: u64) -> usize {
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
