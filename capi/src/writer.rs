//! The writer: a handle placed at the start of the caller's memory, the tables after it.
//!
//! Life of a handle: `tachyon_writer_init` (or `tachyon_writer_open_file`) → frames and
//! samples → `tachyon_writer_finalize` (retryable after a sink error) →
//! `tachyon_writer_close`. A handle keeps a magic word, so a call on memory that does not hold
//! a live writer is `TACHYON_E_BAD_HANDLE` and one on a closed writer `TACHYON_E_CLOSED`.

use core::ffi::{c_char, c_void};
use core::fmt;
use core::mem::align_of;

use tachyon_core::capture::{Drain, Taken};
use tachyon_core::storage::{Span, WriterBuffers, WriterStorage, WriterThread};
use tachyon_core::tables::FrameEntry;
use tachyon_core::{Compression, Frame, FrameId, Location, RunTimeEndian, Stats, Writer, WriterConfig};

use crate::inner::{Failure, Inner};
use crate::layout::{memory_size, plan, tachyon_writer_options, Part, Plan};
use crate::message::Message;
use crate::sink::{tachyon_sink, CallbackSink};
use crate::*;

/// Alignment of a writer's start: the strictest of the handle's and the tables'.
const ALIGN: usize = crate::layout::align::<tachyon_writer>();

const LIVE: u64 = 0x5441_4348_5752_4954; // "TACHWRIT"
const CLOSED: u64 = 0x5441_4348_434c_4f53; // "TACHCLOS"

/// One frame: names as pointer and length (`TACHYON_NUL_TERMINATED` for C strings), a
/// location whose parts are -1 when unknown (all four -1 is "no location"), and an opcode
/// (`TACHYON_NO_OPCODE`; values outside 0..=254 are "none", as in CPython).
///
/// The reader fills the same struct: names then point into the reader's tables (valid until
/// it is closed) and are not NUL-terminated.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tachyon_frame {
    /// File name bytes.
    pub filename: *const c_char,
    /// Their length.
    pub filename_len: usize,
    /// Function name bytes.
    pub funcname: *const c_char,
    /// Their length.
    pub funcname_len: usize,
    /// First line, or -1.
    pub lineno: i32,
    /// Last line, or -1.
    pub end_lineno: i32,
    /// First column, or -1.
    pub col: i32,
    /// End column, or -1.
    pub end_col: i32,
    /// Opcode 0..=254, or `TACHYON_NO_OPCODE`.
    pub opcode: i32,
}

/// The statistics trailer CPython's sampler writes (`set_stats`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct tachyon_stats {
    /// Profiling duration, seconds (finite, ≥ 0).
    pub duration_sec: f64,
    /// Achieved sample rate, Hz (finite, ≥ 0).
    pub sample_rate: f64,
    /// Error rate (finite, ≥ 0), read only if `has_error_rate` is non-zero.
    pub error_rate: f64,
    /// Missed samples (finite), read only if `has_missed_samples` is non-zero.
    pub missed_samples: f64,
    /// Non-zero if `error_rate` is known.
    pub has_error_rate: u8,
    /// Non-zero if `missed_samples` is known.
    pub has_missed_samples: u8,
}

/// What a writer holds so far.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct tachyon_writer_counts {
    /// Thread samples accepted.
    pub samples: u64,
    /// Distinct (interpreter, thread) pairs.
    pub threads: usize,
    /// Distinct names.
    pub strings: usize,
    /// Distinct frames.
    pub frames: usize,
    /// Non-zero once a capacity or format limit refused something (CPython's
    /// `limit_reached`).
    pub limit_reached: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    Finalized,
}

/// What a writer made by `tachyon_writer_open_file` or `tachyon_writer_open_journal` owns:
/// its memory and its file (for a journal, the file is inside the writer and the frame
/// scratch is owned here).
#[cfg(feature = "std")]
pub(crate) struct Owned {
    memory: *mut u64,
    words: usize,
    file: Option<*mut std::io::BufWriter<std::fs::File>>,
    scratch: Option<*mut [u8]>,
    /// A journal's path: finalizing replaces the stream there by the file.
    journal: Option<std::path::PathBuf>,
}

/// A writer (opaque to C).
pub struct tachyon_writer {
    magic: u64,
    state: State,
    pub(crate) writer: Inner,
    /// What `tachyon_capture_drain` took into this writer, for its stats trailer.
    pub(crate) drain: Drain,
    pub(crate) start_time_us: u64,
    message: Message,
    #[cfg(feature = "std")]
    owned: Option<Owned>,
    /// `tachyon_writer_on_period_end`'s callback.
    #[cfg(feature = "std")]
    pub(crate) periods: Option<crate::period::PeriodHook>,
}

impl tachyon_writer {
    /// Records the details of an error and returns its status.
    pub(crate) fn fail(&mut self, status: i32, args: fmt::Arguments<'_>) -> i32 {
        self.message.set(args);
        #[cfg(feature = "std")]
        crate::registry::set_last_error(args);
        status
    }

    pub(crate) fn write_error(&mut self, e: Failure) -> i32 {
        self.fail(e.status(), format_args!("{e}"))
    }

    pub(crate) fn open(&mut self) -> Result<(), i32> {
        if self.state == State::Finalized {
            return Err(self.fail(TACHYON_E_FINALIZED, format_args!("the writer was finalized")));
        }
        Ok(())
    }
}

/// The live writer behind `w`, or the status saying why there is none.
///
/// # Safety
/// `w` must be NULL or point at memory the caller can read (a writer handle, live or
/// closed, or anything else of at least a handle's size).
pub(crate) unsafe fn live<'a>(w: *mut tachyon_writer) -> Result<&'a mut tachyon_writer, i32> {
    if w.is_null() {
        return Err(TACHYON_E_NULL);
    }
    if (w as usize) % align_of::<tachyon_writer>() != 0 {
        return Err(TACHYON_E_BAD_HANDLE);
    }
    #[cfg(feature = "std")]
    if crate::registry::is_closed(w as usize) {
        return Err(TACHYON_E_CLOSED);
    }
    // SAFETY: aligned and readable by the caller's promise; any u64 value is valid.
    match unsafe { core::ptr::addr_of!((*w).magic).read() } {
        // SAFETY: the magic says a handle lives here.
        LIVE => Ok(unsafe { &mut *w }),
        CLOSED => Err(TACHYON_E_CLOSED),
        _ => Err(TACHYON_E_BAD_HANDLE),
    }
}

/// Runs `body` on the live handle `writer`, then calls the period callback with the periods
/// `body` ended, once `body`'s borrow of the handle is over (`crate::period`). Returns
/// `body`'s status.
///
/// # Safety
/// `writer` as for [`live`].
pub(crate) unsafe fn with_periods(writer: *mut tachyon_writer, body: impl FnOnce(&mut tachyon_writer) -> i32) -> i32 {
    // SAFETY: the caller's pointer, checked by `live`.
    let w = match unsafe { live(writer) } {
        Ok(w) => w,
        Err(status) => return status,
    };
    let status = body(w);
    #[cfg(feature = "std")]
    {
        let calls = crate::period::PeriodCalls::take(w.periods.as_ref());
        // SAFETY: `w` is not used after this: the callback may use the handle.
        unsafe { calls.make() };
    }
    status
}

/// Bytes of memory a writer with these options needs: the handle, every table, the zstd
/// workspace when compressing, and slack to align any start address.
///
/// # Safety
/// `options` and `bytes` must be NULL or valid pointers.
#[no_mangle]
pub unsafe extern "C" fn tachyon_writer_memory_size(options: *const tachyon_writer_options, bytes: *mut usize) -> i32 {
    guard(|| {
        if options.is_null() || bytes.is_null() {
            return TACHYON_E_NULL;
        }
        // SAFETY: checked non-null; the caller promises a valid struct.
        let o = unsafe { &*options };
        match memory_size::<tachyon_writer>(o) {
            Ok(n) => {
                // SAFETY: checked non-null.
                unsafe { bytes.write(n) };
                TACHYON_OK
            }
            Err(status) => status,
        }
    })
}

/// Fills `options` with defaults: start time 0, interval 1000 µs, native byte order, no
/// compression, 64 KiB of names, 4096 names and frames, 16 threads, CPython's REPEAT budget.
///
/// # Safety
/// `options` must be NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn tachyon_writer_options_init(options: *mut tachyon_writer_options) -> i32 {
    if options.is_null() {
        return TACHYON_E_NULL;
    }
    let defaults = tachyon_writer_options {
        start_time_us: 0,
        sample_interval_us: 1000,
        byte_order: TACHYON_BYTE_ORDER_NATIVE,
        compression: TACHYON_COMPRESSION_NONE,
        string_bytes: 64 << 10,
        strings: 4096,
        frames: 4096,
        threads: 16,
        rle_budget: 0,
        mode: TACHYON_MODE_UNKNOWN,
        capture_features: TACHYON_CAPTURE_FEATURES_UNKNOWN,
    };
    // SAFETY: checked non-null.
    unsafe { options.write(defaults) };
    TACHYON_OK
}

fn endian_of(byte_order: u32) -> Result<RunTimeEndian, i32> {
    match byte_order {
        TACHYON_BYTE_ORDER_NATIVE => Ok(RunTimeEndian::default()),
        TACHYON_BYTE_ORDER_LITTLE => Ok(RunTimeEndian::Little),
        TACHYON_BYTE_ORDER_BIG => Ok(RunTimeEndian::Big),
        _ => Err(TACHYON_E_ARGUMENT),
    }
}

/// Fills `part` (of `T`, inside the memory at `base`) with `value` and lends it for the
/// writer's life.
///
/// # Safety
/// `base + part` must be inside memory the caller gave for the writer's life, aligned for `T`
/// (the plan's offsets are), and no other slice may cover it.
unsafe fn slice<T: Copy>(base: *mut u8, part: Part, value: T) -> &'static mut [T] {
    // SAFETY: by the function's contract.
    let start = unsafe { base.add(part.offset) }.cast::<T>();
    for i in 0..part.count {
        // SAFETY: inside the part; writing initialises memory that may hold anything.
        unsafe { start.add(i).write(value) };
    }
    // SAFETY: every element was just initialised; the part is this slice's alone.
    unsafe { core::slice::from_raw_parts_mut(start, part.count) }
}

/// Places a writer and its tables in `memory` (`memory_len` bytes, any alignment, at least
/// what `tachyon_writer_memory_size` says for `options`) writing through `sink`, and stores
/// its handle in `*writer` (NULL on failure). No allocation; no I/O until the first sample.
/// The memory and the sink's context must stay valid until `tachyon_writer_close`.
///
/// # Safety
/// Pointers must be NULL or valid; `memory` must hold `memory_len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn tachyon_writer_init(
    memory: *mut c_void,
    memory_len: usize,
    options: *const tachyon_writer_options,
    sink: *const tachyon_sink,
    writer: *mut *mut tachyon_writer,
) -> i32 {
    guard(|| {
        if writer.is_null() {
            return TACHYON_E_NULL;
        }
        // SAFETY: checked non-null.
        unsafe { writer.write(core::ptr::null_mut()) };
        if memory.is_null() || options.is_null() || sink.is_null() {
            return TACHYON_E_NULL;
        }
        // SAFETY: checked non-null; valid by the caller's promise.
        let (options, sink) = unsafe { (*options, *sink) };
        if sink.write.is_none() || sink.seek.is_none() {
            return TACHYON_E_NULL;
        }
        // SAFETY: `memory_len` writable bytes by the caller's promise.
        match unsafe { init_in(memory, memory_len, &options, Sink::Callbacks(sink)) } {
            Ok(handle) => {
                #[cfg(feature = "std")]
                crate::registry::forget(handle as usize);
                // SAFETY: checked non-null.
                unsafe { writer.write(handle) };
                TACHYON_OK
            }
            Err(status) => status,
        }
    })
}

/// Places a writer for `options` writing to `sink` in `memory` (`memory_len` bytes, any
/// alignment): what `tachyon_writer_init` and the library's own file writers share.
///
/// # Safety
/// `memory` must hold `memory_len` writable bytes that live as long as the handle.
unsafe fn init_in(
    memory: *mut c_void,
    memory_len: usize,
    options: &tachyon_writer_options,
    sink: Sink,
) -> Result<*mut tachyon_writer, i32> {
    let endian = endian_of(options.byte_order)?;
    let plan = plan::<tachyon_writer>(options)?;
    let pad = (ALIGN - (memory as usize) % ALIGN) % ALIGN;
    if memory_len < pad || memory_len - pad < plan.end {
        return Err(TACHYON_E_MEMORY);
    }
    // SAFETY: `pad` bytes in, inside the memory (checked above); the plan's parts lie after
    // the handle, inside the checked length.
    unsafe { place(memory.cast::<u8>().add(pad), &plan, options, endian, sink) }
}

/// Where a placed writer writes.
enum Sink {
    /// The caller's callbacks.
    Callbacks(tachyon_sink),
    /// A journaled stream into a file.
    #[cfg(feature = "std")]
    Journal { link: crate::inner::FileLink, scratch: &'static mut [u8], policy: tachyon_core::transport::FlushPolicy },
    /// Period files from `prefix`, journaled with the scratch and policy when given.
    #[cfg(feature = "std")]
    Rotating {
        prefix: std::path::PathBuf,
        rotation: tachyon::tachyon::rotate::Rotation,
        journal: Option<(&'static mut [u8], tachyon_core::transport::FlushPolicy)>,
    },
}

/// Builds the tables and the writer at `base` following `plan`.
///
/// # Safety
/// `base` is aligned to `ALIGN` and has `plan.end` writable bytes that live as long as the
/// handle.
unsafe fn place(
    base: *mut u8,
    plan: &Plan,
    options: &tachyon_writer_options,
    endian: RunTimeEndian,
    sink: Sink,
) -> Result<*mut tachyon_writer, i32> {
    // SAFETY (every call below): the parts are disjoint, aligned, inside the memory.
    let buffers = unsafe {
        WriterBuffers {
            string_bytes: slice(base, plan.string_bytes, 0u8),
            string_spans: slice(base, plan.string_spans, Span::EMPTY),
            string_slots: slice(base, plan.string_slots, 0u32),
            frames: slice(base, plan.frames, FrameEntry::EMPTY),
            frame_slots: slice(base, plan.frame_slots, 0u32),
            frame_cache: slice(base, plan.frame_cache, 0u32),
            threads: slice(base, plan.threads, WriterThread::EMPTY),
            thread_slots: slice(base, plan.thread_slots, 0u32),
            stacks: slice(base, plan.stacks, 0u32),
            rle: slice(base, plan.rle, 0u8),
            rle_budget: plan.rle_budget,
            staging: slice(base, plan.staging, 0u8),
        }
    };
    let storage = WriterStorage::new(buffers).map_err(|_| TACHYON_E_ARGUMENT)?;
    let mut config = WriterConfig::new(options.start_time_us, options.sample_interval_us);
    config.profiling = crate::layout::profiling_of(options)?;
    #[cfg(feature = "zstd")]
    let storage = if options.compression == TACHYON_COMPRESSION_ZSTD {
        config = config.with_compression(Compression::Zstd);
        // SAFETY: as above.
        let (workspace, out) = unsafe { (slice(base, plan.zstd_workspace, 0u64), slice(base, plan.zstd_out, 0u8)) };
        let compressor = tachyon_core::compression::Compressor::new(workspace, out).ok_or(TACHYON_E_ZSTD)?;
        storage.with_zstd(compressor)
    } else {
        storage
    };
    if options.compression != TACHYON_COMPRESSION_ZSTD {
        config = config.with_compression(Compression::None);
    }
    let inner = match sink {
        Sink::Callbacks(sink) => Inner::Plain(
            Writer::with_endian(CallbackSink { sink }, storage, config, endian).map_err(|_| TACHYON_E_ARGUMENT)?,
        ),
        #[cfg(feature = "std")]
        Sink::Journal { link, scratch, policy } => Inner::Journal(
            tachyon_core::transport::JournalWriter::with_endian(link, scratch, storage, config, policy, endian)
                .map_err(|_| TACHYON_E_IO)?,
        ),
        #[cfg(feature = "std")]
        Sink::Rotating { prefix, rotation, journal } => Inner::Rotating(
            tachyon::tachyon::rotate::RotatingWriter::create(&prefix, storage, config, endian, rotation, journal)
                .map_err(|e| {
                    crate::registry::set_last_error(format_args!("cannot start {}: {e}", prefix.display()));
                    TACHYON_E_IO
                })?,
        ),
    };
    let handle = base.cast::<tachyon_writer>();
    let value = tachyon_writer {
        magic: LIVE,
        state: State::Open,
        writer: inner,
        drain: Drain::new(),
        start_time_us: options.start_time_us,
        message: Message::new(),
        #[cfg(feature = "std")]
        owned: None,
        #[cfg(feature = "std")]
        periods: None,
    };
    // SAFETY: the handle's place is the start of the memory, aligned, before every part.
    unsafe { handle.write(value) };
    Ok(handle)
}

/// `count` items at `ptr` (which may be NULL when `count` is 0).
///
/// # Safety
/// Unless `count` is 0, `ptr` must point at `count` valid items that outlive the borrow.
unsafe fn items<'a, T>(ptr: *const T, count: usize) -> &'a [T] {
    if count == 0 {
        &[]
    } else {
        // SAFETY: by the function's contract.
        unsafe { core::slice::from_raw_parts(ptr, count) }
    }
}

/// A frame of the C API as the core's, or `TACHYON_E_NULL` for a NULL name with a length.
///
/// # Safety
/// The frame's name pointers must be valid for their lengths.
pub(crate) unsafe fn core_frame<'a>(f: &tachyon_frame) -> Result<Frame<'a>, i32> {
    // SAFETY: by the function's contract.
    let (filename, funcname) =
        unsafe { (name_bytes(f.filename, f.filename_len)?, name_bytes(f.funcname, f.funcname_len)?) };
    let location = Location { lineno: f.lineno, end_lineno: f.end_lineno, col: f.col, end_col: f.end_col };
    Ok(Frame {
        filename,
        funcname,
        location: (location != Location::NONE).then_some(location),
        opcode: u8::try_from(f.opcode).ok().filter(|&o| o != 255),
    })
}

/// Interns a frame and stores its id in `*id`, for `tachyon_writer_write_sample_ids`. The
/// names are copied: the pointers need to live only during the call.
///
/// # Safety
/// Pointers must be NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn tachyon_writer_intern_frame(
    writer: *mut tachyon_writer,
    frame: *const tachyon_frame,
    id: *mut u32,
) -> i32 {
    guard(|| {
        // SAFETY: the caller's pointer, checked by `live`.
        let w = match unsafe { live(writer) } {
            Ok(w) => w,
            Err(status) => return status,
        };
        if frame.is_null() || id.is_null() {
            return w.fail(TACHYON_E_NULL, format_args!("frame or id is NULL"));
        }
        if let Err(status) = w.open() {
            return status;
        }
        // SAFETY: checked non-null, valid by the caller's promise.
        let frame = match unsafe { core_frame(&*frame) } {
            Ok(f) => f,
            Err(status) => return w.fail(status, format_args!("a name is NULL with a non-zero length")),
        };
        match w.writer.intern_frame(frame) {
            Ok(FrameId(n)) => {
                // SAFETY: checked non-null.
                unsafe { id.write(n) };
                TACHYON_OK
            }
            Err(e) => w.write_error(e),
        }
    })
}

/// Writes one thread sample from frames, innermost first (`count` may be 0; only the
/// innermost 256 are kept, as CPython keeps them). On `TACHYON_E_CAPACITY` or
/// `TACHYON_E_LIMIT` the sample was refused and the writer goes on.
///
/// # Safety
/// `frames` must be NULL (with `count` 0) or point at `count` frames.
#[no_mangle]
pub unsafe extern "C" fn tachyon_writer_write_sample(
    writer: *mut tachyon_writer,
    timestamp_us: u64,
    interpreter_id: u32,
    thread_id: u64,
    status: u8,
    frames: *const tachyon_frame,
    count: usize,
) -> i32 {
    guard(|| {
        let body = |w: &mut tachyon_writer| {
            if frames.is_null() && count != 0 {
                return w.fail(TACHYON_E_NULL, format_args!("frames is NULL with count {count}"));
            }
            if let Err(status) = w.open() {
                return status;
            }
            // SAFETY: non-null unless `count` is 0 (checked), `count` frames by the caller's promise.
            let frames = unsafe { items(frames, count) };
            let kept = &frames[..count.min(tachyon_core::records::MAX_STACK_DEPTH)];
            // Names are checked before anything is written, so a bad frame refuses the sample
            // whole.
            // SAFETY: the frames' pointers are valid by the caller's promise.
            if let Some(i) = kept.iter().position(|f| unsafe { core_frame(f) }.is_err()) {
                return w.fail(TACHYON_E_NULL, format_args!("frame {i}: a name is NULL with a non-zero length"));
            }
            // SAFETY: as above; every frame converts (checked).
            let core_frames = kept.iter().filter_map(|f| unsafe { core_frame(f) }.ok());
            let taken = Taken { timestamp_us, interpreter_id, thread_id, status };
            match w.writer.write_frames(taken, core_frames) {
                Ok(()) => TACHYON_OK,
                Err(e) => w.write_error(e),
            }
        };
        // SAFETY: the caller's pointer; the period callback runs once `body` is done with it.
        unsafe { with_periods(writer, body) }
    })
}

/// Writes one thread sample from ids `tachyon_writer_intern_frame` gave, innermost first
/// (only the first 256 are kept).
///
/// # Safety
/// `ids` must be NULL (with `count` 0) or point at `count` ids.
#[no_mangle]
pub unsafe extern "C" fn tachyon_writer_write_sample_ids(
    writer: *mut tachyon_writer,
    timestamp_us: u64,
    interpreter_id: u32,
    thread_id: u64,
    status: u8,
    ids: *const u32,
    count: usize,
) -> i32 {
    guard(|| {
        let body = |w: &mut tachyon_writer| {
            if ids.is_null() && count != 0 {
                return w.fail(TACHYON_E_NULL, format_args!("ids is NULL with count {count}"));
            }
            if let Err(status) = w.open() {
                return status;
            }
            // SAFETY: non-null unless `count` is 0 (checked), `count` ids by the caller's promise;
            // FrameId is a transparent u32.
            let ids = unsafe { items(ids.cast::<FrameId>(), count) };
            match w.writer.write_ids(Taken { timestamp_us, interpreter_id, thread_id, status }, ids) {
                Ok(()) => TACHYON_OK,
                Err(e) => w.write_error(e),
            }
        };
        // SAFETY: the caller's pointer; the period callback runs once `body` is done with it.
        unsafe { with_periods(writer, body) }
    })
}

/// Sets the statistics trailer (the last call wins); values CPython rejects are
/// `TACHYON_E_ARGUMENT`.
///
/// # Safety
/// Pointers must be NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn tachyon_writer_set_stats(writer: *mut tachyon_writer, stats: *const tachyon_stats) -> i32 {
    guard(|| {
        // SAFETY: the caller's pointer, checked by `live`.
        let w = match unsafe { live(writer) } {
            Ok(w) => w,
            Err(status) => return status,
        };
        if stats.is_null() {
            return w.fail(TACHYON_E_NULL, format_args!("stats is NULL"));
        }
        if let Err(status) = w.open() {
            return status;
        }
        // SAFETY: checked non-null.
        let s = unsafe { *stats };
        let stats = Stats {
            duration_sec: s.duration_sec,
            sample_rate: s.sample_rate,
            error_rate: (s.has_error_rate != 0).then_some(s.error_rate),
            missed_samples: (s.has_missed_samples != 0).then_some(s.missed_samples),
        };
        match w.writer.set_stats(stats) {
            Ok(()) => TACHYON_OK,
            Err(e) => w.write_error(e),
        }
    })
}

/// What the writer holds so far (also after finalize, until close).
///
/// # Safety
/// Pointers must be NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn tachyon_writer_get_counts(
    writer: *mut tachyon_writer,
    counts: *mut tachyon_writer_counts,
) -> i32 {
    guard(|| {
        // SAFETY: the caller's pointer, checked by `live`.
        let w = match unsafe { live(writer) } {
            Ok(w) => w,
            Err(status) => return status,
        };
        if counts.is_null() {
            return w.fail(TACHYON_E_NULL, format_args!("counts is NULL"));
        }
        let c = tachyon_writer_counts {
            samples: w.writer.sample_count(),
            threads: w.writer.thread_count(),
            strings: w.writer.string_count(),
            frames: w.writer.frame_count(),
            limit_reached: u8::from(w.writer.limit_reached()),
        };
        // SAFETY: checked non-null.
        unsafe { counts.write(c) };
        TACHYON_OK
    })
}

/// The period `writer` is writing: its sequence number (from 0; a writer made by
/// `tachyon_writer_open_rotating` counts its files, any other is always 0) in `*sequence` and
/// its start in `*start_time_us` (either may be NULL). With `tachyon_writer_get_counts` (the
/// current period's counts) a program knows what a crash would lose.
///
/// # Safety
/// Pointers must be NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn tachyon_writer_get_period(
    writer: *mut tachyon_writer,
    sequence: *mut u64,
    start_time_us: *mut u64,
) -> i32 {
    guard(|| {
        // SAFETY: the caller's pointer, checked by `live`.
        let w = match unsafe { live(writer) } {
            Ok(w) => w,
            Err(status) => return status,
        };
        let (seq, start) = w.writer.period();
        // SAFETY: each NULL or valid by the caller's promise.
        unsafe {
            if !sequence.is_null() {
                sequence.write(seq);
            }
            if !start_time_us.is_null() {
                start_time_us.write(start);
            }
        }
        TACHYON_OK
    })
}

/// Completes the file: flushes pending REPEAT runs and the compressor, writes the string and
/// frame tables, the footer and the stats, then seeks to 0 and writes the header. Stores the
/// file's size in `*file_size` (may be NULL). After a sink error it can be called again; after
/// success only `tachyon_writer_close` remains (a second finalize is
/// `TACHYON_E_FINALIZED`).
///
/// # Safety
/// Pointers must be NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn tachyon_writer_finalize(writer: *mut tachyon_writer, file_size: *mut u64) -> i32 {
    guard(|| {
        let body = |w: &mut tachyon_writer| {
            if let Err(status) = w.open() {
                return status;
            }
            match w.writer.finish() {
                Ok(size) => {
                    w.state = State::Finalized;
                    w.message.clear();
                    // A journal's complete stream becomes the file CPython reads.
                    #[cfg(feature = "std")]
                    if let Some(path) = w.owned.as_ref().and_then(|o| o.journal.clone()) {
                        if let Err(e) = tachyon::tachyon::receive::receive_in_place(&path) {
                            return w.fail(
                                TACHYON_E_IO,
                                format_args!(
                                    "finalized, but {} is still the stream ({e}); `tachyon receive` makes the file from it",
                                    path.display()
                                ),
                            );
                        }
                    }
                    if !file_size.is_null() {
                        // SAFETY: checked non-null.
                        unsafe { file_size.write(size) };
                    }
                    TACHYON_OK
                }
                Err(e) => w.write_error(e),
            }
        };
        // SAFETY: the caller's pointer; the period callback runs once `body` is done with it.
        unsafe { with_periods(writer, body) }
    })
}

/// Hands every sample written so far to the sink and flushes it: pending REPEAT runs end
/// (shorter than CPython would make them, same meaning), staged records go out, the sink's
/// flush callback runs. For a journaled writer this is what a process killed later keeps.
///
/// # Safety
/// `writer` must be NULL or a valid handle.
#[no_mangle]
pub unsafe extern "C" fn tachyon_writer_flush(writer: *mut tachyon_writer) -> i32 {
    guard(|| {
        // SAFETY: the caller's pointer, checked by `live`.
        let w = match unsafe { live(writer) } {
            Ok(w) => w,
            Err(status) => return status,
        };
        if let Err(status) = w.open() {
            return status;
        }
        match w.writer.flush() {
            Ok(()) => TACHYON_OK,
            Err(e) => w.write_error(e),
        }
    })
}

/// Ends the writer's life: a writer in caller memory leaves that memory to the caller (a
/// call with the handle while the memory is unchanged is `TACHYON_E_CLOSED`); one from
/// `tachyon_writer_open_file` closes its file and frees its memory. Closing without
/// finalizing leaves an incomplete file.
///
/// # Safety
/// `writer` must be NULL or a pointer this library gave.
#[no_mangle]
pub unsafe extern "C" fn tachyon_writer_close(writer: *mut tachyon_writer) -> i32 {
    guard(|| {
        // SAFETY: the caller's pointer, checked by `live`.
        let w = match unsafe { live(writer) } {
            Ok(w) => w,
            Err(status) => return status,
        };
        w.magic = CLOSED;
        #[cfg(all(feature = "std", unix))]
        at_exit::forget(writer);
        #[cfg(feature = "std")]
        let owned = w.owned.take();
        // (The period callback's queue: the handle's memory is not dropped as a whole.)
        #[cfg(feature = "std")]
        drop(w.periods.take());
        // SAFETY: the handle was live; it is not used again (the magic says closed).
        unsafe { core::ptr::addr_of_mut!((*writer).writer).drop_in_place() };
        #[cfg(feature = "std")]
        if let Some(owned) = owned {
            crate::registry::close(writer as usize);
            // SAFETY: made by `tachyon_writer_open_file` or `_open_journal` with Box and Vec,
            // used by nothing now (the writer that borrowed the scratch was dropped above).
            let result = unsafe {
                drop(Vec::from_raw_parts(owned.memory, owned.words, owned.words));
                if let Some(scratch) = owned.scratch {
                    drop(Box::from_raw(scratch));
                }
                match owned.file {
                    Some(file) => std::io::Write::flush(&mut *Box::from_raw(file)),
                    None => Ok(()),
                }
            };
            if result.is_err() {
                return TACHYON_E_IO;
            }
        }
        TACHYON_OK
    })
}

/// The details of the writer's last error (NUL-terminated, valid until the next call on the
/// handle); for a NULL, closed or foreign handle, what that status means.
///
/// # Safety
/// `writer` must be NULL or readable memory.
#[no_mangle]
pub unsafe extern "C" fn tachyon_writer_last_error(writer: *mut tachyon_writer) -> *const c_char {
    // SAFETY: the caller's pointer, checked by `live`.
    match unsafe { live(writer) } {
        Ok(w) => w.message.as_ptr(),
        Err(status) => tachyon_status_message(status),
    }
}

#[cfg(feature = "std")]
mod file {
    //! A writer whose sink is a file and whose memory the library allocates.

    use super::*;
    use std::io::{BufWriter, Seek, SeekFrom, Write};

    unsafe extern "C" fn write(context: *mut c_void, data: *const u8, len: usize) -> isize {
        // SAFETY: the context is the writer's BufWriter; data holds len bytes.
        let (file, data) =
            unsafe { (&mut *context.cast::<BufWriter<std::fs::File>>(), core::slice::from_raw_parts(data, len)) };
        match file.write(data) {
            Ok(n) => n as isize,
            Err(_) => -1,
        }
    }

    unsafe extern "C" fn seek(context: *mut c_void, offset: u64) -> i32 {
        // SAFETY: the context is the writer's BufWriter.
        let file = unsafe { &mut *context.cast::<BufWriter<std::fs::File>>() };
        match file.seek(SeekFrom::Start(offset)) {
            Ok(_) => 0,
            Err(_) => -1,
        }
    }

    unsafe extern "C" fn flush(context: *mut c_void) -> i32 {
        // SAFETY: the context is the writer's BufWriter.
        let file = unsafe { &mut *context.cast::<BufWriter<std::fs::File>>() };
        match file.flush() {
            Ok(()) => 0,
            Err(_) => -1,
        }
    }

    /// What a writer the library owns writes through.
    enum Through {
        /// The file, behind the write, seek and flush callbacks.
        Callbacks,
        /// A journaled framed stream into the file.
        Journal(tachyon_core::transport::FlushPolicy),
        /// Period files named from the path, journaled by the policy when there is one.
        Rotating(tachyon::tachyon::rotate::Rotation, Option<tachyon_core::transport::FlushPolicy>),
    }

    /// Creates the file at `path` and a writer into it in memory the library allocates for
    /// `options`; stores the handle in `*writer`. What `tachyon_writer_open_file` and
    /// `tachyon_writer_open_journal` share.
    ///
    /// # Safety
    /// `path` must be a NUL-terminated string; `writer` valid and already set to NULL.
    unsafe fn open_owned(
        path: *const c_char,
        options: &tachyon_writer_options,
        through: Through,
        writer: *mut *mut tachyon_writer,
    ) -> i32 {
        let journaled = matches!(through, Through::Journal(_) | Through::Rotating(_, Some(_)));
        if journaled && options.compression != TACHYON_COMPRESSION_NONE {
            crate::registry::set_last_error(format_args!("a journaled stream needs an uncompressed sample region"));
            return TACHYON_E_UNSUPPORTED;
        }
        let mut bytes = 0usize;
        // SAFETY: valid pointers.
        let status = unsafe { tachyon_writer_memory_size(options, &mut bytes) };
        if status != TACHYON_OK {
            return status;
        }
        // SAFETY: a NUL-terminated string by the caller's promise.
        let path = crate::registry::path_of(unsafe { core::ffi::CStr::from_ptr(path) });
        // A rotating writer names and creates its files itself.
        let file = match through {
            Through::Rotating(..) => None,
            _ => match std::fs::File::create(&path) {
                Ok(f) => Some(BufWriter::with_capacity(64 << 10, f)),
                Err(e) => {
                    crate::registry::set_last_error(format_args!("cannot create {}: {e}", path.display()));
                    return TACHYON_E_IO;
                }
            },
        };
        let mut owned = Owned { memory: core::ptr::null_mut(), words: 0, file: None, scratch: None, journal: None };
        let sink = match (through, file) {
            (Through::Callbacks, Some(file)) => {
                let file = Box::into_raw(Box::new(file));
                owned.file = Some(file);
                Sink::Callbacks(tachyon_sink {
                    context: file.cast(),
                    write: Some(write),
                    seek: Some(seek),
                    flush: Some(flush),
                })
            }
            (Through::Journal(policy), Some(file)) => {
                let scratch: *mut [u8] = Box::into_raw(vec![0u8; 4096].into_boxed_slice());
                owned.scratch = Some(scratch);
                owned.journal = Some(path.clone());
                // SAFETY: the scratch lives until close, which frees it after the writer.
                Sink::Journal { link: tachyon::file::StdIo(file), scratch: unsafe { &mut *scratch }, policy }
            }
            (Through::Rotating(rotation, policy), _) => {
                let journal = policy.map(|policy| {
                    let scratch: *mut [u8] = Box::into_raw(vec![0u8; 4096].into_boxed_slice());
                    owned.scratch = Some(scratch);
                    // SAFETY: the scratch lives until close, which frees it after the writer.
                    (unsafe { &mut *scratch }, policy)
                });
                Sink::Rotating { prefix: path.clone(), rotation, journal }
            }
            // Every other kind opened its file above (nothing is allocated yet).
            (_, None) => return TACHYON_E_IO,
        };
        let words = bytes.div_ceil(8);
        let mut memory = std::mem::ManuallyDrop::new(vec![0u64; words]);
        let (memory_ptr, words) = (memory.as_mut_ptr(), memory.capacity());
        (owned.memory, owned.words) = (memory_ptr, words);
        // SAFETY: the memory holds `words * 8 >= bytes` bytes and lives until close.
        match unsafe { init_in(memory_ptr.cast(), words * 8, options, sink) } {
            Ok(handle) => {
                // SAFETY: placed: the handle is live.
                unsafe { (*handle).owned = Some(owned) };
                crate::registry::open(handle as usize, crate::registry::Kind::Writer);
                // SAFETY: the caller's valid pointer.
                unsafe { writer.write(handle) };
                TACHYON_OK
            }
            Err(status) => {
                // SAFETY: made above, used by nothing now (a failed placement dropped the
                // journal's link, which borrowed only the scratch).
                unsafe {
                    drop(Vec::from_raw_parts(owned.memory, owned.words, owned.words));
                    if let Some(file) = owned.file {
                        drop(Box::from_raw(file));
                    }
                    if let Some(scratch) = owned.scratch {
                        drop(Box::from_raw(scratch));
                    }
                }
                status
            }
        }
    }

    /// Creates (or truncates) the file at `path` (NUL-terminated) and a writer into it, in
    /// memory the library allocates for `options`; `tachyon_writer_close` closes and frees
    /// both. Host builds only.
    ///
    /// # Safety
    /// Pointers must be NULL or valid.
    #[no_mangle]
    pub unsafe extern "C" fn tachyon_writer_open_file(
        path: *const c_char,
        options: *const tachyon_writer_options,
        writer: *mut *mut tachyon_writer,
    ) -> i32 {
        guard(|| {
            if writer.is_null() {
                return TACHYON_E_NULL;
            }
            // SAFETY: checked non-null.
            unsafe { writer.write(core::ptr::null_mut()) };
            if path.is_null() || options.is_null() {
                return TACHYON_E_NULL;
            }
            // SAFETY: checked non-null, valid by the caller's promise.
            unsafe { open_owned(path, &*options, Through::Callbacks, writer) }
        })
    }

    /// When a journaled writer flushes on its own. Zeros: only on `tachyon_writer_flush`.
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default)]
    pub struct tachyon_flush_policy {
        /// After this many samples since the last flush (0: not by count).
        pub every_samples: u64,
        /// When a sample's timestamp is this many µs past the last flush's (0: not by time).
        pub every_us: u64,
    }

    impl From<tachyon_flush_policy> for tachyon_core::transport::FlushPolicy {
        fn from(p: tachyon_flush_policy) -> Self {
            tachyon_core::transport::FlushPolicy { every_samples: p.every_samples, every_us: p.every_us }
        }
    }

    /// Creates (or truncates) the file at `path` and a writer that streams into it in the
    /// framed transport with a journal of its tables (`tachyon_core::transport`), flushed by
    /// `policy` and by `tachyon_writer_flush`. `tachyon_writer_finalize` (or finalizing at
    /// exit) then replaces the stream at `path` by the Tachyon file, exactly the one
    /// `tachyon_writer_open_file` would have written for the same calls, which CPython reads
    /// (written beside it and renamed over it: a crash leaves one or the other). If the
    /// process dies first (even by SIGKILL), `path` holds the stream, and `tachyon receive`
    /// rebuilds a valid Tachyon file from it with every sample up to the last flush. The sample region is
    /// uncompressed (`TACHYON_E_UNSUPPORTED` for zstd). Host builds only; memory as
    /// `tachyon_writer_open_file`, plus 4 KiB.
    ///
    /// # Safety
    /// Pointers must be NULL or valid.
    #[no_mangle]
    pub unsafe extern "C" fn tachyon_writer_open_journal(
        path: *const c_char,
        options: *const tachyon_writer_options,
        policy: *const tachyon_flush_policy,
        writer: *mut *mut tachyon_writer,
    ) -> i32 {
        guard(|| {
            if writer.is_null() {
                return TACHYON_E_NULL;
            }
            // SAFETY: checked non-null.
            unsafe { writer.write(core::ptr::null_mut()) };
            if path.is_null() || options.is_null() || policy.is_null() {
                return TACHYON_E_NULL;
            }
            // SAFETY: checked non-null, valid by the caller's promise.
            let (options, policy) = unsafe { (&*options, *policy) };
            // SAFETY: checked non-null, NUL-terminated by the caller's promise.
            unsafe { open_owned(path, options, Through::Journal(policy.into()), writer) }
        })
    }

    /// When a rotating writer ends a period (each 0: never by that measure; both 0: only on
    /// `tachyon_writer_rotate`).
    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default)]
    pub struct tachyon_rotation {
        /// Microseconds of sample time a period spans: a period ends before the first
        /// sample `every_us` or more past its start; the next starts on the grid
        /// `start_time_us + k * every_us` (a quiet stretch makes no empty files).
        pub every_us: u64,
        /// Bytes of sample records (before compression) after which a period ends, before
        /// the next sample.
        pub every_bytes: u64,
    }

    /// Creates a writer that writes the run as a series of complete profiles, one per
    /// period: `PREFIX.SEQUENCE.START.pyb` beside `prefix` (NUL-terminated; its file name is
    /// the names' first part), SEQUENCE from 0 in eight digits, START the period's start in
    /// the samples' µs (its header's `start_time_us`; period 0 starts at
    /// `options->start_time_us`). A period ends by `rotation`, or by `tachyon_writer_rotate`;
    /// its file is then complete and CPython reads it on its own. Every period's file holds
    /// every frame interned so far, so frame ids (and the rings holding them) stay valid.
    /// With `policy` NULL the periods are plain files (a killed process loses its current
    /// period); with a policy each period is journaled as `tachyon_writer_open_journal`
    /// does (uncompressed only): the live period's file is the stream, which `tachyon
    /// receive` salvages after a kill, and it is replaced by the Tachyon file when the
    /// period ends. Rotation happens inside the calls that write samples (the drain's
    /// thread), never in a signal handler. Counts (`tachyon_writer_get_counts`) are the
    /// current period's; `tachyon_capture_set_stats` goes into the last period's file and
    /// describes the whole run. Host builds only; memory as `tachyon_writer_open_file`
    /// (plus 4 KiB journaled).
    ///
    /// # Safety
    /// Pointers must be NULL (`policy` may be) or valid.
    #[no_mangle]
    pub unsafe extern "C" fn tachyon_writer_open_rotating(
        prefix: *const c_char,
        options: *const tachyon_writer_options,
        rotation: *const tachyon_rotation,
        policy: *const tachyon_flush_policy,
        writer: *mut *mut tachyon_writer,
    ) -> i32 {
        guard(|| {
            if writer.is_null() {
                return TACHYON_E_NULL;
            }
            // SAFETY: checked non-null.
            unsafe { writer.write(core::ptr::null_mut()) };
            if prefix.is_null() || options.is_null() || rotation.is_null() {
                return TACHYON_E_NULL;
            }
            // SAFETY: checked non-null (policy may be NULL), valid by the caller's promise.
            let (options, rotation, policy) = unsafe { (&*options, *rotation, policy.as_ref().copied()) };
            let rotation =
                tachyon::tachyon::rotate::Rotation { every_us: rotation.every_us, every_bytes: rotation.every_bytes };
            let policy = policy.map(tachyon_flush_policy::into);
            // SAFETY: checked non-null, NUL-terminated by the caller's promise.
            unsafe { open_owned(prefix, options, Through::Rotating(rotation, policy), writer) }
        })
    }

    /// Ends a rotating writer's current period now, its file complete, and starts the next
    /// at the latest sample's timestamp (a hand-over the program decides: at a signal,
    /// before an upload). From the thread that writes (drains) only. `TACHYON_E_UNSUPPORTED`
    /// for a writer not made by `tachyon_writer_open_rotating`; after an error
    /// (`TACHYON_E_IO`) a retry goes on where it stopped.
    ///
    /// # Safety
    /// `writer` must be NULL or a valid handle.
    #[no_mangle]
    pub unsafe extern "C" fn tachyon_writer_rotate(writer: *mut tachyon_writer) -> i32 {
        guard(|| {
            let body = |w: &mut tachyon_writer| {
                if let Err(status) = w.open() {
                    return status;
                }
                match w.writer.rotate() {
                    Ok(()) => TACHYON_OK,
                    Err(Ok(e)) => w.write_error(e),
                    Err(Err(status)) => w.fail(status, format_args!("only a rotating writer rotates")),
                }
            };
            // SAFETY: the caller's pointer; the period callback runs once `body` is done with it.
            unsafe { with_periods(writer, body) }
        })
    }

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
        callback: crate::period::tachyon_period_callback,
        context: *mut c_void,
    ) -> i32 {
        guard(|| {
            // SAFETY: the caller's pointer, checked by `live`.
            let w = match unsafe { live(writer) } {
                Ok(w) => w,
                Err(status) => return status,
            };
            let hook = callback.map(|callback| crate::period::PeriodHook::new(callback, context));
            // Without a callback nothing is queued.
            let told = match &hook {
                Some(hook) => w.writer.on_period_end(hook.teller()),
                None => w.writer.on_period_end(|_| {}),
            };
            if !told {
                return w.fail(TACHYON_E_UNSUPPORTED, format_args!("only a rotating writer has periods"));
            }
            w.periods = hook;
            TACHYON_OK
        })
    }
}

#[cfg(feature = "std")]
pub use file::{
    tachyon_flush_policy, tachyon_rotation, tachyon_writer_on_period_end, tachyon_writer_open_file,
    tachyon_writer_open_journal, tachyon_writer_open_rotating, tachyon_writer_rotate,
};

#[cfg(all(feature = "std", unix))]
mod at_exit {
    //! Finalizing writers when the process exits normally.

    use std::sync::{Mutex, Once};

    use super::*;

    /// Writers to finalize at exit, by address.
    static WRITERS: Mutex<Vec<usize>> = Mutex::new(Vec::new());
    static REGISTER: Once = Once::new();

    extern "C" fn finalize_all() {
        let writers = std::mem::take(&mut *WRITERS.lock().unwrap_or_else(|p| p.into_inner()));
        for w in writers {
            // SAFETY: a handle registered by `tachyon_writer_finalize_at_exit` and not closed
            // since (close removes it); `live` checks it again.
            unsafe { tachyon_writer_finalize(w as *mut tachyon_writer, core::ptr::null_mut()) };
        }
    }

    /// Finalizes `writer` when the process exits normally (`exit`, or returning from
    /// `main`), unless it was finalized or closed before, so a program that never reaches
    /// its own finalize still leaves a complete file. The writer must not be in use by
    /// another thread then: stop the draining thread first (an `atexit` handler registered
    /// after this call runs before it). A process killed by a signal runs no exit handlers:
    /// that is what `tachyon_writer_open_journal` is for. Host builds on Unix only.
    ///
    /// # Safety
    /// `writer` must be NULL or a valid handle.
    #[no_mangle]
    pub unsafe extern "C" fn tachyon_writer_finalize_at_exit(writer: *mut tachyon_writer) -> i32 {
        guard(|| {
            // SAFETY: the caller's pointer, checked by `live`.
            if let Err(status) = unsafe { live(writer) } {
                return status;
            }
            let mut registered = 0;
            // SAFETY: `finalize_all` is an `extern "C" fn()` that does not unwind (it calls
            // only the guarded C API).
            REGISTER.call_once(|| registered = unsafe { libc::atexit(finalize_all) });
            if registered != 0 {
                return TACHYON_E_ARGUMENT;
            }
            WRITERS.lock().unwrap_or_else(|p| p.into_inner()).push(writer as usize);
            TACHYON_OK
        })
    }

    /// Forgets `writer` (it is being closed).
    pub(super) fn forget(writer: *mut tachyon_writer) {
        WRITERS.lock().unwrap_or_else(|p| p.into_inner()).retain(|&w| w != writer as usize);
    }
}

#[cfg(all(feature = "std", unix))]
pub use at_exit::tachyon_writer_finalize_at_exit;
