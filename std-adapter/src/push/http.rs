//! The HTTP/1.1 client of `tachyon push`: one `POST` a connection (`Connection: close`), every
//! step under a time-out (the name's look-up, connecting, sending, each read), and answers read
//! so that a request the server took is never taken for one it did not.
//!
//! **Sent means a final status line arrived.** Once a `2xx` status line is read, the request
//! counts as taken whatever happens to the headers and body after it (a bad chunk size, a
//! time-out, a cut connection): the answer comes back with what was read and
//! [`Answer::body_error`] saying what went wrong, and the caller does not retry it. Interim
//! `1xx` answers (`100 Continue`, `103 Early Hints`) are skipped, up to
//! [`MAX_INTERIM`] of them; `101 Switching Protocols` is an error (nothing asked to switch).
//!
//! An `https://` endpoint's connection is TLS ([`crate::push::tls`]): the handshake completes
//! before the request is written, and a certificate TLS refuses is [`NotSent::Refused`], which
//! is not retried.
//!
//! Nothing that reaches the request is taken as it is given: the URL's host, port and path
//! and every header are checked for characters that would end a line or a field
//! ([`Endpoint::parse`], [`crate::push::secrets`]), so a value cannot add a header or a
//! request.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::mpsc;
use std::time::Duration;

use crate::push::tls::{Refusal, TlsClient};

/// An `http[s]://host[:port][/base]` endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `https://`: the connection is TLS ([`crate::push::tls`]).
    pub tls: bool,
    /// Host name or address (an IPv6 address without its brackets).
    pub host: String,
    /// Port (80, or 443 for https, when not given).
    pub port: u16,
    /// Path prefix, without a trailing `/` (may be empty).
    pub base: String,
}

/// The URL as it may be shown: scheme, host and port only (a path or query can hold a token,
/// and user information a password).
pub fn shown(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let authority = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let authority: String = authority.chars().filter(|c| !c.is_control()).collect();
    if scheme.is_empty() {
        authority
    } else {
        format!("{scheme}://{authority}")
    }
}

/// A character that may appear in a request target as we send it: visible ASCII but for
/// space (a space or a control character would end the request line).
fn target_char(c: char) -> bool {
    c.is_ascii_graphic()
}

impl Endpoint {
    /// Parses `url` (`http[s]://host[:port][/base]`; `[v6address]` for IPv6). Errors show
    /// the URL only as [`shown`] gives it.
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        let show = shown(url);
        let (tls, rest) = match url.split_once("://") {
            Some(("http", rest)) => (false, rest),
            Some(("https", rest)) => (true, rest),
            _ => return Err(format!("{show}: not an http:// or https:// URL")),
        };
        let default_port = if tls { 443 } else { 80 };
        if !url.chars().all(target_char) {
            return Err(format!("{show}: the URL has a space or a control character"));
        }
        let (authority, base) = match rest.find(['/', '?', '#']) {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        if base.starts_with(['?', '#']) || base.contains('#') {
            return Err(format!("{show}: an endpoint has no query or fragment (the path is added to it)"));
        }
        if authority.contains('@') {
            return Err(format!(
                "{show}: credentials in the URL are not taken (they would show in `ps`); use --basic-auth-file"
            ));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (host, after) = v6.split_once(']').ok_or_else(|| format!("{show}: no `]` after the IPv6 address"))?;
            match after {
                "" => (host, default_port),
                _ => match after.strip_prefix(':') {
                    Some(p) => (host, p.parse().map_err(|_| format!("{show}: bad port {p:?}"))?),
                    None => return Err(format!("{show}: text after the IPv6 address")),
                },
            }
        } else {
            match authority.split_once(':') {
                Some((h, p)) => (h, p.parse().map_err(|_| format!("{show}: bad port {p:?}"))?),
                None => (authority, default_port),
            }
        };
        if host.is_empty() {
            return Err(format!("{show}: no host"));
        }
        if port == 0 {
            return Err(format!("{show}: port 0"));
        }
        Ok(Endpoint { tls, host: host.to_owned(), port, base: base.to_owned() })
    }

    /// The `Host` header's value: an IPv6 address bracketed, as in the URL.
    fn host_header(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// A request's body and how it is described.
#[derive(Debug, Clone)]
pub struct Body {
    /// `Content-Type`.
    pub content_type: String,
    /// `Content-Encoding`, if any.
    pub encoding: Option<&'static str>,
    /// The bytes.
    pub bytes: Vec<u8>,
}

/// A server's final answer.
#[derive(Debug, Clone)]
pub struct Answer {
    /// Status code.
    pub status: u16,
    /// Reason phrase.
    pub reason: String,
    /// `Retry-After`, in seconds, when given as a number.
    pub retry_after: Option<u64>,
    /// The body (at most 1 MiB is read).
    pub body: Vec<u8>,
    /// What went wrong after the status line, if anything (the body is then what was read
    /// before it). The status still counts: a `2xx` is a request taken.
    pub body_error: Option<String>,
}

/// Most of an answer's body that is read.
const MAX_ANSWER: u64 = 1 << 20;
/// Most interim (`1xx`) answers skipped before the final one.
pub const MAX_INTERIM: usize = 8;

/// Why a request got no final answer: nothing of it was taken.
#[derive(Debug)]
pub enum NotSent {
    /// The connection failed before the whole request was written (retried).
    Lost(io::Error),
    /// The whole request was written and no status line came (a time-out, a connection cut):
    /// the server may have taken it, so a retry may send it twice.
    Unanswered(io::Error),
    /// TLS refused the server (retrying would meet the same certificate).
    Refused(String),
}

impl std::fmt::Display for NotSent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotSent::Lost(e) | NotSent::Unanswered(e) => e.fmt(f),
            NotSent::Refused(why) => f.write_str(why),
        }
    }
}

/// The addresses of `host`, looked up in a thread of its own so that the look-up too is
/// bounded by `timeout` (the system resolver has no time-out of its own; a look-up that
/// outlives it finishes in the background and is dropped).
fn resolve(host: &str, port: u16, timeout: Duration) -> io::Result<Vec<SocketAddr>> {
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let (tx, rx) = mpsc::channel();
    let name = host.to_owned();
    std::thread::Builder::new().name("tachyon-dns".into()).spawn(move || {
        let _ = tx.send((name.as_str(), port).to_socket_addrs().map(Iterator::collect));
    })?;
    match rx.recv_timeout(timeout) {
        Ok(result) => result,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("looking up {host} took longer than {} s", timeout.as_secs_f64()),
        )),
    }
}

/// One HTTP/1.1 POST (`Connection: close`), over TLS for an `https://` endpoint (`tls` is
/// then required); the final answer whatever its status. `headers` must have been checked
/// ([`crate::push::secrets`]) and `target` must be visible ASCII (checked here too).
pub fn post(
    endpoint: &Endpoint,
    target: &str,
    headers: &[(String, String)],
    body: &Body,
    timeout: Duration,
    tls: Option<&TlsClient>,
) -> Result<Answer, NotSent> {
    post_with(endpoint, target, headers, body, timeout, tls, &mut || Ok(()))
}

/// [`post`], calling `connected` once the connection is made (and, for TLS, its handshake
/// done), before the first byte of the request is written: from then on the server may take
/// it. An error from `connected` ends the attempt unsent ([`NotSent::Lost`]).
pub fn post_with(
    endpoint: &Endpoint,
    target: &str,
    headers: &[(String, String)],
    body: &Body,
    timeout: Duration,
    tls: Option<&TlsClient>,
    connected: &mut dyn FnMut() -> io::Result<()>,
) -> Result<Answer, NotSent> {
    if !target.chars().all(target_char) {
        return Err(NotSent::Lost(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the request target has a space or a control character",
        )));
    }
    let tls = match (endpoint.tls, tls) {
        (true, None) => return Err(NotSent::Refused("an https:// endpoint needs a TLS client".into())),
        (true, tls) => tls,
        (false, _) => None,
    };
    let addrs = resolve(&endpoint.host, endpoint.port, timeout).map_err(NotSent::Lost)?;
    let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{}: no address", endpoint.host));
    let mut stream = None;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = e,
        }
    }
    let stream = stream.ok_or(last).map_err(NotSent::Lost)?;
    stream.set_read_timeout(Some(timeout)).map_err(NotSent::Lost)?;
    stream.set_write_timeout(Some(timeout)).map_err(NotSent::Lost)?;
    match tls {
        Some(tls) => match tls.connect(&endpoint.host, stream) {
            Ok(stream) => {
                connected().map_err(NotSent::Lost)?;
                exchange(stream, endpoint, target, headers, body, timeout)
            }
            Err(Refusal::Final(why)) => Err(NotSent::Refused(why)),
            Err(Refusal::Retry(e)) => Err(NotSent::Lost(e)),
        },
        None => {
            connected().map_err(NotSent::Lost)?;
            exchange(stream, endpoint, target, headers, body, timeout)
        }
    }
}

/// Writes the request to a connected `stream` and reads the answer.
fn exchange<S: Read + Write>(
    mut stream: S,
    endpoint: &Endpoint,
    target: &str,
    headers: &[(String, String)],
    body: &Body,
    timeout: Duration,
) -> Result<Answer, NotSent> {
    let sent = (|| {
        let mut head = format!(
            "POST {target} HTTP/1.1\r\nHost: {}\r\nUser-Agent: tachyon/{}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
            endpoint.host_header(),
            env!("CARGO_PKG_VERSION"),
            body.content_type,
            body.bytes.len()
        );
        if let Some(e) = body.encoding {
            head.push_str(&format!("Content-Encoding: {e}\r\n"));
        }
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes())?;
        stream.write_all(&body.bytes)?;
        stream.flush()
    })();
    // A server may answer (413, say) and close before taking the whole body: its answer
    // is read even when sending failed.
    let waited = |e: io::Error| match e.kind() {
        // A read or write time-out (Linux says "Resource temporarily unavailable").
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            io::Error::new(io::ErrorKind::TimedOut, format!("no answer within {} s", timeout.as_secs_f64()))
        }
        _ => e,
    };
    match (read_answer(BufReader::new(stream)), sent) {
        (Ok(answer), _) => Ok(answer),
        (Err(e), Ok(())) => Err(NotSent::Unanswered(waited(e))),
        (Err(_), Err(e)) => Err(NotSent::Lost(waited(e))),
    }
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("a malformed HTTP answer: {what}"))
}

/// A status line's code, or why it is not one.
fn status_line(line: &str) -> io::Result<(u16, String)> {
    let mut parts = line.trim_end().splitn(3, ' ');
    let (version, status) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if !version.starts_with("HTTP/") {
        return Err(if line.is_empty() {
            bad("the connection closed before an answer")
        } else {
            bad("no status line")
        });
    }
    let status: u16 = status.parse().ok().filter(|s| (100..600).contains(s)).ok_or_else(|| bad("no status code"))?;
    Ok((status, parts.next().unwrap_or("").to_owned()))
}

/// Reads the final answer: `Err` only if no final status line arrived (the request was not
/// taken); after one, a failure is the answer's [`Answer::body_error`].
pub(crate) fn read_answer(mut r: impl BufRead) -> io::Result<Answer> {
    let mut line = String::new();
    let mut interim = 0;
    let (status, reason) = loop {
        line.clear();
        (&mut r).take(8192).read_line(&mut line)?;
        let (status, reason) = status_line(&line)?;
        if status == 101 {
            return Err(bad("101 Switching Protocols, which nothing asked for"));
        }
        if status >= 200 {
            break (status, reason);
        }
        interim += 1;
        if interim > MAX_INTERIM {
            return Err(bad("more than 8 interim (1xx) answers"));
        }
        // An interim answer's header fields end with an empty line.
        loop {
            line.clear();
            if (&mut r).take(8192).read_line(&mut line)? == 0 || line.trim_end().is_empty() {
                break;
            }
        }
    };
    let mut answer = Answer { status, reason, retry_after: None, body: Vec::new(), body_error: None };
    if let Err(e) = read_rest(&mut r, &mut answer) {
        answer.body_error = Some(e.to_string());
    }
    Ok(answer)
}

/// The header fields and body after a final status line.
fn read_rest(r: &mut impl BufRead, answer: &mut Answer) -> io::Result<()> {
    let mut line = String::new();
    let (mut length, mut chunked) = (None, false);
    for _ in 0..200 {
        line.clear();
        r.take(8192).read_line(&mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            match k.as_str() {
                "content-length" => length = v.parse::<u64>().ok(),
                "transfer-encoding" => chunked = v.eq_ignore_ascii_case("chunked"),
                "retry-after" => answer.retry_after = v.parse().ok(),
                _ => {}
            }
        }
    }
    let body = &mut answer.body;
    if chunked {
        loop {
            line.clear();
            r.take(100).read_line(&mut line)?;
            let size =
                u64::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16).map_err(|_| bad("chunk size"))?;
            if size == 0 || body.len() as u64 >= MAX_ANSWER {
                break;
            }
            r.take(size.min(MAX_ANSWER)).read_to_end(body)?;
            line.clear();
            r.take(2).read_line(&mut line)?;
        }
    } else {
        r.take(length.unwrap_or(MAX_ANSWER).min(MAX_ANSWER)).read_to_end(body)?;
    }
    Ok(())
}

/// What to say of an answer: its reason and body, as text, cut at 4 KiB, with what went wrong
/// after its status line.
pub(crate) fn said(answer: &Answer) -> String {
    let mut body = String::from_utf8_lossy(&answer.body[..answer.body.len().min(4096)]).trim().to_owned();
    if body.is_empty() {
        body = answer.reason.clone();
    } else if !answer.reason.is_empty() {
        body = format!("{} — {body}", answer.reason);
    }
    if let Some(e) = &answer.body_error {
        body = format!("{body} (then: {e})");
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        assert_eq!(
            Endpoint::parse("http://127.0.0.1:4318").unwrap(),
            Endpoint { tls: false, host: "127.0.0.1".into(), port: 4318, base: String::new() }
        );
        assert_eq!(
            Endpoint::parse("http://collector/otel/").unwrap(),
            Endpoint { tls: false, host: "collector".into(), port: 80, base: "/otel".into() }
        );
        assert_eq!(Endpoint::parse("http://[::1]:4040").unwrap().host, "::1");
        // Issue 39: an IPv6 address without a port was refused.
        assert_eq!(
            Endpoint::parse("http://[::1]/").unwrap(),
            Endpoint { tls: false, host: "::1".into(), port: 80, base: String::new() }
        );
        assert_eq!(Endpoint::parse("http://[::1]").unwrap().port, 80);
        assert_eq!(Endpoint::parse("http://[::1]:80").unwrap().host_header(), "[::1]:80");
        assert_eq!(
            Endpoint::parse("https://otlp.example/base").unwrap(),
            Endpoint { tls: true, host: "otlp.example".into(), port: 443, base: "/base".into() }
        );
        assert_eq!(Endpoint::parse("https://[::1]").unwrap().port, 443);
        assert_eq!(Endpoint::parse("https://h:8443").unwrap().port, 8443);
        assert!(Endpoint::parse("ftp://x").is_err());
        assert!(Endpoint::parse("http://x:port").is_err());
        assert!(Endpoint::parse("http://[::1").is_err());
        // A path that would end the request line, or add a header, is refused, and not shown.
        for bad in ["http://h/a b", "http://h/a\r\nX-Evil: 1", "http://h/\0", "http://h:1/p\tq"] {
            let e = Endpoint::parse(bad).unwrap_err();
            assert!(e.contains("space or a control character") && !e.contains("Evil"), "{e}");
        }
        let e = Endpoint::parse("http://user:s3cret@host/").unwrap_err();
        assert!(e.contains("credentials") && !e.contains("s3cret"), "{e}");
        let e = Endpoint::parse("http://host:99999/?token=s3cret").unwrap_err();
        assert!(!e.contains("s3cret"), "{e}");
    }

    #[test]
    fn answers() {
        let a = read_answer(&b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nContent-Length: 4\r\n\r\nslow"[..])
            .unwrap();
        assert_eq!(
            (a.status, a.retry_after, &a.body[..], said(&a).as_str()),
            (429, Some(3), &b"slow"[..], "Too Many Requests — slow")
        );
        let a =
            read_answer(&b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"[..])
                .unwrap();
        assert_eq!(a.body, b"abcde");
        assert!(read_answer(&b"garbage"[..]).is_err());
        assert!(read_answer(&b""[..]).unwrap_err().to_string().contains("closed before an answer"));
    }

    #[test]
    fn a_status_line_is_an_answer_whatever_follows() {
        // Issue 39: a bad chunk size after `200 OK` made the request fail, and be sent again.
        let a = read_answer(&b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"[..]).unwrap();
        assert_eq!(a.status, 200);
        assert!(a.body_error.as_deref().unwrap().contains("chunk size"));
        // Cut inside the header fields.
        let a = read_answer(&b"HTTP/1.1 202 Accepted\r\nContent-Le"[..]).unwrap();
        assert_eq!((a.status, a.body_error), (202, None));
        // Interim answers are skipped, with their fields.
        let a = read_answer(
            &b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"[..],
        )
        .unwrap();
        assert_eq!((a.status, &a.body[..]), (200, &b"ok"[..]));
        // Interim answers only: no final answer, not sent.
        assert!(read_answer(&b"HTTP/1.1 100 Continue\r\n\r\n"[..]).is_err());
        assert!(read_answer(&b"HTTP/1.1 101 Switching Protocols\r\n\r\n"[..]).is_err());
        let many = "HTTP/1.1 100 Continue\r\n\r\n".repeat(9) + "HTTP/1.1 200 OK\r\n\r\n";
        assert!(read_answer(many.as_bytes()).is_err());
    }

    #[test]
    fn shown_urls_keep_no_secret() {
        assert_eq!(shown("http://u:pw@h:1/p?token=x"), "http://h:1");
        assert_eq!(shown("http://h/a\r\nb"), "http://h");
    }
}
