//! `tachyon_profiles._native`, the native half of the package `tachyon_profiles` (whose
//! `__init__` re-exports it and adds the `tachyon` command's entry point): CPython 3.15's Tachyon reader and writer (`BinaryReader`,
//! `BinaryWriter`, with the API of `_remote_debugging`'s) on every Python from 3.9, and the
//! `tachyon` library's conversions from Python. One abi3 wheel serves every version.
//!
//! ## Module map
//! * [`types`]: `InterpreterInfo`, `ThreadInfo`, `FrameInfo`, `LocationInfo` — CPython's own
//!   types on 3.15 and later, struct sequences of the same shape before.
//! * [`writer`]: `BinaryWriter` over the core writer with tables that grow by use.
//! * [`reader`]: `BinaryReader`, replaying a file into a collector as CPython does.
//! * [`convert`]: `convert()` and `read_samples()` over the library's pipeline (any input).
//! * [`fold`]: `merge()`, `fold_files()` and `Fold`: many profiles folded into one, in one
//!   process or across a cluster's workers.
//! * [`frames`]: the writer's cache of frame objects by identity.
//! * [`fork`]: telling an object made before a `fork()` that it is in the child.
//! * [`errors`]: Python exceptions for the library's errors (`FormatError` names the file,
//!   the offset and the rule).
//!
//! Dependencies point one way: `fold` → `convert`; `convert`, `reader` and `writer` → `types`
//! and `errors`; `writer` → `fork` and `frames`.

use pyo3::prelude::*;

pub mod convert;
pub mod errors;
pub mod fold;
pub mod fork;
pub mod frames;
pub mod reader;
pub mod types;
pub mod writer;

/// True: the wheel is built with zstd (as `_remote_debugging.zstd_available()`).
#[pyfunction]
fn zstd_available() -> bool {
    true
}

/// Runs the `tachyon` command on `args` (the program's name first) without the GIL and
/// returns its exit status (`tachyon_profiles.main` calls it).
#[pyfunction]
fn run_command(py: Python<'_>, args: Vec<std::ffi::OsString>) -> u8 {
    py.detach(|| tachyon::cli::run(args))
}

/// The thread status bits of `ThreadInfo.status` (CPython's `THREAD_STATUS_*` values).
const THREAD_STATUS: [(&str, u32); 6] = [
    ("THREAD_STATUS_HAS_GIL", 1 << 0),
    ("THREAD_STATUS_ON_CPU", 1 << 1),
    ("THREAD_STATUS_UNKNOWN", 1 << 2),
    ("THREAD_STATUS_GIL_REQUESTED", 1 << 3),
    ("THREAD_STATUS_HAS_EXCEPTION", 1 << 4),
    ("THREAD_STATUS_MAIN_THREAD", 1 << 5),
];

// Every object the module shares between threads is behind a mutex or immutable, so it
// declares itself safe without the GIL; the abi3 wheel itself cannot be loaded by a
// free-threaded CPython (docs/python.md).
/// CPython 3.15's Tachyon profile reader and writer on every CPython from 3.9, and
/// conversions between sampling-profile formats.
///
/// * `BinaryWriter`, `BinaryReader`: `_remote_debugging`'s API and bytes (write a sample with
///   `InterpreterInfo((0, [ThreadInfo((native_tid, status, [FrameInfo((filename,
///   LocationInfo((line, end_line, col, end_col)), qualname, None)), ...]))]))`, frames
///   innermost first).
/// * `convert(input, to, output=None, **options)`: any profile (Tachyon, gperftools, pprof,
///   MOJO, pstats) into any of `OUTPUTS`; `read_samples`, `detect`.
/// * `merge`, `fold_files`, `Fold`: many profiles folded into one.
/// * `FormatError`: a bad file, with its offset and the rule it broke.
///
/// Threads may share readers and writers; a writer made before `fork()` raises in the child.
/// Documentation: docs/python.md in the repository.
#[pymodule(gil_used = false, name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    fork::init();
    types::init(m)?;
    errors::init(m)?;
    m.add_class::<writer::BinaryWriter>()?;
    m.add_class::<reader::BinaryReader>()?;
    m.add_function(wrap_pyfunction!(zstd_available, m)?)?;
    m.add_function(wrap_pyfunction!(convert::convert, m)?)?;
    m.add_function(wrap_pyfunction!(convert::read_samples, m)?)?;
    m.add_function(wrap_pyfunction!(convert::detect, m)?)?;
    m.add_class::<fold::Fold>()?;
    m.add_function(wrap_pyfunction!(fold::fold_files, m)?)?;
    m.add_function(wrap_pyfunction!(fold::merge, m)?)?;
    m.add_function(wrap_pyfunction!(run_command, m)?)?;
    for (name, value) in THREAD_STATUS {
        m.add(name, value)?;
    }
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    let outputs: Vec<&str> = <tachyon::convert::OutputKind as tachyon::choice::Choice>::names().collect();
    m.add("OUTPUTS", pyo3::types::PyTuple::new(py, outputs)?)?;
    Ok(())
}
