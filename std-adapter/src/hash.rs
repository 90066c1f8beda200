//! A fast hasher for the integer keys of the conversions (frame ids, pairs of node ids),
//! keyed per process: SipHash costs more than the rest of a lookup for such keys, and a
//! fixed fast hash would let a crafted file choose colliding keys. The key is random, so
//! colliding keys cannot be chosen without it.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher, RandomState};

/// Builds [`IdHasher`]s with this process's key.
#[derive(Debug, Clone, Copy)]
pub struct IdHash {
    key: u64,
}

impl Default for IdHash {
    fn default() -> Self {
        IdHash { key: RandomState::new().hash_one(0x243f_6a88_85a3_08d3_u64) | 1 }
    }
}

impl IdHash {
    /// The random key, to key other tables with (the core's MOJO tables, say).
    pub fn key(&self) -> u64 {
        self.key
    }

    /// The hash of a sequence of `u32`s (a stack of frame ids) and its length. The words go
    /// through four lanes of the multiply-rotate step side by side, joined at the end: one
    /// chain of dependent multiplies over a 200-frame stack was a quarter of a merge's
    /// look-ups of deep stacks (measured), the lanes let the processor run four at once.
    pub fn hash_words(&self, words: &[u32]) -> u64 {
        let pair = |w: &[u32]| u64::from(w[0]) | u64::from(w[1]) << 32;
        let mut lanes = [self.key, self.key.rotate_left(16), self.key.rotate_left(32), self.key.rotate_left(48)];
        let mut chunks = words.chunks_exact(8);
        for chunk in &mut chunks {
            for (lane, w) in lanes.iter_mut().zip(chunk.chunks_exact(2)) {
                *lane = step(*lane, pair(w));
            }
        }
        let mut h = self.build_hasher();
        h.write_usize(words.len());
        for lane in lanes {
            h.write_u64(lane);
        }
        let mut rest = chunks.remainder().chunks_exact(2);
        for w in &mut rest {
            h.write_u64(pair(w));
        }
        if let [last] = rest.remainder() {
            h.write_u32(*last);
        }
        h.finish()
    }
}

/// One multiply-rotate step of [`IdHasher`] (and of each lane of [`IdHash::hash_words`]).
#[inline]
fn step(state: u64, word: u64) -> u64 {
    (state ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29)
}

impl BuildHasher for IdHash {
    type Hasher = IdHasher;

    fn build_hasher(&self) -> IdHasher {
        IdHasher { state: self.key }
    }
}

/// Multiply-rotate over 64-bit words, mixed at the end.
#[derive(Debug, Clone, Copy)]
pub struct IdHasher {
    state: u64,
}

impl Hasher for IdHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            self.write_u64(u64::from_le_bytes(w));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.write_u64(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }

    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v.into());
    }

    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.state = step(self.state, v);
    }

    #[inline]
    fn finish(&self) -> u64 {
        let mut x = self.state;
        x ^= x >> 32;
        x = x.wrapping_mul(0xd6e8_feb8_6659_fd93);
        x ^= x >> 32;
        x.wrapping_mul(0xd6e8_feb8_6659_fd93) ^ (x >> 29)
    }
}

/// A `HashMap` with [`IdHash`].
pub type IdMap<K, V> = std::collections::HashMap<K, V, IdHash>;

/// Strings numbered in the order first met, as the string tables of the jsonl, Firefox
/// profiler and pprof formats are.
#[derive(Debug, Default, Clone)]
pub struct StringIndex {
    list: Vec<String>,
    ids: HashMap<String, u32>,
}

impl StringIndex {
    /// The id of `s`, numbering it if it is new.
    pub fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.list.len() as u32;
        self.list.push(s.to_owned());
        self.ids.insert(s.to_owned(), i);
        i
    }

    /// The strings, by id.
    pub fn strings(&self) -> &[String] {
        &self.list
    }

    /// The strings, by id, owned.
    pub fn into_strings(self) -> Vec<String> {
        self.list
    }
}

/// An open-addressed table of ids (`u32`s) whose keys live in the caller's own storage: the
/// caller hashes a key and says whether an id's key is it, so a key is held once, where the
/// caller keeps it anyway, and the table costs 4 to 16 bytes an id (a power of two of slots,
/// at most half full). For the tables that grow with a profile's threads and stacks, where a
/// `HashMap` holds a second copy of each key beside the caller's.
#[derive(Debug, Clone, Default)]
pub struct IdSlots {
    /// 1 + an id, 0 for a free slot.
    slots: Vec<u32>,
    len: usize,
}

/// Where [`IdSlots::find`] found a key, or where it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// The key's id.
    Id(u32),
    /// Not there: the free slot to give [`IdSlots::insert`].
    Free(usize),
}

impl IdSlots {
    /// Ids held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.slots.capacity() * 4
    }

    /// Holds no ids again, its table kept for the next.
    pub fn clear(&mut self) {
        self.slots.fill(0);
        self.len = 0;
    }

    /// Makes room for one more id (before [`find`](IdSlots::find), whose free slot the
    /// growth would move): doubles the table (16 slots at first) when it would be more than
    /// half full, placing every id again by `hash_of` its key.
    pub fn reserve_one(&mut self, hash_of: impl Fn(u32) -> u64) {
        if (self.len + 1) * 2 <= self.slots.len() {
            return;
        }
        let len = (self.slots.len() * 2).max(16);
        let mask = len - 1;
        let mut slots = vec![0u32; len];
        for &slot in self.slots.iter().filter(|&&s| s != 0) {
            let mut at = hash_of(slot - 1) as usize & mask;
            while slots[at] != 0 {
                at = (at + 1) & mask;
            }
            slots[at] = slot;
        }
        self.slots = slots;
    }

    /// The id whose key hashes to `hash` and `is` it, or the free slot where it goes.
    /// [`reserve_one`](IdSlots::reserve_one) first: a full table finds no free slot.
    pub fn find(&self, hash: u64, mut is: impl FnMut(u32) -> bool) -> Found {
        if self.slots.is_empty() {
            return Found::Free(usize::MAX);
        }
        let mask = self.slots.len() - 1;
        let mut at = hash as usize & mask;
        loop {
            match self.slots[at] {
                0 => return Found::Free(at),
                slot if is(slot - 1) => return Found::Id(slot - 1),
                _ => at = (at + 1) & mask,
            }
        }
    }

    /// Asks the processor to fetch the slot where a key of `hash` is first looked for, so
    /// that its look-up soon after finds it in the cache (see [`SequenceIndex::prefetch`]);
    /// changes nothing, and does nothing but on x86_64.
    pub fn prefetch(&self, hash: u64) {
        let Some(slot) = self.slots.get(hash as usize & self.slots.len().wrapping_sub(1)) else { return };
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch reads nothing the program sees and cannot fault, whatever the
        // address; this one is of a slot of the table, borrowed.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((slot as *const u32).cast());
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = slot;
    }

    /// Puts `id` in the free slot `find` gave.
    pub fn insert(&mut self, free: usize, id: u32) {
        if let Some(slot) = self.slots.get_mut(free) {
            *slot = id + 1;
            self.len += 1;
        }
    }
}

/// Distinct sequences of `u32`s (stacks of frame ids) numbered in the order first met, each
/// held once: end to end in one vector, found through [`IdSlots`] under the process-keyed
/// hash. A `HashMap<Box<[u32]>, _>` holds each key in an allocation of its own, and its
/// callers kept a second copy beside it.
#[derive(Debug, Clone, Default)]
pub struct SequenceIndex {
    words: Vec<u32>,
    /// Where each sequence ends in `words` (each starts where the one before ends).
    ends: Vec<usize>,
    /// Each sequence's hash: compared before the words when probing, and where a sequence
    /// goes when the table grows (no hashing again).
    hashes: Vec<u32>,
    slots: IdSlots,
    hash: IdHash,
}

impl SequenceIndex {
    /// An empty index.
    pub fn new() -> Self {
        SequenceIndex::default()
    }

    /// How many distinct sequences it holds.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The sequence numbered `id` (empty if there is none).
    pub fn get(&self, id: u32) -> &[u32] {
        let id = id as usize;
        let Some(&end) = self.ends.get(id) else { return &[] };
        let start = if id == 0 { 0 } else { self.ends[id - 1] };
        &self.words[start..end]
    }

    /// The sequences, by id.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u32]> + '_ {
        (0..self.len() as u32).map(|id| self.get(id))
    }

    /// The id of `sequence`, numbering it if it is new.
    ///
    /// # Panics
    ///
    /// Past 2^32 − 1 distinct sequences (ids are `u32`s), which would take more than 64 GiB
    /// of this index alone.
    pub fn id(&mut self, sequence: &[u32]) -> u32 {
        self.id_hashed(sequence, self.hash(sequence))
    }

    /// The hash `sequence` is found by, for [`id_hashed`](Self::id_hashed) and
    /// [`prefetch`](Self::prefetch).
    pub fn hash(&self, sequence: &[u32]) -> u32 {
        self.hash.hash_words(sequence) as u32
    }

    /// Asks for the slot where a sequence of `hash` is first looked for to be fetched, so
    /// that [`id_hashed`](Self::id_hashed) a few sequences later finds it in the cache. For
    /// many look-ups in a row whose sequences are known ahead: a table of stacks from many
    /// profiles is larger than the cache, and a merge of deep stacks spent three quarters of
    /// each look-up waiting for that first slot (measured). A prefetch, not a read: a read
    /// whose value is kept holds up the processor until it arrives (tried: no faster).
    pub fn prefetch(&self, hash: u32) {
        self.slots.prefetch(u64::from(hash));
    }

    /// [`id`](Self::id) of a `sequence` whose [`hash`](Self::hash) is `hash`.
    ///
    /// # Panics
    ///
    /// As [`id`](Self::id).
    pub fn id_hashed(&mut self, sequence: &[u32], hash: u32) -> u32 {
        let hashes = &self.hashes;
        self.slots.reserve_one(|id| u64::from(hashes[id as usize]));
        let free =
            match self.slots.find(u64::from(hash), |id| self.hashes[id as usize] == hash && self.get(id) == sequence) {
                Found::Id(id) => return id,
                Found::Free(free) => free,
            };
        let id = u32::try_from(self.len()).ok().filter(|&id| id < u32::MAX).expect("2^32 - 1 distinct sequences");
        self.words.extend_from_slice(sequence);
        self.ends.push(self.words.len());
        self.hashes.push(hash);
        self.slots.insert(free, id);
        id
    }

    /// Rewrites every sequence in place by `f` (which keeps its length), then finds each again
    /// by its new words: returns, per id, the first id whose sequence now equals it (itself
    /// when none before does), and [`id`](Self::id) finds those firsts. No memory beyond the
    /// returned ids: a second index of the new sequences would hold every word twice.
    pub fn rewrite(&mut self, mut f: impl FnMut(&mut [u32])) -> Vec<u32> {
        let mut start = 0;
        for &end in &self.ends {
            f(&mut self.words[start..end]);
            start = end;
        }
        self.slots.clear();
        let mut first = Vec::with_capacity(self.len());
        for id in 0..self.len() as u32 {
            let sequence = self.get(id);
            let hash = self.hash(sequence);
            self.hashes[id as usize] = hash;
            let hashes = &self.hashes;
            // Only firsts are in the table: their hashes are the ones `reserve_one` reads.
            self.slots.reserve_one(|id| u64::from(hashes[id as usize]));
            let found = self
                .slots
                .find(u64::from(hash), |other| self.hashes[other as usize] == hash && self.get(other) == self.get(id));
            match found {
                Found::Id(other) => first.push(other),
                Found::Free(free) => {
                    self.slots.insert(free, id);
                    first.push(id);
                }
            }
        }
        first
    }
}

/// Ids numbered in order and found by their keys' hashes, the keys kept in the caller's own
/// storage: [`IdSlots`] with each id's hash, so that the table grows without hashing a key
/// again and a probe compares hashes before keys.
#[derive(Debug, Clone, Default)]
pub struct HashedIds {
    hashes: Vec<u64>,
    slots: IdSlots,
}

impl HashedIds {
    /// The id whose key hashes to `hash` and `is` it, or, `Err`, where a new one goes (for
    /// [`HashedIds::insert`], before anything else changes the table).
    pub fn find(&mut self, hash: u64, mut is: impl FnMut(u32) -> bool) -> Result<u32, usize> {
        let hashes = &self.hashes;
        self.slots.reserve_one(|id| hashes[id as usize]);
        match self.slots.find(hash, |id| self.hashes[id as usize] == hash && is(id)) {
            Found::Id(id) => Ok(id),
            Found::Free(free) => Err(free),
        }
    }

    /// Numbers the next id, its key's hash `hash`, at `free` (what [`HashedIds::find`] gave).
    ///
    /// # Panics
    ///
    /// Past 2^32 − 1 ids.
    pub fn insert(&mut self, free: usize, hash: u64) -> u32 {
        let id = u32::try_from(self.hashes.len()).ok().filter(|&id| id < u32::MAX).expect("2^32 - 1 ids");
        self.hashes.push(hash);
        self.slots.insert(free, id);
        id
    }

    /// Holds no ids again, its memory kept for the next.
    pub fn clear(&mut self) {
        self.hashes.clear();
        self.slots.clear();
    }
}

/// Distinct strings numbered in the order first met, held end to end in one buffer and found
/// through [`IdSlots`] under the process-keyed hash: a string costs no allocation of its own,
/// to add or to drop, and a look-up of a known one none at all. For the names of a merge's
/// frames, met again in every file.
#[derive(Debug, Clone, Default)]
pub struct PackedStrings {
    bytes: String,
    /// Where each string ends in `bytes` (each starts where the one before ends).
    ends: Vec<usize>,
    ids: HashedIds,
    hash: IdHash,
}

impl PackedStrings {
    /// How many distinct strings it holds.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The string numbered `id` (empty if there is none).
    pub fn get(&self, id: u32) -> &str {
        packed(&self.bytes, &self.ends, id)
    }

    /// Holds no strings again, its memory kept for the next.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
        self.ids.clear();
    }

    /// The id of `s`, numbering it if it is new.
    ///
    /// # Panics
    ///
    /// Past 2^32 − 1 distinct strings.
    pub fn id(&mut self, s: &str) -> u32 {
        let mut h = self.hash.build_hasher();
        h.write(s.as_bytes());
        h.write_usize(s.len());
        let hash = h.finish();
        let (bytes, ends) = (&self.bytes, &self.ends);
        let free = match self.ids.find(hash, |id| packed(bytes, ends, id) == s) {
            Ok(id) => return id,
            Err(free) => free,
        };
        self.bytes.push_str(s);
        self.ends.push(self.bytes.len());
        self.ids.insert(free, hash)
    }
}

/// String `id` of strings held end to end in `bytes`, each ending where `ends` says (empty
/// if there is none).
fn packed<'a>(bytes: &'a str, ends: &[usize], id: u32) -> &'a str {
    let id = id as usize;
    let Some(&end) = ends.get(id) else { return "" };
    let start = if id == 0 { 0 } else { ends[id - 1] };
    &bytes[start..end]
}

/// Threads, `(interpreter id, thread id)` pairs, numbered in the order first met, each held
/// once (8 bytes, 12 once a second interpreter appears) and found through [`IdSlots`]: 12 to
/// 28 bytes a thread, where a `HashMap<(u32, u64), u64>` of their last times took about 50
/// (and 75 while it doubled). For what an output keeps per thread of a file that may name
/// millions of them.
#[derive(Debug, Clone, Default)]
pub struct ThreadNumbers {
    thread_ids: Vec<u64>,
    /// Interpreter ids by number; empty while every one is 0 (most profiles have one
    /// interpreter, or none).
    interpreter_ids: Vec<u32>,
    slots: IdSlots,
    hash: IdHash,
}

impl ThreadNumbers {
    /// No threads yet.
    pub fn new() -> Self {
        ThreadNumbers::default()
    }

    /// Threads numbered.
    pub fn len(&self) -> usize {
        self.thread_ids.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.thread_ids.is_empty()
    }

    /// The thread's number, and whether it is new (numbered by this call).
    ///
    /// # Panics
    ///
    /// Past 2^32 − 1 threads (numbers are `u32`s), which would take more than 64 GiB.
    pub fn number(&mut self, interpreter_id: u32, thread_id: u64) -> (u32, bool) {
        let (hash, tids, iids) = (self.hash, &self.thread_ids, &self.interpreter_ids);
        self.slots.reserve_one(|n| pair_hash(hash, interpreter_of(iids, n as usize), tids[n as usize]));
        let found = self.slots.find(pair_hash(hash, interpreter_id, thread_id), |n| {
            self.thread_ids[n as usize] == thread_id
                && interpreter_of(&self.interpreter_ids, n as usize) == interpreter_id
        });
        let free = match found {
            Found::Id(n) => return (n, false),
            Found::Free(free) => free,
        };
        let n = u32::try_from(self.len()).ok().filter(|&n| n < u32::MAX).expect("2^32 - 1 threads");
        // Kept from the first id that is not 0 on, with a 0 for each thread before it (the
        // first thread may be that one).
        if interpreter_id != 0 || !self.interpreter_ids.is_empty() {
            self.interpreter_ids.resize(self.thread_ids.len(), 0);
            self.interpreter_ids.push(interpreter_id);
        }
        self.thread_ids.push(thread_id);
        self.slots.insert(free, n);
        (n, true)
    }

    /// The thread numbered `n`: `(interpreter id, thread id)`.
    pub fn get(&self, n: u32) -> Option<(u32, u64)> {
        let n = n as usize;
        Some((interpreter_of(&self.interpreter_ids, n), *self.thread_ids.get(n)?))
    }

    /// The threads `(interpreter id, thread id)` by number.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (u32, u64)> + '_ {
        (0..self.thread_ids.len()).map(|n| (interpreter_of(&self.interpreter_ids, n), self.thread_ids[n]))
    }

    /// Bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.thread_ids.capacity() * 8 + self.interpreter_ids.capacity() * 4 + self.slots.heap_bytes()
    }
}

/// Thread `n`'s interpreter id in [`ThreadNumbers::interpreter_ids`] (empty while all are 0).
fn interpreter_of(ids: &[u32], n: usize) -> u32 {
    ids.get(n).copied().unwrap_or(0)
}

fn pair_hash(hash: IdHash, interpreter_id: u32, thread_id: u64) -> u64 {
    let mut h = hash.build_hasher();
    h.write_u32(interpreter_id);
    h.write_u64(thread_id);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_strings_are_numbered_once_in_the_order_first_met() {
        let mut strings = PackedStrings::default();
        // The empty string, one string split two ways, and enough to grow the table often.
        let mut given: Vec<String> = ["", "ab", "a", "b", "abab", "ab"].map(String::from).to_vec();
        given.extend((0..1000).map(|i| format!("f{i}")));
        given.extend((0..1000).rev().map(|i| format!("f{i}")));
        let ids: Vec<u32> = given.iter().map(|s| strings.id(s)).collect();
        assert_eq!(ids[..6], [0, 1, 2, 3, 4, 1]);
        assert_eq!(ids[6..1006], (5..1005).collect::<Vec<_>>());
        assert_eq!(ids[1006..], (5..1005).rev().collect::<Vec<_>>());
        assert_eq!(strings.len(), 1005);
        for (s, &id) in given.iter().zip(&ids) {
            assert_eq!(strings.get(id), s);
        }
        assert_eq!(strings.get(1005), "");
    }

    #[test]
    fn sequences_are_numbered_once_in_the_order_first_met() {
        let mut index = SequenceIndex::new();
        let seqs: [&[u32]; 6] = [&[1, 2], &[], &[1, 2, 0], &[2, 1], &[0], &[1]];
        for (i, s) in seqs.iter().enumerate() {
            assert_eq!(index.id(s), i as u32, "{s:?}");
        }
        for (i, s) in seqs.iter().enumerate().rev() {
            assert_eq!(index.id(s), i as u32, "{s:?} again");
            assert_eq!(index.get(i as u32), *s);
        }
        assert_eq!(index.len(), 6);
        assert_eq!(index.get(6), &[] as &[u32]);
        assert_eq!(index.iter().collect::<Vec<_>>(), seqs);
    }

    #[test]
    fn sequences_rewritten_in_place_are_found_by_their_new_words_the_first_of_equal_ones() {
        let mut index = SequenceIndex::new();
        // Halving every word makes 0 of 1, 2 of 4 and 5: ids 1, 3 and 4 meet earlier ones.
        let seqs: [&[u32]; 7] = [&[0, 4], &[1, 4], &[], &[0, 5], &[1, 5, 0], &[7], &[0, 4, 1]];
        for s in seqs {
            index.id(s);
        }
        // Many more (still distinct when halved), so that the table outgrows its first slots.
        for i in 0..1000u32 {
            index.id(&[200 + 2 * i, 14, 2 * i]);
        }
        let first = index.rewrite(|s| s.iter_mut().for_each(|w| *w /= 2));
        let mut expected = vec![0, 0, 2, 0, 4, 5, 4];
        expected.extend(7..1007);
        assert_eq!(first, expected);
        assert_eq!(index.get(3), &[0, 2]);
        for (i, s) in [&[0u32, 2][..], &[], &[0, 2, 0], &[3]].iter().enumerate() {
            assert_eq!(index.id(s), [0, 2, 4, 5][i], "{s:?}");
        }
        assert_eq!(index.id(&[100 + 500, 7, 500]), 507);
        assert_eq!(index.id(&[9, 9]), 1007, "a new sequence is numbered after all of them");
    }

    #[test]
    fn a_word_changed_anywhere_in_a_long_sequence_changes_its_hash() {
        // Lengths across the four lanes' 8-word chunks and their remainder (odd and even).
        let hash = IdHash::default();
        for len in 0..=40u32 {
            let base: Vec<u32> = (0..len).map(|i| i.wrapping_mul(0x9e37_79b9)).collect();
            let h = hash.hash_words(&base);
            for at in 0..base.len() {
                for flip in [1, 1 << 31] {
                    let mut changed = base.clone();
                    changed[at] ^= flip;
                    assert_ne!(hash.hash_words(&changed), h, "length {len}, word {at} ^ {flip:#x}");
                }
                // Words exchanged between lanes, or within one.
                if at + 1 < base.len() {
                    let mut swapped = base.clone();
                    swapped.swap(at, at + 1);
                    assert_ne!(hash.hash_words(&swapped), h, "length {len}, words {at} and {}", at + 1);
                }
            }
            // A zero word more is another sequence.
            let mut longer = base.clone();
            longer.push(0);
            assert_ne!(hash.hash_words(&longer), h, "length {len} and a zero");
        }
        // Keyed: another process's key hashes the same words otherwise.
        let words: Vec<u32> = (0..100).collect();
        assert_ne!(IdHash { key: 3 }.hash_words(&words), IdHash { key: 5 }.hash_words(&words));
    }

    #[test]
    fn long_sequences_differing_in_one_word_are_numbered_apart_across_growth() {
        let mut index = SequenceIndex::new();
        let seq = |i: u32| -> Vec<u32> {
            let len = 1 + i % 37;
            let mut s: Vec<u32> = (0..len).map(|w| w * 7).collect();
            s[(i as usize / 37) % len as usize] = i;
            s
        };
        let n = 20_000;
        for i in 0..n {
            assert_eq!(index.id(&seq(i)), i, "{:?}", seq(i));
        }
        for i in (0..n).rev().step_by(3) {
            assert_eq!(index.id(&seq(i)), i, "{:?} again", seq(i));
            assert_eq!(index.get(i), &seq(i)[..]);
        }
        assert_eq!(index.len(), n as usize);
    }

    #[test]
    fn threads_are_numbered_once_in_the_order_first_met_across_growth() {
        let mut threads = ThreadNumbers::new();
        // Pairs that differ only in the interpreter or only in the thread are other threads.
        let pair = |i: u64| ((i % 3) as u32, i / 3 * 0x1_0000_0001);
        for i in 0..100_000u64 {
            let (iid, tid) = pair(i);
            assert_eq!(threads.number(iid, tid), (i as u32, true), "{i}");
        }
        for i in (0..100_000u64).rev().step_by(7) {
            let (iid, tid) = pair(i);
            assert_eq!(threads.number(iid, tid), (i as u32, false), "{i} again");
            assert_eq!(threads.get(i as u32), Some((iid, tid)));
        }
        assert_eq!(threads.len(), 100_000);
        assert_eq!(threads.get(100_000), None);
        assert!(threads.iter().eq((0..100_000).map(pair)), "by number, in the order first met");
        // Four bytes a slot at most half full, 12 a thread: 100,000 threads in 262,144 slots.
        assert!(threads.heap_bytes() <= 131_072 * 12 + 262_144 * 4, "{}", threads.heap_bytes());
    }

    /// The prefetch (the std layer's one `unsafe` that is not a system call, run under Miri
    /// by scripts/miri.sh) of any hash, in the tables' slots as they grow from 16 to 2,048
    /// (4,096 natively), changes no id.
    #[test]
    fn prefetching_any_hash_as_the_table_grows_changes_nothing() {
        let n = if cfg!(miri) { 1_000 } else { 2_000 };
        let mut index = SequenceIndex::new();
        for i in 0..n {
            let sequence = [i, i ^ 0x5555, 7];
            let hash = index.hash(&sequence);
            for probe in [hash, !hash, 0, u32::MAX, i] {
                index.prefetch(probe);
            }
            assert_eq!(index.id_hashed(&sequence, hash), i);
        }
        for i in (0..n).step_by(7) {
            index.prefetch(i);
            assert_eq!(index.id(&[i, i ^ 0x5555, 7]), i);
        }
        assert_eq!(index.len(), n as usize);
    }

    #[test]
    fn interpreter_ids_are_held_once_one_is_not_zero() {
        let mut threads = ThreadNumbers::new();
        for tid in 0..1000u64 {
            assert_eq!(threads.number(0, tid), (tid as u32, true));
        }
        // One interpreter: 8 bytes a thread (1,024 ids), 4 a slot (2,048 slots).
        assert_eq!(threads.heap_bytes(), 1024 * 8 + 2048 * 4);
        // A second interpreter's thread 7 is another thread; the first 1,000 keep theirs.
        assert_eq!(threads.number(5, 7), (1000, true));
        assert_eq!(threads.number(0, 7), (7, false));
        assert_eq!(threads.number(5, 7), (1000, false));
        assert_eq!(threads.number(0, 1000), (1001, true));
        assert_eq!(
            (threads.get(7), threads.get(1000), threads.get(1001)),
            (Some((0, 7)), Some((5, 7)), Some((0, 1000)))
        );
        assert!(threads.iter().eq((0..1000).map(|t| (0, t)).chain([(5, 7), (0, 1000)])));
        // The very first thread of another interpreter than 0.
        let mut threads = ThreadNumbers::new();
        assert_eq!(
            (threads.number(1, 30003), threads.number(0, 30003), threads.number(1, 30003)),
            ((0, true), (1, true), (0, false))
        );
        assert_eq!((threads.get(0), threads.get(1)), (Some((1, 30003)), Some((0, 30003))));
    }

    #[test]
    fn a_hundred_thousand_sequences_across_growth() {
        let mut index = SequenceIndex::new();
        for round in 0..2 {
            for i in 0..100_000u32 {
                assert_eq!(index.id(&[i % 7, i, i / 3]), i, "round {round}");
            }
        }
        assert_eq!(index.len(), 100_000);
        assert_eq!(index.slots.heap_bytes(), 262_144 * 4, "100,000 ids in the least power of two at most half full");
    }
}
