//! What a reader must report for the samples a Tachyon writer was given (spec 4), computed
//! from the writer's input alone: the model the round-trip tests (core's property test and
//! the `roundtrip` fuzz target) compare the reader against. Samples are kept per thread in
//! the order they were written: REPEAT runs are deferred, so file order is not time order
//! across threads.

use std::collections::BTreeMap;

use tachyon_core::{Frame, Location};

/// A frame as the reader reports it: file, function, `(lineno, end_lineno, col, end_col)`
/// when the line is known, and the opcode.
pub type FrameView = (Vec<u8>, Vec<u8>, Option<(i32, i32, i32, i32)>, Option<u8>);

/// Per `(thread_id, interpreter_id)`, its samples in order: timestamp, status, frames
/// innermost first.
pub type PerThread = BTreeMap<(u64, u32), Vec<(u64, u8, Vec<FrameView>)>>;

/// The frames the format keeps of a stack: the innermost 256 (spec 1, rule 5).
pub const KEPT_FRAMES: usize = 256;

/// What a reader must report for a frame written as `frame` (spec 4): no location iff the
/// line is unknown, an unknown end line takes the start line, an unknown column hides the
/// end column, opcode 255 is none.
pub fn expected(frame: &Frame<'_>) -> FrameView {
    let loc = frame.location.unwrap_or(Location::NONE);
    let end = |start: i32, end: i32| {
        if start == -1 {
            -1
        } else if end == -1 {
            start
        } else {
            end
        }
    };
    let view =
        (loc.lineno != -1).then(|| (loc.lineno, end(loc.lineno, loc.end_lineno), loc.col, end(loc.col, loc.end_col)));
    (frame.filename.to_vec(), frame.funcname.to_vec(), view, frame.opcode.filter(|&o| o != 255))
}

/// One sample as the writer was given it.
pub struct Written<'a, I: IntoIterator<Item = Frame<'a>>> {
    /// Thread id.
    pub thread_id: u64,
    /// Interpreter id.
    pub interpreter_id: u32,
    /// Timestamp (µs).
    pub timestamp_us: u64,
    /// Status byte.
    pub status: u8,
    /// The stack, innermost first.
    pub frames: I,
}

/// The samples a reader must report for `samples`, per thread.
pub fn model<'a, I: IntoIterator<Item = Frame<'a>>>(samples: impl IntoIterator<Item = Written<'a, I>>) -> PerThread {
    let mut want = PerThread::new();
    for s in samples {
        let frames = s.frames.into_iter().take(KEPT_FRAMES).map(|f| expected(&f)).collect();
        want.entry((s.thread_id, s.interpreter_id)).or_default().push((s.timestamp_us, s.status, frames));
    }
    want
}

/// The samples a reader reports, per thread, in the shape of [`model`]'s.
pub fn read_back<R>(reader: &mut tachyon_core::Reader<'_, R>) -> Result<PerThread, tachyon_core::ReadError<R::Error>>
where
    R: embedded_io::Read + embedded_io::Seek,
{
    let mut got = PerThread::new();
    while let Some(s) = reader.next_sample()? {
        let frames = s
            .frames()
            .map(|f| {
                (
                    f.filename.to_vec(),
                    f.funcname.to_vec(),
                    f.location.map(|l| (l.lineno, l.end_lineno, l.col, l.end_col)),
                    f.opcode,
                )
            })
            .collect();
        got.entry((s.thread_id, s.interpreter_id)).or_default().push((s.timestamp_us, s.status, frames));
    }
    Ok(got)
}
