//! Files as embedded-io sources and sinks: [`StdIo`] adapts any std reader or writer,
//! [`FileSource`] reads a file with positional reads, and [`create`] gives the core `Writer`
//! a buffered, seekable file to write into.

use std::fs::File;
use std::io::{self, BufWriter};
use std::path::Path;
use std::sync::Arc;

use embedded_io::{ErrorType, Read, Seek, SeekFrom, Write};

/// A std `Read`/`Write`/`Seek` value as the embedded-io equivalent.
#[derive(Debug)]
pub struct StdIo<T>(pub T);

impl<T> ErrorType for StdIo<T> {
    type Error = io::Error;
}

impl<T: io::Read> Read for StdIo<T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl<T: io::Write> Write for StdIo<T> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl<T: io::Seek> Seek for StdIo<T> {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.0.seek(match pos {
            SeekFrom::Start(p) => io::SeekFrom::Start(p),
            SeekFrom::End(d) => io::SeekFrom::End(d),
            SeekFrom::Current(d) => io::SeekFrom::Current(d),
        })
    }
}

/// A profile file opened for writing: buffered, and seekable (the buffer is flushed before
/// each seek), as the core `Writer` needs.
pub type FileSink = StdIo<BufWriter<File>>;

/// Creates (or truncates) `path` for a `Writer`:
///
/// ```no_run
/// use tachyon::core::storage::{VecWriterStorage, WriterCapacity};
/// use tachyon::core::{Frame, Writer, WriterConfig};
///
/// let mut storage = VecWriterStorage::new(WriterCapacity::DESKTOP).unwrap();
/// let sink = tachyon::file::create("profile.bin".as_ref()).unwrap();
/// let mut w = Writer::new(sink, storage.storage(), WriterConfig::new(1_000_000, 1000)).unwrap();
/// w.write_thread_sample(1_001_000, 0, 1, 0, [Frame::new(b"app.py", b"main")]).unwrap();
/// w.finish().unwrap();
/// // Flush the buffer; dropping the sink would too, but would swallow an error.
/// w.into_inner().0.into_inner().unwrap();
/// ```
pub fn create(path: &Path) -> io::Result<FileSink> {
    Ok(StdIo(BufWriter::with_capacity(256 << 10, File::create(path)?)))
}

/// A profile file opened for reading, read with positional reads (`pread`): the reader's
/// window takes the file in large pieces, so memory stays what the window holds whatever the
/// file's size (a mapping would count every page read towards the process's memory), and
/// with no shared file position a second handle for another thread is just a second
/// position ([`FileSource::second_handle`]).
#[derive(Debug, Clone)]
pub struct FileSource {
    file: Arc<File>,
    pos: u64,
}

impl FileSource {
    /// Opens `path`.
    pub fn open(path: &Path) -> io::Result<Self> {
        Ok(FileSource { file: Arc::new(File::open(path)?), pos: 0 })
    }

    /// An independent reader over the same file, at position 0, for another thread.
    pub fn second_handle(&self) -> FileSource {
        FileSource { file: Arc::clone(&self.file), pos: 0 }
    }
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

#[cfg(windows)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, offset)
}

impl ErrorType for FileSource {
    type Error = io::Error;
}

impl Read for FileSource {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match read_at(&self.file, buf, self.pos) {
                Ok(n) => {
                    self.pos += n as u64;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

impl Seek for FileSource {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let invalid = || io::Error::new(io::ErrorKind::InvalidInput, "seek to a negative or overflowing position");
        self.pos = match pos {
            SeekFrom::Start(p) => p,
            SeekFrom::End(d) => self.file.metadata()?.len().checked_add_signed(d).ok_or_else(invalid)?,
            SeekFrom::Current(d) => self.pos.checked_add_signed(d).ok_or_else(invalid)?,
        };
        Ok(self.pos)
    }
}

/// A whole file's bytes: mapped into memory where the system allows (a large file is then
/// neither copied nor given fresh zeroed pages: a 20 MB pstats file loads a tenth faster),
/// read into a vector otherwise.
///
/// A mapping shows the file as it is while mapped: if another process truncates it, reading
/// the lost part stops this one with `SIGBUS`, as with every tool that maps its input. Only
/// regular files of at least [`Contents::MAP_FROM`] bytes are mapped.
pub enum Contents {
    /// Read into memory.
    Read(Vec<u8>),
    /// Mapped.
    #[cfg(unix)]
    Mapped(Mapping),
}

/// A private read-only mapping of a file, unmapped when dropped.
#[cfg(unix)]
pub struct Mapping {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

impl Contents {
    /// Files smaller than this are read: mapping costs system calls a small read does not.
    pub const MAP_FROM: u64 = 1 << 20;

    /// The contents of the file at `path`.
    pub fn of(path: &Path) -> io::Result<Contents> {
        let file = File::open(path)?;
        let meta = file.metadata()?;
        #[cfg(unix)]
        if meta.is_file() && meta.len() >= Self::MAP_FROM {
            if let Ok(len) = usize::try_from(meta.len()) {
                if let Some(mapping) = Mapping::of(&file, len) {
                    return Ok(Contents::Mapped(mapping));
                }
            }
        }
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        io::Read::read_to_end(&mut &file, &mut bytes)?;
        Ok(Contents::Read(bytes))
    }
}

impl std::ops::Deref for Contents {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Contents::Read(bytes) => bytes,
            #[cfg(unix)]
            Contents::Mapped(m) => {
                // SAFETY: `ptr` is a live read-only mapping of `len` bytes (see `Mapping::of`),
                // unmapped only when the mapping is dropped, which the borrow outlives not.
                unsafe { std::slice::from_raw_parts(m.ptr.as_ptr(), m.len) }
            }
        }
    }
}

/// Takes an exclusive advisory lock (`flock`) on `file` — a folder too — without waiting:
/// `Ok(false)` when another open file description holds it. Released when `file` is closed
/// (by the kernel, also when the process is killed).
#[cfg(unix)]
pub(crate) fn try_lock(file: &File) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor `file` keeps open; no memory is passed.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.kind() == io::ErrorKind::WouldBlock {
        Ok(false)
    } else {
        Err(e)
    }
}

#[cfg(unix)]
impl Mapping {
    /// `None` where the system refuses (the caller reads the file instead).
    fn of(file: &File, len: usize) -> Option<Mapping> {
        use std::os::fd::AsRawFd;
        // Every page is read, so Linux maps them all at once rather than fault by fault.
        #[cfg(any(target_os = "linux", target_os = "android"))]
        let flags = libc::MAP_PRIVATE | libc::MAP_POPULATE;
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        let flags = libc::MAP_PRIVATE;
        // SAFETY: a new private read-only mapping of an open file; no other memory is touched.
        let ptr = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, flags, file.as_raw_fd(), 0) };
        if ptr == libc::MAP_FAILED {
            return None;
        }
        std::ptr::NonNull::new(ptr.cast::<u8>()).map(|ptr| Mapping { ptr, len })
    }
}

#[cfg(unix)]
impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `Mapping::of`, unmapped once; no borrow of it remains.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Contents;

    #[test]
    fn contents_are_the_files_bytes_mapped_or_read() {
        let dir = std::env::temp_dir().join(format!("tachyon-contents-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let at_threshold = Contents::MAP_FROM as usize;
        for (len, mapped) in
            [(0, false), (1000, false), (at_threshold - 1, false), (at_threshold, true), (3 << 20, true)]
        {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let path = dir.join(format!("{len}.bin"));
            std::fs::write(&path, &bytes).unwrap();
            let contents = Contents::of(&path).unwrap();
            assert!(*contents == bytes[..], "{len} bytes");
            #[cfg(unix)]
            assert_eq!(matches!(contents, Contents::Mapped(_)), mapped, "{len} bytes");
            #[cfg(not(unix))]
            let _ = mapped;
        }
        assert!(Contents::of(&dir.join("missing")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
