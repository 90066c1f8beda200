//! Owned storage for one reader or one writer.
//!
//! Reader storage is sized from a file's metadata: the tables get what the footer declares,
//! but never more than the file's bytes can hold (the bounds the reader then enforces),
//! threads what the header declares up to a limit, so no count the file has not backed can
//! make it allocate. Writer storage is sized by the caller's capacities; both carry the zstd
//! buffers only when the file is compressed.

use embedded_io::{Read, Seek, Write};
use tachyon_core::compression::{
    compressor_workspace_bytes, decompressor_workspace_bytes, workspace_words, Compressor, Decompressor,
    CPYTHON_WINDOW_LOG,
};
use tachyon_core::reader::Metadata;
use tachyon_core::storage::{ReaderCapacity, StorageError, VecReaderStorage, VecWriterStorage, WriterCapacity};
use tachyon_core::{Compression, Endianity, ReadError, Reader, WriteError, Writer, WriterConfig, WriterStorage};

/// Limits on what a file can make the reader allocate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most threads (each costs about 1 KiB of stack storage).
    pub max_threads: usize,
    /// Largest zstd window accepted, as a log2 (memory ≈ 2 × window).
    pub max_window_log: u32,
    /// Window over the sample stream.
    pub read_buffer: usize,
}

impl Default for Limits {
    fn default() -> Self {
        // CPython writes 2 MiB windows; 2^23 leaves room for other zstd writers at ~9 MB.
        Limits { max_threads: 1 << 16, max_window_log: 23.max(CPYTHON_WINDOW_LOG), read_buffer: 256 << 10 }
    }
}

/// Storage owned for one open file.
pub struct OwnedReaderStorage {
    /// Tables and window.
    pub tables: VecReaderStorage,
    /// zstd workspace (empty for raw files).
    pub zstd_workspace: Vec<u64>,
    /// Compressed-input buffer (empty for raw files).
    pub zstd_input: Vec<u8>,
    window_log: u32,
}

impl OwnedReaderStorage {
    /// Sizes storage for the file behind `meta` (at most a few times the file's size); an
    /// error if that still exceeds the address space (possible on 32-bit targets).
    pub fn for_metadata(meta: &Metadata, limits: Limits) -> Result<Self, StorageError> {
        let thread_bound = usize::try_from(meta.header.thread_count).unwrap_or(usize::MAX);
        let cap = ReaderCapacity {
            // Strings can only lie between the string table and the end of the file.
            string_bytes: usize::try_from(meta.file_len - meta.header.string_table_offset).unwrap_or(usize::MAX),
            // A larger declared count fails when the tables load, before any use.
            strings: usize::try_from(u64::from(meta.footer.string_count).min(meta.max_string_count()))
                .unwrap_or(usize::MAX),
            frames: usize::try_from(u64::from(meta.footer.frame_count).min(meta.max_frame_count()))
                .unwrap_or(usize::MAX),
            threads: thread_bound.clamp(1, limits.max_threads),
            read_buffer: limits.read_buffer,
        };
        let compressed = meta.is_compressed();
        Ok(OwnedReaderStorage {
            tables: VecReaderStorage::new(cap)?,
            zstd_workspace: if compressed {
                vec![0; workspace_words(decompressor_workspace_bytes(limits.max_window_log))]
            } else {
                Vec::new()
            },
            zstd_input: if compressed { vec![0; 128 << 10] } else { Vec::new() },
            window_log: limits.max_window_log,
        })
    }

    /// Opens `source` over this storage.
    pub fn open<R: Read + Seek>(&mut self, source: R) -> Result<Reader<'_, R>, ReadError<R::Error>> {
        let storage = self.tables.storage();
        match Decompressor::new(&mut self.zstd_workspace, &mut self.zstd_input, self.window_log) {
            Some(dec) => Reader::open_zstd(source, storage, dec),
            None => Reader::open(source, storage),
        }
    }
}

/// Storage owned for one writer: tables of the given capacities, and a zstd workspace and
/// output buffer when the file is compressed.
pub struct OwnedWriterStorage {
    /// Tables, thread state and staging.
    pub tables: VecWriterStorage,
    zstd_workspace: Vec<u64>,
    zstd_out: Vec<u8>,
}

impl OwnedWriterStorage {
    /// Allocates everything once; an error if `cap` exceeds the address space.
    pub fn new(cap: WriterCapacity, compression: Compression) -> Result<Self, StorageError> {
        let zstd = compression == Compression::Zstd;
        Ok(OwnedWriterStorage {
            tables: VecWriterStorage::new(cap)?,
            zstd_workspace: vec![0; if zstd { workspace_words(compressor_workspace_bytes()) } else { 0 }],
            zstd_out: vec![0; if zstd { 128 << 10 } else { 0 }],
        })
    }

    /// What a writer constructor takes: the storage and, for a compressed file, a compressor.
    pub fn parts(&mut self) -> (WriterStorage<'_>, Option<Compressor<'_>>) {
        (self.tables.storage(), Compressor::new(&mut self.zstd_workspace, &mut self.zstd_out))
    }

    /// A writer in byte order `endian` over this storage (compressing when sized for zstd;
    /// a zstd `config` without the buffers is the writer's `CompressorMissing` error).
    pub fn writer<W: Write + Seek, E: Endianity>(
        &mut self,
        sink: W,
        config: WriterConfig,
        endian: E,
    ) -> Result<Writer<'_, W, E>, WriteError<W::Error>> {
        match self.parts() {
            (storage, Some(c)) => Writer::with_endian_zstd(sink, storage, config, endian, c),
            (storage, None) => Writer::with_endian(sink, storage, config, endian),
        }
    }
}
