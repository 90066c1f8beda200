//! Forks of this process, counted, so that an object made before a `fork()` knows when it
//! is used in the child.
//!
//! A `pthread_atfork` handler bumps a counter in every child (whoever calls `fork()`: the
//! `os` module, `multiprocessing`, a C extension); an object keeps the count it was made at.
//! A load of one atomic per call, where asking for the process id would be a system call.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

use pyo3::exceptions::PyRuntimeError;
use pyo3::PyResult;

static FORKS: AtomicU64 = AtomicU64::new(0);

extern "C" fn after_fork_in_child() {
    // One atomic add: the only thing a child may safely do before it execs or returns.
    FORKS.fetch_add(1, Ordering::Relaxed);
}

/// Installs the handler; the module's initialisation calls it (once per process).
pub fn init() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        #[cfg(unix)]
        // SAFETY: the handler is a plain function that lives as long as the process (Python
        // never unloads an extension module) and does one atomic add.
        unsafe {
            libc::pthread_atfork(None, None, Some(after_fork_in_child));
        }
    });
}

/// Where an object was made: the fork count and the process id then.
#[derive(Clone, Copy, Debug)]
pub struct Forks {
    count: u64,
    pid: u32,
}

impl Forks {
    /// This process, now.
    pub fn now() -> Self {
        Forks { count: FORKS.load(Ordering::Relaxed), pid: std::process::id() }
    }

    /// True in a child forked after the object was made.
    pub fn inherited(self) -> bool {
        FORKS.load(Ordering::Relaxed) != self.count
    }

    /// `RuntimeError` naming both processes when the object came over a fork.
    pub fn check(self, what: &str) -> PyResult<()> {
        if !self.inherited() {
            return Ok(());
        }
        Err(PyRuntimeError::new_err(format!(
            "this {what} was made in process {} before fork(); it cannot be used in the child \
             (process {}): make a new {what} there",
            self.pid,
            std::process::id()
        )))
    }
}
