//! A journaled stream (`JournalWriter`): complete, it is the file a seekable writer makes for
//! the same calls; cut anywhere, `receive` rebuilds a valid file holding exactly the samples
//! whose records arrived whole — at least every sample before the last flush — and says
//! what was cut; damage before the tail is still refused.

use tachyon::memory::VecSink;
use tachyon::tachyon::receive::{receive, ReceiveError};
use tachyon_core::capture::Taken;
use tachyon_core::io::Cursor;
use tachyon_core::storage::{ReaderCapacity, VecReaderStorage, VecWriterStorage, WriterCapacity};
use tachyon_core::transport::{FlushPolicy, JournalWriter};
use tachyon_core::{Frame, Location, Reader, Stats, Writer, WriterConfig};

fn storage() -> VecWriterStorage {
    VecWriterStorage::new(WriterCapacity {
        string_bytes: 1 << 14,
        strings: 256,
        frames: 256,
        threads: 8,
        rle_budget: 16384,
    })
    .unwrap()
}

const FLUSH_EVERY: u64 = 40;
const SAMPLES: u64 = 400;

/// Sample `i`: three threads, stacks that change, repeat and grow, new functions (and so
/// new strings and frames) appearing all along, one long file name.
fn sample(i: u64, names: &[Vec<u8>]) -> (Taken, Vec<Frame<'_>>) {
    let at = |line| Location { lineno: line, end_lineno: line, col: 0, end_col: 4 };
    let depth = 1 + (i / 3 % 6) as usize;
    let stack = (0..depth)
        .map(|d| Frame::new(&names[0], &names[1 + (i as usize / 50 + d) % (names.len() - 1)]).at(at(d as i32 + 1)))
        .collect();
    (Taken { timestamp_us: 10_000 + i * 250, interpreter_id: 0, thread_id: 100 + i % 3, status: (i % 2) as u8 }, stack)
}

fn names() -> Vec<Vec<u8>> {
    let mut names = vec![[b"src/".repeat(100), b"engine.lua".to_vec()].concat()];
    names.extend((0..20).map(|f| format!("function_{f}").into_bytes()));
    names
}

/// The file a seekable writer makes for the same calls, and the journaled stream.
fn file_and_stream() -> (Vec<u8>, Vec<u8>) {
    let names = names();
    let config = WriterConfig::new(10_000, 250);
    let mut s = storage();
    let mut w = Writer::new(VecSink::default(), s.storage(), config).unwrap();
    let mut js = storage();
    let mut scratch = [0u8; 256];
    let policy = FlushPolicy { every_samples: FLUSH_EVERY, every_us: 0 };
    let mut j = JournalWriter::new(VecSink::new(), &mut scratch, js.storage(), config, policy).unwrap();
    let stats = Stats { duration_sec: 0.1, sample_rate: 4000.0, error_rate: Some(0.0), missed_samples: Some(1.5) };
    for i in 0..SAMPLES {
        let (t, stack) = sample(i, &names);
        w.write_thread_sample(t.timestamp_us, t.interpreter_id, t.thread_id, t.status, stack.iter().copied()).unwrap();
        j.write_thread_sample(t, stack).unwrap();
        if i == 100 {
            w.set_stats(stats).unwrap();
            j.set_stats(stats).unwrap();
        }
        if (i + 1) % FLUSH_EVERY == 0 {
            w.flush().unwrap();
        }
    }
    w.finish().unwrap();
    j.finish().unwrap();
    (w.into_inner().into_inner(), j.into_inner().into_inner())
}

/// Each sample of a file as (thread, timestamp, status, function names innermost first).
fn samples_of(file: &[u8]) -> Vec<(u64, u64, u8, Vec<Vec<u8>>)> {
    let cap = ReaderCapacity { string_bytes: 1 << 14, strings: 256, frames: 256, threads: 8, read_buffer: 4096 };
    let mut storage = VecReaderStorage::new(cap).unwrap();
    let mut reader = Reader::open(Cursor::new(file), storage.storage()).unwrap();
    let mut out = vec![];
    while let Some(s) = reader.next_sample().unwrap() {
        out.push((s.thread_id, s.timestamp_us, s.status, s.frames().map(|f| f.funcname.to_vec()).collect()));
    }
    out
}

#[test]
fn a_complete_journaled_stream_is_the_seekable_writers_file() {
    let (file, stream) = file_and_stream();
    let received = receive(&stream).unwrap();
    assert_eq!(received.salvage, None);
    assert!(received.file == file, "the journal changed the file");
    assert_eq!(samples_of(&file).len() as u64, SAMPLES);
}

#[test]
fn a_stream_cut_anywhere_keeps_every_sample_that_arrived_whole() {
    let (file, stream) = file_and_stream();
    let all = samples_of(&file);
    let mut last_kept = 0;
    let mut salvaged = 0;
    let mut cpython = ForCpython::new();
    // Every cut point through the stream (a few thousand): each rebuilt file reads, holds a
    // prefix of the samples, never fewer than a shorter cut kept.
    for cut in (1..stream.len()).step_by(7).chain([stream.len() - 1]) {
        let received = match receive(&stream[..cut]) {
            Ok(r) => r,
            // Before the journal's header arrived nothing can be rebuilt.
            Err(ReceiveError::NoEnd { .. }) if cut < 100 => continue,
            Err(e) => panic!("cut at {cut}: {e}"),
        };
        let salvage = received.salvage.expect("a cut stream is salvaged");
        let kept = samples_of(&received.file);
        assert_eq!(kept.len() as u64, salvage.samples, "cut at {cut}");
        cpython.keep(cut, salvage.samples, &received.file);
        assert_eq!(kept[..], all[..kept.len()], "cut at {cut}: not a prefix of the samples");
        assert!(kept.len() >= last_kept, "cut at {cut}: {} < {last_kept}", kept.len());
        last_kept = kept.len();
        salvaged += 1;
    }
    assert!(salvaged > 1000);
    // Cut just before `End`: everything but the stats written at finish is there.
    assert_eq!(last_kept as u64, SAMPLES);
}

#[test]
fn every_sample_before_a_flush_survives_a_cut_after_it() {
    let (_, stream) = file_and_stream();
    // Replay the stream frame by frame and note, after each, how many samples a cut there
    // keeps; a flush sends its samples within the frames that follow it, so the kept count
    // passes each multiple of FLUSH_EVERY.
    let ends: Vec<usize> = stream.iter().enumerate().filter(|(_, &b)| b == 0).map(|(i, _)| i + 1).collect();
    let kept: Vec<u64> =
        ends.iter().filter_map(|&end| receive(&stream[..end]).ok()?.salvage.map(|s| s.samples)).collect();
    for flushed in (FLUSH_EVERY..SAMPLES).step_by(FLUSH_EVERY as usize) {
        assert!(kept.contains(&flushed), "no cut keeps exactly the {flushed} samples of a flush: {kept:?}");
    }
}

#[test]
fn damage_before_the_tail_is_refused_and_a_plain_stream_says_it_has_no_journal() {
    let (_, stream) = file_and_stream();
    let mut damaged = stream.clone();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 0x40;
    if damaged[middle] == 0 {
        damaged[middle] = 1;
    }
    assert!(matches!(
        receive(&damaged[..damaged.len() - 10]),
        Err(ReceiveError::Frame { .. } | ReceiveError::Stream { .. })
    ));
    // A stream without a journal (the firmware's plain FramedSink) cut: refused, saying so.
    let mut s = storage();
    let mut scratch = [0u8; 256];
    let link = tachyon_core::transport::FramedSink::new(VecSink::new(), &mut scratch).unwrap();
    let mut w = Writer::new(link, s.storage(), WriterConfig::new(0, 100)).unwrap();
    for i in 0..50 {
        w.write_thread_sample(i, 0, 1, 0, [Frame::new(b"a", b"b")]).unwrap();
        w.flush().unwrap();
    }
    let plain = w.into_inner().into_inner().into_inner();
    let err = receive(&plain).unwrap_err();
    assert!(matches!(err, ReceiveError::NoJournal { .. }), "{err}");
    assert!(err.to_string().contains("no journal"), "{err}");
}

/// Where the stream's `Tables` frame starts and ends (its closing `0x00` included), and the
/// sample region's end it gives.
fn tables_frame(stream: &[u8]) -> (usize, usize, u64) {
    use tachyon_core::transport::{decode, Record};
    let mut start = 0;
    for piece in stream.split(|&b| b == 0) {
        let end = start + piece.len() + 1;
        let (mut bytes, mut scratch) = (piece.to_vec(), vec![0; piece.len()]);
        if let Ok(Record::Tables { offset }) = decode(&mut bytes, &mut scratch).map(|f| f.record) {
            return (start, end, offset);
        }
        start = end;
    }
    panic!("finish sends no Tables record");
}

#[test]
fn a_cut_at_every_byte_of_finish_salvages_the_complete_file() {
    let (file, stream) = file_and_stream();
    // `finish` begins with the journal's `Tables` record (the samples' end); the tables,
    // trailer, footer and header follow it as writes.
    let (tables_frame, tables_end, region_end) = tables_frame(&stream);
    assert!(region_end > 64 && (region_end as usize) < file.len());
    let all = samples_of(&file);
    // Before the `Tables` frame is whole the samples are all there, and no table bytes yet;
    // from it on, the file salvaged is the complete file, byte for byte, however much of
    // the tables arrived.
    let mut cpython = ForCpython::new();
    for cut in tables_frame..stream.len() {
        let received = receive(&stream[..cut]).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        let salvage = received.salvage.unwrap_or_else(|| panic!("cut at {cut}: not salvaged"));
        assert_eq!(salvage.samples, SAMPLES, "cut at {cut}");
        assert_eq!(samples_of(&received.file), all, "cut at {cut}");
        if cut >= tables_end {
            assert!(received.file == file, "cut at {cut} of {}: not the complete file", stream.len());
        }
        cpython.keep(cut, SAMPLES, &received.file);
    }
}

/// Every distinct salvaged file, kept for CPython when scripts/capture.sh sets
/// `TACHYON_SALVAGE_OUT` (as `cut-CUT-SAMPLES.pyb`; CPython checks each against the complete
/// file's samples).
struct ForCpython {
    out: Option<std::path::PathBuf>,
    seen: std::collections::HashSet<Vec<u8>>,
}

impl ForCpython {
    fn new() -> Self {
        let out = std::env::var_os("TACHYON_SALVAGE_OUT").map(std::path::PathBuf::from);
        if let Some(out) = &out {
            std::fs::write(out.join("complete.pyb"), file_and_stream().0).unwrap();
        }
        ForCpython { out, seen: Default::default() }
    }

    fn keep(&mut self, cut: usize, samples: u64, file: &[u8]) {
        if let Some(out) = &self.out {
            if self.seen.insert(file.to_vec()) {
                std::fs::write(out.join(format!("cut-{cut}-{samples}.pyb")), file).unwrap();
            }
        }
    }
}

#[test]
fn table_bytes_that_look_like_a_sample_record_are_not_read_as_one() {
    // The string table begins with the first string's length (1 byte) and bytes: this file
    // name makes its first 18 bytes a whole FULL record (13-byte prefix, encoding 1,
    // timestamp delta 5, status 2, depth 1, frame id 1), which a salvage that scanned on
    // past the samples read as one more sample.
    let crafted = b"ABCDEFGHIJK\x01\x05\x02\x01\x01 and the rest of the name.py".to_vec();
    let config = WriterConfig::new(10_000, 250);
    let mut js = storage();
    let mut scratch = [0u8; 256];
    let mut j = JournalWriter::new(VecSink::new(), &mut scratch, js.storage(), config, FlushPolicy::default()).unwrap();
    for i in 0..10u64 {
        let stack = [Frame::new(&crafted, b"work"), Frame::new(&crafted, b"main")];
        j.write_thread_sample(Taken { timestamp_us: 10_000 + i * 250, thread_id: 7, ..Taken::default() }, stack)
            .unwrap();
    }
    j.finish().unwrap();
    let stream = j.into_inner().into_inner();
    let file = receive(&stream).unwrap().file;
    assert_eq!(samples_of(&file).len(), 10);
    let (_, tables_end, _) = tables_frame(&stream);
    for cut in tables_end..stream.len() {
        let received = receive(&stream[..cut]).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        assert_eq!(received.salvage.map(|s| s.samples), Some(10), "cut at {cut}");
        assert!(received.file == file, "cut at {cut}: not the complete file");
    }
}

#[test]
fn a_finished_journal_file_is_replaced_by_the_tachyon_file_in_place() {
    use tachyon::tachyon::receive::receive_in_place;
    use tachyon_core::FileKind;
    let (file, stream) = file_and_stream();
    let dir = std::env::temp_dir().join(format!("tachyon-salvage-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("run.pyb");
    std::fs::write(&path, &stream).unwrap();
    assert_ne!(FileKind::detect(&stream), FileKind::Tachyon);
    assert_eq!(receive_in_place(&path).unwrap(), file.len() as u64);
    assert!(std::fs::read(&path).unwrap() == file, "not the seekable writer's file");
    // Again: already the file, left as it is.
    assert_eq!(receive_in_place(&path).unwrap(), file.len() as u64);
    assert!(std::fs::read(&path).unwrap() == file);
    // A cut stream is left as it is, with the reason; nothing is left beside it.
    std::fs::write(&path, &stream[..stream.len() / 2]).unwrap();
    let e = receive_in_place(&path).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
    assert!(e.to_string().contains("before the stream's End"), "{e}");
    assert!(std::fs::read(&path).unwrap() == stream[..stream.len() / 2]);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A stream received as it grows (`Growing`, what `tachyon top` follows), one byte more at
/// each step: the records handed out so far are, byte for byte, the sample region of the file
/// `receive` salvages from the same bytes, and its tables file names the same strings and
/// frames (but a string still being sent).
#[test]
fn a_stream_received_as_it_grows_hands_out_what_a_salvage_of_it_keeps() {
    use tachyon::tachyon::receive::Growing;
    use tachyon_core::reader::Metadata;
    let (_, stream) = file_and_stream();
    let mut growing = Growing::new();
    let mut records = Vec::new();
    let mut tables = None;
    let mut compared = 0;
    for cut in 1..=stream.len() {
        growing.feed(&stream[cut - 1..cut]).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        if let Some(t) = growing.tables().unwrap() {
            tables = Some(t);
        }
        records.extend(growing.take_records().unwrap());
        assert_eq!(growing.taken(), cut as u64);
        let received = match receive(&stream[..cut]) {
            Ok(r) => r,
            Err(ReceiveError::NoEnd { .. }) if cut < 100 => {
                assert!(records.is_empty() && tables.is_none(), "cut at {cut}");
                continue;
            }
            Err(e) => panic!("cut at {cut}: {e}"),
        };
        let meta = Metadata::read(&mut Cursor::new(&received.file[..])).unwrap();
        let region = &received.file[64..meta.header.string_table_offset as usize];
        assert!(records == region, "cut at {cut}: {} bytes handed out, {} salvaged", records.len(), region.len());
        assert_eq!(growing.samples(), meta.header.sample_count, "cut at {cut}");
        let t = tables.as_ref().expect("tables once the header arrived");
        let t_meta = Metadata::read(&mut Cursor::new(&t[..])).unwrap();
        assert_eq!(t_meta.footer.frame_count, meta.footer.frame_count, "cut at {cut}");
        let strings = meta.footer.string_count;
        assert!((strings.saturating_sub(1)..=strings).contains(&t_meta.footer.string_count), "cut at {cut}");
        compared += 1;
    }
    assert!(compared > 5000, "{compared}");
    assert!(growing.is_complete());
    assert_eq!(growing.samples(), SAMPLES);
}

/// `tachyon top`'s follower on a journaled stream written a few bytes at a time (cut inside
/// frames, records and long strings): each refresh reads only the bytes added, and counts
/// what counting the file from nothing counts.
#[test]
fn top_follows_a_growing_stream_reading_only_what_it_gained() {
    use std::io::Write as _;
    use tachyon::top::{Counts, Follow, SortBy};
    let (_, stream) = file_and_stream();
    let path = std::env::temp_dir().join(format!("tachyon-follow-stream-{}.pyb", std::process::id()));
    let mut out = std::fs::File::create(&path).unwrap();
    let mut follow = Follow::new(&path, None);
    let mut two = Follow::new(&path, Some(101));
    let (mut at, mut step, mut refreshed, mut read_to) = (0, 1, 0, 0);
    while at < stream.len() {
        let next = (at + step).min(stream.len());
        out.write_all(&stream[at..next]).unwrap();
        at = next;
        step = step % 97 + 13;
        let counts = match follow.refresh() {
            Ok(counts) => counts,
            // Before the stream's first frame ends it is not a stream yet, nor a profile.
            Err(e) => {
                assert!(at < 100, "at {at}: {e}");
                two = Follow::new(&path, Some(101));
                continue;
            }
        };
        // What was added since the last refresh that read (one that failed read nothing).
        assert_eq!(follow.bytes_read(), (at - read_to) as u64, "at {at}");
        read_to = at;
        for (f, thread) in [(&counts, None), (&two.refresh().unwrap(), Some(101))] {
            let mut afresh = Counts::new(thread);
            match afresh.add_path(&path) {
                Ok(()) => assert_eq!(f.json(SortBy::Name), afresh.json(SortBy::Name), "at {at}, thread {thread:?}"),
                // Before the journal's header arrived: nothing to count yet.
                Err(_) => assert!(at < 100 && f.samples() == 0, "at {at}"),
            }
        }
        refreshed += 1;
    }
    assert!(refreshed > 100);
    assert_eq!(follow.refresh().unwrap().samples(), SAMPLES);
    assert_eq!(follow.bytes_read(), 0, "nothing new");
    std::fs::remove_file(&path).unwrap();
}
