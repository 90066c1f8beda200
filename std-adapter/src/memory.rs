//! A growable in-memory `Write + Seek` sink (embedded-io has none), `std::io::Write` as an
//! `embedded_io::Write` for the core's append-only writers, and storage a thread keeps from
//! one file to the next.

use std::convert::Infallible;

use embedded_io::{ErrorType, Seek, SeekFrom, Write};

/// A `Vec<u8>` with a position; writes past the end grow it, seeks past the end are allowed
/// (a later write fills the gap with zeros), like `std::io::Cursor<Vec<u8>>`.
#[derive(Debug, Default, Clone)]
pub struct VecSink {
    data: Vec<u8>,
    pos: usize,
}

impl VecSink {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// The bytes written.
    pub fn into_inner(self) -> Vec<u8> {
        self.data
    }

    /// The bytes written so far.
    pub fn as_slice(&self) -> &[u8] {
        &self.data
    }
}

impl ErrorType for VecSink {
    type Error = Infallible;
}

impl Write for VecSink {
    fn write(&mut self, buf: &[u8]) -> Result<usize, Infallible> {
        let end = self.pos + buf.len();
        if self.data.len() < end {
            self.data.resize(end, 0);
        }
        self.data[self.pos..end].copy_from_slice(buf);
        self.pos = end;
        Ok(buf.len())
    }

    fn flush(&mut self) -> Result<(), Infallible> {
        Ok(())
    }
}

impl Seek for VecSink {
    fn seek(&mut self, to: SeekFrom) -> Result<u64, Infallible> {
        let target = match to {
            SeekFrom::Start(p) => p as i128,
            SeekFrom::End(d) => self.data.len() as i128 + d as i128,
            SeekFrom::Current(d) => self.pos as i128 + d as i128,
        };
        self.pos = target.clamp(0, usize::MAX as i128) as usize;
        Ok(self.pos as u64)
    }
}

/// A `std::io::Write` as the sink of the core's append-only writers (gperftools, MOJO).
pub struct IoSink<'a>(pub &'a mut dyn std::io::Write);

impl ErrorType for IoSink<'_> {
    type Error = std::io::Error;
}

impl Write for IoSink<'_> {
    fn write(&mut self, buf: &[u8]) -> Result<usize, std::io::Error> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> Result<(), std::io::Error> {
        self.0.flush()
    }
}

/// Asks the system to back the large buffer `bytes` with huge pages where it can: a table of
/// tens of megabytes then costs a few dozen page faults, not thousands (each a trap and a
/// page cleared; measured on a 21 MB pstats file: a tenth of the whole command). Only the
/// 2 MiB-aligned part inside the buffer is advised; the advice changes no contents, and a
/// system without transparent huge pages ignores it.
pub(crate) fn advise_huge_pages(bytes: *const u8, len: usize) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        const HUGE: usize = 2 << 20;
        let start = (bytes as usize).div_ceil(HUGE) * HUGE;
        let end = (bytes as usize).saturating_add(len) / HUGE * HUGE;
        if end > start {
            // SAFETY: advice on pages inside a live allocation of the caller's; madvise with
            // MADV_HUGEPAGE neither reads nor writes them, and failing changes nothing.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = (bytes, len);
}

/// Zeroed words, made by the allocator's fresh pages rather than by writes (untouched pages
/// cost nothing); [`Self::on_huge_pages`] puts the first on a 2 MiB boundary.
#[derive(Default)]
pub(crate) struct ZeroedWords {
    backing: Vec<u64>,
    start: usize,
    len: usize,
}

impl ZeroedWords {
    pub(crate) fn new(len: usize) -> Self {
        ZeroedWords { backing: vec![0; len], start: 0, len }
    }

    /// `len` words from a 2 MiB boundary, advised as huge pages ([`advise_huge_pages`]): a
    /// buffer filled from its start, as zstd fills its window, then costs a page fault per
    /// 2 MiB rather than one per 4 KiB page, and the part touched is resident in 2 MiB steps.
    /// 2 MiB more address space is held before the words and never touched.
    pub(crate) fn on_huge_pages(len: usize) -> Self {
        const HUGE: usize = 2 << 20;
        let backing = vec![0u64; len + HUGE / 8];
        let address = backing.as_ptr() as usize;
        let start = (address.next_multiple_of(HUGE) - address) / 8;
        advise_huge_pages(backing[start..].as_ptr().cast(), len * 8);
        ZeroedWords { backing, start, len }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn words(&mut self) -> &mut [u64] {
        &mut self.backing[self.start..self.start + self.len]
    }
}

/// Storage a thread keeps from one file to the next, in a `thread_local!`: a merge of
/// thousands of small files otherwise grew the same tables from nothing for each.
pub(crate) type Kept<T> = std::thread::LocalKey<std::cell::RefCell<T>>;

/// What the thread kept in `kept`, taken (empty when it kept nothing).
pub(crate) fn take_kept<T: Default>(kept: &'static Kept<T>) -> T {
    kept.try_with(|k| std::mem::take(&mut *k.borrow_mut())).unwrap_or_default()
}

/// Keeps `value` in `kept` for the thread's next use (dropped by a thread being torn down).
pub(crate) fn keep<T>(kept: &'static Kept<T>, value: T) {
    let _ = kept.try_with(|k| *k.borrow_mut() = value);
}

#[cfg(test)]
mod tests {
    use super::ZeroedWords;

    #[test]
    fn words_on_huge_pages_start_on_a_huge_page_boundary_zeroed() {
        for len in [1, 1000, (2 << 20) / 8 + 3, (9 << 20) / 8] {
            let mut words = ZeroedWords::on_huge_pages(len);
            let w = words.words();
            assert_eq!(w.len(), len);
            assert_eq!(w.as_ptr() as usize % (2 << 20), 0, "{len} words start at {:p}", w.as_ptr());
            assert!(w.iter().all(|&x| x == 0));
            // Every word is the caller's to write.
            w.fill(u64::MAX);
            assert!(words.words().iter().all(|&x| x == u64::MAX));
        }
    }
}
