//! `tachyon push` against loopback servers that misbehave on purpose: a request whose `2xx`
//! status line arrived is never sent again whatever follows it; interim `1xx` answers are
//! skipped; a server that never answers is given up on after `--timeout`, the file named;
//! a header that would add another is refused with exit 2; and no secret — from
//! `--basic-auth-file`, `-H @FILE` or the environment — appears in anything the command
//! prints, even when the server echoes the request's headers back.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use assert_cmd::Command;
use tachyon::push::{send, Body, Endpoint, PushError, Retry};
use tachyon_test_kit::fixtures;

/// A loopback server answering every connection with `answer(request)`, counting them.
struct Server {
    endpoint: String,
    connections: Arc<AtomicUsize>,
}

/// The request's head (request line and header fields) and body, read whole.
fn read_request(stream: &mut TcpStream) -> String {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut head = String::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        head.push_str(&line);
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    head
}

fn serve(answer: impl Fn(&str) -> Vec<u8> + Send + Sync + 'static, hold: Duration) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let connections = Arc::new(AtomicUsize::new(0));
    let count = connections.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            count.fetch_add(1, Ordering::SeqCst);
            let head = read_request(&mut stream);
            let _ = stream.write_all(&answer(&head));
            let _ = stream.flush();
            std::thread::sleep(hold);
        }
    });
    Server { endpoint, connections }
}

fn body() -> Body {
    Body { content_type: "application/x-protobuf".into(), encoding: None, bytes: b"profile".to_vec() }
}

fn retry(timeout: Duration) -> Retry {
    Retry { attempts: 3, first_wait: Duration::from_millis(10), timeout }
}

#[test]
fn a_2xx_whose_body_breaks_is_sent_once() {
    // Issue 39: a chunk size that is not hex after `200 OK` got the file three times.
    let server =
        serve(|_| b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nnot-hex\r\n".to_vec(), Duration::ZERO);
    let endpoint = Endpoint::parse(&server.endpoint).unwrap();
    let answer =
        send(&endpoint, "/v1development/profiles", &[], &body(), retry(Duration::from_secs(10)), None, &mut |_, _| {})
            .expect("a 200 status line is an answer");
    assert_eq!((answer.answer.status, answer.possibly_twice), (200, false));
    assert!(answer.answer.body_error.is_some());
    assert_eq!(server.connections.load(Ordering::SeqCst), 1);
}

#[test]
fn a_100_continue_then_200_counts_as_sent() {
    let server = serve(
        |_| b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_vec(),
        Duration::ZERO,
    );
    let endpoint = Endpoint::parse(&server.endpoint).unwrap();
    let answer =
        send(&endpoint, "/v1development/profiles", &[], &body(), retry(Duration::from_secs(10)), None, &mut |_, _| {})
            .unwrap();
    assert_eq!((answer.answer.status, server.connections.load(Ordering::SeqCst)), (200, 1));
}

#[test]
fn a_5xx_is_retried_and_a_cut_before_the_status_line_too() {
    let server = serve(|_| b"HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n".to_vec(), Duration::ZERO);
    let endpoint = Endpoint::parse(&server.endpoint).unwrap();
    let err = send(&endpoint, "/p", &[], &body(), retry(Duration::from_secs(10)), None, &mut |_, _| {}).unwrap_err();
    assert!(matches!(err, PushError::GaveUp { attempts: 3, possibly_taken: false, .. }), "{err}");
    assert_eq!(server.connections.load(Ordering::SeqCst), 3);
    let server = serve(|_| b"HTTP/1.1 2".to_vec(), Duration::ZERO);
    let endpoint = Endpoint::parse(&server.endpoint).unwrap();
    let err = send(&endpoint, "/p", &[], &body(), retry(Duration::from_secs(10)), None, &mut |_, _| {}).unwrap_err();
    assert_eq!(server.connections.load(Ordering::SeqCst), 3, "no status line: not taken, so sent again");
    // The request went out whole each time: the server may have taken it, and says so.
    assert!(matches!(err, PushError::GaveUp { possibly_taken: true, .. }), "{err}");
}

fn tachyon() -> Command {
    Command::cargo_bin("tachyon").unwrap()
}

fn profile() -> std::path::PathBuf {
    fixtures::root().join("examples/stdlib_work.pyb")
}

#[test]
fn a_server_that_never_answers_is_given_up_after_the_timeout_naming_the_file() {
    let server = serve(|_| Vec::new(), Duration::from_secs(30));
    let started = Instant::now();
    let out = tachyon()
        .args(["push", "--endpoint", &server.endpoint, "--timeout", "1", "--attempts", "1", "-q"])
        .arg(profile())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("stdlib_work.pyb") && stderr.contains("no answer within 1 s"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn headers_that_would_add_a_header_are_refused_with_exit_2() {
    let out = tachyon()
        .args(["push", "--endpoint", "http://127.0.0.1:9", "-H", "X-Tenant: a\r\nX-Evil: 1"])
        .arg(profile())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("X-Tenant") && stderr.contains("control character") && !stderr.contains("Evil"),
        "{stderr}"
    );
    let out = tachyon().args(["push", "--endpoint", "http://127.0.0.1:9/a b"]).arg(profile()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn no_secret_is_printed_on_any_path() {
    let dir = std::env::temp_dir().join(format!("tachyon-push-secrets-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (user, password, bearer, env_key) = ("instance-4711", "pw-Secret-aa11", "tok-Secret-bb22", "env-Secret-cc33");
    std::fs::write(dir.join("auth"), format!("{user}:{password}\n")).unwrap();
    std::fs::write(dir.join("headers"), format!("# a header file\nAuthorization2: Bearer {bearer}\n")).unwrap();
    // What a server that echoes the request's head shows back: the base64 of the basic
    // credentials too.
    let echo = |status: &'static str| {
        move |head: &str| format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n\r\n{head}", head.len()).into_bytes()
    };
    let refusing = serve(echo("401 Unauthorized"), Duration::ZERO);
    let failing = serve(echo("500 Oops"), Duration::ZERO);
    let silent = serve(|_| Vec::new(), Duration::from_secs(30));
    let basic = tachyon::push::basic_auth(&format!("{user}:{password}")).1;
    let secrets = [password, bearer, env_key, basic.trim_start_matches("Basic ")];
    let endpoints =
        [refusing.endpoint.clone(), failing.endpoint.clone(), silent.endpoint.clone(), "http://127.0.0.1:9".into()];
    for endpoint in &endpoints {
        for verbose in [false, true] {
            let mut cmd = tachyon();
            cmd.args(["push", "--endpoint", endpoint, "--timeout", "1", "--attempts", "2", "--retry-wait-ms", "10"])
                .arg("--basic-auth-file")
                .arg(dir.join("auth"))
                .arg("-H")
                .arg(format!("@{}", dir.join("headers").display()))
                .env("OTEL_EXPORTER_OTLP_HEADERS", format!("api-key={env_key}"))
                .arg(profile());
            if !verbose {
                cmd.arg("-q");
            }
            let out = cmd.output().unwrap();
            let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert_eq!(out.status.code(), Some(1), "{endpoint}: {all}");
            for secret in secrets {
                assert!(!all.contains(secret), "{endpoint}: a secret was printed: {all}");
            }
        }
    }
    // The echo reached the server: the headers were sent (and then kept out of the output).
    assert!(refusing.connections.load(Ordering::SeqCst) >= 2);
    // A bad line in the header file, with a secret on it: exit 2, the secret not shown.
    std::fs::write(dir.join("bad"), format!("X-Key {bearer}\n")).unwrap();
    let out = tachyon()
        .args(["push", "--endpoint", "http://127.0.0.1:9", "-H"])
        .arg(format!("@{}", dir.join("bad").display()))
        .arg(profile())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("line 1 of") && !stderr.contains(bearer), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `push --follow` with `--exit-after-idle`: a complete Tachyon file is sent, one still being
/// written (its 64 zero bytes) is waited for, a second run sends nothing again, and a file an
/// earlier follower began without recording the answer is sent again and logged as possibly
/// sent twice. The options that belong to `--follow` are refused without it.
#[test]
fn follow_sends_complete_files_once_and_names_the_possible_repeat() {
    let server = serve(|_| b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_vec(), Duration::ZERO);
    let dir = std::env::temp_dir().join(format!("tachyon-push-follow-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(profile(), dir.join("a.pyb")).unwrap();
    std::fs::write(dir.join("b.pyb"), [0u8; 64]).unwrap();
    let follow = |dir: &std::path::Path| {
        let out = tachyon()
            .args(["push", "--endpoint", &server.endpoint, "--poll-ms", "20", "--exit-after-idle", "0.3", "--follow"])
            .arg(dir)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stderr).unwrap()
    };
    let said = follow(&dir);
    assert!(said.contains("sent ") && said.contains("a.pyb") && !said.contains("b.pyb"), "{said}");
    assert_eq!(server.connections.load(Ordering::SeqCst), 1);
    assert!(follow(&dir).is_empty());
    assert_eq!(server.connections.load(Ordering::SeqCst), 1, "sent once");
    // A follower killed between its request and recording the answer left `begin`.
    let c = dir.join("c.pyb");
    std::fs::copy(profile(), &c).unwrap();
    let meta = std::fs::metadata(&c).unwrap();
    let mtime_ns = meta.modified().unwrap().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let state = dir.join(".tachyon-push-state");
    let mut log = std::fs::read_to_string(&state).unwrap();
    log.push_str(&format!("begin {} {mtime_ns} c.pyb\n", meta.len()));
    std::fs::write(&state, log).unwrap();
    let said = follow(&dir);
    assert!(said.contains("c.pyb: possibly sent twice"), "{said}");
    assert_eq!(server.connections.load(Ordering::SeqCst), 2);
    for args in [&["--state", "s"][..], &["--after-send", "delete"], &["--exit-after-idle", "1"]] {
        let out = tachyon().args(["push", "--endpoint", &server.endpoint]).args(args).arg(profile()).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// More files than one scan sends (`MAX_READY`, 256) on a slow server: the time spent
/// sending is not idle time, so `--exit-after-idle` shorter than a scan's sending still lets
/// the follower send every file (it left the rest unsent, exiting after the first 256, when
/// a loaded machine made sending them take longer than the idle time).
#[test]
fn exit_after_idle_counts_from_the_last_file_sent_not_from_the_scan() {
    let server = serve(|_| b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_vec(), Duration::from_millis(3));
    let dir = std::env::temp_dir().join(format!("tachyon-push-follow-idle-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let n = tachyon::push::follow::MAX_READY + 44;
    for i in 0..n {
        std::fs::copy(profile(), dir.join(format!("p-{i:04}.pyb"))).unwrap();
    }
    let out = tachyon()
        .args(["push", "--endpoint", &server.endpoint, "--poll-ms", "20", "--exit-after-idle", "0.2", "--follow"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(server.connections.load(Ordering::SeqCst), n, "every file sent");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A server whose `n`-th connection (from 0) gets `answer(n)`; the requests' heads kept.
fn serve_scripted(
    answer: impl Fn(usize) -> &'static str + Send + Sync + 'static,
) -> (Server, Arc<std::sync::Mutex<Vec<String>>>) {
    let heads = Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = heads.clone();
    let n = Arc::new(AtomicUsize::new(0));
    let server = serve(
        move |head| {
            kept.lock().unwrap().push(head.to_owned());
            let i = n.fetch_add(1, Ordering::SeqCst);
            format!("HTTP/1.1 {}\r\nContent-Length: 0\r\n\r\n", answer(i)).into_bytes()
        },
        Duration::ZERO,
    );
    (server, heads)
}

fn follow_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tachyon-push-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A follower's arguments: quick polls, quick retries, exit once idle.
fn follower(endpoint: &str, dir: &std::path::Path) -> Command {
    let mut c = tachyon();
    c.args(["push", "--endpoint", endpoint, "--poll-ms", "20", "--retry-wait-ms", "10", "--exit-after-idle", "0.5"])
        .arg("--follow")
        .arg(dir);
    c
}

/// With --quiet and --log FILE, a server's outage still logs every retry (to the file, each
/// line stamped with its UTC time), and every request names its file in `X-Tachyon-File`.
#[test]
fn follow_logs_retries_when_quiet_and_requests_name_their_file() {
    let (server, heads) = serve_scripted(|i| if i < 2 { "503 Service Unavailable" } else { "200 OK" });
    let dir = follow_dir("quiet");
    std::fs::copy(profile(), dir.join("a b%.pyb")).unwrap();
    let log = dir.join(".log");
    let out = follower(&server.endpoint, &dir).arg("--quiet").arg("--log").arg(&log).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    let logged = std::fs::read_to_string(&log).unwrap();
    let retries: Vec<&str> = logged.lines().filter(|l| l.contains("503") && l.contains("trying again in")).collect();
    assert_eq!(retries.len(), 2, "{logged}");
    for line in logged.lines() {
        let (time, rest) = line.split_once(' ').unwrap();
        assert!(time.len() == 24 && time.starts_with("20") && time.ends_with('Z'), "{line}");
        assert!(rest.starts_with("tachyon: "), "{line}");
    }
    assert!(!logged.contains("sent "), "--quiet leaves out the files sent: {logged}");
    let heads = heads.lock().unwrap();
    assert_eq!(heads.len(), 3);
    for head in heads.iter() {
        assert!(head.contains("\r\nX-Tachyon-File: a%20b%25.pyb\r\n"), "{head}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A follower killed while it could not connect recorded no request, so the next one sends
/// the file without calling it a possible repeat; a second follower on a folder another holds
/// stops at once, saying so.
#[test]
fn a_follower_killed_before_connecting_leaves_no_possible_repeat_and_one_folder_has_one_follower() {
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let nowhere = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let dir = follow_dir("killed");
    std::fs::copy(profile(), dir.join("x.pyb")).unwrap();
    let mut first = std::process::Command::new(assert_cmd::cargo::cargo_bin("tachyon"))
        .args([
            "push",
            "--endpoint",
            &nowhere,
            "--poll-ms",
            "20",
            "--retry-wait-ms",
            "20",
            "--timeout",
            "1",
            "--follow",
        ])
        .arg(&dir)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The state is written at start; then the follower only fails to connect.
    let state = dir.join(".tachyon-push-state");
    let began = Instant::now();
    while !state.exists() && began.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    let second = follower(&nowhere, &dir).output().unwrap();
    let said = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{said}");
    assert!(said.contains("another tachyon push --follow holds this folder"), "{said}");
    first.kill().unwrap(); // SIGKILL
    first.wait().unwrap();
    let state_log = std::fs::read_to_string(&state).unwrap();
    assert!(!state_log.contains("x.pyb"), "{state_log}");
    let (server, _) = serve_scripted(|_| "200 OK");
    let out = follower(&server.endpoint, &dir).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("sent ") && !said.contains("possibly sent twice"), "{said}");
    assert_eq!(server.connections.load(Ordering::SeqCst), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--after-send move:DIR` never replaces a file there (the moved one gets `.1`, and the
/// warning says where); a file refused with 401 is sent after `--retry-refused`, and not
/// before.
#[test]
fn move_never_overwrites_and_a_refused_file_is_sent_again_when_asked() {
    let (server, _) = serve_scripted(|i| if i == 0 { "401 Unauthorized" } else { "200 OK" });
    let dir = follow_dir("move");
    let sent = dir.join("sent");
    std::fs::create_dir_all(&sent).unwrap();
    std::fs::write(sent.join("d.pyb"), b"old").unwrap();
    std::fs::copy(profile(), dir.join("d.pyb")).unwrap();
    let after = format!("move:{}", sent.display());
    let run = |extra: &[&str]| {
        let out = follower(&server.endpoint, &dir).args(["--after-send", &after]).args(extra).output().unwrap();
        let said = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(0), "{said}");
        said
    };
    let said = run(&[]);
    assert!(said.contains("d.pyb: not sent: the server refused it (401)"), "{said}");
    assert!(run(&[]).is_empty(), "a refused file stays refused");
    assert_eq!(server.connections.load(Ordering::SeqCst), 1);
    let said = run(&["--retry-refused"]);
    assert!(said.contains("1 files refused before will be tried again"), "{said}");
    assert!(said.contains("was taken, so it was moved to") && said.contains("d.pyb.1"), "{said}");
    assert_eq!(server.connections.load(Ordering::SeqCst), 2);
    assert_eq!(std::fs::read(sent.join("d.pyb")).unwrap(), b"old");
    assert_eq!(std::fs::read(sent.join("d.pyb.1")).unwrap(), std::fs::read(profile()).unwrap());
    assert!(!dir.join("d.pyb").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}
