//! # tachyon
//!
//! The std layer over [`tachyon_core`]: every format the project reads opened through one
//! type ([`profile::Profile`]), the conversion pipeline (each format's input feeds one hub,
//! [`model`], that every output reads), files, symbolisation, and the `tachyon` command, a
//! thin layer over these.
//!
//! ## Module map
//! * The command (feature `cli`): [`cli`], arguments and messages over the modules below.
//! * A conversion as asked for, options and all: [`request`] (what the command and the
//!   Python package run; also a merge of many files); sending profiles to a server:
//!   [`push`].
//! * Any input: [`profile`] (detect, open, info, verify, dump, a source for the hub).
//! * The pipeline: [`model`] (the hub: sources, collectors, the frame table; [`model::chain`]
//!   for files of one format in a row, [`model::fold`] for folding many of any format,
//!   [`model::stacks`] for the stack aggregate pprof and OTLP share); [`output`] (the outputs' registry, options, destinations, errors);
//!   [`convert`] (the dispatch, and the outputs no input format shares: collapsed stacks,
//!   flame graph, Firefox profiler, speedscope, jsonl); [`html`] (the pages people
//!   look at: the interactive flame graph and its call tree) and [`perfetto`] (traces).
//! * One folder per format, each with its input (`source`) and what writes it (`write`, or
//!   `replay` for pstats): [`tachyon`] (also CPython's views and writer input, storage, zstd
//!   threads, the framed stream), [`gperftools`], [`pprof`] (also the protobuf schema),
//!   [`mojo`] (also Austin's text and speedscope as Austin makes it), [`pstats`] (also its
//!   table, dump, merge and gprof2dot's graph); [`otlp`] (an output only: OpenTelemetry's
//!   profiles signal); [`callgrind`] (an output only, below the format folders: pstats writes
//!   its call graph in it too); [`native`] (a runtime's native addresses written as
//!   `MODULE+0xADDRESS` frames, and named from the binaries when read).
//! * Shared: [`choice`] (the named values options take), [`file`](mod@file) (positioned reads, seekable files), [`memory`] (in-memory
//!   sinks), [`symbolize`] (ELF symbols and DWARF lines), [`pyfmt`] (Python-compatible text),
//!   [`hash`] (keyed fast hashing, string tables), `civil` (UTC dates).
//!
//! Dependencies point one way, each layer using only layers below it (`scripts/module-cycles.py`
//! reports an arrow that runs back up): `cli` → `push` → `request` → `profile` → `convert` → the format
//! folders, [`native`], [`html`] and [`perfetto`] → what formats share ([`callgrind`], [`symbolize`]) →
//! `model` → `output` → the shared modules.
//!
//! ## Contributing
//! A format is one folder here (its `source` and `write`) and, below the std layer, one module
//! tree in `tachyon-core`. `bash scripts/quick.sh` checks a change over the
//! committed fixtures (the real tools' outputs are among them); `bash scripts/test-all.sh`
//! runs every proof against the real tools before it lands (`docs/testing.md`).

#![deny(missing_docs)]

pub mod callgrind;
pub mod choice;
mod civil;
#[cfg(feature = "cli")]
pub mod cli;
pub mod convert;
pub mod file;
pub mod gperftools;
pub mod hash;
pub mod html;
pub mod memory;
pub mod model;
pub mod mojo;
pub mod native;
pub mod otlp;
pub mod output;
pub mod perfetto;
pub mod pprof;
pub mod profile;
pub mod pstats;
pub mod push;
pub mod pyfmt;
pub mod request;
pub mod symbolize;
pub mod tachyon;
pub mod top;

pub use tachyon_core as core;
