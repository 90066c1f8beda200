//! The reader: files CPython 3.15.2 wrote (its vectors, both byte orders), from memory and
//! from a path; bad bytes refused by code with the details in the last error.

use std::ffi::CString;
use std::ptr::{null, null_mut};

use tachyon_c::*;

use crate::common::*;

/// Written by CPython 3.15.2's BinaryWriter from `05_two_threads.input.json`
/// (qemu-tests/vectors/cpython-3.15.2, see its README); its reader's dump is the
/// `.expected.jsonl` beside them.
const TWO_THREADS: [&[u8]; 2] = [
    include_bytes!("../../../qemu-tests/vectors/cpython-3.15.2/05_two_threads.x86_64.bin"),
    include_bytes!("../../../qemu-tests/vectors/cpython-3.15.2/05_two_threads.s390x.bin"),
];

#[test]
fn cpythons_files_read_from_memory_as_its_reader_reads_them() {
    for (file, big) in TWO_THREADS.iter().zip([0u8, 1]) {
        let (info, samples, reader) = read_memory(file);
        // As CPython's reader dumps it: 8 samples of 2 threads, 3 frames.
        assert_eq!(info.python_version, [3, 15, 2]);
        assert_eq!((info.big_endian, info.sample_count, info.thread_count, info.frame_count), (big, 8, 2, 3));
        assert_eq!((info.start_time_us, info.sample_interval_us, info.mode, info.has_stats), (1_000_000, 1000, -1, 0));
        assert_eq!(samples.len(), 8);
        assert_eq!((samples[0].0, samples[0].1, samples[0].3), (1_001_000, 1, 37));
        assert_eq!((samples[1].1, samples[1].3), (2, 4));
        assert_eq!(frame_of(reader, samples[0].4[0]), ("/app/main.py".into(), "main".into(), 10, 10, 4, 10, -1));
        assert_eq!(frame_of(reader, samples[1].4[0]).1, "helper");
        // After the end, the end again.
        let mut s = std::mem::MaybeUninit::uninit();
        // SAFETY: a live reader and a struct to fill.
        assert_eq!(unsafe { tachyon_reader_next_sample(reader, s.as_mut_ptr()) }, TACHYON_END);
        close_reader(reader);
    }
}

#[test]
fn bad_bytes_nulls_and_closed_readers_are_codes() {
    let mut reader = null_mut();
    let file = TWO_THREADS[0];
    // SAFETY (each call below): NULL or valid pointers, as the header allows.
    assert_eq!(unsafe { tachyon_reader_open_memory(file.as_ptr(), file.len(), null_mut()) }, TACHYON_E_NULL);
    assert_eq!(unsafe { tachyon_reader_open_memory(null(), 10, &mut reader) }, TACHYON_E_NULL);
    let garbage = [0x55u8; 200];
    assert_eq!(unsafe { tachyon_reader_open_memory(garbage.as_ptr(), garbage.len(), &mut reader) }, TACHYON_E_FORMAT);
    assert!(reader.is_null());
    assert!(text(tachyon_last_error()).contains("offset"), "{}", text(tachyon_last_error()));
    let cut = &file[..file.len() - 5];
    // Tables are found from the file's end: a cut one has a count that cannot fit.
    assert_eq!(unsafe { tachyon_reader_open_memory(cut.as_ptr(), cut.len(), &mut reader) }, TACHYON_E_FORMAT);
    assert!(text(tachyon_last_error()).contains("at file offset"));
    // CPython's own rule for a file shorter than its header.
    assert_eq!(unsafe { tachyon_reader_open_memory(file.as_ptr(), 10, &mut reader) }, TACHYON_E_FORMAT);
    assert!(text(tachyon_last_error()).contains("too small for header"));
    let missing = CString::new("/nonexistent/tachyon-capi-test.pyb").unwrap();
    assert_eq!(unsafe { tachyon_reader_open_file(missing.as_ptr(), &mut reader) }, TACHYON_E_IO);
    assert!(text(tachyon_last_error()).contains("tachyon-capi-test"));
    assert_eq!(unsafe { tachyon_reader_open_file(null(), &mut reader) }, TACHYON_E_NULL);
    let mut info = std::mem::MaybeUninit::uninit();
    assert_eq!(unsafe { tachyon_reader_info(null_mut(), info.as_mut_ptr()) }, TACHYON_E_NULL);
    assert_eq!(unsafe { tachyon_reader_next_sample(null_mut(), null_mut()) }, TACHYON_E_NULL);
    assert_eq!(unsafe { tachyon_reader_close(null_mut()) }, TACHYON_E_NULL);
    ok(unsafe { tachyon_reader_open_memory(file.as_ptr(), file.len(), &mut reader) });
    assert_eq!(unsafe { tachyon_reader_info(reader, null_mut()) }, TACHYON_E_NULL);
    close_reader(reader);
    assert_eq!(unsafe { tachyon_reader_info(reader, info.as_mut_ptr()) }, TACHYON_E_CLOSED);
    assert_eq!(text(unsafe { tachyon_reader_last_error(reader) }), message(TACHYON_E_CLOSED));
    // A writer's handle is not a reader.
    let placed = Placed::new(&options());
    assert_eq!(unsafe { tachyon_reader_info(placed.writer.cast(), info.as_mut_ptr()) }, TACHYON_E_BAD_HANDLE);
}
