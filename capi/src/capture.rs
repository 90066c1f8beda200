//! Capture rings: samples pushed from a signal handler or an interrupt, drained into a
//! writer by another thread (`tachyon_core::capture`).
//!
//! Which functions may run in a signal handler: `tachyon_capture_push_ids`,
//! `tachyon_capture_push_code`, `tachyon_capture_push_addresses` and
//! `tachyon_capture_get_counts` — they touch only the ring's
//! memory with atomic loads and stores, allocate nothing, take no lock, call nothing and do
//! work bounded by the stack's depth. Every other function is for ordinary context.

use core::ffi::c_void;
use core::mem::{align_of, size_of};

use tachyon_core::capture::{entry_words, AtomicU32, Capture, Resolver, Taken};
use tachyon_core::{Frame, FrameId};

use crate::writer::{core_frame, tachyon_frame, tachyon_writer, with_periods};
use crate::*;

const LIVE: u64 = 0x5441_4348_4341_5054; // "TACHCAPT"

/// A capture ring (opaque to C): placed at the start of the caller's memory, its words
/// after it.
pub struct tachyon_capture {
    magic: u64,
    ring: Capture<'static>,
}

/// One frame of a runtime's own: an opaque code id (a JIT's code object, a function
/// pointer) and an offset in it, turned into a frame by the drain's resolve callback.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct tachyon_code_frame {
    /// The code object's id.
    pub code: u64,
    /// The offset in it (a bytecode index, a return address's distance from the start).
    pub offset: u32,
}

/// What a ring has seen, each count's low 32 bits (they wrap at 2^32: a ring dropping at
/// 10 kHz wraps after five days). `tachyon_capture_counts64` has the whole counts.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct tachyon_capture_counts {
    /// Samples pushed and kept.
    pub pushed: u32,
    /// Samples dropped because the ring was full (or the stack longer than the ring).
    pub dropped: u32,
    /// Entries the drain refused as garbled (two pushes at once into one ring).
    pub garbled: u32,
}

/// What a ring has seen, whole (62-bit counts: they do not wrap in any real run).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct tachyon_capture_counts64 {
    /// Samples pushed and kept.
    pub pushed: u64,
    /// Samples dropped because the ring was full (or the stack longer than the ring).
    pub dropped: u64,
    /// Entries the drain refused as garbled (two pushes at once into one ring).
    pub garbled: u64,
}

/// `tachyon_capture_push_ids` flag: the ids are outermost first (a shadow stack's order);
/// the innermost 256 are kept.
pub const TACHYON_CAPTURE_ROOT_FIRST: u32 = 1;

/// Turns a `tachyon_code_frame` into a frame for the drain: fills `*frame` (names valid
/// until the callback is called again) and returns 0, or non-zero for an unknown code (the
/// frame is then `<unknown>` in `~`). Called on the draining thread, never in a handler.
pub type tachyon_resolve_fn =
    Option<unsafe extern "C" fn(context: *mut c_void, code: u64, offset: u32, frame: *mut tachyon_frame) -> i32>;

/// Bytes of memory a ring needs to hold `entries` samples of `depth` frames at once (frame
/// ids, or `(code, offset)` pairs when `code_pairs` is non-zero), the handle and alignment
/// slack included. Async-signal-safe.
#[no_mangle]
pub extern "C" fn tachyon_capture_memory_size(entries: usize, depth: usize, code_pairs: i32) -> usize {
    let words = entries.saturating_add(1).saturating_mul(entry_words(depth, code_pairs != 0));
    size_of::<tachyon_capture>()
        .saturating_add(align_of::<tachyon_capture>())
        .saturating_add(words.saturating_mul(size_of::<u32>()))
}

/// Places a ring in `memory` (`memory_len` bytes, any alignment): the handle first, every
/// remaining whole word for entries. Stores the handle in `*capture`. The memory must stay
/// valid, and be used for nothing else, while the ring is in use; there is nothing to free.
///
/// # Safety
/// Pointers must be NULL or valid; `memory` must hold `memory_len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn tachyon_capture_init(
    memory: *mut c_void,
    memory_len: usize,
    capture: *mut *mut tachyon_capture,
) -> i32 {
    guard(|| {
        if capture.is_null() {
            return TACHYON_E_NULL;
        }
        // SAFETY: checked non-null.
        unsafe { capture.write(core::ptr::null_mut()) };
        if memory.is_null() {
            return TACHYON_E_NULL;
        }
        let align = align_of::<tachyon_capture>();
        let pad = (align - (memory as usize) % align) % align;
        let head = pad + size_of::<tachyon_capture>();
        let words = memory_len.saturating_sub(head) / size_of::<u32>();
        if memory_len < head || words == 0 {
            return TACHYON_E_MEMORY;
        }
        // SAFETY: `pad` bytes in is aligned for the handle, and `head + 4 * words` bytes are
        // inside the memory; the words follow the handle, aligned for u32 (the handle's
        // alignment is at least 4 and its size a multiple of it).
        unsafe {
            let handle = memory.cast::<u8>().add(pad).cast::<tachyon_capture>();
            let start = memory.cast::<u8>().add(head).cast::<AtomicU32>();
            for i in 0..words {
                start.add(i).write(AtomicU32::new(0));
            }
            let ring = Capture::new(core::slice::from_raw_parts(start, words));
            handle.write(tachyon_capture { magic: LIVE, ring });
            capture.write(handle);
        }
        TACHYON_OK
    })
}

/// The ring behind `c`, or NULL/foreign. Reads only the handle's memory.
///
/// # Safety
/// `c` must be NULL or point at readable memory of a handle's size.
unsafe fn ring<'a>(c: *const tachyon_capture) -> Result<&'a Capture<'static>, i32> {
    if c.is_null() {
        return Err(TACHYON_E_NULL);
    }
    if (c as usize) % align_of::<tachyon_capture>() != 0 {
        return Err(TACHYON_E_BAD_HANDLE);
    }
    // SAFETY: aligned and readable by the caller's promise; the magic says a ring lives here.
    unsafe {
        if core::ptr::addr_of!((*c).magic).read() != LIVE {
            return Err(TACHYON_E_BAD_HANDLE);
        }
        Ok(&(*c).ring)
    }
}

/// The caller's `count` items at `ptr`: NULL is no items when `count` is 0, else
/// `TACHYON_E_NULL`. Async-signal-safe (no call, no allocation).
///
/// # Safety
/// `ptr` must be NULL or point at `count` readable items.
#[inline(always)]
unsafe fn items<'a, T>(ptr: *const T, count: usize) -> Result<&'a [T], i32> {
    match (ptr.is_null(), count) {
        (_, 0) => Ok(&[]),
        (true, _) => Err(TACHYON_E_NULL),
        // SAFETY: `count` items by the caller's promise.
        (false, _) => Ok(unsafe { core::slice::from_raw_parts(ptr, count) }),
    }
}

/// Pushes a sample whose stack is frame ids from `tachyon_writer_intern_frame` (innermost
/// first, or outermost first with `TACHYON_CAPTURE_ROOT_FIRST`; 256 kept). Returns
/// `TACHYON_OK`, or `TACHYON_E_FULL` when the ring had no room (the sample is dropped and
/// counted). **Async-signal-safe** and wait-free: one producer per ring at a time (a
/// thread's signal handler, an interrupt).
///
/// # Safety
/// `capture` must be NULL or a ring handle; `ids` NULL (with `count` 0) or `count` ids.
#[no_mangle]
pub unsafe extern "C" fn tachyon_capture_push_ids(
    capture: *const tachyon_capture,
    timestamp_us: u64,
    interpreter_id: u32,
    thread_id: u64,
    status: u8,
    ids: *const u32,
    count: usize,
    flags: u32,
) -> i32 {
    // No `guard`: nothing here can panic, and unwinding machinery has no place in a handler.
    // SAFETY: by the function's contract.
    let ring = match unsafe { ring(capture) } {
        Ok(r) => r,
        Err(status) => return status,
    };
    // SAFETY: `count` ids by the caller's promise.
    let ids = match unsafe { items(ids, count) } {
        Ok(items) => items,
        Err(status) => return status,
    };
    let taken = Taken { timestamp_us, interpreter_id, thread_id, status };
    let pushed = if flags & TACHYON_CAPTURE_ROOT_FIRST != 0 {
        ring.push_ids_root_first(taken, ids)
    } else {
        // SAFETY: FrameId is a transparent u32.
        ring.push_ids(taken, unsafe { &*(ids as *const [u32] as *const [FrameId]) })
    };
    match pushed {
        Ok(()) => TACHYON_OK,
        Err(_) => TACHYON_E_FULL,
    }
}

/// Pushes a sample whose stack is the runtime's own `(code, offset)` pairs, innermost first
/// (256 kept); the drain turns them into frames with its resolve callback. As
/// `tachyon_capture_push_ids`: **async-signal-safe**, `TACHYON_E_FULL` when dropped.
///
/// # Safety
/// `capture` must be NULL or a ring handle; `frames` NULL (with `count` 0) or `count` frames.
#[no_mangle]
pub unsafe extern "C" fn tachyon_capture_push_code(
    capture: *const tachyon_capture,
    timestamp_us: u64,
    interpreter_id: u32,
    thread_id: u64,
    status: u8,
    frames: *const tachyon_code_frame,
    count: usize,
) -> i32 {
    // SAFETY: by the function's contract.
    let ring = match unsafe { ring(capture) } {
        Ok(r) => r,
        Err(status) => return status,
    };
    // SAFETY: `count` frames by the caller's promise.
    let frames = match unsafe { items(frames, count) } {
        Ok(items) => items,
        Err(status) => return status,
    };
    let taken = Taken { timestamp_us, interpreter_id, thread_id, status };
    match ring.push_code_from(taken, frames.iter().map(|f| (f.code, f.offset))) {
        Ok(()) => TACHYON_OK,
        Err(_) => TACHYON_E_FULL,
    }
}

/// Pushes a sample whose stack is native addresses as an unwinder gives them, innermost
/// first: the interrupted instruction (the signal context's program counter), then return
/// addresses (256 kept). They are kept as code pairs `(address, 0)`, each return address
/// less one (an address inside its call, so that the call's own line is the one named);
/// drain the ring with `tachyon_modules_resolve` and its `tachyon_modules` as context to
/// write them as `MODULE+0xADDRESS` frames that `tachyon symbolize` names later. As
/// `tachyon_capture_push_ids`: **async-signal-safe**, `TACHYON_E_FULL` when dropped.
///
/// # Safety
/// `capture` must be NULL or a ring handle; `addresses` NULL (with `count` 0) or `count`
/// addresses.
#[no_mangle]
pub unsafe extern "C" fn tachyon_capture_push_addresses(
    capture: *const tachyon_capture,
    timestamp_us: u64,
    interpreter_id: u32,
    thread_id: u64,
    status: u8,
    addresses: *const usize,
    count: usize,
) -> i32 {
    // SAFETY: by the function's contract.
    let ring = match unsafe { ring(capture) } {
        Ok(r) => r,
        Err(status) => return status,
    };
    // SAFETY: `count` addresses by the caller's promise.
    let addresses = match unsafe { items(addresses, count) } {
        Ok(items) => items,
        Err(status) => return status,
    };
    let taken = Taken { timestamp_us, interpreter_id, thread_id, status };
    match ring.push_addresses(taken, addresses) {
        Ok(()) => TACHYON_OK,
        Err(_) => TACHYON_E_FULL,
    }
}

/// What the ring has seen so far, each count's low 32 bits (see `tachyon_capture_counts`;
/// `tachyon_capture_get_counts64` gives them whole). Async-signal-safe.
///
/// # Safety
/// Pointers must be NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn tachyon_capture_get_counts(
    capture: *const tachyon_capture,
    counts: *mut tachyon_capture_counts,
) -> i32 {
    let mut whole = tachyon_capture_counts64::default();
    // SAFETY: by the function's contract; `whole` is ours.
    let status = unsafe {
        tachyon_capture_get_counts64(capture, if counts.is_null() { core::ptr::null_mut() } else { &mut whole })
    };
    if status == TACHYON_OK {
        let c = tachyon_capture_counts {
            pushed: whole.pushed as u32,
            dropped: whole.dropped as u32,
            garbled: whole.garbled as u32,
        };
        // SAFETY: non-null (the call above refused NULL).
        unsafe { counts.write(c) };
    }
    status
}

/// What the ring has seen so far, whole. Async-signal-safe (loads only: it may run while the
/// ring's producer pushes, and gives counts the ring had).
///
/// # Safety
/// Pointers must be NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn tachyon_capture_get_counts64(
    capture: *const tachyon_capture,
    counts: *mut tachyon_capture_counts64,
) -> i32 {
    // SAFETY: by the function's contract.
    let ring = match unsafe { ring(capture) } {
        Ok(r) => r,
        Err(status) => return status,
    };
    if counts.is_null() {
        return TACHYON_E_NULL;
    }
    let c = tachyon_capture_counts64 { pushed: ring.pushed(), dropped: ring.dropped(), garbled: ring.garbled() };
    // SAFETY: checked non-null.
    unsafe { counts.write(c) };
    TACHYON_OK
}

/// The C callback as the core's resolver.
struct CallbackResolver {
    resolve: tachyon_resolve_fn,
    context: *mut c_void,
}

impl Resolver for CallbackResolver {
    fn resolve(&self, code: u64, offset: u32) -> Frame<'_> {
        let unknown = Frame::new(b"~", b"<unknown>");
        let Some(resolve) = self.resolve else { return unknown };
        let mut f = tachyon_frame {
            filename: core::ptr::null(),
            filename_len: 0,
            funcname: core::ptr::null(),
            funcname_len: 0,
            lineno: -1,
            end_lineno: -1,
            col: -1,
            end_col: -1,
            opcode: TACHYON_NO_OPCODE,
        };
        // SAFETY: the callback's contract: it fills `f` with names valid until it is called
        // again; the drain interns (copies) them before that.
        unsafe {
            if resolve(self.context, code, offset, &mut f) != 0 {
                return unknown;
            }
            core_frame(&f).unwrap_or(unknown)
        }
    }
}

/// Moves up to `max` samples from `capture` into `writer` (plain or journaled), resolving
/// code pairs with `resolve` (may be NULL for rings of frame ids only); stores how many were
/// taken in `*taken` (may be NULL). Samples the writer refuses for a limit are counted for
/// the stats and the drain goes on; a sink error stops it (`TACHYON_E_IO`). If a flush was
/// requested by the signal `tachyon_flush_on_signal` installed, the writer is flushed too.
/// For one thread at a time per ring and per writer; never in a signal handler.
///
/// # Safety
/// Pointers must be NULL or valid handles.
#[no_mangle]
pub unsafe extern "C" fn tachyon_capture_drain(
    capture: *const tachyon_capture,
    writer: *mut tachyon_writer,
    resolve: tachyon_resolve_fn,
    context: *mut c_void,
    max: usize,
    taken: *mut usize,
) -> i32 {
    guard(|| {
        // SAFETY: the caller's pointer, checked.
        let ring = match unsafe { ring(capture) } {
            Ok(r) => r,
            Err(status) => return status,
        };
        let body = |w: &mut tachyon_writer| {
            if let Err(status) = w.open() {
                return status;
            }
            let resolver = CallbackResolver { resolve, context };
            match w.writer.drain(&mut w.drain, ring, &resolver, max) {
                Ok(n) => {
                    if !taken.is_null() {
                        // SAFETY: checked non-null.
                        unsafe { taken.write(n) };
                    }
                    flush_if_asked(w)
                }
                Err(e) => w.write_error(e),
            }
        };
        // SAFETY: the caller's pointer; the period callback runs once `body` is done with it.
        unsafe { with_periods(writer, body) }
    })
}

/// Sets `writer`'s stats trailer from what `tachyon_capture_drain` took into it and what
/// the `count` rings dropped, in the meanings CPython's profiler gives the fields:
/// duration from the start time to the last sample, samples per second, the error rate as
/// the percentage of taken samples the writer refused, and `missed_samples` as the
/// percentage of all samples that never reached it. Call before finalize (the last call
/// wins).
///
/// # Safety
/// `writer` must be NULL or valid; `captures` NULL (with `count` 0) or `count` ring handles.
#[no_mangle]
pub unsafe extern "C" fn tachyon_capture_set_stats(
    writer: *mut tachyon_writer,
    captures: *const *const tachyon_capture,
    count: usize,
) -> i32 {
    guard(|| {
        // SAFETY: the caller's pointer, checked by `live`.
        let w = match unsafe { live(writer) } {
            Ok(w) => w,
            Err(status) => return status,
        };
        if captures.is_null() && count != 0 {
            return w.fail(TACHYON_E_NULL, format_args!("captures is NULL with count {count}"));
        }
        if let Err(status) = w.open() {
            return status;
        }
        let mut dropped = 0u64;
        for i in 0..count {
            // SAFETY: `count` handles by the caller's promise.
            match unsafe { ring(*captures.add(i)) } {
                Ok(r) => dropped = dropped.wrapping_add(r.dropped()).wrapping_add(r.garbled()),
                Err(status) => return w.fail(status, format_args!("captures[{i}] is not a ring")),
            }
        }
        let stats = w.drain.stats(w.start_time_us, dropped);
        match w.writer.set_stats(stats) {
            Ok(()) => TACHYON_OK,
            Err(e) => w.write_error(e),
        }
    })
}

#[cfg(all(feature = "std", unix))]
mod signal {
    //! A flush asked for by a signal: the handler only sets a flag; the next drain flushes.

    use core::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    static FLUSH_ASKED: AtomicBool = AtomicBool::new(false);

    extern "C" fn on_signal(_: libc::c_int) {
        FLUSH_ASKED.store(true, Ordering::Relaxed);
    }

    /// Installs a handler for `signo` (say `SIGUSR2`) that asks the next
    /// `tachyon_capture_drain` on any writer to flush it afterwards (as gperftools'
    /// `CPUPROFILESIGNAL` lets a user act on a running process). The handler only stores a
    /// flag. Host builds on Unix only; ordinary context.
    #[no_mangle]
    pub extern "C" fn tachyon_flush_on_signal(signo: i32) -> i32 {
        // SAFETY: a zeroed sigaction is a valid value to fill in; the handler is
        // async-signal-safe (one atomic store).
        unsafe {
            let mut action: libc::sigaction = core::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(signo, &action, core::ptr::null_mut()) != 0 {
                return TACHYON_E_ARGUMENT;
            }
        }
        TACHYON_OK
    }

    pub(super) fn asked() -> bool {
        FLUSH_ASKED.swap(false, Ordering::Relaxed)
    }
}

#[cfg(all(feature = "std", unix))]
pub use signal::tachyon_flush_on_signal;

/// Flushes `w` if a signal asked for it; the status of the drain.
fn flush_if_asked(w: &mut tachyon_writer) -> i32 {
    #[cfg(all(feature = "std", unix))]
    if signal::asked() {
        if let Err(e) = w.writer.flush() {
            return w.write_error(e);
        }
    }
    let _ = &w;
    TACHYON_OK
}
