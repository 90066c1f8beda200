//! Python exceptions for the library's errors. A file that breaks its format's rules raises
//! `FormatError`, a `ValueError` (what CPython's reader raises, with its wording for Tachyon
//! files) carrying `filename`, `format`, `offset` and `rule`; a file that cannot be opened or
//! read raises `OSError` with the errno and the file name, as CPython does.

use std::io;
use std::path::Path;

use pyo3::create_exception;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;
use tachyon::core::kind::FileKind;
use tachyon::core::ReadError;
use tachyon::profile::{ErrorSite, ProfileError};
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
    let Some(code) = e.raw_os_error() else { return PyOSError::new_err(e.to_string()) };
    // The C library's wording, as CPython's OSError has it, without Rust's "(os error N)".
    let message = e.to_string();
    let strerror = message.split(" (os error").next().unwrap_or_default();
    match filename {
        Some(f) => PyOSError::new_err((code, strerror.to_owned(), f.clone().unbind())),
        None => PyOSError::new_err((code, strerror.to_owned())),
    }
}

/// A `FormatError` with its attributes, from where and why the file was refused.
fn format_error(py: Python<'_>, message: String, filename: &Bound<'_, PyAny>, format: &str, site: ErrorSite) -> PyErr {
    let err = FormatError::new_err(message);
    let offset_in = site.offset.map(|_| if site.decompressed { "decompressed" } else { "file" });
    let value = err.value(py);
    let set = || -> PyResult<()> {
        value.setattr("filename", filename)?;
        value.setattr("format", format)?;
        value.setattr("offset", site.offset)?;
        value.setattr("offset_in", offset_in)?;
        value.setattr("rule", &site.rule)
    };
    match set() {
        Ok(()) => err,
        Err(e) => e,
    }
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

/// A Tachyon reader error: `OSError` for I/O, else `FormatError` with CPython's message
/// (a rule's own words, without the position the library's message adds).
pub fn read_error(py: Python<'_>, e: ReadError<io::Error>, filename: &Bound<'_, PyAny>) -> PyErr {
    let message = match &e {
        ReadError::Io { error, .. } => return os_error(error, Some(filename)),
        ReadError::Format { rule, .. } => rule.to_string(),
        other => other.to_string(),
    };
    format_error(py, message, filename, "tachyon", ErrorSite::of_tachyon(&e))
}

/// A profile error of any format.
pub fn profile_error(py: Python<'_>, e: ProfileError) -> PyErr {
    let path = |p: &Path| PyString::new(py, &p.display().to_string()).into_any();
    match &e {
        ProfileError::Io { path: p, error } => os_error(error, Some(&path(p))),
        ProfileError::Write(error) => os_error(error, None),
        ProfileError::UnknownFormat { path: p } => {
            let site = ErrorSite { offset: None, decompressed: false, rule: "UnknownFormat".into() };
            format_error(py, e.to_string(), &path(p), "unknown", site)
        }
        ProfileError::Invalid { path: p, kind, .. } => {
            let site = e.site().unwrap_or(ErrorSite { offset: None, decompressed: false, rule: "Invalid".into() });
            format_error(py, e.to_string(), &path(p), format_name(*kind).unwrap_or("unknown"), site)
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
        e @ (RequestError::Convert { .. } | RequestError::Mismatch { .. }) => PyValueError::new_err(e.to_string()),
    }
}
