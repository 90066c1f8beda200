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

#[cfg(test)]
mod tests {
    extern crate std;
    use super::Lossy;
    use std::string::ToString;

    /// Expected strings were produced by CPython's codec, not by this crate:
    /// `bytes(b).decode('utf-8', 'replace')` under Python 3.11 (the UTF-8 decoder 3.15 uses
    /// is the same), U+FFFD written as `\u{fffd}`.
    #[test]
    fn matches_cpython_errors_replace() {
        let r = "\u{fffd}";
        let cases: [(&[u8], std::string::String); 16] = [
            (b"plain", "plain".into()),
            (b"\xed\xa0\x80lone-surrogate", std::format!("{r}{r}{r}lone-surrogate")),
            (b"\xf0\x90\x80", r.into()),
            (b"\xf0\x90\x80\x80ok", "\u{10000}ok".into()),
            (b"a\x80b", std::format!("a{r}b")),
            (b"\xc3", r.into()),
            (b"\xc3\x28", std::format!("{r}(")),
            (b"\xe2\x82", r.into()),
            (b"\xe2\x82\xac", "\u{20ac}".into()),
            (b"\xff\xfe", std::format!("{r}{r}")),
            (b"\xf4\x90\x80\x80", std::format!("{r}{r}{r}{r}")),
            (b"\xc0\xaf", std::format!("{r}{r}")),
            (b"\xe0\x80\xaf", std::format!("{r}{r}{r}")),
            (b"x\xf8\x88\x80\x80\x80y", std::format!("x{r}{r}{r}{r}{r}y")),
            (b"\xed\xbf\xbf", std::format!("{r}{r}{r}")),
            (b"caf\xe9", std::format!("caf{r}")),
        ];
        for (bytes, want) in cases {
            assert_eq!(Lossy(bytes).to_string(), want, "{bytes:?}");
            assert_eq!(std::string::String::from_utf8_lossy(bytes), want, "{bytes:?}");
        }
    }
}
