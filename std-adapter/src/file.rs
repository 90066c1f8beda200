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
/// w.finalize().unwrap();
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
