//! Host builds: native addresses written as `MODULE+0xADDRESS` frames (`tachyon::native`),
//! for `tachyon symbolize` to name offline.

use core::ffi::c_void;
use std::ffi::c_char;

use tachyon::native::Modules;

use crate::writer::tachyon_frame;
use crate::*;

/// A process's modules (opaque to C): which module each native address is in, its build id
/// and the address as the module was linked. Made by `tachyon_modules_open`, used as the
/// context of `tachyon_modules_resolve`.
pub struct tachyon_modules {
    modules: Modules,
}

/// Stores in `*modules` the modules of this process (its `/proc/self/maps`, read when first
/// needed and again, at most every 100 ms, for an address in none of them: a library loaded
/// since). For the draining thread; never in a signal handler.
///
/// # Safety
/// `modules` must be NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn tachyon_modules_open(modules: *mut *mut tachyon_modules) -> i32 {
    guard(|| {
        if modules.is_null() {
            return TACHYON_E_NULL;
        }
        let handle = Box::into_raw(Box::new(tachyon_modules { modules: Modules::this_process() }));
        registry::open(handle as usize, registry::Kind::Modules);
        // SAFETY: checked non-null.
        unsafe { modules.write(handle) };
        TACHYON_OK
    })
}

/// A `tachyon_resolve_fn` for `tachyon_capture_drain`, with a `tachyon_modules` as its
/// context: the frame of native address `code + offset` (pushed by
/// `tachyon_capture_push_addresses`, or by `tachyon_capture_push_code` as a function's start
/// and an offset) as `MODULE+0xADDRESS` in the file `MODULE (build id HEX)`; an address in no
/// module is `0xADDRESS` in `[unknown]`. The names stay valid until the next call. Returns
/// non-zero (the frame is then `<unknown>`) for a context that is not a live
/// `tachyon_modules`.
///
/// # Safety
/// `context` must be NULL or a pointer this library gave; `frame` NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn tachyon_modules_resolve(
    context: *mut c_void,
    code: u64,
    offset: u32,
    frame: *mut tachyon_frame,
) -> i32 {
    guard(|| {
        // SAFETY: by the function's contract.
        let modules = match unsafe { live(context.cast()) } {
            Ok(m) => m,
            Err(status) => return status,
        };
        if frame.is_null() {
            return TACHYON_E_NULL;
        }
        let (function, file) = modules.modules.names(code.wrapping_add(u64::from(offset)));
        // SAFETY: checked non-null; the names live in `modules` until its next call.
        unsafe {
            let f = &mut *frame;
            f.funcname = function.as_ptr().cast::<c_char>();
            f.funcname_len = function.len();
            f.filename = file.as_ptr().cast::<c_char>();
            f.filename_len = file.len();
        }
        TACHYON_OK
    })
}

/// Frees the modules. A second close (or any call after) is `TACHYON_E_CLOSED`.
///
/// # Safety
/// `modules` must be NULL or a pointer this library gave.
#[no_mangle]
pub unsafe extern "C" fn tachyon_modules_close(modules: *mut tachyon_modules) -> i32 {
    guard(|| {
        // SAFETY: checked by `live`.
        if let Err(status) = unsafe { live(modules) } {
            return status;
        }
        registry::close(modules as usize);
        // SAFETY: made by Box::into_raw in `tachyon_modules_open`, live until now.
        drop(unsafe { Box::from_raw(modules) });
        TACHYON_OK
    })
}

/// The live modules behind `m`.
///
/// # Safety
/// `m` must be NULL or a pointer this library gave (closed ones are recognised).
unsafe fn live<'a>(m: *mut tachyon_modules) -> Result<&'a mut tachyon_modules, i32> {
    // SAFETY: the caller's promise.
    unsafe { registry::live(m, registry::Kind::Modules) }
}
