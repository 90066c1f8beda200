//! The fuzz targets' seeds that no committed file is, made by our writers from committed
//! vectors: `make_fuzz_seeds ROOT OUT` writes `OUT/pprof/*` (pprof profiles converted from the
//! CPython vectors and a gperftools profile) and `OUT/transport_receiver/*` (captures of the
//! CPython vectors sent through the framed transport, a frame per write as a device sends
//! them, a journaled stream, whole and cut, as a killed process leaves one, and a device's
//! sample stream, whole and cut).
//!
//! `scripts/fuzz.sh` runs it. It lives here rather than in `fuzz/` so that the host's test
//! build makes it: in `fuzz/` it took a build of the whole tree of its own.

use std::path::{Path, PathBuf};

use tachyon::convert::{convert, Destination, Output};
use tachyon::gperftools::source::GperftoolsSource;
use tachyon::memory::VecSink;
use tachyon::tachyon::source::TachyonSource;
use tachyon::tachyon::storage::{Limits, OwnedReaderStorage};
use tachyon_core::capture::Taken;
use tachyon_core::io::Cursor;
use tachyon_core::reader::Metadata;
use tachyon_core::storage::{VecWriterStorage, WriterCapacity};
use tachyon_core::stream::StreamWriter;
use tachyon_core::transport::{FlushPolicy, FramedSink, JournalWriter};
use tachyon_core::{Frame, Location, WriterConfig};

/// `file` sent as a device sends a file it has in RAM: in writes of 64 bytes, then the end.
fn capture(file: &[u8]) -> Vec<u8> {
    let mut scratch = vec![0u8; 128];
    let mut sink = FramedSink::new(VecSink::new(), &mut scratch).unwrap();
    for piece in file.chunks(64) {
        embedded_io::Write::write_all(&mut sink, piece).unwrap();
    }
    sink.finish().unwrap();
    sink.into_inner().into_inner()
}

/// A journaled stream of 200 samples on 3 threads, flushed every 25.
fn journaled() -> Vec<u8> {
    let capacity = WriterCapacity { string_bytes: 4096, strings: 64, frames: 64, threads: 4, rle_budget: 16384 };
    let mut storage = VecWriterStorage::new(capacity).unwrap();
    let mut scratch = vec![0u8; 256];
    let policy = FlushPolicy { every_samples: 25, every_us: 0 };
    let mut w =
        JournalWriter::new(VecSink::new(), &mut scratch, storage.storage(), WriterConfig::new(0, 100), policy).unwrap();
    let names = [&b"main"[..], b"parse", b"eval", b"gc"];
    for i in 0..200u64 {
        let depth = 1 + (i % 4) as usize;
        let stack = names[..depth].iter().rev().map(|n| Frame::new(b"app.lua", n));
        w.write_thread_sample(Taken { timestamp_us: i * 100, thread_id: 1 + i % 3, ..Taken::default() }, stack)
            .unwrap();
    }
    w.finish().unwrap();
    w.into_inner().into_inner()
}

/// A device's sample stream of 200 samples on 3 threads over 8 ids.
fn sample_stream() -> Vec<u8> {
    let (mut buffer, mut sent) = (vec![0u8; 128], vec![0u32; 1]);
    let mut w = StreamWriter::new(VecSink::new(), &mut buffer, &mut sent, WriterConfig::new(0, 100)).unwrap();
    let names = [&b"main"[..], b"parse", b"eval", b"gc"];
    for i in 0..200u64 {
        let ids: Vec<u32> = (0..1 + (i % 4) as u32).map(|d| (d + i as u32 / 50) % 8).collect();
        let taken = Taken { timestamp_us: i * 100, thread_id: 1 + i % 3, ..Taken::default() };
        let at = |id: u32| Location { lineno: id as i32 + 1, end_lineno: id as i32 + 1, col: 0, end_col: 4 };
        w.write_sample(taken, &ids, |id| Frame::new(b"app.lua", names[id as usize % 4]).at(at(id))).unwrap();
    }
    w.finish().unwrap();
    w.into_inner().into_inner()
}

fn main() {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [root, out] = &args[..] else { panic!("usage: make_fuzz_seeds ROOT OUT") };
    let vectors = root.join("qemu-tests/vectors/cpython-3.15.2");
    let (pprof, transport) = (out.join("pprof"), out.join("transport_receiver"));
    std::fs::create_dir_all(&pprof).unwrap();
    std::fs::create_dir_all(&transport).unwrap();
    let stream = journaled();
    std::fs::write(transport.join("journaled.cap"), &stream).unwrap();
    std::fs::write(transport.join("journaled-cut.cap"), &stream[..stream.len() * 2 / 3]).unwrap();
    let samples = sample_stream();
    std::fs::write(transport.join("samples.cap"), &samples).unwrap();
    std::fs::write(transport.join("samples-cut.cap"), &samples[..samples.len() * 2 / 3]).unwrap();
    let mut names: Vec<PathBuf> = std::fs::read_dir(&vectors)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "bin"))
        .collect();
    names.sort();
    for path in &names {
        let data = std::fs::read(path).unwrap();
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        std::fs::write(transport.join(format!("{stem}.cap")), capture(&data)).unwrap();
        let meta = Metadata::read(&mut Cursor::new(&data[..])).unwrap();
        let mut storage = OwnedReaderStorage::for_metadata(&meta, Limits::default()).unwrap();
        let mut reader = storage.open(Cursor::new(&data[..])).unwrap();
        let mut source = TachyonSource::new(&mut reader);
        let mut bytes = Vec::new();
        convert(&mut source, &Output::Pprof, Destination::Stream(&mut bytes), &mut |_| {}).unwrap();
        std::fs::write(pprof.join(format!("{stem}.pb.gz")), bytes).unwrap();
    }
    let prof = root.join("qemu-tests/vectors/gperftools-2.10/x86_64-le64-gperftools2.10/burn-x86_64.prof");
    write_gperftools_pprof(&prof, &pprof.join("gperftools.pb.gz"));
}

fn write_gperftools_pprof(prof: &Path, out: &Path) {
    let data = std::fs::read(prof).unwrap();
    let mut source = GperftoolsSource::open(Cursor::new(&data[..])).unwrap();
    let mut bytes = Vec::new();
    convert(&mut source, &Output::Pprof, Destination::Stream(&mut bytes), &mut |_| {}).unwrap();
    std::fs::write(out, bytes).unwrap();
}
