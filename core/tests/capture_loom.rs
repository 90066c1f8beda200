//! The capture ring's memory orderings under loom's model checker: every interleaving and
//! every weak-memory outcome loom can produce of one producer and one consumer.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p tachyon-core --test capture_loom --profile checked`
//! (the test command does, in its own target directory). The ring's words are atomics
//! stored with `Relaxed`, so loom sees a consumer that could read a word before the
//! producer published it: weakening the producer's release of `written` or the consumer's
//! acquire of it to `Relaxed` makes these tests fail (tried). The other direction — the
//! producer must not overwrite words the consumer is still reading, the release/acquire pair
//! on `released` — is a load-buffering outcome, which loom does not model (it cannot let a
//! load read a store that comes later in its execution); that pair is the textbook one of a
//! Lamport queue, and the std test of two real threads exercises it.

#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use loom::sync::Arc;
use tachyon_core::capture::{Capture, Stack, Taken};
use tachyon_core::FrameId;

fn taken(i: u64) -> Taken {
    Taken { timestamp_us: 0x1_0000_0000 + i, interpreter_id: i as u32, thread_id: u64::MAX - i, status: i as u8 }
}

/// Entry `i`'s ids: `depth` of them, a function of `i` in every word.
fn ids(i: u64, depth: u32) -> Vec<FrameId> {
    (0..depth).map(|d| FrameId(0xA000 + (i as u32) * 16 + d)).collect()
}

fn check(entry: &tachyon_core::capture::Entry<'_>) -> u64 {
    let i = entry.taken().timestamp_us - 0x1_0000_0000;
    assert_eq!(entry.taken(), taken(i));
    let Stack::Ids(got) = entry.stack() else { panic!("kind") };
    assert_eq!(got.collect::<Vec<_>>(), ids(i, entry.depth() as u32));
    assert!(entry.depth() > 0);
    i
}

#[test]
fn the_producer_reuses_words_only_after_the_consumer_read_them() {
    // Entries of 8, 9 and 8 words in 17: the third goes where the first was.
    run(17, [1, 2, 1]);
}

#[test]
fn an_entry_that_does_not_fit_before_the_end_goes_back_to_the_start() {
    // Entries of 8, 9 and 10 words in 20: the third needs a pad word and the start.
    run(20, [1, 2, 3]);
}

#[test]
fn positions_wrap_and_counts_carry_while_both_sides_run() {
    // Started as after 29 words (position 12 of 17), the first entry goes back to the start
    // behind a pad word, the second ends at the last word and the third starts again at 0; each count starts one below a carry of its low
    // word (2^30).
    run_from(17, [1, 2, 1], 2 * 17 - 5, (1 << 30) - 1);
}

#[test]
fn a_count_read_during_a_carry_is_one_the_count_had() {
    // The count's low word carries into its high word at 2^30: two stores, which a reader on
    // another thread can fall between (core/src/capture/count.rs).
    loom::model(|| {
        let words: Vec<AtomicU32> = (0..64).map(|_| AtomicU32::new(0)).collect();
        let start = (1 << 30) - 1;
        let ring = Arc::new(Capture::starting_at(Box::leak(words.into_boxed_slice()), 0, start));
        let producer_ring = ring.clone();
        let producer = loom::thread::spawn(move || {
            for i in 0..2 {
                producer_ring.push_ids(taken(i), &ids(i, 1)).unwrap();
            }
        });
        // Without a yield here loom ran one execution only (the producer after both reads)
        // and missed a reader that ignores the phase bits; with it, it finds that reader.
        loom::thread::yield_now();
        let first = ring.pushed();
        let second = ring.pushed();
        assert!(start <= first && first <= second && second <= start + 2, "{first} then {second}, from {start}");
        producer.join().unwrap();
        assert_eq!(ring.pushed(), start + 2);
    });
}

fn run(words: usize, depths: [u32; 3]) {
    run_from(words, depths, 0, 0);
}

fn run_from(words: usize, depths: [u32; 3], words_before: u64, count: u64) {
    loom::model(move || {
        // The words are leaked: loom's threads need `'static`, and each run leaks a few
        // hundred bytes.
        let words: Vec<AtomicU32> = (0..words).map(|_| AtomicU32::new(0)).collect();
        let ring = Arc::new(Capture::starting_at(Box::leak(words.into_boxed_slice()), words_before, count));
        let producer_ring = ring.clone();
        let done = Arc::new(AtomicBool::new(false));
        let producer_done = done.clone();
        let producer = loom::thread::spawn(move || {
            let mut kept = Vec::new();
            for i in 0..3u64 {
                if producer_ring.push_ids(taken(i), &ids(i, depths[i as usize])).is_ok() {
                    kept.push(i);
                }
            }
            producer_done.store(true, Ordering::Release);
            kept
        });
        // The consumer polls while the producer runs, as a writer thread does.
        let mut seen = Vec::new();
        loop {
            if let Some(i) = ring.pop(|e| check(&e)) {
                seen.push(i);
            } else if done.load(Ordering::Acquire) {
                break;
            } else {
                loom::thread::yield_now();
            }
        }
        let kept = producer.join().unwrap();
        while let Some(i) = ring.pop(|e| check(&e)) {
            seen.push(i);
        }
        assert_eq!(seen, kept, "popped in push order, nothing kept lost");
        assert_eq!(ring.pushed() - count, kept.len() as u64);
        assert_eq!(kept.len() as u64 + ring.dropped() - count, 3);
        assert_eq!(ring.garbled(), count);
    });
}
