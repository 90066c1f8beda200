//! A sample region read in a second thread (a zstd one decompressed there, a raw one read
//! there) reads like one the reader reads itself: the same samples from the vectors and the
//! real profile in the box, and the same first error from their truncations and corruptions.

use std::path::Path;
use tachyon_test_kit::fixtures;

use tachyon::file::FileSource;
use tachyon::tachyon::storage::{Limits, OwnedReaderStorage};
use tachyon_core::io::Cursor;
use tachyon_core::reader::{Metadata, Record};
use tachyon_core::{ReadError, Reader};

/// Samples (thread, timestamp, status, stack length) and how the stream ended.
fn walk<R: embedded_io::Read + embedded_io::Seek>(
    reader: Result<Reader<'_, R>, ReadError<R::Error>>,
) -> (Vec<(u64, u64, u8, usize)>, String)
where
    R::Error: std::fmt::Debug,
{
    let mut samples = Vec::new();
    let mut reader = match reader {
        Ok(r) => r,
        Err(e) => return (samples, format!("{e:?}")),
    };
    loop {
        match reader.next_item() {
            Ok(None) => return (samples, format!("end after {}", reader.samples_decoded())),
            Ok(Some(Record::Sample(s))) => samples.push((s.thread_id, s.timestamp_us, s.status, s.stack.len())),
            Ok(Some(Record::Repeat(mut run))) => loop {
                match run.next_entry() {
                    Ok(Some(e)) => samples.push((run.thread_id, e.timestamp_us, e.status, run.stack.len())),
                    Ok(None) => break,
                    Err(e) => return (samples, format!("{e:?}")),
                }
            },
            Err(e) => return (samples, format!("{e:?}")),
        }
    }
}

/// `bytes` read both ways; `Some` with what each saw when they differ.
fn both_ways(bytes: &[u8], scratch: &Path) -> Option<String> {
    let Ok(meta) = Metadata::read(&mut Cursor::new(bytes)) else { return None };
    let mut storage = OwnedReaderStorage::for_metadata(&meta, Limits::default()).unwrap();
    let here = walk(storage.open(Cursor::new(bytes)));
    std::fs::write(scratch, bytes).unwrap();
    let source = FileSource::open(scratch).unwrap();
    let threaded = walk(storage.open_threaded(source));
    (here != threaded).then(|| format!("in-thread {here:?}\nthreaded {threaded:?}"))
}

#[test]
fn a_region_read_in_a_second_thread_reads_like_the_readers_own() {
    let root = fixtures::root();
    let vectors = root.join("qemu-tests/vectors/cpython-3.15.2");
    let mut files: Vec<(String, Vec<u8>, usize)> = Vec::new();
    let compressed = ["09_zstd.x86_64", "09_zstd.s390x", "14_zstd_empty.x86_64", "14_zstd_empty.s390x"];
    let raw = ["02_repeat_run.x86_64", "05_two_threads.s390x", "08_opcodes.x86_64"];
    for name in compressed.into_iter().chain(raw) {
        files.push((name.into(), std::fs::read(vectors.join(format!("{name}.bin"))).unwrap(), 1));
    }
    files.push(("stdlib_work".into(), std::fs::read(root.join("examples/stdlib_work.pyb")).unwrap(), 97));
    let scratch = std::env::temp_dir().join(format!("tachyon-threaded-{}.pyb", std::process::id()));
    let mut failures = Vec::new();
    let mut variants = 0;
    for (name, good, stride) in &files {
        let meta = Metadata::read(&mut Cursor::new(&good[..])).unwrap();
        assert_eq!(meta.is_compressed(), !raw.contains(&name.as_str()), "{name}");
        let mut storage = OwnedReaderStorage::for_metadata(&meta, Limits::default()).unwrap();
        std::fs::write(&scratch, good).unwrap();
        let (samples, end) = walk(storage.open_threaded(FileSource::open(&scratch).unwrap()));
        assert_eq!(end, format!("end after {}", meta.header.sample_count), "{name}");
        assert_eq!(samples.len() as u64, meta.header.sample_count, "{name}");
        let mut check = |what: String, bytes: &[u8]| {
            variants += 1;
            if let Some(diff) = both_ways(bytes, &scratch) {
                failures.push(format!("{what}:\n{diff}"));
            }
        };
        check(name.clone(), good);
        for len in (0..good.len()).step_by(*stride) {
            check(format!("{name}[..{len}]"), &good[..len]);
        }
        for at in (0..good.len()).step_by(*stride) {
            let mut bad = good.clone();
            bad[at] ^= if at % 2 == 0 { 0x01 } else { 0x80 };
            check(format!("{name} flipped at {at}"), &bad);
        }
    }
    // A real recording whose region (1.49 MB decompressed) takes more buffers than the
    // worker's ring holds, so that the worker naps until the reader hands buffers back:
    // read whole both ways.
    let deep = std::fs::read(root.join("qemu-tests/fixtures/recorded/cpython-3.15.2/deep_varied_zstd.pyb")).unwrap();
    let meta = Metadata::read(&mut Cursor::new(&deep[..])).unwrap();
    assert!(meta.header.sample_count > 300_000, "{} samples", meta.header.sample_count);
    const _: () = assert!(tachyon::tachyon::region::BUFFERS * tachyon::tachyon::region::BUFFER_BYTES < 1_400_000);
    // A worker left waiting for buffers would hang the read: a deadline makes that a failure.
    let (done, finished) = std::sync::mpsc::channel();
    let deep_scratch = scratch.with_extension("deep.pyb");
    let reading = deep_scratch.clone();
    std::thread::spawn(move || done.send(both_ways(&deep, &reading)));
    let diff = finished.recv_timeout(std::time::Duration::from_secs(120)).expect("the threaded read finishes");
    let _ = std::fs::remove_file(&deep_scratch);
    if let Some(diff) = diff {
        failures.push(format!("deep_varied_zstd:\n{diff}"));
    }
    variants += 1;
    let _ = std::fs::remove_file(&scratch);
    eprintln!("{variants} variants read both ways");
    assert!(failures.is_empty(), "{} differ:\n{}", failures.len(), failures.join("\n"));
}

/// A second handle on a file whose reads panic: the worker thread dies at its first read.
struct Panicking;

impl embedded_io::ErrorType for Panicking {
    type Error = std::io::Error;
}

impl embedded_io::Read for Panicking {
    fn read(&mut self, _: &mut [u8]) -> Result<usize, std::io::Error> {
        panic!("a read that panics (on purpose)")
    }
}

impl embedded_io::Seek for Panicking {
    fn seek(&mut self, pos: embedded_io::SeekFrom) -> Result<u64, std::io::Error> {
        Ok(match pos {
            embedded_io::SeekFrom::Start(n) => n,
            _ => 0,
        })
    }
}

/// Runs `f` in a thread; a failure if it has not returned within a minute (a hang).
fn within_a_minute<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(f()));
    finished.recv_timeout(std::time::Duration::from_secs(60)).expect("finishes, does not hang")
}

#[test]
fn a_worker_that_dies_is_an_error_for_the_reader_not_a_hang() {
    use tachyon_core::RegionSource;
    let bytes = std::fs::read(fixtures::root().join("examples/stdlib_work.pyb")).unwrap();
    let meta = Metadata::read(&mut Cursor::new(&bytes[..])).unwrap();
    let message = within_a_minute(move || {
        let mut region = tachyon::tachyon::region::ThreadedRegion::spawn(Panicking, &meta, 27, u64::MAX).unwrap();
        let mut buf = [0u8; 64];
        match region.read_region(&mut buf) {
            Err(ReadError::Io { error, .. }) => error.to_string(),
            other => format!("not an I/O error: {other:?}"),
        }
    });
    assert_eq!(message, "the thread reading the sample region stopped");
}

#[test]
fn a_reader_dropped_midway_stops_the_worker() {
    let path = fixtures::root().join("qemu-tests/fixtures/recorded/cpython-3.15.2/deep_varied_zstd.pyb");
    let samples = within_a_minute(move || {
        let bytes = std::fs::read(&path).unwrap();
        let meta = Metadata::read(&mut Cursor::new(&bytes[..])).unwrap();
        let mut storage = OwnedReaderStorage::for_metadata(&meta, Limits::default()).unwrap();
        let mut reader = storage.open_threaded(FileSource::open(&path).unwrap()).unwrap();
        // Far enough that the worker has filled its ring and waits for buffers; then the
        // reader (and with it the region, which joins the worker) is dropped.
        while reader.samples_decoded() < 1_000 {
            reader.next_item().unwrap().expect("more samples");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        reader.samples_decoded()
    });
    assert!(samples >= 1_000);
}
