//! A writer compressing in a second thread writes the bytes of one compressing in its own
//! thread (zstd's frame does not depend on how the input is batched), over regions of many
//! batches, and heals after sink errors as the in-thread path does.

use embedded_io::{ErrorType, Seek, SeekFrom, Write};
use std::time::{Duration, Instant};
use tachyon::memory::VecSink;
use tachyon::tachyon::compress::ThreadedCompressor;

use tachyon_core::compression::{
    compressor_workspace_bytes, workspace_words, Compressor, Progress, RegionCompressor, ZstdError,
};
use tachyon_core::storage::{VecWriterStorage, WriterCapacity};
use tachyon_core::{Compression, Frame, LittleEndian, Location, WriteError, Writer, WriterConfig};
use tachyon_test_kit::Broken;

const CAP: WriterCapacity =
    WriterCapacity { string_bytes: 1 << 16, strings: 512, frames: 4096, threads: 8, rle_budget: 16384 };

fn config() -> WriterConfig {
    WriterConfig { compression: Compression::Zstd, ..WriterConfig::new(1_000_000, 100) }
}

/// Sample `i` of a stream whose raw region is several megabytes and compresses about
/// three-fold: 8 threads, stacks that change every few samples, jittered timestamps.
fn sample(i: u64, names: &[String]) -> (u64, u64, Vec<Frame<'_>>) {
    let mut x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x2545_f491;
    x ^= x >> 29;
    let tid = i % 8;
    let depth = 3 + (x % 29) as usize;
    let frames = (0..depth)
        .map(|d| {
            let n = &names[(d * 7 + (x >> 8) as usize % 11 + tid as usize) % names.len()];
            let line = d as i32 + 1;
            Frame::new(b"/srv/app/module.py", n.as_bytes()).at(Location {
                lineno: line,
                end_lineno: line + 1,
                col: 4,
                end_col: 9,
            })
        })
        .collect();
    (1_000_000 + i * 100 + (x >> 40) % 97, tid, frames)
}

const SAMPLES: u64 = 300_000;

fn write_all<W: Write + Seek>(
    w: &mut Writer<'_, W, LittleEndian>,
    names: &[String],
    mut on_error: impl FnMut(&mut Writer<'_, W, LittleEndian>, u64) -> bool,
) where
    W::Error: std::fmt::Debug,
{
    for i in 0..SAMPLES {
        let (ts, tid, frames) = sample(i, names);
        loop {
            match w.write_thread_sample(ts, 0, tid, (i % 3) as u8, frames.iter().copied()) {
                Ok(()) => break,
                Err(e) => assert!(on_error(w, i), "sample {i}: {e:?}"),
            }
        }
    }
}

fn names() -> Vec<String> {
    (0..40).map(|i| format!("handler_{i}")).collect()
}

fn in_thread() -> Vec<u8> {
    let names = names();
    let mut storage = VecWriterStorage::new(CAP).unwrap();
    let mut ws = vec![0u64; workspace_words(compressor_workspace_bytes())];
    let mut out = vec![0u8; 4096];
    let c = Compressor::new(&mut ws, &mut out).unwrap();
    let mut w =
        Writer::with_endian(VecSink::default(), storage.storage().with_zstd(c), config(), LittleEndian).unwrap();
    write_all(&mut w, &names, |_, _| false);
    w.finish().unwrap();
    w.into_inner().into_inner()
}

#[test]
fn same_bytes_as_compressing_in_the_writers_thread() {
    let want = in_thread();
    let names = names();
    let mut storage = VecWriterStorage::new(CAP).unwrap();
    let mut threaded = ThreadedCompressor::spawn().unwrap();
    let compressor: &mut dyn RegionCompressor = &mut threaded;
    let mut w =
        Writer::with_endian(VecSink::default(), storage.storage().with_zstd(compressor), config(), LittleEndian)
            .unwrap();
    write_all(&mut w, &names, |_, _| false);
    w.finish().unwrap();
    let got = w.into_inner().into_inner();
    let raw = {
        let mut storage = VecWriterStorage::new(CAP).unwrap();
        let raw_config = WriterConfig::new(1_000_000, 100);
        let mut w = Writer::with_endian(VecSink::default(), storage.storage(), raw_config, LittleEndian).unwrap();
        write_all(&mut w, &names, |_, _| false);
        w.finish().unwrap() as usize
    };
    assert!(raw > 4 * tachyon::tachyon::compress::BATCH_BYTES, "a region of many batches ({raw} bytes raw)");
    assert!(got == want, "{} bytes, want {}", got.len(), want.len());
}

/// A sink that refuses writes while `broken`.
#[derive(Default)]
struct Flaky {
    inner: VecSink,
    broken: bool,
    failures: usize,
}

impl ErrorType for Flaky {
    type Error = Broken;
}

impl Write for Flaky {
    fn write(&mut self, buf: &[u8]) -> Result<usize, Broken> {
        if self.broken {
            self.failures += 1;
            return Err(Broken);
        }
        self.inner.write(buf).map_err(|_| Broken)
    }
    fn flush(&mut self) -> Result<(), Broken> {
        Ok(())
    }
}

impl Seek for Flaky {
    fn seek(&mut self, pos: SeekFrom) -> Result<u64, Broken> {
        self.inner.seek(pos).map_err(|_| Broken)
    }
}

/// The threaded compressor, made to wait once, after [`WAIT_AFTER`] bytes of input, until the
/// worker has sent compressed bytes back. Whether any came back before `finish` used to depend
/// on how the two threads were scheduled: on a loaded machine none did, no sample met the
/// broken sink, and the test failed ("0 refused").
struct SeesOutput {
    inner: ThreadedCompressor,
    fed: usize,
    waited: bool,
}

/// Past zstd's input buffer (its window and a block: zstd emits nothing before it is full)
/// and the batches in flight.
const WAIT_AFTER: usize = 6 * tachyon::tachyon::compress::BATCH_BYTES;

impl RegionCompressor for SeesOutput {
    fn compress(&mut self, input: &[u8], end: bool) -> Result<Progress, ZstdError> {
        let progress = self.inner.compress(input, end)?;
        self.fed += progress.consumed;
        if !self.waited && self.fed >= WAIT_AFTER {
            self.waited = true;
            let since = Instant::now();
            while self.inner.pending().is_empty() {
                assert!(since.elapsed() < Duration::from_secs(120), "the worker sent nothing back");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        Ok(progress)
    }
    fn pending(&mut self) -> &[u8] {
        self.inner.pending()
    }
    fn consume_pending(&mut self, n: usize) {
        self.inner.consume_pending(n);
    }
    fn is_finished(&self) -> bool {
        self.inner.is_finished()
    }
    fn restart(&mut self) -> Result<(), ZstdError> {
        self.inner.restart()
    }
}

#[test]
fn sink_errors_heal_to_the_same_bytes() {
    let want = in_thread();
    let names = names();
    let mut storage = VecWriterStorage::new(CAP).unwrap();
    let mut threaded = SeesOutput { inner: ThreadedCompressor::spawn().unwrap(), fed: 0, waited: false };
    let compressor: &mut dyn RegionCompressor = &mut threaded;
    let mut w =
        Writer::with_endian(Flaky::default(), storage.storage().with_zstd(compressor), config(), LittleEndian).unwrap();
    let mut refused = 0;
    // The sink refuses the first write of every sample (compressed bytes come back from the
    // worker now and then, and the writer writes them out with a later sample); a refused
    // sample is retried once the sink is repaired.
    let names_ref = &names;
    for i in 0..SAMPLES {
        let (ts, tid, frames) = sample(i, names_ref);
        w.get_mut().broken = true;
        while let Err(e) = w.write_thread_sample(ts, 0, tid, (i % 3) as u8, frames.iter().copied()) {
            assert!(matches!(e, WriteError::Sink { error: Broken, .. }), "{e:?}");
            refused += 1;
            w.get_mut().broken = false;
        }
    }
    w.get_mut().broken = true;
    assert!(w.finish().is_err());
    w.get_mut().broken = false;
    w.finish().unwrap();
    let failures = w.get_ref().failures;
    let got = w.into_inner().inner.into_inner();
    assert!(
        refused > 0 && failures > refused,
        "the sink must really have failed: {refused} refused, {failures} failed"
    );
    assert!(got == want, "{} bytes, want {}", got.len(), want.len());
    assert!(threaded.waited, "the region was shorter than {WAIT_AFTER} bytes: nothing made output come back early");
}

/// Re-encoding puts a REPEAT run that filled its buffer where the file has it: a writer ends
/// such a run only at its thread's next sample, which a copy reads from a later record.
#[test]
fn reencoding_keeps_full_runs_in_place() {
    // Thread 1 idles (one stack, ~6,000 samples a run before its buffer fills) while thread 2
    // changes stack every sample, raw and zstd.
    for compression in [Compression::None, Compression::Zstd] {
        let mut storage = tachyon::tachyon::storage::OwnedWriterStorage::new(CAP, compression).unwrap();
        let config = WriterConfig { compression, ..WriterConfig::new(1_000_000, 100) };
        let mut w = storage.writer(VecSink::default(), config, LittleEndian).unwrap();
        let idle = [Frame::new(b"pool.py", b"wait")];
        for i in 0..40_000u64 {
            let ts = 1_000_000 + i * 100;
            w.write_thread_sample(ts, 0, 1, 0, idle).unwrap();
            let line = 1 + (i % 5) as i32;
            let here = Location { lineno: line, end_lineno: line, col: 0, end_col: 1 };
            let work = [Frame::new(b"app.py", b"step").at(here), idle[0]];
            w.write_thread_sample(ts, 0, 2, 1, work).unwrap();
        }
        w.finish().unwrap();
        let file = w.into_inner().into_inner();
        let meta = tachyon_core::reader::Metadata::read(&mut tachyon_core::io::Cursor::new(&file[..])).unwrap();
        let mut rstorage = tachyon::tachyon::storage::OwnedReaderStorage::for_metadata(
            &meta,
            tachyon::tachyon::storage::Limits::default(),
        )
        .unwrap();
        let mut reader = rstorage.open(tachyon_core::io::Cursor::new(&file[..])).unwrap();
        let again = tachyon::tachyon::write::reencode(&mut reader, VecSink::default(), LittleEndian, None, &mut |_| {})
            .unwrap();
        assert!(again.into_inner() == file, "{compression:?}: re-encoded bytes differ");
    }
}
