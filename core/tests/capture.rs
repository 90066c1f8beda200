//! The capture ring and its drain: entries come out as they went in, in order, across the
//! ring's end; a full ring drops and counts; a garbled ring is refused without a panic; the
//! drain writes what a direct writer writes and puts the losses in the stats trailer.

use std::sync::atomic::AtomicU32;

use tachyon_core::capture::{entry_words, Capture, Drain, Dropped, Stack, Taken};
use tachyon_core::io::Cursor;
use tachyon_core::storage::StaticWriterStorage;
use tachyon_core::{Frame, FrameId, Reader, StaticReaderStorage, Writer, WriterConfig};

fn words(n: usize) -> Vec<AtomicU32> {
    (0..n).map(|_| AtomicU32::new(0)).collect()
}

fn taken(i: u64) -> Taken {
    Taken { timestamp_us: 1_000 + i, interpreter_id: 2, thread_id: 0x1_0000_0007 + i, status: (i % 7) as u8 }
}

/// An entry as (taken, frame ids, code pairs).
type Popped = (Taken, Vec<u32>, Vec<(u64, u32)>);

/// Pops one entry.
fn pop(ring: &Capture<'_>) -> Option<Popped> {
    ring.pop(|e| {
        assert_eq!(
            e.depth(),
            match e.stack() {
                Stack::Ids(i) => i.count(),
                Stack::Code(c) => c.count(),
            }
        );
        match e.stack() {
            Stack::Ids(ids) => (e.taken(), ids.map(|id| id.0).collect(), vec![]),
            Stack::Code(pairs) => (e.taken(), vec![], pairs.collect()),
        }
    })
}

#[test]
fn entries_come_out_as_pushed_across_the_end() {
    // 40 words: a 3-frame id entry is 10 words, a 2-pair code entry 13; the ring wraps
    // several times, with padding.
    let w = words(40);
    let ring = Capture::new(&w);
    for round in 0..50u64 {
        let ids = [FrameId(round as u32), FrameId(7), FrameId(u32::MAX)];
        ring.push_ids(taken(round), &ids).unwrap();
        ring.push_code(taken(round + 1), &[(u64::MAX - round, 3), (round << 40, 0xFFFF_FFFF)]).unwrap();
        assert_eq!(pop(&ring), Some((taken(round), vec![round as u32, 7, u32::MAX], vec![])));
        assert_eq!(
            pop(&ring),
            Some((taken(round + 1), vec![], vec![(u64::MAX - round, 3), (round << 40, 0xFFFF_FFFF)]))
        );
        assert_eq!(pop(&ring), None);
    }
    assert_eq!((ring.pushed(), ring.dropped(), ring.garbled()), (100, 0, 0));
}

#[test]
fn root_first_stacks_are_reversed_and_deep_ones_cut_like_the_writer() {
    let w = words(2000);
    let ring = Capture::new(&w);
    let shadow: Vec<u32> = (0..300).collect(); // root 0 … innermost 299
    ring.push_ids_root_first(taken(0), &shadow).unwrap();
    let (_, ids, _) = pop(&ring).unwrap();
    let want: Vec<u32> = (44..300).rev().collect(); // the innermost 256, innermost first
    assert_eq!(ids, want);
    let deep: Vec<FrameId> = (0..300).map(FrameId).collect();
    ring.push_ids(taken(1), &deep).unwrap();
    assert_eq!(pop(&ring).unwrap().1, (0..256).collect::<Vec<u32>>());
}

#[test]
fn native_addresses_are_code_pairs_with_return_addresses_less_one() {
    let w = words(2000);
    let ring = Capture::new(&w);
    // The interrupted instruction as it is; each return address less one (0 wraps, as an
    // unwinder's garbage may hold it, rather than panicking).
    ring.push_addresses(taken(0), &[0x1000, 0x2005, 0]).unwrap();
    assert_eq!(pop(&ring).unwrap().2, vec![(0x1000, 0), (0x2004, 0), ((0usize as u64).wrapping_sub(1), 0)]);
    let deep: Vec<usize> = (1..=300).collect();
    ring.push_addresses(taken(1), &deep).unwrap();
    let kept = pop(&ring).unwrap().2;
    assert_eq!((kept.len(), kept[0], kept[255]), (256, (1, 0), (255, 0)));
    ring.push_addresses(taken(2), &[]).unwrap();
    assert_eq!(pop(&ring).unwrap().2, vec![]);
}

#[test]
fn a_full_ring_drops_and_counts_and_never_overwrites() {
    // 33 words: four 8-word entries and the word a push keeps free (a full ring would look
    // empty).
    let w = words(entry_words(1, false) * 4 + 1);
    let ring = Capture::new(&w);
    for i in 0..4 {
        ring.push_ids(taken(i), &[FrameId(i as u32)]).unwrap();
    }
    assert_eq!(ring.push_ids(taken(9), &[FrameId(9)]), Err(Dropped::Full));
    assert_eq!(ring.push_code(taken(9), &[(1, 1)]), Err(Dropped::Full));
    assert_eq!((ring.pushed(), ring.dropped()), (4, 2));
    // The kept ones are intact and in order.
    for i in 0..4 {
        assert_eq!(pop(&ring).unwrap().1, vec![i as u32]);
    }
    // An entry longer than the ring is dropped as too large.
    let deep = [FrameId(0); 40];
    assert_eq!(ring.push_ids(taken(0), &deep), Err(Dropped::TooLarge));
    assert_eq!(ring.dropped(), 3);
    // A ring of no words drops everything and pops nothing.
    let none = Capture::new(&[]);
    assert_eq!(none.push_ids(taken(0), &[]), Err(Dropped::TooLarge));
    assert!(pop(&none).is_none());
}

#[test]
fn a_garbled_ring_is_refused_without_reading_past_it() {
    // Two producers at once can leave any words: the consumer must not trust a length.
    // Each case garbles the header (word 0) or the depth (word 6) of a 2-id entry (9 words).
    let cases: [(usize, u32); 5] = [
        (0, 0x0100_FFFF), // a length past the published words
        (0, 0x0100_0003), // shorter than an entry's fixed words
        (0, 0x0300_0009), // an unknown kind
        (0, 0x0000_0000), // nothing at all
        (6, 5),           // a depth that disagrees with the length
    ];
    for (word, bad) in cases {
        let w = words(64);
        let ring = Capture::new(&w);
        ring.push_ids(taken(0), &[FrameId(1), FrameId(2)]).unwrap();
        w[word].store(bad, std::sync::atomic::Ordering::Relaxed);
        assert!(pop(&ring).is_none(), "word {word} = {bad:#x}");
        assert_eq!(ring.garbled(), 1);
        // The ring is usable again: the next entry comes out whole.
        ring.push_ids(taken(1), &[FrameId(3)]).unwrap();
        assert_eq!(pop(&ring).unwrap().1, vec![3]);
        assert!(pop(&ring).is_none());
    }
}

#[test]
fn one_producer_thread_and_one_consumer_thread_lose_nothing_they_do_not_count() {
    let w = words(500);
    let ring = Capture::new(&w);
    const N: u64 = 200_000;
    // The consumer stops once the producer has ended and the ring is empty, not after a count
    // of empty polls: at opt-level 1 on a loaded machine a million polls passed while the
    // producer waited for a core, and the test lost entries that were still to come.
    let finished = std::sync::atomic::AtomicBool::new(false);
    let seen = std::thread::scope(|s| {
        s.spawn(|| {
            // (Set as the producer ends, or panics: the consumer below waits for it.)
            let _ended = tachyon_test_kit::soak::SetOnDrop(&finished);
            for i in 0..N {
                let depth = (i % 20) as usize;
                let ids: Vec<FrameId> = (0..depth as u32).map(|d| FrameId(i as u32 ^ d)).collect();
                let _ = ring.push_ids(taken(i), &ids);
            }
        });
        let mut seen = Vec::new();
        loop {
            // Read before popping: an entry pushed before the flag was set is popped after.
            let ended = finished.load(std::sync::atomic::Ordering::Acquire);
            match pop(&ring) {
                Some(entry) => seen.push(entry),
                None if ended => break,
                None => std::hint::spin_loop(),
            }
        }
        seen
    });
    assert_eq!(seen.len() as u64 + ring.dropped(), N);
    assert_eq!(ring.garbled(), 0);
    let mut last = None;
    for (t, ids, _) in &seen {
        let i = t.timestamp_us - 1_000;
        assert!(last.map_or(true, |l| i > l), "out of order: {i} after {last:?}");
        last = Some(i);
        assert_eq!(*t, taken(i));
        let want: Vec<u32> = (0..(i % 20) as u32).map(|d| i as u32 ^ d).collect();
        assert_eq!(*ids, want);
    }
}

type Storage = StaticWriterStorage<4096, 64, 64, 8>;

#[test]
fn the_drain_writes_what_a_direct_writer_writes_and_the_losses_in_the_trailer() {
    let mut direct_storage = Box::new(Storage::new());
    let mut drained_storage = Box::new(Storage::new());
    let mut direct_file = vec![0u8; 8192];
    let mut drained_file = vec![0u8; 8192];
    let config = WriterConfig::new(1_000, 100);
    let mut direct = Writer::new(Cursor::new(&mut direct_file[..]), direct_storage.storage(), config).unwrap();
    let mut drained = Writer::new(Cursor::new(&mut drained_file[..]), drained_storage.storage(), config).unwrap();
    let names = [Frame::new(b"a.lua", b"main"), Frame::new(b"a.lua", b"work"), Frame::new(b"b.lua", b"jit")];
    let mut ids = vec![];
    for f in names {
        ids.push(direct.intern_frame(f).unwrap());
        assert_eq!(drained.intern_frame(f).unwrap(), *ids.last().unwrap());
    }
    let w = words(128);
    let ring = Capture::new(&w);
    let resolver =
        |code: u64, _offset: u32| if code == 9 { Frame::new(b"b.lua", b"jit") } else { Frame::new(b"~", b"?") };
    let mut drain = Drain::new();
    for i in 0..30u64 {
        let t = taken(i % 3);
        let t = Taken { timestamp_us: 2_000 + i * 100, ..t };
        if i % 2 == 0 {
            let stack = [ids[(i % 2) as usize + 1], ids[0]];
            ring.push_ids(t, &stack).unwrap();
            direct.write_thread_sample_ids(t.timestamp_us, t.interpreter_id, t.thread_id, t.status, &stack).unwrap();
        } else {
            ring.push_code(t, &[(9, 4), (9, 5)]).unwrap();
            direct
                .write_thread_sample(t.timestamp_us, t.interpreter_id, t.thread_id, t.status, [names[2], names[2]])
                .unwrap();
        }
        if i % 4 == 3 {
            drain.drain(&ring, &mut drained, &resolver, usize::MAX).unwrap();
        }
    }
    // An id no writer gave out is refused and counted.
    drain.drain(&ring, &mut drained, &resolver, usize::MAX).unwrap();
    ring.push_ids(taken(0), &[FrameId(99)]).unwrap();
    assert_eq!(drain.drain(&ring, &mut drained, &resolver, usize::MAX).unwrap(), 1);
    assert_eq!((drain.written(), drain.refused()), (30, 1));
    // A full ring: 27-word entries into 128 words, four fit (with the padding a wrap may
    // need, at least three), the rest are dropped.
    let deep = [FrameId(0); 20];
    let results: Vec<_> = (0..6).map(|_| ring.push_ids(taken(0), &deep)).collect();
    let fits = results.iter().filter(|r| r.is_ok()).count();
    assert!(fits >= 3 && results[fits..].iter().all(|r| *r == Err(Dropped::Full)), "{results:?}");
    assert_eq!(ring.dropped() as usize, 6 - fits);
    assert_eq!(drain.drain(&ring, &mut drained, &resolver, usize::MAX).unwrap(), fits);
    for _ in 0..fits {
        direct.write_thread_sample_ids(1_000, 2, 0x1_0000_0007, 0, &deep).unwrap();
    }
    drain.set_stats(&mut drained, 1_000, [&ring]).unwrap();
    let drained_len = drained.finish().unwrap() as usize;
    let direct_len = direct.finish().unwrap() as usize;
    // Without the 56-byte trailer the files are the same bytes.
    assert_eq!(drained_len, direct_len + 56);
    assert_eq!(drained_file[64..direct_len - 32], direct_file[64..direct_len - 32]);
    let mut rs = Box::new(StaticReaderStorage::<4096, 64, 64, 8>::new());
    let reader = Reader::open(Cursor::new(&drained_file[..drained_len]), rs.storage()).unwrap();
    let stats = reader.metadata().stats.unwrap();
    let written = drain.written() as f64;
    // By hand: the last timestamp, 2_000 + 29 * 100 µs, is 3,900 µs after the 1_000 µs start.
    assert_eq!(stats.duration_sec, 0.003_900);
    assert_eq!(stats.sample_rate, written / 0.0039);
    let dropped = (6 - fits) as f64;
    assert_eq!(written, 30.0 + fits as f64);
    assert_eq!(stats.error_rate, Some(100.0 / (written + 1.0)));
    assert_eq!(stats.missed_samples, Some(dropped * 100.0 / (written + 1.0 + dropped)));
    // The count comes back from the percentages, as the docs say.
    let taken = (written / (1.0 - stats.error_rate.unwrap() / 100.0)).round();
    let all = (taken / (1.0 - stats.missed_samples.unwrap() / 100.0)).round();
    assert_eq!(all - taken, dropped);
}

/// The soak's size: 2^28 words a ring on the host (a few seconds); under qemu-user, where
/// the same binary runs about twenty times slower, 2^22 — the wraps and carries are the same.
const SOAK_WORDS: u64 = if cfg!(target_endian = "little") { 1 << 28 } else { 1 << 22 };

#[test]
fn rings_of_every_length_lose_and_garble_nothing_across_position_wraps_and_count_carries() {
    // Counters just below 2^32: the old free-running positions wrapped there and, for a
    // length that does not divide 2^32 (1,000 and 4,099), moved the slot back by
    // 2^32 mod length and overwrote unread entries; the counts were u32 and wrapped there.
    let start = u64::from(u32::MAX) - 50;
    for ring_words in [1_000, 1_024, 4_099] {
        let soaked = tachyon_test_kit::soak::soak(ring_words, start, start, SOAK_WORDS)
            .unwrap_or_else(|e| panic!("a ring of {ring_words} words: {e}"));
        assert!(soaked.words >= SOAK_WORDS && soaked.kept > 0, "{soaked:?}");
    }
}

#[test]
fn a_ring_started_anywhere_is_empty_and_pops_what_is_pushed_across_its_end() {
    for words_before in [0, 1, 999, 1_000, 1_999, 2_000, u64::from(u32::MAX), u64::MAX] {
        let w = words(1_000);
        let ring = Capture::starting_at(&w, words_before, 5_000_000_000);
        assert!(pop(&ring).is_none(), "{words_before}");
        // Entries of 7 + 100 words: the ring's end comes within the first ten.
        for i in 0..40 {
            let ids: Vec<FrameId> = (0..100).map(|d| FrameId(i * 1000 + d)).collect();
            ring.push_ids(taken(u64::from(i)), &ids).unwrap();
            let (t, got, _) = pop(&ring).unwrap();
            assert_eq!((t, got), (taken(u64::from(i)), ids.iter().map(|f| f.0).collect()), "{words_before}, {i}");
        }
        assert_eq!((ring.pushed(), ring.dropped(), ring.garbled()), (5_000_000_040, 5_000_000_000, 5_000_000_000));
    }
}

#[test]
fn missed_samples_in_the_trailer_are_right_past_five_billion_drops() {
    // By construction, not by waiting: a ring whose counts start at 5 × 10^9.
    let w = words(64);
    let ring = Capture::starting_at(&w, 0, 5_000_000_000);
    let deep = [FrameId(0); 100]; // longer than the ring: dropped
    for _ in 0..3 {
        assert_eq!(ring.push_ids(taken(0), &deep), Err(Dropped::TooLarge));
    }
    ring.push_ids(taken(0), &[FrameId(0)]).unwrap();
    let mut storage = Box::new(Storage::new());
    let mut file = vec![0u8; 8192];
    let mut writer = Writer::new(Cursor::new(&mut file[..]), storage.storage(), WriterConfig::new(1_000, 100)).unwrap();
    writer.intern_frame(Frame::new(b"a.lua", b"main")).unwrap();
    let mut drain = Drain::new();
    assert_eq!(drain.drain(&ring, &mut writer, &tachyon_core::capture::IdsOnly, usize::MAX).unwrap(), 1);
    drain.set_stats(&mut writer, 1_000, [&ring]).unwrap();
    let len = writer.finish().unwrap() as usize;
    let mut rs = Box::new(StaticReaderStorage::<4096, 64, 64, 8>::new());
    let reader = Reader::open(Cursor::new(&file[..len]), rs.storage()).unwrap();
    let missed = reader.metadata().stats.unwrap().missed_samples.unwrap();
    // Dropped 5,000,000,003 and garbled 5,000,000,000 of 10,000,000,004 taken; by hand.
    assert_eq!(missed, 10_000_000_003.0 * 100.0 / 10_000_000_004.0);
}
