//! The sample types: `InterpreterInfo(interpreter_id, threads)`, `ThreadInfo(thread_id,
//! status, frame_info)`, `FrameInfo(filename, location, funcname, opcode)` and
//! `LocationInfo(lineno, end_lineno, col_offset, end_col_offset)`.
//!
//! On CPython 3.15 and later they are `_remote_debugging`'s own, so objects pass freely
//! between CPython's profiler and this package; before 3.15 they are struct sequences made
//! here with the same names, fields, field docs and behaviour (indexable, iterable,
//! immutable, built from one sequence).

use std::ffi::{c_char, CStr};

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyList, PySequence, PyTuple, PyType};

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
    Ok(Types {
        interpreter: new_type(
            py,
            c"tachyon_profiles.InterpreterInfo",
            c"Information about an interpreter",
            &[(c"interpreter_id", c"Interpreter ID"), (c"threads", c"List of threads in this interpreter")],
        )?,
        thread: new_type(
            py,
            c"tachyon_profiles.ThreadInfo",
            c"Information about a thread",
            &[
                (c"thread_id", c"Thread ID"),
                (c"status", c"Thread status (flags: HAS_GIL, ON_CPU, UNKNOWN or legacy enum)"),
                (c"frame_info", c"Frame information"),
            ],
        )?,
        frame: new_type(
            py,
            c"tachyon_profiles.FrameInfo",
            c"Information about a frame",
            &[
                (c"filename", c"Source code filename"),
                (c"location", c"LocationInfo structseq or None for synthetic frames"),
                (c"funcname", c"Function name"),
                (c"opcode", c"Opcode being executed (None if not gathered)"),
            ],
        )?,
        location: new_type(
            py,
            c"tachyon_profiles.LocationInfo",
            c"Source location information: (lineno, end_lineno, col_offset, end_col_offset)",
            &[
                (c"lineno", c"Line number"),
                (c"end_lineno", c"End line number"),
                (c"col_offset", c"Column offset"),
                (c"end_col_offset", c"End column offset"),
            ],
        )?,
        cpython: false,
    })
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
pub fn make<'py, const N: usize>(
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
