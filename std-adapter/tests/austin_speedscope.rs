//! speedscope JSON as `austin2speedscope` (austin-python 1.7.1) writes it: hand-written
//! Austin text exercising how it reads lines, against the real tool's JSON of each
//! (`qemu-tests/vectors/austin2speedscope/`, golden outputs; the recorded and committed MOJO
//! files are checked against the real tool in `qemu-tests/tests/mojo_recorded.rs`); and the
//! texts it fails on fail here too.

use std::io::Write as _;
use std::path::Path;

use tachyon::convert::austin_speedscope::{FinishError, Profiles, SpeedscopeError};

fn golden() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../qemu-tests/vectors/austin2speedscope"))
}

/// Our JSON of `text`, written into the reader in pieces of `chunk` bytes.
fn json(text: &[u8], name: &str, chunk: usize) -> Result<Vec<u8>, FinishError> {
    let mut profiles = Profiles::default();
    for piece in text.chunks(chunk) {
        profiles.write_all(piece).unwrap();
    }
    let mut out = Vec::new();
    profiles.finish(name, &mut out)?;
    Ok(out)
}

#[test]
fn hand_written_texts_give_the_real_tools_json() {
    for name in ["quirks_full", "quirks_memory", "quirks_cpu"] {
        let text = std::fs::read(golden().join(format!("{name}.austin"))).unwrap();
        let want = std::fs::read(golden().join(format!("{name}.speedscope.json"))).unwrap();
        // Whole, and in pieces that split lines and `\r\n` pairs.
        for chunk in [text.len(), 1, 2, 7] {
            let got = json(&text, &format!("{name}.austin"), chunk).unwrap();
            assert!(
                got == want,
                "{name} (pieces of {chunk}):\n ours: {}\nreal: {}",
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want)
            );
        }
    }
}

#[test]
fn texts_austin2speedscope_fails_on_fail() {
    let fails = |text: &str| match json(text.as_bytes(), "x", text.len().max(1)) {
        Err(FinishError::Text(e)) => e,
        other => panic!("{text:?}: {other:?}"),
    };
    assert_eq!(fails("P1;T0:1;a:f:1 5\n"), SpeedscopeError::NoMode);
    assert_eq!(fails(""), SpeedscopeError::NoMode);
    assert_eq!(fails("# mode: gil\nP1;T0:1;a:f:1 5\n"), SpeedscopeError::UnknownMode("gil".into()));
    // Lines count from 1: the header's two, the dropped first sample, then this one.
    assert_eq!(fails("# mode: full\nP1;T0:1;a:f:1 5\nP1;T0:1;a:f:1 5\n"), SpeedscopeError::OneMetricInFullMode(3));
    assert_eq!(fails("# mode: wall\nP1;T0:1;a:f:1 5\nP1 5\n"), SpeedscopeError::NoThread(3));
}
