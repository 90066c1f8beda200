//! The std layer's integration tests, one test binary: each file beside this one is a module
//! here, so a test build compiles the layer's generic code for them once and links one program
//! instead of fifteen (test programs are linked on every build: the compiler cache keeps
//! libraries, not programs). nextest still runs each test as a process of its own.
//!
//! Run one file's tests with a filter: `cargo test -p tachyon --test suite cli::`.

mod austin_speedscope;
mod bad_input;
mod cli;
mod collapsed_order;
mod error_site;
mod merge;
mod mojo_austin;
mod native;
mod pstats_input;
mod push;
mod receive;
mod rotate;
mod salvage;
mod samples;
mod stream;
mod threaded_compression;
mod threaded_region;
mod top;
