//! Capture rings in caller memory: pushes of ids, code pairs and addresses (one from a
//! second thread while the first drains), the counts, the drain into a writer with a
//! resolver written in Rust, the stats, the flush a signal asks for.

use std::ffi::{c_char, c_void};
use std::mem::MaybeUninit;
use std::ptr::{null, null_mut};

use tachyon_c::*;

use crate::common::*;

/// A ring placed one byte into memory the test owns.
struct Ring {
    memory: *mut [u8],
    capture: *mut tachyon_capture,
}

impl Ring {
    fn new(entries: usize, depth: usize, code_pairs: bool) -> Self {
        let bytes = tachyon_capture_memory_size(entries, depth, i32::from(code_pairs));
        let memory: *mut [u8] = Box::into_raw(vec![0u8; bytes + 1].into_boxed_slice());
        let mut capture = null_mut();
        // SAFETY: `bytes` writable bytes one byte in, living until `drop`.
        ok(unsafe { tachyon_capture_init(memory.cast::<u8>().add(1).cast(), bytes, &mut capture) });
        Ring { memory, capture }
    }

    fn counts(&self) -> (tachyon_capture_counts, tachyon_capture_counts64) {
        let (mut small, mut whole) = (MaybeUninit::uninit(), MaybeUninit::uninit());
        // SAFETY: a live ring, structs to fill.
        ok(unsafe { tachyon_capture_get_counts(self.capture, small.as_mut_ptr()) });
        ok(unsafe { tachyon_capture_get_counts64(self.capture, whole.as_mut_ptr()) });
        // SAFETY: filled.
        unsafe { (small.assume_init(), whole.assume_init()) }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: made by Box::into_raw; a ring has nothing to close.
        drop(unsafe { Box::from_raw(self.memory) });
    }
}

/// A pointer a second thread may use: the ring is made for one producer and one drainer.
#[derive(Clone, Copy)]
struct Shared(*const tachyon_capture);
// SAFETY: the ring's words are atomics; one thread pushes, the other drains.
unsafe impl Send for Shared {}

/// Held by every test that drains: a flush asked for by a signal is the process's, taken by
/// whichever drain comes next, and the tests run side by side on threads of one process (a
/// drain of another test took the signal test's request once, in a run of the test command).
fn draining_alone() -> std::sync::MutexGuard<'static, ()> {
    static DRAINING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    DRAINING.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn ring_memory_init_and_nulls() {
    let _alone = draining_alone();
    assert!(tachyon_capture_memory_size(8, 4, 1) > tachyon_capture_memory_size(8, 4, 0));
    assert!(tachyon_capture_memory_size(16, 4, 0) > tachyon_capture_memory_size(8, 4, 0));
    assert_eq!(tachyon_capture_memory_size(usize::MAX, usize::MAX, 1), usize::MAX, "saturates");
    let mut memory = vec![0u8; 16];
    let mut capture = null_mut();
    // SAFETY (each call below): NULL or valid pointers, as the header allows.
    assert_eq!(unsafe { tachyon_capture_init(memory.as_mut_ptr().cast(), 16, null_mut()) }, TACHYON_E_NULL);
    assert_eq!(unsafe { tachyon_capture_init(null_mut(), 16, &mut capture) }, TACHYON_E_NULL);
    assert_eq!(unsafe { tachyon_capture_init(memory.as_mut_ptr().cast(), 16, &mut capture) }, TACHYON_E_MEMORY);
    assert!(capture.is_null());
    let ids = [1u32];
    assert_eq!(unsafe { tachyon_capture_push_ids(null(), 0, 0, 1, 0, ids.as_ptr(), 1, 0) }, TACHYON_E_NULL);
    assert_eq!(unsafe { tachyon_capture_push_code(null(), 0, 0, 1, 0, null(), 0) }, TACHYON_E_NULL);
    assert_eq!(unsafe { tachyon_capture_push_addresses(null(), 0, 0, 1, 0, null(), 0) }, TACHYON_E_NULL);
    assert_eq!(unsafe { tachyon_capture_get_counts(null(), null_mut()) }, TACHYON_E_NULL);
    assert_eq!(unsafe { tachyon_capture_get_counts64(null(), null_mut()) }, TACHYON_E_NULL);
    assert_eq!(unsafe { tachyon_capture_drain(null(), null_mut(), None, null_mut(), 1, null_mut()) }, TACHYON_E_NULL);
    let ring = Ring::new(4, 4, false);
    assert_eq!(unsafe { tachyon_capture_push_ids(ring.capture, 0, 0, 1, 0, null(), 1, 0) }, TACHYON_E_NULL);
    // Memory that never held a ring (as large as any handle) is no handle.
    let zeros = vec![0u64; 4096];
    let foreign = zeros.as_ptr().cast::<tachyon_capture>();
    assert_eq!(unsafe { tachyon_capture_push_ids(foreign, 0, 0, 1, 0, ids.as_ptr(), 1, 0) }, TACHYON_E_BAD_HANDLE);
}

#[test]
fn ids_pushed_either_way_round_are_drained_innermost_first() {
    let _alone = draining_alone();
    let placed = Placed::new(&options());
    let w = placed.writer;
    let mut ids = [0u32; 3];
    for (id, name) in ids.iter_mut().zip([c"inner", c"middle", c"outer"]) {
        // SAFETY: a live writer, valid pointers.
        ok(unsafe { tachyon_writer_intern_frame(w, &c_frame(c"/app/x.py", name, 1), id) });
    }
    let ring = Ring::new(4, 8, false);
    let root_first = [ids[2], ids[1], ids[0]];
    // SAFETY (each call below): a live ring and writer, valid pointers.
    ok(unsafe { tachyon_capture_push_ids(ring.capture, 100, 0, 9, 2, ids.as_ptr(), 3, 0) });
    ok(unsafe {
        tachyon_capture_push_ids(ring.capture, 200, 0, 9, 2, root_first.as_ptr(), 3, TACHYON_CAPTURE_ROOT_FIRST)
    });
    // A full ring drops and counts.
    let mut full = 0;
    for t in 0..10 {
        if unsafe { tachyon_capture_push_ids(ring.capture, 300 + t, 0, 9, 2, ids.as_ptr(), 3, 0) } == TACHYON_E_FULL {
            full += 1;
        }
    }
    let (counts, counts64) = ring.counts();
    assert!(full > 0);
    assert_eq!((u64::from(counts.dropped), counts64.dropped), (full, full));
    assert_eq!(u64::from(counts.pushed), counts64.pushed);
    let mut taken = 0usize;
    ok(unsafe { tachyon_capture_drain(ring.capture, w, None, null_mut(), usize::MAX, &mut taken) });
    assert_eq!(taken as u64, counts64.pushed);
    let rings = [ring.capture.cast_const()];
    ok(unsafe { tachyon_capture_set_stats(w, rings.as_ptr(), 1) });
    assert_eq!(unsafe { tachyon_capture_set_stats(w, null(), 1) }, TACHYON_E_NULL);
    ok(unsafe { tachyon_writer_finalize(w, null_mut()) });
    assert_eq!(unsafe { tachyon_capture_drain(ring.capture, w, None, null_mut(), 1, null_mut()) }, TACHYON_E_FINALIZED);
    let (info, samples, reader) = read_memory(&placed.bytes());
    assert_eq!(samples.len(), taken);
    assert_eq!(samples[0].4, ids);
    assert_eq!(samples[1].4, ids, "root first, read innermost first");
    assert_eq!((samples[0].0, samples[0].1, samples[0].3), (100, 9, 2));
    assert_eq!(info.has_stats, 1);
    assert!(info.stats.missed_samples > 0.0, "the dropped samples are missed ones");
    close_reader(reader);
}

/// A runtime's code table: code id → function name.
struct Code {
    names: Vec<Box<[u8]>>,
    calls: usize,
}

unsafe extern "C" fn resolve(context: *mut c_void, code: u64, offset: u32, frame: *mut tachyon_frame) -> i32 {
    // SAFETY: the test's `Code`; `frame` is the drain's to fill.
    let (table, frame) = unsafe { (&mut *context.cast::<Code>(), &mut *frame) };
    table.calls += 1;
    let Some(name) = table.names.get(code as usize) else { return 1 };
    frame.filename = c"/jit/code.lua".as_ptr();
    frame.filename_len = TACHYON_NUL_TERMINATED;
    // Exactly the name's bytes: nothing after them may be read.
    frame.funcname = name.as_ptr().cast::<c_char>();
    frame.funcname_len = name.len();
    frame.lineno = offset as i32;
    frame.end_lineno = offset as i32;
    0
}

#[test]
fn code_pairs_and_addresses_resolved_by_a_callback_one_thread_pushing_while_another_drains() {
    let _alone = draining_alone();
    let placed = Placed::new(&options());
    let w = placed.writer;
    let ring = Ring::new(8, 4, true);
    let code =
        Box::into_raw(Box::new(Code { names: vec![b"update".as_slice().into(), b"draw".as_slice().into()], calls: 0 }));
    const SAMPLES: u64 = 40;
    let shared = Shared(ring.capture);
    let mut taken_in_all = 0usize;
    std::thread::scope(|s| {
        s.spawn(move || {
            let shared = shared;
            let mut t = 0;
            while t < SAMPLES {
                let frames =
                    [tachyon_code_frame { code: t % 2, offset: 10 }, tachyon_code_frame { code: 7, offset: 1 }];
                // SAFETY: a live ring of code pairs, valid pointers; this thread alone pushes.
                match unsafe { tachyon_capture_push_code(shared.0, t, 0, 5, 0, frames.as_ptr(), 2) } {
                    TACHYON_OK => t += 1,
                    TACHYON_E_FULL => std::thread::yield_now(),
                    status => panic!("{}", message(status)),
                }
            }
        });
        while (taken_in_all as u64) < SAMPLES {
            let mut taken = 0usize;
            // SAFETY: a live ring and writer; `code` lives until after the scope.
            ok(unsafe { tachyon_capture_drain(ring.capture, w, Some(resolve), code.cast(), 4, &mut taken) });
            taken_in_all += taken;
            std::thread::yield_now();
        }
    });
    // Addresses: the same ring takes them as code pairs of their own.
    let addresses = [1usize, 0];
    // SAFETY: a live ring, valid pointers.
    ok(unsafe { tachyon_capture_push_addresses(ring.capture, 99, 0, 5, 0, addresses.as_ptr(), 2) });
    let mut taken = 0usize;
    ok(unsafe { tachyon_capture_drain(ring.capture, w, Some(resolve), code.cast(), 4, &mut taken) });
    assert_eq!(taken, 1);
    ok(unsafe { tachyon_writer_finalize(w, null_mut()) });
    let (_, samples, reader) = read_memory(&placed.bytes());
    assert_eq!(samples.len() as u64, SAMPLES + 1);
    for (i, s) in samples.iter().take(SAMPLES as usize).enumerate() {
        let inner = frame_of(reader, s.4[0]);
        assert_eq!((inner.0.as_str(), inner.1.as_str(), inner.2), ("/jit/code.lua", ["update", "draw"][i % 2], 10));
        // Code 7 is not in the table: the drain writes `~:<unknown>`.
        assert_eq!(frame_of(reader, s.4[1]).1, "<unknown>");
    }
    assert_eq!(frame_of(reader, samples[SAMPLES as usize].4[0]).1, "draw");
    close_reader(reader);
    // SAFETY: made above, no longer used by any call.
    let code = unsafe { Box::from_raw(code) };
    assert!(code.calls > 0);
}

#[test]
#[cfg_attr(miri, ignore = "sigaction and raise are libc calls Miri does not emulate")]
fn a_signal_asks_the_next_drain_to_flush() {
    let _alone = draining_alone();
    let mut placed = Placed::new(&options());
    let w = placed.writer;
    let ring = Ring::new(4, 4, false);
    let mut id = 0u32;
    // SAFETY (each call below): live handles, valid pointers; SIGUSR2's handler only stores a flag.
    ok(unsafe { tachyon_writer_intern_frame(w, &c_frame(c"a.py", c"f", 1), &mut id) });
    assert_eq!(tachyon_flush_on_signal(-1), TACHYON_E_ARGUMENT);
    ok(tachyon_flush_on_signal(libc::SIGUSR2));
    ok(unsafe { tachyon_capture_push_ids(ring.capture, 1, 0, 1, 0, &id, 1, 0) });
    ok(unsafe { tachyon_capture_drain(ring.capture, w, None, null_mut(), 8, null_mut()) });
    let before = placed.sink().flushes;
    assert_eq!(unsafe { libc::raise(libc::SIGUSR2) }, 0);
    ok(unsafe { tachyon_capture_push_ids(ring.capture, 2, 0, 1, 0, &id, 1, 0) });
    ok(unsafe { tachyon_capture_drain(ring.capture, w, None, null_mut(), 8, null_mut()) });
    assert_eq!(placed.sink().flushes, before + 1);
    // Asked once, flushed once.
    ok(unsafe { tachyon_capture_drain(ring.capture, w, None, null_mut(), 8, null_mut()) });
    assert_eq!(placed.sink().flushes, before + 1);
}
