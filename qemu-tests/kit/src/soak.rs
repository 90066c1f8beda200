//! A capture ring under a long run, compressed: one producer thread pushes
//! sequence-numbered entries (code pairs, depth 1–64, every word a function of the number)
//! while a consumer thread pops and checks each one, for as many words as asked, from a ring
//! started at any position and count ([`Capture::starting_at`]). Used by core's tests
//! (2^28 words a ring, counters just below 2^32) and `scripts/capture-soak.sh` (from zero
//! past 2^32 words).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use tachyon_core::capture::{entry_words, Capture, Stack, Taken};

/// What a soak saw; [`soak`] has checked it against the ring's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Soaked {
    /// Words of the entries the ring kept (pad words not counted).
    pub words: u64,
    /// Entries the ring kept, each popped and checked.
    pub kept: u64,
    /// Entries the ring refused as full (numbers the consumer never saw).
    pub dropped: u64,
}

/// The entry numbered `i`: its depth and its pairs, every word a function of `i`.
fn depth(i: u64) -> usize {
    1 + (i.wrapping_mul(0x9E37_79B9) >> 7) as usize % 64
}

fn pair(i: u64, d: usize) -> (u64, u32) {
    (i.rotate_left(17) ^ (d as u64) << 56 ^ 0x00C0_DE00_0000_0000, (i as u32).wrapping_mul(31) ^ d as u32)
}

fn taken(i: u64) -> Taken {
    Taken { timestamp_us: i, thread_id: !i, interpreter_id: (i >> 3) as u32, status: (i % 251) as u8 }
}

/// Sets its flag when dropped — at the end of the thread that holds it, or when that thread
/// panics: the thread on the ring's other side waits on the flag and would otherwise spin
/// for ever, and the test hang instead of failing (seen with an overflow in the ring's count).
pub struct SetOnDrop<'a>(pub &'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Pushes entries numbered from 0 through a ring of `ring_words` words started as after
/// `words_before` words with each count at `count_before`, until the kept entries' words
/// reach `min_words`; pops and checks every entry on another thread. `Err` names the first
/// entry that came back wrong, out of order, or a count that does not match what the
/// producer saw.
pub fn soak(ring_words: usize, words_before: u64, count_before: u64, min_words: u64) -> Result<Soaked, String> {
    let words: Vec<AtomicU32> = (0..ring_words).map(|_| AtomicU32::new(0)).collect();
    let ring = Capture::starting_at(&words, words_before, count_before);
    let finished = AtomicBool::new(false);
    // Set when the consumer gives up on a wrong entry: a ring it no longer empties stays full,
    // and the producer would push for ever.
    let refused = AtomicBool::new(false);
    let (produced, consumed) = std::thread::scope(|s| {
        let producer = s.spawn(|| {
            let _ended = SetOnDrop(&finished);
            let (mut i, mut kept_words, mut kept, mut dropped) = (0u64, 0u64, 0u64, 0u64);
            while kept_words < min_words && !refused.load(Ordering::Relaxed) {
                let n = depth(i);
                if ring.push_code_from(taken(i), (0..n).map(|d| pair(i, d))).is_ok() {
                    kept_words += entry_words(n, true) as u64;
                    kept += 1;
                } else {
                    dropped += 1;
                }
                i += 1;
            }
            (kept_words, kept, dropped, i)
        });
        // (The consumer returns once the producer has ended, or on a wrong entry: either way
        // the producer may stop, so the flag is set whenever the consumer ends.)
        let consumer = s.spawn(|| {
            let _refused = SetOnDrop(&refused);
            consume(&ring, &finished)
        });
        (producer.join().expect("the producer panicked"), consumer.join().expect("the consumer panicked"))
    });
    let (words, kept, dropped, numbered) = produced;
    let (popped, missing, next) = consumed?;
    // Entries dropped after the last one popped are missing too.
    let missing = missing + numbered.saturating_sub(next);
    let counts = (ring.pushed().wrapping_sub(count_before), ring.dropped().wrapping_sub(count_before));
    if popped != kept || missing != dropped || counts != (kept, dropped) || ring.garbled() != count_before {
        return Err(format!(
            "the producer kept {kept} and dropped {dropped}; the consumer popped {popped} and missed {missing}; \
             the ring counted {} pushed, {} dropped, {} garbled (from {count_before})",
            ring.pushed(),
            ring.dropped(),
            ring.garbled()
        ));
    }
    Ok(Soaked { words, kept, dropped })
}

/// Pops and checks entries until the producer has finished and the ring is empty: the entries
/// popped, the numbers missing between them, and the number after the last one.
fn consume(ring: &Capture<'_>, finished: &AtomicBool) -> Result<(u64, u64, u64), String> {
    let (mut next, mut kept, mut missing) = (0u64, 0u64, 0u64);
    loop {
        // Read before popping: an entry pushed before the flag was set is popped after.
        let ended = finished.load(Ordering::Acquire);
        let Some(entry) = ring.pop(|e| check(&e)) else {
            if ended {
                return Ok((kept, missing, next));
            }
            std::hint::spin_loop();
            continue;
        };
        let i = entry.map_err(|e| format!("after {kept} entries: {e}"))?;
        if i < next {
            return Err(format!("entry {i} came after entry {}", next - 1));
        }
        missing += i - next;
        next = i + 1;
        kept += 1;
    }
}

/// The entry's number if every word is the one pushed for it.
fn check(e: &tachyon_core::capture::Entry<'_>) -> Result<u64, String> {
    let i = e.taken().timestamp_us;
    if e.taken() != taken(i) {
        return Err(format!("entry {i}: {:?} is not what was pushed", e.taken()));
    }
    let Stack::Code(pairs) = e.stack() else { return Err(format!("entry {i}: not code pairs")) };
    if e.depth() != depth(i) {
        return Err(format!("entry {i}: depth {} where {} was pushed", e.depth(), depth(i)));
    }
    for (d, got) in pairs.enumerate() {
        if got != pair(i, d) {
            return Err(format!("entry {i}: frame {d} is {got:?}, {:?} was pushed", pair(i, d)));
        }
    }
    Ok(i)
}
