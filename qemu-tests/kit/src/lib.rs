//! What the workspace's tests share (a dev-only crate: no published crate depends on it).
//!
//! - [`under_memory_limit`]: runs a test's body again in a child process whose address space
//!   is limited, so that an allocation out of proportion to the input fails the test even
//!   where the kernel would only reserve the pages (a zeroed `Vec` of 1 GiB costs nothing on
//!   an ordinary Linux machine until touched, and aborts the process in a container);
//!   [`limit_memory`] does the same for a command the test runs.
//! - [`Broken`]: the error of the failing sinks the writer tests build (a sink that fails
//!   on a schedule, to show a writer reports it and still finishes a file with what it accepted).
//! - [`fixtures`]: where the committed fixtures are (`qemu-tests/vectors/<set>`, each set
//!   with a README saying how its files were made), listed and read.
//! - [`soak`]: a capture ring under a long run, compressed (a producer and a consumer thread,
//!   every entry checked, from any position and count).
//! - [`roundtrip`]: the model a round trip is checked against: what a reader must report
//!   for the samples a writer was given, by the reader rules of the format's spec, never by
//!   the code under test.

pub mod fixtures;
pub mod roundtrip;
#[cfg(not(loom))] // loom's atomics are not std's.
pub mod soak;

use std::os::unix::process::CommandExt;
use std::process::Command;

/// Environment variable naming the test a child process runs under the limit.
const CHILD: &str = "TACHYON_TEST_KIT_LIMITED";

/// Runs test `name` (its path as the harness prints it) in a child of this test binary with
/// `RLIMIT_AS` set to `bytes`, and checks that it passed there.
///
/// Call it first in the test's body: `if under_memory_limit("name", LIMIT) { return; }`. In
/// the parent it returns true once the child passed (the body already ran there); in the
/// child it sets the limit and returns false, so the body runs under it. An allocation the
/// limit refuses aborts the child, which fails the test with the child's output.
pub fn under_memory_limit(name: &str, bytes: u64) -> bool {
    in_child(name, Some(bytes))
}

/// Runs test `name` alone in a fresh child of this test binary, as [`under_memory_limit`]
/// does without a limit: for a test whose measurements the harness's other tests must not
/// share a process with (a command's peak resident set counts the process it was forked
/// from, whatever else that holds).
pub fn in_a_process_of_its_own(name: &str) -> bool {
    in_child(name, None)
}

fn in_child(name: &str, limit: Option<u64>) -> bool {
    if std::env::var(CHILD).is_ok_and(|n| n == name) {
        if let Some(bytes) = limit {
            set_address_space_limit(bytes);
        }
        return false;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, name)
        .output()
        .expect("the test binary runs again");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let limited = limit.map_or_else(String::new, |bytes| format!(" under a {} MB address-space limit", bytes >> 20));
    assert!(out.status.success(), "{name}{limited}: {}\n{stdout}\n{stderr}", out.status);
    // The child ran exactly this test (a name that matched nothing would pass as well).
    assert!(stdout.contains("1 passed"), "{name} did not run in the child:\n{stdout}\n{stderr}");
    // What the child printed (its measurements), for the log.
    eprint!("{stderr}");
    true
}

/// Limits this process's address space to `bytes` (soft and hard limit).
pub fn set_address_space_limit(bytes: u64) {
    let limit = libc::rlimit { rlim_cur: bytes as libc::rlim_t, rlim_max: bytes as libc::rlim_t };
    // SAFETY: setrlimit reads the struct it is given and changes only this process's limits.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) };
    assert_eq!(rc, 0, "setrlimit(RLIMIT_AS, {bytes}): {}", std::io::Error::last_os_error());
}

/// The error a test's failing sink returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// Waits for `child` to end, as `Child::wait` does, and gives the most memory it held at
/// once: its peak resident set in bytes (the kernel's `ru_maxrss`, from `wait4`), for tests
/// that bound what a whole command holds. Read its pipes first; the child is reaped here, so
/// it is not waited for again.
pub fn wait_with_peak_rss(child: std::process::Child) -> std::io::Result<(std::process::ExitStatus, u64)> {
    use std::os::unix::process::ExitStatusExt;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value of the plain C struct wait4 fills.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: wait4 writes only the two values it is given pointers to; `pid` is this
        // process's child, not reaped yet (std reaps only in its own wait functions).
        let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if rc == pid {
            break;
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
    // Linux gives `ru_maxrss` in KiB.
    Ok((std::process::ExitStatus::from_raw(status), usage.ru_maxrss as u64 * 1024))
}

/// Makes `command` run with its address space limited to `bytes`.
pub fn limit_memory(command: &mut Command, bytes: u64) -> &mut Command {
    let limit = libc::rlimit { rlim_cur: bytes as libc::rlim_t, rlim_max: bytes as libc::rlim_t };
    // SAFETY: runs in the child between fork and exec, where only async-signal-safe calls
    // are allowed: setrlimit is one, and nothing here allocates.
    unsafe {
        command.pre_exec(move || {
            if libc::setrlimit(libc::RLIMIT_AS, &limit) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        })
    }
}
