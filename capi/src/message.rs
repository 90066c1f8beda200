//! A handle's last error, as a NUL-terminated string in the handle itself (no allocation):
//! what the status code says plus the details (offsets, rules, which table).

use core::fmt;

/// Bytes kept, the NUL included; longer messages are cut at a character boundary.
const CAPACITY: usize = 240;

pub(crate) struct Message {
    bytes: [u8; CAPACITY],
    len: usize,
}

impl Message {
    pub(crate) const fn new() -> Self {
        Message { bytes: [0; CAPACITY], len: 0 }
    }

    /// Replaces the message with `args`, cut to fit.
    pub(crate) fn set(&mut self, args: fmt::Arguments<'_>) {
        self.len = 0;
        let _ = fmt::write(self, args);
        self.bytes[self.len] = 0;
    }

    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.bytes[0] = 0;
    }

    /// The message, NUL-terminated, living as long as the handle.
    pub(crate) fn as_ptr(&self) -> *const core::ffi::c_char {
        self.bytes.as_ptr().cast()
    }
}

impl fmt::Write for Message {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = CAPACITY - 1 - self.len;
        let mut take = s.len().min(room);
        while !s.is_char_boundary(take) {
            take -= 1;
        }
        self.bytes[self.len..self.len + take].copy_from_slice(&s.as_bytes()[..take]);
        self.len += take;
        if take < s.len() {
            Err(fmt::Error)
        } else {
            Ok(())
        }
    }
}
