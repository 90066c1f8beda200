//! The frame objects a writer is given: a cache of them by identity (a `FrameInfo` object to
//! the id the core writer gave its content), and a quick reading of plain ones.
//!
//! A profiler hands the writer the same frame objects again and again (CPython's reader hands
//! one `stack_frames` list to every sample of a REPEAT run; CPython's sampler keeps the
//! objects of frames that did not change), and a deep stack read afresh costs about 150 ns a
//! frame (four items, two names, four location parts) where a look-up here costs a few. An
//! object is cached only when its content cannot change and dropping it runs no Python code:
//! an exact tuple or `FrameInfo` whose names are exact strs, whose location is `None` or an
//! exact tuple or `LocationInfo` of exact ints, and whose opcode is `None` or an exact int.
//! The slot holds a reference, so the address cannot be reused by another object while the
//! slot names it. A fixed number of slots, four to a set (one cache line): memory does not
//! grow with the profile.

use pyo3::ffi;
use pyo3::prelude::*;
use tachyon::core::{Frame, FrameId, Location};

/// Slots in a set, the ways an object's address can go: a set is one 64-byte cache line.
const WAYS: usize = 4;

/// Sets (a power of two): 32,768 slots, so at most that many frame objects are kept alive
/// (about 4 MB) and the table is 512 KiB. Replaying `examples/stdlib_work.pyb` thirty times
/// hands the writer 17,000 frame objects in turn: with 16,384 slots mapped directly one
/// look-up in three missed, and each miss dropped its slot's reference to a cold object (a
/// quarter of the writer's time, by `perf`); four ways of twice the slots miss one in ten.
const SETS: usize = 1 << SET_BITS;
const SET_BITS: u32 = 13;

/// Look-ups between two decisions on whether to keep using the table fully.
const WINDOW: u32 = 512;

/// In the sparing mode, one frame in this many is looked up (and inserted when missed).
const SPARE: u32 = 16;

/// One cache line of slots.
#[repr(align(64))]
struct Set([Option<(Py<PyAny>, FrameId)>; WAYS]);

/// The cache (see the module docs).
///
/// A caller that makes new frame objects for every sample never hits, and would pay for a
/// random read of the table, a reference held and one dropped on every frame (measured: fresh
/// objects for every sample of a deep profile wrote 1.6× slower than CPython with a
/// 32,768-slot table used on every frame). So when fewer than one look-up in eight hit over a
/// window, the cache spares itself: only one frame in sixteen is looked up (and inserted when
/// missed) until more than one of those in 64 hits again.
pub struct FrameCache {
    sets: Vec<Set>,
    /// The way the next miss in a full set replaces: the ways in turn, which a walk over more
    /// objects than a set holds cannot defeat as it defeats least-recently-used.
    turn: usize,
    lookups: u32,
    hits: u32,
    sparing: bool,
    /// Frames since the last one looked up, while sparing.
    skipped: u32,
}

/// Where an object that [`FrameCache::get`] did not find goes if it is cached: a set and way,
/// or nowhere (a frame the sparing mode did not look up).
pub struct Miss(Option<(usize, usize)>);

impl Default for FrameCache {
    fn default() -> Self {
        let set = || Set(std::array::from_fn(|_| None));
        FrameCache {
            sets: (0..SETS).map(|_| set()).collect(),
            turn: 0,
            lookups: 0,
            hits: 0,
            sparing: false,
            skipped: 0,
        }
    }
}

fn set_of(obj: *mut ffi::PyObject) -> usize {
    // Objects are 16-byte aligned; a multiplicative hash of the rest of the address.
    let h = ((obj as usize as u64) >> 4).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> (64 - SET_BITS)) as usize
}

impl FrameCache {
    /// The id of this very object if it is cached, else where it would go.
    #[inline]
    pub fn get(&mut self, obj: *mut ffi::PyObject) -> Result<FrameId, Miss> {
        if self.sparing {
            self.skipped += 1;
            if self.skipped < SPARE {
                return Err(Miss(None));
            }
            self.skipped = 0;
        }
        self.lookups += 1;
        if self.lookups == WINDOW {
            self.sparing = if self.sparing { self.hits * 64 <= self.lookups } else { self.hits * 8 < self.lookups };
            (self.lookups, self.hits) = (0, 0);
        }
        let set = set_of(obj);
        let mut empty = None;
        for (way, slot) in self.sets[set].0.iter().enumerate() {
            match slot {
                Some((cached, id)) if cached.as_ptr() == obj => {
                    self.hits += 1;
                    return Ok(*id);
                }
                Some(_) => {}
                None => empty = Some(way),
            }
        }
        let way = empty.unwrap_or_else(|| {
            self.turn = (self.turn + 1) % WAYS;
            self.turn
        });
        Err(Miss(Some((set, way))))
    }

    /// Caches `obj` (a plain frame: [`read_plain`] read it, and [`Self::get`] said `miss`) as
    /// `id`, in place of whatever held the slot (dropping that one runs no Python code: it was
    /// plain too).
    ///
    /// # Safety
    /// `obj` is a live object and the GIL is held.
    pub unsafe fn insert(&mut self, py: Python<'_>, miss: Miss, obj: *mut ffi::PyObject, id: FrameId) {
        if let Miss(Some((set, way))) = miss {
            self.sets[set].0[way] = Some((Bound::from_borrowed_ptr(py, obj).unbind(), id));
        }
    }
}

/// The types a plain frame is made of, by address: a frame that is an exact tuple or
/// `FrameInfo` holding exact strs, ints, `None` and an exact tuple or `LocationInfo` is read
/// here with borrowed references, a dozen C-API calls, and no Python code. Anything else
/// ([`read_plain`] says `None`) goes the general way (`writer::frame_in`), which takes any
/// sequence and raises CPython's errors.
pub struct PlainTypes {
    interpreter: *mut ffi::PyTypeObject,
    thread: *mut ffi::PyTypeObject,
    frame: *mut ffi::PyTypeObject,
    location: *mut ffi::PyTypeObject,
}

impl PlainTypes {
    /// The sample types in use (CPython's on 3.15, this module's before).
    pub fn new(types: &crate::types::Types) -> Self {
        PlainTypes {
            interpreter: types.interpreter.as_ptr().cast(),
            thread: types.thread.as_ptr().cast(),
            frame: types.frame.as_ptr().cast(),
            location: types.location.as_ptr().cast(),
        }
    }
}

/// A plain `InterpreterInfo` (an exact one or an exact tuple of at least two items, an exact
/// int id within 32 bits, an exact list of threads) read with borrowed references: its id
/// and its `threads` list (borrowed from it). `None` for anything else, which the general
/// way reads (and raises for, or calls a limit).
///
/// # Safety
/// `interpreter` is a live object and the GIL is held.
pub unsafe fn read_plain_interpreter(
    interpreter: *mut ffi::PyObject,
    t: &PlainTypes,
) -> Option<(u32, *mut ffi::PyObject)> {
    let ty = ffi::Py_TYPE(interpreter);
    if (ty != t.interpreter && ty != std::ptr::addr_of_mut!(ffi::PyTuple_Type)) || ffi::PyTuple_Size(interpreter) < 2 {
        return None;
    }
    let (iid, threads) = (ffi::PyTuple_GetItem(interpreter, 0), ffi::PyTuple_GetItem(interpreter, 1));
    if ffi::Py_TYPE(iid) != std::ptr::addr_of_mut!(ffi::PyLong_Type)
        || ffi::Py_TYPE(threads) != std::ptr::addr_of_mut!(ffi::PyList_Type)
    {
        return None;
    }
    Some((u32::try_from(plain_u64(iid)?).ok()?, threads))
}

/// A plain `ThreadInfo` (an exact one or an exact tuple of at least three items, an exact
/// int id that fits 64 bits, an exact int status that fits a C long) read with borrowed
/// references: its id, status (low 8 bits) and `frame_info` object (borrowed from it).
/// `None` for anything else, which the general way reads (and raises for).
///
/// # Safety
/// `thread` is a live object and the GIL is held.
pub unsafe fn read_plain_thread(thread: *mut ffi::PyObject, t: &PlainTypes) -> Option<(u64, u8, *mut ffi::PyObject)> {
    let tuple = std::ptr::addr_of_mut!(ffi::PyTuple_Type);
    let int = std::ptr::addr_of_mut!(ffi::PyLong_Type);
    let ty = ffi::Py_TYPE(thread);
    if (ty != t.thread && ty != tuple) || ffi::PyTuple_Size(thread) < 3 {
        return None;
    }
    let (tid, status) = (ffi::PyTuple_GetItem(thread, 0), ffi::PyTuple_GetItem(thread, 1));
    if ffi::Py_TYPE(tid) != int || ffi::Py_TYPE(status) != int {
        return None;
    }
    let id = plain_u64(tid)?;
    let mut overflow = 0;
    let s = ffi::PyLong_AsLongAndOverflow(status, &mut overflow);
    if overflow != 0 {
        return None;
    }
    Some((id, s as u8, ffi::PyTuple_GetItem(thread, 2)))
}

/// The UTF-8 of an exact str, borrowed from it; `None` for anything else or an error (a lone
/// surrogate), which the general way then raises.
///
/// # Safety
/// `o` is a live object and the GIL is held; the bytes live as long as `o`.
unsafe fn plain_name<'a>(o: *mut ffi::PyObject) -> Option<&'a [u8]> {
    if ffi::Py_TYPE(o) != std::ptr::addr_of_mut!(ffi::PyUnicode_Type) {
        return None;
    }
    let mut len: ffi::Py_ssize_t = 0;
    let p = crate::types::utf8_and_size(o, &mut len);
    if p.is_null() {
        ffi::PyErr_Clear();
        return None;
    }
    Some(std::slice::from_raw_parts(p.cast(), len as usize))
}

/// An exact int's value if it fits 64 bits, else -1 (`writer::location_part`'s rule).
///
/// # Safety
/// `o` is a live exact int and the GIL is held.
unsafe fn plain_i64(o: *mut ffi::PyObject) -> i64 {
    let mut overflow = 0;
    let v = ffi::PyLong_AsLongLongAndOverflow(o, &mut overflow);
    if overflow != 0 {
        -1
    } else {
        v
    }
}

/// An exact int's value if it is within 0 and 2^64 − 1; `None` otherwise (no error left set:
/// the general way raises CPython's).
///
/// # Safety
/// `o` is a live exact int and the GIL is held.
unsafe fn plain_u64(o: *mut ffi::PyObject) -> Option<u64> {
    let v = ffi::PyLong_AsUnsignedLongLong(o);
    if v == u64::MAX && !ffi::PyErr_Occurred().is_null() {
        ffi::PyErr_Clear();
        return None;
    }
    Some(v)
}

/// `frame` read as `writer::frame_in` reads it, when it is plain (see [`PlainTypes`]); such a
/// frame may also be cached by identity.
///
/// # Safety
/// `frame` is a live object, the GIL is held, and no Python code runs while the result is
/// used (the names borrow from the str objects the frame holds).
pub unsafe fn read_plain<'a>(frame: *mut ffi::PyObject, t: &PlainTypes) -> Option<Frame<'a>> {
    let tuple = std::ptr::addr_of_mut!(ffi::PyTuple_Type);
    let int = std::ptr::addr_of_mut!(ffi::PyLong_Type);
    let none = ffi::Py_None();
    let ty = ffi::Py_TYPE(frame);
    if (ty != t.frame && ty != tuple) || ffi::PyTuple_Size(frame) < 4 {
        return None;
    }
    let filename = plain_name(ffi::PyTuple_GetItem(frame, 0))?;
    let funcname = plain_name(ffi::PyTuple_GetItem(frame, 2))?;
    let loc = ffi::PyTuple_GetItem(frame, 1);
    let location = if loc == none {
        None
    } else {
        let lt = ffi::Py_TYPE(loc);
        if lt != t.location && lt != tuple {
            return None;
        }
        let n = ffi::PyTuple_Size(loc);
        let mut parts = [-1i32; 4];
        for (i, part) in parts.iter_mut().enumerate() {
            if (i as ffi::Py_ssize_t) < n {
                let v = ffi::PyTuple_GetItem(loc, i as ffi::Py_ssize_t);
                if ffi::Py_TYPE(v) != int {
                    return None;
                }
                *part = plain_i64(v) as i32;
            }
        }
        Some(Location { lineno: parts[0], end_lineno: parts[1], col: parts[2], end_col: parts[3] })
    };
    let op = ffi::PyTuple_GetItem(frame, 3);
    let opcode = if op == none {
        None
    } else if ffi::Py_TYPE(op) == int {
        u8::try_from(plain_i64(op)).ok().filter(|&n| n != 255)
    } else {
        return None;
    };
    Some(Frame { filename, funcname, location, opcode })
}
