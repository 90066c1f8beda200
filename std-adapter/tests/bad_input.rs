//! Bad input is normal input for conversions too: every truncation and many single-byte
//! corruptions of CPython's vectors go through every format and the re-encoder; each must end
//! in a typed error or a result, never a panic.

use std::path::Path;

use tachyon::convert::pstats::SortOrder;
use tachyon::convert::{convert, Format};
use tachyon::memory::VecSink;
use tachyon::open::{Limits, OwnedReaderStorage};
use tachyon_core::io::Cursor;
use tachyon_core::reader::Metadata;
use tachyon_core::LittleEndian;

fn formats() -> Vec<Format> {
    vec![
        Format::Collapsed,
        Format::Pstats { compat: false },
        Format::PstatsText { sort: SortOrder::Name, limit: None, summary: true },
        Format::Flamegraph { title: "t".into() },
        Format::Gecko,
        Format::Speedscope { name: "s".into() },
        Format::Pprof,
        Format::Jsonl { run_id: Some("0".repeat(32)) },
    ]
}

/// Runs everything over `bytes`; returns how many runs ended in an error.
fn run_all(bytes: &[u8]) -> usize {
    let Ok(meta) = Metadata::read(&mut Cursor::new(bytes)) else { return 1 };
    let Ok(mut storage) = OwnedReaderStorage::for_metadata(&meta, Limits::default()) else { return 1 };
    let mut errors = 0;
    for format in formats() {
        let Ok(mut reader) = storage.open(Cursor::new(bytes)) else { return errors + 1 };
        let mut out = Vec::new();
        errors += usize::from(convert(&mut reader, &format, &mut out, &mut |_| {}).is_err());
    }
    if let Ok(mut reader) = storage.open(Cursor::new(bytes)) {
        let again =
            tachyon::convert::tachyon::reencode(&mut reader, VecSink::default(), LittleEndian, None, &mut |_| {});
        errors += usize::from(again.is_err());
    }
    errors
}

#[test]
fn corrupt_and_truncated_files_never_panic_a_conversion() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../qemu-tests/vectors/cpython-3.15.2");
    let mut variants = 0;
    let mut failed = 0;
    for name in
        ["03_suffix.x86_64", "04_pop_push.s390x", "05_two_threads.x86_64", "09_zstd.x86_64", "13_time_edges.s390x"]
    {
        let good = std::fs::read(dir.join(format!("{name}.bin"))).unwrap();
        assert_eq!(run_all(&good), 0, "{name} converts cleanly");
        for len in 0..good.len() {
            variants += 1;
            failed += usize::from(run_all(&good[..len]) > 0);
        }
        for at in 0..good.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = good.clone();
                bad[at] ^= flip;
                variants += 1;
                failed += usize::from(run_all(&bad) > 0);
            }
        }
    }
    // A real profile: corruptions spread over the file, every 211th byte.
    let real = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/stdlib_work.pyb")).unwrap();
    assert_eq!(run_all(&real), 0, "the example converts cleanly");
    for at in (0..real.len()).step_by(211) {
        let mut bad = real.clone();
        bad[at] ^= 0x5a;
        variants += 1;
        failed += usize::from(run_all(&bad) > 0);
    }
    eprintln!("{failed} of {variants} variants ended in an error, none panicked");
    // Truncations all fail (the footer is gone); most corruptions are caught somewhere.
    assert!(failed > variants / 2, "{failed} of {variants} variants failed");
}
