//! `BinaryWriter`: CPython 3.15's `_remote_debugging.BinaryWriter`, byte for byte (spec
//! section 5), plus a byte order argument. Values are normalised as CPython's writer does
//! (spec 5.1); a limit (an interpreter id beyond 2^32 − 1, a table at the format's size)
//! raises `OverflowError`, sets `limit_reached` and leaves the writer usable; any other error
//! in `write_sample` breaks it, as CPython's.
//!
//! ## Threads and fork
//!
//! The writer's state is behind a mutex (the class is `frozen`, shared by every thread that
//! holds it). Two rules keep it from deadlocking with the GIL: **no thread waits for the
//! mutex while holding the GIL** (a busy mutex is waited for detached: PyO3's
//! `lock_py_attached`), and **the mutex is held only over Rust code and C-API calls that run
//! no Python code and do not release the GIL** (so a holder never needs another thread, nor
//! re-enters the writer from a callback). `finalize`, which writes the tables without the GIL,
//! first moves the open writer out of the state (leaving `Finalizing`); calls made meanwhile
//! from other threads get "Writer is closed", as after it.
//!
//! After `fork()` a writer made in the parent is unusable in the child: its zstd worker
//! thread does not exist there, and the file offset and buffer are the parent's. Every call
//! on it raises `RuntimeError` (naming fork), and the child's copy is dropped without
//! flushing or joining, so the parent's file is left to the parent. A writer made in the
//! child works. (Forks are counted by a `pthread_atfork` handler, see [`crate::fork`].)

use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use pyo3::exceptions::{PyOverflowError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::MutexExt;
use pyo3::types::{PyDict, PyInt, PyList, PySequence, PyString, PyTuple};
use pyo3::{ffi, Borrowed};
use tachyon::core::{
    CaptureFeatures, Compression, FormatLimit, Frame, FrameId, Location, ProfilingConfig, ProfilingMode, RunTimeEndian,
    Stats, WriteError, Writer, WriterConfig,
};
use tachyon::file::FileSink;
use tachyon::tachyon::storage::OwnedWriterStorage;

use crate::errors::os_error;
use crate::fork::Forks;
use crate::frames::{read_plain, read_plain_interpreter, read_plain_thread, FrameCache, PlainTypes};
use crate::types::{
    compression_of, fields, item, list_field, path_of, types, unsigned_long_long, Utf8, FRAME_INFO, INTERPRETER_INFO,
    THREAD_INFO,
};

/// A writer and the storage it borrows, owned together, and what `write_sample` keeps
/// between calls.
struct OwnedWriter {
    /// Borrows `*storage` for as long as this value lives; dropped first.
    writer: std::mem::ManuallyDrop<Writer<'static, FileSink, RunTimeEndian>>,
    storage: NonNull<OwnedWriterStorage>,
    /// Frame objects seen, by identity (taken out before the writer leaves the GIL behind).
    frames: FrameCache,
    /// One sample's frame ids.
    ids: Vec<FrameId>,
}

// SAFETY: everything the writer holds is owned data (vectors, the file, a compressor over
// owned buffers or a channel to its own thread, Python references, which PyO3 lets move);
// the borrow of `storage` moves with it and nothing is tied to the thread that made it.
unsafe impl Send for OwnedWriter {}

impl OwnedWriter {
    fn create(sink: FileSink, config: WriterConfig, endian: RunTimeEndian) -> Result<Self, WriteError<std::io::Error>> {
        let storage = NonNull::from(Box::leak(Box::new(OwnedWriterStorage::growing(config.compression))));
        // SAFETY: the storage is a fresh heap allocation freed only in `drop`, after the
        // writer that borrows it; nothing else reaches it.
        let borrowed: &'static mut OwnedWriterStorage = unsafe { &mut *storage.as_ptr() };
        match borrowed.writer(sink, config, endian) {
            Ok(w) => Ok(OwnedWriter {
                writer: std::mem::ManuallyDrop::new(w),
                storage,
                frames: FrameCache::default(),
                ids: Vec::new(),
            }),
            Err(e) => {
                // SAFETY: the failed constructor dropped its borrow; the box is ours again.
                drop(unsafe { Box::from_raw(storage.as_ptr()) });
                Err(e)
            }
        }
    }
}

impl OwnedWriter {
    /// Finishes the file and flushes its buffer (whose errors would be lost in a drop).
    fn finish(&mut self) -> Result<(), WriteError<std::io::Error>> {
        let size = self.writer.finish()?;
        std::io::Write::flush(&mut self.writer.get_mut().0).map_err(|error| WriteError::Sink { offset: size, error })
    }
}

impl Drop for OwnedWriter {
    fn drop(&mut self) {
        // SAFETY: the writer goes first, then the storage it borrowed; neither is used again.
        unsafe {
            std::mem::ManuallyDrop::drop(&mut self.writer);
            drop(Box::from_raw(self.storage.as_ptr()));
        }
    }
}

enum State {
    Open(Box<OwnedWriter>),
    /// An error other than a limit: every call fails, the file keeps its zero header.
    Broken,
    /// `finalize` is writing the tables (without the GIL, and without the lock).
    Finalizing {
        total_samples: u64,
    },
    /// Finalized: the count stays readable.
    Finalized {
        total_samples: u64,
    },
    /// Closed without finalizing.
    Closed,
}

/// Writes a Tachyon file as CPython 3.15's `_remote_debugging.BinaryWriter` does.
///
/// `BinaryWriter(filename, sample_interval_us, start_time_us, *, compression=0, mode=-1,
/// capture_features=-1, byte_order="native")`: `filename` is a str, bytes or path-like
/// object; `compression` is `0` or `"none"` (raw) or `1` or `"zstd"`, as everywhere in the
/// module; `mode` is CPython's profiling mode (0 wall, 1 cpu, 2 gil,
/// 3 all, 4 exception; -1 unknown); `capture_features` its feature bits (-1 unknown);
/// `byte_order` "native", "little" or "big" (an addition: CPython writes its own order).
#[pyclass(module = "tachyon_profiles", frozen)]
pub struct BinaryWriter {
    state: Mutex<State>,
    /// Set by a limit; never cleared (a flag read alone, so no lock).
    limit_reached: AtomicBool,
    filename: Py<PyAny>,
    /// The process the writer was made in (a writer is not carried over a fork).
    made_in: Forks,
}

/// One frame as CPython's writer normalises it, names still Python's.
struct FrameIn<'py> {
    filename: Utf8<'py>,
    funcname: Utf8<'py>,
    location: Option<Location>,
    opcode: Option<u8>,
}

impl FrameIn<'_> {
    fn frame(&self) -> Frame<'_> {
        Frame {
            filename: self.filename.bytes(),
            funcname: self.funcname.bytes(),
            location: self.location,
            opcode: self.opcode,
        }
    }
}

/// A location part: an int within signed 64 bits keeps its low 32 bits, anything else is -1.
fn location_part(v: Option<Bound<'_, PyAny>>) -> i32 {
    match v {
        Some(v) if v.is_instance_of::<PyInt>() => v.extract::<i64>().map_or(-1, |n| n as i32),
        _ => -1,
    }
}

fn frame_in<'py>(frame: &Bound<'py, PyAny>) -> PyResult<FrameIn<'py>> {
    let [filename, location, funcname, opcode] = fields::<4>(frame, &FRAME_INFO)?;
    let name = |v: Bound<'py, PyAny>| -> PyResult<Utf8<'py>> {
        let s =
            v.cast_into::<PyString>().map_err(|_| PyTypeError::new_err("bad argument type for built-in operation"))?;
        Utf8::of(s)
    };
    let filename = name(filename)?;
    let location = if location.is_none() {
        None
    } else {
        if location.cast::<PySequence>().is_err() || location.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err(
                "location must be None or a (lineno, end_lineno, col_offset, end_col_offset) sequence",
            ));
        }
        // Missing parts, as in a short tuple, are -1 like CPython's.
        let part = |i: usize| location_part(item(&location, i, "location").ok());
        Some(Location { lineno: part(0), end_lineno: part(1), col: part(2), end_col: part(3) })
    };
    let funcname = name(funcname)?;
    let opcode = if opcode.is_instance_of::<PyInt>() {
        opcode.extract::<i64>().ok().and_then(|n| u8::try_from(n).ok()).filter(|&n| n != 255)
    } else {
        None
    };
    Ok(FrameIn { filename, funcname, location, opcode })
}

/// An interpreter's id and its threads, as given.
type Interpreter<'py> = (u32, Vec<Bound<'py, PyAny>>);

/// Why a thread's sample was not written.
enum Stop {
    /// A format limit: the call ends, the writer goes on.
    Limit(PyErr),
    /// Any other error in the caller's values: the writer breaks.
    Broken(PyErr),
    /// The writer was not open, or has already been marked broken.
    Closed(PyErr),
}

impl From<PyErr> for Stop {
    fn from(e: PyErr) -> Self {
        Stop::Broken(e)
    }
}

impl Stop {
    fn into_err(self) -> PyErr {
        match self {
            Stop::Limit(e) | Stop::Broken(e) | Stop::Closed(e) => e,
        }
    }
}

/// An unsigned id: `TypeError` for a non-int, `OverflowError` out of range (CPython's words).
fn unsigned(v: &Bound<'_, PyAny>) -> PyResult<u64> {
    if !v.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err("an integer is required"));
    }
    // The common case first, without comparing: an int that fits.
    if let Ok(n) = v.extract::<u64>() {
        return Ok(n);
    }
    if v.lt(0)? {
        return Err(PyOverflowError::new_err("can't convert negative int to unsigned"));
    }
    Err(PyOverflowError::new_err("int too big to convert"))
}

/// Why a limit stopped a sample, in CPython's words.
fn limit_message(e: &WriteError<std::io::Error>) -> String {
    match e {
        WriteError::Limit(FormatLimit::Samples) => "too many samples for binary format".into(),
        WriteError::Limit(FormatLimit::StringLength) => "string length exceeds binary format maximum 4294967295".into(),
        WriteError::Capacity { resource } => match resource {
            tachyon::core::storage::Resource::Strings | tachyon::core::storage::Resource::StringBytes => {
                "too many strings for binary format".into()
            }
            tachyon::core::storage::Resource::Frames => "too many frames for binary format".into(),
            tachyon::core::storage::Resource::Threads => "too many threads for binary format".into(),
            // Growable storage that could not grow: memory, not the format, ran out.
            tachyon::core::storage::Resource::Stacks => "out of memory for the threads' stacks".into(),
        },
        other => other.to_string(),
    }
}

impl BinaryWriter {
    /// The state, locked: held only over Rust code and C-API calls that run no Python code
    /// and do not release the GIL (the module's rule). In a child after `fork()`, the error
    /// that says so.
    fn state(&self, py: Python<'_>) -> PyResult<MutexGuard<'_, State>> {
        self.made_in.check("BinaryWriter")?;
        // Never blocks holding the GIL: a busy lock is waited for detached (PyO3's
        // `lock_py_attached`), so even a holder that needed the GIL could not deadlock.
        Ok(self.state.lock_py_attached(py).unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    /// The open writer, or the error CPython raises in this state.
    fn open<'a>(state: &'a mut MutexGuard<'_, State>) -> PyResult<&'a mut OwnedWriter> {
        match &mut **state {
            State::Open(w) => Ok(w),
            State::Broken => Err(PyValueError::new_err("Writer is broken")),
            State::Finalizing { .. } | State::Finalized { .. } | State::Closed => {
                Err(PyValueError::new_err("Writer is closed"))
            }
        }
    }

    /// Puts `new` in place of the state and drops the old one (an open writer's file and
    /// compressor thread) after the lock is released.
    fn replace_state(&self, py: Python<'_>, new: State) -> PyResult<()> {
        let old = std::mem::replace(&mut *self.state(py)?, new);
        drop(old);
        Ok(())
    }

    /// Marks the writer broken and hands back `err`.
    fn break_with(&self, py: Python<'_>, err: PyErr) -> PyErr {
        match self.replace_state(py, State::Broken) {
            Ok(()) => err,
            Err(fork) => fork,
        }
    }

    /// A sink or other error while writing: `OSError` for I/O; breaks the writer.
    fn write_failure(&self, py: Python<'_>, e: WriteError<std::io::Error>) -> PyErr {
        let err = match &e {
            WriteError::Sink { error, .. } => os_error(error, Some(self.filename.bind(py))),
            other => PyRuntimeError::new_err(other.to_string()),
        };
        self.break_with(py, err)
    }

    /// A write error: a limit (`Stop::Limit`, the writer goes on) or a failure (breaks it).
    fn write_error(&self, py: Python<'_>, e: WriteError<std::io::Error>) -> Stop {
        if e.is_limit() {
            self.limit_reached.store(true, Ordering::Relaxed);
            Stop::Limit(PyOverflowError::new_err(limit_message(&e)))
        } else {
            Stop::Closed(self.write_failure(py, e))
        }
    }

    /// Writes one thread's sample. A limit error (the call ends, the writer goes on) is
    /// `Err(Stop::Limit)`; any other breaks the writer.
    fn write_thread(
        &self,
        py: Python<'_>,
        plain: &PlainTypes,
        ts: u64,
        iid: u32,
        thread: &Bound<'_, PyAny>,
    ) -> Result<(), Stop> {
        self.convert_and_write(py, plain, ts, iid, thread).map_err(|e| match e {
            Stop::Broken(e) => Stop::Broken(self.break_with(py, e)),
            limit => limit,
        })
    }

    fn convert_and_write(
        &self,
        py: Python<'_>,
        plain: &PlainTypes,
        ts: u64,
        iid: u32,
        thread: &Bound<'_, PyAny>,
    ) -> Result<(), Stop> {
        // A plain thread with a list or tuple of plain frames (what every profiler passes) is
        // read under the lock, with borrowed references and through the frame cache; anything
        // else the general way, which may run Python code (a sequence's `__getitem__`, an
        // `__index__`) and so reads first and locks after.
        // SAFETY: `thread` is live (the caller holds it) and the GIL is held.
        if let Some((tid, status, frame_info)) = unsafe { read_plain_thread(thread.as_ptr(), plain) } {
            // SAFETY: `frame_info` is borrowed from `thread`, which outlives this block.
            let frame_info = unsafe { Borrowed::from_ptr(py, frame_info) };
            if frame_info.is_exact_instance_of::<PyList>() || frame_info.is_exact_instance_of::<PyTuple>() {
                let outcome = {
                    let mut state = self.state(py).map_err(Stop::Closed)?;
                    let w = Self::open(&mut state).map_err(Stop::Closed)?;
                    Self::write_plain(w, plain, &frame_info, (ts, iid, tid, status))
                };
                match outcome {
                    Ok(true) => return Ok(()),
                    Ok(false) => {}
                    Err(e) => return Err(self.write_error(py, e)),
                }
            }
        }
        let [tid, status, frame_info] = fields::<3>(thread, &THREAD_INFO)?;
        let tid = unsigned(&tid)?;
        // Any int within a C long (through __index__, as CPython); the low 8 bits are kept.
        let status = status.extract::<std::os::raw::c_long>()? as u8;
        let raw = list_field(&frame_info, &THREAD_INFO, "frame_info")?;
        let frames =
            raw.iter().take(tachyon::core::records::MAX_STACK_DEPTH).map(frame_in).collect::<PyResult<Vec<_>>>()?;
        let written = {
            let mut state = self.state(py).map_err(Stop::Closed)?;
            let w = Self::open(&mut state).map_err(Stop::Closed)?;
            w.writer.write_thread_sample(ts, iid, tid, status, frames.iter().map(FrameIn::frame))
        };
        written.map_err(|e| self.write_error(py, e))
    }

    /// Writes a sample whose frames are an exact list or tuple, under the lock: each frame
    /// object from the cache, or read as a plain frame ([`read_plain`]) and interned — C-API
    /// calls only, no Python code. `Ok(false)` when a frame is not plain (nothing written;
    /// the caller takes the general way, which also raises what a bad frame raises); `Err` a
    /// write error.
    fn write_plain(
        w: &mut OwnedWriter,
        plain: &PlainTypes,
        frame_info: &Bound<'_, PyAny>,
        (ts, iid, tid, status): (u64, u32, u64, u8),
    ) -> Result<bool, WriteError<std::io::Error>> {
        let py = frame_info.py();
        let seq = frame_info.as_ptr();
        let is_list = frame_info.is_exact_instance_of::<PyList>();
        // SAFETY (every call below): `seq` is an exact list or tuple the caller holds, the GIL
        // is held, and nothing here runs Python code, so its items stay as they are; items
        // are borrowed from it.
        let len = unsafe {
            if is_list {
                ffi::PyList_Size(seq)
            } else {
                ffi::PyTuple_Size(seq)
            }
        };
        let mut ids = std::mem::take(&mut w.ids);
        ids.clear();
        let result = (|| {
            for i in 0..(len.max(0) as usize).min(tachyon::core::records::MAX_STACK_DEPTH) {
                let i = i as ffi::Py_ssize_t;
                let frame = unsafe {
                    if is_list {
                        ffi::PyList_GetItem(seq, i)
                    } else {
                        ffi::PyTuple_GetItem(seq, i)
                    }
                };
                let miss = match w.frames.get(frame) {
                    Ok(id) => {
                        ids.push(id);
                        continue;
                    }
                    Err(miss) => miss,
                };
                let Some(f) = (unsafe { read_plain(frame, plain) }) else { return Ok(false) };
                let id = w.writer.intern_frame(f)?;
                unsafe { w.frames.insert(py, miss, frame, id) };
                ids.push(id);
            }
            w.writer.write_thread_sample_ids(ts, iid, tid, status, &ids)?;
            Ok(true)
        })();
        w.ids = ids;
        result
    }

    fn finalize_inner(&self, py: Python<'_>) -> PyResult<()> {
        let (mut w, frames) = {
            let mut state = self.state(py)?;
            let total_samples = match &*state {
                State::Open(w) => w.writer.sample_count(),
                State::Broken => return Err(PyValueError::new_err("Writer is broken")),
                _ => return Err(PyValueError::new_err("Writer is already closed")),
            };
            let State::Open(mut w) = std::mem::replace(&mut *state, State::Finalizing { total_samples }) else {
                unreachable!("the state was Open under the same lock")
            };
            // The frame objects are let go here, with the GIL.
            let frames = std::mem::take(&mut w.frames);
            (w, frames)
        };
        drop(frames);
        // Tables, trailer, footer and header written, the file's buffer flushed and the
        // compressor's thread joined, without the GIL and without the lock.
        let done = py.detach(move || {
            let done = w.finish();
            drop(w);
            done
        });
        match done {
            Ok(()) => {
                let mut state = self.state(py)?;
                if let State::Finalizing { total_samples } = *state {
                    *state = State::Finalized { total_samples };
                }
                Ok(())
            }
            Err(e) => Err(self.write_failure(py, e)),
        }
    }
}

#[pymethods]
impl BinaryWriter {
    #[new]
    #[pyo3(signature = (filename, sample_interval_us, start_time_us, *, compression=None, mode=-1, capture_features=-1, byte_order="native"),
        text_signature = "(filename, sample_interval_us, start_time_us, *, compression=0, mode=-1, capture_features=-1, byte_order='native')")]
    fn new(
        filename: &Bound<'_, PyAny>,
        sample_interval_us: &Bound<'_, PyAny>,
        start_time_us: &Bound<'_, PyAny>,
        compression: Option<&Bound<'_, PyAny>>,
        mode: i64,
        capture_features: i64,
        byte_order: &str,
    ) -> PyResult<Self> {
        let made_in = Forks::now();
        let sample_interval_us = unsigned_long_long(sample_interval_us)?;
        let start_time_us = unsigned_long_long(start_time_us)?;
        let path = path_of(filename)?;
        if !(-1..=4).contains(&mode) {
            return Err(PyValueError::new_err("invalid profiling mode"));
        }
        if !(-1..=31).contains(&capture_features) {
            return Err(PyValueError::new_err("invalid capture features"));
        }
        let endian = match byte_order {
            "native" => RunTimeEndian::default(),
            "little" => RunTimeEndian::Little,
            "big" => RunTimeEndian::Big,
            other => {
                return Err(PyValueError::new_err(format!(
                    "byte_order must be \"native\", \"little\" or \"big\", not {other:?}"
                )))
            }
        };
        let mut config = WriterConfig::new(start_time_us, sample_interval_us);
        // "none"/"zstd", or an int stored as given as CPython's C int field (only 1 compresses).
        config.compression = compression.map_or(Ok(Compression::None), compression_of)?;
        config.profiling = ProfilingConfig {
            mode: ProfilingMode::from_value(mode),
            capture_features: u8::try_from(capture_features).ok().and_then(CaptureFeatures::new),
        };
        let sink = tachyon::file::create(&path).map_err(|e| os_error(&e, Some(filename)))?;
        let writer = OwnedWriter::create(sink, config, endian).map_err(|e| match e {
            WriteError::Sink { error, .. } => os_error(&error, Some(filename)),
            other => PyRuntimeError::new_err(other.to_string()),
        })?;
        Ok(BinaryWriter {
            state: Mutex::new(State::Open(Box::new(writer))),
            limit_reached: AtomicBool::new(false),
            filename: filename.clone().unbind(),
            made_in,
        })
    }

    /// Write a sample to the binary file.
    ///
    /// Arguments:
    ///     stack_frames: List of InterpreterInfo objects
    ///     timestamp_us: Current timestamp in microseconds (from
    ///         time.monotonic() * 1e6)
    fn write_sample(
        &self,
        py: Python<'_>,
        stack_frames: &Bound<'_, PyAny>,
        timestamp_us: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        // Converted first, as CPython's argument parser does: a bad timestamp breaks nothing.
        let timestamp_us = unsigned_long_long(timestamp_us)?;
        Self::open(&mut self.state(py)?)?;
        let Ok(interpreters) = stack_frames.cast::<PyList>() else {
            return Err(self.break_with(py, PyTypeError::new_err("stack_frames must be a list")));
        };
        let plain = PlainTypes::new(types(py)?);
        for interpreter in interpreters.iter() {
            // SAFETY: `interpreter` is live (we hold it) and the GIL is held.
            if let Some((iid, threads)) = unsafe { read_plain_interpreter(interpreter.as_ptr(), &plain) } {
                // SAFETY: `threads` is an exact list borrowed from `interpreter`; its items are
                // read one at a time, each made an owned reference before anything else runs
                // (a thread's sample may run Python code on the general way).
                let n = unsafe { ffi::PyList_Size(threads) };
                for i in 0..n {
                    let thread = unsafe { Borrowed::from_ptr(py, threads) }.cast::<PyList>()?.get_item(i as usize)?;
                    self.write_thread(py, &plain, timestamp_us, iid, &thread).map_err(Stop::into_err)?;
                }
                continue;
            }
            // Ok(Err(id)): an interpreter id beyond u32, a limit rather than a fault.
            let one = || -> PyResult<Result<Interpreter<'_>, u64>> {
                let [iid, threads] = fields::<2>(&interpreter, &INTERPRETER_INFO)?;
                let iid = unsigned(&iid)?;
                let threads = list_field(&threads, &INTERPRETER_INFO, "threads")?;
                Ok(u32::try_from(iid).map(|iid| (iid, threads)).map_err(|_| iid))
            };
            let (iid, threads) = match one() {
                Ok(Ok(v)) => v,
                Ok(Err(iid)) => {
                    // A limit: earlier interpreters of the call stay written.
                    self.limit_reached.store(true, Ordering::Relaxed);
                    return Err(PyOverflowError::new_err(format!(
                        "interpreter_id {iid} exceeds maximum value 4294967295"
                    )));
                }
                Err(e) => return Err(self.break_with(py, e)),
            };
            for thread in &threads {
                self.write_thread(py, &plain, timestamp_us, iid, thread).map_err(Stop::into_err)?;
            }
        }
        Ok(())
    }

    /// Store measured profile statistics in the binary file.
    #[pyo3(signature = (duration_sec, sample_rate, error_rate=None, missed_samples=None))]
    fn set_stats(
        &self,
        py: Python<'_>,
        duration_sec: f64,
        sample_rate: f64,
        error_rate: Option<f64>,
        missed_samples: Option<f64>,
    ) -> PyResult<()> {
        let mut state = self.state(py)?;
        let w = Self::open(&mut state)?;
        let finite_non_negative = |v: f64| v.is_finite() && v >= 0.0;
        if !finite_non_negative(duration_sec) {
            return Err(PyValueError::new_err("duration must be a finite non-negative value"));
        }
        if !finite_non_negative(sample_rate) {
            return Err(PyValueError::new_err("sample rate must be a finite non-negative value"));
        }
        if error_rate.is_some_and(|v| !finite_non_negative(v)) {
            return Err(PyValueError::new_err("error rate must be a finite non-negative value"));
        }
        if missed_samples.is_some_and(|v| !v.is_finite()) {
            return Err(PyValueError::new_err("missed samples must be a finite value"));
        }
        w.writer
            .set_stats(Stats { duration_sec, sample_rate, error_rate, missed_samples })
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// Finalize and close the binary file.
    ///
    /// Writes string/frame tables, footer, and updates header.
    fn finalize(&self, py: Python<'_>) -> PyResult<()> {
        self.finalize_inner(py)
    }

    /// Close the writer without finalizing (discards data).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let mut state = self.state(py)?;
        let old = if matches!(*state, State::Open(_) | State::Broken) {
            Some(std::mem::replace(&mut *state, State::Closed))
        } else {
            None
        };
        drop(state);
        drop(old);
        Ok(())
    }

    /// Enter the context manager: the object itself.
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Exit context manager, finalizing the file.
    #[pyo3(signature = (exc_type=None, exc_val=None, exc_tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        exc_val: Option<&Bound<'_, PyAny>>,
        exc_tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let _ = (exc_type, exc_val, exc_tb);
        if matches!(*self.state(py)?, State::Open(_)) {
            self.finalize_inner(py)?;
        }
        Ok(false)
    }

    /// Get encoding statistics for the writer.
    ///
    /// Returns a dict with encoding statistics including
    /// repeat/full/suffix/pop-push record counts, frames written/saved, and
    /// compression ratio.
    fn get_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (c, total_samples) = {
            let mut state = self.state(py)?;
            let w = Self::open(&mut state)?;
            (w.writer.write_counts(), w.writer.sample_count())
        };
        // The dict is made after the lock is released: making it may run a collection, and so
        // other threads' Python code.
        let d = PyDict::new(py);
        d.set_item("repeat_records", c.records.repeat)?;
        d.set_item("repeat_samples", c.repeat_samples)?;
        d.set_item("full_records", c.records.full)?;
        d.set_item("suffix_records", c.records.suffix)?;
        d.set_item("pop_push_records", c.records.pop_push)?;
        d.set_item("total_records", c.records.total())?;
        d.set_item("total_samples", total_samples)?;
        d.set_item("total_frames_written", c.frames_written)?;
        d.set_item("frames_saved", c.frames_saved)?;
        d.set_item("bytes_written", c.bytes_written)?;
        let all = c.frames_written + c.frames_saved;
        d.set_item("frame_compression_pct", if all == 0 { 0.0 } else { c.frames_saved as f64 * 100.0 / all as f64 })?;
        Ok(d)
    }

    /// Total samples written
    #[getter]
    fn total_samples(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(match &*self.state(py)? {
            State::Open(w) => w.writer.sample_count(),
            State::Finalizing { total_samples } | State::Finalized { total_samples } => *total_samples,
            State::Broken | State::Closed => 0,
        })
    }

    /// A format limit was reached; the collected samples can still be finalized
    #[getter]
    fn limit_reached(&self) -> bool {
        self.limit_reached.load(Ordering::Relaxed)
    }
}

impl Drop for BinaryWriter {
    fn drop(&mut self) {
        if self.made_in.inherited() {
            // The parent's writer, copied by fork(): flushing its buffer would write the
            // parent's bytes into the parent's file again, and dropping its compressor would
            // join a thread that is not in this process. Its memory is left as it is.
            let state = std::mem::replace(self.state.get_mut().unwrap_or_else(|p| p.into_inner()), State::Closed);
            std::mem::forget(state);
        }
    }
}
