//! The capture ring's soak from a fresh ring past the first wrap of 32-bit counters
//! (`scripts/capture-soak.sh`): `capture_soak [WORDS]` pushes at least WORDS words (default
//! 2^32 + 2^28) through rings of 1,000, 1,024 and 4,099 words from zero, a producer and a
//! consumer thread, every entry checked (`tachyon_test_kit::soak`). Prints one line a ring.

use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    let words = match std::env::args().nth(1).map(|a| a.parse::<u64>()) {
        None => (1 << 32) + (1 << 28),
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("capture_soak: WORDS: {e}");
            return ExitCode::from(2);
        }
    };
    let mut ok = true;
    for ring_words in [1_000, 1_024, 4_099] {
        let start = Instant::now();
        match tachyon_test_kit::soak::soak(ring_words, 0, 0, words) {
            Ok(s) => println!(
                "ring of {ring_words} words: {} words in {} entries checked, {} dropped and counted, 0 corrupt ({:.1} s)",
                s.words,
                s.kept,
                s.dropped,
                start.elapsed().as_secs_f64()
            ),
            Err(e) => {
                println!("ring of {ring_words} words: FAILED: {e}");
                ok = false;
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
