//! A rotating writer's ended periods told to the program: `tachyon_writer_on_period_end`.
//!
//! The rotating writer tells each period as its file becomes complete, inside the call that
//! ended it (a sample's write, a drain, `tachyon_writer_rotate`, finalize). The C callback is
//! not called from there: the period is queued, and the entry point calls the callback once
//! its own use of the handle is over ([`with_periods`]), so the callback may call any
//! function of the writer (its counts, a flush) without two live borrows of one handle.

#[cfg(feature = "std")]
use core::ffi::c_void;

use crate::writer::{live, tachyon_writer};

/// A rotating writer's period that ended, its file complete.
#[cfg(feature = "std")]
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
    pub path: *const core::ffi::c_char,
}

/// Called with each ended period (see `tachyon_writer_on_period_end`); `context` is the
/// pointer given with it.
#[cfg(feature = "std")]
pub type tachyon_period_callback = Option<unsafe extern "C" fn(context: *mut c_void, period: *const tachyon_period)>;

/// The callback a handle holds, and the periods its writer told and it has not yet been
/// called with.
#[cfg(feature = "std")]
pub(crate) struct PeriodHook {
    callback: unsafe extern "C" fn(*mut c_void, *const tachyon_period),
    context: *mut c_void,
    told: std::sync::Arc<std::sync::Mutex<Vec<tachyon::tachyon::rotate::EndedPeriod>>>,
}

/// The callback's calls due after an entry point, made by [`PeriodCalls::make`].
pub(crate) struct PeriodCalls {
    #[cfg(feature = "std")]
    due: Option<(
        unsafe extern "C" fn(*mut c_void, *const tachyon_period),
        *mut c_void,
        Vec<tachyon::tachyon::rotate::EndedPeriod>,
    )>,
}

impl PeriodCalls {
    /// The calls `w`'s writer left due (none without a callback).
    fn take(w: &mut tachyon_writer) -> PeriodCalls {
        #[cfg(feature = "std")]
        {
            let due = w.periods.as_ref().and_then(|hook| {
                let told = hook.told.lock().map(|mut t| core::mem::take(&mut *t)).unwrap_or_default();
                (!told.is_empty()).then_some((hook.callback, hook.context, told))
            });
            PeriodCalls { due }
        }
        #[cfg(not(feature = "std"))]
        {
            let _ = w;
            PeriodCalls {}
        }
    }

    /// Calls the callback with each period, in order.
    ///
    /// # Safety
    /// No reference to the handle may be live: the callback may use it.
    unsafe fn make(self) {
        #[cfg(feature = "std")]
        if let Some((callback, context, told)) = self.due {
            use std::os::unix::ffi::OsStrExt;
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
                // SAFETY: the program's callback, with the context it gave; `period` and its
                // path live through the call.
                unsafe { callback(context, &period) };
            }
        }
    }
}

/// Runs `body` on the live handle `writer`, then calls the period callback with the periods
/// `body` ended, once `body`'s borrow of the handle is over. Returns `body`'s status.
///
/// # Safety
/// `writer` as for [`live`].
pub(crate) unsafe fn with_periods(writer: *mut tachyon_writer, body: impl FnOnce(&mut tachyon_writer) -> i32) -> i32 {
    let (status, calls) = {
        // SAFETY: the caller's pointer, checked by `live`.
        let w = match unsafe { live(writer) } {
            Ok(w) => w,
            Err(status) => return status,
        };
        let status = body(w);
        (status, PeriodCalls::take(w))
    };
    // SAFETY: the handle's borrow ended with the block above.
    unsafe { calls.make() };
    status
}

#[cfg(feature = "std")]
mod set {
    use super::*;
    use crate::*;

    /// Calls `callback(context, &period)` for each period of a rotating writer that ends from
    /// now on, its file complete (a journaled one: the Tachyon file has replaced the stream),
    /// with its final counts: the period a program can hand over, and what it held. Called on
    /// the thread whose call ended the period (`tachyon_capture_drain`, a sample's write,
    /// `tachyon_writer_rotate`, `tachyon_writer_finalize` for the last period), before that
    /// call returns and after its work is done, so the callback may call this writer's
    /// functions. A period whose stream could not be replaced (that call's error says so) is
    /// not told. NULL `callback` stops the calls. `TACHYON_E_UNSUPPORTED` for a writer not
    /// made by `tachyon_writer_open_rotating`.
    ///
    /// # Safety
    /// `writer` must be NULL or a valid handle; `callback` must be safe to call with `context`
    /// on the writer's thread.
    #[no_mangle]
    pub unsafe extern "C" fn tachyon_writer_on_period_end(
        writer: *mut tachyon_writer,
        callback: tachyon_period_callback,
        context: *mut c_void,
    ) -> i32 {
        guard(|| {
            // SAFETY: the caller's pointer, checked by `live`.
            let w = match unsafe { live(writer) } {
                Ok(w) => w,
                Err(status) => return status,
            };
            let told = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let queue = callback.is_some().then(|| told.clone());
            // Without a callback nothing is queued.
            let tell = move |p: &tachyon::tachyon::rotate::EndedPeriod| {
                if let Some(Ok(mut q)) = queue.as_ref().map(|q| q.lock()) {
                    q.push(p.clone());
                }
            };
            if !w.writer.on_period_end(tell) {
                return w.fail(TACHYON_E_UNSUPPORTED, format_args!("only a rotating writer has periods"));
            }
            w.periods = callback.map(|callback| PeriodHook { callback, context, told });
            TACHYON_OK
        })
    }
}

#[cfg(feature = "std")]
pub use set::tachyon_writer_on_period_end;
