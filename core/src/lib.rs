//! # tachyon-core
//!
//! A `no_std`, allocation-free encoder and decoder for **Tachyon**, the binary
//! sampling-profile format of CPython 3.15 (`python -m profiling.sampling run --binary`).
//!
//! * Output is byte-identical to CPython 3.15.2's `BinaryWriter` for the same input, in
//!   either byte order ([`Writer`] over [`NativeEndian`], or an explicit [`LittleEndian`] /
//!   [`BigEndian`]).
//! * The [`Reader`] detects the byte order and the header layout (3.15.2 or the December 2025
//!   design), validates everything before trusting a count, then streams samples in file order
//!   with memory bounded by the caller's storage.
//! * All memory is the caller's: see [`storage`]. Memory use is a formula of the capacities
//!   chosen, never of the input.
//! * Sinks and sources are `embedded-io` 0.7 `Write + Seek` / `Read + Seek`; [`io::Cursor`]
//!   is a seekable in-memory one.
//!
//! The wire format is written down in `FORMAT.md` next to this crate's sources; each module
//! covers one part of it: [`varint`], [`header`], [`tables`], [`records`], [`writer`],
//! [`reader`] and, with the `zstd` feature, [`compression`].
//!
//! ## Features
//! * `alloc`: `Vec`-backed storage constructors.
//! * `zstd`: compressed sample regions through libzstd 1.5.7 static contexts (the only
//!   `unsafe` code, in [`compression`]).
//! * `defmt`: `defmt::Format` for errors and metadata.
//!
//! MSRV: Rust 1.81.

#![no_std]
#![deny(missing_docs)]
#![cfg_attr(not(feature = "zstd"), forbid(unsafe_code))]
#![cfg_attr(feature = "zstd", deny(unsafe_code))]

#[cfg(feature = "alloc")]
extern crate alloc;

pub mod endian;
pub mod error;
pub mod header;
pub mod io;
pub mod reader;
pub mod records;
pub mod storage;
pub mod tables;
pub mod text;
pub mod varint;
pub mod writer;

#[cfg(feature = "zstd")]
#[allow(unsafe_code)]
pub mod compression;

pub use endian::{BigEndian, Endianity, LittleEndian, NativeEndian, RunTimeEndian};
pub use error::{FormatLimit, FormatRule, Position, ReadError, WriteError};
pub use header::{CaptureFeatures, Compression, Header, HeaderLayout, ProfilingConfig, ProfilingMode, Stats};
pub use reader::{Metadata, Reader, ResolvedFrame, Sample};
pub use storage::{ReaderStorage, StaticReaderStorage, StaticWriterStorage, WriterStorage};
pub use tables::Location;
pub use writer::{Frame, FrameId, Writer, WriterConfig};
