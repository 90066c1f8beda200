//! The reader (host builds): a file or a memory buffer, its metadata, its samples one at a
//! time, frame ids resolved to names and locations. Storage is sized from the file's
//! validated metadata, never from a count the file has not backed (the std layer's
//! `OwnedReaderStorage`); a zstd region is decompressed as it is read.

use core::ffi::c_char;
use std::fmt;

use tachyon::file::FileSource;
use tachyon::tachyon::storage::{Limits, OwnedReaderStorage};
use tachyon_core::io::Cursor;
use tachyon_core::{Metadata, ReadError, Reader};

use crate::message::Message;
use crate::registry;
use crate::writer::{tachyon_frame, tachyon_stats};
use crate::*;

/// Everything about a file that needs no sample data.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct tachyon_info {
    /// Python version of the header (3, 15, 2 for CPython 3.15.2).
    pub python_version: [u8; 3],
    /// Non-zero for a big-endian file.
    pub big_endian: u8,
    /// `TACHYON_COMPRESSION_NONE`, `_ZSTD`, or another value stored in the header.
    pub compression: u32,
    /// Start of profiling, µs.
    pub start_time_us: u64,
    /// Sampling interval, µs.
    pub sample_interval_us: u64,
    /// Thread samples the header counts.
    pub sample_count: u64,
    /// Threads the header counts.
    pub thread_count: u32,
    /// Strings in the table.
    pub string_count: u32,
    /// Frames in the table.
    pub frame_count: u32,
    /// Profiling mode (0 wall, 1 cpu, 2 gil, 3 all, 4 exception), or -1 if unknown.
    pub mode: i32,
    /// File size, bytes.
    pub file_size: u64,
    /// Non-zero if the file has a stats trailer (then `stats` holds it).
    pub has_stats: u8,
    /// The stats trailer.
    pub stats: tachyon_stats,
}

/// One thread sample. `frame_ids` (innermost first) stays valid until the next call on the
/// reader; `tachyon_reader_frame` resolves each.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tachyon_sample {
    /// Timestamp, µs.
    pub timestamp_us: u64,
    /// Thread id.
    pub thread_id: u64,
    /// Interpreter id.
    pub interpreter_id: u32,
    /// Status bits (CPython's THREAD_STATUS_* flags).
    pub status: u8,
    /// Frame ids, innermost first.
    pub frame_ids: *const u32,
    /// How many.
    pub frame_count: usize,
}

enum Source {
    File(Reader<'static, FileSource>),
    Memory(Reader<'static, Cursor<Vec<u8>>>),
}

/// A reader (opaque to C).
pub struct tachyon_reader {
    /// Borrows `*storage`: dropped first (see `Drop`).
    source: Option<Source>,
    storage: *mut OwnedReaderStorage,
    meta: Metadata,
    stack: Vec<u32>,
    /// The status every later `next_sample` returns once one failed or ended.
    stopped: Option<i32>,
    message: Message,
}

impl Drop for tachyon_reader {
    fn drop(&mut self) {
        self.source = None;
        // SAFETY: made by Box::into_raw in `open`; the reader borrowing it is gone.
        drop(unsafe { Box::from_raw(self.storage) });
    }
}

/// The status and message of a reader error.
fn read_error<E: fmt::Debug>(e: &ReadError<E>) -> (i32, String) {
    let status = match e {
        ReadError::Io { .. } => TACHYON_E_IO,
        ReadError::UnexpectedEof { .. } => TACHYON_E_TRUNCATED,
        ReadError::Format { .. } => TACHYON_E_FORMAT,
        ReadError::Capacity { .. } => TACHYON_E_CAPACITY,
    };
    (status, e.to_string())
}

fn fail(status: i32, args: fmt::Arguments<'_>) -> i32 {
    registry::set_last_error(args);
    status
}

/// Opens over `source`: metadata, storage sized from it, the reader.
fn open<R, F>(mut source: R, make: F, out: *mut *mut tachyon_reader) -> i32
where
    R: embedded_io::Read + embedded_io::Seek,
    R::Error: fmt::Debug,
    F: FnOnce(&'static mut OwnedReaderStorage, R) -> Result<Source, (i32, String)>,
{
    let meta = match Metadata::read(&mut source) {
        Ok(m) => m,
        Err(e) => {
            let (status, text) = read_error(&e);
            return fail(status, format_args!("{text}"));
        }
    };
    let storage = match OwnedReaderStorage::for_metadata(&meta, Limits::default()) {
        Ok(s) => Box::into_raw(Box::new(s)),
        Err(e) => return fail(TACHYON_E_CAPACITY, format_args!("{e}")),
    };
    // SAFETY: the storage lives (at a fixed address) until the handle drops it, after the
    // reader that borrows it.
    let source = match make(unsafe { &mut *storage }, source) {
        Ok(s) => s,
        Err((status, text)) => {
            // SAFETY: nothing borrows it any more.
            drop(unsafe { Box::from_raw(storage) });
            return fail(status, format_args!("{text}"));
        }
    };
    let handle = Box::into_raw(Box::new(tachyon_reader {
        source: Some(source),
        storage,
        meta,
        stack: Vec::with_capacity(tachyon_core::records::MAX_STACK_DEPTH),
        stopped: None,
        message: Message::new(),
    }));
    registry::open(handle as usize, registry::Kind::Reader);
    // SAFETY: checked non-null by the callers.
    unsafe { out.write(handle) };
    TACHYON_OK
}

/// Opens the file at `path` (NUL-terminated) and stores a reader in `*reader` (NULL on
/// failure; `tachyon_last_error` then says why, with the offset and rule for a bad file).
///
/// # Safety
/// Pointers must be NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn tachyon_reader_open_file(path: *const c_char, reader: *mut *mut tachyon_reader) -> i32 {
    guard(|| {
        if reader.is_null() {
            return TACHYON_E_NULL;
        }
        // SAFETY: checked non-null.
        unsafe { reader.write(core::ptr::null_mut()) };
        if path.is_null() {
            return TACHYON_E_NULL;
        }
        // SAFETY: NUL-terminated by the caller's promise.
        let path = registry::path_of(unsafe { core::ffi::CStr::from_ptr(path) });
        let source = match FileSource::open(&path) {
            Ok(s) => s,
            Err(e) => return fail(TACHYON_E_IO, format_args!("cannot open {}: {e}", path.display())),
        };
        let make = |storage: &'static mut OwnedReaderStorage, source: FileSource| {
            storage.open_file(source).map(Source::File).map_err(|e| read_error(&e))
        };
        open(source, make, reader)
    })
}

/// Opens a file held in memory (`len` bytes at `data`, copied: the buffer may be freed after
/// the call) and stores a reader in `*reader`, as `tachyon_reader_open_file`.
///
/// # Safety
/// `data` must point at `len` readable bytes; pointers must be NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn tachyon_reader_open_memory(
    data: *const u8,
    len: usize,
    reader: *mut *mut tachyon_reader,
) -> i32 {
    guard(|| {
        if reader.is_null() {
            return TACHYON_E_NULL;
        }
        // SAFETY: checked non-null.
        unsafe { reader.write(core::ptr::null_mut()) };
        if data.is_null() && len != 0 {
            return TACHYON_E_NULL;
        }
        let bytes = if len == 0 {
            Vec::new()
        } else {
            // SAFETY: `len` readable bytes by the caller's promise.
            unsafe { core::slice::from_raw_parts(data, len) }.to_vec()
        };
        let make = |storage: &'static mut OwnedReaderStorage, source: Cursor<Vec<u8>>| {
            storage.open(source).map(Source::Memory).map_err(|e| read_error(&e))
        };
        open(Cursor::new(bytes), make, reader)
    })
}

/// The live reader behind `r`.
///
/// # Safety
/// `r` must be NULL or a pointer this library gave (closed ones are recognised).
unsafe fn live<'a>(r: *mut tachyon_reader) -> Result<&'a mut tachyon_reader, i32> {
    // SAFETY: the caller's promise.
    unsafe { registry::live(r, registry::Kind::Reader) }
}

/// The file's metadata.
///
/// # Safety
/// Pointers must be NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn tachyon_reader_info(reader: *mut tachyon_reader, info: *mut tachyon_info) -> i32 {
    guard(|| {
        // SAFETY: checked by `live`.
        let r = match unsafe { live(reader) } {
            Ok(r) => r,
            Err(status) => return status,
        };
        if info.is_null() {
            return TACHYON_E_NULL;
        }
        let m = &r.meta;
        let stats = m.stats.unwrap_or(tachyon_core::Stats {
            duration_sec: 0.0,
            sample_rate: 0.0,
            error_rate: None,
            missed_samples: None,
        });
        let value = tachyon_info {
            python_version: m.header.python_version,
            big_endian: u8::from(m.endian == tachyon_core::RunTimeEndian::Big),
            compression: m.header.compression.field(),
            start_time_us: m.header.start_time_us,
            sample_interval_us: m.header.sample_interval_us,
            sample_count: m.header.sample_count,
            thread_count: m.header.thread_count,
            string_count: m.footer.string_count,
            frame_count: m.footer.frame_count,
            mode: m.header.config.mode.map_or(-1, |mode| i32::from(mode.value())),
            file_size: m.file_len,
            has_stats: u8::from(m.stats.is_some()),
            stats: tachyon_stats {
                duration_sec: stats.duration_sec,
                sample_rate: stats.sample_rate,
                error_rate: stats.error_rate.unwrap_or(0.0),
                missed_samples: stats.missed_samples.unwrap_or(0.0),
                has_error_rate: u8::from(stats.error_rate.is_some()),
                has_missed_samples: u8::from(stats.missed_samples.is_some()),
            },
        };
        // SAFETY: checked non-null.
        unsafe { info.write(value) };
        TACHYON_OK
    })
}

/// The next thread sample, in file order: `TACHYON_OK` with `*sample` filled, `TACHYON_END`
/// after the last, or an error (the file is bad from there on; the message names the offset
/// and rule). After `TACHYON_END` or an error every call returns the same.
///
/// # Safety
/// Pointers must be NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn tachyon_reader_next_sample(reader: *mut tachyon_reader, sample: *mut tachyon_sample) -> i32 {
    guard(|| {
        // SAFETY: checked by `live`.
        let r = match unsafe { live(reader) } {
            Ok(r) => r,
            Err(status) => return status,
        };
        if sample.is_null() {
            return TACHYON_E_NULL;
        }
        if let Some(status) = r.stopped {
            return status;
        }
        let stack = &mut r.stack;
        let next = |s: Option<tachyon_core::Sample<'_>>| {
            s.map(|s| {
                stack.clear();
                stack.extend_from_slice(s.stack);
                (s.timestamp_us, s.thread_id, s.interpreter_id, s.status)
            })
        };
        let result = match r.source.as_mut() {
            Some(Source::File(reader)) => reader.next_sample().map(next).map_err(|e| read_error(&e)),
            Some(Source::Memory(reader)) => reader.next_sample().map(next).map_err(|e| read_error(&e)),
            None => Err((TACHYON_E_CLOSED, String::from("closed"))),
        };
        match result {
            Ok(Some((timestamp_us, thread_id, interpreter_id, status))) => {
                let value = tachyon_sample {
                    timestamp_us,
                    thread_id,
                    interpreter_id,
                    status,
                    frame_ids: r.stack.as_ptr(),
                    frame_count: r.stack.len(),
                };
                // SAFETY: checked non-null.
                unsafe { sample.write(value) };
                TACHYON_OK
            }
            Ok(None) => {
                r.stopped = Some(TACHYON_END);
                TACHYON_END
            }
            Err((status, text)) => {
                r.stopped = Some(status);
                r.message.set(format_args!("{text}"));
                fail(status, format_args!("{text}"))
            }
        }
    })
}

/// Frame `id` of the file's frame table, its names pointing into the reader's tables (not
/// NUL-terminated; valid until close). `TACHYON_E_ARGUMENT` for an id the table does not
/// have.
///
/// # Safety
/// Pointers must be NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn tachyon_reader_frame(reader: *mut tachyon_reader, id: u32, frame: *mut tachyon_frame) -> i32 {
    guard(|| {
        // SAFETY: checked by `live`.
        let r = match unsafe { live(reader) } {
            Ok(r) => r,
            Err(status) => return status,
        };
        if frame.is_null() {
            return TACHYON_E_NULL;
        }
        let tables = match r.source.as_ref() {
            Some(Source::File(reader)) => reader.tables(),
            Some(Source::Memory(reader)) => reader.tables(),
            None => return TACHYON_E_CLOSED,
        };
        let Some(f) = tables.frame(id) else {
            r.message.set(format_args!("frame id {id} is not in the frame table"));
            return fail(TACHYON_E_ARGUMENT, format_args!("frame id {id} is not in the frame table"));
        };
        let location = f.location.unwrap_or(tachyon_core::Location::NONE);
        let value = tachyon_frame {
            filename: f.filename.as_ptr().cast(),
            filename_len: f.filename.len(),
            funcname: f.funcname.as_ptr().cast(),
            funcname_len: f.funcname.len(),
            lineno: location.lineno,
            end_lineno: location.end_lineno,
            col: location.col,
            end_col: location.end_col,
            opcode: f.opcode.map_or(TACHYON_NO_OPCODE, i32::from),
        };
        // SAFETY: checked non-null.
        unsafe { frame.write(value) };
        TACHYON_OK
    })
}

/// The details of the reader's last error (NUL-terminated, valid until the next call on the
/// handle); for a NULL, closed or foreign handle, what that status means.
///
/// # Safety
/// `reader` must be NULL or a pointer this library gave.
#[no_mangle]
pub unsafe extern "C" fn tachyon_reader_last_error(reader: *mut tachyon_reader) -> *const c_char {
    // SAFETY: checked by `live`.
    match unsafe { live(reader) } {
        Ok(r) => r.message.as_ptr(),
        Err(status) => tachyon_status_message(status),
    }
}

/// Closes the reader and frees what it holds. A second close (or any call after) is
/// `TACHYON_E_CLOSED`.
///
/// # Safety
/// `reader` must be NULL or a pointer this library gave.
#[no_mangle]
pub unsafe extern "C" fn tachyon_reader_close(reader: *mut tachyon_reader) -> i32 {
    guard(|| {
        // SAFETY: checked by `live`.
        if let Err(status) = unsafe { live(reader) } {
            return status;
        }
        registry::close(reader as usize);
        // SAFETY: made by Box::into_raw in `open`, live until now.
        drop(unsafe { Box::from_raw(reader) });
        TACHYON_OK
    })
}
