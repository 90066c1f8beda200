//! Strings: the table in index order over one arena, and the writer's interner.

use super::index::*;
use super::*;

/// Where a string lives in the arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    pub(super) start: u32,
    pub(super) len: u32,
}

impl Span {
    /// An empty span, for initialising storage.
    pub const EMPTY: Span = Span { start: 0, len: 0 };
}

/// Strings in index order, bytes packed in one arena.
pub struct StringTable<'a> {
    pub(super) arena: Table<'a, u8>,
    pub(super) used: usize,
    pub(super) spans: Table<'a, Span>,
    pub(super) count: usize,
}

impl<'a> StringTable<'a> {
    pub(super) fn new(arena: &'a mut [u8], spans: &'a mut [Span]) -> Self {
        StringTable { arena: Table::Fixed(arena), used: 0, spans: Table::Fixed(spans), count: 0 }
    }

    /// A table in `Vec`s that grow as strings arrive (what they held before is forgotten).
    #[cfg(feature = "alloc")]
    pub(super) fn growable(arena: &'a mut alloc::vec::Vec<u8>, spans: &'a mut alloc::vec::Vec<Span>) -> Self {
        arena.clear();
        spans.clear();
        StringTable { arena: Table::Growable(arena), used: 0, spans: Table::Growable(spans), count: 0 }
    }

    /// Number of strings.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Forgets every string, keeping the memory.
    pub(crate) fn clear(&mut self) {
        self.used = 0;
        self.count = 0;
    }

    /// True when there are no strings.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes of string `index`.
    #[inline]
    pub fn get(&self, index: u32) -> Option<&[u8]> {
        let span = *self.spans.as_slice()[..self.count].get(index as usize)?;
        self.arena.as_slice().get(span.start as usize..span.start as usize + span.len as usize)
    }

    /// Appends a string of `len` bytes filled by `fill`; its index, or which resource ran out.
    /// The arena offset is a `u32`, so one table holds at most 4 GiB of string bytes.
    pub(crate) fn push_with<E>(
        &mut self,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<Result<u32, Resource>, E> {
        if !self.spans.grow(self.count + 1, Span::EMPTY) {
            return Ok(Err(Resource::Strings));
        }
        // Offsets are u32: one table holds at most 4 GiB of string bytes, growable or not.
        if len > u32::MAX as usize - self.used || !self.arena.grow(self.used + len, 0) {
            return Ok(Err(Resource::StringBytes));
        }
        let start = self.used;
        fill(&mut self.arena.as_mut_slice()[start..start + len])?;
        self.spans.as_mut_slice()[self.count] = Span { start: start as u32, len: len as u32 };
        self.used += len;
        self.count += 1;
        Ok(Ok(self.count as u32 - 1))
    }

    pub(super) fn push(&mut self, bytes: &[u8]) -> Result<u32, Resource> {
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
    pub(super) table: StringTable<'a>,
    pub(super) index: SlotIndex<'a>,
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
            Err(mut slot) => {
                let count = self.table.len();
                if count >= self.index.capacity() {
                    return Err(Resource::Strings);
                }
                let (seed, table) = (self.index.seed, &self.table);
                let rehash = (0..count as u32).map(|i| hash_bytes(seed, table.get(i).unwrap_or_default()));
                if self.index.make_room(count, rehash, Resource::Strings)? {
                    slot = self.index.vacant(hash);
                }
                let i = self.table.push(bytes)?;
                self.index.occupy(slot, i);
                Ok(i)
            }
        }
    }
}
