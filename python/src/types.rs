//! The sample types: `InterpreterInfo(interpreter_id, threads)`, `ThreadInfo(thread_id,
//! status, frame_info)`, `FrameInfo(filename, location, funcname, opcode)` and
//! `LocationInfo(lineno, end_lineno, col_offset, end_col_offset)`.
//!
//! On CPython 3.15 and later they are `_remote_debugging`'s own, so objects pass freely
//! between CPython's profiler and this package; before 3.15 they are struct sequences made
//! here with the same names, fields, field docs and behaviour (indexable, iterable,
//! immutable, built from one sequence). Also what both directions share: the objects a
//! replay hands a collector, and reading what a caller gives (sequences, paths).

use std::borrow::Cow;
use std::ffi::{c_char, CStr};
use std::path::PathBuf;

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyList, PySequence, PyString, PyTuple, PyType};
use tachyon::core::{Compression, Location};

/// The four types, whoever made them.
pub struct Types {
    /// `InterpreterInfo`.
    pub interpreter: Py<PyType>,
    /// `ThreadInfo`.
    pub thread: Py<PyType>,
    /// `FrameInfo`.
    pub frame: Py<PyType>,
    /// `LocationInfo`.
    pub location: Py<PyType>,
    /// True when they are CPython's.
    pub cpython: bool,
}

static TYPES: PyOnceLock<Types> = PyOnceLock::new();

/// The types, made or found on first use.
pub fn types(py: Python<'_>) -> PyResult<&'static Types> {
    TYPES.get_or_try_init(py, || load(py))
}

/// Adds the types to the module.
pub fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let t = types(m.py())?;
    m.add("InterpreterInfo", t.interpreter.bind(m.py()))?;
    m.add("ThreadInfo", t.thread.bind(m.py()))?;
    m.add("FrameInfo", t.frame.bind(m.py()))?;
    m.add("LocationInfo", t.location.bind(m.py()))?;
    m.add("USES_CPYTHON_TYPES", t.cpython)?;
    Ok(())
}

fn load(py: Python<'_>) -> PyResult<Types> {
    if py.version_info() >= (3, 15) {
        if let Ok(rd) = py.import("_remote_debugging") {
            let get = |name: &str| -> PyResult<Py<PyType>> { Ok(rd.getattr(name)?.cast_into::<PyType>()?.unbind()) };
            if let (Ok(interpreter), Ok(thread), Ok(frame), Ok(location)) =
                (get("InterpreterInfo"), get("ThreadInfo"), get("FrameInfo"), get("LocationInfo"))
            {
                return Ok(Types { interpreter, thread, frame, location, cpython: true });
            }
        }
    }
    let [interpreter, thread, frame, location] = OWN_TYPES.map(|(name, doc, fields)| new_type(py, name, doc, fields));
    Ok(Types { interpreter: interpreter?, thread: thread?, frame: frame?, location: location?, cpython: false })
}

/// A struct sequence's name, doc and fields (name, doc).
type TypeSpec = (&'static CStr, &'static CStr, &'static [(&'static CStr, &'static CStr)]);

/// The four types as made before 3.15, with CPython 3.15's names, fields and docs.
const OWN_TYPES: [TypeSpec; 4] = [
    (
        c"tachyon_profiles.InterpreterInfo",
        c"Information about an interpreter",
        &[(c"interpreter_id", c"Interpreter ID"), (c"threads", c"List of threads in this interpreter")],
    ),
    (
        c"tachyon_profiles.ThreadInfo",
        c"Information about a thread",
        &[
            (c"thread_id", c"Thread ID"),
            (c"status", c"Thread status (flags: HAS_GIL, ON_CPU, UNKNOWN or legacy enum)"),
            (c"frame_info", c"Frame information"),
        ],
    ),
    (
        c"tachyon_profiles.FrameInfo",
        c"Information about a frame",
        &[
            (c"filename", c"Source code filename"),
            (c"location", c"LocationInfo structseq or None for synthetic frames"),
            (c"funcname", c"Function name"),
            (c"opcode", c"Opcode being executed (None if not gathered)"),
        ],
    ),
    (
        c"tachyon_profiles.LocationInfo",
        c"Source location information: (lineno, end_lineno, col_offset, end_col_offset)",
        &[
            (c"lineno", c"Line number"),
            (c"end_lineno", c"End line number"),
            (c"col_offset", c"Column offset"),
            (c"end_col_offset", c"End column offset"),
        ],
    ),
];

impl Types {
    /// `FrameInfo(filename, location, funcname, opcode)` as CPython's reader gives it: the
    /// location a plain 4-tuple (not a `LocationInfo`) or None, the opcode None when unknown.
    pub fn frame_info<'py>(
        &self,
        py: Python<'py>,
        filename: &str,
        funcname: &str,
        location: Option<Location>,
        opcode: Option<u8>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let location = match location {
            Some(l) => PyTuple::new(py, [l.lineno, l.end_lineno, l.col, l.end_col])?.into_any(),
            None => py.None().into_bound(py),
        };
        let opcode = match opcode {
            Some(op) => op.into_pyobject(py)?.into_any(),
            None => py.None().into_bound(py),
        };
        make(
            py,
            &self.frame,
            [PyString::new(py, filename).into_any(), location, PyString::new(py, funcname).into_any(), opcode],
        )
    }

    /// One `collect()` call's `stack_frames`: `[InterpreterInfo(iid, [ThreadInfo(tid,
    /// status, frames)])]`, every list new (a collector may keep or change them).
    pub fn stack_frames<'py>(
        &self,
        py: Python<'py>,
        iid: u32,
        tid: u64,
        status: u8,
        frames: &[Bound<'py, PyAny>],
    ) -> PyResult<Bound<'py, PyList>> {
        let thread = make(
            py,
            &self.thread,
            [
                tid.into_pyobject(py)?.into_any(),
                status.into_pyobject(py)?.into_any(),
                PyList::new(py, frames)?.into_any(),
            ],
        )?;
        let interpreter =
            make(py, &self.interpreter, [iid.into_pyobject(py)?.into_any(), PyList::new(py, [thread])?.into_any()])?;
        PyList::new(py, [interpreter])
    }
}

/// What a frame object is made of: file name, function name, location, opcode.
pub type FrameParts<'a> = (Cow<'a, str>, Cow<'a, str>, Option<Location>, Option<u8>);

/// A replay's `FrameInfo` objects, one per frame id, made on first use and shared by every
/// `collect()` call after (they are immutable; CPython makes them afresh for each sample).
pub struct FrameObjects<'py> {
    py: Python<'py>,
    /// The types the objects are made of.
    pub types: &'static Types,
    made: Vec<Option<Bound<'py, PyAny>>>,
}

impl<'py> FrameObjects<'py> {
    /// An empty cache.
    pub fn new(py: Python<'py>) -> PyResult<Self> {
        Ok(FrameObjects { py, types: types(py)?, made: Vec::new() })
    }

    /// The object of frame `id`; `parts` describes the frame the first time.
    pub fn get<'a>(
        &mut self,
        id: u32,
        parts: impl FnOnce() -> PyResult<FrameParts<'a>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let id = id as usize;
        if let Some(Some(f)) = self.made.get(id) {
            return Ok(f.clone());
        }
        let (filename, funcname, location, opcode) = parts()?;
        let object = self.types.frame_info(self.py, &filename, &funcname, location, opcode)?;
        if self.made.len() <= id {
            self.made.resize(id + 1, None);
        }
        self.made[id] = Some(object.clone());
        Ok(object)
    }
}

/// A struct sequence type (`PyStructSequence_NewType`, in the stable ABI).
fn new_type(
    py: Python<'_>,
    name: &'static CStr,
    doc: &'static CStr,
    fields: &[(&'static CStr, &'static CStr)],
) -> PyResult<Py<PyType>> {
    let mut list: Vec<ffi::PyStructSequence_Field> =
        fields.iter().map(|(n, d)| ffi::PyStructSequence_Field { name: n.as_ptr(), doc: d.as_ptr() }).collect();
    list.push(ffi::PyStructSequence_Field { name: std::ptr::null::<c_char>(), doc: std::ptr::null::<c_char>() });
    // The type keeps pointers into the field list for as long as it lives, which is the
    // process's life: the list is leaked once per type.
    let list: &'static mut [ffi::PyStructSequence_Field] = Vec::leak(list);
    let mut desc = ffi::PyStructSequence_Desc {
        name: name.as_ptr(),
        doc: doc.as_ptr(),
        fields: list.as_mut_ptr(),
        n_in_sequence: fields.len() as i32,
    };
    // SAFETY: the descriptor and every string it points to are valid for the call; the
    // strings and the field list live for the rest of the process.
    let ty = unsafe { ffi::PyStructSequence_NewType(&mut desc) };
    if ty.is_null() {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference to a type object.
    Ok(unsafe { Bound::from_owned_ptr(py, ty.cast::<ffi::PyObject>()) }.cast_into::<PyType>()?.unbind())
}

/// A new struct sequence of type `ty` holding `items` (as many as it has fields).
fn make<'py, const N: usize>(
    py: Python<'py>,
    ty: &Py<PyType>,
    items: [Bound<'py, PyAny>; N],
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: `ty` is a struct sequence type of N fields (one of ours or CPython's four);
    // SetItem steals each new reference, once per field.
    unsafe {
        let obj = ffi::PyStructSequence_New(ty.as_ptr().cast::<ffi::PyTypeObject>());
        if obj.is_null() {
            return Err(PyErr::fetch(py));
        }
        for (i, item) in items.into_iter().enumerate() {
            ffi::PyStructSequence_SetItem(obj, i as ffi::Py_ssize_t, item.into_ptr());
        }
        Ok(Bound::from_owned_ptr(py, obj))
    }
}

/// A new list of Python ints: a replay's timestamps, half a million in a second for a busy
/// profile, made without PyO3's per-item conversions (the same two calls a C extension makes).
pub fn int_list<'py>(py: Python<'py>, values: &[u64]) -> PyResult<Bound<'py, PyList>> {
    // SAFETY: a new list of `values.len()` empty slots, each filled once with a new
    // reference (stolen by SetItem) before the list is handed to anyone.
    unsafe {
        let list = ffi::PyList_New(values.len() as ffi::Py_ssize_t);
        if list.is_null() {
            return Err(PyErr::fetch(py));
        }
        let list = Bound::from_owned_ptr(py, list);
        for (i, &v) in values.iter().enumerate() {
            let item = ffi::PyLong_FromUnsignedLongLong(v);
            if item.is_null() || ffi::PyList_SetItem(list.as_ptr(), i as ffi::Py_ssize_t, item) != 0 {
                return Err(PyErr::fetch(py));
            }
        }
        Ok(list.cast_into_unchecked::<PyList>())
    }
}

/// A path from a str, bytes or path-like object (`os.fspath`), as CPython's writer and
/// reader take it; `TypeError` otherwise.
pub fn path_of(filename: &Bound<'_, PyAny>) -> PyResult<PathBuf> {
    let path = filename.py().import("os")?.getattr("fspath")?.call1((filename,))?;
    if let Ok(s) = path.cast::<PyString>() {
        return Ok(PathBuf::from(s.to_cow()?.into_owned()));
    }
    let bytes: Vec<u8> = path.extract()?;
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        Ok(PathBuf::from(std::ffi::OsString::from_vec(bytes)))
    }
    #[cfg(not(unix))]
    Ok(PathBuf::from(String::from_utf8_lossy(&bytes).into_owned()))
}

/// A str's UTF-8, borrowed from the object: CPython makes it once and keeps it in the str
/// (for an ASCII str it is the str's own data), so a writer that sees the same code object's
/// names on every sample neither copies them nor hands the core writer new addresses (its
/// recent-frame cache is keyed by them). Strict, as CPython's writer: a lone surrogate is
/// `UnicodeEncodeError`.
pub struct Utf8<'py> {
    /// Keeps the str, and so its UTF-8 buffer, alive.
    _str: Bound<'py, PyString>,
    ptr: *const u8,
    len: usize,
}

extern "C" {
    // In the limited API from 3.10, and exported by every CPython 3 before it: the abi3-py39
    // wheel declares it itself, as PyO3 declares it only for a 3.10 floor.
    fn PyUnicode_AsUTF8AndSize(unicode: *mut ffi::PyObject, size: *mut ffi::Py_ssize_t) -> *const c_char;
}

/// `PyUnicode_AsUTF8AndSize`: the str's cached UTF-8, or null with an error set.
///
/// # Safety
/// `o` is a live str and the GIL is held.
pub unsafe fn utf8_and_size(o: *mut ffi::PyObject, size: &mut ffi::Py_ssize_t) -> *const c_char {
    PyUnicode_AsUTF8AndSize(o, size)
}

impl<'py> Utf8<'py> {
    /// The str's UTF-8 view.
    pub fn of(s: Bound<'py, PyString>) -> PyResult<Self> {
        let mut size: ffi::Py_ssize_t = 0;
        // SAFETY: `s` is a live str (the GIL is held: we have a Bound); the call fills `size`
        // or returns null with an exception set.
        let ptr = unsafe { utf8_and_size(s.as_ptr(), &mut size) };
        if ptr.is_null() {
            return Err(PyErr::fetch(s.py()));
        }
        Ok(Utf8 { _str: s, ptr: ptr.cast(), len: size as usize })
    }

    /// The bytes, valid while `self` holds the str.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: CPython keeps the buffer for the str's lifetime and never changes it (a
        // str is immutable), and `self` holds a reference to the str.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// A `compression` argument, the same everywhere (`BinaryWriter`, `convert()`, `merge()`):
/// `"none"` or `"zstd"`, or CPython's integers, 0 and 1. Any other int is the writer's header
/// field as given, as CPython's `BinaryWriter` stores it (a raw sample region).
pub fn compression_of(v: &Bound<'_, PyAny>) -> PyResult<Compression> {
    if let Ok(s) = v.cast::<PyString>() {
        return match &*s.to_cow()? {
            "none" => Ok(Compression::None),
            "zstd" => Ok(Compression::Zstd),
            other => Err(PyValueError::new_err(format!("compression={other:?}: \"none\", \"zstd\", 0 or 1"))),
        };
    }
    // Any int, a bool included, as CPython's C int argument takes it.
    if !v.is_instance_of::<pyo3::types::PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "compression must be \"none\", \"zstd\", 0 or 1, not {}",
            v.get_type().name()?
        )));
    }
    // A C int field in CPython's writer: the low 32 bits of what fits one.
    let n: std::os::raw::c_int = v.extract()?;
    Ok(Compression::from_field(n as u32))
}

/// One of the four sample types as a caller gives it: its name and its fields, for messages.
pub struct Shape {
    /// `InterpreterInfo`, `ThreadInfo`, `FrameInfo` or `LocationInfo`.
    pub name: &'static str,
    /// The fields, in order.
    pub fields: &'static [&'static str],
}

/// `InterpreterInfo(interpreter_id, threads)`.
pub const INTERPRETER_INFO: Shape = Shape { name: "InterpreterInfo", fields: &["interpreter_id", "threads"] };
/// `ThreadInfo(thread_id, status, frame_info)`.
pub const THREAD_INFO: Shape = Shape { name: "ThreadInfo", fields: &["thread_id", "status", "frame_info"] };
/// `FrameInfo(filename, location, funcname, opcode)`.
pub const FRAME_INFO: Shape = Shape { name: "FrameInfo", fields: &["filename", "location", "funcname", "opcode"] };

/// The first `N` items of a value given as `shape`: a struct sequence, tuple, list or other
/// sequence (not a str or bytes) of at least `N` items. Anything else is a `TypeError` that
/// names the shape, its fields and what was given. (CPython 3.15.2's writer has no message
/// here: it crashes, or raises `SystemError`, on most such values.)
pub fn fields<'py, const N: usize>(obj: &Bound<'py, PyAny>, shape: &Shape) -> PyResult<[Bound<'py, PyAny>; N]> {
    let wrong = |got: String| {
        PyTypeError::new_err(format!(
            "{} must be a sequence of {N} items ({}), not {got}",
            shape.name,
            shape.fields.join(", ")
        ))
    };
    let short = |len: usize| wrong(format!("a sequence of {len}"));
    let mut failed = None;
    let mut take = |get: &dyn Fn(usize) -> PyResult<Bound<'py, PyAny>>| -> [Bound<'py, PyAny>; N] {
        std::array::from_fn(|i| {
            get(i).unwrap_or_else(|e| {
                failed.get_or_insert(e);
                obj.py().None().into_bound(obj.py())
            })
        })
    };
    let items = if let Ok(t) = obj.cast::<PyTuple>() {
        if t.len() < N {
            return Err(short(t.len()));
        }
        take(&|i| t.get_item(i))
    } else if let Ok(l) = obj.cast::<PyList>() {
        if l.len() < N {
            return Err(short(l.len()));
        }
        take(&|i| l.get_item(i))
    } else if obj.is_instance_of::<PyString>() || obj.is_instance_of::<pyo3::types::PyBytes>() {
        return Err(wrong(obj.get_type().name()?.to_string()));
    } else if let Ok(s) = obj.cast::<PySequence>() {
        let len = s.len()?;
        if len < N {
            return Err(short(len));
        }
        take(&|i| s.get_item(i))
    } else {
        return Err(wrong(obj.get_type().name()?.to_string()));
    };
    match failed {
        Some(e) => Err(e),
        None => Ok(items),
    }
}

/// The items of a list (or another sequence, not a str or bytes) that a sample type holds:
/// `InterpreterInfo.threads`, `ThreadInfo.frame_info`. `TypeError` naming the field otherwise.
pub fn list_field<'py>(obj: &Bound<'py, PyAny>, shape: &Shape, field: &str) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if let Ok(l) = obj.cast::<PyList>() {
        return Ok(l.iter().collect());
    }
    let not_a_list = || -> PyResult<PyErr> {
        let got = obj.get_type().name()?;
        Ok(PyTypeError::new_err(format!("{}.{field} must be a list, not {got}", shape.name)))
    };
    if obj.is_instance_of::<PyString>() || obj.is_instance_of::<pyo3::types::PyBytes>() {
        return Err(not_a_list()?);
    }
    match obj.cast::<PySequence>() {
        Ok(s) => s.try_iter()?.collect(),
        Err(_) => Err(not_a_list()?),
    }
}

/// A C `unsigned long long` argument as CPython 3.15's argument parser takes one (the
/// writer's `timestamp_us`, `sample_interval_us`, `start_time_us`): through `__index__`
/// (`TypeError: 'str' object cannot be interpreted as an integer`), `ValueError: Cannot
/// convert negative int`, `OverflowError: Python int too large for C unsigned long long`.
pub fn unsigned_long_long(v: &Bound<'_, PyAny>) -> PyResult<u64> {
    // The common case first: an int that fits (no `__index__`, no comparison).
    if v.is_exact_instance_of::<pyo3::types::PyInt>() {
        if let Ok(n) = v.extract::<u64>() {
            return Ok(n);
        }
    }
    // SAFETY: `v` is live; PyNumber_Index returns a new reference or null with an error set.
    let index = unsafe { Bound::from_owned_ptr_or_err(v.py(), ffi::PyNumber_Index(v.as_ptr()))? };
    if index.lt(0)? {
        return Err(PyValueError::new_err("Cannot convert negative int"));
    }
    index.extract::<u64>().map_err(|_| PyOverflowError::new_err("Python int too large for C unsigned long long"))
}

/// Item `i` of a struct sequence, tuple, list or other sequence given by a caller.
pub fn item<'py>(obj: &Bound<'py, PyAny>, i: usize, what: &str) -> PyResult<Bound<'py, PyAny>> {
    if let Ok(t) = obj.cast::<PyTuple>() {
        if let Ok(v) = t.get_item(i) {
            return Ok(v);
        }
    } else if let Ok(l) = obj.cast::<PyList>() {
        if let Ok(v) = l.get_item(i) {
            return Ok(v);
        }
    } else if let Ok(s) = obj.cast::<PySequence>() {
        return s.get_item(i);
    }
    Err(PyTypeError::new_err(format!("{what} must be a sequence of at least {} items", i + 1)))
}

/// The items of a list or other sequence given by a caller.
pub fn items<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if let Ok(l) = obj.cast::<PyList>() {
        return Ok(l.iter().collect());
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        return Ok(t.iter().collect());
    }
    match obj.cast::<PySequence>() {
        Ok(s) => s.try_iter()?.collect(),
        Err(_) => Err(PyTypeError::new_err(format!("{what} must be a list"))),
    }
}
