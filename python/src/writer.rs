//! `BinaryWriter`: CPython 3.15's `_remote_debugging.BinaryWriter`, byte for byte (spec
//! section 5), plus a byte order argument. Values are normalised as CPython's writer does
//! (spec 5.1); a limit (an interpreter id beyond 2^32 − 1, a table at the format's size)
//! raises `OverflowError`, sets `limit_reached` and leaves the writer usable; any other error
//! in `write_sample` breaks it, as CPython's.

use std::borrow::Cow;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use pyo3::exceptions::{PyOverflowError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyList, PySequence, PyString};
use tachyon::core::{
    CaptureFeatures, Compression, FormatLimit, Frame, Location, ProfilingConfig, ProfilingMode, RunTimeEndian, Stats,
    WriteError, Writer, WriterConfig,
};
use tachyon::file::FileSink;
use tachyon::tachyon::storage::OwnedWriterStorage;

use crate::errors::os_error;
use crate::types::{item, items, path_of};

/// A writer and the storage it borrows, owned together.
struct OwnedWriter {
    /// Borrows `*storage` for as long as this value lives; dropped first.
    writer: std::mem::ManuallyDrop<Writer<'static, FileSink, RunTimeEndian>>,
    storage: NonNull<OwnedWriterStorage>,
}

// SAFETY: everything the writer holds is owned data (vectors, the file, a compressor over
// owned buffers or a channel to its own thread); the borrow of `storage` moves with it and
// nothing is tied to the thread that made it.
unsafe impl Send for OwnedWriter {}

impl OwnedWriter {
    fn create(sink: FileSink, config: WriterConfig, endian: RunTimeEndian) -> Result<Self, WriteError<std::io::Error>> {
        let storage = NonNull::from(Box::leak(Box::new(OwnedWriterStorage::growing(config.compression))));
        // SAFETY: the storage is a fresh heap allocation freed only in `drop`, after the
        // writer that borrows it; nothing else reaches it.
        let borrowed: &'static mut OwnedWriterStorage = unsafe { &mut *storage.as_ptr() };
        match borrowed.writer(sink, config, endian) {
            Ok(w) => Ok(OwnedWriter { writer: std::mem::ManuallyDrop::new(w), storage }),
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
/// object; `compression` 1 is zstd; `mode` is CPython's profiling mode (0 wall, 1 cpu, 2 gil,
/// 3 all, 4 exception; -1 unknown); `capture_features` its feature bits (-1 unknown);
/// `byte_order` "native", "little" or "big" (an addition: CPython writes its own order).
#[pyclass(module = "tachyon_profiles", frozen)]
pub struct BinaryWriter {
    state: Mutex<State>,
    /// Set by a limit; never cleared (a flag read alone, so no lock).
    limit_reached: AtomicBool,
    filename: Py<PyAny>,
}

/// One frame as CPython's writer normalises it, names still Python's.
struct FrameIn<'py> {
    filename: Cow<'py, str>,
    funcname: Cow<'py, str>,
    location: Option<Location>,
    opcode: Option<u8>,
}

/// A location part: an int within signed 64 bits keeps its low 32 bits, anything else is -1.
fn location_part(v: Option<Bound<'_, PyAny>>) -> i32 {
    match v {
        Some(v) if v.is_instance_of::<PyInt>() => v.extract::<i64>().map_or(-1, |n| n as i32),
        _ => -1,
    }
}

fn frame_in<'py>(frame: &Bound<'py, PyAny>) -> PyResult<FrameIn<'py>> {
    let name = |i: usize| -> PyResult<Cow<'py, str>> {
        let v = item(frame, i, "FrameInfo")?;
        let s =
            v.cast_into::<PyString>().map_err(|_| PyTypeError::new_err("bad argument type for built-in operation"))?;
        // Strict UTF-8: a lone surrogate raises UnicodeEncodeError, as in CPython.
        Ok(Cow::Owned(s.to_cow()?.into_owned()))
    };
    let filename = name(0)?;
    let location = item(frame, 1, "FrameInfo")?;
    let location = if location.is_none() {
        None
    } else {
        if location.cast::<PySequence>().is_err() {
            return Err(PyTypeError::new_err(
                "location must be None or a (lineno, end_lineno, col_offset, end_col_offset) sequence",
            ));
        }
        // Missing parts, as in a short tuple, are -1 like CPython's.
        let part = |i: usize| location_part(item(&location, i, "location").ok());
        Some(Location { lineno: part(0), end_lineno: part(1), col: part(2), end_col: part(3) })
    };
    let funcname = name(2)?;
    let opcode = item(frame, 3, "FrameInfo")?;
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
    if v.lt(0)? {
        return Err(PyOverflowError::new_err("can't convert negative int to unsigned"));
    }
    v.extract::<u64>().map_err(|_| PyOverflowError::new_err("int too big to convert"))
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
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The open writer, or the error CPython raises in this state.
    fn open<'a>(state: &'a mut MutexGuard<'_, State>) -> PyResult<&'a mut OwnedWriter> {
        match &mut **state {
            State::Open(w) => Ok(w),
            State::Broken => Err(PyValueError::new_err("Writer is broken")),
            State::Finalized { .. } | State::Closed => Err(PyValueError::new_err("Writer is closed")),
        }
    }

    /// Marks the writer broken and hands back `err`.
    fn break_with(&self, err: PyErr) -> PyErr {
        *self.state() = State::Broken;
        err
    }

    /// A sink or other error while writing: `OSError` for I/O; breaks the writer.
    fn write_failure(&self, py: Python<'_>, e: WriteError<std::io::Error>) -> PyErr {
        let err = match &e {
            WriteError::Sink { error, .. } => os_error(error, Some(self.filename.bind(py))),
            other => PyRuntimeError::new_err(other.to_string()),
        };
        self.break_with(err)
    }

    /// Writes one thread's sample. A limit error (the call ends, the writer goes on) is
    /// `Err(Stop::Limit)`; any other breaks the writer.
    fn write_thread(&self, py: Python<'_>, ts: u64, iid: u32, thread: &Bound<'_, PyAny>) -> Result<(), Stop> {
        self.convert_and_write(py, ts, iid, thread).map_err(|e| match e {
            Stop::Broken(e) => Stop::Broken(self.break_with(e)),
            limit => limit,
        })
    }

    fn convert_and_write(&self, py: Python<'_>, ts: u64, iid: u32, thread: &Bound<'_, PyAny>) -> Result<(), Stop> {
        let tid = unsigned(&item(thread, 0, "ThreadInfo")?)?;
        // Any int within a C long (through __index__, as CPython); the low 8 bits are kept.
        let status = item(thread, 1, "ThreadInfo")?.extract::<std::os::raw::c_long>()? as u8;
        let raw = items(&item(thread, 2, "ThreadInfo")?, "frame_info")?;
        let frames =
            raw.iter().take(tachyon::core::records::MAX_STACK_DEPTH).map(frame_in).collect::<PyResult<Vec<_>>>()?;
        let mut state = self.state();
        let w = Self::open(&mut state).map_err(Stop::Closed)?;
        let frames = frames.iter().map(|f| Frame {
            filename: f.filename.as_bytes(),
            funcname: f.funcname.as_bytes(),
            location: f.location,
            opcode: f.opcode,
        });
        match w.writer.write_thread_sample(ts, iid, tid, status, frames) {
            Ok(()) => Ok(()),
            Err(e) if e.is_limit() => {
                drop(state);
                self.limit_reached.store(true, Ordering::Relaxed);
                Err(Stop::Limit(PyOverflowError::new_err(limit_message(&e))))
            }
            Err(e) => {
                drop(state);
                Err(Stop::Closed(self.write_failure(py, e)))
            }
        }
    }

    fn finalize_inner(&self, py: Python<'_>) -> PyResult<()> {
        let mut state = self.state();
        let w = match &mut *state {
            State::Open(w) => w,
            State::Broken => return Err(PyValueError::new_err("Writer is broken")),
            _ => return Err(PyValueError::new_err("Writer is already closed")),
        };
        let total = w.writer.sample_count();
        // Tables, trailer, footer and header written, and the file's buffer flushed, without
        // the GIL.
        let done = py.detach(|| w.finish());
        match done {
            Ok(()) => {
                *state = State::Finalized { total_samples: total };
                Ok(())
            }
            Err(e) => {
                drop(state);
                Err(self.write_failure(py, e))
            }
        }
    }
}

#[pymethods]
impl BinaryWriter {
    #[new]
    #[pyo3(signature = (filename, sample_interval_us, start_time_us, *, compression=0, mode=-1, capture_features=-1, byte_order="native"))]
    fn new(
        filename: &Bound<'_, PyAny>,
        sample_interval_us: u64,
        start_time_us: u64,
        compression: i64,
        mode: i64,
        capture_features: i64,
        byte_order: &str,
    ) -> PyResult<Self> {
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
        // Stored as given, as CPython's C int field; only 1 compresses.
        config.compression = Compression::from_field(compression as u32);
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
        })
    }

    /// Write a sample to the binary file.
    ///
    /// Arguments:
    ///     stack_frames: List of InterpreterInfo objects
    ///     timestamp_us: Current timestamp in microseconds (from
    ///         time.monotonic() * 1e6)
    fn write_sample(&self, py: Python<'_>, stack_frames: &Bound<'_, PyAny>, timestamp_us: u64) -> PyResult<()> {
        Self::open(&mut self.state())?;
        let Ok(interpreters) = stack_frames.cast::<PyList>() else {
            return Err(self.break_with(PyTypeError::new_err("stack_frames must be a list")));
        };
        for interpreter in interpreters.iter() {
            // Ok(Err(id)): an interpreter id beyond u32, a limit rather than a fault.
            let one = || -> PyResult<Result<Interpreter<'_>, u64>> {
                let iid = unsigned(&item(&interpreter, 0, "InterpreterInfo")?)?;
                let threads = items(&item(&interpreter, 1, "InterpreterInfo")?, "threads")?;
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
                Err(e) => return Err(self.break_with(e)),
            };
            for thread in &threads {
                self.write_thread(py, timestamp_us, iid, thread).map_err(Stop::into_err)?;
            }
        }
        Ok(())
    }

    /// Store measured profile statistics in the binary file.
    #[pyo3(signature = (duration_sec, sample_rate, error_rate=None, missed_samples=None))]
    fn set_stats(
        &self,
        duration_sec: f64,
        sample_rate: f64,
        error_rate: Option<f64>,
        missed_samples: Option<f64>,
    ) -> PyResult<()> {
        let mut state = self.state();
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
    fn close(&self) {
        let mut state = self.state();
        if matches!(*state, State::Open(_) | State::Broken) {
            *state = State::Closed;
        }
    }

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
        if matches!(*self.state(), State::Open(_)) {
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
        let mut state = self.state();
        let w = Self::open(&mut state)?;
        let c = w.writer.write_counts();
        let d = PyDict::new(py);
        d.set_item("repeat_records", c.records.repeat)?;
        d.set_item("repeat_samples", c.repeat_samples)?;
        d.set_item("full_records", c.records.full)?;
        d.set_item("suffix_records", c.records.suffix)?;
        d.set_item("pop_push_records", c.records.pop_push)?;
        d.set_item("total_records", c.records.total())?;
        d.set_item("total_samples", w.writer.sample_count())?;
        d.set_item("total_frames_written", c.frames_written)?;
        d.set_item("frames_saved", c.frames_saved)?;
        d.set_item("bytes_written", c.bytes_written)?;
        let all = c.frames_written + c.frames_saved;
        d.set_item("frame_compression_pct", if all == 0 { 0.0 } else { c.frames_saved as f64 * 100.0 / all as f64 })?;
        Ok(d)
    }

    /// Total samples written
    #[getter]
    fn total_samples(&self) -> u64 {
        match &*self.state() {
            State::Open(w) => w.writer.sample_count(),
            State::Finalized { total_samples } => *total_samples,
            State::Broken | State::Closed => 0,
        }
    }

    /// A format limit was reached; the collected samples can still be finalized
    #[getter]
    fn limit_reached(&self) -> bool {
        self.limit_reached.load(Ordering::Relaxed)
    }
}
