//! The writers the library owns: a file, a journaled stream, rotating periods (with the
//! period callback), finalizing at exit; the reader from a path.

use std::ffi::{c_void, CString};
use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut};

use tachyon_c::*;

use crate::common::*;

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tachyon-capi-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn c_path(path: &Path) -> CString {
    CString::new(path.as_os_str().as_encoded_bytes()).unwrap()
}

/// Interns one frame and writes `n` samples at 100 µs steps from `from`.
fn write(w: *mut tachyon_writer, from: u64, n: u64) {
    let mut id = 0u32;
    // SAFETY: a live writer and valid pointers.
    ok(unsafe { tachyon_writer_intern_frame(w, &c_frame(c"/app/loop.py", c"spin", 4), &mut id) });
    for i in 0..n {
        ok(unsafe { tachyon_writer_write_sample_ids(w, from + i * 100, 0, 3, 0, &id, 1) });
    }
}

/// Samples of the profile at `path`, read through the C reader from the path.
fn samples_at(path: &Path) -> u64 {
    let mut reader = null_mut();
    // SAFETY: a NUL-terminated path and a pointer to fill.
    ok(unsafe { tachyon_reader_open_file(c_path(path).as_ptr(), &mut reader) });
    let (info, samples) = read_all(reader);
    close_reader(reader);
    assert_eq!(info.sample_count, samples.len() as u64);
    info.sample_count
}

#[test]
fn a_file_and_a_journal_the_library_owns() {
    let dir = temp("files");
    let (file, journal) = (dir.join("run.pyb"), dir.join("journal.pyb"));
    let o = options();
    let mut w = null_mut();
    // SAFETY (each call below): NULL or valid pointers, NUL-terminated paths.
    assert_eq!(unsafe { tachyon_writer_open_file(null(), &o, &mut w) }, TACHYON_E_NULL);
    assert_eq!(unsafe { tachyon_writer_open_file(c_path(&file).as_ptr(), null(), &mut w) }, TACHYON_E_NULL);
    let nowhere = c_path(&dir.join("no/such/folder/x.pyb"));
    assert_eq!(unsafe { tachyon_writer_open_file(nowhere.as_ptr(), &o, &mut w) }, TACHYON_E_IO);
    assert!(text(tachyon_last_error()).contains("no/such/folder"));
    ok(unsafe { tachyon_writer_open_file(c_path(&file).as_ptr(), &o, &mut w) });
    write(w, 0, 30);
    ok(unsafe { tachyon_writer_finalize(w, null_mut()) });
    ok(unsafe { tachyon_writer_close(w) });
    assert_eq!(unsafe { tachyon_writer_close(w) }, TACHYON_E_CLOSED);
    assert_eq!(samples_at(&file), 30);

    let policy = tachyon_flush_policy { every_samples: 8, every_us: 0 };
    assert_eq!(
        unsafe { tachyon_writer_open_journal(c_path(&journal).as_ptr(), &o, &policy, null_mut()) },
        TACHYON_E_NULL
    );
    let zstd = tachyon_writer_options { compression: TACHYON_COMPRESSION_ZSTD, ..o };
    assert_eq!(
        unsafe { tachyon_writer_open_journal(c_path(&journal).as_ptr(), &zstd, &policy, &mut w) },
        TACHYON_E_UNSUPPORTED
    );
    ok(unsafe { tachyon_writer_open_journal(c_path(&journal).as_ptr(), &o, &policy, &mut w) });
    write(w, 0, 20);
    ok(unsafe { tachyon_writer_flush(w) });
    // The stream so far is a journal, not yet a profile.
    assert!(std::fs::metadata(&journal).unwrap().len() > 0);
    ok(unsafe { tachyon_writer_finalize(w, null_mut()) });
    ok(unsafe { tachyon_writer_close(w) });
    assert_eq!(samples_at(&journal), 20);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// What the period callback was told.
#[derive(Default)]
struct Told {
    periods: Vec<(u64, u64, u64, String)>,
}

unsafe extern "C" fn on_period(context: *mut c_void, period: *const tachyon_period) {
    // SAFETY: the test's `Told`; the period and its path are valid during the call.
    let (told, p) = unsafe { (&mut *context.cast::<Told>(), &*period) };
    told.periods.push((p.sequence, p.start_time_us, p.samples, text(p.path)));
}

#[test]
fn rotating_periods_are_told_to_the_callback_and_each_is_a_profile() {
    let dir = temp("rotating");
    let prefix = c_path(&dir.join("app"));
    let rotation = tachyon_rotation { every_us: 1000, every_bytes: 0 };
    let mut w = null_mut();
    // SAFETY (each call below): NULL or valid pointers, NUL-terminated paths; `told` lives
    // until the writer is closed.
    assert_eq!(
        unsafe { tachyon_writer_open_rotating(prefix.as_ptr(), &options(), null(), null(), &mut w) },
        TACHYON_E_NULL
    );
    for policy in [None, Some(tachyon_flush_policy { every_samples: 4, every_us: 0 })] {
        let policy_ptr = policy.as_ref().map_or(null(), |p| p as *const _);
        ok(unsafe { tachyon_writer_open_rotating(prefix.as_ptr(), &options(), &rotation, policy_ptr, &mut w) });
        let told = Box::into_raw(Box::<Told>::default());
        ok(unsafe { tachyon_writer_on_period_end(w, Some(on_period), told.cast()) });
        // 25 samples 100 µs apart: periods of 10 at 0, 1000 and 2000 µs; the rotation starts
        // a fourth at the last sample's time, which finalize ends empty.
        write(w, 0, 25);
        let (mut sequence, mut start) = (0u64, 0u64);
        ok(unsafe { tachyon_writer_get_period(w, &mut sequence, &mut start) });
        assert_eq!((sequence, start), (2, 2000));
        ok(unsafe { tachyon_writer_rotate(w) });
        ok(unsafe { tachyon_writer_finalize(w, null_mut()) });
        ok(unsafe { tachyon_writer_close(w) });
        // SAFETY: made above; the writer that called back is closed.
        let told = unsafe { Box::from_raw(told) };
        let seen: Vec<(u64, u64, u64)> = told.periods.iter().map(|p| (p.0, p.1, p.2)).collect();
        assert_eq!(seen, [(0, 0, 10), (1, 1000, 10), (2, 2000, 5), (3, 2400, 0)], "{policy:?}");
        for (_, _, samples, path) in &told.periods {
            assert_eq!(samples_at(Path::new(path)), *samples);
            std::fs::remove_file(path).unwrap();
        }
    }
    // Only a rotating writer rotates and has periods.
    let placed = Placed::new(&options());
    assert_eq!(unsafe { tachyon_writer_rotate(placed.writer) }, TACHYON_E_UNSUPPORTED);
    assert_eq!(unsafe { tachyon_writer_on_period_end(placed.writer, None, null_mut()) }, TACHYON_E_UNSUPPORTED);
    assert_eq!(unsafe { tachyon_writer_rotate(null_mut()) }, TACHYON_E_NULL);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Registering is all that can be seen in the process: the exit handler runs after the
/// tests (the C tests check the file it leaves). Miri does not run `atexit`.
#[test]
#[cfg_attr(miri, ignore = "atexit is a libc call Miri does not emulate")]
fn finalize_at_exit_takes_a_live_writer_only() {
    let placed = Placed::new(&options());
    // SAFETY: NULL and a live handle.
    assert_eq!(unsafe { tachyon_writer_finalize_at_exit(null_mut()) }, TACHYON_E_NULL);
    ok(unsafe { tachyon_writer_finalize_at_exit(placed.writer) });
    // Closing (in `drop`) forgets it: the exit handler does not touch the freed memory.
}

#[test]
fn finalize_at_exit_refuses_no_handle() {
    // SAFETY: NULL, as the header allows.
    assert_eq!(unsafe { tachyon_writer_finalize_at_exit(null_mut()) }, TACHYON_E_NULL);
}
