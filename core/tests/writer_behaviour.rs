//! Writer behaviour the vectors do not cover: REPEAT splitting at CPython's byte budget,
//! limits that keep the file finishable, sink errors that heal, the frame-id API.

use crate::common::{decode_all, writer_storage, SMALL_READER};
use embedded_io::{ErrorType, Seek, SeekFrom, Write};
use tachyon_core::io::Cursor;
use tachyon_core::records::PREFIX_LEN;
use tachyon_core::storage::{Resource, StaticWriterStorage};
use tachyon_core::varint;
use tachyon_core::{Frame, FrameId, LittleEndian, WriteError, Writer, WriterConfig};
use tachyon_test_kit::Broken;

const MAIN: Frame<'static> = Frame { filename: b"/app/main.py", funcname: b"main", location: None, opcode: None };
const WORK: Frame<'static> = Frame { filename: b"/app/work.py", funcname: b"work", location: None, opcode: None };

fn config() -> WriterConfig {
    WriterConfig::new(1_000_000, 1000)
}

/// Walks the raw region after one leading FULL record and returns each REPEAT record's count.
fn repeat_counts(file: &[u8], full_len: usize) -> Vec<u64> {
    let end = u64::from_le_bytes(file[40..48].try_into().unwrap()) as usize;
    let mut at = 64 + full_len;
    let mut counts = Vec::new();
    while at < end {
        assert_eq!(file[at + 12], 0, "expected a REPEAT record at {at}");
        let (count, n) = varint::decode_u64(&file[at + PREFIX_LEN..]).unwrap();
        at += PREFIX_LEN + n;
        for _ in 0..count {
            let (_, d) = varint::decode_u64(&file[at..]).unwrap();
            at += d + 1;
        }
        counts.push(count);
    }
    counts
}

fn run_same_stack(samples: u64, step: u64) -> Vec<u8> {
    let mut storage = writer_storage();
    let mut buf = vec![0u8; 1 << 20];
    let mut w = Writer::with_endian(Cursor::new(&mut buf[..]), storage.storage(), config(), LittleEndian).unwrap();
    for i in 0..samples {
        w.write_thread_sample(1_000_000 + (i + 1) * step, 0, 1, 0, [MAIN]).unwrap();
    }
    let size = w.finish().unwrap() as usize;
    buf.truncate(size);
    buf
}

#[test]
fn repeat_runs_split_at_cpythons_budget() {
    // Spec 5.7: 3-byte entries give runs of 5458, 2-byte entries runs of 8187 (CPython's
    // own 12,000- and 20,000-sample results). The FULL record here is 13+2+1+1+1 bytes.
    let file = run_same_stack(12_000, 1000);
    assert_eq!(repeat_counts(&file, 18), vec![5458, 5458, 1083]);
    let file = run_same_stack(20_000, 100);
    assert_eq!(repeat_counts(&file, 17), vec![8187, 8187, 3625]);
    assert_eq!(decode_all(&file, SMALL_READER).unwrap().len(), 20_000);
}

#[test]
fn capacity_limit_keeps_everything_accepted() {
    // Room for three strings: MAIN's two fit, WORK's file name is the third, its function
    // name the fourth, which does not.
    let mut storage = StaticWriterStorage::<64, 3, 8, 2, 64, 1314>::new();
    let mut buf = [0u8; 4096];
    let mut w = Writer::with_endian(Cursor::new(&mut buf[..]), storage.storage(), config(), LittleEndian).unwrap();
    w.write_thread_sample(1_001_000, 0, 1, 1, [MAIN]).unwrap();
    let err = w.write_thread_sample(1_002_000, 0, 1, 1, [WORK, MAIN]).unwrap_err();
    assert_eq!(err, WriteError::Capacity { resource: Resource::Strings });
    assert!(err.is_limit() && w.limit_reached());
    // Still usable for what fits, and finishable.
    w.write_thread_sample(1_003_000, 0, 1, 2, [MAIN]).unwrap();
    let size = w.finish().unwrap() as usize;
    let samples = decode_all(&buf[..size], SMALL_READER).unwrap();
    let got: Vec<(u64, u8)> = samples.iter().map(|s| (s.ts, s.status)).collect();
    assert_eq!(got, vec![(1_001_000, 1), (1_003_000, 2)]);
}

#[test]
fn thread_capacity_limit() {
    let mut storage = StaticWriterStorage::<64, 4, 4, 2, 64, 1314>::new();
    let mut buf = [0u8; 4096];
    let mut w = Writer::with_endian(Cursor::new(&mut buf[..]), storage.storage(), config(), LittleEndian).unwrap();
    w.write_thread_sample(1_001_000, 0, 1, 0, [MAIN]).unwrap();
    w.write_thread_sample(1_001_000, 0, 2, 0, [MAIN]).unwrap();
    assert_eq!(
        w.write_thread_sample(1_001_000, 0, 3, 0, [MAIN]),
        Err(WriteError::Capacity { resource: Resource::Threads })
    );
    let size = w.finish().unwrap() as usize;
    assert_eq!(decode_all(&buf[..size], SMALL_READER).unwrap().len(), 2);
}

/// A sink that fails every write while `broken` is set or once `writes_left` runs out,
/// leaving a little garbage behind as a real partial write could.
struct TestSink<'a> {
    inner: Cursor<&'a mut [u8]>,
    broken: bool,
    writes_left: usize,
    failures: usize,
}

impl<'a> TestSink<'a> {
    fn new(buf: &'a mut [u8]) -> Self {
        TestSink { inner: Cursor::new(buf), broken: false, writes_left: usize::MAX, failures: 0 }
    }
}

impl ErrorType for TestSink<'_> {
    type Error = Broken;
}

impl Write for TestSink<'_> {
    fn write(&mut self, buf: &[u8]) -> Result<usize, Broken> {
        if self.broken || self.writes_left == 0 {
            self.failures += 1;
            let _ = self.inner.write(&[0xEE; 3][..buf.len().min(3)]);
            return Err(Broken);
        }
        self.writes_left = self.writes_left.saturating_sub(1);
        self.inner.write(buf).map_err(|_| Broken)
    }
    fn flush(&mut self) -> Result<(), Broken> {
        Ok(())
    }
}

impl Seek for TestSink<'_> {
    fn seek(&mut self, pos: SeekFrom) -> Result<u64, Broken> {
        self.inner.seek(pos).map_err(|_| Broken)
    }
}

/// 600 samples over 3 threads with changing stacks: many records, several staging flushes.
fn sample(i: u64) -> (u64, u64, &'static [Frame<'static>]) {
    let stack: &[Frame<'static>] = if i % 7 < 3 { &[MAIN] } else { &[WORK, MAIN] };
    (1_000_000 + i * 1000, i % 3, stack)
}

type Small = StaticWriterStorage<256, 8, 8, 4, 64, 1314>;

/// Writes the 600-sample stream, every sample accepted.
fn write_stream<W: Write + Seek>(w: &mut Writer<'_, W, LittleEndian>) {
    for i in 0..600 {
        let (ts, tid, st) = sample(i);
        w.write_thread_sample(ts, 0, tid, 1, st.iter().copied()).unwrap();
    }
}

fn reference() -> Vec<u8> {
    let mut storage = Small::new();
    let mut want = vec![0u8; 1 << 16];
    let mut w = Writer::with_endian(Cursor::new(&mut want[..]), storage.storage(), config(), LittleEndian).unwrap();
    write_stream(&mut w);
    let size = w.finish().unwrap() as usize;
    want.truncate(size);
    want
}

#[test]
fn sink_errors_heal_to_identical_bytes() {
    let want = reference();
    let mut storage = Small::new();
    let mut got = vec![0u8; 1 << 16];
    let sink = TestSink::new(&mut got[..]);
    let mut w = Writer::with_endian(sink, storage.storage(), config(), LittleEndian).unwrap();
    let mut refused = 0;
    for i in 0..600 {
        let (ts, tid, st) = sample(i);
        // Every 25th sample meets a broken sink; a refused sample is retried once repaired.
        w.get_mut().broken = i % 25 == 0;
        while let Err(e) = w.write_thread_sample(ts, 0, tid, 1, st.iter().copied()) {
            assert!(matches!(e, WriteError::Sink { error: Broken, .. }), "{e:?}");
            refused += 1;
            w.get_mut().broken = false;
        }
    }
    // finish fails on a broken sink, then succeeds once it is repaired.
    w.get_mut().broken = true;
    assert!(matches!(w.finish(), Err(WriteError::Sink { .. })));
    w.get_mut().broken = false;
    let size = w.finish().unwrap() as usize;
    let failures = w.get_ref().failures;
    assert!(
        refused > 3 && failures > refused,
        "the sink must really have failed: {refused} refused, {failures} failed writes"
    );
    assert_eq!(&got[..size], &want[..]);
}

#[test]
fn finish_fails_part_way_and_retries() {
    // Break the sink after the tables started: the retry must rewrite them from their offset.
    let want = reference();
    for budget in [0usize, 1, 2] {
        let mut storage = Small::new();
        let mut got = vec![0u8; 1 << 16];
        let sink = TestSink::new(&mut got[..]);
        let mut w = Writer::with_endian(sink, storage.storage(), config(), LittleEndian).unwrap();
        write_stream(&mut w);
        w.get_mut().writes_left = budget;
        assert!(w.finish().is_err(), "budget {budget} must not be enough");
        w.get_mut().writes_left = usize::MAX;
        let size = w.finish().unwrap() as usize;
        assert_eq!(&got[..size], &want[..], "budget {budget}");
    }
}

#[test]
fn finish_twice_and_write_after_are_closed() {
    let mut storage = writer_storage();
    let mut buf = vec![0u8; 4096];
    let mut w = Writer::with_endian(Cursor::new(&mut buf[..]), storage.storage(), config(), LittleEndian).unwrap();
    w.finish().unwrap();
    assert_eq!(w.finish(), Err(WriteError::Finished));
    assert_eq!(w.write_thread_sample(1, 0, 1, 0, [MAIN]), Err(WriteError::Finished));
}

#[test]
fn frame_id_api_matches_string_api() {
    let mut storage = writer_storage();
    let mut a = vec![0u8; 4096];
    let mut w = Writer::with_endian(Cursor::new(&mut a[..]), storage.storage(), config(), LittleEndian).unwrap();
    for (i, st) in [[WORK, MAIN].as_slice(), &[MAIN], &[WORK, MAIN], &[WORK, MAIN]].iter().enumerate() {
        w.write_thread_sample(1_001_000 + i as u64, 0, 9, 3, st.iter().copied()).unwrap();
    }
    let n = w.finish().unwrap() as usize;

    let mut storage = writer_storage();
    let mut b = vec![0u8; 4096];
    let mut w = Writer::with_endian(Cursor::new(&mut b[..]), storage.storage(), config(), LittleEndian).unwrap();
    let work = w.intern_frame(WORK).unwrap();
    let main = w.intern_frame(MAIN).unwrap();
    for (i, st) in [[work, main].as_slice(), &[main], &[work, main], &[work, main]].iter().enumerate() {
        w.write_thread_sample_ids(1_001_000 + i as u64, 0, 9, 3, st).unwrap();
    }
    assert_eq!(w.write_thread_sample_ids(5, 0, 9, 3, &[FrameId(7)]), Err(WriteError::UnknownFrameId { id: 7 }));
    let m = w.finish().unwrap() as usize;
    assert_eq!(&a[..n], &b[..m]);
}

#[test]
fn full_sink_is_an_error_not_a_panic() {
    let mut storage = StaticWriterStorage::<256, 8, 8, 4, 64, 1314>::new();
    let mut buf = [0u8; 100];
    let mut w = Writer::with_endian(Cursor::new(&mut buf[..]), storage.storage(), config(), LittleEndian).unwrap();
    let mut saw_error = false;
    for i in 0..200u64 {
        let st: &[Frame<'static>] = if i % 2 == 0 { &[MAIN] } else { &[WORK, MAIN] };
        if let Err(e) = w.write_thread_sample(i, 0, 1, 0, st.iter().copied()) {
            assert!(matches!(e, WriteError::Sink { .. }), "{e:?}");
            saw_error = true;
            break;
        }
    }
    assert!(saw_error);
    assert!(matches!(w.finish(), Err(WriteError::Sink { .. })));
}

#[test]
fn reused_name_buffer_never_returns_a_stale_frame() {
    // The recent-frame cache is keyed by where names live; the same buffer with new content
    // must still intern the new content.
    let mut name = *b"first";
    let mut storage = writer_storage();
    let mut buf = vec![0u8; 4096];
    let mut w = Writer::with_endian(Cursor::new(&mut buf[..]), storage.storage(), config(), LittleEndian).unwrap();
    w.write_thread_sample(1_001_000, 0, 1, 0, [Frame::new(b"f.py", &name)]).unwrap();
    name.copy_from_slice(b"other");
    w.write_thread_sample(1_002_000, 0, 1, 0, [Frame::new(b"f.py", &name)]).unwrap();
    let n = w.finish().unwrap() as usize;
    let got: Vec<Vec<u8>> =
        decode_all(&buf[..n], SMALL_READER).unwrap().into_iter().map(|s| s.frames[0].1.clone()).collect();
    assert_eq!(got, vec![b"first".to_vec(), b"other".to_vec()]);
}

#[test]
fn samples_are_refused_once_finalize_has_started() {
    // A finish that fails part-way must not let later samples slip in after the sample
    // region; only finish may be called again, and the file holds what came before.
    let want = reference();
    let mut storage = Small::new();
    let mut got = vec![0u8; 1 << 16];
    let sink = TestSink::new(&mut got[..]);
    let mut w = Writer::with_endian(sink, storage.storage(), config(), LittleEndian).unwrap();
    write_stream(&mut w);
    w.get_mut().writes_left = 1;
    assert!(w.finish().is_err());
    assert_eq!(w.write_thread_sample(9_999_999, 0, 0, 1, [MAIN]), Err(WriteError::Finished));
    w.get_mut().writes_left = usize::MAX;
    let size = w.finish().unwrap() as usize;
    assert_eq!(&got[..size], &want[..]);
}

#[test]
fn append_frame_keeps_equal_frames_apart() {
    let mut storage = StaticWriterStorage::<64, 4, 4, 1, 64, 1314>::new();
    let mut buf = [0u8; 1024];
    let mut w = Writer::with_endian(Cursor::new(&mut buf[..]), storage.storage(), config(), LittleEndian).unwrap();
    let first = w.append_frame(MAIN).unwrap();
    let second = w.append_frame(MAIN).unwrap();
    assert_ne!(first, second, "a second table entry");
    assert_eq!(w.intern_frame(MAIN).unwrap(), first, "lookups find the first");
    assert_eq!((w.frame_count(), w.string_count()), (2, 2), "names are still interned once");
    w.write_thread_sample_ids(1_001_000, 0, 1, 0, &[second, first]).unwrap();
    let size = w.finish().unwrap() as usize;
    let samples = decode_all(&buf[..size], SMALL_READER).unwrap();
    assert_eq!(samples.len(), 1);
    assert_eq!(samples[0].frames.len(), 2);
    // Both entries hold the same frame.
    assert_eq!(samples[0].frames[0], samples[0].frames[1]);

    // Capacity is still checked: room for four frames.
    let mut storage = StaticWriterStorage::<64, 4, 4, 1, 64, 1314>::new();
    let mut buf = [0u8; 1024];
    let mut w = Writer::with_endian(Cursor::new(&mut buf[..]), storage.storage(), config(), LittleEndian).unwrap();
    for _ in 0..4 {
        w.append_frame(MAIN).unwrap();
    }
    assert_eq!(w.append_frame(MAIN).unwrap_err(), WriteError::Capacity { resource: Resource::Frames });
}

/// CPython passes every byte with "continue" and ends the frame on empty input, so its frame
/// header has no content size (`28 b5 2f fd 00 58`, spec 8), however small the region. Ending
/// on the last input instead made zstd write one for a 2-sample real profile.
#[cfg(feature = "zstd")]
#[test]
fn small_zstd_regions_have_no_content_size() {
    use tachyon_core::compression::{compressor_workspace_bytes, workspace_words, Compressor};
    let mut storage = writer_storage();
    let mut ws = vec![0u64; workspace_words(compressor_workspace_bytes())];
    let mut out = vec![0u8; 1 << 16];
    let mut buf = vec![0u8; 1 << 16];
    let mut cfg = config();
    cfg.compression = tachyon_core::Compression::Zstd;
    let z = Compressor::new(&mut ws, &mut out).unwrap();
    let mut w =
        Writer::with_endian(Cursor::new(&mut buf[..]), storage.storage().with_zstd(z), cfg, LittleEndian).unwrap();
    w.write_thread_sample(1_001_000, 0, 1, 1, [MAIN]).unwrap();
    w.write_thread_sample(1_002_000, 0, 1, 1, [WORK, MAIN]).unwrap();
    let size = w.finish().unwrap() as usize;
    assert_eq!(&buf[64..70], &[0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58]);
    let meta = tachyon_core::Metadata::read(&mut Cursor::new(&buf[..size])).unwrap();
    assert_eq!(meta.header.sample_count, 2);
}

/// Compression is said once, by the configuration: a zstd configuration over storage without
/// a compressor is refused before any I/O, with or without the `zstd` feature.
#[test]
fn zstd_configuration_without_a_compressor_is_refused() {
    let mut storage = writer_storage();
    let mut buf = vec![0u8; 256];
    let cfg = config().with_compression(tachyon_core::Compression::Zstd);
    let made = Writer::with_endian(Cursor::new(&mut buf[..]), storage.storage(), cfg, LittleEndian);
    assert_eq!(made.err(), Some(WriteError::CompressorMissing));
    assert!(buf.iter().all(|&b| b == 0), "nothing may be written");
}

/// A compressor in the storage is only memory: a raw (or "other") configuration writes the
/// same bytes as without it, the header field stored as given.
#[cfg(feature = "zstd")]
#[test]
fn a_compressor_is_unused_unless_the_configuration_says_zstd() {
    use tachyon_core::compression::{compressor_workspace_bytes, workspace_words, Compressor};
    for compression in [tachyon_core::Compression::None, tachyon_core::Compression::Other(7)] {
        let cfg = config().with_compression(compression);
        let write = |with_compressor: bool| {
            let mut storage = writer_storage();
            let mut ws = vec![0u64; workspace_words(compressor_workspace_bytes())];
            let mut out = vec![0u8; 1 << 16];
            let mut buf = vec![0u8; 1 << 16];
            let store = if with_compressor {
                storage.storage().with_zstd(Compressor::new(&mut ws, &mut out).unwrap())
            } else {
                storage.storage()
            };
            let mut w = Writer::with_endian(Cursor::new(&mut buf[..]), store, cfg, LittleEndian).unwrap();
            w.write_thread_sample(1_001_000, 0, 1, 1, [MAIN]).unwrap();
            w.write_thread_sample(1_002_000, 0, 1, 1, [WORK, MAIN]).unwrap();
            let size = w.finish().unwrap() as usize;
            buf.truncate(size);
            buf
        };
        let plain = write(false);
        assert_eq!(write(true), plain);
        // Header offset 56 is the compression field (spec 3); the region after it is raw.
        assert_eq!(u32::from_le_bytes(plain[56..60].try_into().unwrap()), compression.field());
        assert_ne!(&plain[64..68], &[0x28, 0xb5, 0x2f, 0xfd]);
    }
}

/// Writes threads whose stacks deepen from 1 to 256 frames and back, runs past the REPEAT
/// budget, small and large timestamp steps: every shape a thread's stack and REPEAT buffer
/// take.
fn varied_threads<W: Write + Seek>(w: &mut Writer<'_, W, LittleEndian>, ids: &[FrameId]) {
    for i in 0..60_000u64 {
        let tid = i % 5;
        let depth = match tid {
            0 => (i / 37 % 256 + 1) as usize,
            1 => 256 - (i / 101 % 256) as usize,
            2 => 1,
            3 => 3 + (i / 9_000) as usize,
            _ => (i / 1_000 % 40 + 1) as usize,
        };
        let step = if tid == 2 { 1 } else { 1_000 + (i % 3) * 100_000 };
        w.write_thread_sample_ids(1_000_000 + i * step, (tid % 2) as u32, 100 + tid, (i % 4) as u8, &ids[..depth])
            .unwrap();
    }
}

#[test]
#[cfg_attr(
    target_endian = "big",
    ignore = "storage growth, written little-endian: the same on every host; run on the host (11 s under qemu-s390x)"
)]
fn storage_that_grows_by_use_writes_what_fixed_storage_writes() {
    let names: Vec<Vec<u8>> = (0..256).map(|i| format!("f{i}").into_bytes()).collect();
    let write = |storage: tachyon_core::storage::WriterStorage<'_>| {
        let mut buf = vec![0u8; 8 << 20];
        let mut w = Writer::with_endian(Cursor::new(&mut buf[..]), storage, config(), LittleEndian).unwrap();
        let ids: Vec<FrameId> = names
            .iter()
            .map(|n| {
                w.append_frame(Frame { filename: b"/app/x.py", funcname: n, location: None, opcode: None }).unwrap()
            })
            .collect();
        varied_threads(&mut w, &ids);
        let size = w.finish().unwrap() as usize;
        buf.truncate(size);
        buf
    };
    let mut fixed = Box::new(StaticWriterStorage::<4096, 512, 512, 8>::new());
    let from_fixed = write(fixed.storage());
    let mut growable = writer_storage();
    let from_growable = write(growable.storage());
    assert!(from_fixed == from_growable, "the two storages wrote different files");
    let reader = tachyon_core::storage::ReaderCapacity { threads: 8, ..SMALL_READER };
    assert_eq!(decode_all(&from_growable, reader).unwrap().len(), 60_000);
    // Used again, the storage starts empty and writes the same file.
    assert!(write(growable.storage()) == from_growable, "a reused storage wrote a different file");
}

#[test]
#[cfg_attr(
    target_endian = "big",
    ignore = "storage growth, written little-endian: the same on every host; run on the host (22 s under qemu-s390x)"
)]
fn a_million_threads_are_written_in_memory_that_follows_their_use() {
    const THREADS: u64 = 1_000_000;
    let cap = tachyon_core::storage::WriterCapacity { threads: usize::MAX, ..crate::common::SMALL_WRITER };
    let mut storage = tachyon_core::storage::VecWriterStorage::new(cap).unwrap();
    assert_eq!(storage.thread_bytes(), 0, "nothing is held before a thread is written");
    let mut buf = vec![0u8; 64 << 20];
    let size = {
        let mut w = Writer::with_endian(Cursor::new(&mut buf[..]), storage.storage(), config(), LittleEndian).unwrap();
        for tid in 0..THREADS {
            // A sample and a repeat of it: every thread has a stack and a pending run.
            w.write_thread_sample(1_001_000, 0, tid, 0, [WORK, MAIN]).unwrap();
            w.write_thread_sample(1_002_000, 0, tid, 0, [WORK, MAIN]).unwrap();
        }
        assert_eq!(w.thread_count(), THREADS as usize);
        w.finish().unwrap() as usize
    };
    let per_thread = storage.thread_bytes() as f64 / THREADS as f64;
    eprintln!("thread table: {} bytes, {per_thread:.0} per thread", storage.thread_bytes());
    // Entry 44 B (its chunks' places in it), index 8–16 B, a 2-id stack 8 B, a 16-byte run,
    // and at most doubling slack on the arenas: 80 measured (fixed storage would hold 17,460 B
    // a thread).
    assert!(per_thread <= 100.0, "{per_thread} bytes per thread");
    let reader = tachyon_core::storage::ReaderCapacity { threads: usize::MAX, ..SMALL_READER };
    let samples = decode_all(&buf[..size], reader).unwrap();
    assert_eq!(samples.len(), 2 * THREADS as usize);
    // Runs are flushed at finish in thread-creation order, after every first sample.
    assert_eq!((samples[1].tid, samples[1].ts), (1, 1_001_000));
    assert_eq!((samples[THREADS as usize].tid, samples[THREADS as usize].ts), (0, 1_002_000));
}

/// Writes `n` distinct frames (each a new file name, function name and line), each sample
/// on thread `i % 4`, with names long enough to make the arena grow many times.
fn distinct_frames(w: &mut Writer<'_, Cursor<&mut [u8]>, LittleEndian>, n: u32) {
    for i in 0..n {
        let file = format!("/srv/app/generated/module_{i:06}.py");
        let func = format!("handler_{}", i.wrapping_mul(2_654_435_761));
        let frame = Frame {
            filename: file.as_bytes(),
            funcname: func.as_bytes(),
            location: Some(tachyon_core::Location { lineno: i as i32, end_lineno: i as i32, col: 0, end_col: 4 }),
            opcode: None,
        };
        // Every 7th frame repeats an old one: a lookup, not an insert, after the index grew.
        let again = Frame { filename: b"/app/main.py", funcname: b"main", location: None, opcode: Some(7) };
        let stack = if i % 7 == 0 { [frame, again] } else { [frame, MAIN] };
        w.write_thread_sample(1_000_000 + u64::from(i), 0, u64::from(i % 4), 0, stack).unwrap();
    }
}

#[test]
fn growing_tables_write_the_file_fixed_tables_write() {
    const FRAMES: u32 = 50_000;
    let cap = tachyon_core::storage::WriterCapacity {
        string_bytes: 8 << 20,
        strings: 2 * FRAMES as usize + 8,
        frames: FRAMES as usize + 8,
        threads: 8,
        rle_budget: tachyon_core::records::CPYTHON_RLE_BUDGET,
    };
    let mut fixed = tachyon_core::storage::VecWriterStorage::new(cap).unwrap();
    let mut growing = tachyon_core::storage::VecWriterStorage::growing(8, tachyon_core::records::CPYTHON_RLE_BUDGET);
    assert!(growing.table_bytes() < 100 << 10, "growing storage starts small: {}", growing.table_bytes());
    let write = |storage: &mut tachyon_core::storage::VecWriterStorage| {
        let mut buf = vec![0u8; 32 << 20];
        let mut w = Writer::with_endian(Cursor::new(&mut buf[..]), storage.storage(), config(), LittleEndian).unwrap();
        distinct_frames(&mut w, FRAMES);
        // Strings: 2 per new frame, plus main.py and main (MAIN and `again` share them);
        // frames: one per i, MAIN and `again` (which differ in their opcode).
        assert_eq!((w.frame_count(), w.string_count()), (FRAMES as usize + 2, 2 * FRAMES as usize + 2));
        let size = w.finish().unwrap() as usize;
        buf.truncate(size);
        buf
    };
    let from_fixed = write(&mut fixed);
    let from_growing = write(&mut growing);
    assert!(from_fixed == from_growing, "fixed and growing tables wrote different files");
    // Used again, the growing storage forgets what it held and writes the same file.
    assert!(write(&mut growing) == from_fixed, "a reused growing storage wrote a different file");
    let reader = tachyon_core::storage::ReaderCapacity {
        string_bytes: 8 << 20,
        strings: 2 * FRAMES as usize + 8,
        frames: FRAMES as usize + 8,
        threads: 8,
        ..SMALL_READER
    };
    let samples = decode_all(&from_growing, reader).unwrap();
    assert_eq!(samples.len(), FRAMES as usize);
    // The table grew: it holds what was written, with doubling slack at most.
    let held = growing.table_bytes();
    assert!(held > 2 << 20 && held < 16 << 20, "{held} bytes held for {FRAMES} frames");
}

#[test]
fn fixed_tables_still_refuse_past_their_capacity() {
    let cap = tachyon_core::storage::WriterCapacity { frames: 100, strings: 1000, ..crate::common::SMALL_WRITER };
    let mut storage = tachyon_core::storage::VecWriterStorage::new(cap).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut w = Writer::with_endian(Cursor::new(&mut buf[..]), storage.storage(), config(), LittleEndian).unwrap();
    let mut refused = None;
    for i in 0..200u32 {
        let func = format!("f{i}");
        let frame = Frame { filename: b"a.py", funcname: func.as_bytes(), location: None, opcode: None };
        if let Err(e) = w.write_thread_sample(1_000_000 + u64::from(i), 0, 1, 0, [frame]) {
            refused = Some((i, e));
            break;
        }
    }
    match refused {
        Some((100, WriteError::Capacity { resource: Resource::Frames })) => {}
        other => panic!("expected the 101st frame refused for Frames, got {other:?}"),
    }
    assert!(w.finish().is_ok(), "a refused frame leaves the file finishable");
}

/// The counts CPython 3.15.2's `BinaryWriter.get_stats()` gave for the same calls (recorded
/// with the oracle on 2026-11-26): a run counts when its record is written, with the frames
/// it saves; bytes are the records' before compression.
#[test]
fn write_counts_are_cpythons_get_stats() {
    use tachyon_core::records::{RecordCounts, WriteCounts};
    let names = |s: &'static str| -> Vec<Frame<'static>> {
        s.as_bytes()
            .chunks(1)
            .map(|n| Frame {
                filename: b"a.py",
                funcname: n,
                location: Some(tachyon_core::Location { lineno: 1, end_lineno: 1, col: 0, end_col: 0 }),
                opcode: None,
            })
            .collect()
    };
    let counts =
        |repeat, full, suffix, pop_push, repeat_samples, frames_written, frames_saved, bytes_written| WriteCounts {
            records: RecordCounts { repeat, full, suffix, pop_push },
            repeat_samples,
            frames_written,
            frames_saved,
            bytes_written,
        };
    let mut storage = writer_storage();
    let mut buf = vec![0u8; 1 << 16];
    let mut w =
        Writer::with_endian(Cursor::new(&mut buf[..]), storage.storage(), WriterConfig::new(0, 1000), LittleEndian)
            .unwrap();
    let steps: [(&str, u64, &str, u64, WriteCounts); 8] = [
        ("full of 3", 1, "abc", 10, counts(0, 1, 0, 0, 0, 3, 0, 19)),
        ("repeat, pending", 1, "abc", 20, counts(0, 1, 0, 0, 0, 3, 0, 19)),
        ("repeat, pending", 1, "abc", 30, counts(0, 1, 0, 0, 0, 3, 0, 19)),
        ("suffix after the run", 1, "xabc", 40, counts(1, 1, 1, 0, 2, 4, 9, 55)),
        ("empty first stack: a pending run", 2, "", 50, counts(1, 1, 1, 0, 2, 4, 9, 55)),
        ("empty again, then a frame", 2, "", 60, counts(1, 1, 1, 0, 2, 4, 9, 55)),
        ("full after the empty run", 2, "q", 70, counts(2, 2, 1, 0, 4, 5, 9, 90)),
        ("back to empty: a full of 0", 2, "", 80, counts(2, 3, 1, 0, 4, 5, 9, 106)),
    ];
    for (what, tid, stack, ts, want) in steps {
        w.write_thread_sample(ts, 0, tid, 0, names(stack)).unwrap();
        assert_eq!(w.write_counts(), want, "after {what}");
    }
    w.write_thread_sample(90, 0, 1, 0, names("yzabc")).unwrap();
    assert_eq!(w.write_counts(), counts(2, 3, 1, 1, 4, 7, 12, 125), "after a pop-push");
    assert_eq!(w.sample_count(), 9);

    // A long run is counted when the budget makes it a record (5458 three-byte entries).
    let mut storage = writer_storage();
    let mut w =
        Writer::with_endian(Cursor::new(&mut buf[..]), storage.storage(), WriterConfig::new(0, 1000), LittleEndian)
            .unwrap();
    for i in 0..6000 {
        w.write_thread_sample(i * 1000, 0, 1, 0, names("ab")).unwrap();
    }
    assert_eq!(w.write_counts(), counts(1, 1, 0, 0, 5458, 2, 10_916, 16_407));
}
