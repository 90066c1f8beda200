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
    pub(super) entries: &'a mut [FrameEntry],
    pub(super) count: usize,
    pub(super) index: SlotIndex<'a>,
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
