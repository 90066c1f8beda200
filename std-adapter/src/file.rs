//! Files as embedded-io sources and sinks: [`StdIo`] adapts any std reader or writer,
//! [`FileSource`] reads a file memory-mapped, or buffered where mapping fails, and
//! [`create`] gives the core `Writer` a buffered, seekable file to write into.

use std::fs::File;
use std::io::{self, BufReader, BufWriter};
use std::path::Path;
use std::sync::Arc;

use embedded_io::{ErrorType, Read, Seek, SeekFrom, Write};
use memmap2::Mmap;
use tachyon_core::io::Cursor;

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

/// A read-only mapping that several readers (threads) can share.
#[derive(Debug, Clone)]
pub struct SharedMap(Arc<Mmap>);

impl AsRef<[u8]> for SharedMap {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// A profile file opened for reading.
pub enum FileSource {
    /// Memory-mapped: reads are copies out of the mapping.
    Mapped(Cursor<SharedMap>),
    /// Read through a buffer (pipes, special files, or where mapping failed).
    Buffered(StdIo<BufReader<File>>),
}

impl FileSource {
    /// Opens `path`, memory-mapped when possible.
    ///
    /// The mapping assumes nobody truncates the file while it is read (as any mmap-based
    /// tool does); set `TACHYON_NO_MMAP=1` to read through a buffer instead.
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = File::open(path)?;
        if std::env::var_os("TACHYON_NO_MMAP").is_none() && file.metadata()?.is_file() {
            // SAFETY: read-only mapping of a regular file; see the caveat above.
            if let Ok(map) = unsafe { Mmap::map(&file) } {
                return Ok(FileSource::Mapped(Cursor::new(SharedMap(Arc::new(map)))));
            }
        }
        Ok(FileSource::Buffered(StdIo(BufReader::with_capacity(256 << 10, file))))
    }
}

impl FileSource {
    /// A second, independent reader over the same mapping (positioned at 0), for another
    /// thread; `None` for a file read through a buffer.
    pub fn second_handle(&self) -> Option<FileSource> {
        match self {
            FileSource::Mapped(c) => Some(FileSource::Mapped(Cursor::new(c.get_ref().clone()))),
            FileSource::Buffered(_) => None,
        }
    }
}

impl ErrorType for FileSource {
    type Error = io::Error;
}

impl Read for FileSource {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            FileSource::Mapped(c) => c.read(buf).map_err(io::Error::other),
            FileSource::Buffered(b) => b.read(buf),
        }
    }
}

impl Seek for FileSource {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        match self {
            FileSource::Mapped(c) => c.seek(pos).map_err(io::Error::other),
            FileSource::Buffered(b) => b.seek(pos),
        }
    }
}
