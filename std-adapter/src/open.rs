//! Reader storage sized from a file's metadata: the tables get what the footer declares, but
//! never more than the file's bytes can hold (the bounds the reader then enforces), threads
//! what the header declares up to a limit, so no count the file has not backed can make it
//! allocate.

use embedded_io::{Read, Seek};
use tachyon_core::compression::{decompressor_workspace_bytes, workspace_words, Decompressor, CPYTHON_WINDOW_LOG};
use tachyon_core::reader::Metadata;
use tachyon_core::storage::{ReaderCapacity, StorageError, VecReaderStorage};
use tachyon_core::{ReadError, Reader};

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
