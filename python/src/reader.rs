//! `BinaryReader`: CPython 3.15's `_remote_debugging.BinaryReader` over the core reader. It
//! checks the whole file's header, trailer and tables when opened, as CPython does, and each
//! `replay` reads the samples afresh from the handle opened then, handing the collector what
//! CPython's does: one `collect(stack_frames, timestamps_us)` per FULL, SUFFIX or POP_PUSH
//! record, and per run of equal statuses (at most 8192 samples) of a REPEAT record.
//!
//! Threads: the two mutexes are held only over Rust code that neither calls Python nor
//! releases the GIL, and waited for without the GIL (the rules `writer` states), so any number
//! of threads may replay, query and close one reader. Each `replay` reads through its own handle (positioned reads), so a
//! reader also works in a child after `fork()`.

use std::path::PathBuf;
use std::sync::Mutex;

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::MutexExt;
use pyo3::types::{PyDict, PyList, PyTuple};
use tachyon::core::reader::{RecordCounts, Tables};
use tachyon::core::{Header, Metadata, Reader, Record, RunEntry};
use tachyon::file::FileSource;
use tachyon::tachyon::storage::{Limits, OwnedReaderStorage};

use crate::errors::{os_error, read_error};
use crate::types::{int_list, path_of, FrameObjects};

/// Samples in one `collect` call of a REPEAT run, at most (CPython's batch).
const BATCH: usize = 8192;
/// Samples between two progress calls (CPython's interval).
const PROGRESS_EVERY: u64 = 1000;

/// What an open file keeps: its handle and the facts `get_info()` gives.
struct Opened {
    source: FileSource,
    meta: Metadata,
    string_count: usize,
    frame_count: usize,
}

/// Reads a Tachyon file as CPython 3.15's `_remote_debugging.BinaryReader` does.
///
/// `BinaryReader(filename)`: a str, bytes or path-like object. Opening checks the header,
/// stats trailer and tables and raises what CPython raises (`FormatError`, a `ValueError`,
/// with CPython's message for a bad file; `OSError` for one that cannot be read).
#[pyclass(module = "tachyon_profiles", frozen)]
pub struct BinaryReader {
    opened: Mutex<Option<Opened>>,
    counts: Mutex<(RecordCounts, u64)>,
    filename: Py<PyAny>,
}

/// The object of frame `id`: the reader checked the id and its strings when it decoded the
/// record (CPython's "Invalid frame index" and "Invalid string index in frame").
fn frame<'py>(objects: &mut FrameObjects<'py>, tables: &Tables<'_>, id: u32) -> PyResult<Bound<'py, PyAny>> {
    objects.get(id, || {
        let f = tables.frame(id).ok_or_else(|| PyRuntimeError::new_err(format!("frame {id} was not checked")))?;
        Ok((String::from_utf8_lossy(f.filename), String::from_utf8_lossy(f.funcname), f.location, f.opcode))
    })
}

impl BinaryReader {
    fn closed() -> PyErr {
        PyValueError::new_err("Reader is closed")
    }

    /// The open file's header (`None` once closed).
    fn header(&self, py: Python<'_>) -> Option<Header> {
        self.opened.lock_py_attached(py).unwrap_or_else(|p| p.into_inner()).as_ref().map(|o| o.meta.header)
    }
}

#[pymethods]
impl BinaryReader {
    #[new]
    fn new(py: Python<'_>, filename: &Bound<'_, PyAny>) -> PyResult<Self> {
        let path: PathBuf = path_of(filename)?;
        let opened = py
            .detach(|| -> Result<Opened, Result<tachyon::core::ReadError<std::io::Error>, std::io::Error>> {
                let mut source = FileSource::open(&path).map_err(Err)?;
                let meta = Metadata::read(&mut source).map_err(Ok)?;
                let mut storage = OwnedReaderStorage::for_metadata(&meta, Limits::default())
                    .map_err(|e| Err(std::io::Error::other(e.to_string())))?;
                // Every open-time check CPython makes, the tables included; the samples (and a
                // zstd region's decompressor, whose workspace costs more than the checks) wait
                // for `replay`.
                let reader = Reader::open(source.second_handle(), storage.tables.storage()).map_err(Ok)?;
                let (string_count, frame_count) = (reader.tables().string_count(), reader.tables().frame_count());
                Ok(Opened { source, meta, string_count, frame_count })
            })
            .map_err(|e| match e {
                Ok(read) => read_error(py, read, filename),
                Err(io) => os_error(&io, Some(filename)),
            })?;
        Ok(BinaryReader {
            opened: Mutex::new(Some(opened)),
            counts: Mutex::new((RecordCounts::default(), 0)),
            filename: filename.clone().unbind(),
        })
    }

    /// Replay samples through a collector.
    ///
    /// Arguments:
    ///     collector: Collector object with collect() method
    ///     progress_callback: Optional callable(current, total)
    ///
    /// Returns:
    ///     Number of samples replayed
    #[pyo3(signature = (collector, progress_callback=None))]
    fn replay(
        &self,
        py: Python<'_>,
        collector: &Bound<'_, PyAny>,
        progress_callback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<u64> {
        let (source, meta) = match &*self.opened.lock_py_attached(py).unwrap_or_else(|p| p.into_inner()) {
            Some(o) => (o.source.second_handle(), o.meta),
            None => return Err(Self::closed()),
        };
        let collect =
            collector.getattr("collect").map_err(|_| PyTypeError::new_err("Collector must have a collect() method"))?;
        let filename = self.filename.bind(py);
        let total = meta.header.sample_count;
        let progress = |done: u64| -> PyResult<()> {
            match progress_callback {
                Some(p) if !p.is_none() => p.call1((done, total)).map(drop),
                _ => Ok(()),
            }
        };
        let mut storage = OwnedReaderStorage::for_metadata(&meta, Limits::default())
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let mut reader = storage.open_file(source).map_err(|e| read_error(py, e, filename))?;
        let mut objects = FrameObjects::new(py)?;
        let types = objects.types;
        let mut stack: Vec<Bound<'_, PyAny>> = Vec::new();
        let mut entries = vec![RunEntry { timestamp_us: 0, status: 0 }; BATCH];
        let mut times: Vec<u64> = Vec::with_capacity(BATCH);
        let mut next_progress = PROGRESS_EVERY;
        progress(0)?;
        let result = (|| -> PyResult<()> {
            loop {
                let record = reader.next_item().map_err(|e| read_error(py, e, filename))?;
                let Some(record) = record else { break };
                match record {
                    Record::Sample(s) => {
                        stack.clear();
                        for &id in s.stack {
                            stack.push(frame(&mut objects, s.tables(), id)?);
                        }
                        let frames = types.stack_frames(py, s.interpreter_id, s.thread_id, s.status, &stack)?;
                        collect.call1((frames, PyList::new(py, [s.timestamp_us])?))?;
                    }
                    Record::Repeat(mut run) => {
                        stack.clear();
                        for &id in run.stack {
                            stack.push(frame(&mut objects, run.tables(), id)?);
                        }
                        let (iid, tid) = (run.interpreter_id, run.thread_id);
                        let mut status: Option<u8> = None;
                        loop {
                            let n = run.read_entries(&mut entries).map_err(|e| read_error(py, e, filename))?;
                            for e in &entries[..n] {
                                if let Some(s) = status {
                                    if s != e.status || times.len() == BATCH {
                                        collect.call1((
                                            types.stack_frames(py, iid, tid, s, &stack)?,
                                            int_list(py, &times)?,
                                        ))?;
                                        times.clear();
                                    }
                                }
                                status = Some(e.status);
                                times.push(e.timestamp_us);
                            }
                            if n == 0 {
                                break;
                            }
                        }
                        if let (Some(s), false) = (status, times.is_empty()) {
                            collect.call1((types.stack_frames(py, iid, tid, s, &stack)?, int_list(py, &times)?))?;
                            times.clear();
                        }
                    }
                }
                let done = reader.samples_decoded();
                if done >= next_progress {
                    progress(done)?;
                    next_progress = (done / PROGRESS_EVERY + 1) * PROGRESS_EVERY;
                }
            }
            Ok(())
        })();
        let done = reader.samples_decoded();
        let mut counts = self.counts.lock_py_attached(py).unwrap_or_else(|p| p.into_inner());
        let c = reader.record_counts();
        counts.0.repeat += c.repeat;
        counts.0.full += c.full;
        counts.0.suffix += c.suffix;
        counts.0.pop_push += c.pop_push;
        counts.1 += done;
        drop(counts);
        result?;
        progress(done)?;
        Ok(done)
    }

    /// Get metadata about the binary file.
    ///
    /// Returns:
    ///     Dict with file metadata
    fn get_info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        // Copied out first: making the dict may run a collection, and so other threads'
        // Python code, which must not find the lock held (module docs).
        let (meta, string_count, frame_count) = {
            let opened = self.opened.lock_py_attached(py).unwrap_or_else(|p| p.into_inner());
            let o = opened.as_ref().ok_or_else(Self::closed)?;
            (o.meta, o.string_count, o.frame_count)
        };
        let h = &meta.header;
        let stats = meta.stats;
        let d = PyDict::new(py);
        d.set_item("version", 1)?;
        d.set_item("python_version", PyTuple::new(py, h.python_version)?)?;
        d.set_item("start_time_us", h.start_time_us)?;
        d.set_item("sample_interval_us", h.sample_interval_us)?;
        d.set_item("sample_count", h.sample_count)?;
        d.set_item("thread_count", h.thread_count)?;
        d.set_item("string_count", string_count)?;
        d.set_item("frame_count", frame_count)?;
        d.set_item("compression_type", h.compression.field())?;
        d.set_item("duration_sec", stats.map(|s| s.duration_sec))?;
        d.set_item("sample_rate", stats.map(|s| s.sample_rate))?;
        d.set_item("error_rate", stats.and_then(|s| s.error_rate))?;
        d.set_item("missed_samples", stats.and_then(|s| s.missed_samples))?;
        d.set_item("mode", h.config.mode.map(|m| m.value()))?;
        d.set_item("capture_features", h.config.capture_features.map(|c| c.bits()))?;
        Ok(d)
    }

    /// Get reconstruction statistics from replay.
    ///
    /// Returns a dict with statistics about record types decoded and
    /// samples reconstructed during replay.
    fn get_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        if self.opened.lock_py_attached(py).unwrap_or_else(|p| p.into_inner()).is_none() {
            return Err(Self::closed());
        }
        let (c, samples) = *self.counts.lock_py_attached(py).unwrap_or_else(|p| p.into_inner());
        let reconstructions = c.full + c.suffix + c.pop_push;
        let d = PyDict::new(py);
        d.set_item("repeat_records", c.repeat)?;
        d.set_item("repeat_samples", samples - reconstructions)?;
        d.set_item("full_records", c.full)?;
        d.set_item("suffix_records", c.suffix)?;
        d.set_item("pop_push_records", c.pop_push)?;
        d.set_item("total_records", c.total())?;
        d.set_item("total_samples", samples)?;
        d.set_item("stack_reconstructions", reconstructions)?;
        Ok(d)
    }

    /// Close the reader and free resources.
    fn close(&self, py: Python<'_>) {
        let opened = self.opened.lock_py_attached(py).unwrap_or_else(|p| p.into_inner()).take();
        drop(opened);
    }

    /// Enter the context manager: the object itself.
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Exit context manager, closing the file.
    #[pyo3(signature = (exc_type=None, exc_val=None, exc_tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        exc_val: Option<&Bound<'_, PyAny>>,
        exc_tb: Option<&Bound<'_, PyAny>>,
    ) -> bool {
        let _ = (exc_type, exc_val, exc_tb);
        self.close(py);
        false
    }

    /// Number of samples in file
    #[getter]
    fn sample_count(&self, py: Python<'_>) -> u64 {
        self.header(py).map_or(0, |h| h.sample_count)
    }

    /// Sample interval in microseconds
    #[getter]
    fn sample_interval_us(&self, py: Python<'_>) -> u64 {
        self.header(py).map_or(0, |h| h.sample_interval_us)
    }
}
