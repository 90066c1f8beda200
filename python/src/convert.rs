//! The library's pipeline from Python: `convert()` writes any input as any output the
//! `tachyon convert` command has (the same request, so the same bytes), `read_samples()`
//! replays any input into a collector with CPython's `collect()` protocol, and `detect()`
//! names a file's format.

use std::borrow::Cow;
use std::path::PathBuf;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use tachyon::choice::Choice;
use tachyon::convert::{Destination, OutputKind};
use tachyon::core::Compression;
use tachyon::model::{Call, Collector, FrameTable, Source, Times};
use tachyon::mojo::source::MojoMetric;
use tachyon::profile::Profile;
use tachyon::request::{convert_file, with_source, ByteOrder, ConvertRequest, InputOptions, Teardown};

use crate::errors::{format_name, profile_error, request_error};
use crate::types::{int_list, path_of, FrameObjects};

/// Outputs that are text (returned as `str` without an output path); the rest are bytes.
pub(crate) fn is_text(kind: OutputKind) -> bool {
    !kind.is_binary()
}

pub(crate) fn value_enum<T: Choice>(what: &str, v: &str) -> PyResult<T> {
    T::from_name_ignoring_case(v)
        .ok_or_else(|| PyValueError::new_err(format!("{what}={v:?}: one of {}", T::names_listed())))
}

/// How an input is read, from the keyword arguments both functions share.
fn input_options(options: Option<&Bound<'_, PyDict>>) -> PyResult<InputOptions> {
    let mut input = InputOptions::default();
    let Some(options) = options else { return Ok(input) };
    if let Some(v) = options.get_item("sample_index")? {
        input.sample_index = Some(v.str()?.to_cow()?.into_owned());
    }
    if let Some(v) = options.get_item("binary_path")? {
        let list = if v.is_instance_of::<PyString>() { vec![v] } else { crate::types::items(&v, "binary_path")? };
        input.binary_path = list.iter().map(path_of).collect::<PyResult<Vec<PathBuf>>>()?;
    }
    if let Some(v) = options.get_item("symbolize")? {
        input.no_symbolize = !v.is_truthy()?;
    }
    if let Some(v) = options.get_item("metric")? {
        input.metric = Some(value_enum::<MojoMetric>("metric", &v.extract::<String>()?)?);
    }
    Ok(input)
}

/// The keyword arguments of `convert()` that are not the input's.
const OUTPUT_OPTIONS: [&str; 17] = [
    "pstats_compat",
    "keep_sampled_marker",
    "sort",
    "limit",
    "restrict",
    "no_summary",
    "strip_dirs",
    "callers",
    "callees",
    "title",
    "source_root",
    "byte_order",
    "compression",
    "word_size",
    "mojo_version",
    "service_name",
    "summary",
];
const INPUT_OPTIONS: [&str; 4] = ["sample_index", "binary_path", "symbolize", "metric"];

pub(crate) fn request(to: OutputKind, options: Option<&Bound<'_, PyDict>>) -> PyResult<ConvertRequest> {
    let mut r = ConvertRequest::new(to);
    r.input = input_options(options)?;
    let Some(options) = options else { return Ok(r) };
    for key in options.keys() {
        let key: String = key.extract()?;
        if !OUTPUT_OPTIONS.contains(&key.as_str()) && !INPUT_OPTIONS.contains(&key.as_str()) {
            return Err(PyTypeError::new_err(format!("convert() got an unexpected keyword argument {key:?}")));
        }
    }
    let flag = |k: &str| -> PyResult<bool> { options.get_item(k)?.map_or(Ok(false), |v| v.is_truthy()) };
    let text =
        |k: &str| -> PyResult<Option<String>> { options.get_item(k)?.map(|v| v.extract::<String>()).transpose() };
    r.pstats_compat = flag("pstats_compat")?;
    r.keep_sampled_marker = flag("keep_sampled_marker")?;
    r.sort = text("sort")?;
    r.limit = options.get_item("limit")?.map(|v| v.extract::<usize>()).transpose()?;
    if let Some(v) = options.get_item("restrict")? {
        r.restrict = crate::types::items(&v, "restrict")?
            .iter()
            .map(|x| Ok(x.str()?.to_cow()?.into_owned()))
            .collect::<PyResult<_>>()?;
    }
    r.no_summary =
        flag("no_summary")? || options.get_item("summary")?.map_or(Ok(false), |v| v.is_truthy().map(|t| !t))?;
    r.strip_dirs = flag("strip_dirs")?;
    r.callers = flag("callers")?;
    r.callees = flag("callees")?;
    r.title = text("title")?;
    if let Some(v) = options.get_item("source_root")? {
        // "OLD=NEW", or several of them.
        let list = if v.is_instance_of::<PyString>() { vec![v] } else { crate::types::items(&v, "source_root")? };
        r.source_roots = list.iter().map(|x| x.extract::<String>()).collect::<PyResult<_>>()?;
    }
    r.byte_order = text("byte_order")?.map(|v| value_enum::<ByteOrder>("byte_order", &v)).transpose()?;
    r.compression = match options.get_item("compression")? {
        None => None,
        Some(v) => match crate::types::compression_of(&v)? {
            c @ (Compression::None | Compression::Zstd) => Some(c),
            Compression::Other(n) => {
                return Err(PyValueError::new_err(format!("compression={n}: \"none\", \"zstd\", 0 or 1")))
            }
        },
    };
    r.word_size = options.get_item("word_size")?.map(|v| v.extract::<u8>()).transpose()?;
    r.mojo_version = options.get_item("mojo_version")?.map(|v| v.extract::<u8>()).transpose()?;
    r.service_name = text("service_name")?;
    Ok(r)
}

/// Converts a profile of any format the library reads into `to` (one of `OUTPUTS`), as
/// `tachyon convert INPUT --to TO` does with the same options (as keyword arguments with
/// underscores: `byte_order="big"`, `compression="zstd"`, `title=…`, `sort=…`, `limit=…`,
/// `sample_index=…`, `binary_path=[…]`, `symbolize=False`, `metric=…`, …). With `output`
/// (a path) the file is written and the sample count returned; without it the output is
/// returned, `bytes` for binary formats and `str` for text. Runs without the GIL.
#[pyfunction]
#[pyo3(signature = (input, to, output=None, **options))]
pub fn convert<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    to: &str,
    output: Option<&Bound<'py, PyAny>>,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyAny>> {
    let kind = value_enum::<OutputKind>("to", to)?;
    let request = request(kind, options)?;
    let input = path_of(input)?;
    let output = output.map(path_of).transpose()?;
    let mut memory = Vec::new();
    let done = py.detach(|| {
        let dest = match &output {
            Some(p) => Destination::File(p),
            None => Destination::Stream(&mut memory),
        };
        let mut warnings = Vec::new();
        let r = convert_file(&input, &request, dest, Teardown::Free, &mut |w| warnings.push(w.to_string()), |_| {
            Box::new(|_| {})
        });
        (r, warnings)
    });
    let (result, warnings) = done;
    for w in warnings {
        PyErr::warn(
            py,
            &py.get_type::<pyo3::exceptions::PyUserWarning>(),
            &std::ffi::CString::new(w).unwrap_or_default(),
            1,
        )?;
    }
    let samples = result.map_err(|e| request_error(py, e))?;
    Ok(match output {
        Some(_) => samples.into_pyobject(py)?.into_any(),
        None if is_text(kind) => PyString::new(py, &String::from_utf8_lossy(&memory)).into_any(),
        None => PyBytes::new(py, &memory).into_any(),
    })
}

/// The format of the file at `path`: "tachyon", "gperftools", "pprof", "mojo", "pstats",
/// or None for none the library reads.
#[pyfunction]
pub fn detect(py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<Option<&'static str>> {
    let path = path_of(path)?;
    let profile = match py.detach(|| Profile::open(&path)) {
        Ok(p) => p,
        Err(tachyon::profile::ProfileError::UnknownFormat { .. }) => return Ok(None),
        Err(e) => return Err(profile_error(py, e)),
    };
    Ok(format_name(profile.kind()))
}

/// Hands each hub call to a Python collector as CPython's replay does.
struct PyCollector<'py> {
    py: Python<'py>,
    collect: Bound<'py, PyAny>,
    objects: FrameObjects<'py>,
    error: Option<PyErr>,
}

impl PyCollector<'_> {
    fn call(&mut self, table: &FrameTable, call: &Call<'_>) -> PyResult<()> {
        let py = self.py;
        let stack = call
            .stack
            .iter()
            .map(|&id| {
                self.objects.get(id, || {
                    let f = &table.frames[id as usize];
                    Ok((Cow::Borrowed(f.filename.as_str()), Cow::Borrowed(f.funcname.as_str()), f.location, f.opcode))
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        let stack_frames =
            self.objects.types.stack_frames(py, call.interpreter_id, call.thread_id, call.status, &stack)?;
        let times = match call.times {
            Times::Stamped(t) => int_list(py, t)?,
            // No times in the input: one 0 per sample, so that the count is the list's length.
            Times::Counted(n) => PyList::new(py, std::iter::repeat_n(0u64, usize::try_from(n).unwrap_or(usize::MAX)))?,
        };
        self.collect.call1((stack_frames, times)).map(drop)
    }
}

impl Collector for PyCollector<'_> {
    fn collect(&mut self, frames: &FrameTable, call: &Call<'_>) {
        if self.error.is_none() {
            if let Err(e) = self.call(frames, call) {
                self.error = Some(e);
            }
        }
    }
}

/// Replays a profile of any format the library reads into `collector` (anything with a
/// `collect(stack_frames, timestamps_us)` method), with the objects CPython's replay gives:
/// Tachyon files exactly as `BinaryReader.replay`; other formats through the library's hub
/// (one thread per input thread, native frames named where the binaries are found; inputs
/// without times give a timestamp 0 per sample). Keyword arguments: `sample_index`,
/// `binary_path`, `symbolize`, `metric`, as for `convert()`. Returns the sample count.
#[pyfunction]
#[pyo3(signature = (input, collector, **options))]
pub fn read_samples(
    py: Python<'_>,
    input: &Bound<'_, PyAny>,
    collector: &Bound<'_, PyAny>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<u64> {
    if let Some(options) = options {
        for key in options.keys() {
            let key: String = key.extract()?;
            if !INPUT_OPTIONS.contains(&key.as_str()) {
                return Err(PyTypeError::new_err(format!("read_samples() got an unexpected keyword argument {key:?}")));
            }
        }
    }
    let collect =
        collector.getattr("collect").map_err(|_| PyTypeError::new_err("Collector must have a collect() method"))?;
    let mut input_options = input_options(options)?;
    input_options.counts_by_default = true;
    let path = path_of(input)?;
    let mut c = PyCollector { py, collect, objects: FrameObjects::new(py)?, error: None };
    let options = input_options.source_options(Default::default());
    let result = with_source(
        &path,
        &options,
        Teardown::Free,
        &mut |_| {},
        |_| Box::new(|_| {}),
        |source, progress| {
            source.prepare(&tachyon::convert::Output::Collapsed).map_err(tachyon::convert::ConvertError::Read)?;
            Source::replay(source, &mut c, progress).map_err(tachyon::convert::ConvertError::Read)
        },
    );
    if let Some(e) = c.error.take() {
        return Err(e);
    }
    result.map_err(|e| request_error(py, e))
}
