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
//! The wire format is written down next to the code ([`spec`], the crate's `FORMAT.md`);
//! each module covers one part of it: [`varint`], [`header`], [`tables`], [`records`],
//! [`writer`], [`reader`] and, with the `zstd` feature, `compression`.
//!
//! ## Module map
//! * Tachyon: [`header`] (header, footer, stats trailer), [`tables`], [`records`],
//!   [`varint`], [`writer`], [`reader`], `compression` (zstd FFI, the only `unsafe`).
//! * Sampling from a signal handler or an interrupt: [`capture`] (a wait-free ring of
//!   samples and the drain that writes them).
//! * Shared: [`storage`] (caller-owned tables), [`endian`] (byte order as a type),
//!   [`io`] (a seekable in-memory cursor), [`text`] (CPython's lossy names), [`error`],
//!   [`kind`] (which format a file holds).
//! * Other formats, one module tree each behind a feature: `gperftools`, `mojo`, `marshal`
//!   (pstats files), `transport` (framed writes over links that cannot seek) and `stream`
//!   (samples by id from a device too small for the tables; the host writes the file);
//!   gperftools and MOJO share a windowed reader (`inbox`) and a staged writer (`outbox`).
//! * One vocabulary: every reader yields its file's units with `next_item`, every writer
//!   ends with `finish`; the same failure is the same variant in each codec's errors
//!   (`Sink`, `SinkWroteZero`, `Finished`, `TooLarge`, `Format { rule: Rule, .. }`).
//!
//! ## Example
//!
//! ```
//! use tachyon_core::{io::Cursor, storage::{StaticReaderStorage, StaticWriterStorage}};
//! use tachyon_core::{Frame, Reader, Writer, WriterConfig};
//!
//! // 4 KiB of names, 64 strings, 64 frames, 4 threads; CPython's REPEAT budget by default.
//! let mut storage = Box::new(StaticWriterStorage::<4096, 64, 64, 4>::new());
//! let mut file = [0u8; 8192];
//! let mut w = Writer::new(Cursor::new(&mut file[..]), storage.storage(), WriterConfig::new(0, 1000))?;
//! w.write_thread_sample(1000, 0, 1, 0, [Frame::new(b"work.py", b"work"), Frame::new(b"main.py", b"main")])?;
//! w.write_thread_sample(2000, 0, 1, 0, [Frame::new(b"main.py", b"main")])?;
//! let size = w.finish()? as usize;
//!
//! let mut rstorage = StaticReaderStorage::<4096, 64, 64, 4>::new();
//! let mut reader = Reader::open(Cursor::new(&file[..size]), rstorage.storage())?;
//! let first = reader.next_sample()?.expect("one sample");
//! let names: Vec<&[u8]> = first.frames().map(|f| f.funcname).collect();
//! assert_eq!(names, [&b"work"[..], b"main"]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Features
//! * `alloc`: `Vec`-backed storage constructors.
//! * `zstd`: compressed sample regions through libzstd 1.5.7 static contexts (the only
//!   `unsafe` code, in `compression`).
//! * `defmt`: `defmt::Format` for errors and metadata.
//! * `gperftools`: the `gperftools` module, libprofiler's CPU profiles (read and write,
//!   any slot width and byte order).
//!
//! MSRV: Rust 1.81.
//!
//! ## Contributing
//! A change to a codec is checked by `bash scripts/quick.sh` (from the
//! repository's root): this crate without features and with every codec, the std layer and the
//! command, CPython 3.15.2's committed vectors, the writers under injected faults, the saved
//! fuzz inputs and a `no_std` build — all over committed files that hold the real tools'
//! outputs, with nothing downloaded but crates. Before it lands, `bash scripts/test-all.sh`
//! runs the real tools again, the big-endian targets under qemu-user and the rest
//! (`docs/testing.md`).

#![no_std]
#![deny(missing_docs)]
#![cfg_attr(not(feature = "zstd"), forbid(unsafe_code))]
#![cfg_attr(feature = "zstd", deny(unsafe_code))]

#[cfg(feature = "alloc")]
extern crate alloc;

#[cfg(all(feature = "zstd", target_os = "none"))]
compile_error!(
    "tachyon-core's `zstd` feature compiles libzstd's C (zstd-sys) for the target against a C \
     library, which a bare-metal target (target_os = \"none\") does not have: leave it off there; \
     a device writes the raw sample region and the host compresses it (`tachyon convert FILE \
     --to tachyon --compression zstd`)"
);

/// Tachyon's wire format as this crate reads and writes it (the crate's `FORMAT.md`).
#[doc = include_str!("../FORMAT.md")]
pub mod spec {}

pub mod capture;
pub mod endian;
pub mod error;
pub mod header;
pub mod io;
pub mod kind;
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

#[cfg(any(feature = "transport", feature = "stream"))]
mod framing;
#[cfg(feature = "gperftools")]
pub mod gperftools;
#[cfg(any(feature = "gperftools", feature = "mojo"))]
mod inbox;
#[cfg(feature = "marshal")]
pub mod marshal;
#[cfg(feature = "mojo")]
pub mod mojo;
#[cfg(any(feature = "gperftools", feature = "mojo"))]
mod outbox;
#[cfg(feature = "stream")]
pub mod stream;
#[cfg(feature = "transport")]
pub mod transport;

pub use endian::{BigEndian, Endianity, LittleEndian, NativeEndian, RunTimeEndian};
pub use error::{FormatLimit, Position, ReadError, Rule, WriteError};
pub use header::{CaptureFeatures, Compression, Header, HeaderLayout, ProfilingConfig, ProfilingMode, Stats};
pub use kind::FileKind;
pub use reader::{Metadata, Reader, Record, RegionSource, ResolvedFrame, Run, RunEntry, Sample};
pub use storage::{ReaderStorage, StaticReaderStorage, StaticWriterStorage, WriterStorage};
pub use tables::Location;
pub use writer::{Frame, FrameId, Writer, WriterConfig};
