//! The C API called from Rust exactly as a C program calls it — raw pointers into memory
//! the test owns, NUL-terminated and exact-length names, callbacks written in Rust, a ring
//! pushed from a second thread, NULLs, closed and foreign handles — so that Miri checks the
//! library's `unsafe` against Rust's rules at the boundary (`scripts/miri.sh`, x86_64 and
//! s390x). Every entry point of `tachyon.h` is called here at least once. zstd's C cannot
//! run under Miri: its paths are checked from C (scripts/capi.sh), not here.

mod capture;
mod common;
mod files;
mod native;
mod reader;
mod writer;
