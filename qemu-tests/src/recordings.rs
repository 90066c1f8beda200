//! The real tools' recordings the tests read, of two kinds:
//!
//! - **fresh**: made on this machine by the test command (`scripts/test-all.sh` records them
//!   and names each folder in an environment variable). A fresh recording differs from machine
//!   to machine and run to run, so a test asserts of it only what holds for every recording:
//!   our reading equals the real tool's reading of the same file, totals add up, and what the
//!   recorded workload does by construction (its work all runs under `main`).
//! - **committed**: `qemu-tests/fixtures/recorded/`, made once by the same recorders
//!   (`scripts/record-fixtures.sh`, its README says with which tools). A check about what a
//!   recording holds — which functions were sampled, an inlined frame, a frame wide enough to
//!   click, a line two colourings paint differently, a page's load time — reads these, so it
//!   gives the same verdict on every machine.

use std::path::PathBuf;

/// The folder of a fresh recording, named by `var` (set by `scripts/test-all.sh`).
pub fn fresh(var: &str) -> PathBuf {
    std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        panic!("{var} is not set: run `bash scripts/test-all.sh`, which records it, or record it yourself and set it")
    })
}

/// A committed recording: `path` under `qemu-tests/fixtures/recorded/`.
pub fn committed(path: &str) -> PathBuf {
    tachyon_test_kit::fixtures::root().join("qemu-tests/fixtures/recorded").join(path)
}

/// The machines whose gperftools recordings are committed (of
/// [`crate::gperftools_oracle::RECORDED_ARCHES`]).
pub const COMMITTED_GPERFTOOLS_ARCHES: [&str; 2] = ["x86_64", "s390x"];

/// The gperftools recording made on `arch`: fresh, or committed.
pub fn gperftools(arch: &str, committed: bool) -> PathBuf {
    if committed {
        self::committed("gperftools-2.10").join(arch)
    } else {
        fresh("TACHYON_GPERFTOOLS_PROFILES").join(arch)
    }
}

/// Every gperftools recording: each machine's fresh one (`false`), then the committed ones
/// (`true`).
pub fn every_gperftools() -> Vec<(String, PathBuf, bool)> {
    let fresh =
        crate::gperftools_oracle::RECORDED_ARCHES.map(|a| (format!("{a} (fresh)"), gperftools(a, false), false));
    let committed = COMMITTED_GPERFTOOLS_ARCHES.map(|a| (format!("{a} (committed)"), gperftools(a, true), true));
    fresh.into_iter().chain(committed).collect()
}
