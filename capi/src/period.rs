//! A rotating writer's ended periods told to the program (`tachyon_writer_on_period_end`).
//!
//! The rotating writer tells each period as its file becomes complete, inside the call that
//! ended it (a sample's write, a drain, `tachyon_writer_rotate`, finalize). The C callback is
//! not called from there: the period is queued here, and the entry point calls the callback
//! once its own use of the handle is over (`writer::with_periods`), so the callback may call
//! any function of the writer (its counts, a flush) without two live borrows of one handle.

use core::ffi::{c_char, c_void};
use std::sync::{Arc, Mutex};

use tachyon::tachyon::rotate::EndedPeriod;

/// A rotating writer's period that ended, its file complete.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tachyon_period {
    /// Its sequence number (from 0): the SEQUENCE of its name.
    pub sequence: u64,
    /// Its start in the samples' µs: its header's `start_time_us`, the START of its name.
    pub start_time_us: u64,
    /// Samples in its file.
    pub samples: u64,
    /// Threads in its file.
    pub threads: u64,
    /// The file's size in bytes.
    pub file_size: u64,
    /// The file's path, NUL-terminated; valid during the callback only.
    pub path: *const c_char,
}

/// Called with each ended period (see `tachyon_writer_on_period_end`); `context` is the
/// pointer given with it.
pub type tachyon_period_callback = Option<unsafe extern "C" fn(context: *mut c_void, period: *const tachyon_period)>;

type Callback = unsafe extern "C" fn(*mut c_void, *const tachyon_period);

/// The callback a handle holds, and the periods its writer told and it has not yet been
/// called with.
pub(crate) struct PeriodHook {
    callback: Callback,
    context: *mut c_void,
    told: Arc<Mutex<Vec<EndedPeriod>>>,
}

impl PeriodHook {
    pub(crate) fn new(callback: Callback, context: *mut c_void) -> PeriodHook {
        PeriodHook { callback, context, told: Arc::default() }
    }

    /// What the rotating writer is given: it queues each ended period for the callback.
    pub(crate) fn teller(&self) -> impl FnMut(&EndedPeriod) + Send + 'static {
        let queue = self.told.clone();
        move |p| {
            if let Ok(mut q) = queue.lock() {
                q.push(p.clone());
            }
        }
    }
}

/// The callback's calls due after an entry point, made by [`PeriodCalls::make`].
pub(crate) struct PeriodCalls {
    due: Option<(Callback, *mut c_void, Vec<EndedPeriod>)>,
}

impl PeriodCalls {
    /// The calls a handle's hook has due (none without a hook).
    pub(crate) fn take(hook: Option<&PeriodHook>) -> PeriodCalls {
        let due = hook.and_then(|hook| {
            let told = hook.told.lock().map(|mut t| std::mem::take(&mut *t)).unwrap_or_default();
            (!told.is_empty()).then_some((hook.callback, hook.context, told))
        });
        PeriodCalls { due }
    }

    /// Calls the callback with each period, in order.
    ///
    /// # Safety
    /// No reference to the handle may be live: the callback may use it.
    pub(crate) unsafe fn make(self) {
        use std::os::unix::ffi::OsStrExt;
        let Some((callback, context, told)) = self.due else { return };
        for p in told {
            // A path holds no NUL (the file was created from it).
            let path = std::ffi::CString::new(p.path.as_os_str().as_bytes()).unwrap_or_default();
            let period = tachyon_period {
                sequence: p.sequence,
                start_time_us: p.start_time_us,
                samples: p.samples,
                threads: p.threads as u64,
                file_size: p.size,
                path: path.as_ptr(),
            };
            // SAFETY: the program's callback, with the context it gave; `period` and its path
            // live through the call.
            unsafe { callback(context, &period) };
        }
    }
}
