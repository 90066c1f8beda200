//! # tachyon
//!
//! The std layer over [`tachyon_core`]: files (positioned reads), a growable
//! in-memory sink, storage sized from a file's validated metadata, CPython's JSON writer-input
//! documents, the JSON view CPython's own reader gives of a file, a replay that feeds samples
//! to collectors the way CPython's `replay` does ([`sources::tachyon`]), and the conversion
//! pipeline: inputs ([`sources`]) feed one hub ([`model`]) that every output ([`convert`])
//! reads; facts of gperftools CPU profiles ([`gperftools`]). The `tachyon` command is a thin
//! layer over these.
//!
//! ## Module map
//! * One type over every input format: [`profile::Profile`] (info, verify, dump).
//! * The hub: [`model`] (sources, collectors, the frame table); inputs [`sources`]; outputs
//!   [`convert`].
//! * Per format: [`mojo`] (MOJO's facts, dump, re-encoding), [`gperftools`] (facts),
//!   [`pstats`] and [`dot`] (pstats files, their table and call graph).
//! * Files and memory: [`file`](mod@file), [`open`] (storage sized from a file), [`memory`],
//!   [`region`] and [`compress`] (zstd in a second thread), [`receive`] (the framed stream).
//! * Names: [`symbolize`] (ELF symbols and DWARF lines), [`view`] (CPython's JSON views),
//!   [`input`] (CPython's writer input), [`hash`].

#![deny(missing_docs)]

pub mod compress;
pub mod convert;
pub mod dot;
pub mod file;
pub mod gperftools;
pub mod hash;
pub mod input;
pub mod memory;
pub mod model;
pub mod mojo;
pub mod open;
pub mod output;
pub mod profile;
pub mod pstats;
pub mod pyfmt;
pub mod receive;
pub mod region;
pub mod sources;
pub mod symbolize;
pub mod view;

pub use tachyon_core as core;
