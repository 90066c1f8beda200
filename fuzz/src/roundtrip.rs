//! The differential target: a random sample stream written by our writer (either byte order,
//! raw or zstd) must read back as the stream itself, by the reader rules of the format's
//! specification (section 4), per thread (REPEAT runs are deferred, so file order is not time
//! order across threads).

use arbitrary::Arbitrary;
use tachyon_core::compression::{
    compressor_workspace_bytes, decompressor_workspace_bytes, workspace_words, Compressor, Decompressor,
};
use tachyon_core::io::Cursor;
use tachyon_core::storage::{ReaderCapacity, VecReaderStorage, VecWriterStorage, WriterCapacity};
use tachyon_core::{BigEndian, Compression, Endianity, Frame, LittleEndian, Location, Reader, Writer, WriterConfig};
use tachyon_test_kit::roundtrip::{model, read_back, PerThread, Written};

/// A frame of the stream's pool.
#[derive(Debug, Clone, Arbitrary)]
pub struct PoolFrame {
    file: Vec<u8>,
    func: Vec<u8>,
    location: Option<(i32, i32, i32, i32)>,
    opcode: Option<u8>,
}

impl PoolFrame {
    /// The frame as the writer is given it.
    fn frame(&self) -> Frame<'_> {
        let location =
            self.location.map(|(lineno, end_lineno, col, end_col)| Location { lineno, end_lineno, col, end_col });
        Frame { filename: &self.file, funcname: &self.func, location, opcode: self.opcode }
    }
}

/// One sample, `repeat` times (so that REPEAT records appear).
#[derive(Debug, Clone, Arbitrary)]
pub struct Sample {
    timestamp: u64,
    interpreter: bool,
    thread: u8,
    status: u8,
    frames: Vec<u8>,
    repeat: u8,
}

/// What the fuzzer chooses.
#[derive(Debug, Clone, Arbitrary)]
pub struct Stream {
    big_endian: bool,
    zstd: bool,
    pool: Vec<PoolFrame>,
    samples: Vec<Sample>,
}

/// Names and pools kept small enough for the capacities below: the target is the codec, not
/// the capacity errors (which have their own tests).
const MAX_NAME: usize = 48;
const MAX_POOL: usize = 16;
const MAX_SAMPLES: usize = 400;
const MAX_DEPTH: usize = 300;

/// One written sample: timestamp, interpreter, thread, status, pool indices.
type Flat = (u64, u32, u64, u8, Vec<usize>);

impl Stream {
    fn pool(&self) -> Vec<PoolFrame> {
        self.pool
            .iter()
            .take(MAX_POOL)
            .map(|f| PoolFrame {
                file: f.file.iter().copied().take(MAX_NAME).collect(),
                func: f.func.iter().copied().take(MAX_NAME).collect(),
                ..f.clone()
            })
            .collect()
    }

    fn flat(&self, pool: usize) -> Vec<Flat> {
        let mut out = Vec::new();
        for s in &self.samples {
            let frames: Vec<usize> = if pool == 0 {
                Vec::new()
            } else {
                s.frames.iter().take(MAX_DEPTH).map(|&i| i as usize % pool).collect()
            };
            for k in 0..=u64::from(s.repeat % 4) {
                if out.len() == MAX_SAMPLES {
                    return out;
                }
                out.push((
                    s.timestamp.wrapping_add(k * 7),
                    u32::from(s.interpreter),
                    u64::from(s.thread % 4),
                    s.status,
                    frames.clone(),
                ));
            }
        }
        out
    }
}

/// The samples a reader must report for `samples` (the kit's model, from the input alone).
fn model_of(pool: &[PoolFrame], samples: &[Flat]) -> PerThread {
    model(samples.iter().map(|(ts, iid, tid, status, frames)| Written {
        thread_id: *tid,
        interpreter_id: *iid,
        timestamp_us: *ts,
        status: *status,
        frames: frames.iter().map(|&i| pool[i].frame()),
    }))
}

const WRITER: WriterCapacity =
    WriterCapacity { string_bytes: 1 << 12, strings: 64, frames: 64, threads: 16, rle_budget: 16384 };
const READER: ReaderCapacity =
    ReaderCapacity { string_bytes: 1 << 12, strings: 64, frames: 64, threads: 16, read_buffer: 128 };

fn write<E: Endianity>(pool: &[PoolFrame], samples: &[Flat], endian: E, zstd: bool) -> Vec<u8> {
    let mut storage = VecWriterStorage::new(WRITER).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut workspace = vec![0u64; workspace_words(compressor_workspace_bytes())];
    let mut staging = vec![0u8; 4096];
    let config = WriterConfig::new(12_345, 1000);
    let sink = Cursor::new(&mut buf[..]);
    let mut w = if zstd {
        let c = Compressor::new(&mut workspace, &mut staging).unwrap();
        Writer::with_endian(sink, storage.storage().with_zstd(c), config.with_compression(Compression::Zstd), endian)
    } else {
        Writer::with_endian(sink, storage.storage(), config, endian)
    }
    .unwrap();
    for (ts, iid, tid, status, frames) in samples {
        let stack = frames.iter().map(|&i| pool[i].frame());
        w.write_thread_sample(*ts, *iid, *tid, *status, stack).unwrap();
    }
    let n = w.finish().unwrap() as usize;
    buf.truncate(n);
    buf
}

fn read(file: &[u8], zstd: bool) -> PerThread {
    let mut storage = VecReaderStorage::new(READER).unwrap();
    let mut workspace = vec![0u64; workspace_words(decompressor_workspace_bytes(21))];
    let mut input = vec![0u8; 64];
    let mut r = if zstd {
        let d = Decompressor::new(&mut workspace, &mut input, 21).unwrap();
        Reader::open_zstd(Cursor::new(file), storage.storage(), d)
    } else {
        Reader::open(Cursor::new(file), storage.storage())
    }
    .unwrap();
    read_back(&mut r).unwrap()
}

/// Writes the stream and reads it back; panics when the two differ.
pub fn run(stream: &Stream) {
    let pool = stream.pool();
    let samples = stream.flat(pool.len());
    let file = if stream.big_endian {
        write(&pool, &samples, BigEndian, stream.zstd)
    } else {
        write(&pool, &samples, LittleEndian, stream.zstd)
    };
    assert_eq!(read(&file, stream.zstd), model_of(&pool, &samples));
}
