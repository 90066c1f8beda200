//! What the tests share: a sink into memory with the callbacks a C caller gives, a writer
//! placed in caller memory, frames with C names, and the status checks.

use std::ffi::{c_char, c_void, CStr};
use std::mem::MaybeUninit;
use std::ptr::null_mut;

use tachyon_c::*;

/// `status` is `TACHYON_OK`, or the test fails naming it.
#[track_caller]
pub fn ok(status: i32) {
    assert_eq!(status, TACHYON_OK, "{}", message(status));
}

/// What the library says a status means.
pub fn message(status: i32) -> String {
    // SAFETY: the library returns a static NUL-terminated string for any code.
    unsafe { CStr::from_ptr(tachyon_status_message(status)) }.to_string_lossy().into_owned()
}

/// A NUL-terminated message the library returned, as text ("" for NULL).
pub fn text(ptr: *const c_char) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: the library's messages are NUL-terminated and live until the next call.
    unsafe { CStr::from_ptr(ptr) }.to_string_lossy().into_owned()
}

/// A sink into memory, as a C program would keep one: bytes at offsets, writes that fail
/// on demand, flushes counted.
#[derive(Default)]
pub struct Memory {
    pub bytes: Vec<u8>,
    pub at: usize,
    /// The next this many writes fail.
    pub failing_writes: usize,
    pub flushes: usize,
}

unsafe extern "C" fn write(context: *mut c_void, data: *const u8, len: usize) -> isize {
    // SAFETY: the context is the `Memory` the test gave; `data` holds `len` bytes.
    let (memory, data) = unsafe { (&mut *context.cast::<Memory>(), std::slice::from_raw_parts(data, len)) };
    if memory.failing_writes > 0 {
        memory.failing_writes -= 1;
        return -1;
    }
    let end = memory.at + data.len();
    if memory.bytes.len() < end {
        memory.bytes.resize(end, 0);
    }
    memory.bytes[memory.at..end].copy_from_slice(data);
    memory.at = end;
    len as isize
}

unsafe extern "C" fn seek(context: *mut c_void, offset: u64) -> i32 {
    // SAFETY: the context is the test's `Memory`.
    let memory = unsafe { &mut *context.cast::<Memory>() };
    memory.at = offset as usize;
    0
}

unsafe extern "C" fn flush(context: *mut c_void) -> i32 {
    // SAFETY: the context is the test's `Memory`.
    unsafe { (*context.cast::<Memory>()).flushes += 1 };
    0
}

/// The callbacks over `memory`.
pub fn sink(memory: *mut Memory) -> tachyon_sink {
    tachyon_sink { context: memory.cast(), write: Some(write), seek: Some(seek), flush: Some(flush) }
}

/// Default options, with tables small enough for Miri.
pub fn options() -> tachyon_writer_options {
    let mut o = MaybeUninit::uninit();
    // SAFETY: a valid pointer to fill.
    ok(unsafe { tachyon_writer_options_init(o.as_mut_ptr()) });
    // SAFETY: filled by the call.
    let mut o = unsafe { o.assume_init() };
    (o.string_bytes, o.strings, o.frames, o.threads, o.rle_budget) = (4096, 64, 64, 4, 4096);
    o
}

/// A writer placed in memory the test owns (started one byte in: any alignment is taken),
/// writing into a [`Memory`].
pub struct Placed {
    memory: *mut [u8],
    pub sink: *mut Memory,
    pub writer: *mut tachyon_writer,
}

impl Placed {
    pub fn new(options: &tachyon_writer_options) -> Self {
        let mut bytes = 0usize;
        // SAFETY: valid pointers.
        ok(unsafe { tachyon_writer_memory_size(options, &mut bytes) });
        let memory: *mut [u8] = Box::into_raw(vec![0u8; bytes + 1].into_boxed_slice());
        let sink_memory = Box::into_raw(Box::<Memory>::default());
        let mut writer = null_mut();
        let sink = sink(sink_memory);
        // SAFETY: `bytes` writable bytes one byte into the allocation, valid pointers; the
        // memory and the sink live until `drop`, after the writer is closed.
        let status =
            unsafe { tachyon_writer_init(memory.cast::<u8>().add(1).cast(), bytes, options, &sink, &mut writer) };
        ok(status);
        assert!(!writer.is_null());
        Placed { memory, sink: sink_memory, writer }
    }

    /// The sink's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        // SAFETY: the test's sink, not in a call of the library now.
        unsafe { (*self.sink).bytes.clone() }
    }

    /// The sink.
    pub fn sink(&mut self) -> &mut Memory {
        // SAFETY: as for `bytes`.
        unsafe { &mut *self.sink }
    }
}

impl Drop for Placed {
    fn drop(&mut self) {
        // SAFETY: the handle is live or closed; closing twice is a status, not a crash.
        let status = unsafe { tachyon_writer_close(self.writer) };
        assert!(status == TACHYON_OK || status == TACHYON_E_CLOSED, "{}", message(status));
        // SAFETY: made by Box::into_raw in `new`, the writer closed.
        unsafe {
            drop(Box::from_raw(self.memory));
            drop(Box::from_raw(self.sink));
        }
    }
}

/// A frame of C strings (NUL-terminated: the library measures them).
pub fn c_frame(filename: &CStr, funcname: &CStr, lineno: i32) -> tachyon_frame {
    tachyon_frame {
        filename: filename.as_ptr(),
        filename_len: TACHYON_NUL_TERMINATED,
        funcname: funcname.as_ptr(),
        funcname_len: TACHYON_NUL_TERMINATED,
        lineno,
        end_lineno: lineno,
        col: -1,
        end_col: -1,
        opcode: TACHYON_NO_OPCODE,
    }
}

/// A frame whose names are exactly their bytes: no NUL after them and, for names in an
/// allocation of their own length (a `Box<[u8]>`), nothing readable past their end, so a
/// read past a length is out of bounds.
pub fn exact_frame(filename: &[u8], funcname: &[u8], lineno: i32) -> tachyon_frame {
    tachyon_frame {
        filename: filename.as_ptr().cast(),
        filename_len: filename.len(),
        funcname: funcname.as_ptr().cast(),
        funcname_len: funcname.len(),
        lineno,
        end_lineno: lineno + 2,
        col: 4,
        end_col: 9,
        opcode: 7,
    }
}

/// `bytes` in an allocation of exactly their length.
pub fn exact(bytes: &[u8]) -> Box<[u8]> {
    bytes.into()
}

/// A sample as the reader gives it: (timestamp, thread, interpreter, status, frame ids).
pub type Sample = (u64, u64, u32, u8, Vec<u32>);

/// A reader of `bytes` (open: the caller closes it), its info and samples.
pub fn read_memory(bytes: &[u8]) -> (tachyon_info, Vec<Sample>, *mut tachyon_reader) {
    let mut reader = null_mut();
    // SAFETY: `bytes` lives while the reader is used (the caller closes it first).
    ok(unsafe { tachyon_reader_open_memory(bytes.as_ptr(), bytes.len(), &mut reader) });
    let (info, samples) = read_all(reader);
    (info, samples, reader)
}

/// Every sample of an open reader, and its info.
pub fn read_all(reader: *mut tachyon_reader) -> (tachyon_info, Vec<Sample>) {
    let mut info = MaybeUninit::uninit();
    // SAFETY: a live reader and a struct to fill.
    ok(unsafe { tachyon_reader_info(reader, info.as_mut_ptr()) });
    // SAFETY: filled.
    let info = unsafe { info.assume_init() };
    let mut samples = Vec::new();
    loop {
        let mut s = MaybeUninit::uninit();
        // SAFETY: as above.
        match unsafe { tachyon_reader_next_sample(reader, s.as_mut_ptr()) } {
            TACHYON_END => break,
            status => ok(status),
        }
        // SAFETY: filled; the ids live until the next call.
        let s = unsafe { s.assume_init() };
        let ids = unsafe { std::slice::from_raw_parts(s.frame_ids, s.frame_count) }.to_vec();
        samples.push((s.timestamp_us, s.thread_id, s.interpreter_id, s.status, ids));
    }
    (info, samples)
}

/// Frame `id` of a reader: (file, function, line, end line, column, end column, opcode).
pub fn frame_of(reader: *mut tachyon_reader, id: u32) -> (String, String, i32, i32, i32, i32, i32) {
    let mut f = MaybeUninit::uninit();
    // SAFETY: a live reader.
    ok(unsafe { tachyon_reader_frame(reader, id, f.as_mut_ptr()) });
    // SAFETY: filled; the names point into the reader's tables.
    let f = unsafe { f.assume_init() };
    let name = |p: *const c_char, len: usize| {
        // SAFETY: `len` bytes at `p`, in the reader's tables.
        String::from_utf8_lossy(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }).into_owned()
    };
    (
        name(f.filename, f.filename_len),
        name(f.funcname, f.funcname_len),
        f.lineno,
        f.end_lineno,
        f.col,
        f.end_col,
        f.opcode,
    )
}

/// Closes a reader.
pub fn close_reader(reader: *mut tachyon_reader) {
    // SAFETY: a live reader.
    ok(unsafe { tachyon_reader_close(reader) });
}
