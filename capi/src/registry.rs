//! Host builds: which addresses hold handles the library allocated (readers, file writers),
//! so that a call with a closed one is `TACHYON_E_CLOSED` without touching freed memory; and
//! the thread's last error message, for calls that fail before there is a handle to hold it.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ffi::{c_char, CStr, CString};
use std::fmt;
use std::sync::Mutex;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Live(Kind),
    Closed,
}

/// What a live heap handle is, so that one kind is never taken for the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Reader,
    Writer,
    Modules,
}

/// Handle address → state. A closed handle's address stays (one entry) until the allocator
/// gives it to a new handle, so the map grows only with the distinct addresses handles ever
/// had. A B-tree rather than a hash map: no random state to seed, and every node is held by
/// a pointer to its start (memory checkers see it reachable at exit).
static HANDLES: Mutex<BTreeMap<usize, Slot>> = Mutex::new(BTreeMap::new());

fn with<T>(f: impl FnOnce(&mut BTreeMap<usize, Slot>) -> T) -> T {
    let mut guard = HANDLES.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    f(&mut guard)
}

/// A heap handle was made at `addr`.
pub(crate) fn open(addr: usize, kind: Kind) {
    with(|m| m.insert(addr, Slot::Live(kind)));
}

/// The heap handle at `addr` was closed (and freed).
pub(crate) fn close(addr: usize) {
    with(|m| m.insert(addr, Slot::Closed));
}

/// The caller's memory at `addr` now holds a new handle: a closed heap handle's address no
/// longer means "closed".
pub(crate) fn forget(addr: usize) {
    with(|m| m.remove(&addr));
}

pub(crate) fn is_closed(addr: usize) -> bool {
    with(|m| m.get(&addr) == Some(&Slot::Closed))
}

pub(crate) fn is_live(addr: usize, kind: Kind) -> bool {
    with(|m| m.get(&addr) == Some(&Slot::Live(kind)))
}

/// The live heap handle of `kind` at `handle`: `TACHYON_E_NULL`, `TACHYON_E_CLOSED` for one
/// closed, `TACHYON_E_BAD_HANDLE` for anything else.
///
/// # Safety
/// `handle` must be NULL or a pointer this library gave (closed ones are recognised).
pub(crate) unsafe fn live<'a, T>(handle: *mut T, kind: Kind) -> Result<&'a mut T, i32> {
    if handle.is_null() {
        return Err(crate::TACHYON_E_NULL);
    }
    if is_live(handle as usize, kind) {
        // SAFETY: the registry says a handle of this kind lives here.
        return Ok(unsafe { &mut *handle });
    }
    if is_closed(handle as usize) {
        return Err(crate::TACHYON_E_CLOSED);
    }
    Err(crate::TACHYON_E_BAD_HANDLE)
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Keeps `args` as this thread's last error message.
pub(crate) fn set_last_error(args: fmt::Arguments<'_>) {
    let text = fmt::format(args).replace('\0', " ");
    LAST_ERROR.with(|e| *e.borrow_mut() = CString::new(text).unwrap_or_default());
}

/// The details of the last error of any call on this thread (NUL-terminated, valid until the
/// thread's next failing call); the only place the details of a failed
/// `tachyon_reader_open_*` or `tachyon_writer_open_file` are. Host builds only.
#[no_mangle]
pub extern "C" fn tachyon_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// A C path as a `Path` (bytes as they are on Unix).
pub(crate) fn path_of(path: &CStr) -> std::path::PathBuf {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        std::path::PathBuf::from(std::ffi::OsStr::from_bytes(path.to_bytes()))
    }
    #[cfg(not(unix))]
    {
        std::path::PathBuf::from(path.to_string_lossy().into_owned())
    }
}
