//! The ring: one producer pushes whole entries, one consumer pops them, over the caller's
//! words. Positions are free-running `u32` counters of words; an entry never wraps (a pad
//! word sends the consumer back to the start), so the consumer reads it as one slice.

use super::atomic::{AtomicU32, Ordering};
use super::entry::{Entry, Header, Kind, Taken, HEADER_WORDS, MAX_ENTRY_WORDS};
use crate::records::MAX_STACK_DEPTH;
use crate::writer::FrameId;

/// The most words a [`Capture`] uses: positions are `u32` counters and their difference must
/// tell a full ring from an empty one.
pub const MAX_WORDS: usize = 1 << 31;

/// Why [`Capture::push_ids`] or [`Capture::push_code`] did not keep a sample (it is counted
/// in [`Capture::dropped`] either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Dropped {
    /// The consumer has not made room for the entry yet.
    Full,
    /// The entry is longer than the whole ring.
    TooLarge,
}

/// A bounded, lock-free queue of samples from one producer (a thread's signal handler, an
/// interrupt) to one consumer (the thread or main loop that feeds a [`crate::Writer`]).
///
/// [`push_ids`](Capture::push_ids) and [`push_code`](Capture::push_code) are wait-free and
/// async-signal-safe: they read and write only this value and the caller's words, with
/// atomic loads and stores (no read-modify-write, so they also run on cores without
/// compare-and-swap such as the Cortex-M0), allocate nothing, take no lock, call nothing,
/// cannot panic, and do work bounded by the entry's length. A full ring drops the sample and
/// counts it.
///
/// One producer and one consumer at a time: two producers pushing at once (a handler
/// interrupted by another that pushes into the same ring) garble entries. That is never
/// undefined behaviour — every word is an atomic — and the consumer refuses a garbled entry
/// without reading past the ring ([`Capture::garbled`]), but the samples are lost.
pub struct Capture<'a> {
    words: &'a [AtomicU32],
    /// Words the producer has published (free-running).
    written: AtomicU32,
    /// Words the consumer has released (free-running).
    released: AtomicU32,
    /// Samples the producer could not keep; written by the producer only.
    dropped: AtomicU32,
    /// Samples the producer kept; written by the producer only.
    pushed: AtomicU32,
    /// Entries the consumer refused as garbled; written by the consumer only.
    garbled: AtomicU32,
}

/// The new ring both constructors make (one `const`, one for loom, whose atomics are not).
macro_rules! empty_ring {
    ($words:expr) => {{
        let words: &[AtomicU32] = $words;
        Capture {
            words: if words.len() > MAX_WORDS { words.split_at(MAX_WORDS).0 } else { words },
            written: AtomicU32::new(0),
            released: AtomicU32::new(0),
            dropped: AtomicU32::new(0),
            pushed: AtomicU32::new(0),
            garbled: AtomicU32::new(0),
        }
    }};
}

impl<'a> Capture<'a> {
    /// A ring over `words` (at most [`MAX_WORDS`] are used). An entry takes
    /// [`entry_words`] words; a ring of a few hundred entries of the usual depth is a
    /// good start.
    #[cfg(not(loom))]
    pub const fn new(words: &'a [AtomicU32]) -> Self {
        empty_ring!(words)
    }

    /// A ring over `words`, as the `const` constructor (loom's atomics are not `const`).
    #[cfg(loom)]
    pub fn new(words: &'a [AtomicU32]) -> Self {
        empty_ring!(words)
    }

    /// Pushes a sample whose stack is frame ids interned earlier (`Writer::intern_frame`),
    /// innermost first; only the innermost 256 are kept, as the writer keeps them.
    /// Async-signal-safe and wait-free (see the type's docs).
    pub fn push_ids(&self, taken: Taken, frames: &[FrameId]) -> Result<(), Dropped> {
        let frames = frames.get(..MAX_STACK_DEPTH).unwrap_or(frames);
        self.push(taken, Kind::Ids, frames.len(), |slots| {
            for (slot, id) in slots.iter().zip(frames) {
                slot.store(id.0, Ordering::Relaxed);
            }
        })
    }

    /// As [`push_ids`](Capture::push_ids) with the stack outermost first (a shadow stack
    /// as most runtimes keep it): the last 256 are kept.
    pub fn push_ids_root_first(&self, taken: Taken, frames: &[u32]) -> Result<(), Dropped> {
        let frames = frames.get(frames.len().saturating_sub(MAX_STACK_DEPTH)..).unwrap_or(&[]);
        self.push(taken, Kind::Ids, frames.len(), |slots| {
            for (slot, &id) in slots.iter().zip(frames.iter().rev()) {
                slot.store(id, Ordering::Relaxed);
            }
        })
    }

    /// Pushes a sample whose stack is the runtime's own `(code id, offset)` pairs, innermost
    /// first (the innermost 256 kept); the consumer turns them into frames through a
    /// [`super::Resolver`]. Async-signal-safe and wait-free (see the type's docs).
    pub fn push_code(&self, taken: Taken, frames: &[(u64, u32)]) -> Result<(), Dropped> {
        self.push_code_from(taken, frames.iter().copied())
    }

    /// As [`push_code`](Capture::push_code) from any exact-size iterator of pairs (a C
    /// caller's array of structs, say), without copying them first.
    pub fn push_code_from<I>(&self, taken: Taken, frames: I) -> Result<(), Dropped>
    where
        I: IntoIterator<Item = (u64, u32)>,
        I::IntoIter: ExactSizeIterator,
    {
        let frames = frames.into_iter();
        let depth = frames.len().min(MAX_STACK_DEPTH);
        self.push(taken, Kind::Code, depth, |slots| {
            for (slot, (code, offset)) in slots.chunks_exact(3).zip(frames) {
                if let [low, high, at] = slot {
                    low.store(code as u32, Ordering::Relaxed);
                    high.store((code >> 32) as u32, Ordering::Relaxed);
                    at.store(offset, Ordering::Relaxed);
                }
            }
        })
    }

    /// Writes an entry of `depth` frames: the fixed words here, the stack's words by `fill`
    /// (given exactly their slots), then publishes it.
    fn push(&self, taken: Taken, kind: Kind, depth: usize, fill: impl FnOnce(&[AtomicU32])) -> Result<(), Dropped> {
        let len = kind.entry_words(depth);
        let result = self.reserve(len).map(|(start, pad, next)| {
            if let Some(pad) = pad {
                pad.store(Header::PAD, Ordering::Relaxed);
            }
            let header = Header { kind, status: taken.status, words: len as u16 };
            let head = [
                header.encode(),
                taken.timestamp_us as u32,
                (taken.timestamp_us >> 32) as u32,
                taken.thread_id as u32,
                (taken.thread_id >> 32) as u32,
                taken.interpreter_id,
                depth as u32,
            ];
            let slots = self.words.get(start..start + len).unwrap_or(&[]);
            let (fixed, stack) = slots.split_at(HEADER_WORDS.min(slots.len()));
            for (slot, word) in fixed.iter().zip(head) {
                slot.store(word, Ordering::Relaxed);
            }
            fill(stack);
            // Publishes the entry: the consumer's acquire load of `written` sees every word.
            self.written.store(next, Ordering::Release);
        });
        // Only the producer writes these two, so a load and a store count without a
        // read-modify-write.
        let counter = if result.is_ok() { &self.pushed } else { &self.dropped };
        counter.store(counter.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        result
    }

    /// Finds room for `len` contiguous words: the entry's first index, the word to mark as
    /// padding when the entry goes back to the start, and `written` after it.
    fn reserve(&self, len: usize) -> Result<(usize, Option<&AtomicU32>, u32), Dropped> {
        let capacity = self.words.len();
        if len > capacity || len > MAX_ENTRY_WORDS {
            return Err(Dropped::TooLarge);
        }
        let written = self.written.load(Ordering::Relaxed);
        // Acquire: the consumer has finished reading the words it released.
        let released = self.released.load(Ordering::Acquire);
        let free = capacity - (written.wrapping_sub(released) as usize).min(capacity);
        // `checked_rem`: no division-by-zero panic path (the length check above already rules
        // out an empty ring, but the compiler need not see that).
        let at = (written as usize).checked_rem(capacity).ok_or(Dropped::TooLarge)?;
        let to_end = capacity - at;
        let (start, skip) = if len <= to_end { (at, 0) } else { (0, to_end) };
        if skip + len > free {
            return Err(Dropped::Full);
        }
        let pad = if skip > 0 { self.words.get(at) } else { None };
        Ok((start, pad, written.wrapping_add((skip + len) as u32)))
    }

    /// Takes the oldest entry, hands it to `read`, then gives its words back to the
    /// producer; `None` when the ring is empty. A garbled entry (two producers at once)
    /// empties the ring and is counted in [`Capture::garbled`]. For the consumer only.
    pub fn pop<R>(&self, read: impl FnOnce(Entry<'_>) -> R) -> Option<R> {
        let capacity = self.words.len();
        let mut released = self.released.load(Ordering::Relaxed);
        // Acquire: every word of the entries published so far is visible.
        let written = self.written.load(Ordering::Acquire);
        // A pad word is followed by at least one entry, so this loop turns at most twice.
        for _ in 0..2 {
            let available = written.wrapping_sub(released) as usize;
            if available == 0 {
                return None;
            }
            let at = (released as usize).checked_rem(capacity)?;
            let word = self.words.get(at).map_or(Header::PAD, |w| w.load(Ordering::Relaxed));
            if word == Header::PAD {
                released = released.wrapping_add((capacity - at) as u32);
                continue;
            }
            let len = Header::decode(word).map_or(0, |h| usize::from(h.words));
            let fits = len >= HEADER_WORDS && len <= available && at + len <= capacity;
            let Some(words) = self.words.get(at..at + len).filter(|_| fits) else {
                break;
            };
            let result = Entry::new(words).map(read);
            // Release: the producer may reuse the words only after they were read.
            self.released.store(released.wrapping_add(len as u32), Ordering::Release);
            if result.is_none() {
                self.count_garbled();
            }
            return result;
        }
        // Not an entry where one must start: nothing after it can be trusted.
        self.released.store(written, Ordering::Release);
        self.count_garbled();
        None
    }

    fn count_garbled(&self) {
        self.garbled.store(self.garbled.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
    }

    /// Samples dropped because the ring was full (or the entry too long), since it was made.
    pub fn dropped(&self) -> u32 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Samples pushed and kept, since the ring was made.
    pub fn pushed(&self) -> u32 {
        self.pushed.load(Ordering::Relaxed)
    }

    /// Entries the consumer refused as garbled (only two producers at once make one).
    pub fn garbled(&self) -> u32 {
        self.garbled.load(Ordering::Relaxed)
    }

    /// The ring's length in words.
    pub fn capacity(&self) -> usize {
        self.words.len()
    }
}

/// The words an entry of `depth` frames takes: 7, plus one a frame for frame ids or three a
/// frame for `(code id, offset)` pairs (`depth` beyond 256 counts as 256). A ring of
/// `n * entry_words(..)` words holds at least `n - 1` such entries at once.
pub const fn entry_words(depth: usize, code_pairs: bool) -> usize {
    let depth = if depth > MAX_STACK_DEPTH { MAX_STACK_DEPTH } else { depth };
    if code_pairs { Kind::Code } else { Kind::Ids }.entry_words(depth)
}
