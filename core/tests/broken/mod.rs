//! The error of the failing sinks the writer tests use (gperftools and MOJO).

/// A sink's failure.
#[derive(Debug, PartialEq)]
pub struct Broken;

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("broken sink")
    }
}

impl std::error::Error for Broken {}

impl embedded_io::Error for Broken {
    fn kind(&self) -> embedded_io::ErrorKind {
        embedded_io::ErrorKind::Other
    }
}
