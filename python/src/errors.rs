//! Python exceptions for the library's errors. A file that breaks its format's rules raises
//! `FormatError`, a `ValueError` (what CPython's reader raises, with its wording for Tachyon
//! files) carrying `filename`, `format`, `offset` and `rule`; a file that cannot be opened or
//! read raises `OSError` with the errno and the file name, as CPython does.

use std::io;

use pyo3::create_exception;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use tachyon::core::kind::FileKind;
use tachyon::core::{Position, ReadError};
use tachyon::profile::ProfileError;
use tachyon::request::RequestError;

create_exception!(
    tachyon_profiles,
    FormatError,
    PyValueError,
    "A file broke a rule of its format. Attributes: filename, format (\"tachyon\", \"gperftools\", \
     \"pprof\", \"mojo\" or \"pstats\"), \
     offset (byte offset, or None where the format's reader does not give one), offset_in \
     (\"file\" or \"decompressed\": the zstd region's offsets are in its decompressed bytes), \
     rule (the rule's name)."
);

/// Adds the exception types to the module.
pub fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("FormatError", m.py().get_type::<FormatError>())
}

/// `OSError(errno, strerror, filename)`: Python picks the subclass (`FileNotFoundError`, …).
pub fn os_error(e: &io::Error, filename: Option<&Bound<'_, PyAny>>) -> PyErr {
    let py_msg = e.kind().to_string();
    let strerror = match e.raw_os_error() {
        // The C library's wording, as CPython's OSError has it.
        Some(code) => {
            io::Error::from_raw_os_error(code).to_string().split(" (os error").next().unwrap_or(&py_msg).to_string()
        }
        None => e.to_string(),
    };
    match (e.raw_os_error(), filename) {
        (Some(code), Some(f)) => PyOSError::new_err((code, strerror, f.clone().unbind())),
        (Some(code), None) => PyOSError::new_err((code, strerror)),
        (None, _) => PyOSError::new_err(e.to_string()),
    }
}

/// A `FormatError` with its attributes.
fn format_error(
    py: Python<'_>,
    message: String,
    filename: Option<Py<PyAny>>,
    format: &str,
    at: Option<Position>,
    rule: &str,
) -> PyErr {
    let err = FormatError::new_err(message);
    let value = err.value(py);
    let (offset, offset_in) = match at {
        Some(Position::File(o)) => (Some(o), Some("file")),
        Some(Position::Decompressed(o)) => (Some(o), Some("decompressed")),
        None => (None, None),
    };
    let set = || -> PyResult<()> {
        value.setattr("filename", filename)?;
        value.setattr("format", format)?;
        value.setattr("offset", offset)?;
        value.setattr("offset_in", offset_in)?;
        value.setattr("rule", rule)
    };
    match set() {
        Ok(()) => err,
        Err(e) => e,
    }
}

/// The name of a rule: its variant's name.
fn rule_name(debug: String) -> String {
    debug.split([' ', '{', '(']).next().unwrap_or_default().to_string()
}

/// The short name of a format, as `detect()` and `FormatError.format` give it.
pub fn format_name(kind: FileKind) -> Option<&'static str> {
    Some(match kind {
        FileKind::Tachyon => "tachyon",
        FileKind::Gperftools => "gperftools",
        FileKind::Pprof { .. } => "pprof",
        FileKind::Mojo => "mojo",
        FileKind::Marshal => "pstats",
        _ => return None,
    })
}

/// A Tachyon reader error: `OSError` for I/O, else `FormatError` with CPython's message.
pub fn read_error(py: Python<'_>, e: ReadError<io::Error>, filename: &Bound<'_, PyAny>) -> PyErr {
    match e {
        ReadError::Io { error, .. } => os_error(&error, Some(filename)),
        ReadError::Format { position, rule } => format_error(
            py,
            rule.to_string(),
            Some(filename.clone().unbind()),
            "tachyon",
            Some(position),
            &rule_name(format!("{rule:?}")),
        ),
        ReadError::UnexpectedEof { position } => {
            format_error(py, e.to_string(), Some(filename.clone().unbind()), "tachyon", Some(position), "UnexpectedEof")
        }
        ReadError::Capacity { position, .. } => {
            format_error(py, e.to_string(), Some(filename.clone().unbind()), "tachyon", Some(position), "Capacity")
        }
    }
}

/// A profile error of any format.
pub fn profile_error(py: Python<'_>, e: ProfileError) -> PyErr {
    match e {
        ProfileError::Io { path, error } => os_error(
            &error,
            Some(
                &path
                    .display()
                    .to_string()
                    .into_pyobject(py)
                    .map(|s| s.into_any())
                    .unwrap_or_else(|_| py.None().into_bound(py)),
            ),
        ),
        ProfileError::Write(error) => os_error(&error, None),
        ProfileError::UnknownFormat { ref path } => {
            let file = path.display().to_string();
            format_error(
                py,
                e.to_string(),
                Some(file.into_pyobject(py).map(|s| s.into_any().unbind()).unwrap_or_else(|_| py.None())),
                "unknown",
                None,
                "UnknownFormat",
            )
        }
        ProfileError::Invalid { ref path, kind, .. } => {
            let file: Py<PyAny> = path
                .display()
                .to_string()
                .into_pyobject(py)
                .map(|s| s.into_any().unbind())
                .unwrap_or_else(|_| py.None());
            let site = e.site();
            let at = site.as_ref().and_then(|s| {
                s.offset.map(|o| if s.decompressed { Position::Decompressed(o) } else { Position::File(o) })
            });
            let rule = site.map_or_else(|| "Invalid".to_string(), |s| s.rule);
            format_error(py, e.to_string(), Some(file), format_name(kind).unwrap_or("unknown"), at, &rule)
        }
    }
}

/// A conversion request's error: usage as `ValueError`, the rest as above.
pub fn request_error(py: Python<'_>, e: RequestError) -> PyErr {
    match e {
        RequestError::Usage(m) => PyValueError::new_err(m),
        RequestError::Profile(p) => profile_error(py, p),
        RequestError::Convert { error: tachyon::convert::ConvertError::Read(p), .. } => profile_error(py, p),
        RequestError::Convert { error: tachyon::convert::ConvertError::Write(w), .. } => os_error(&w, None),
        e @ RequestError::Convert { .. } => PyValueError::new_err(e.to_string()),
    }
}
