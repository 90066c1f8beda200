//! Helpers shared by core's integration tests: storage, writing into memory, decoding back
//! into plain values, and hand-built files for malformed-input tests.
#![allow(dead_code)]

#[cfg(feature = "transport")]
pub mod link;

use tachyon_core::endian::Endianity;
use tachyon_core::header::{Compression, Footer, Header, ProfilingConfig, CPYTHON_VERSION};
use tachyon_core::io::Cursor;
use tachyon_core::records::Prefix;
use tachyon_core::storage::{ReaderCapacity, VecReaderStorage, VecWriterStorage, WriterCapacity};
use tachyon_core::tables::{FrameEntry, MAX_FRAME_ENTRY_LEN};
use tachyon_core::varint;
use tachyon_core::{ReadError, Reader};

pub const SMALL_WRITER: WriterCapacity =
    WriterCapacity { string_bytes: 1 << 16, strings: 1024, frames: 1024, threads: 64, rle_budget: 16384 };

pub const SMALL_READER: ReaderCapacity =
    ReaderCapacity { string_bytes: 1 << 16, strings: 1024, frames: 1024, threads: 64, read_buffer: 4096 };

/// A resolved frame: file name, function name, location, opcode.
pub type OwnedFrame = (Vec<u8>, Vec<u8>, Option<tachyon_core::Location>, Option<u8>);

/// A decoded thread sample with resolved names.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    pub ts: u64,
    pub iid: u32,
    pub tid: u64,
    pub status: u8,
    pub frames: Vec<OwnedFrame>,
}

/// Decodes every sample of a raw (uncompressed) file, or the first error.
pub fn decode_all(file: &[u8], cap: ReaderCapacity) -> Result<Vec<Decoded>, ReadError<tachyon_core::io::CursorError>> {
    let mut storage = VecReaderStorage::new(cap).unwrap();
    let mut reader = Reader::open(Cursor::new(file), storage.storage())?;
    let mut out = Vec::new();
    while let Some(s) = reader.next_sample()? {
        out.push(Decoded {
            ts: s.timestamp_us,
            iid: s.interpreter_id,
            tid: s.thread_id,
            status: s.status,
            frames: s.frames().map(|f| (f.filename.to_vec(), f.funcname.to_vec(), f.location, f.opcode)).collect(),
        });
    }
    Ok(out)
}

pub fn writer_storage() -> VecWriterStorage {
    VecWriterStorage::new(SMALL_WRITER).unwrap()
}

/// Builds a file around a hand-made sample region: header, region, tables, footer.
pub struct FileBuilder<E: Endianity> {
    pub endian: E,
    pub region: Vec<u8>,
    pub strings: Vec<Vec<u8>>,
    pub frames: Vec<FrameEntry>,
    pub sample_count: u64,
    pub thread_count: u32,
    pub start_time_us: u64,
}

impl<E: Endianity> FileBuilder<E> {
    pub fn new(endian: E) -> Self {
        FileBuilder {
            endian,
            region: Vec::new(),
            strings: vec![b"f.py".to_vec(), b"fn".to_vec()],
            frames: (0..4)
                .map(|i| FrameEntry {
                    filename: 0,
                    funcname: 1,
                    location: tachyon_core::Location { lineno: i, end_lineno: i, col: 0, end_col: 1 },
                    opcode: 255,
                })
                .collect(),
            sample_count: 0,
            thread_count: 1,
            start_time_us: 1000,
        }
    }

    pub fn prefix(&mut self, tid: u64, iid: u32, encoding: u8) -> &mut Self {
        self.region.extend_from_slice(&Prefix { thread_id: tid, interpreter_id: iid, encoding }.encode(self.endian));
        self
    }

    pub fn varint(&mut self, v: u64) -> &mut Self {
        let mut b = [0u8; varint::MAX_VARINT_LEN];
        let n = varint::encode_u64(v, &mut b);
        self.region.extend_from_slice(&b[..n]);
        self
    }

    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.region.extend_from_slice(b);
        self
    }

    pub fn build(&self) -> Vec<u8> {
        let mut tables = Vec::new();
        for s in &self.strings {
            let mut b = [0u8; varint::MAX_VARINT_LEN];
            let n = varint::encode_u64(s.len() as u64, &mut b);
            tables.extend_from_slice(&b[..n]);
            tables.extend_from_slice(s);
        }
        let frame_table = 64 + self.region.len() + tables.len();
        for f in &self.frames {
            let mut b = [0u8; MAX_FRAME_ENTRY_LEN];
            let n = f.encode(&mut b);
            tables.extend_from_slice(&b[..n]);
        }
        let header = Header {
            python_version: CPYTHON_VERSION,
            start_time_us: self.start_time_us,
            sample_interval_us: 1000,
            sample_count: self.sample_count,
            thread_count: self.thread_count,
            string_table_offset: 64 + self.region.len() as u64,
            frame_table_offset: frame_table as u64,
            compression: Compression::None,
            config: ProfilingConfig::default(),
        };
        let mut file = header.encode(self.endian).to_vec();
        file.extend_from_slice(&self.region);
        file.extend_from_slice(&tables);
        let size = file.len() as u64 + 32;
        let footer =
            Footer { string_count: self.strings.len() as u32, frame_count: self.frames.len() as u32, file_size: size };
        file.extend_from_slice(&footer.encode(self.endian));
        file
    }
}
