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
    pub(super) arena: &'a mut [u8],
    pub(super) used: usize,
    pub(super) spans: &'a mut [Span],
    pub(super) count: usize,
}

impl<'a> StringTable<'a> {
    pub(super) fn new(arena: &'a mut [u8], spans: &'a mut [Span]) -> Self {
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
