//! Owned storage for one reader or one writer.
//!
//! Reader storage is sized from a file's metadata: the tables get what the footer declares,
//! but never more than the file's bytes can hold (the bounds the reader then enforces); the
//! thread table starts empty and grows with the threads the samples actually use, so no count
//! the file has not backed can make it allocate. A compressed file opened with
//! [`OwnedReaderStorage::open_file`] is decompressed in a second thread while it is decoded.
//! Writer storage is sized by the caller's capacities; both carry the zstd buffers only when
//! the file is compressed.

use std::io;

use embedded_io::{Read, Seek, Write};
use tachyon_core::compression::{
    compressor_workspace_bytes, decompressor_workspace_bytes, workspace_words, Compressor, Decompressor,
    RegionCompressor, CPYTHON_WINDOW_LOG,
};
use tachyon_core::header::HEADER_SIZE;
use tachyon_core::reader::{Metadata, DEFAULT_MAX_DECOMPRESSED};
use tachyon_core::storage::{ReaderCapacity, StorageError, VecReaderStorage, VecWriterStorage, WriterCapacity};
use tachyon_core::{
    Compression, Endianity, Position, ReadError, Reader, WriteError, Writer, WriterConfig, WriterStorage,
};

use crate::file::FileSource;
use crate::memory::ZeroedWords;
use crate::tachyon::compress::ThreadedCompressor;
use crate::tachyon::region::ThreadedRegion;

/// Limits on what a file can make the reader allocate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most threads. Storage grows with the threads the samples use (about 60 bytes each
    /// for shallow stacks, at most about 2 KiB for 256-frame ones), so by default there is
    /// no limit but the header's count, which the reader enforces.
    pub max_threads: usize,
    /// Largest zstd window accepted, as a log2 (memory ≈ 2 × window).
    pub max_window_log: u32,
    /// Window over the sample stream.
    pub read_buffer: usize,
}

impl Default for Limits {
    fn default() -> Self {
        // CPython writes 2 MiB windows; 2^23 leaves room for other zstd writers at ~9 MB.
        Limits { max_threads: usize::MAX, max_window_log: 23.max(CPYTHON_WINDOW_LOG), read_buffer: 256 << 10 }
    }
}

/// Compressed sample-region bytes from which [`OwnedReaderStorage::open_file`] decompresses
/// in a second thread. Starting the thread and handing buffers over cost about 0.2 ms, which
/// the overlap repays only when there is much to decompress or to decode; either this size or
/// [`THREADED_FROM_SAMPLES`] samples in the header says so (the header's count only steers
/// speed, never what is read). Measured on real profiles, whole `verify` commands
/// (2026-11-23, 2-core AMD EPYC VM): a 20 KB region of 8,000 samples reads in 1.0 ms in one
/// thread and 1.2 ms in two; a 26 KB one of 500,000 idle-pool samples (1.5 MB decompressed)
/// in 2.2 ms and 1.8 ms.
pub const THREADED_FROM_BYTES: u64 = 128 << 10;

/// Raw sample-region bytes from which [`OwnedReaderStorage::open_file`] reads the region in
/// a second thread, so that the system's copying of the file's pages runs on the other core.
/// What that saves depends on how the system caches the file: a file just written in small
/// pieces (as CPython's writer writes) costs the most to copy. Measured, whole `verify`
/// commands (2026-12-07, 2-vCPU AMD EPYC VM, medians of 30): such a file of 30 MB 15.9 →
/// 11.5 ms, of 12 MB 7.6 → 6.8 ms, of 6 MB 4.9 ms either way; the same files copied whole
/// (cached in larger pieces) 12.0 → 11.4, 6.3 → 6.6 and 4.3 → 4.8 ms. Below this size the
/// thread's start is not repaid.
pub const RAW_THREADED_FROM_BYTES: u64 = 8 << 20;

/// Samples (as the header counts them) from which [`OwnedReaderStorage::open_file`]
/// decompresses in a second thread whatever the compressed size: see [`THREADED_FROM_BYTES`].
pub const THREADED_FROM_SAMPLES: u64 = 32 << 10;

/// Storage owned for one open file.
pub struct OwnedReaderStorage {
    /// Tables and window.
    pub tables: VecReaderStorage,
    /// zstd workspace (empty for raw files, and until a reader decompresses in this thread).
    zstd_workspace: ZeroedWords,
    /// Compressed-input buffer (likewise).
    zstd_input: Vec<u8>,
    /// The second thread's decompression, once started.
    region: Option<ThreadedRegion>,
    meta: Metadata,
    window_log: u32,
    /// Key of the thread table's hash, random per process: a file cannot plan collisions.
    seed: u64,
}

impl OwnedReaderStorage {
    /// Sizes storage for the file behind `meta` (at most a few times the file's size); an
    /// error if that still exceeds the address space (possible on 32-bit targets).
    pub fn for_metadata(meta: &Metadata, limits: Limits) -> Result<Self, StorageError> {
        let cap = ReaderCapacity {
            // Strings can only lie between the string table and the end of the file.
            string_bytes: usize::try_from(meta.file_len - meta.header.string_table_offset).unwrap_or(usize::MAX),
            // A larger declared count fails when the tables load, before any use.
            strings: usize::try_from(u64::from(meta.footer.string_count).min(meta.max_string_count()))
                .unwrap_or(usize::MAX),
            frames: usize::try_from(u64::from(meta.footer.frame_count).min(meta.max_frame_count()))
                .unwrap_or(usize::MAX),
            threads: limits.max_threads,
            read_buffer: limits.read_buffer,
        };
        Ok(OwnedReaderStorage {
            tables: VecReaderStorage::new(cap)?,
            zstd_workspace: ZeroedWords::default(),
            zstd_input: Vec::new(),
            region: None,
            meta: *meta,
            window_log: limits.max_window_log,
            seed: crate::hash::IdHash::default().key(),
        })
    }

    /// Opens `source` over this storage, decompressing a zstd region in this thread.
    pub fn open<R: Read + Seek>(&mut self, source: R) -> Result<Reader<'_, R>, ReadError<R::Error>> {
        self.region = None;
        if self.meta.is_compressed() && self.zstd_workspace.is_empty() {
            let words = workspace_words(decompressor_workspace_bytes(self.window_log));
            // Huge pages for a large region (as the second thread's workspace, see
            // `region`); a small one touches a few 4 KiB pages where a huge one is 2 MiB cleared.
            self.zstd_workspace =
                if self.is_large() { ZeroedWords::on_huge_pages(words) } else { ZeroedWords::new(words) };
            self.zstd_input = vec![0; 128 << 10];
        }
        let storage = self.tables.storage().with_seed(self.seed);
        match Decompressor::new(self.zstd_workspace.words(), &mut self.zstd_input, self.window_log) {
            Some(dec) => Reader::open_zstd(source, storage, dec),
            None => Reader::open(source, storage),
        }
    }

    /// Opens a file over this storage. The sample region is read in a second thread (over a
    /// second handle on the file) while this one decodes, when the machine has a second core
    /// and the region is large: a zstd region of [`THREADED_FROM_BYTES`] or a header of
    /// [`THREADED_FROM_SAMPLES`] or more, decompressed there; a raw one of
    /// [`RAW_THREADED_FROM_BYTES`] or more. The samples and errors are those of [`Self::open`].
    pub fn open_file(&mut self, source: FileSource) -> Result<Reader<'_, FileSource>, ReadError<io::Error>> {
        if self.is_large() && super::has_second_core() {
            self.open_threaded(source)
        } else {
            self.open(source)
        }
    }

    /// A region large enough to be read in a second thread (see [`Self::open_file`]).
    fn is_large(&self) -> bool {
        let region = self.meta.header.string_table_offset - HEADER_SIZE as u64;
        if !self.meta.is_compressed() {
            return region >= RAW_THREADED_FROM_BYTES;
        }
        region >= THREADED_FROM_BYTES || self.meta.header.sample_count >= THREADED_FROM_SAMPLES
    }

    /// Opens a file over this storage, its sample region read in a second thread whatever
    /// its size: a zstd one decompressed there, a raw one read there.
    pub fn open_threaded(&mut self, source: FileSource) -> Result<Reader<'_, FileSource>, ReadError<io::Error>> {
        let second = source.second_handle();
        let region = if self.meta.is_compressed() {
            ThreadedRegion::spawn(second, &self.meta, self.window_log, DEFAULT_MAX_DECOMPRESSED)
        } else {
            ThreadedRegion::spawn_raw(second, &self.meta)
        };
        let region = region.map_err(|error| ReadError::Io { position: Position::File(HEADER_SIZE as u64), error })?;
        let region = self.region.insert(region);
        Reader::open_with_region(source, self.tables.storage().with_seed(self.seed), region)
    }
}

/// Storage owned for one writer: tables of the given capacities, and for a compressed file a
/// compressor: in a second thread when the machine has a second core (the same bytes, see
/// [`crate::tachyon::compress`]), else a workspace and output buffer for one in the writer's thread.
pub struct OwnedWriterStorage {
    /// Tables, thread state and staging.
    pub tables: VecWriterStorage,
    zstd: bool,
    zstd_workspace: Vec<u64>,
    zstd_out: Vec<u8>,
    threaded: Option<ThreadedCompressor>,
}

impl OwnedWriterStorage {
    /// Allocates everything once; an error if `cap` exceeds the address space.
    pub fn new(cap: WriterCapacity, compression: Compression) -> Result<Self, StorageError> {
        Ok(OwnedWriterStorage {
            tables: VecWriterStorage::new(cap)?,
            zstd: compression == Compression::Zstd,
            zstd_workspace: Vec::new(),
            zstd_out: Vec::new(),
            threaded: None,
        })
    }

    /// Tables that grow as a writer fills them ([`VecWriterStorage::growing`]), CPython's
    /// per-thread REPEAT budget, and a compressor when `compression` asks for one: for a
    /// writer that cannot know in advance what it will be given.
    pub fn growing(compression: Compression) -> Self {
        OwnedWriterStorage {
            tables: VecWriterStorage::growing(usize::MAX, tachyon_core::records::CPYTHON_RLE_BUDGET),
            zstd: compression == Compression::Zstd,
            zstd_workspace: Vec::new(),
            zstd_out: Vec::new(),
            threaded: None,
        }
    }

    /// What a writer constructor takes: the tables' storage, holding a compressor when sized
    /// for a compressed file (on a second thread where the machine has one).
    pub fn storage(&mut self) -> WriterStorage<'_> {
        // Names and thread ids may come from a hostile file being converted: keyed hashes.
        let seed = crate::hash::IdHash::default().key();
        if !self.zstd {
            return self.tables.storage().with_seed(seed);
        }
        self.threaded = if super::has_second_core() { ThreadedCompressor::spawn().ok() } else { None };
        if let Some(threaded) = &mut self.threaded {
            let compressor: &mut dyn RegionCompressor = threaded;
            return self.tables.storage().with_seed(seed).with_zstd(compressor);
        }
        if self.zstd_workspace.is_empty() {
            self.zstd_workspace = vec![0; workspace_words(compressor_workspace_bytes())];
            self.zstd_out = vec![0; 128 << 10];
        }
        match Compressor::new(&mut self.zstd_workspace, &mut self.zstd_out) {
            Some(compressor) => self.tables.storage().with_seed(seed).with_zstd(compressor),
            // Not reached: the buffers were sized above. The writer then reports the missing
            // compressor rather than writing a raw region under a zstd header.
            None => self.tables.storage().with_seed(seed),
        }
    }

    /// A writer in byte order `endian` over this storage (compressing when sized for zstd;
    /// a zstd `config` without the buffers is the writer's `CompressorMissing` error).
    pub fn writer<W: Write + Seek, E: Endianity>(
        &mut self,
        sink: W,
        config: WriterConfig,
        endian: E,
    ) -> Result<Writer<'_, W, E>, WriteError<W::Error>> {
        Writer::with_endian(sink, self.storage(), config, endian)
    }
}
