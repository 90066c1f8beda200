//! core's integration tests, one test binary: each file beside this one is a module here
//! (where it names its features), so the test builds link once per target instead of once per
//! file, and generic code instantiated by several files is compiled once. That mattered most
//! for the big-endian suite, which builds every test binary for three targets.
//! `no_alloc.rs` (its global allocator would count every other test's allocations) and
//! `capture_loom.rs` (built with `--cfg loom`) stay binaries of their own.
//!
//! The big-endian suite (scripts/test-all.sh, under qemu-user) runs what depends on the byte
//! order or the ISA; a test whose subject is the same on every host (storage growth, the
//! error paths of formats without a native byte order) says so with
//! `#[cfg_attr(target_endian = "big", ignore = "...")]` and runs on the host only.
//!
//! Run one file's tests with a filter: `cargo test -p tachyon-core --all-features --test suite
//! mojo::`.

#[cfg(feature = "alloc")]
mod common;

#[cfg(not(loom))]
mod capture;
#[cfg(feature = "gperftools")]
mod gperftools;
#[cfg(feature = "alloc")]
mod large_offsets;
#[cfg(feature = "marshal")]
mod marshal;
#[cfg(all(feature = "mojo", feature = "alloc"))]
mod mojo;
#[cfg(all(feature = "alloc", feature = "zstd", feature = "transport"))]
mod restart;
#[cfg(feature = "alloc")]
mod robustness;
#[cfg(feature = "alloc")]
mod roundtrip;
#[cfg(all(feature = "alloc", feature = "zstd"))]
mod runs;
#[cfg(all(feature = "stream", feature = "transport", feature = "alloc"))]
mod stream;
#[cfg(all(feature = "transport", feature = "alloc"))]
mod transport;
#[cfg(feature = "alloc")]
mod writer_behaviour;
