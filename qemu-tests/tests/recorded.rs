//! qemu-tests' tests of what the test command records with the real tools (libprofiler's
//! CPU profiles, Austin's MOJO files, the firmware's runs under qemu-system-arm), one test
//! binary: each file beside this one is a module here. These are the same code on every host
//! and run on the host only; `vectors` and `fault_injection` (programs of their own) are the
//! ones that also run on the big-endian targets.

mod firmware;
mod gperftools_convert;
mod gperftools_symbols;
mod mojo_recorded;
mod pprof_input;
mod top_inputs;
