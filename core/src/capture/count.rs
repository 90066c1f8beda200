//! A 62-bit count that one thread adds to and any thread reads, over two 32-bit atomics
//! with loads and stores only: targets without 64-bit atomics (Cortex-M, 32-bit PowerPC)
//! have no `AtomicU64`, and a handler cannot take a lock to update two words together.
//!
//! The count is `high · 2^30 + low30`. The low word holds `low30` in its bits 0–29 and, in
//! bits 30–31, a copy of `high`'s two lowest bits (its *phase*). The writer, at a carry,
//! stores the new `high` first and then the low word with the new phase; a reader loads
//! `high` and then the low word and tells from the phase which `high` the low word goes
//! with: the same (no carry in between), the one before (it read the new `high` and the
//! old low word) or the one after (a carry fell between its two loads). Exact unless 2^30
//! adds happen between a reader's two loads. A count of 2^62 − 1 is centuries of samples
//! at 10 kHz; past it the count wraps to 0.

use super::atomic::{AtomicU32, Ordering};

const LOW_BITS: u32 = 30;
const LOW_MASK: u32 = (1 << LOW_BITS) - 1;

/// The largest count (`2^62 − 1`).
pub const MAX_COUNT: u64 = (1 << 62) - 1;

pub(super) struct Count {
    low: AtomicU32,
    high: AtomicU32,
}

/// The two words of `value` (taken modulo 2^62).
const fn words(value: u64) -> (u32, u32) {
    let high = ((value >> LOW_BITS) & 0xFFFF_FFFF) as u32;
    (((high & 3) << LOW_BITS) | (value as u32 & LOW_MASK), high)
}

impl Count {
    #[cfg(not(loom))]
    pub(super) const fn new(value: u64) -> Self {
        let (low, high) = words(value);
        Count { low: AtomicU32::new(low), high: AtomicU32::new(high) }
    }

    #[cfg(loom)]
    pub(super) fn new(value: u64) -> Self {
        let (low, high) = words(value);
        Count { low: AtomicU32::new(low), high: AtomicU32::new(high) }
    }

    /// Adds one. For the count's one writer only: a load and a store, no read-modify-write
    /// (so it runs on cores without compare-and-swap), and cannot panic.
    #[inline]
    pub(super) fn add_one(&self) {
        // (Plus one first: its low 30 bits are zero exactly at a carry, a test the
        // compiler folds into the add.)
        let low = self.low.load(Ordering::Relaxed).wrapping_add(1);
        if low & LOW_MASK != 0 {
            // Relaxed: a push on PowerPC or Arm pays no barrier for its count. The release
            // of the next carry's `high` publishes this store with it.
            self.low.store(low, Ordering::Relaxed);
        } else {
            let high = self.high.load(Ordering::Relaxed).wrapping_add(1);
            // The new `high` first, released: a reader that acquires it sees the low word at
            // least as it was before this carry, so its low word is at most one carry behind
            // or ahead, which the phase tells apart (see the module's docs).
            self.high.store(high, Ordering::Release);
            self.low.store((high & 3) << LOW_BITS, Ordering::Relaxed);
        }
    }

    /// The count, from any thread.
    #[inline]
    pub(super) fn get(&self) -> u64 {
        let high = self.high.load(Ordering::Acquire);
        let low = self.low.load(Ordering::Relaxed);
        // The phase's distance from `high`'s: 0 the same, 1 the one after, 3 the one before
        // (2: two carries between the loads, 2^30 adds: the nearest reading, after). An
        // `if`, not a `match`: a jump table is an indirect jump, which the signal-safety
        // check of the machine code refuses to follow.
        let distance = (low >> LOW_BITS).wrapping_sub(high) & 3;
        let high = high.wrapping_add(if distance == 3 { u32::MAX } else { distance });
        (u64::from(high) << LOW_BITS) | u64::from(low & LOW_MASK)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn counts_across_carries_and_wraps_to_zero_past_the_largest() {
        for start in [0, u64::from(LOW_MASK) - 3, u64::from(u32::MAX) - 3, 5_000_000_000, MAX_COUNT - 3] {
            let c = Count::new(start);
            for i in 0..8u64 {
                assert_eq!(c.get(), (start + i) & MAX_COUNT, "from {start}, after {i}");
                c.add_one();
            }
        }
    }

    #[test]
    fn a_reader_between_the_two_stores_of_a_carry_gets_a_value_the_count_had() {
        // The writer stored the new `high`, not yet the low word: the old value.
        let c = Count::new((7 << LOW_BITS) + u64::from(LOW_MASK));
        c.high.store(8, Ordering::Relaxed);
        assert_eq!(c.get(), (7 << LOW_BITS) + u64::from(LOW_MASK));
        // A reader that loaded `high` (7) before the carry and the low word after it.
        let (low, _) = words(8 << LOW_BITS);
        let c = Count::new((7 << LOW_BITS) + 5);
        c.low.store(low, Ordering::Relaxed);
        assert_eq!(c.get(), 8 << LOW_BITS);
    }
}
