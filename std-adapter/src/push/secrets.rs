//! Headers and credentials for `tachyon push`: where they come from, how they are checked, and
//! how they are kept out of everything the command prints.
//!
//! Sources, as curl and the OpenTelemetry exporters take them (a value given as an argument
//! shows in `ps` and in shell history, so the others are for secrets):
//! - `-H 'Name: value'` on the command line;
//! - `-H @FILE`: one `Name: value` a line from FILE (curl's form; empty lines and lines
//!   starting with `#` are skipped);
//! - `OTEL_EXPORTER_OTLP_PROFILES_HEADERS`, else `OTEL_EXPORTER_OTLP_HEADERS`, in the
//!   environment: `name=value` pairs separated by commas, values percent-decoded (the
//!   OpenTelemetry exporters' form), for every protocol;
//! - `--basic-auth-file FILE`: `USER:PASSWORD` on its first line (`--basic-auth` takes it as
//!   an argument).
//!
//! Every header is checked before anything is sent: a name of token characters only, a value
//! without control characters (a CR or LF would end the field and start another header). A
//! refusal names the header and where it came from, never its value. Every value (and a
//! basic-auth password) is registered with [`Secrets`], which blanks it out of any message
//! before it is printed: a server that echoes the request's headers in its error page cannot
//! make the command print a token either.

use std::path::Path;

/// A header, checked.
pub type Header = (String, String);

/// Why a header was refused; says which header and where from, never its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadHeader(pub String);

impl std::fmt::Display for BadHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadHeader {}

/// RFC 9110's token characters, what a field name is made of.
fn token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

/// Checks a header from `source` (say "-H", "line 3 of auth.txt"): a token name and a value
/// without control characters (a horizontal tab is allowed inside, as HTTP allows it).
pub fn check_header(name: &str, value: &str, source: &str) -> Result<Header, BadHeader> {
    let name = name.trim();
    if name.is_empty() || !name.chars().all(token_char) {
        // The name is not shown either: a malformed line may be a value that lost its name.
        return Err(BadHeader(format!("{source}: a header name must be letters, digits or one of !#$%&'*+-.^_`|~")));
    }
    let value = value.trim_matches([' ', '\t']);
    if value.chars().any(|c| c.is_control() && c != '\t') {
        return Err(BadHeader(format!(
            "{source}: header {name}: its value has a control character (CR, LF or another), which would end the header; refused (the value is not shown)"
        )));
    }
    Ok((name.to_owned(), value.to_owned()))
}

/// A header given as `Name: value`.
pub fn parse_header(h: &str) -> Result<Header, BadHeader> {
    parse_header_from(h, "-H")
}

fn parse_header_from(h: &str, source: &str) -> Result<Header, BadHeader> {
    match h.split_once(':') {
        Some((k, v)) => check_header(k, v, source),
        None => Err(BadHeader(format!(
            "{source}: a header is `Name: value` (the text given is not shown: it may hold a secret)"
        ))),
    }
}

/// The headers of a file as `-H @FILE` takes them.
pub fn headers_from_file(path: &Path) -> Result<Vec<Header>, BadHeader> {
    let text = std::fs::read_to_string(path).map_err(|e| BadHeader(format!("-H @{}: {}", path.display(), e.kind())))?;
    let mut headers = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        headers.push(parse_header_from(line, &format!("line {} of {}", i + 1, path.display()))?);
    }
    Ok(headers)
}

/// `%XX` escapes decoded (the OpenTelemetry header variables' values).
fn percent_decoded(s: &str) -> Option<String> {
    String::from_utf8(crate::push::percent_decode(s)?).ok()
}

/// The headers an OpenTelemetry variable gives (`name=value,name=value`).
pub fn headers_from_otel(variable: &str, text: &str) -> Result<Vec<Header>, BadHeader> {
    let mut headers = Vec::new();
    for (i, pair) in text.split(',').enumerate() {
        if pair.trim().is_empty() {
            continue;
        }
        let source = format!("entry {} of ${variable}", i + 1);
        let (k, v) =
            pair.split_once('=').ok_or_else(|| BadHeader(format!("{source}: not `name=value` (not shown)")))?;
        let v = percent_decoded(v.trim()).ok_or_else(|| BadHeader(format!("{source}: a bad %-escape (not shown)")))?;
        headers.push(check_header(k, &v, &source)?);
    }
    Ok(headers)
}

/// The headers of the environment's OpenTelemetry variable, if set
/// (`OTEL_EXPORTER_OTLP_PROFILES_HEADERS` before `OTEL_EXPORTER_OTLP_HEADERS`).
pub fn headers_from_environment() -> Result<Vec<Header>, BadHeader> {
    for variable in ["OTEL_EXPORTER_OTLP_PROFILES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"] {
        if let Some(text) = std::env::var_os(variable) {
            let text = text.into_string().map_err(|_| BadHeader(format!("${variable} is not UTF-8")))?;
            return headers_from_otel(variable, &text);
        }
    }
    Ok(Vec::new())
}

/// `Authorization: Basic …` for `user:password`.
pub fn basic_auth(user_password: &str) -> Header {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::from("Basic ");
    for chunk in user_password.as_bytes().chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(TABLE[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    ("Authorization".into(), out)
}

/// The `USER:PASSWORD` on the first line of `path` (`--basic-auth-file`).
pub fn basic_auth_from_file(path: &Path) -> Result<String, BadHeader> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| BadHeader(format!("--basic-auth-file {}: {}", path.display(), e.kind())))?;
    let line = text.lines().next().unwrap_or("").trim_end_matches('\r');
    if !line.contains(':') {
        return Err(BadHeader(format!(
            "--basic-auth-file {}: the first line is not USER:PASSWORD (not shown)",
            path.display()
        )));
    }
    if line.chars().any(char::is_control) {
        return Err(BadHeader(format!("--basic-auth-file {}: a control character (not shown)", path.display())));
    }
    Ok(line.to_owned())
}

/// Strings never to print: every header value and basic-auth credential of a push.
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    values: Vec<String>,
}

impl Secrets {
    /// Registers `value` (and, for `Basic` or `Bearer` credentials, the credential alone).
    pub fn add(&mut self, value: &str) {
        let value = value.trim();
        for v in [Some(value), value.split_once(' ').map(|(_, rest)| rest.trim())].into_iter().flatten() {
            // Short values (`1`, `gzip`) would blank out ordinary words; they are not secrets.
            if v.len() >= 4 && !self.values.iter().any(|s| s == v) {
                self.values.push(v.to_owned());
            }
        }
        // Longest first, so a value is blanked whole before a part of it.
        self.values.sort_by_key(|v| std::cmp::Reverse(v.len()));
    }

    /// Registers every header's value.
    pub fn add_headers(&mut self, headers: &[Header]) {
        for (_, v) in headers {
            self.add(v);
        }
    }

    /// `message` with every registered secret replaced by `[secret]`.
    pub fn scrub(&self, message: &str) -> String {
        let mut out = message.to_owned();
        for v in &self.values {
            if out.contains(v.as_str()) {
                out = out.replace(v.as_str(), "[secret]");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_checked_and_refusals_never_show_the_value() {
        assert_eq!(parse_header("Authorization: Bearer x").unwrap(), ("Authorization".into(), "Bearer x".into()));
        // Issue 39: CR/LF inside a value came out as a second header.
        for bad in ["X-Tenant: a\r\nX-Evil: 1", "X-Tenant: a\nb", "X-Tenant: a\0b", "X-Tenant: \x7f"] {
            let e = parse_header(bad).unwrap_err().to_string();
            assert!(e.contains("X-Tenant") && e.contains("control character"), "{e}");
            assert!(!e.contains("Evil") && !e.contains("a\nb"), "{e}");
        }
        for bad in ["no colon s3cret", "Bad Name: v", ": v", "X\r\nY: v"] {
            let e = parse_header(bad).unwrap_err().to_string();
            assert!(!e.contains("s3cret") && !e.contains("Bad Name"), "{e}");
        }
        assert_eq!(parse_header("X-A:\tv\tw ").unwrap().1, "v\tw");
    }

    #[test]
    fn otel_variables_and_files() {
        let h = headers_from_otel("V", "api-key=s%20ecret,X-Scope-OrgID=tenant-1,").unwrap();
        assert_eq!(h, [("api-key".into(), "s ecret".into()), ("X-Scope-OrgID".into(), "tenant-1".into())]);
        let e = headers_from_otel("V", "k=a%0D%0AX-Evil:%201").unwrap_err().to_string();
        assert!(e.contains("entry 1 of $V") && !e.contains("Evil"), "{e}");
        assert!(headers_from_otel("V", "k=%zz").is_err());
        let dir = std::env::temp_dir().join(format!("tachyon-secrets-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("h.txt");
        std::fs::write(&f, "# tokens\nAuthorization: Bearer abc123\n\nX-Tenant: t\n").unwrap();
        assert_eq!(headers_from_file(&f).unwrap().len(), 2);
        // Windows line ends are line ends; a CR inside a line is refused.
        std::fs::write(&f, "Authorization: Bearer abc123\r\nX-Tenant: t\r\n").unwrap();
        assert_eq!(headers_from_file(&f).unwrap()[1].1, "t");
        std::fs::write(&f, "Authorization: Bearer abc123\nX-Tenant: t\rX-Evil: abc123\n").unwrap();
        let e = headers_from_file(&f).unwrap_err().to_string();
        assert!(e.contains("line 2 of") && !e.contains("abc123") && !e.contains("Evil"), "{e}");
        std::fs::write(&f, "alice:pw12345\nignored\n").unwrap();
        assert_eq!(basic_auth_from_file(&f).unwrap(), "alice:pw12345");
        std::fs::write(&f, "no colon pw12345\n").unwrap();
        assert!(!basic_auth_from_file(&f).unwrap_err().to_string().contains("pw12345"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn basic_auth_is_rfc_4648() {
        for (plain, coded) in
            [("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE=")]
        {
            assert_eq!(basic_auth(plain).1, format!("Basic {coded}"));
        }
    }

    #[test]
    fn secrets_are_scrubbed() {
        let mut s = Secrets::default();
        s.add("Bearer tok-123456");
        s.add("1");
        let m = "401 — bad token tok-123456 in Authorization: Bearer tok-123456; retry 1";
        assert_eq!(s.scrub(m), "401 — bad token [secret] in Authorization: [secret]; retry 1");
    }
}
