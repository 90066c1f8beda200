//! Whole processes.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{json, Value};

/// One process's wall time and peak resident set.
#[derive(Debug, Clone, Copy)]
pub(super) struct Measured {
    pub(super) seconds: f64,
    pub(super) rss_kb: u64,
}

/// Runs `argv` to its end; its wall time and `ru_maxrss`. Called in the runner process only
/// (see [`Runner`]).
// wait4 below reaps the child (std's `wait` cannot report its rusage), which clippy cannot see.
#[allow(clippy::zombie_processes)]
pub(super) fn run_once(argv: &[String]) -> Measured {
    let start = Instant::now();
    let child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let child = child.unwrap_or_else(|e| panic!("{}: {e}", argv[0]));
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value; wait4 fills it for the child we spawned.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our child's; status and usage are valid for writes.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let seconds = start.elapsed().as_secs_f64();
    assert_eq!(waited, pid, "wait4");
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "{argv:?} failed");
    Measured { seconds, rss_kb: usage.ru_maxrss as u64 }
}

/// Starts the measured commands from a small process of its own. Linux carries a parent's
/// peak RSS over `fork` and `exec` into the child's `ru_maxrss`, and this process grows to
/// hundreds of megabytes; the runner, started first thing, stays at a few.
pub(super) struct Runner {
    pub(super) child: std::process::Child,
    pub(super) input: std::process::ChildStdin,
    pub(super) output: std::io::BufReader<std::process::ChildStdout>,
}

impl Runner {
    pub(super) fn start() -> Runner {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .arg("--runner")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let input = child.stdin.take().unwrap();
        let output = std::io::BufReader::new(child.stdout.take().unwrap());
        Runner { child, input, output }
    }

    /// Ends the runner: its input closed, it returns from its loop; then it is reaped.
    pub(super) fn finish(self) {
        let Runner { mut child, input, output } = self;
        drop(input);
        drop(output);
        let status = child.wait().expect("the runner");
        assert!(status.success(), "the runner failed: {status}");
    }

    /// One run of `argv`, `remove` deleted first.
    pub(super) fn run(&mut self, argv: &[String], remove: Option<&Path>) -> Measured {
        use std::io::{BufRead, Write};
        let request = json!({"argv": argv, "remove": remove.map(|p| p.display().to_string())});
        writeln!(self.input, "{request}").unwrap();
        let mut line = String::new();
        self.output.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).expect("the runner's answer");
        Measured { seconds: v["seconds"].as_f64().unwrap(), rss_kb: v["rss_kb"].as_u64().unwrap() }
    }

    /// The median wall time and the largest peak RSS of `runs` runs.
    pub(super) fn median(&mut self, runs: usize, argv: &[String], remove: Option<&Path>) -> Measured {
        let all: Vec<Measured> = (0..runs).map(|_| self.run(argv, remove)).collect();
        summary(all)
    }

    /// [`Self::median`] of `a` and of `b`, their runs alternated: for a ratio of the two,
    /// which a slow stretch of the machine then weighs on both sides of (this VM's speed
    /// moves by a quarter from one minute to the next).
    pub(super) fn alternated(&mut self, runs: usize, a: &[String], b: &[String]) -> (Measured, Measured) {
        let (mut runs_a, mut runs_b) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            runs_a.push(self.run(a, None));
            runs_b.push(self.run(b, None));
        }
        (summary(runs_a), summary(runs_b))
    }
}

/// The median wall time and the largest peak RSS of some runs.
fn summary(mut all: Vec<Measured>) -> Measured {
    all.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
    Measured { seconds: all[all.len() / 2].seconds, rss_kb: all.iter().map(|m| m.rss_kb).max().unwrap_or(0) }
}

/// The runner's side: one JSON request a line, one JSON answer a line.
pub(super) fn runner_main() {
    use std::io::{BufRead, Write};
    let mut out = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if let Some(path) = v["remove"].as_str() {
            // A file, or a folder of pages (the heatmaps).
            let _ = std::fs::remove_file(path);
            let _ = std::fs::remove_dir_all(path);
        }
        let argv: Vec<String> = v["argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_owned()).collect();
        let m = run_once(&argv);
        writeln!(out, "{}", json!({"seconds": m.seconds, "rss_kb": m.rss_kb})).unwrap();
        out.flush().unwrap();
    }
}

/// The oracle's python3.15, started directly (the wrapper script's shell is not timed).
pub(super) fn python_argv() -> Vec<String> {
    let home = std::env::var_os("HOME").expect("HOME");
    let dir = std::env::var_os("TACHYON_ORACLE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(home).join(".cache/tachyon-oracle"));
    assert!(dir.join("ready").exists(), "CPython oracle not set up: run scripts/oracle.sh first");
    let r = dir.join("root-amd64");
    let p = |rel: &str| r.join(rel).display().to_string();
    vec![
        p("usr/lib64/ld-linux-x86-64.so.2"),
        "--library-path".into(),
        p("usr/lib/x86_64-linux-gnu"),
        p("usr/bin/python3.15"),
    ]
}

pub(super) fn tachyon_argv() -> Vec<String> {
    let exe = std::env::current_exe().unwrap().with_file_name("tachyon");
    assert!(exe.exists(), "build the command first: cargo build --release -p tachyon");
    vec![exe.display().to_string()]
}

/// `argv` followed by `more`.
pub(super) fn with(mut argv: Vec<String>, more: &[&str]) -> Vec<String> {
    argv.extend(more.iter().map(|s| s.to_string()));
    argv
}

pub(super) fn ms(m: &Measured) -> String {
    if m.seconds < 1.0 {
        format!("{:.1} ms", m.seconds * 1e3)
    } else {
        format!("{:.2} s", m.seconds)
    }
}

pub(super) fn mb(kb: u64) -> String {
    format!("{:.0} MB", kb as f64 / 1024.0)
}
