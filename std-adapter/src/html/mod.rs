//! Pages people look at, each one self-contained HTML file that works offline: its style sheet
//! and script inline, the profile embedded as JSON, and a content security policy that lets
//! the page fetch nothing at all (no fonts, no scripts, no images from anywhere).
//!
//! - [`tree`]: the call tree CPython's flame graph draws, with its numbers.
//! - [`flame`]: `--to flamegraph-html`, the interactive flame graph (click to zoom, search,
//!   per-thread numbers, tooltips), drawn by `assets/flame.js`.
//! - [`heatmap`]: `--to heatmap -o DIR`, samples per source line: an index of the files and
//!   a page per file (`assets/heatmap.js` recolours and filters).
//! - [`diff`]: `tachyon diff --html`, the differential one (the same script, coloured by
//!   change, with the paths the baseline alone has).
//!
//! Every page is [`write_page`]: the shell, the embedded data, and the page's script, with the
//! one style sheet `assets/page.css`.

pub mod diff;
pub mod flame;
pub mod heatmap;
pub mod tree;

use std::io::{self, Write};

/// The style sheet every page carries.
const STYLE: &str = include_str!("assets/page.css");

/// Nothing may be fetched: inline scripts and styles, data: images.
const POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:";

/// `text` with HTML's special characters escaped, for element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut s = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => s.push_str("&amp;"),
            '<' => s.push_str("&lt;"),
            '>' => s.push_str("&gt;"),
            '"' => s.push_str("&quot;"),
            '\'' => s.push_str("&#39;"),
            c => s.push(c),
        }
    }
    s
}

/// Writes `text` as a JSON string that may sit inside a `<script>` element: as
/// [`crate::pyfmt::write_json_str`] writes it, with `<` written `\u003c` so that no `</script>`
/// can end the element early.
pub fn write_json_str(out: &mut dyn Write, text: &str) -> io::Result<()> {
    if !text.contains('<') {
        return crate::pyfmt::write_json_str(&mut &mut *out, text);
    }
    let mut buf = Vec::with_capacity(text.len() + 8);
    crate::pyfmt::write_json_str(&mut buf, text)?;
    for part in buf.split(|&b| b == b'<').enumerate() {
        if part.0 > 0 {
            out.write_all(b"\\u003c")?;
        }
        out.write_all(part.1)?;
    }
    Ok(())
}

/// Writes a whole page: `title`, the `body` markup, the data `write_data` writes as JSON into
/// `<script id="profile-data" type="application/json">`, then `script`.
pub fn write_page(
    out: &mut dyn Write,
    title: &str,
    body: &str,
    write_data: &mut dyn FnMut(&mut dyn Write) -> io::Result<()>,
    script: &str,
) -> io::Result<()> {
    write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{POLICY}\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"tachyon {}\">\n<title>{}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n",
        env!("CARGO_PKG_VERSION"),
        escape(title)
    )?;
    out.write_all(body.as_bytes())?;
    out.write_all(b"\n<script id=\"profile-data\" type=\"application/json\">")?;
    write_data(out)?;
    out.write_all(b"</script>\n<script>\n")?;
    out.write_all(script.as_bytes())?;
    out.write_all(b"</script>\n</body>\n</html>\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_cannot_close_the_script_element() {
        let mut out = Vec::new();
        write_json_str(&mut out, "a</script><b>").unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), r#""a\u003c/script>\u003cb>""#);
    }

    #[test]
    fn markup_is_escaped() {
        assert_eq!(escape(r#"<a href="x">&'"#), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
    }
}
