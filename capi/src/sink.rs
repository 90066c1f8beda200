//! The sink as C callbacks: `write` and `seek` (the writer seeks once, back to the header,
//! when it finalizes, and back to its last good offset after a failed write), `flush`
//! optional.

use core::ffi::c_void;

/// Where the writer's bytes go.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct tachyon_sink {
    /// Passed back to every callback.
    pub context: *mut c_void,
    /// Writes up to `len` bytes of `data`; returns how many were taken (a short count is
    /// fine: the writer calls again with the rest), or a negative value on error. Returning
    /// 0 for a non-empty buffer is an error too (a stalled sink).
    pub write: Option<unsafe extern "C" fn(context: *mut c_void, data: *const u8, len: usize) -> isize>,
    /// Moves to the absolute byte `offset` from the start of the file; returns 0, or a
    /// negative value on error.
    pub seek: Option<unsafe extern "C" fn(context: *mut c_void, offset: u64) -> i32>,
    /// Optional (NULL for none): called once, at the end of finalize; 0 or a negative value
    /// on error.
    pub flush: Option<unsafe extern "C" fn(context: *mut c_void) -> i32>,
}

/// What a callback reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SinkError {
    /// The callback's return value.
    pub code: i64,
    /// Which callback.
    pub call: &'static str,
}

impl core::fmt::Display for SinkError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "the {} callback returned {}", self.call, self.code)
    }
}

impl core::error::Error for SinkError {}

impl embedded_io::Error for SinkError {
    fn kind(&self) -> embedded_io::ErrorKind {
        embedded_io::ErrorKind::Other
    }
}

/// The callbacks as an `embedded_io` sink. Both function pointers were checked when the
/// writer was made.
pub(crate) struct CallbackSink {
    pub(crate) sink: tachyon_sink,
}

impl embedded_io::ErrorType for CallbackSink {
    type Error = SinkError;
}

impl embedded_io::Write for CallbackSink {
    fn write(&mut self, buf: &[u8]) -> Result<usize, SinkError> {
        let Some(write) = self.sink.write else { return Err(SinkError { code: -1, call: "write" }) };
        // SAFETY: the caller gave a callback that takes any buffer of `len` bytes.
        let n = unsafe { write(self.sink.context, buf.as_ptr(), buf.len()) };
        if n < 0 {
            return Err(SinkError { code: n as i64, call: "write" });
        }
        // A callback claiming more than it was given took all of it.
        Ok((n as usize).min(buf.len()))
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        match self.sink.flush {
            None => Ok(()),
            // SAFETY: the caller's callback.
            Some(flush) => match unsafe { flush(self.sink.context) } {
                n if n < 0 => Err(SinkError { code: i64::from(n), call: "flush" }),
                _ => Ok(()),
            },
        }
    }
}

impl embedded_io::Seek for CallbackSink {
    fn seek(&mut self, pos: embedded_io::SeekFrom) -> Result<u64, SinkError> {
        let embedded_io::SeekFrom::Start(offset) = pos else {
            // The writer only seeks to absolute offsets.
            return Err(SinkError { code: -1, call: "seek" });
        };
        let Some(seek) = self.sink.seek else { return Err(SinkError { code: -1, call: "seek" }) };
        // SAFETY: the caller's callback.
        match unsafe { seek(self.sink.context, offset) } {
            n if n < 0 => Err(SinkError { code: i64::from(n), call: "seek" }),
            _ => Ok(offset),
        }
    }
}
