//! The writer in caller memory: every call, valid and invalid, as a C program makes them.

use std::mem::MaybeUninit;
use std::ptr::{null, null_mut};

use tachyon_c::*;

use crate::common::*;

#[test]
fn version_abi_and_every_status_message() {
    assert_eq!(tachyon_abi_version(), TACHYON_ABI_VERSION);
    assert_eq!(text(tachyon_version()), env!("CARGO_PKG_VERSION"));
    let codes = [
        TACHYON_OK,
        TACHYON_END,
        TACHYON_E_NULL,
        TACHYON_E_BAD_HANDLE,
        TACHYON_E_CLOSED,
        TACHYON_E_FINALIZED,
        TACHYON_E_ARGUMENT,
        TACHYON_E_MEMORY,
        TACHYON_E_CAPACITY,
        TACHYON_E_LIMIT,
        TACHYON_E_IO,
        TACHYON_E_UNKNOWN_FRAME,
        TACHYON_E_ZSTD,
        TACHYON_E_UNSUPPORTED,
        TACHYON_E_FORMAT,
        TACHYON_E_TRUNCATED,
        TACHYON_E_PANIC,
        TACHYON_E_FULL,
    ];
    let messages: std::collections::BTreeSet<String> = codes.iter().map(|&c| message(c)).collect();
    assert_eq!(messages.len(), codes.len(), "each code its own message");
    assert_eq!(message(-99), "unknown status code");
}

#[test]
fn options_and_memory_size() {
    // SAFETY (each call below): NULL or valid pointers, as the header allows.
    assert_eq!(unsafe { tachyon_writer_options_init(null_mut()) }, TACHYON_E_NULL);
    let o = options();
    assert_eq!(o.sample_interval_us, 1000);
    assert_eq!((o.mode, o.capture_features), (TACHYON_MODE_UNKNOWN, TACHYON_CAPTURE_FEATURES_UNKNOWN));
    let mut bytes = 0usize;
    assert_eq!(unsafe { tachyon_writer_memory_size(null(), &mut bytes) }, TACHYON_E_NULL);
    assert_eq!(unsafe { tachyon_writer_memory_size(&o, null_mut()) }, TACHYON_E_NULL);
    ok(unsafe { tachyon_writer_memory_size(&o, &mut bytes) });
    let mut more = o;
    more.frames *= 2;
    let mut bigger = 0usize;
    ok(unsafe { tachyon_writer_memory_size(&more, &mut bigger) });
    assert!(bigger > bytes && bytes > 0);
    // (The byte order is checked by init.)
    for bad in [
        tachyon_writer_options { compression: 9, ..o },
        tachyon_writer_options { threads: 0, ..o },
        tachyon_writer_options { frames: 0, ..o },
        tachyon_writer_options { mode: 5, ..o },
        tachyon_writer_options { capture_features: 32, ..o },
        tachyon_writer_options { rle_budget: 1, ..o },
    ] {
        assert_eq!(unsafe { tachyon_writer_memory_size(&bad, &mut bytes) }, TACHYON_E_ARGUMENT);
    }
}

#[test]
fn init_refuses_nulls_short_memory_and_a_sink_without_callbacks() {
    let o = options();
    let mut bytes = 0usize;
    // SAFETY (each call below): NULL or valid pointers; `memory` holds `bytes` bytes.
    ok(unsafe { tachyon_writer_memory_size(&o, &mut bytes) });
    let mut memory = vec![0u8; bytes];
    let mut sink_memory = Memory::default();
    let s = sink(&mut sink_memory);
    let m = memory.as_mut_ptr().cast();
    let mut w = null_mut();
    assert_eq!(unsafe { tachyon_writer_init(m, bytes, &o, &s, null_mut()) }, TACHYON_E_NULL);
    assert_eq!(unsafe { tachyon_writer_init(null_mut(), bytes, &o, &s, &mut w) }, TACHYON_E_NULL);
    assert_eq!(unsafe { tachyon_writer_init(m, bytes, null(), &s, &mut w) }, TACHYON_E_NULL);
    assert_eq!(unsafe { tachyon_writer_init(m, bytes, &o, null(), &mut w) }, TACHYON_E_NULL);
    for short in [0, 16, bytes / 2] {
        assert_eq!(unsafe { tachyon_writer_init(m, short, &o, &s, &mut w) }, TACHYON_E_MEMORY);
        assert!(w.is_null(), "NULL on failure");
    }
    let no_write = tachyon_sink { write: None, ..s };
    assert_ne!(unsafe { tachyon_writer_init(m, bytes, &o, &no_write, &mut w) }, TACHYON_OK);
    let bad = tachyon_writer_options { byte_order: 5, ..o };
    assert_eq!(unsafe { tachyon_writer_init(m, bytes, &bad, &s, &mut w) }, TACHYON_E_ARGUMENT);
    ok(unsafe { tachyon_writer_init(m, bytes, &o, &s, &mut w) });
    ok(unsafe { tachyon_writer_close(w) });
}

/// Interns, writes and finalizes; the reader gives back every sample, frame and stat.
#[test]
fn a_writer_in_caller_memory_writes_what_the_reader_reads_back() {
    for byte_order in [TACHYON_BYTE_ORDER_NATIVE, TACHYON_BYTE_ORDER_LITTLE, TACHYON_BYTE_ORDER_BIG] {
        let o = tachyon_writer_options { byte_order, start_time_us: 1_000_000, sample_interval_us: 100, ..options() };
        let placed = Placed::new(&o);
        let w = placed.writer;
        let (file, func) = (exact(b"/srv/app/engine.py"), exact(b"step"));
        let exact = exact_frame(&file, &func, 40);
        let named = c_frame(c"/srv/app/main.py", c"main", 3);
        let (mut step, mut main) = (u32::MAX, u32::MAX);
        // SAFETY (each call below): a live writer and valid pointers.
        ok(unsafe { tachyon_writer_intern_frame(w, &exact, &mut step) });
        ok(unsafe { tachyon_writer_intern_frame(w, &named, &mut main) });
        let mut again = u32::MAX;
        ok(unsafe { tachyon_writer_intern_frame(w, &exact, &mut again) });
        assert_eq!(again, step, "the same frame, the same id");
        // Innermost first.
        let stack = [step, main];
        for i in 0..5u64 {
            ok(unsafe { tachyon_writer_write_sample_ids(w, 1_000_000 + i * 100, 0, 7, 2, stack.as_ptr(), 2) });
        }
        let frames = [c_frame(c"/srv/app/io.py", c"read", 12), named];
        ok(unsafe { tachyon_writer_write_sample(w, 1_000_600, 1, 8, 1, frames.as_ptr(), frames.len()) });
        assert_eq!(
            unsafe { tachyon_writer_write_sample_ids(w, 1_000_700, 0, 7, 0, [999u32].as_ptr(), 1) },
            TACHYON_E_UNKNOWN_FRAME
        );
        assert!(text(unsafe { tachyon_writer_last_error(w) }).contains("999"), "the message names the id");
        let stats = tachyon_stats {
            duration_sec: 0.7,
            sample_rate: 10_000.0,
            error_rate: 0.5,
            missed_samples: 2.0,
            has_error_rate: 1,
            has_missed_samples: 1,
        };
        assert_eq!(
            unsafe { tachyon_writer_set_stats(w, &tachyon_stats { duration_sec: f64::NAN, ..stats }) },
            TACHYON_E_ARGUMENT
        );
        ok(unsafe { tachyon_writer_set_stats(w, &stats) });
        let mut counts = tachyon_writer_counts::default();
        ok(unsafe { tachyon_writer_get_counts(w, &mut counts) });
        assert_eq!((counts.samples, counts.threads, counts.frames, counts.limit_reached), (6, 2, 3, 0));
        let (mut sequence, mut start) = (9u64, 0u64);
        ok(unsafe { tachyon_writer_get_period(w, &mut sequence, &mut start) });
        assert_eq!((sequence, start), (0, 1_000_000));
        ok(unsafe { tachyon_writer_get_period(w, null_mut(), null_mut()) });
        ok(unsafe { tachyon_writer_flush(w) });
        let mut size = 0u64;
        ok(unsafe { tachyon_writer_finalize(w, &mut size) });
        let bytes = placed.bytes();
        assert_eq!(size as usize, bytes.len());

        let (info, samples, reader) = read_memory(&bytes);
        assert_eq!(
            info.big_endian,
            u8::from(
                byte_order == TACHYON_BYTE_ORDER_BIG
                    || (byte_order == TACHYON_BYTE_ORDER_NATIVE && cfg!(target_endian = "big"))
            )
        );
        assert_eq!((info.start_time_us, info.sample_interval_us, info.sample_count), (1_000_000, 100, 6));
        assert_eq!((info.thread_count, info.frame_count, info.file_size), (2, 3, size));
        assert_eq!(info.has_stats, 1);
        assert_eq!((info.stats.duration_sec, info.stats.missed_samples), (0.7, 2.0));
        // Thread 7's five samples are a REPEAT run, written when it ends (at finalize): after
        // thread 8's sample, as CPython orders them.
        let of = |thread| samples.iter().filter(move |s| s.1 == thread);
        assert_eq!(samples.len(), 6);
        assert!(of(7).all(|s| s.4 == stack && s.2 == 0 && s.3 == 2));
        assert_eq!(of(7).map(|s| s.0).collect::<Vec<_>>(), (0..5).map(|i| 1_000_000 + i * 100).collect::<Vec<_>>());
        let other = of(8).next().unwrap();
        assert_eq!((other.0, other.2, other.3), (1_000_600, 1, 1));
        assert_eq!(frame_of(reader, step), ("/srv/app/engine.py".into(), "step".into(), 40, 42, 4, 9, 7));
        assert_eq!(frame_of(reader, other.4[0]).1, "read");
        assert_eq!(frame_of(reader, other.4[1]), ("/srv/app/main.py".into(), "main".into(), 3, 3, -1, -1, -1));
        let mut f = MaybeUninit::uninit();
        assert_eq!(unsafe { tachyon_reader_frame(reader, 99, f.as_mut_ptr()) }, TACHYON_E_ARGUMENT);
        assert!(!text(unsafe { tachyon_reader_last_error(reader) }).is_empty());
        assert_eq!(unsafe { tachyon_reader_frame(reader, 0, null_mut()) }, TACHYON_E_NULL);
        close_reader(reader);
        assert_eq!(unsafe { tachyon_reader_close(reader) }, TACHYON_E_CLOSED);
    }
}

#[test]
fn calls_after_finalize_and_close_and_on_no_handle_are_codes() {
    let placed = Placed::new(&options());
    let w = placed.writer;
    let f = c_frame(c"a.py", c"f", 1);
    let mut id = 0u32;
    // SAFETY (each call below): NULL, live, finalized, closed or foreign handles and valid
    // pointers, as the header allows.
    ok(unsafe { tachyon_writer_intern_frame(w, &f, &mut id) });
    assert_eq!(unsafe { tachyon_writer_intern_frame(w, null(), &mut id) }, TACHYON_E_NULL);
    assert_eq!(unsafe { tachyon_writer_intern_frame(w, &f, null_mut()) }, TACHYON_E_NULL);
    let unnamed = tachyon_frame { funcname: null(), funcname_len: 3, ..f };
    assert_eq!(unsafe { tachyon_writer_intern_frame(w, &unnamed, &mut id) }, TACHYON_E_NULL);
    assert_eq!(unsafe { tachyon_writer_write_sample_ids(w, 1, 0, 1, 0, null(), 1) }, TACHYON_E_NULL);
    assert_eq!(unsafe { tachyon_writer_write_sample(w, 1, 0, 1, 0, null(), 1) }, TACHYON_E_NULL);
    ok(unsafe { tachyon_writer_write_sample_ids(w, 1, 0, 1, 0, null(), 0) });
    ok(unsafe { tachyon_writer_finalize(w, null_mut()) });
    assert_eq!(unsafe { tachyon_writer_finalize(w, null_mut()) }, TACHYON_E_FINALIZED);
    assert_eq!(unsafe { tachyon_writer_write_sample_ids(w, 2, 0, 1, 0, &id, 1) }, TACHYON_E_FINALIZED);
    assert_eq!(unsafe { tachyon_writer_intern_frame(w, &f, &mut id) }, TACHYON_E_FINALIZED);
    assert_eq!(unsafe { tachyon_writer_flush(w) }, TACHYON_E_FINALIZED);
    assert!(text(unsafe { tachyon_writer_last_error(w) }).contains("finalized"));
    let mut counts = tachyon_writer_counts::default();
    ok(unsafe { tachyon_writer_get_counts(w, &mut counts) });
    assert_eq!(counts.samples, 1);
    ok(unsafe { tachyon_writer_close(w) });
    assert_eq!(unsafe { tachyon_writer_close(w) }, TACHYON_E_CLOSED);
    assert_eq!(unsafe { tachyon_writer_get_counts(w, &mut counts) }, TACHYON_E_CLOSED);
    for status in [
        unsafe { tachyon_writer_close(null_mut()) },
        unsafe { tachyon_writer_flush(null_mut()) },
        unsafe { tachyon_writer_finalize(null_mut(), null_mut()) },
        unsafe { tachyon_writer_get_counts(null_mut(), &mut counts) },
        unsafe { tachyon_writer_get_period(null_mut(), null_mut(), null_mut()) },
        unsafe { tachyon_writer_set_stats(null_mut(), null()) },
    ] {
        assert_eq!(status, TACHYON_E_NULL);
    }
    assert_eq!(text(unsafe { tachyon_writer_last_error(null_mut()) }), message(TACHYON_E_NULL));
    assert_eq!(text(unsafe { tachyon_writer_last_error(w) }), message(TACHYON_E_CLOSED));
    // Memory that never held a writer (aligned, zeroed, as large as any handle: the library
    // reads a handle's magic word, wherever the handle keeps it) is no handle. On this
    // thread's stack: a heap block may lie where another test's heap handle was closed, and
    // the library keeps such an address as closed until a new handle takes it (a `Vec` here
    // read as closed once, in a run of the test command).
    let mut zeros = [0u64; 4096];
    let foreign = zeros.as_mut_ptr().cast::<tachyon_writer>();
    assert_eq!(unsafe { tachyon_writer_flush(foreign) }, TACHYON_E_BAD_HANDLE);
    assert_eq!(unsafe { tachyon_writer_close(foreign) }, TACHYON_E_BAD_HANDLE);
}

#[test]
fn a_failing_sink_is_an_io_status_and_the_retry_writes_a_valid_file() {
    let mut placed = Placed::new(&tachyon_writer_options { frames: 4, ..options() });
    let w = placed.writer;
    let f = c_frame(c"a.py", c"f", 1);
    let mut id = 0u32;
    // SAFETY (each call below): a live writer and valid pointers.
    ok(unsafe { tachyon_writer_intern_frame(w, &f, &mut id) });
    for t in 0..20 {
        ok(unsafe { tachyon_writer_write_sample_ids(w, t, 0, 1, 0, &id, 1) });
    }
    placed.sink().failing_writes = 1;
    assert_eq!(unsafe { tachyon_writer_finalize(w, null_mut()) }, TACHYON_E_IO);
    assert!(text(unsafe { tachyon_writer_last_error(w) }).contains("offset"));
    ok(unsafe { tachyon_writer_finalize(w, null_mut()) });
    let (info, samples, reader) = read_memory(&placed.bytes());
    assert_eq!((info.sample_count, samples.len()), (20, 20));
    close_reader(reader);
}

#[test]
fn a_full_table_refuses_the_frame_and_finalize_keeps_what_came_before() {
    let placed = Placed::new(&tachyon_writer_options { frames: 2, ..options() });
    let w = placed.writer;
    let mut ids = [0u32; 3];
    let names = [c"a", c"b", c"c"];
    // SAFETY (each call below): a live writer and valid pointers.
    for (i, name) in names.iter().enumerate().take(2) {
        ok(unsafe { tachyon_writer_intern_frame(w, &c_frame(c"x.py", name, 1), &mut ids[i]) });
    }
    assert_eq!(
        unsafe { tachyon_writer_intern_frame(w, &c_frame(c"x.py", names[2], 1), &mut ids[2]) },
        TACHYON_E_CAPACITY
    );
    let frames = [c_frame(c"x.py", c"a", 1), c_frame(c"x.py", c"z", 9)];
    assert_eq!(unsafe { tachyon_writer_write_sample(w, 5, 0, 1, 0, frames.as_ptr(), 2) }, TACHYON_E_CAPACITY);
    ok(unsafe { tachyon_writer_write_sample_ids(w, 6, 0, 1, 0, ids.as_ptr(), 2) });
    let mut counts = tachyon_writer_counts::default();
    ok(unsafe { tachyon_writer_get_counts(w, &mut counts) });
    assert_eq!((counts.samples, counts.limit_reached), (1, 1));
    ok(unsafe { tachyon_writer_finalize(w, null_mut()) });
    let (info, samples, reader) = read_memory(&placed.bytes());
    assert_eq!((info.frame_count, samples.len()), (2, 1));
    close_reader(reader);
}
