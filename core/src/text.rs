//! Names are bytes; this gives the lossy text view CPython's reader shows
//! (`bytes.decode('utf-8', errors='replace')`), without allocating.

use core::fmt;

/// Displays bytes as UTF-8, each maximal invalid subsequence replaced by U+FFFD — the same
/// substitution CPython's `errors='replace'` makes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Lossy<'a>(pub &'a [u8]);

impl fmt::Display for Lossy<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for chunk in self.0.utf8_chunks() {
            f.write_str(chunk.valid())?;
            if !chunk.invalid().is_empty() {
                f.write_str("\u{FFFD}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Lossy<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{self}\"")
    }
}
