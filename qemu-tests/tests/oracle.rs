//! qemu-tests' differential tests against the real tools, one test binary (the `oracle`
//! feature; needs `scripts/oracle.sh` and the recordings of the test command): each file
//! beside this one is a module here, so a test build links one program instead of seven.
//! Run one file's tests with a filter: `cargo test -p qemu-tests --features oracle --test
//! oracle cpython_replay::`.

mod browser_pages;
mod cpython_oracle;
mod cpython_replay;
mod mojo_tachyon;
mod pstats_text;
mod tachyon_from_native;
mod tachyon_mojo;
mod viewer_formats;
