//! A device's sample stream (`tachyon_core::stream`: definitions once, samples by id) received
//! by `tachyon receive`: complete, it is the file a `Writer` makes of the same samples, byte
//! for byte, in either byte order, its counts the stats trailer; cut at any byte, the file of
//! every sample in the frames that arrived whole; any byte flipped or cut out, refused by
//! name or the same file; a link that fails now and then loses only the samples the writer
//! says it lost.

use std::collections::{BTreeMap, HashMap};

use tachyon::memory::VecSink;
use tachyon::tachyon::receive::{receive, ReceiveError};
use tachyon_core::capture::Taken;
use tachyon_core::io::Cursor;
use tachyon_core::records::CPYTHON_RLE_BUDGET;
use tachyon_core::storage::{ReaderCapacity, VecReaderStorage, VecWriterStorage};
use tachyon_core::stream::{ids_words, StreamWriter, WriteError};
use tachyon_core::transport::StreamError;
use tachyon_core::{BigEndian, Endianity, Frame, FrameId, LittleEndian, Location, Reader, Stats, Writer, WriterConfig};

const IDS: u32 = 60;

/// A link that keeps what is sent and, when told, fails its `n`th write.
#[derive(Default)]
struct Link {
    sent: Vec<u8>,
    writes: u32,
    fail_every: Option<u32>,
}

impl embedded_io::ErrorType for Link {
    type Error = embedded_io::ErrorKind;
}

impl embedded_io::Write for Link {
    fn write(&mut self, buf: &[u8]) -> Result<usize, Self::Error> {
        self.writes += 1;
        if self.fail_every.is_some_and(|n| self.writes % n == 0) {
            // Half of it went out before the link failed.
            self.sent.extend_from_slice(&buf[..buf.len() / 2]);
            return Err(embedded_io::ErrorKind::Other);
        }
        self.sent.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

fn frame_of(id: u32) -> Frame<'static> {
    const FUNCTIONS: [&[u8]; 5] = [b"main", b"parse", b"eval_expression", b"", b"step"];
    let line = id as i32 * 3 + 1;
    let frame = Frame::new(b"fw/interp.tl", FUNCTIONS[id as usize % 5]);
    let frame =
        if id % 7 == 0 { frame } else { frame.at(Location { lineno: line, end_lineno: line + 1, col: 2, end_col: 8 }) };
    Frame { opcode: (id % 4 == 0).then_some(id as u8), ..frame }
}

/// `n` samples: two threads, stacks that repeat (REPEAT runs), grow and change over `IDS`
/// ids, times that go back once.
fn workload(n: u64) -> Vec<(Taken, Vec<u32>)> {
    (0..n)
        .map(|i| {
            let depth = 1 + (i / 4 % 9) as usize;
            let ids = (0..depth as u32).map(|d| (d * 7 + (i as u32 / 16)) % IDS).collect();
            let ts = if i == n / 2 { 1_000 } else { 50_000 + i * 100 };
            (
                Taken {
                    timestamp_us: ts,
                    interpreter_id: 0,
                    thread_id: 1 + (i % 2) * (i / 8 % 2),
                    status: (i % 3) as u8,
                },
                ids,
            )
        })
        .collect()
}

fn config() -> WriterConfig {
    WriterConfig::new(50_000, 100)
}

/// The stream of `work`, `dropped` samples counted lost before the writer.
fn stream<E: Endianity>(endian: E, work: &[(Taken, Vec<u32>)], dropped: u64) -> Vec<u8> {
    let (mut buffer, mut sent) = ([0u8; 160], [0u32; ids_words(IDS as usize)]);
    let mut w = StreamWriter::with_endian(Link::default(), &mut buffer, &mut sent, config(), endian).unwrap();
    for (t, ids) in work {
        w.write_sample(*t, ids, frame_of).unwrap();
    }
    w.set_dropped_upstream(dropped);
    assert_eq!(w.finish().unwrap(), work.len() as u64);
    w.into_inner().sent
}

/// What a `Writer` makes of `work`: frames interned as first used, the stats of `counts`
/// (dropped, refused) when given.
fn file<E: Endianity>(endian: E, work: &[(Taken, Vec<u32>)], counts: Option<(u64, u64)>) -> Vec<u8> {
    let mut storage = VecWriterStorage::growing(usize::MAX, CPYTHON_RLE_BUDGET);
    let mut w = Writer::with_endian(VecSink::new(), storage.storage(), config(), endian).unwrap();
    let mut interned: HashMap<u32, FrameId> = HashMap::new();
    for (t, ids) in work {
        let stack: Vec<FrameId> = ids
            .iter()
            .map(|&id| *interned.entry(id).or_insert_with(|| w.intern_frame(frame_of(id)).unwrap()))
            .collect();
        w.write_thread_sample_ids(t.timestamp_us, t.interpreter_id, t.thread_id, t.status, &stack).unwrap();
    }
    if let Some((dropped, refused)) = counts {
        let last = work.last().map(|(t, _)| t.timestamp_us);
        let stats = Stats::of_counts(config().start_time_us, last, work.len() as u64, refused, dropped);
        w.set_stats(stats).unwrap();
    }
    w.finish().unwrap();
    w.into_inner().into_inner()
}

type Read = (u64, u64, u8, Vec<Frame<'static>>);

/// Samples by thread, in order (a file holds each thread's in order; across threads the
/// writer's REPEAT runs put them in another).
fn by_thread(samples: Vec<Read>) -> BTreeMap<u64, Vec<Read>> {
    let mut threads: BTreeMap<u64, Vec<Read>> = BTreeMap::new();
    for s in samples {
        threads.entry(s.0).or_default().push(s);
    }
    threads
}

/// Each sample of a file: thread, time, status and frames innermost first.
fn samples_of(file: &[u8]) -> (BTreeMap<u64, Vec<Read>>, Option<Stats>) {
    let cap = ReaderCapacity { string_bytes: 1 << 14, strings: 256, frames: 256, threads: 8, read_buffer: 4096 };
    let mut storage = VecReaderStorage::new(cap).unwrap();
    let mut reader = Reader::open(Cursor::new(file), storage.storage()).unwrap();
    let names: HashMap<(Vec<u8>, Vec<u8>), Frame<'static>> =
        (0..IDS).map(frame_of).map(|f| ((f.filename.to_vec(), f.funcname.to_vec()), f)).collect();
    let mut out = vec![];
    while let Some(s) = reader.next_sample().unwrap() {
        let frames = s
            .frames()
            .map(|f| {
                let named = names[&(f.filename.to_vec(), f.funcname.to_vec())];
                Frame { location: f.location, opcode: f.opcode, ..named }
            })
            .collect();
        out.push((s.thread_id, s.timestamp_us, s.status, frames));
    }
    let stats = reader.metadata().stats;
    (by_thread(out), stats)
}

/// Asserts `read` is `want`, naming the first sample that differs.
#[track_caller]
fn assert_samples(read: &BTreeMap<u64, Vec<Read>>, want: &BTreeMap<u64, Vec<Read>>, what: &str) {
    for (thread, samples) in want {
        let got = read.get(thread).map_or(&[][..], Vec::as_slice);
        if let Some(i) = (0..samples.len().max(got.len())).find(|&i| got.get(i) != samples.get(i)) {
            panic!("{what}: thread {thread}, sample {i}: {:?} read, {:?} due", got.get(i), samples.get(i));
        }
    }
    assert_eq!(read.len(), want.len(), "{what}: threads");
}

fn expected(work: &[(Taken, Vec<u32>)]) -> BTreeMap<u64, Vec<Read>> {
    let samples = work
        .iter()
        .map(|(t, ids)| {
            let frames =
                ids.iter().map(|&id| frame_of(id)).map(|f| Frame { opcode: f.opcode.filter(|&o| o != 255), ..f });
            (t.thread_id, t.timestamp_us, t.status, frames.collect())
        })
        .collect();
    by_thread(samples)
}

#[test]
fn a_complete_stream_is_the_writers_file_in_either_byte_order() {
    let work = workload(3_000);
    for dropped in [0, 25] {
        let little = receive(&stream(LittleEndian, &work, dropped)).unwrap();
        assert_eq!(little.salvage, None);
        assert!(little.file == file(LittleEndian, &work, Some((dropped, 0))), "little-endian, {dropped} dropped");
        let big = receive(&stream(BigEndian, &work, dropped)).unwrap();
        assert!(big.file == file(BigEndian, &work, Some((dropped, 0))), "big-endian, {dropped} dropped");
        let (read, stats) = samples_of(&big.file);
        assert_samples(&read, &expected(&work), "big-endian");
        assert_eq!(stats.and_then(|s| s.missed_samples), Some(dropped as f64 * 100.0 / (3_000 + dropped) as f64));
    }
}

#[test]
fn a_stream_cut_at_any_byte_keeps_every_sample_of_its_whole_frames() {
    let work = workload(200);
    for (name, capture) in [("little", stream(LittleEndian, &work, 0)), ("big", stream(BigEndian, &work, 0))] {
        let mut kept_before = 0;
        for cut in 0..capture.len() {
            let received = match receive(&capture[..cut]) {
                Ok(received) => received,
                // Before the header's frame is whole, there is nothing to write a file from.
                Err(ReceiveError::NoEnd { frames }) if frames < 2 => continue,
                Err(e) => panic!("{name}: cut at {cut}: {e}"),
            };
            let salvage = received.salvage.expect("a cut stream is salvaged");
            let kept = salvage.samples as usize;
            let (read, _) = samples_of(&received.file);
            assert_samples(&read, &expected(&work[..kept]), &format!("{name}: cut at {cut}"));
            assert!(kept >= kept_before, "{name}: cut at {cut} keeps {kept}, fewer than {kept_before}");
            kept_before = kept;
        }
        // The last cut (before End's last byte) keeps every sample.
        assert_eq!(kept_before, work.len(), "{name}");
    }
}

#[test]
fn a_byte_flipped_or_cut_out_is_refused_or_changes_nothing() {
    let work = workload(150);
    for (endian, capture) in [("little", stream(LittleEndian, &work, 3)), ("big", stream(BigEndian, &work, 3))] {
        let whole = receive(&capture).unwrap().file;
        let mut refused = 0;
        for at in 0..capture.len() {
            let mut flipped = capture.clone();
            flipped[at] ^= 0x10;
            let mut cut = capture.clone();
            cut.remove(at);
            for (how, damaged) in [("flipped", flipped), ("cut out", cut)] {
                match receive(&damaged) {
                    Ok(received) => assert!(
                        received.file == whole,
                        "{endian}: byte {at} of {} {how}: another file ({:?})",
                        capture.len(),
                        received.salvage
                    ),
                    Err(e) => {
                        assert!(e.to_string().contains("offset") || matches!(e, ReceiveError::NoEnd { .. }), "{e}");
                        refused += 1;
                    }
                }
            }
        }
        assert!(refused > capture.len(), "{endian}: {refused} of {} refused", 2 * capture.len());
    }
}

#[test]
fn a_frame_missing_from_a_cut_stream_is_refused() {
    // Without its End, nothing else counts the samples: the sequence numbers must tell.
    let capture = stream(LittleEndian, &workload(300), 0);
    let ends: Vec<usize> = capture.iter().enumerate().filter(|&(_, &b)| b == 0).map(|(i, _)| i + 1).collect();
    let cut = &capture[..ends[ends.len() - 2]];
    assert!(receive(cut).unwrap().salvage.is_some());
    for k in 2..ends.len() - 2 {
        let missing = [&cut[..ends[k - 1]], &cut[ends[k]..]].concat();
        match receive(&missing) {
            Err(ReceiveError::Stream { why: StreamError::Gap { expected, got }, .. }) => {
                assert_eq!((expected, got), (k as u32, k as u32 + 1), "frame {k}")
            }
            other => panic!("frame {k} missing: {:?}", other.map(|r| r.salvage)),
        }
    }
}

#[test]
fn an_end_that_counts_other_samples_is_refused() {
    let work = workload(300);
    let capture = stream(LittleEndian, &work, 0);
    let ends: Vec<usize> = capture.iter().enumerate().filter(|&(_, &b)| b == 0).map(|(i, _)| i + 1).collect();
    let frames = ends.len() as u8;
    // End (kind 3) as the stream's last frame, saying `samples`: seq, kind, varint, CRC, COBS.
    let end = |samples: u16| {
        let mut covered = vec![frames - 1, 3, (samples & 0x7f) as u8 | 0x80, (samples >> 7) as u8];
        covered.extend_from_slice(&tachyon_core::transport::crc32(&covered).to_le_bytes());
        assert!(!covered.contains(&0));
        [&[covered.len() as u8 + 1][..], &covered, &[0]].concat()
    };
    let with_end = |samples| [&capture[..ends[ends.len() - 2]], &end(samples)[..]].concat();
    assert!(with_end(300) == capture, "the End frame built here is the writer's");
    match receive(&with_end(301)) {
        Err(ReceiveError::Stream { why: StreamError::Length { said: 301, made: 300 }, .. }) => {}
        other => panic!("{:?}", other.map(|r| r.salvage)),
    }
}

#[test]
fn a_failing_link_loses_only_the_samples_the_writer_counts_dropped() {
    let work = workload(1_500);
    for fail_every in [7, 23, 101] {
        let (mut buffer, mut sent) = ([0u8; 120], [0u32; ids_words(IDS as usize)]);
        let mut w = StreamWriter::new(Link::default(), &mut buffer, &mut sent, config()).unwrap();
        // From here on, every `fail_every`th write to the link fails halfway.
        w.get_mut().fail_every = Some(fail_every);
        // Samples not yet known to have gone out; those a failure names are the newest.
        let (mut pending, mut kept, mut failures): (Vec<usize>, Vec<usize>, u32) = (vec![], vec![], 0);
        let mut confirmed = 0;
        for (i, (t, ids)) in work.iter().enumerate() {
            pending.push(i);
            let result = w.write_sample(*t, ids, frame_of);
            let went = (w.samples() - confirmed) as usize;
            kept.extend(pending.drain(..went));
            confirmed = w.samples();
            match result {
                Ok(()) => {}
                Err(WriteError::Sink { dropped, .. }) => {
                    pending.truncate(pending.len() - dropped as usize);
                    failures += 1;
                }
                Err(e) => panic!("{e}"),
            }
        }
        let finished = loop {
            match w.finish() {
                Ok(n) => break n,
                Err(WriteError::Sink { dropped, .. }) => pending.truncate(pending.len() - dropped as usize),
                Err(e) => panic!("{e}"),
            }
        };
        kept.append(&mut pending);
        assert_eq!(finished as usize, kept.len());
        assert!(failures > 0, "{fail_every}: the link never failed");
        let dropped = w.dropped();
        assert_eq!(dropped as usize, work.len() - kept.len());
        let capture = w.into_inner().sent;
        let received = receive(&capture).unwrap_or_else(|e| panic!("{fail_every}: {e}"));
        assert_eq!(received.salvage, None);
        let kept_work: Vec<_> = kept.iter().map(|&i| work[i].clone()).collect();
        let (read, stats) = samples_of(&received.file);
        assert_samples(&read, &expected(&kept_work), &format!("failing every {fail_every}"));
        // CPython's meanings, by hand: seconds from the start to the last sample kept, samples
        // a second, no refusals, the lost share of all taken.
        let stats = stats.expect("the stream's counts are the file's stats");
        let (kept_n, last) = (kept.len() as f64, kept_work.last().unwrap().0.timestamp_us);
        let duration = (last - config().start_time_us) as f64 / 1e6;
        assert_eq!(stats.duration_sec, duration, "failing every {fail_every}");
        assert_eq!(stats.sample_rate, kept_n / duration, "failing every {fail_every}");
        assert_eq!(stats.error_rate, Some(0.0), "failing every {fail_every}");
        assert_eq!(
            stats.missed_samples,
            Some(dropped as f64 * 100.0 / work.len() as f64),
            "failing every {fail_every}"
        );
    }
}
