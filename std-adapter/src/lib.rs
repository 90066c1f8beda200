//! # tachyon
//!
//! The std layer over [`tachyon_core`]: a growable in-memory sink, storage sized from a
//! file's validated metadata, CPython's JSON writer-input documents, and the JSON view of a
//! decoded file that CPython's own reader produces.
//!
//! The command-line tool will live here too.

#![deny(missing_docs)]

pub mod convert;
pub mod file;
pub mod input;
pub mod memory;
pub mod open;
pub mod replay;
pub mod view;

pub use tachyon_core as core;
