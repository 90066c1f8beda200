//! `tachyon push --follow DIR`: a sender that runs beside a directory that profiles keep
//! arriving in (the rotated periods of a capture-path writer, or any tool's output), for days.
//!
//! **A file is sent when it is complete.** A Tachyon file is complete when it starts with
//! Tachyon's magic: writers (CPython's, ours) write 64 zero bytes first and the header last,
//! after the tables, so the magic appears only once the rest is there; a journaled period
//! is a framed stream (`TCHF` in its first bytes) until its writer replaces it by the Tachyon
//! file, renamed over it whole. Files starting with 64 zero bytes or a stream are waited
//! for. Any other file is complete once its size and modification time have not changed for
//! [`FollowOptions::settle`] (tools that write in one go, or write and rename, are complete at
//! once; one that pauses longer than that mid-file is not supported). Names starting with `.`
//! and ending in `.tmp`, `.part` or `.receiving` are never read (files being written under a
//! temporary name).
//!
//! **One follower per folder.** A follower holds a lock on the folder (`flock`, released by
//! the kernel when it exits or is killed); a second one on the same folder stops at once,
//! saying another holds it.
//!
//! **Once, across restarts.** The state file (by default `DIR/.tachyon-push-state`) is a log
//! of one line per event, each synced to disk before the next step: `begin` once a file's
//! first request has its connection and before its first byte is written, `sent` once a `2xx`
//! status line arrived, `refused` for a file the server or the reader refused. A file is
//! known by its name, size and modification time: a file written again under the same name
//! is a new file. After a restart (a crash, `SIGKILL`),
//! a file with `sent` is not sent again (only what `--after-send` says is done, if it had not
//! been); a file with `begin` and no `sent` is sent again and, whenever that is taken (the
//! server may be down at first), **logged as possibly sent twice**: the follower stopped
//! between starting to write its request and recording the answer, and no OTLP server can
//! tell a repeat. That window is one request's round trip and one `fsync`; a follower stopped
//! before a request's connection was made recorded nothing, and its file is sent again
//! without the warning. A request written whole that got no answer (a time-out, a connection
//! cut after sending) is retried and logged the same way. Nothing else is sent twice.
//!
//! **The server down.** A file the server did not take (connection refused, 5xx, 429, time-out,
//! TLS refusal) stays first in line: the follower waits, doubling from
//! [`FollowOptions::first_wait`] to a minute, and tries it again; the files behind it wait in
//! name order (periods' names sort by sequence). Each retry is logged. A 4xx other than 429,
//! or a file that cannot be read, is logged and recorded as refused, and the follower goes
//! on; [`forget_refused`] (`--retry-refused`) makes the next follower try them again, as does
//! writing the file again (a new modification time is a new file).
//!
//! **After sending**, `move:DIR` moves the file into DIR, which is checked (made if missing)
//! before anything is sent: on the same file system by a hard link and an unlink, elsewhere
//! by a copy, synced, and an unlink. It never replaces a file there: a taken name gets `.1`,
//! `.2` … appended, and the warning says so.
//!
//! **Memory** holds one entry per file present in the directory that the state knows (name,
//! size, time, state: about a hundred bytes) and nothing per file sent and gone; a scan takes
//! at most [`MAX_READY`] files to send, the earliest names, and the next scan the rest. The
//! state file is rewritten without the entries of files no longer there when it has grown
//! past twice the live entries and a thousand lines (and at start).

use std::collections::{BinaryHeap, HashMap};
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use tachyon_core::kind::FileKind;

use crate::push::{
    escape_name, percent_decode, push_file_with, PushError, PushFileError, PushRequest, Retry, UNANSWERED,
};

/// What is done with a file the server took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterSend {
    /// Left where it is (the state file remembers it).
    Keep,
    /// Removed.
    Delete,
    /// Renamed into this folder (on the same file system).
    Move(PathBuf),
}

impl AfterSend {
    /// `keep`, `delete` or `move:DIR`.
    pub fn parse(s: &str) -> Result<AfterSend, String> {
        match s {
            "keep" => Ok(AfterSend::Keep),
            "delete" => Ok(AfterSend::Delete),
            _ => match s.strip_prefix("move:") {
                Some(dir) if !dir.is_empty() => Ok(AfterSend::Move(PathBuf::from(dir))),
                _ => Err(format!("--after-send {s}: keep, delete or move:DIR")),
            },
        }
    }
}

/// How a follower runs.
#[derive(Debug, Clone)]
pub struct FollowOptions {
    /// The directory followed (not its subdirectories).
    pub dir: PathBuf,
    /// The state file.
    pub state: PathBuf,
    /// What is done with a sent file.
    pub after_send: AfterSend,
    /// How long a file that is not Tachyon must stay unchanged to be complete.
    pub settle: Duration,
    /// How often the directory is looked at.
    pub poll: Duration,
    /// First wait after the server did not take a file (doubled each time, at most a minute).
    pub first_wait: Duration,
    /// Stop (successfully) once nothing was sent, waited for or pending for this long: for a
    /// run from cron, and for tests. `None`: run until killed.
    pub exit_after_idle: Option<Duration>,
}

impl FollowOptions {
    /// Defaults for `dir`: state `DIR/.tachyon-push-state`, keep sent files, settle 2 s, poll
    /// 1 s, first wait 1 s, never exit.
    pub fn new(dir: &Path) -> FollowOptions {
        FollowOptions {
            dir: dir.to_path_buf(),
            state: dir.join(STATE_NAME),
            after_send: AfterSend::Keep,
            settle: Duration::from_secs(2),
            poll: Duration::from_secs(1),
            first_wait: Duration::from_secs(1),
            exit_after_idle: None,
        }
    }
}

/// The state file's default name, in the followed directory.
pub const STATE_NAME: &str = ".tachyon-push-state";

/// What a follower tells its user.
#[derive(Debug)]
pub enum Event<'a> {
    /// A file was taken (`partial`: what the server said it rejected of it).
    Sent {
        /// The file.
        file: &'a Path,
        /// An OTLP partial success.
        partial: Option<&'a str>,
    },
    /// A file was taken and may have been taken before (see the module's docs).
    PossiblySentTwice {
        /// The file.
        file: &'a Path,
        /// Why.
        why: &'a str,
    },
    /// A file was refused by the server or could not be read; it is not tried again unless
    /// it changes.
    Refused {
        /// The file.
        file: &'a Path,
        /// Why.
        why: &'a str,
    },
    /// The server did not take a file; it is tried again after `wait`.
    Waiting {
        /// The file.
        file: &'a Path,
        /// Why.
        why: &'a str,
        /// How long.
        wait: Duration,
    },
    /// Something the follower could not do but goes on without (an after-send move, a scan).
    Warning(&'a str),
}

/// Why a follower stopped.
#[derive(Debug)]
pub enum FollowError {
    /// The state file could not be read or written (the follower cannot promise anything
    /// without it).
    State(PathBuf, io::Error),
    /// The state file holds a line that is not the follower's (line number, from 1).
    StateLine(PathBuf, usize),
    /// The directory could not be read.
    Dir(PathBuf, io::Error),
}

impl std::fmt::Display for FollowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FollowError::State(p, e) => write!(f, "{}: the state file: {e}", p.display()),
            FollowError::StateLine(p, n) => write!(f, "{}: line {n} is not a state record", p.display()),
            FollowError::Dir(p, e) => write!(f, "{}: {e}", p.display()),
        }
    }
}

impl std::error::Error for FollowError {}

/// A file as the state knows it: size and modification time (ns since the Unix epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Version {
    len: u64,
    mtime_ns: i64,
}

impl Version {
    fn of(meta: &fs::Metadata) -> Version {
        let mtime_ns = match meta.modified().map(|t| t.duration_since(SystemTime::UNIX_EPOCH)) {
            // i64 nanoseconds reach the year 2262.
            Ok(Ok(d)) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
            Ok(Err(before)) => i64::try_from(before.duration().as_nanos()).map_or(i64::MIN, |ns| -ns),
            Err(_) => 0,
        };
        Version { len: meta.len(), mtime_ns }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Begun,
    Sent,
    Refused,
}

impl Status {
    fn word(self) -> &'static str {
        match self {
            Status::Begun => "begin",
            Status::Sent => "sent",
            Status::Refused => "refused",
        }
    }
}

/// Longest state line read (a name is at most a few hundred bytes, escaped three times).
const MAX_LINE: u64 = 16 * 1024;

/// A name's latest record, and the scan that last saw its file (small: one per file kept).
#[derive(Debug, Clone, Copy)]
struct Entry {
    status: Status,
    seen: u32,
    version: Version,
}

/// The state: the log on disk and, in memory, the latest record of each file present.
struct State {
    path: PathBuf,
    log: File,
    entries: HashMap<Box<OsStr>, Entry>,
    lines: usize,
    /// Files whose request may already have reached the server, and why: an earlier
    /// follower began them and recorded no answer, or a request of this run went out whole
    /// unanswered. Logged as possibly sent twice when taken; kept until then.
    possibly_taken: HashMap<Box<OsStr>, (Version, &'static str)>,
    /// The current scan of the directory (entries it did not see are dropped at its end).
    scan: u32,
}

fn unescape(s: &str) -> Option<OsString> {
    use std::os::unix::ffi::OsStringExt;
    percent_decode(s).map(OsString::from_vec)
}

/// A state line (without its newline); [`parse_line`] reads it back.
fn state_line(name: &OsStr, status: Status, v: Version) -> String {
    format!("{} {} {} {}", status.word(), v.len, v.mtime_ns, escape_name(name))
}

fn parse_line(line: &str) -> Option<(OsString, Status, Version)> {
    let mut parts = line.split(' ');
    let status = match parts.next()? {
        "begin" => Status::Begun,
        "sent" => Status::Sent,
        "refused" => Status::Refused,
        _ => return None,
    };
    let len = parts.next()?.parse().ok()?;
    let mtime_ns = parts.next()?.parse().ok()?;
    let name = unescape(parts.next()?)?;
    if parts.next().is_some() || name.is_empty() {
        return None;
    }
    Some((name, status, Version { len, mtime_ns }))
}

const HEADER: &str = "tachyon push --follow state 1\n";

/// Why a file may have been taken before: a follower before this one was stopped in between.
const AFTER_RESTART: &str = "a follower before this one stopped after sending it, before recording the answer";

impl State {
    /// Reads the log at `path` (a torn last line, from a kill mid-write, is dropped) and opens
    /// it for appending.
    fn open(path: &Path) -> Result<State, FollowError> {
        let err = |e| FollowError::State(path.to_path_buf(), e);
        let mut entries = HashMap::new();
        let mut lines = 0;
        match File::open(path) {
            Ok(f) => {
                let mut r = BufReader::new(f);
                let mut line = String::new();
                loop {
                    line.clear();
                    let n = (&mut r).take(MAX_LINE).read_line(&mut line).map_err(err)?;
                    if n == 0 || !line.ends_with('\n') {
                        break; // the end, or a line torn by a kill
                    }
                    lines += 1;
                    if lines == 1 && line == HEADER {
                        continue;
                    }
                    let (name, status, version) = parse_line(line.trim_end_matches('\n'))
                        .ok_or_else(|| FollowError::StateLine(path.to_path_buf(), lines))?;
                    entries.insert(name.into_boxed_os_str(), Entry { status, version, seen: 0 });
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(err(e)),
        }
        let possibly_taken = entries
            .iter()
            .filter(|(_, e)| e.status == Status::Begun)
            .map(|(n, e)| (n.clone(), (e.version, AFTER_RESTART)))
            .collect();
        // Rewritten at once: drops a torn line, and starts the log from what is known.
        let log = write_log(path, &entries).map_err(err)?;
        let lines = entries.len() + 1;
        Ok(State { path: path.to_path_buf(), log, entries, lines, possibly_taken, scan: 0 })
    }

    fn get(&self, name: &OsStr) -> Option<(Status, Version)> {
        self.entries.get(name).map(|e| (e.status, e.version))
    }

    /// A scan of the directory begins.
    fn begin_scan(&mut self) {
        self.scan = self.scan.wrapping_add(1);
    }

    /// The scan found a file of this name.
    fn saw(&mut self, name: &OsStr) {
        if let Some(e) = self.entries.get_mut(name) {
            e.seen = self.scan;
        }
    }

    /// The scan ended: what it did not see is forgotten (the log too, when it has grown well
    /// past what is left, or `always`).
    fn end_scan(&mut self, always: bool) -> io::Result<()> {
        let scan = self.scan;
        self.entries.retain(|_, e| e.seen == scan);
        let entries = &self.entries;
        self.possibly_taken.retain(|name, _| entries.contains_key(name));
        if always || self.lines > 2 * self.entries.len() + 1024 {
            self.rewrite()?;
        }
        Ok(())
    }

    /// Appends a record and syncs it: once this returns, a restart knows it.
    fn record(&mut self, name: &OsStr, status: Status, v: Version) -> Result<(), FollowError> {
        let line = state_line(name, status, v) + "\n";
        self.log
            .write_all(line.as_bytes())
            .and_then(|()| self.log.sync_data())
            .map_err(|e| FollowError::State(self.path.clone(), e))?;
        self.entries.insert(name.into(), Entry { status, version: v, seen: self.scan });
        self.lines += 1;
        Ok(())
    }

    /// Writes the entries as a new log (see [`write_log`]).
    fn rewrite(&mut self) -> io::Result<()> {
        self.log = write_log(&self.path, &self.entries)?;
        self.lines = self.entries.len() + 1;
        Ok(())
    }
}

/// Writes `entries` to a new log beside `path`, syncs it and renames it over the old one (a
/// crash leaves one or the other); the new log, open for appending.
fn write_log(path: &Path, entries: &HashMap<Box<OsStr>, Entry>) -> io::Result<File> {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".new");
    let beside = path.with_file_name(name);
    let mut out = io::BufWriter::new(File::create(&beside)?);
    out.write_all(HEADER.as_bytes())?;
    for (name, e) in entries {
        writeln!(out, "{}", state_line(name, e.status, e.version))?;
    }
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    fs::rename(&beside, path)?;
    if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        let _ = File::open(folder).and_then(|f| f.sync_all());
    }
    OpenOptions::new().append(true).open(path)
}

/// What the first bytes of a file say about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Looks {
    /// A Tachyon file with its header: complete.
    Complete,
    /// Empty, a Tachyon file without its header yet, or a framed stream.
    InProgress,
    /// Anything else: complete once it settles.
    Other,
}

/// What the first bytes of `path` say, and the version of the file they were read from: its
/// size and time taken from the open file after the read, so a header that landed after the
/// listing is sent under the version the next listing will see (not sent again as a new one).
fn looks(path: &Path) -> io::Result<(Looks, Version)> {
    let mut head = [0u8; 64];
    let mut f = File::open(path)?;
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..])? {
            0 => break,
            k => n += k,
        }
    }
    // A write updates the time before its bytes can be read: this version is no older than
    // the bytes above.
    let version = Version::of(&f.metadata()?);
    let head = &head[..n];
    let looks = if head.is_empty() {
        Looks::InProgress
    } else if FileKind::detect(head) == FileKind::Tachyon {
        Looks::Complete
    } else if (n == 64 && head.iter().all(|&b| b == 0)) || head[..n.min(16)].windows(4).any(|w| w == b"TCHF") {
        Looks::InProgress
    } else {
        Looks::Other
    };
    Ok((looks, version))
}

/// A name the follower never reads: hidden, or a temporary name.
fn ignored(name: &OsStr) -> bool {
    let name = name.to_string_lossy();
    name.starts_with('.') || [".tmp", ".part", ".receiving"].iter().any(|s| name.ends_with(s))
}

/// Files that are not Tachyon: the version first seen, since when, and the last scan that
/// saw it.
type Settling = HashMap<OsString, (Version, Instant, u32)>;

/// What a scan makes of one file it listed.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Recorded as sent, in this version.
    Sent,
    /// Recorded as refused in this version, or unreadable now (gone since the listing).
    Passed,
    /// Not complete yet; `settling` while a file that is not Tachyon waits to settle.
    Waiting { settling: bool },
    /// Complete: to be sent as this version.
    Ready(Version),
}

/// Decides what to do with the file `name` at `path` that the scan listed as `listed`. The
/// version sent is the one read with its first bytes, not the listing's: a writer may put
/// the header in between, and the next scan must see the version that was sent.
fn consider(
    state: &mut State,
    settling: &mut Settling,
    path: &Path,
    name: &OsStr,
    listed: &fs::Metadata,
    settle: Duration,
) -> Verdict {
    state.saw(name);
    let known = |state: &State, version: Version| match state.get(name) {
        Some((Status::Sent, v)) if v == version => Some(Verdict::Sent),
        Some((Status::Refused, v)) if v == version => Some(Verdict::Passed),
        _ => None,
    };
    let listed = Version::of(listed);
    if let Some(verdict) = known(state, listed) {
        return verdict;
    }
    let Ok((looks, version)) = looks(path) else { return Verdict::Passed };
    if version != listed {
        if let Some(verdict) = known(state, version) {
            return verdict;
        }
    }
    match looks {
        Looks::Complete => Verdict::Ready(version),
        Looks::InProgress => {
            settling.remove(name);
            Verdict::Waiting { settling: false }
        }
        Looks::Other => {
            // Unchanged since when (a new or changed file: since now).
            let scan = state.scan;
            let since = match settling.get_mut(name) {
                Some((v, since, seen)) if *v == version => {
                    *seen = scan;
                    *since
                }
                _ => {
                    let now = Instant::now();
                    settling.insert(name.to_os_string(), (version, now, scan));
                    now
                }
            };
            if since.elapsed() >= settle {
                Verdict::Ready(version)
            } else {
                Verdict::Waiting { settling: true }
            }
        }
    }
}

/// A file the scan found, not yet taken (ordered by name).
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Candidate {
    name: OsString,
    version: Version,
}

/// Most files one scan takes to send: the earliest names (the next scan takes the rest), so
/// memory does not grow with a backlog.
pub const MAX_READY: usize = 256;

/// Follows `options.dir`, sending each complete file as `request` says, until an error of
/// its own (the state file, the directory) or, with [`FollowOptions::exit_after_idle`], until
/// idle. Every event goes to `log`; `warn` gets what reading a file warns of.
pub fn follow(
    request: &PushRequest,
    options: &FollowOptions,
    log: &mut dyn FnMut(Event<'_>),
    warn: &mut dyn FnMut(&str),
) -> Result<(), FollowError> {
    let _lock = lock_folder(&options.dir)?;
    let mut state = State::open(&options.state)?;
    if let AfterSend::Move(to) = &options.after_send {
        // Fails on a file of that name too.
        fs::create_dir_all(to).map_err(|e| FollowError::Dir(to.clone(), e))?;
    }
    let mut settling = Settling::new();
    // A file the server did not take: when to try it again, and the next wait.
    let mut backoff: Option<(Instant, Duration)> = None;
    let mut last_activity = Instant::now();
    let mut first_scan = true;
    loop {
        // The earliest names ready, at most MAX_READY (a max-heap: the latest name leaves).
        let mut ready: BinaryHeap<Candidate> = BinaryHeap::new();
        let mut more = false;
        let mut pending = false;
        state.begin_scan();
        let scan = state.scan;
        let entries = fs::read_dir(&options.dir).map_err(|e| FollowError::Dir(options.dir.clone(), e))?;
        for entry in entries {
            let Ok(entry) = entry else { continue };
            let name = entry.file_name();
            if ignored(&name) {
                continue;
            }
            let path = options.dir.join(&name);
            // Follows a symbolic link to a file; a folder (the move target) is passed over.
            let Ok(meta) = fs::metadata(&path) else { continue };
            if !meta.is_file() {
                continue;
            }
            let version = match consider(&mut state, &mut settling, &path, &name, &meta, options.settle) {
                Verdict::Sent => {
                    // Taken before a crash, the after-send step perhaps not done (tried once,
                    // at start: a step that fails is not retried at every scan).
                    if first_scan && options.after_send != AfterSend::Keep {
                        after_send(&options.after_send, &path, &name, log);
                    }
                    continue;
                }
                Verdict::Passed => continue,
                Verdict::Waiting { settling } => {
                    pending |= settling;
                    continue;
                }
                Verdict::Ready(version) => version,
            };
            ready.push(Candidate { name, version });
            if ready.len() > MAX_READY {
                ready.pop();
                more = true;
            }
        }
        settling.retain(|_, (_, _, seen)| *seen == scan);
        state.end_scan(first_scan).map_err(|e| FollowError::State(options.state.clone(), e))?;
        first_scan = false;
        let ready = ready.into_sorted_vec();
        let waiting_out = backoff.is_some_and(|(until, _)| Instant::now() < until);
        let any_ready = !ready.is_empty();
        if !waiting_out {
            for c in ready {
                match send_one(request, options, &mut state, &c, log, warn)? {
                    Outcome::Done => {
                        settling.remove(&c.name);
                        backoff = None;
                    }
                    Outcome::NotTaken { why } => {
                        let wait = backoff.map_or(options.first_wait, |(_, w)| (w * 2).min(Retry::MAX_WAIT));
                        let path = options.dir.join(&c.name);
                        log(Event::Waiting { file: &path, why: &why, wait });
                        backoff = Some((Instant::now() + wait, wait));
                        more = false;
                        break;
                    }
                }
            }
        }
        // Not idle: files just sent (measured from the end of sending: sending 256 files can
        // take longer than the idle time), files left for the next scan, files settling, a
        // server to wait for.
        if any_ready || more || pending || backoff.is_some() {
            last_activity = Instant::now();
        }
        if let Some(idle) = options.exit_after_idle {
            if last_activity.elapsed() >= idle {
                return Ok(());
            }
        }
        // A scan that left files for the next one starts it at once.
        let sleep = match backoff {
            _ if more => Duration::ZERO,
            Some((until, _)) => {
                until.saturating_duration_since(Instant::now()).clamp(Duration::from_millis(1), options.poll)
            }
            None => options.poll,
        };
        std::thread::sleep(sleep);
    }
}

enum Outcome {
    /// Sent, or refused for good.
    Done,
    /// The server did not take it: try again later.
    NotTaken { why: String },
}

fn send_one(
    request: &PushRequest,
    options: &FollowOptions,
    state: &mut State,
    c: &Candidate,
    log: &mut dyn FnMut(Event<'_>),
    warn: &mut dyn FnMut(&str),
) -> Result<Outcome, FollowError> {
    let path = options.dir.join(&c.name);
    let mut waiting = |wait: Duration, why: &str| log(Event::Waiting { file: &path, why, wait });
    // `begin` once a request has its connection, before its first byte: a follower stopped
    // earlier sent nothing of it.
    let mut state_error = None;
    let mut connected = || {
        if state.get(&c.name) == Some((Status::Begun, c.version)) {
            return Ok(());
        }
        state.record(&c.name, Status::Begun, c.version).map_err(|e| {
            let said = io::Error::other(e.to_string());
            state_error = Some(e);
            said
        })
    };
    let pushed = push_file_with(&path, request, warn, &mut waiting, &mut connected);
    if let Some(e) = state_error {
        return Err(e);
    }
    // Taken before, if this version may have been: known only once an answer is recorded.
    let mut take_earlier = || state.possibly_taken.remove(c.name.as_os_str()).filter(|(v, _)| *v == c.version);
    match pushed {
        Ok(pushed) => {
            let earlier = take_earlier();
            state.record(&c.name, Status::Sent, c.version)?;
            if let Some(why) = earlier.map(|(_, why)| why).or(pushed.possibly_twice.then_some(UNANSWERED)) {
                log(Event::PossiblySentTwice { file: &path, why });
            }
            log(Event::Sent { file: &path, partial: pushed.partial.as_deref() });
            after_send(&options.after_send, &path, &c.name, log);
            Ok(Outcome::Done)
        }
        Err(PushFileError::Push(PushError::Refused { status, message })) => {
            take_earlier();
            state.record(&c.name, Status::Refused, c.version)?;
            log(Event::Refused { file: &path, why: &format!("the server refused it ({status}): {message}") });
            Ok(Outcome::Done)
        }
        Err(PushFileError::Request(e)) => {
            take_earlier();
            state.record(&c.name, Status::Refused, c.version)?;
            log(Event::Refused { file: &path, why: &e.to_string() });
            Ok(Outcome::Done)
        }
        Err(PushFileError::Push(e)) => {
            if let PushError::GaveUp { possibly_taken: true, .. } = e {
                state.possibly_taken.entry(c.name.as_os_str().into()).or_insert((c.version, UNANSWERED));
            }
            Ok(Outcome::NotTaken { why: e.to_string() })
        }
    }
}

fn after_send(what: &AfterSend, path: &Path, name: &OsStr, log: &mut dyn FnMut(Event<'_>)) {
    let (done, doing) = match what {
        AfterSend::Keep => return,
        AfterSend::Delete => (fs::remove_file(path), "removing it".to_owned()),
        AfterSend::Move(to) => match move_into(path, to, name) {
            Ok(at) => {
                if at.file_name() != Some(name) {
                    log(Event::Warning(&format!(
                        "{}: sent; {} was taken, so it was moved to {}",
                        path.display(),
                        to.join(name).display(),
                        at.display()
                    )));
                }
                return;
            }
            Err(e) => (Err(e), format!("moving it into {}", to.display())),
        },
    };
    if let Err(e) = done {
        log(Event::Warning(&format!("{}: sent, but {doing} failed: {e}", path.display())));
    }
}

/// Most names tried for a moved file (`NAME`, `NAME.1` … ).
const MOVE_NAMES: u32 = 1000;

/// Moves `path` into the folder `to` under `name`, or `name.N` for the first N whose name is
/// free, never replacing a file there; returns where it went. On one file system a hard link
/// then an unlink (a crash between leaves both: the next attempt finds the link and only
/// unlinks); across file systems a copy made under a name of its own, synced, then the unlink.
fn move_into(path: &Path, to: &Path, name: &OsStr) -> io::Result<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let source = fs::metadata(path)?;
    for n in 0..MOVE_NAMES {
        let mut target_name = name.to_os_string();
        if n > 0 {
            target_name.push(format!(".{n}"));
        }
        let target = to.join(&target_name);
        match fs::hard_link(path, &target) {
            Ok(()) => {
                fs::remove_file(path)?;
                return Ok(target);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                // This very file, linked there by an attempt a crash cut short.
                if fs::metadata(&target).is_ok_and(|t| t.dev() == source.dev() && t.ino() == source.ino()) {
                    fs::remove_file(path)?;
                    return Ok(target);
                }
            }
            // Another file system (EXDEV), or one without hard links: copy.
            Err(_) => match copy_new(path, &target) {
                Ok(()) => {
                    fs::remove_file(path)?;
                    return Ok(target);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            },
        }
    }
    Err(io::Error::new(io::ErrorKind::AlreadyExists, format!("{} names there taken", MOVE_NAMES)))
}

/// Copies `path` to `target`, which must not exist (`AlreadyExists` otherwise): written under
/// a hidden name beside it, synced, then hard-linked into place (so `target` is whole or
/// absent) and the hidden name removed.
fn copy_new(path: &Path, target: &Path) -> io::Result<()> {
    if fs::symlink_metadata(target).is_ok() {
        return Err(io::ErrorKind::AlreadyExists.into());
    }
    let mut hidden = OsString::from(".");
    hidden.push(target.file_name().unwrap_or_default());
    hidden.push(format!(".{}.part", std::process::id()));
    let hidden = target.with_file_name(hidden);
    let copied = (|| {
        let mut out = OpenOptions::new().write(true).create_new(true).open(&hidden)?;
        io::copy(&mut File::open(path)?, &mut out)?;
        out.sync_all()?;
        fs::hard_link(&hidden, target)
    })();
    let _ = fs::remove_file(&hidden);
    copied
}

/// The lock that makes a follower the only one on `dir`, held while it is open.
fn lock_folder(dir: &Path) -> Result<File, FollowError> {
    let folder = File::open(dir).map_err(|e| FollowError::Dir(dir.to_path_buf(), e))?;
    match crate::file::try_lock(&folder) {
        Ok(true) => Ok(folder),
        Ok(false) => Err(FollowError::Dir(
            dir.to_path_buf(),
            io::Error::new(io::ErrorKind::WouldBlock, "another tachyon push --follow holds this folder"),
        )),
        Err(e) => Err(FollowError::Dir(dir.to_path_buf(), e)),
    }
}

/// Forgets every file the state at `state` records as refused, so that the next follower
/// tries each again (once). Takes the folder's lock for the rewrite: refused while a follower
/// runs on `dir`. Returns how many were forgotten.
pub fn forget_refused(dir: &Path, state: &Path) -> Result<usize, FollowError> {
    let _lock = lock_folder(dir)?;
    let mut s = State::open(state)?;
    let before = s.entries.len();
    s.entries.retain(|_, e| e.status != Status::Refused);
    let forgotten = before - s.entries.len();
    s.rewrite().map_err(|e| FollowError::State(state.to_path_buf(), e))?;
    Ok(forgotten)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scan counter wraps (2^32 scans: 2.7 years at a 20 ms poll): what a scan saw is
    /// kept across the wrap, what it did not see is forgotten, as at any other count.
    #[test]
    fn scans_across_the_counters_wrap_keep_what_they_see() {
        let dir = std::env::temp_dir().join(format!("tachyon-follow-wrap-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state");
        let _ = fs::remove_file(&path);
        let mut s = State::open(&path).unwrap();
        let v = Version { len: 3, mtime_ns: 7 };
        s.record(OsStr::new("a"), Status::Sent, v).unwrap();
        s.record(OsStr::new("b"), Status::Sent, v).unwrap();
        s.scan = u32::MAX - 2;
        for round in 0..5 {
            s.begin_scan();
            s.saw(OsStr::new("a"));
            if round < 3 {
                s.saw(OsStr::new("b"));
            }
            s.end_scan(false).unwrap();
            assert_eq!(s.get(OsStr::new("a")), Some((Status::Sent, v)), "scan {}", s.scan);
            assert_eq!(s.get(OsStr::new("b")).is_some(), round < 3, "scan {}", s.scan);
        }
        assert_eq!(s.scan, 2, "the counter wrapped");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn names_escape_and_come_back() {
        for name in ["run.00000001.5000000.pyb", "a b%c", "tab\there", "é.pyb"] {
            let e = escape_name(OsStr::new(name));
            assert!(!e.contains(' ') && !e.contains('\t'), "{e}");
            assert_eq!(unescape(&e).unwrap(), OsString::from(name));
        }
        assert_eq!(escape_name(OsStr::new("a b%")), "a%20b%25");
        assert_eq!(unescape("%2"), None);
        assert_eq!(unescape("%zz"), None);
    }

    #[test]
    fn state_lines_parse_strictly() {
        assert_eq!(
            parse_line("sent 10 -5 x.pyb"),
            Some((OsString::from("x.pyb"), Status::Sent, Version { len: 10, mtime_ns: -5 }))
        );
        for bad in ["", "sent", "sent 1 2", "kept 1 2 x", "sent x 2 y", "sent 1 2 y z", "sent 1 2 "] {
            assert_eq!(parse_line(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_state_survives_a_torn_line_and_forgets_absent_files() {
        let dir = std::env::temp_dir().join(format!("tachyon-follow-state-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state");
        let v = Version { len: 3, mtime_ns: 7 };
        {
            let mut s = State::open(&path).unwrap();
            s.record(OsStr::new("a"), Status::Begun, v).unwrap();
            s.record(OsStr::new("a"), Status::Sent, v).unwrap();
            s.record(OsStr::new("b c"), Status::Begun, v).unwrap();
        }
        // A kill in the middle of a record.
        OpenOptions::new().append(true).open(&path).unwrap().write_all(b"sent 3 7 b%20").unwrap();
        let mut s = State::open(&path).unwrap();
        assert_eq!(s.get(OsStr::new("a")), Some((Status::Sent, v)));
        assert_eq!(s.get(OsStr::new("b c")), Some((Status::Begun, v)));
        // A scan that finds "b c" alone forgets "a".
        s.begin_scan();
        s.saw(OsStr::new("b c"));
        s.end_scan(true).unwrap();
        let s = State::open(&path).unwrap();
        assert_eq!((s.get(OsStr::new("a")), s.entries.len()), (None, 1));
        assert_eq!(fs::read_to_string(&path).unwrap(), format!("{HEADER}begin 3 7 b%20c\n"));
        // Someone else's line is an error naming it.
        fs::write(&path, format!("{HEADER}begin 3 7 x\nnot ours\n")).unwrap();
        assert!(matches!(State::open(&path), Err(FollowError::StateLine(_, 3))));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn completeness_by_first_bytes() {
        let dir = std::env::temp_dir().join(format!("tachyon-follow-looks-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let case = |name: &str, bytes: &[u8]| {
            let p = dir.join(name);
            fs::write(&p, bytes).unwrap();
            looks(&p).unwrap().0
        };
        assert_eq!(case("empty", b""), Looks::InProgress);
        assert_eq!(case("zeros", &[0u8; 100]), Looks::InProgress);
        assert_eq!(case("le", b"HCAT\x00\x00"), Looks::Complete);
        assert_eq!(case("be", b"TACH\x00\x00"), Looks::Complete);
        assert_eq!(case("stream", b"\x01\x06\x00TCHF\x01\x05abcd"), Looks::InProgress);
        assert_eq!(case("pprof", b"\x1f\x8b\x08\x00"), Looks::Other);
        assert_eq!(case("few zeros", &[0u8; 10]), Looks::Other);
        assert!(ignored(OsStr::new(".hidden")) && ignored(OsStr::new("x.pyb.123.receiving")));
        assert!(!ignored(OsStr::new("run.00000001.5.pyb")));
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A Tachyon file whose header lands between the scan's listing and its read of the first
    /// bytes (the writer puts it last) is sent as the version with the header, so the next
    /// scan knows it as sent rather than as a new file to send again. Built by handing the
    /// scan a listing taken before the header, not by waiting for the race.
    #[test]
    fn a_header_written_after_the_listing_is_sent_once_as_the_version_read() {
        let dir = std::env::temp_dir().join(format!("tachyon-follow-header-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let mut state = State::open(&dir.join("state")).unwrap();
        let mut settling = Settling::new();
        let name = OsStr::new("run.pyb");
        let path = dir.join(name);
        let mut body = vec![0u8; 64];
        body.extend_from_slice(b"the samples and tables");
        fs::write(&path, &body).unwrap();
        let early = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        File::options().write(true).open(&path).unwrap().set_modified(early).unwrap();
        let settle = Duration::from_secs(60);
        state.begin_scan();
        let listed = fs::metadata(&path).unwrap();
        assert_eq!(
            consider(&mut state, &mut settling, &path, name, &listed, settle),
            Verdict::Waiting { settling: false }
        );

        // The header lands after the listing, the time moving on with it.
        let mut f = File::options().write(true).open(&path).unwrap();
        f.write_all(b"HCAT\x00\x00").unwrap();
        f.set_modified(early + Duration::from_secs(3)).unwrap();
        drop(f);
        let now = Version::of(&fs::metadata(&path).unwrap());
        assert_ne!(now, Version::of(&listed));
        let verdict = consider(&mut state, &mut settling, &path, name, &listed, settle);
        assert_eq!(verdict, Verdict::Ready(now), "sent as the version read, not the listing's");
        state.record(name, Status::Sent, now).unwrap();

        // The next scan lists the file as it is: known as sent.
        state.begin_scan();
        let listed_again = fs::metadata(&path).unwrap();
        assert_eq!(consider(&mut state, &mut settling, &path, name, &listed_again, settle), Verdict::Sent);
        // A listing that is stale again (taken before the header) finds it sent too, by the
        // version read.
        assert_eq!(consider(&mut state, &mut settling, &path, name, &listed, settle), Verdict::Sent);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn after_send_values() {
        assert_eq!(AfterSend::parse("keep"), Ok(AfterSend::Keep));
        assert_eq!(AfterSend::parse("move:/x"), Ok(AfterSend::Move("/x".into())));
        assert!(AfterSend::parse("move:").is_err() && AfterSend::parse("copy").is_err());
    }
}
