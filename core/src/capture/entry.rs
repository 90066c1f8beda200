//! One entry in the ring's words, and the consumer's view of it.

use super::atomic::{AtomicU32, Ordering};
use crate::records::MAX_STACK_DEPTH;
use crate::writer::FrameId;

/// Where a sample was taken: the fields of a Tachyon thread sample besides its stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Taken {
    /// Microseconds, on the clock the writer's `start_time_us` is on.
    pub timestamp_us: u64,
    /// CPython's interpreter id (0 for a runtime with one).
    pub interpreter_id: u32,
    /// The thread's id as the file should name it.
    pub thread_id: u64,
    /// Tachyon's status bits (`0` when the runtime has none).
    pub status: u8,
}

/// Words before the stack: header, timestamp (2), thread id (2), interpreter id, depth.
pub(super) const HEADER_WORDS: usize = 7;

/// The longest entry: 256 `(code id, offset)` pairs.
pub(super) const MAX_ENTRY_WORDS: usize = Kind::Code.entry_words(MAX_STACK_DEPTH);

/// What an entry's stack holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// One word a frame: a frame id.
    Ids = 1,
    /// Three words a frame: code id (low, high), offset.
    Code = 2,
}

impl Kind {
    pub(super) const fn words_per_frame(self) -> usize {
        match self {
            Kind::Ids => 1,
            Kind::Code => 3,
        }
    }

    /// The words of a whole entry of `depth` frames of this kind.
    pub(super) const fn entry_words(self, depth: usize) -> usize {
        HEADER_WORDS + depth * self.words_per_frame()
    }
}

/// The first word: kind (bits 24–31), status (16–23), the entry's length in words (0–15).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Header {
    pub(super) kind: Kind,
    pub(super) status: u8,
    pub(super) words: u16,
}

impl Header {
    /// The word that says "the rest of the ring up to its end is unused; go to the start".
    pub(super) const PAD: u32 = u32::MAX;

    pub(super) const fn encode(self) -> u32 {
        (self.kind as u32) << 24 | (self.status as u32) << 16 | self.words as u32
    }

    pub(super) fn decode(word: u32) -> Option<Header> {
        let kind = match word >> 24 {
            1 => Kind::Ids,
            2 => Kind::Code,
            _ => return None,
        };
        Some(Header { kind, status: (word >> 16) as u8, words: word as u16 })
    }
}

/// A sample as the consumer sees it, read from the ring's words while it holds them.
#[derive(Clone, Copy)]
pub struct Entry<'r> {
    taken: Taken,
    kind: Kind,
    stack: &'r [AtomicU32],
}

/// The stack of an [`Entry`], innermost first.
#[derive(Clone)]
pub enum Stack<'r> {
    /// Frame ids interned before the push.
    Ids(Ids<'r>),
    /// The runtime's `(code id, offset)` pairs.
    Code(CodePairs<'r>),
}

impl<'r> Entry<'r> {
    /// The entry in `words` (exactly its length), or `None` if its fields disagree.
    pub(super) fn new(words: &'r [AtomicU32]) -> Option<Self> {
        let word = |i: usize| words.get(i).map(|w| w.load(Ordering::Relaxed));
        let header = Header::decode(word(0)?)?;
        let wide = |i: usize| Some(u64::from(word(i)?) | u64::from(word(i + 1)?) << 32);
        let taken =
            Taken { timestamp_us: wide(1)?, thread_id: wide(3)?, interpreter_id: word(5)?, status: header.status };
        let depth = word(6)? as usize;
        let stack = words.get(HEADER_WORDS..)?;
        if depth > MAX_STACK_DEPTH || stack.len() != depth * header.kind.words_per_frame() {
            return None;
        }
        Some(Entry { taken, kind: header.kind, stack })
    }

    /// Timestamp, interpreter, thread and status.
    pub fn taken(&self) -> Taken {
        self.taken
    }

    /// How many frames the stack has.
    pub fn depth(&self) -> usize {
        self.stack.len() / self.kind.words_per_frame()
    }

    /// The stack.
    pub fn stack(&self) -> Stack<'r> {
        match self.kind {
            Kind::Ids => Stack::Ids(Ids { words: self.stack.iter() }),
            Kind::Code => Stack::Code(CodePairs { words: self.stack.chunks_exact(3) }),
        }
    }
}

/// Frame ids of an entry, innermost first.
#[derive(Clone)]
pub struct Ids<'r> {
    words: core::slice::Iter<'r, AtomicU32>,
}

impl Iterator for Ids<'_> {
    type Item = FrameId;

    fn next(&mut self) -> Option<FrameId> {
        self.words.next().map(|w| FrameId(w.load(Ordering::Relaxed)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.words.size_hint()
    }
}

/// `(code id, offset)` pairs of an entry, innermost first.
#[derive(Clone)]
pub struct CodePairs<'r> {
    words: core::slice::ChunksExact<'r, AtomicU32>,
}

impl Iterator for CodePairs<'_> {
    type Item = (u64, u32);

    fn next(&mut self) -> Option<(u64, u32)> {
        let pair = self.words.next()?;
        let word = |i: usize| pair.get(i).map_or(0, |w| w.load(Ordering::Relaxed));
        Some((u64::from(word(0)) | u64::from(word(1)) << 32, word(2)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.words.size_hint()
    }
}
