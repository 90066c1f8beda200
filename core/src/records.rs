//! Sample-region records (spec section 2) and the writer's choice among them (spec 5.5).
//!
//! Every record starts with a 13-byte prefix: thread id (u64, native), interpreter id (u32,
//! native) and the encoding byte. Frame-index lists are innermost frame first.

use crate::endian::Endianity;
use crate::varint::{MAX_VARINT32_LEN, MAX_VARINT_LEN};

/// Bytes of the record prefix.
pub const PREFIX_LEN: usize = 13;
/// Frames kept per stack; deeper (outer) frames are dropped by the writer and rejected by
/// the reader.
pub const MAX_STACK_DEPTH: usize = 256;
/// CPython's per-thread byte budget for a pending REPEAT run.
pub const CPYTHON_RLE_BUDGET: usize = 16384;
/// Largest REPEAT entry: a 10-byte timestamp delta and the status byte.
pub const MAX_RLE_ENTRY_LEN: usize = MAX_VARINT_LEN + 1;
/// Largest FULL, SUFFIX or POP_PUSH record: prefix, delta, status, two counts and 256
/// indices.
pub const MAX_STACK_RECORD_LEN: usize =
    PREFIX_LEN + MAX_VARINT_LEN + 1 + 2 * MAX_VARINT32_LEN + MAX_STACK_DEPTH * MAX_VARINT32_LEN;

/// Largest REPEAT record for a run budget of `rle_budget` bytes.
pub const fn max_repeat_record_len(rle_budget: usize) -> usize {
    PREFIX_LEN + MAX_VARINT32_LEN + rle_budget
}

/// Largest record of any kind for a run budget of `rle_budget` bytes.
pub const fn max_record_len(rle_budget: usize) -> usize {
    let repeat = max_repeat_record_len(rle_budget);
    if repeat > MAX_STACK_RECORD_LEN {
        repeat
    } else {
        MAX_STACK_RECORD_LEN
    }
}

/// The encoding byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum Encoding {
    /// Same stack as the thread's previous record; a run of `(delta, status)` pairs.
    Repeat = 0,
    /// A whole stack.
    Full = 1,
    /// New innermost frames on top of the whole previous stack.
    Suffix = 2,
    /// Pop innermost frames of the previous stack, then push new ones.
    PopPush = 3,
}

impl Encoding {
    /// The encoding for a byte, if it names one.
    pub fn from_byte(b: u8) -> Option<Self> {
        Some(match b {
            0 => Encoding::Repeat,
            1 => Encoding::Full,
            2 => Encoding::Suffix,
            3 => Encoding::PopPush,
            _ => return None,
        })
    }
}

/// The record prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    /// Thread id.
    pub thread_id: u64,
    /// Interpreter id.
    pub interpreter_id: u32,
    /// Raw encoding byte (validated separately, so an unknown value can be reported).
    pub encoding: u8,
}

impl Prefix {
    /// The 13 prefix bytes.
    #[inline]
    pub fn encode<E: Endianity>(&self, e: E) -> [u8; PREFIX_LEN] {
        let mut b = [0u8; PREFIX_LEN];
        b[0..8].copy_from_slice(&e.u64_bytes(self.thread_id));
        b[8..12].copy_from_slice(&e.u32_bytes(self.interpreter_id));
        b[12] = self.encoding;
        b
    }

    /// Decodes the 13 prefix bytes.
    #[inline]
    pub fn decode<E: Endianity>(b: &[u8; PREFIX_LEN], e: E) -> Self {
        let mut tid = [0u8; 8];
        tid.copy_from_slice(&b[0..8]);
        let mut iid = [0u8; 4];
        iid.copy_from_slice(&b[8..12]);
        Prefix { thread_id: e.read_u64(tid), interpreter_id: e.read_u32(iid), encoding: b[12] }
    }
}

/// How a thread's new stack is written relative to its previous one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackChange {
    /// Identical stacks: buffered into the thread's REPEAT run.
    Repeat,
    /// The whole stack.
    Full,
    /// `push` new innermost frames on `shared` (= all) previous frames.
    Suffix {
        /// Frames kept (the whole previous stack).
        shared: usize,
        /// Frames added.
        push: usize,
    },
    /// Drop `pop` innermost frames, then add `push`.
    PopPush {
        /// Frames removed.
        pop: usize,
        /// Frames added.
        push: usize,
    },
}

/// CPython 3.15.2's fixed heuristic (spec 5.5); both stacks innermost first.
#[inline]
pub fn choose_change(prev: &[u32], cur: &[u32]) -> StackChange {
    if prev == cur {
        return StackChange::Repeat;
    }
    // Frames shared from the bottom (outermost) end.
    let shared = prev.iter().rev().zip(cur.iter().rev()).take_while(|(a, b)| a == b).count();
    let pop = prev.len() - shared;
    let push = cur.len() - shared;
    if shared == 0 {
        StackChange::Full
    } else if pop == 0 {
        StackChange::Suffix { shared, push }
    } else if shared < cur.len() / 2 {
        StackChange::Full
    } else {
        StackChange::PopPush { pop, push }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endian::{BigEndian, LittleEndian};

    #[test]
    fn vector_04_choices() {
        // Frames of vector 04: I, W, M, H as 0..3.
        const I: u32 = 0;
        const W: u32 = 1;
        const M: u32 = 2;
        const H: u32 = 3;
        assert_eq!(choose_change(&[], &[I, W, M]), StackChange::Full);
        assert_eq!(choose_change(&[I, W, M], &[H, W, M]), StackChange::PopPush { pop: 1, push: 1 });
        assert_eq!(choose_change(&[H, W, M], &[W, M]), StackChange::PopPush { pop: 1, push: 0 });
        assert_eq!(choose_change(&[W, M], &[I, H, W, M]), StackChange::Suffix { shared: 2, push: 2 });
        assert_eq!(choose_change(&[I, H, W, M], &[H, I, W, M]), StackChange::PopPush { pop: 2, push: 2 });
        assert_eq!(choose_change(&[H, I, W, M], &[W, H, I, M]), StackChange::Full);
        assert_eq!(choose_change(&[W, H, I, M], &[I, W, M]), StackChange::PopPush { pop: 3, push: 2 });
        assert_eq!(choose_change(&[], &[]), StackChange::Repeat);
        assert_eq!(choose_change(&[W, M], &[]), StackChange::Full);
        assert_eq!(choose_change(&[W, M], &[W, M]), StackChange::Repeat);
    }

    #[test]
    fn prefix_orders() {
        let p = Prefix { thread_id: 0x1234, interpreter_id: 1, encoding: 3 };
        let le = p.encode(LittleEndian);
        let be = p.encode(BigEndian);
        assert_eq!(le, [0x34, 0x12, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 3]);
        assert_eq!(be, [0, 0, 0, 0, 0, 0, 0x12, 0x34, 0, 0, 0, 1, 3]);
        assert_eq!(Prefix::decode(&be, BigEndian), p);
    }

    #[test]
    fn size_bounds() {
        assert_eq!(MAX_STACK_RECORD_LEN, 1314);
        assert_eq!(max_record_len(CPYTHON_RLE_BUDGET), 16402);
        assert_eq!(max_record_len(64), 1314);
    }
}

/// Records of each kind: what a reader has decoded or a writer has written so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecordCounts {
    /// REPEAT records.
    pub repeat: u64,
    /// FULL records.
    pub full: u64,
    /// SUFFIX records.
    pub suffix: u64,
    /// POP_PUSH records.
    pub pop_push: u64,
}

impl RecordCounts {
    /// Counts one record of `encoding`.
    #[inline]
    pub fn add(&mut self, encoding: Encoding) {
        match encoding {
            Encoding::Repeat => self.repeat += 1,
            Encoding::Full => self.full += 1,
            Encoding::Suffix => self.suffix += 1,
            Encoding::PopPush => self.pop_push += 1,
        }
    }

    /// Records of all kinds.
    pub fn total(&self) -> u64 {
        self.repeat + self.full + self.suffix + self.pop_push
    }
}

/// What a writer has written so far, as CPython's `BinaryWriter.get_stats()` counts it: a
/// REPEAT run counts when its record is written (a run still pending does not), and so do
/// the frames it saves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteCounts {
    /// Records written, by kind.
    pub records: RecordCounts,
    /// Samples in the REPEAT records written.
    pub repeat_samples: u64,
    /// Frame ids listed in FULL, SUFFIX and POP_PUSH records.
    pub frames_written: u64,
    /// Frames not listed because a record shared them with the thread's previous stack:
    /// the whole stack of each REPEAT sample, the kept part of a SUFFIX or POP_PUSH.
    pub frames_saved: u64,
    /// Bytes of the records written, before any compression.
    pub bytes_written: u64,
}
