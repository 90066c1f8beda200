//! The ring: one producer pushes whole entries, one consumer pops them, over the caller's
//! words. An entry never wraps (a pad word sends the consumer back to the start), so the
//! consumer reads it as one slice.
//!
//! Positions are word indices, `0..=n` for a ring of `n` words (`n` and 0 are the same
//! place: an entry that ends at the last word leaves the position at `n`, and the next one
//! starts at 0). A push keeps one word free, so `written == released` is always empty and the
//! used words are `written − released`, plus `n` when `written` is behind. Nothing counts
//! past the length, so nothing wraps however long the ring runs, for every length, and
//! nothing divides (a Cortex-M0 has no divide instruction). Until issue 38 positions were
//! free-running `u32` counters with the slot `p mod n`: past their wrap the slot jumped back
//! by `2^32 mod n` and the producer overwrote unread entries.

use super::atomic::{AtomicU32, Ordering};
use super::count::Count;
use super::entry::{Entry, Header, Kind, Taken, HEADER_WORDS, MAX_ENTRY_WORDS};
use crate::records::MAX_STACK_DEPTH;
use crate::writer::FrameId;

/// The most words a [`Capture`] uses (4 GiB): positions, at most the length, are `u32`s, and
/// a used count plus an entry's words stays below 2^31 on 32-bit targets.
pub const MAX_WORDS: usize = 1 << 30;

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
///
/// Runs for ever: positions are right across their wrap for every length (see
/// [`Capture::starting_at`]), and the counts are 62-bit (centuries at 10 kHz) on every
/// target, 32-bit ones included.
pub struct Capture<'a> {
    words: &'a [AtomicU32],
    /// Where the producer's next entry goes (`0..=len`; the words before it are published).
    written: AtomicU32,
    /// Where the consumer's next entry starts (`0..=len`; the words before it are read).
    released: AtomicU32,
    /// Samples the producer could not keep; written by the producer only.
    dropped: Count,
    /// Samples the producer kept; written by the producer only.
    pushed: Count,
    /// Entries the consumer refused as garbled; written by the consumer only.
    garbled: Count,
}

/// The ring both constructors make (one `const`, one for loom, whose atomics are not).
macro_rules! ring_at {
    ($words:expr, $words_before:expr, $count:expr) => {{
        let words: &[AtomicU32] = $words;
        let words = if words.len() > MAX_WORDS { words.split_at(MAX_WORDS).0 } else { words };
        let position = if words.is_empty() { 0 } else { ($words_before % words.len() as u64) as u32 };
        Capture {
            words,
            written: AtomicU32::new(position),
            released: AtomicU32::new(position),
            dropped: Count::new($count),
            pushed: Count::new($count),
            garbled: Count::new($count),
        }
    }};
}

impl<'a> Capture<'a> {
    /// A ring over `words` (at most [`MAX_WORDS`] are used). An entry takes
    /// [`entry_words`] words; a ring of a few hundred entries of the usual depth is a
    /// good start.
    #[cfg(not(loom))]
    pub const fn new(words: &'a [AtomicU32]) -> Self {
        ring_at!(words, 0, 0)
    }

    /// A ring over `words`, as the `const` constructor (loom's atomics are not `const`).
    #[cfg(loom)]
    pub fn new(words: &'a [AtomicU32]) -> Self {
        ring_at!(words, 0, 0)
    }

    /// An empty ring as it is after `words_before` words went through it, with each count
    /// (pushed, dropped, garbled) at `count` (modulo 2^62): for tests of what runs for days —
    /// a wrap of the positions, counts past 2^32 — in seconds. `new` is `starting_at(words,
    /// 0, 0)`.
    #[cfg(not(loom))]
    pub const fn starting_at(words: &'a [AtomicU32], words_before: u64, count: u64) -> Self {
        ring_at!(words, words_before, count)
    }

    /// As the `const` constructor (loom's atomics are not `const`).
    #[cfg(loom)]
    pub fn starting_at(words: &'a [AtomicU32], words_before: u64, count: u64) -> Self {
        ring_at!(words, words_before, count)
    }

    /// Pushes a sample whose stack is frame ids interned earlier (`Writer::intern_frame`),
    /// innermost first; only the innermost 256 are kept, as the writer keeps them.
    /// Async-signal-safe and wait-free (see the type's docs).
    #[inline]
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
    #[inline]
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
    #[inline]
    pub fn push_code(&self, taken: Taken, frames: &[(u64, u32)]) -> Result<(), Dropped> {
        self.push_code_from(taken, frames.iter().copied())
    }

    /// Pushes a sample whose stack is native addresses as an unwinder gives them, innermost
    /// first: the interrupted instruction, then return addresses (the innermost 256 kept).
    /// Each is stored as the code pair `(address, 0)`, a return address less one — an
    /// address inside its call, so that the call's line and the calls inlined there are the
    /// ones named, as gperftools' pprof adjusts them. The consumer's [`super::Resolver`]
    /// says which module each is in (the std layer's `tachyon::native::Modules`).
    /// Async-signal-safe and wait-free (see the type's docs).
    #[inline]
    pub fn push_addresses(&self, taken: Taken, addresses: &[usize]) -> Result<(), Dropped> {
        let adjusted = addresses.iter().enumerate().map(|(i, &a)| ((a as u64).wrapping_sub(u64::from(i > 0)), 0));
        self.push_code_from(taken, adjusted)
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
    // Always inlined: each push function is then one body, as a C caller's call reaches it
    // (measured: left to itself the compiler called it, about 3 ns a push).
    #[inline(always)]
    fn push(&self, taken: Taken, kind: Kind, depth: usize, fill: impl FnOnce(&[AtomicU32])) -> Result<(), Dropped> {
        let len = kind.entry_words(depth);
        let result = self.reserve(len).and_then(|(start, pad, next)| {
            // The entry's words, exactly `len` of them: `reserve` found them within the ring
            // (a position no push makes would put them past it, and nothing is written).
            let slots = self.words.get(start..start.saturating_add(len)).ok_or(Dropped::Full)?;
            let (fixed, stack) = slots.split_at_checked(HEADER_WORDS).ok_or(Dropped::Full)?;
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
            for (slot, word) in fixed.iter().zip(head) {
                slot.store(word, Ordering::Relaxed);
            }
            fill(stack);
            // Publishes the entry: the consumer's acquire load of `written` sees every word.
            self.written.store(next, Ordering::Release);
            Ok(())
        });
        // Only the producer writes these two (so `add_one` needs no read-modify-write).
        if result.is_ok() { &self.pushed } else { &self.dropped }.add_one();
        result
    }

    /// Finds room for `len` contiguous words: the entry's first index, the word to mark as
    /// padding when the entry goes back to the start, and `written` after it.
    #[inline(always)]
    fn reserve(&self, len: usize) -> Result<(usize, Option<&AtomicU32>, u32), Dropped> {
        let n = self.words.len();
        if len > MAX_ENTRY_WORDS {
            return Err(Dropped::TooLarge);
        }
        let written = self.written.load(Ordering::Relaxed) as usize;
        // Acquire: the consumer has finished reading the words it released.
        let released = self.released.load(Ordering::Acquire) as usize;
        // (`written ≤ n` for every position a push makes; one that is not gives a start past
        // the end, which `push` finds no words at.)
        let to_end = n.wrapping_sub(written);
        let (start, skip) = if len <= to_end { (written, 0) } else { (0, to_end) };
        // Used, skipped and the entry's words, one word short of the length: a full ring
        // would look empty. (Wrapping: positions no push makes cannot make this panic.)
        if used(n, written, released).wrapping_add(skip).wrapping_add(len) >= n {
            return Err(if len >= n { Dropped::TooLarge } else { Dropped::Full });
        }
        let pad = if skip > 0 { self.words.get(written) } else { None };
        Ok((start, pad, start.wrapping_add(len) as u32))
    }

    /// Takes the oldest entry, hands it to `read`, then gives its words back to the
    /// producer; `None` when the ring is empty. A garbled entry (two producers at once)
    /// empties the ring and is counted in [`Capture::garbled`]. For the consumer only.
    pub fn pop<R>(&self, read: impl FnOnce(Entry<'_>) -> R) -> Option<R> {
        let n = self.words.len();
        let mut released = self.released.load(Ordering::Relaxed) as usize;
        // Acquire: every word of the entries published so far is visible.
        let written = self.written.load(Ordering::Acquire);
        // A pad word is followed by at least one entry, so this loop turns at most twice.
        for _ in 0..2 {
            let available = used(n, written as usize, released);
            if available == 0 {
                return None;
            }
            // Position `n` (an entry ended at the last word) reads as a pad: the next is at 0.
            let word = self.words.get(released).map_or(Header::PAD, |w| w.load(Ordering::Relaxed));
            if word == Header::PAD {
                released = 0;
                continue;
            }
            let len = Header::decode(word).map_or(0, |h| usize::from(h.words));
            let fits = len >= HEADER_WORDS && len <= available && len <= n.saturating_sub(released);
            let Some(words) = self.words.get(released..released.saturating_add(len)).filter(|_| fits) else {
                break;
            };
            let result = Entry::new(words).map(read);
            // Release: the producer may reuse the words only after they were read.
            self.released.store((released + len) as u32, Ordering::Release);
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
        self.garbled.add_one();
    }

    /// Samples dropped because the ring was full (or the entry too long), since it was made.
    /// Any thread may read it, a handler too (two atomic loads).
    pub fn dropped(&self) -> u64 {
        self.dropped.get()
    }

    /// Samples pushed and kept, since the ring was made.
    pub fn pushed(&self) -> u64 {
        self.pushed.get()
    }

    /// Entries the consumer refused as garbled (only two producers at once make one).
    pub fn garbled(&self) -> u64 {
        self.garbled.get()
    }

    /// The ring's length in words.
    pub fn capacity(&self) -> usize {
        self.words.len()
    }
}

/// Words published and not yet released between positions `written` and `released` of a
/// ring of `n` words (below `n` for positions the ring makes; wrapping, so that positions no
/// push makes cannot make it panic).
#[inline(always)]
fn used(n: usize, written: usize, released: usize) -> usize {
    written.wrapping_sub(released).wrapping_add(if written < released { n } else { 0 })
}

/// The words an entry of `depth` frames takes: 7, plus one a frame for frame ids or three a
/// frame for `(code id, offset)` pairs (`depth` beyond 256 counts as 256). A ring of
/// `n * entry_words(..)` words holds at least `n - 1` such entries at once.
pub const fn entry_words(depth: usize, code_pairs: bool) -> usize {
    let depth = if depth > MAX_STACK_DEPTH { MAX_STACK_DEPTH } else { depth };
    if code_pairs { Kind::Code } else { Kind::Ids }.entry_words(depth)
}
