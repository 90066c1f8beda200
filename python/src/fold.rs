//! Many profiles merged from Python, in one process or across a cluster: `merge()` (what
//! `tachyon merge --to` does), `fold_files()` (what a worker runs: its share of the files
//! folded into a `Fold`) and `Fold` (a partial aggregate that combines with others in any
//! grouping to the same result, pickles as its bytes, and writes any output).

use std::path::PathBuf;
use std::sync::Mutex;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};
use tachyon::convert::{Destination, OutputKind};
use tachyon::model::fold::{Fold as Folding, FoldOptions};
use tachyon::request::{expand_folders, write_folded, MergeRequest};

use crate::convert::{is_text, request, value_enum};
use crate::errors::request_error;
use crate::types::{items, path_of};

/// Profiles folded into distinct stacks and frames with their counts (`tachyon merge --to`'s
/// aggregate). Combines with other folds in any order and grouping to the same result;
/// pickles as its bytes, so Dask (or any pool) can move it between processes.
#[pyclass(module = "tachyon_profiles", name = "Fold")]
pub struct Fold {
    inner: Mutex<Folding>,
    /// Why each file `fold_files(keep_going=True)` skipped was skipped (names the file).
    skipped: Vec<String>,
}

impl Fold {
    fn lock(&self) -> std::sync::MutexGuard<'_, Folding> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn merge_request(
    to: &str,
    threads: bool,
    keep_going: bool,
    jobs: usize,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<MergeRequest> {
    let kind = value_enum::<OutputKind>("to", to)?;
    Ok(MergeRequest { convert: request(kind, options)?, threads, keep_going, jobs })
}

fn collect_paths(paths: &Bound<'_, PyAny>) -> PyResult<Vec<PathBuf>> {
    let given: Vec<PathBuf> = match path_of(paths) {
        Ok(one) => vec![one],
        Err(_) => items(paths, "paths")?.iter().map(|p| path_of(p)).collect::<PyResult<_>>()?,
    };
    expand_folders(&given).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Folds `merge`'s files into `fold`; the skipped ones (with `keep_going`).
fn fold_into(py: Python<'_>, fold: &mut Folding, files: &[PathBuf], merge: &MergeRequest) -> PyResult<Vec<String>> {
    let output = merge.output(std::path::Path::new("merged")).map_err(|e| request_error(py, e))?;
    let merged = py
        .detach(|| merge.fold_files(files, &output, fold, &mut |_| {}, &mut |_| {}))
        .map_err(|e| request_error(py, e))?;
    Ok(merged.skipped.iter().map(|e| e.to_string()).collect())
}

#[pymethods]
impl Fold {
    /// An empty fold; `threads=True` keeps thread ids apart.
    #[new]
    #[pyo3(signature = (*, threads=false))]
    fn new(threads: bool) -> Self {
        Fold { inner: Mutex::new(Folding::new(FoldOptions { threads })), skipped: Vec::new() }
    }

    /// A fold from `to_bytes()`'s bytes (every index checked).
    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<Self> {
        let inner = Folding::from_bytes(data).map_err(PyValueError::new_err)?;
        Ok(Fold { inner: Mutex::new(inner), skipped: Vec::new() })
    }

    /// The fold as bytes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.lock().to_bytes())
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let from_bytes = py.get_type::<Fold>().getattr("from_bytes")?;
        PyTuple::new(py, [from_bytes, PyTuple::new(py, [self.to_bytes(py)])?.into_any()])
    }

    /// Folds the profiles at `paths` (a path, or paths; folders stand for their files) in,
    /// read as `to` will write them (gperftools stacks are cleaned as that output's tools
    /// clean them); input options as `convert()` takes them. Returns the samples added.
    /// `jobs` files are read at once (0: one per core).
    #[pyo3(signature = (paths, to="pprof", *, keep_going=false, jobs=0, **options))]
    fn add(
        &mut self,
        py: Python<'_>,
        paths: &Bound<'_, PyAny>,
        to: &str,
        keep_going: bool,
        jobs: usize,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<u64> {
        let files = collect_paths(paths)?;
        let merge = merge_request(to, false, keep_going, jobs, options)?;
        // `&mut self`: PyO3's borrow flag keeps every other method of this object out while the
        // GIL is released below, so holding the lock across it cannot deadlock.
        let mut inner = self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let before = inner.samples();
        let skipped = fold_into(py, &mut inner, &files, &merge)?;
        let added = inner.samples() - before;
        drop(inner);
        self.skipped.extend(skipped);
        Ok(added)
    }

    /// Adds `other` into this fold.
    fn combine(&mut self, other: &Fold) -> PyResult<()> {
        let part = other.lock().clone();
        self.lock().combine(part).map_err(PyValueError::new_err)?;
        self.skipped.extend(other.skipped.iter().cloned());
        Ok(())
    }

    /// One fold of all of `folds`, any iterable of them (a reduction step of a tree: Dask's
    /// `aggregate`).
    #[staticmethod]
    fn combined(folds: &Bound<'_, PyAny>) -> PyResult<Fold> {
        let mut all: Option<Folding> = None;
        let mut skipped = Vec::new();
        // Any iterable: Dask hands an aggregate a generator.
        for f in folds.try_iter()? {
            let f: PyRef<'_, Fold> = f?.extract()?;
            skipped.extend(f.skipped.iter().cloned());
            let part = f.lock().clone();
            match &mut all {
                None => all = Some(part),
                Some(a) => a.combine(part).map_err(PyValueError::new_err)?,
            }
        }
        let inner = all.ok_or_else(|| PyValueError::new_err("no folds to combine"))?;
        Ok(Fold { inner: Mutex::new(inner), skipped })
    }

    /// Profiles folded.
    #[getter]
    fn profiles(&self) -> u64 {
        self.lock().profiles()
    }

    /// Distinct stacks.
    #[getter]
    fn stacks(&self) -> usize {
        self.lock().stack_count()
    }

    /// Distinct frames.
    #[getter]
    fn frames(&self) -> usize {
        self.lock().frame_count()
    }

    /// Why each file `keep_going` skipped was skipped.
    #[getter]
    fn skipped(&self) -> Vec<String> {
        self.skipped.clone()
    }

    /// Writes the fold as `to` (any of `OUTPUTS`, options as `convert()` takes them) to
    /// `output`, returning the sample count, or returns it (`bytes`, or `str` for text).
    #[pyo3(signature = (to, output=None, **options))]
    fn write<'py>(
        &self,
        py: Python<'py>,
        to: &str,
        output: Option<&Bound<'py, PyAny>>,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let merge = merge_request(to, false, false, 1, options)?;
        let output_path = output.map(path_of).transpose()?;
        let name = output_path.clone().unwrap_or_else(|| PathBuf::from("merged"));
        let out = merge.output(&name).map_err(|e| request_error(py, e))?;
        let fold = self.lock().clone();
        let mut memory = Vec::new();
        let written = py.detach(|| {
            let mut folded = fold.finish().ok_or("nothing was folded")?;
            let dest = match &output_path {
                Some(p) => Destination::File(p),
                None => Destination::Stream(&mut memory),
            };
            write_folded(&mut folded, &out, dest, &name).map_err(|e| e.to_string())
        });
        let samples = written.map_err(PyValueError::new_err)?;
        let kind = merge.convert.to;
        Ok(match output_path {
            Some(_) => samples.into_pyobject(py)?.into_any(),
            None if is_text(kind) => PyString::new(py, &String::from_utf8_lossy(&memory)).into_any(),
            None => PyBytes::new(py, &memory).into_any(),
        })
    }

    fn __repr__(&self) -> String {
        let f = self.lock();
        format!(
            "<tachyon_profiles.Fold: {} profiles, {} stacks, {} frames>",
            f.profiles(),
            f.stack_count(),
            f.frame_count()
        )
    }
}

/// The profiles at `paths` folded into one `Fold`, read as `to` will write them: what each
/// worker of a distributed merge runs on its share of the files. With `keep_going` a file
/// that cannot be read or does not share the others' mode is skipped (`Fold.skipped` says
/// why) instead of raising. `jobs` files are read at once (0: one per core; a worker of a
/// pool with a process per core wants 1).
#[pyfunction]
#[pyo3(signature = (paths, to="pprof", *, threads=false, keep_going=false, jobs=0, **options))]
pub fn fold_files(
    py: Python<'_>,
    paths: &Bound<'_, PyAny>,
    to: &str,
    threads: bool,
    keep_going: bool,
    jobs: usize,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Fold> {
    let files = collect_paths(paths)?;
    let merge = merge_request(to, threads, keep_going, jobs, options)?;
    let mut inner = Folding::new(FoldOptions { threads });
    let skipped = fold_into(py, &mut inner, &files, &merge)?;
    Ok(Fold { inner: Mutex::new(inner), skipped })
}

/// `tachyon merge PATHS --to TO`: every profile folded and written as `to` to `output` (the
/// sample count returned), or returned (`bytes`, or `str` for text). `jobs` files are read
/// at once (0: one per core).
#[pyfunction]
#[pyo3(signature = (paths, to, output=None, *, threads=false, keep_going=false, jobs=0, **options))]
#[allow(clippy::too_many_arguments)]
pub fn merge<'py>(
    py: Python<'py>,
    paths: &Bound<'py, PyAny>,
    to: &str,
    output: Option<&Bound<'py, PyAny>>,
    threads: bool,
    keep_going: bool,
    jobs: usize,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyAny>> {
    let fold = fold_files(py, paths, to, threads, keep_going, jobs, options)?;
    fold.write(py, to, output, options)
}
