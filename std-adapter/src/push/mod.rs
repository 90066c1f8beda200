//! Sending profiles to a server (`tachyon push`): an OTLP/HTTP receiver (an OpenTelemetry
//! collector, a backend that takes OTLP profiles) or Grafana Pyroscope's `/ingest`.
//!
//! - **OTLP/HTTP**: `POST <endpoint>/v1development/profiles`, the file as [`crate::otlp`]'s
//!   `ExportProfilesServiceRequest` in protobuf, gzipped (`Content-Encoding: gzip`). A 200
//!   answer may still carry a partial success: its rejected count and message are reported.
//! - **Pyroscope**: `POST <endpoint>/ingest?name=…&from=…&until=…&format=…&sampleRate=…`,
//!   the file folded (threads merged, [`crate::model::fold`]) as pprof (a multipart form with
//!   the gzipped profile in its `profile` field, as Pyroscope's own agents send it) or as
//!   folded stacks (`format=folded`, one `stack count` line each).
//!
//! One request per file, in order, over HTTP/1.1 ([`http::post`]; TLS for `https://`
//! endpoints, [`tls`]): a connection
//! refused or cut before an answer, a time-out, 429 or 5xx is retried with exponential
//! backoff (`Retry-After` honoured), up to a number of attempts; any other 4xx is final and
//! its message is the server's. A file is never sent again once a 2xx status line arrived,
//! whatever happened to the rest of the answer (see [`http`]).
//!
//! Modules: [`http`] (the client: endpoints, requests, answers), [`tls`] (whom an `https://`
//! push trusts, and why a server was refused), [`secrets`] (headers and credentials: sources,
//! checks, and keeping them out of what is printed), [`follow`] (a long-running sender for a
//! directory profiles keep arriving in, with a state file so that a restart sends nothing
//! twice but what it says).

pub mod follow;
pub mod http;
pub mod secrets;
pub mod tls;

use std::fmt;
use std::io::{self, Write};
use std::path::Path;
use std::time::Duration;

pub use http::{post, Answer, Body, Endpoint};
pub use secrets::{basic_auth, parse_header, Secrets};
pub use tls::{TlsClient, Trust};

use prost::Message;

use crate::model::fold::{Fold, FoldOptions};
use crate::model::Clock;
use crate::otlp::DEFAULT_SERVICE_NAME;
use crate::output::{Destination, OutputKind};
use crate::request::{convert_file, write_folded, ConvertRequest, InputOptions, MergeRequest, RequestError, Teardown};

crate::choices! {
    /// Where profiles go.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Protocol {
        /// OTLP/HTTP, protobuf, gzip.
        Otlp = "otlp",
        /// Pyroscope's `/ingest`, pprof.
        PyroscopePprof = "pyroscope-pprof",
        /// Pyroscope's `/ingest`, folded stacks.
        PyroscopeFolded = "pyroscope-folded",
    }
}

/// How requests are retried.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    /// Most attempts per request (the first included).
    pub attempts: u32,
    /// Wait before the second attempt; doubled for each further one, at most [`Retry::MAX_WAIT`].
    pub first_wait: Duration,
    /// How long to wait for the server at each step (connecting, sending, answering).
    pub timeout: Duration,
}

impl Retry {
    /// The longest wait between attempts.
    pub const MAX_WAIT: Duration = Duration::from_secs(60);
}

impl Default for Retry {
    fn default() -> Self {
        Retry { attempts: 5, first_wait: Duration::from_millis(500), timeout: Duration::from_secs(30) }
    }
}

/// Why a push failed.
#[derive(Debug)]
pub enum PushError {
    /// The server refused the request (a 4xx other than 429): its status and what it said.
    Refused {
        /// The status code.
        status: u16,
        /// The reason phrase and body, as the server sent them (cut at 4 KiB).
        message: String,
    },
    /// TLS refused the server (its certificate, or it does not speak TLS); not retried.
    Tls(String),
    /// Every attempt failed; the last failure.
    GaveUp {
        /// Attempts made.
        attempts: u32,
        /// The last failure (a status or a connection error).
        last: String,
        /// A request went out whole and got no answer: the server may have taken it.
        possibly_taken: bool,
    },
}

impl fmt::Display for PushError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PushError::Refused { status, message } => write!(f, "the server refused it ({status}): {message}"),
            PushError::Tls(why) => f.write_str(why),
            PushError::GaveUp { attempts, last, .. } => write!(f, "gave up after {attempts} attempts: {last}"),
        }
    }
}

impl std::error::Error for PushError {}

/// Why a file may have reached a server twice: a retry was taken after a request that went
/// out whole and got no answer (what `push` and the follower say).
pub const UNANSWERED: &str = "an earlier request for it went out whole and got no answer";

/// A request the server took.
#[derive(Debug, Clone)]
pub struct Delivered {
    /// Its `2xx` answer.
    pub answer: Answer,
    /// An earlier attempt went out whole and got no answer, so the server may have taken the
    /// request twice.
    pub possibly_twice: bool,
}

/// Posts `body` to `target` (over `tls` for an `https://` endpoint), retrying as `retry`
/// says; the 2xx answer. `waiting` is told each wait before a retry, with why.
pub fn send(
    endpoint: &Endpoint,
    target: &str,
    headers: &[(String, String)],
    body: &Body,
    retry: Retry,
    tls: Option<&TlsClient>,
    waiting: &mut dyn FnMut(Duration, &str),
) -> Result<Delivered, PushError> {
    send_with(endpoint, target, headers, body, retry, tls, waiting, &mut || Ok(()))
}

/// [`send`], calling `connected` before each attempt's request is written (see
/// [`http::post_with`]); an error from it stops the sending at once, as given up, with no
/// further attempt.
#[allow(clippy::too_many_arguments)]
pub fn send_with(
    endpoint: &Endpoint,
    target: &str,
    headers: &[(String, String)],
    body: &Body,
    retry: Retry,
    tls: Option<&TlsClient>,
    waiting: &mut dyn FnMut(Duration, &str),
    connected: &mut dyn FnMut() -> io::Result<()>,
) -> Result<Delivered, PushError> {
    let mut wait = retry.first_wait;
    let mut attempt = 0;
    let mut possibly_taken = false;
    loop {
        attempt += 1;
        let mut stopped = None;
        let mut observed = || connected().inspect_err(|e| stopped = Some(e.to_string()));
        let posted = http::post_with(endpoint, target, headers, body, retry.timeout, tls, &mut observed);
        if let Some(why) = stopped {
            return Err(PushError::GaveUp { attempts: attempt, last: why, possibly_taken });
        }
        let failure = match posted {
            // Taken, whatever followed the status line: never sent again.
            Ok(answer) if (200..300).contains(&answer.status) => {
                return Ok(Delivered { answer, possibly_twice: possibly_taken })
            }
            Ok(a) if a.status == 429 || a.status >= 500 => (format!("{} {}", a.status, http::said(&a)), a.retry_after),
            Ok(a) => return Err(PushError::Refused { status: a.status, message: http::said(&a) }),
            Err(http::NotSent::Refused(why)) => return Err(PushError::Tls(why)),
            Err(e @ http::NotSent::Unanswered(_)) => {
                possibly_taken = true;
                (e.to_string(), None)
            }
            Err(e) => (e.to_string(), None),
        };
        if attempt >= retry.attempts.max(1) {
            return Err(PushError::GaveUp { attempts: attempt, last: failure.0, possibly_taken });
        }
        let this_wait = match failure.1 {
            Some(s) => Duration::from_secs(s).min(Retry::MAX_WAIT),
            None => wait,
        };
        waiting(this_wait, &failure.0);
        std::thread::sleep(this_wait);
        wait = (wait * 2).min(Retry::MAX_WAIT);
    }
}

/// An OTLP/HTTP body: an `ExportProfilesServiceRequest` in protobuf, gzipped.
pub fn otlp_body(protobuf: &[u8]) -> io::Result<Body> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(protobuf)?;
    Ok(Body { content_type: "application/x-protobuf".into(), encoding: Some("gzip"), bytes: gz.finish()? })
}

/// The path OTLP/HTTP takes profiles at, under `endpoint`'s base.
pub fn otlp_target(endpoint: &Endpoint) -> String {
    format!("{}/v1development/profiles", endpoint.base)
}

/// What an OTLP receiver's 2xx answer says it rejected, if anything: protobuf
/// `ExportProfilesServiceResponse.partial_success` (a JSON answer is not read).
pub fn otlp_partial_success(answer: &Answer) -> Option<String> {
    #[derive(Clone, PartialEq, Message)]
    struct Response {
        #[prost(message, optional, tag = "1")]
        partial_success: Option<PartialSuccess>,
    }
    #[derive(Clone, PartialEq, Message)]
    struct PartialSuccess {
        #[prost(int64, tag = "1")]
        rejected_profiles: i64,
        #[prost(string, tag = "2")]
        error_message: String,
    }
    let p = Response::decode(&answer.body[..]).ok()?.partial_success?;
    (p.rejected_profiles != 0 || !p.error_message.is_empty())
        .then(|| format!("{} profiles rejected: {}", p.rejected_profiles, p.error_message))
}

/// `bytes` with every byte `keep` refuses as `%XX` (a query string's value, a state line's
/// name).
pub(crate) fn percent_encode(bytes: &[u8], keep: impl Fn(u8) -> bool) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if keep(b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `%XX` escapes decoded; `None` for a `%` without two hex digits.
pub(crate) fn percent_decode(s: &str) -> Option<Vec<u8>> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            // Two hex digits exactly: from_str_radix alone would take a sign ("%+5").
            let hex = bytes.get(i + 1..i + 3).filter(|h| h.iter().all(u8::is_ascii_hexdigit))?;
            out.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

/// `s` percent-encoded for a query string.
fn query_escape(s: &str) -> String {
    percent_encode(s.as_bytes(), |b| b.is_ascii_alphanumeric() || b"-_.~".contains(&b))
}

/// Pyroscope's `/ingest` target for a profile of `name` from `from_s` to `until_s` (Unix
/// seconds), sampled every `interval_us`.
pub fn pyroscope_target(
    endpoint: &Endpoint,
    name: &str,
    from_s: u64,
    until_s: u64,
    format: &str,
    interval_us: u64,
) -> String {
    let mut t = format!(
        "{}/ingest?name={}&from={from_s}&until={}&format={format}&spyName=tachyon&units=samples&aggregationType=sum",
        endpoint.base,
        query_escape(name),
        until_s.max(from_s)
    );
    if let Some(rate) = 1_000_000u64.checked_div(interval_us) {
        t.push_str(&format!("&sampleRate={}", rate.max(1)));
    }
    t
}

/// A multipart form holding a gzipped pprof profile in its `profile` field, as Pyroscope's
/// agents send pprof to `/ingest`.
pub fn pyroscope_pprof_body(gzipped_pprof: &[u8]) -> Body {
    const BOUNDARY: &str = "tachyon-profile-boundary-7b1c0e";
    let mut bytes = Vec::with_capacity(gzipped_pprof.len() + 256);
    bytes.extend_from_slice(
        format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"profile\"; filename=\"profile.pprof\"\r\nContent-Type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    bytes.extend_from_slice(gzipped_pprof);
    bytes.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    Body { content_type: format!("multipart/form-data; boundary={BOUNDARY}"), encoding: None, bytes }
}

/// Folded stacks for Pyroscope (`format=folded`).
pub fn pyroscope_folded_body(collapsed: Vec<u8>) -> Body {
    Body { content_type: "text/plain".into(), encoding: None, bytes: collapsed }
}

/// A push as a user asks for it.
#[derive(Debug, Clone)]
pub struct PushRequest {
    /// The server.
    pub endpoint: Endpoint,
    /// What it takes.
    pub protocol: Protocol,
    /// Extra headers (authentication: `Authorization: Bearer …`, `X-Scope-OrgID: …`).
    pub headers: Vec<(String, String)>,
    /// OTLP: the resource's `service.name`; Pyroscope: the application name (default:
    /// `unknown_service`).
    pub service_name: Option<String>,
    /// How requests are retried.
    pub retry: Retry,
    /// How inputs are read.
    pub input: InputOptions,
    /// The TLS client of an `https://` endpoint ([`TlsClient::new`]; `None` for `http://`).
    pub tls: Option<TlsClient>,
}

/// Why pushing a file failed.
#[derive(Debug)]
pub enum PushFileError {
    /// The file could not be read or converted.
    Request(RequestError),
    /// The server did not take it.
    Push(PushError),
}

impl fmt::Display for PushFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PushFileError::Request(e) => write!(f, "{e}"),
            PushFileError::Push(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for PushFileError {}

/// The request target and body of `file` for `request`'s server.
pub fn request_for(
    file: &Path,
    request: &PushRequest,
    warn: &mut dyn FnMut(&str),
) -> Result<(String, Body), RequestError> {
    let service = request.service_name.as_deref().unwrap_or(DEFAULT_SERVICE_NAME);
    if request.protocol == Protocol::Otlp {
        let mut convert = ConvertRequest::new(OutputKind::Otlp);
        convert.service_name = Some(service.to_owned());
        convert.input = request.input.clone();
        let mut protobuf = Vec::new();
        convert_file(file, &convert, Destination::Stream(&mut protobuf), Teardown::Free, warn, |_| Box::new(|_| {}))?;
        let body = otlp_body(&protobuf).map_err(|e| RequestError::Usage(format!("encoding the request: {e}")))?;
        return Ok((otlp_target(&request.endpoint), body));
    }
    // Pyroscope takes one aggregate per request: the file folded (threads merged), dated.
    let (to, format) = match request.protocol {
        Protocol::PyroscopePprof => (OutputKind::Pprof, "pprof"),
        _ => (OutputKind::Collapsed, "folded"),
    };
    let mut convert = ConvertRequest::new(to);
    convert.input = request.input.clone();
    let merge = MergeRequest { convert, threads: false, keep_going: false, jobs: 1 };
    let output = merge.output(file)?;
    let mut fold = Fold::new(FoldOptions::default());
    merge.fold_files(&[file.to_owned()], &output, &mut fold, warn, &mut |_| {})?;
    let mut folded = fold.finish().ok_or_else(|| RequestError::Usage(format!("{}: no samples", file.display())))?;
    let mut bytes = Vec::new();
    write_folded(&mut folded, &output, Destination::Stream(&mut bytes), file)?;
    let now_us = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64);
    let info = crate::model::Source::info(&folded);
    let from_us = if info.clock == Clock::Unix { info.start_time_us } else { now_us };
    let until_us = folded.end_unix_us().unwrap_or(from_us).max(from_us);
    let target = pyroscope_target(
        &request.endpoint,
        service,
        from_us / 1_000_000,
        until_us.div_ceil(1_000_000),
        format,
        info.sample_interval_us,
    );
    let body = match request.protocol {
        Protocol::PyroscopePprof => pyroscope_pprof_body(&bytes),
        _ => pyroscope_folded_body(bytes),
    };
    Ok((target, body))
}

/// A file the server took.
#[derive(Debug, Clone)]
pub struct Pushed {
    /// What an OTLP receiver said it rejected of it, if anything.
    pub partial: Option<String>,
    /// It may have been taken twice ([`Delivered::possibly_twice`]).
    pub possibly_twice: bool,
}

/// Pushes `file` as `request` says.
pub fn push_file(
    file: &Path,
    request: &PushRequest,
    warn: &mut dyn FnMut(&str),
    waiting: &mut dyn FnMut(Duration, &str),
) -> Result<Pushed, PushFileError> {
    push_file_with(file, request, warn, waiting, &mut || Ok(()))
}

/// The header every request carries with the name of the file it was made from (its last
/// component; bytes outside visible ASCII, and `%`, as `%XX`), so that a receiver can tell
/// the files of one sender apart.
pub const FILE_HEADER: &str = "X-Tachyon-File";

/// [`push_file`], calling `connected` before each attempt's request is written (see
/// [`send_with`]).
pub fn push_file_with(
    file: &Path,
    request: &PushRequest,
    warn: &mut dyn FnMut(&str),
    waiting: &mut dyn FnMut(Duration, &str),
    connected: &mut dyn FnMut() -> io::Result<()>,
) -> Result<Pushed, PushFileError> {
    let (target, body) = request_for(file, request, warn).map_err(PushFileError::Request)?;
    let mut headers = request.headers.clone();
    headers.push((FILE_HEADER.to_owned(), file_header_value(file)));
    let delivered =
        send_with(&request.endpoint, &target, &headers, &body, request.retry, request.tls.as_ref(), waiting, connected)
            .map_err(PushFileError::Push)?;
    let partial = match request.protocol {
        Protocol::Otlp => otlp_partial_success(&delivered.answer),
        _ => None,
    };
    Ok(Pushed { partial, possibly_twice: delivered.possibly_twice })
}

/// [`FILE_HEADER`]'s value for `file`.
pub fn file_header_value(file: &Path) -> String {
    escape_name(file.file_name().unwrap_or(file.as_os_str()))
}

/// A file name as a header or a state line holds it: bytes outside visible ASCII, and `%`, as
/// `%XX` ([`percent_decode`] gives the bytes back).
pub(crate) fn escape_name(name: &std::ffi::OsStr) -> String {
    use std::os::unix::ffi::OsStrExt;
    percent_encode(name.as_bytes(), |b| b.is_ascii_graphic() && b != b'%')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_percent_takes_two_hex_digits_and_nothing_else() {
        assert_eq!(percent_decode("a%20b%7e").as_deref(), Some(&b"a b~"[..]));
        for bad in ["%+5", "%-1", "% 5", "%2", "%", "%g0"] {
            assert_eq!(percent_decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn queries() {
        let e = Endpoint::parse("http://p:4040").unwrap();
        assert_eq!(
            pyroscope_target(&e, "app{env=prod}", 10, 20, "folded", 10_000),
            "/ingest?name=app%7Benv%3Dprod%7D&from=10&until=20&format=folded&spyName=tachyon&units=samples&aggregationType=sum&sampleRate=100"
        );
    }
}
