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
        self.state = (self.state ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
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
