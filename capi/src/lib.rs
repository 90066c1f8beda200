//! # tachyon-capi
//!
//! The C API of the Tachyon writer and reader (`include/tachyon.h`, generated from these
//! sources by cbindgen). The design follows what C runtimes need:
//!
//! - **No malloc on the writer's path.** [`tachyon_writer_memory_size`] says how many bytes a
//!   set of capacities needs; [`tachyon_writer_init`] places the writer and every table in
//!   that memory (static, stack or heap: the caller's choice, any alignment). The sink is two
//!   callbacks (write, seek), so a file, a socket buffer or a flash page all work. Host
//!   builds add [`tachyon_writer_open_file`], which allocates.
//! - **Status codes, never crashes.** Every function returns `TACHYON_OK` (0), `TACHYON_END`
//!   (1, the reader's end of samples) or a negative `TACHYON_E_*` code, which
//!   [`tachyon_status_message`] names; a handle keeps a message with the details (the file
//!   offset and rule of a reader error, the sink offset of a write error). NULL pointers, a
//!   call after finalize, a second finalize, a closed or foreign handle are codes, not
//!   crashes. A Rust panic (a bug) is caught at the boundary and becomes `TACHYON_E_PANIC`.
//! - **No std where there is none.** On targets without an operating system
//!   (`thumbv7em-none-eabihf`) the crate is `#![no_std]` without an allocator: the writer
//!   over caller memory and callbacks is all there is, and a C firmware links the static
//!   library.
//!
//! Handles are not thread-safe: one thread at a time per handle.
//!
//! ## Module map (private modules; the API is the `tachyon_*` functions)
//! * `writer`: the writer handle, placed at the start of the caller's memory with its
//!   tables after it, by `layout`'s one plan; `sink`: the write and seek callbacks.
//! * `reader` (host builds): files and memory buffers, samples one at a time;
//!   `registry` (host builds): which addresses hold the handles the library allocated.
//! * `message`: a handle's last error, kept in the handle (no allocation).
//! * `inner`: what a writer handle writes with (the core's writer over callbacks, or a
//!   journaled stream into a file).
//! * `capture`: capture rings (push from a signal handler, drain into a writer).
//! * `period` (host builds): a rotating writer's ended periods told to the program.

#![cfg_attr(target_os = "none", no_std)]
#![deny(missing_docs)]
#![allow(non_camel_case_types)]

mod capture;
mod inner;
mod layout;
mod message;
#[cfg(feature = "std")]
mod native;
#[cfg(feature = "std")]
mod period;
#[cfg(feature = "std")]
mod reader;
#[cfg(feature = "std")]
mod registry;
mod sink;
mod writer;

use core::ffi::c_char;

pub use capture::*;
pub use layout::tachyon_writer_options;
#[cfg(feature = "std")]
pub use native::*;
#[cfg(feature = "std")]
pub use period::{tachyon_period, tachyon_period_callback};
#[cfg(feature = "std")]
pub use reader::*;
#[cfg(feature = "std")]
pub use registry::tachyon_last_error;
pub use sink::tachyon_sink;
pub use writer::*;

/// Success.
pub const TACHYON_OK: i32 = 0;
/// The reader has no more samples (not an error).
pub const TACHYON_END: i32 = 1;
/// A required pointer argument was NULL.
pub const TACHYON_E_NULL: i32 = -1;
/// The handle is not one this library made (or its memory was overwritten).
pub const TACHYON_E_BAD_HANDLE: i32 = -2;
/// The handle was closed.
pub const TACHYON_E_CLOSED: i32 = -3;
/// The writer was finalized: only `tachyon_writer_close` (and the read-only functions) may
/// follow.
pub const TACHYON_E_FINALIZED: i32 = -4;
/// An argument has a value outside what the function takes (a byte order, a compression, a
/// zero capacity, stats CPython rejects, a frame id the reader's table does not have).
pub const TACHYON_E_ARGUMENT: i32 = -5;
/// The memory given to `tachyon_writer_init` is smaller than `tachyon_writer_memory_size`
/// says.
pub const TACHYON_E_MEMORY: i32 = -6;
/// A table of the writer is full: the sample (or frame) was refused, everything before it
/// kept; the writer stays usable and `tachyon_writer_finalize` makes a valid file.
pub const TACHYON_E_CAPACITY: i32 = -7;
/// A format limit was reached (a string over 4 GiB, 2^64 − 1 samples): as for
/// `TACHYON_E_CAPACITY`.
pub const TACHYON_E_LIMIT: i32 = -8;
/// The sink or the file failed. Nothing of the call was accepted; the writer stays usable,
/// rewrites from its last good position on the next call, and finalize can be retried.
pub const TACHYON_E_IO: i32 = -9;
/// A frame id this writer did not give.
pub const TACHYON_E_UNKNOWN_FRAME: i32 = -10;
/// libzstd failed; the writer cannot go on compressing.
pub const TACHYON_E_ZSTD: i32 = -11;
/// The library was built without what the call needs (zstd, or the std parts).
pub const TACHYON_E_UNSUPPORTED: i32 = -12;
/// The file breaks a rule of the format (the reader's message names the offset and rule).
pub const TACHYON_E_FORMAT: i32 = -13;
/// The file ends early.
pub const TACHYON_E_TRUNCATED: i32 = -14;
/// An internal error (a bug in this library) was caught at the boundary.
pub const TACHYON_E_PANIC: i32 = -15;
/// A capture ring had no room: the sample was dropped and counted (not an error of the
/// program; the drain writes the count into the stats trailer).
pub const TACHYON_E_FULL: i32 = -16;

/// Byte order: this machine's, as CPython writes.
pub const TACHYON_BYTE_ORDER_NATIVE: u32 = 0;
/// Byte order: little-endian.
pub const TACHYON_BYTE_ORDER_LITTLE: u32 = 1;
/// Byte order: big-endian.
pub const TACHYON_BYTE_ORDER_BIG: u32 = 2;

/// Sample region stored raw.
pub const TACHYON_COMPRESSION_NONE: u32 = 0;
/// Sample region compressed with zstd (as CPython's `--compression zstd`).
pub const TACHYON_COMPRESSION_ZSTD: u32 = 1;

/// `tachyon_writer_options.mode`: not known (CPython's `mode=-1`; readers show `None`).
pub const TACHYON_MODE_UNKNOWN: i32 = -1;
/// `tachyon_writer_options.mode`: wall-clock time (CPython's `PROFILING_MODE_WALL`, 0).
pub const TACHYON_MODE_WALL: i32 = 0;
/// `tachyon_writer_options.mode`: CPU time (`PROFILING_MODE_CPU`, 1).
pub const TACHYON_MODE_CPU: i32 = 1;
/// `tachyon_writer_options.mode`: time holding the GIL (`PROFILING_MODE_GIL`, 2).
pub const TACHYON_MODE_GIL: i32 = 2;
/// `tachyon_writer_options.mode`: every thread whatever it does (`PROFILING_MODE_ALL`, 3).
pub const TACHYON_MODE_ALL: i32 = 3;
/// `tachyon_writer_options.mode`: threads handling an exception (`PROFILING_MODE_EXCEPTION`, 4).
pub const TACHYON_MODE_EXCEPTION: i32 = 4;

/// `tachyon_writer_options.capture_features`: not known (CPython's `-1`; readers show `None`).
pub const TACHYON_CAPTURE_FEATURES_UNKNOWN: i32 = -1;
/// Capture feature bit: every thread was sampled, not only the main one (`all_threads`).
pub const TACHYON_CAPTURE_FEATURE_ALL_THREADS: i32 = 1;
/// Capture feature bit: native frames (`native`).
pub const TACHYON_CAPTURE_FEATURE_NATIVE: i32 = 2;
/// Capture feature bit: garbage-collection frames (`gc`).
pub const TACHYON_CAPTURE_FEATURE_GC: i32 = 4;
/// Capture feature bit: opcodes (`opcodes`).
pub const TACHYON_CAPTURE_FEATURE_OPCODES: i32 = 8;
/// Capture feature bit: blocking calls (`blocking`).
pub const TACHYON_CAPTURE_FEATURE_BLOCKING: i32 = 16;

/// A thread sample's status bit (CPython 3.15's `THREAD_STATUS_HAS_GIL`): it held the GIL.
pub const TACHYON_THREAD_STATUS_HAS_GIL: u8 = 1;
/// Status bit (`THREAD_STATUS_ON_CPU`): it was running on a CPU.
pub const TACHYON_THREAD_STATUS_ON_CPU: u8 = 2;
/// Status bit (`THREAD_STATUS_UNKNOWN`): its state could not be told.
pub const TACHYON_THREAD_STATUS_UNKNOWN: u8 = 4;
/// Status bit (`THREAD_STATUS_GIL_REQUESTED`): it was waiting for the GIL.
pub const TACHYON_THREAD_STATUS_GIL_REQUESTED: u8 = 8;
/// Status bit (`THREAD_STATUS_HAS_EXCEPTION`): it was handling an exception.
pub const TACHYON_THREAD_STATUS_HAS_EXCEPTION: u8 = 16;
/// Status bit (`THREAD_STATUS_MAIN_THREAD`, new in 3.15): it is the main thread.
pub const TACHYON_THREAD_STATUS_MAIN_THREAD: u8 = 32;

/// The version of this header's structures and calls. 2: `tachyon_writer_options` gained
/// `mode` and `capture_features` at its end (a program built against a version-1 header
/// passes a smaller struct: rebuild it). `tachyon_abi_version` says what the library is.
pub const TACHYON_ABI_VERSION: u32 = 2;

/// The `TACHYON_ABI_VERSION` the library was built with: a program checks it against the
/// header's before its first call when it may meet another build of the library.
#[no_mangle]
pub extern "C" fn tachyon_abi_version() -> u32 {
    TACHYON_ABI_VERSION
}

/// A name length meaning "NUL-terminated": the library measures it.
pub const TACHYON_NUL_TERMINATED: usize = usize::MAX;

/// A frame's opcode value meaning "no opcode".
pub const TACHYON_NO_OPCODE: i32 = -1;

/// What a status code means, as a static NUL-terminated string (never NULL; unknown codes get
/// a message saying so).
#[no_mangle]
pub extern "C" fn tachyon_status_message(status: i32) -> *const c_char {
    let text: &'static [u8] = match status {
        TACHYON_OK => b"ok\0",
        TACHYON_END => b"no more samples\0",
        TACHYON_E_NULL => b"a required pointer argument is NULL\0",
        TACHYON_E_BAD_HANDLE => b"not a handle made by this library\0",
        TACHYON_E_CLOSED => b"the handle was closed\0",
        TACHYON_E_FINALIZED => b"the writer was finalized\0",
        TACHYON_E_ARGUMENT => b"an argument is out of range\0",
        TACHYON_E_MEMORY => b"the memory given is smaller than tachyon_writer_memory_size says\0",
        TACHYON_E_CAPACITY => b"a writer table is full; the sample was refused\0",
        TACHYON_E_LIMIT => b"a format limit was reached; the sample was refused\0",
        TACHYON_E_IO => b"the sink or file failed\0",
        TACHYON_E_UNKNOWN_FRAME => b"a frame id this writer did not give\0",
        TACHYON_E_ZSTD => b"zstd failed\0",
        TACHYON_E_UNSUPPORTED => b"this build of the library does not have that feature\0",
        TACHYON_E_FORMAT => b"the file breaks a rule of the format\0",
        TACHYON_E_TRUNCATED => b"the file ends early\0",
        TACHYON_E_PANIC => b"internal error in the library\0",
        TACHYON_E_FULL => b"the capture ring is full; the sample was dropped and counted\0",
        _ => b"unknown status code\0",
    };
    text.as_ptr().cast()
}

/// The library's version, `"MAJOR.MINOR.PATCH"` (static, NUL-terminated).
#[no_mangle]
pub extern "C" fn tachyon_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// Runs `f`, turning a panic (a bug: nothing on these paths panics on input) into
/// `TACHYON_E_PANIC` so that it never unwinds into C. Without an operating system panics
/// abort (the target's strategy), so there is nothing to catch.
#[inline]
fn guard(f: impl FnOnce() -> i32) -> i32 {
    #[cfg(not(target_os = "none"))]
    {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(TACHYON_E_PANIC)
    }
    #[cfg(target_os = "none")]
    {
        f()
    }
}

/// Bytes of a name given as pointer and length (`TACHYON_NUL_TERMINATED` measures it). NULL
/// is the empty name when the length is 0.
///
/// # Safety
/// `ptr` must point at `len` readable bytes (or a NUL-terminated string).
unsafe fn name_bytes<'a>(ptr: *const c_char, len: usize) -> Result<&'a [u8], i32> {
    if ptr.is_null() {
        return if len == 0 { Ok(&[]) } else { Err(TACHYON_E_NULL) };
    }
    if len == TACHYON_NUL_TERMINATED {
        // SAFETY: the caller promises a NUL-terminated string.
        return Ok(unsafe { core::ffi::CStr::from_ptr(ptr) }.to_bytes());
    }
    // SAFETY: the caller promises `len` readable bytes.
    Ok(unsafe { core::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

/// A firmware linking the static library has no Rust runtime: a panic (a bug; no path panics
/// on input) stops here.
#[cfg(target_os = "none")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {
        core::hint::spin_loop();
    }
}
