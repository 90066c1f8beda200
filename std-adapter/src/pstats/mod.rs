//! pstats files as input: the marshalled dictionary `cProfile`, `profile`, 3.15's
//! `profiling.tracing` and `profiling.sampling --pstats` write, loaded as Python's
//! `pstats.Stats` loads it, and printed as its `print_stats`, `print_callers` and
//! `print_callees` print (`Lib/pstats.py` of 3.11 and 3.15.2 is the reference: the two print
//! alike, except that 3.15 prints a file with the `("__sampled__",)` marker as sampled
//! statistics, which 3.11 cannot load at all).
//!
//! Loading goes through [`tachyon_core::marshal::Decoder`]: no recursion (nesting is bounded
//! by [`MAX_DEPTH`]), back references shared rather than copied (so a file of references to
//! references cannot make memory grow beyond a fixed multiple of its size), and every value
//! checked against what `pstats.Stats` accepts (keys of three items with a numeric middle,
//! values of five), with the offset of the entry that breaks it. Files of the shape every
//! profiler writes are read straight into entries, without a tree of their objects (`shape`);
//! the tree reader reads the rest and says what is wrong with a bad file. Every distinct name is held
//! once ([`Stats::names`]); keys are small values over them, so that tables of a hundred
//! thousand functions load, sort and print in a fraction of Python's time.
//!
//! ## Module map
//! * What a file holds: `stats` (entries, names, numbers as Python holds them).
//! * Reading: `load` (the tree reader, which owns every rule and message) and `shape` (the
//!   fast path for files of the usual shape).
//! * Using: `print` (`print_stats`, `print_callers`, `print_callees`), `dump` (JSON lines),
//!   `merge` (`Stats.add`), `write` (a file every Python 3 loads), [`dot`] (gprof2dot's graph),
//!   [`callgrind`] (that graph for KCachegrind).
//! * On the pipeline: [`source`] (a pstats file as an input) and [`replay`] (the hub's
//!   samples as CPython's `replay --pstats` writes and prints them).

pub mod callgrind;
pub mod dot;
mod dump;
mod load;
mod merge;
mod print;
pub mod replay;
mod shape;
pub mod source;
mod stats;
mod write;

pub use dump::dump;
pub use load::{load, load_for_print, load_tree};
pub use merge::merge;
pub use print::{ctime_line, print, sort_names, PrintError, PrintOptions, Restriction};
pub use stats::*;
pub use write::write;
