//! Records and runs: `Reader::next_item` yields the samples `next_sample` yields (which the
//! vector and CPython tests check against CPython), whatever the window size and however a
//! run is consumed, with the same first error on every truncated or corrupted vector; a
//! caller's region source gives what the built-in decompression gives; thread storage
//! follows what the threads hold.

use crate::common::{FileBuilder, SMALL_READER};
use tachyon_core::io::Cursor;
use tachyon_core::reader::Record;
use tachyon_core::storage::{ReaderCapacity, VecReaderStorage};
use tachyon_core::{LittleEndian, ReadError, Reader};
use tachyon_test_kit::fixtures;

/// What a decoding saw: every sample (timestamp, interpreter, thread, status, stack) in the
/// order it came, and how it ended.
#[derive(Debug, Clone, PartialEq)]
struct Trace {
    samples: Vec<(u64, u32, u64, u8, Vec<u32>)>,
    end: Result<u64, String>,
}

/// How to walk the records.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Walk {
    /// `next_sample` only.
    Samples,
    /// `next_item`, every run read to its end.
    Records,
    /// `next_item`, one entry of each run read, the rest through `next_sample`.
    Mixed,
    /// `next_item`, runs dropped unread (their samples are then missing from the trace,
    /// but the decoded count and the first error must not change).
    DropRuns,
    /// `check_to_end`, which keeps no stacks: no samples in the trace, the same count and
    /// first error.
    Check,
}

/// A reader over `file` with a window of `window` bytes, through the built-in decompressor
/// or (`external`) a `ZstdRegion` handed in as a region source.
fn decode(file: &[u8], window: usize, walk: Walk, external: bool) -> Trace {
    use tachyon_core::compression::{decompressor_workspace_bytes, workspace_words, Decompressor};
    use tachyon_core::reader::{Metadata, ZstdRegion, DEFAULT_MAX_DECOMPRESSED};
    let cap = ReaderCapacity { read_buffer: window, ..SMALL_READER };
    let mut storage = VecReaderStorage::new(cap).unwrap();
    let compressed = Metadata::read(&mut Cursor::new(file)).is_ok_and(|m| m.is_compressed());
    let mut workspace = vec![0u64; if compressed { workspace_words(decompressor_workspace_bytes(21)) } else { 0 }];
    // A small input buffer, so that compressed bytes arrive in many refills.
    let mut input = vec![0u8; 57];
    let dec = Decompressor::new(&mut workspace, &mut input, 21);
    let mut trace = Trace { samples: Vec::new(), end: Ok(0) };
    let mut region;
    let opened = if external {
        let meta = match Metadata::read(&mut Cursor::new(file)) {
            Ok(m) => m,
            Err(e) => {
                trace.end = Err(format!("{e:?}"));
                return trace;
            }
        };
        region = ZstdRegion::new(Cursor::new(file), &meta, dec.unwrap(), DEFAULT_MAX_DECOMPRESSED).unwrap();
        Reader::open_with_region(Cursor::new(file), storage.storage(), &mut region)
    } else if let Some(dec) = dec {
        Reader::open_zstd(Cursor::new(file), storage.storage(), dec)
    } else {
        Reader::open(Cursor::new(file), storage.storage())
    };
    match opened {
        Ok(mut reader) => {
            trace.end = walk_all(&mut reader, walk, &mut trace.samples).map_err(|e| format!("{e:?}"));
        }
        Err(e) => trace.end = Err(format!("{e:?}")),
    }
    trace
}

fn walk_all<R: embedded_io::Read + embedded_io::Seek>(
    reader: &mut Reader<'_, R>,
    walk: Walk,
    out: &mut Vec<(u64, u32, u64, u8, Vec<u32>)>,
) -> Result<u64, ReadError<R::Error>> {
    if walk == Walk::Check {
        return reader.check_to_end(|_| {});
    }
    if walk == Walk::Samples {
        while let Some(s) = reader.next_sample()? {
            out.push((s.timestamp_us, s.interpreter_id, s.thread_id, s.status, s.stack.to_vec()));
        }
        return Ok(reader.samples_decoded());
    }
    loop {
        let mut left = 0;
        match reader.next_item()? {
            None => return Ok(reader.samples_decoded()),
            Some(Record::Sample(s)) => {
                out.push((s.timestamp_us, s.interpreter_id, s.thread_id, s.status, s.stack.to_vec()))
            }
            Some(Record::Repeat(mut run)) => {
                assert_eq!(run.remaining(), run.count);
                let stack = run.stack.to_vec();
                let (iid, tid) = (run.interpreter_id, run.thread_id);
                let take = match walk {
                    Walk::Records => usize::MAX,
                    Walk::Mixed => 1,
                    _ => 0,
                };
                for entry in run.by_ref().take(take) {
                    let e = entry?;
                    out.push((e.timestamp_us, iid, tid, e.status, stack.clone()));
                }
                if walk == Walk::Mixed {
                    left = run.remaining();
                }
            }
        }
        for _ in 0..left {
            let s = reader.next_sample()?.expect("the run's remaining samples");
            out.push((s.timestamp_us, s.interpreter_id, s.thread_id, s.status, s.stack.to_vec()));
        }
    }
}

fn vectors() -> Vec<(String, Vec<u8>)> {
    let files = fixtures::files(&fixtures::vectors("cpython-3.15.2"), ".bin");
    assert_eq!(files.len(), 28);
    files.iter().map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), fixtures::read(p))).collect()
}

/// Two decodings of a compressed file through different windows agree: the same samples if
/// both succeed. On corrupt frames they can differ, and not through our rules: libzstd checks
/// some things (a frame's declared content size, say) only when the output buffer can hold
/// the whole frame, and the window decides how much it offers; a read-ahead can also meet the
/// error before samples a smaller window still yields. Same window, same result, though.
fn assert_agree(got: &Trace, want: &Trace, what: &str) {
    if got.end.is_ok() && want.end.is_ok() {
        assert_eq!(got, want, "{what}");
    }
}

/// Every way of reading `file` agrees with `next_sample` through the same window, and with
/// a large window where that can be promised (see [`assert_agree`]).
fn all_ways_agree(name: &str, file: &[u8]) {
    let reference = decode(file, 1 << 16, Walk::Samples, false);
    let compressed = tachyon_core::reader::Metadata::read(&mut Cursor::new(file)).is_ok_and(|m| m.is_compressed());
    for window in [64, 1 << 16] {
        let same_window =
            if window == 1 << 16 { reference.clone() } else { decode(file, window, Walk::Samples, false) };
        if compressed {
            assert_agree(&same_window, &reference, &format!("{name}: window {window}"));
        } else {
            assert_eq!(same_window, reference, "{name}: window {window}");
        }
        for walk in [Walk::Records, Walk::Mixed] {
            assert_eq!(decode(file, window, walk, false), same_window, "{name}: window {window}, {walk:?}");
        }
        let dropped = decode(file, window, Walk::DropRuns, false);
        assert_eq!(dropped.end, same_window.end, "{name}: window {window}, runs dropped");
        let checked = decode(file, window, Walk::Check, false);
        assert_eq!(checked.end, same_window.end, "{name}: window {window}, checked without stacks");
        if compressed {
            for walk in [Walk::Samples, Walk::Records] {
                let got = decode(file, window, walk, true);
                assert_eq!(got, same_window, "{name}: window {window}, external region, {walk:?}");
            }
        }
    }
}

#[test]
fn records_and_runs_give_the_samples_of_next_sample() {
    for (name, file) in vectors() {
        let reference = decode(&file, 1 << 16, Walk::Samples, false);
        assert!(reference.end.is_ok(), "{name}: {:?}", reference.end);
        all_ways_agree(&name, &file);
    }
}

/// Every truncation and a corruption of every byte (alternating a low-bit and a
/// continuation-bit flip) of every vector. Under qemu-user, where the big-endian targets run
/// this suite about twenty times slower, every ninth offset is taken instead; the native run
/// covers them all.
#[test]
fn same_first_error_on_every_truncation_and_corruption() {
    let stride = if cfg!(target_endian = "big") { 9 } else { 1 };
    for (name, file) in vectors() {
        for len in (0..file.len()).step_by(stride) {
            all_ways_agree(&format!("{name}[..{len}]"), &file[..len]);
        }
        for at in (0..file.len()).step_by(stride) {
            let flip = if at % 2 == 0 { 0x01 } else { 0x80 };
            let mut bad = file.clone();
            bad[at] ^= flip;
            all_ways_agree(&format!("{name} ^{flip:#x}@{at}"), &bad);
        }
    }
}

/// A valid file where each of `threads` threads has one sample of a two-frame stack, as a
/// server with short-lived threads gives; CPython reads it.
fn many_threads(threads: u64) -> Vec<u8> {
    let mut b = FileBuilder::new(LittleEndian);
    for tid in 0..threads {
        // FULL, delta 0, status 0, depth 2, frames (tid % 4, 0).
        b.prefix(tid, 0, 1).bytes(&[0, 0, 2, (tid % 4) as u8, 0]);
    }
    b.sample_count = threads;
    b.thread_count = threads as u32;
    b.build()
}

#[test]
#[cfg_attr(
    target_endian = "big",
    ignore = "storage growth, the same on every host: run on the host (4 s under qemu-s390x)"
)]
fn a_million_threads_decode_in_memory_that_follows_their_stacks() {
    const THREADS: u64 = 1_000_000;
    let file = many_threads(THREADS);
    let cap = ReaderCapacity { threads: usize::MAX, ..SMALL_READER };
    let mut storage = VecReaderStorage::new(cap).unwrap();
    {
        let mut reader = Reader::open(Cursor::new(&file[..]), storage.storage()).unwrap();
        let mut n = 0u64;
        while let Some(Record::Sample(s)) = reader.next_item().unwrap() {
            assert_eq!((s.thread_id, s.stack), (n, &[(n % 4) as u32, 0][..]));
            n += 1;
        }
        assert_eq!((n, reader.threads_seen()), (THREADS, THREADS as usize));
    }
    let per_thread = storage.thread_bytes() as f64 / THREADS as f64;
    eprintln!("thread table: {} bytes, {per_thread:.0} per thread", storage.thread_bytes());
    // Entry 28 B, index 8–16 B, a 2-id chunk 8 B, and at most doubling slack (46 measured).
    assert!(per_thread <= 64.0, "{per_thread} bytes per thread");

    // Read to the end, the thread table is given back; the reader then reads nothing more.
    {
        let mut reader = Reader::open(Cursor::new(&file[..]), storage.storage()).unwrap();
        while reader.next_item().unwrap().is_some() {}
        reader.release_threads();
        assert_eq!(reader.threads_seen(), THREADS as usize);
        assert!(reader.next_item().unwrap().is_none());
    }
    assert_eq!(storage.thread_bytes(), 0);

    // Bounded storage still refuses more threads than it allows, with a typed error.
    let mut small = VecReaderStorage::new(ReaderCapacity { threads: 1000, ..SMALL_READER }).unwrap();
    let mut reader = Reader::open(Cursor::new(&file[..]), small.storage()).unwrap();
    let err = loop {
        match reader.next_item() {
            Ok(Some(_)) => {}
            Ok(None) => panic!("more threads than the storage allows"),
            Err(e) => break e,
        }
    };
    assert!(matches!(
        err,
        ReadError::Capacity { resource: tachyon_core::storage::Resource::Threads, capacity: 1000, .. }
    ));
}

#[test]
fn stacks_grow_and_shrink_through_every_chunk_size() {
    // One thread climbs to 256 frames one SUFFIX at a time while another alternates; then
    // the first pops back down with POP_PUSH and jumps with FULL. Expected stacks follow
    // the spec's rules on the record contents written here.
    let mut b = FileBuilder::new(LittleEndian);
    b.frames =
        (0..300).map(|i| tachyon_core::tables::FrameEntry { filename: 0, funcname: 1, ..b.frames[i % 4] }).collect();
    let mut expect: Vec<(u64, Vec<u32>)> = Vec::new();
    let mut climbing: Vec<u32> = Vec::new();
    for depth in 1..=256u32 {
        // SUFFIX: shared = current depth, push 1 (innermost first).
        b.prefix(1, 0, 2).varint(0).bytes(&[0]).varint(u64::from(depth - 1)).varint(1).varint(u64::from(depth));
        climbing.insert(0, depth);
        expect.push((1, climbing.clone()));
        let other = vec![depth % 7, 299];
        b.prefix(2, 0, 1).varint(0).bytes(&[0]).varint(2).varint(u64::from(depth % 7)).varint(299);
        expect.push((2, other));
    }
    // POP_PUSH 250 frames, push 2.
    b.prefix(1, 0, 3).varint(0).bytes(&[0]).varint(250).varint(2).varint(7).varint(8);
    climbing.drain(..250);
    climbing.splice(0..0, [7, 8]);
    expect.push((1, climbing.clone()));
    // FULL back to depth 3, then a REPEAT of it.
    b.prefix(1, 0, 1).varint(0).bytes(&[0]).varint(3).varint(5).varint(6).varint(9);
    expect.push((1, vec![5, 6, 9]));
    b.prefix(1, 0, 0).varint(2).bytes(&[0, 0, 0, 0]);
    expect.extend([(1, vec![5, 6, 9]), (1, vec![5, 6, 9])]);
    b.sample_count = expect.len() as u64;
    b.thread_count = 2;
    let file = b.build();
    let trace = decode(&file, 1 << 16, Walk::Records, false);
    assert_eq!(trace.end, Ok(expect.len() as u64));
    let got: Vec<(u64, Vec<u32>)> = trace.samples.into_iter().map(|s| (s.2, s.4)).collect();
    assert_eq!(got, expect);
    all_ways_agree("climb", &file);
}

#[test]
fn repeat_entries_of_every_length_and_status() {
    // Deltas of one, two, three and ten bytes in every order the decoder's paths meet them
    // (eight two-byte entries in a row, four three-byte ones, pairs of short ones, long ones
    // between), statuses with the high bit set, in runs of 1 to 40 entries and two of 3,000.
    let deltas = [5u64, 200, 1000, 127, 128, 16_383, 16_384, 2_000_000, u64::MAX, 0, 900, 901, 902, 903, 40];
    let mut b = FileBuilder::new(LittleEndian);
    b.start_time_us = 1000;
    let mut expect = Vec::new();
    let mut ts = 1000u64;
    let mut k = 0usize;
    let lengths: Vec<usize> = (1..=40).chain([3000, 3001]).collect();
    for (i, &n) in lengths.iter().enumerate() {
        b.prefix(7, 0, 0).varint(n as u64);
        for _ in 0..n {
            // Mostly three-byte entries (a 1 kHz sampler's) in even runs, mostly two-byte ones
            // (a 50 kHz sampler's) in odd runs, with the others mixed in.
            let delta = match (i % 2, k % 16) {
                (0, 0..=9) => 1000 + (k as u64 % 7),
                (1, 0..=12) => 20 + (k as u64 % 7),
                _ => deltas[k % deltas.len()],
            };
            let status = (k * 37 + i) as u8;
            b.varint(delta).bytes(&[status]);
            ts = ts.wrapping_add(delta);
            expect.push((ts, status));
            k += 1;
        }
    }
    // Then a FULL record of the same thread (delta 5, status 1, no frames), whose timestamp
    // is the runs' deltas summed, also when the runs are skipped unread.
    b.prefix(7, 0, 1).varint(5).bytes(&[1]).varint(0);
    ts = ts.wrapping_add(5);
    expect.push((ts, 1));
    b.sample_count = expect.len() as u64;
    let file = b.build();
    let trace = decode(&file, 1 << 16, Walk::Records, false);
    assert_eq!(trace.end, Ok(expect.len() as u64));
    let got: Vec<(u64, u8)> = trace.samples.iter().map(|s| (s.0, s.3)).collect();
    assert_eq!(got, expect);
    all_ways_agree("entries", &file);
    for window in [64, 1 << 16] {
        let skipped = decode(&file, window, Walk::DropRuns, false);
        let got: Vec<(u64, u8)> = skipped.samples.iter().map(|s| (s.0, s.3)).collect();
        assert_eq!(got, [(ts, 1)], "window {window}: the clock after runs skipped unread");
    }
    // Runs read in batches of every size give the same entries.
    for batch in [1usize, 3, 4, 7, 64] {
        let mut storage = VecReaderStorage::new(SMALL_READER).unwrap();
        let mut reader = Reader::open(Cursor::new(&file[..]), storage.storage()).unwrap();
        let mut got = Vec::new();
        let mut buf = vec![tachyon_core::RunEntry { timestamp_us: 0, status: 0 }; batch];
        while let Some(record) = reader.next_item().unwrap() {
            let mut run = match record {
                Record::Repeat(run) => run,
                Record::Sample(s) => {
                    got.push((s.timestamp_us, s.status));
                    continue;
                }
            };
            loop {
                let n = run.read_entries(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                got.extend(buf[..n].iter().map(|e| (e.timestamp_us, e.status)));
            }
        }
        assert_eq!(got, expect, "batches of {batch}");
    }
}

/// The bytes of a sample region up to `limit` (a record boundary), as a file still being
/// written has them: a growing reader's region source.
struct Grown<'a> {
    region: &'a [u8],
    pos: usize,
    limit: &'a std::cell::Cell<usize>,
}

impl tachyon_core::reader::RegionSource<tachyon_core::io::CursorError> for Grown<'_> {
    fn read_region(&mut self, dst: &mut [u8]) -> Result<usize, ReadError<tachyon_core::io::CursorError>> {
        let n = dst.len().min(self.limit.get() - self.pos);
        dst[..n].copy_from_slice(&self.region[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// A file read while it grows, a few records at a time (the region cut at record
/// boundaries, `Reader::open_growing`), gives the samples of the whole file read at once, in
/// the same order with the same stacks and timestamps; the tables read again between two
/// growths change nothing; a reload in the middle of a run is refused.
#[test]
fn a_growing_region_read_in_pieces_gives_the_samples_of_the_whole() {
    use tachyon_core::header::HEADER_SIZE;
    use tachyon_core::reader::Metadata;
    let mut checked = 0;
    for (name, file) in vectors() {
        let meta = Metadata::read(&mut Cursor::new(&file[..])).unwrap();
        if meta.is_compressed() {
            continue;
        }
        let reference = decode(&file, 1 << 16, Walk::Records, false);
        // Each record's end in the region, from a reader of the whole file.
        let mut storage = VecReaderStorage::new(SMALL_READER).unwrap();
        let mut reader = Reader::open(Cursor::new(&file[..]), storage.storage()).unwrap();
        let mut ends = Vec::new();
        while let Some(item) = reader.next_item().unwrap() {
            if let Record::Repeat(mut run) = item {
                tachyon_core::reader::Run::skip(&mut run).unwrap();
            }
            ends.push(reader.sample_region_bytes() as usize);
        }
        let region = &file[HEADER_SIZE..meta.header.string_table_offset as usize];
        assert_eq!(ends.last().copied().unwrap_or(0), region.len(), "{name}");
        for step in [1, 3, 1000] {
            let limit = std::cell::Cell::new(0);
            let mut grown = Grown { region, pos: 0, limit: &limit };
            let mut storage = VecReaderStorage::growing(64, 1 << 10);
            let mut reader = Reader::open_growing(Cursor::new(&file[..]), storage.storage(), &mut grown).unwrap();
            let mut samples = Vec::new();
            assert_eq!(walk_all(&mut reader, Walk::Records, &mut samples).unwrap(), 0, "{name}: nothing yet");
            for (i, end) in ends.iter().enumerate().skip(step - 1).step_by(step).chain([(ends.len(), &region.len())]) {
                limit.set(*end);
                walk_all(&mut reader, Walk::Records, &mut samples).unwrap();
                if i % 2 == 0 {
                    assert!(reader.reload_tables(Cursor::new(&file[..])).unwrap(), "{name}: reload at {end}");
                }
            }
            assert_eq!(Ok(reader.samples_decoded()), reference.end, "{name}: step {step}");
            assert_eq!(samples, reference.samples, "{name}: step {step}");
        }
        checked += 1;
    }
    assert!(checked >= 10, "{checked} raw vectors");

    // A reload while a run has entries left is refused, and the run goes on after it.
    let mut b = FileBuilder::new(LittleEndian);
    // FULL (delta 0, status 0, depth 1, frame 0), then REPEAT of 2 (delta 5 status 0, delta 5 status 1).
    b.prefix(1, 0, 1).bytes(&[0, 0, 1, 0]);
    b.prefix(1, 0, 0).bytes(&[2, 5, 0, 5, 1]);
    b.sample_count = 3;
    b.thread_count = 1;
    let file = b.build();
    let meta = Metadata::read(&mut Cursor::new(&file[..])).unwrap();
    let region = &file[HEADER_SIZE..meta.header.string_table_offset as usize];
    let limit = std::cell::Cell::new(region.len());
    let mut grown = Grown { region, pos: 0, limit: &limit };
    let mut storage = VecReaderStorage::growing(64, 4);
    let mut reader = Reader::open_growing(Cursor::new(&file[..]), storage.storage(), &mut grown).unwrap();
    assert!(matches!(reader.next_item().unwrap(), Some(Record::Sample(_))));
    match reader.next_item().unwrap() {
        Some(Record::Repeat(mut run)) => assert!(run.next_entry().unwrap().is_some()),
        _ => panic!("a run"),
    }
    assert!(!reader.reload_tables(Cursor::new(&file[..])).unwrap(), "a reload in a run");
    assert_eq!(reader.next_sample().unwrap().map(|s| s.status), Some(1));
    assert!(reader.next_sample().unwrap().is_none());
    assert!(reader.reload_tables(Cursor::new(&file[..])).unwrap());
    assert_eq!(reader.samples_decoded(), 3);
}

/// A file of hundreds of records in every shape (both threads interleaved, FULL, SUFFIX,
/// POP_PUSH with one- and two-byte deltas and frame indices, stacks up to 119 deep, REPEAT
/// runs of one- and two-byte deltas up to 101 long),
/// many times the largest record, so that `check_to_end` reads most of it in its loop over
/// records the window holds whole rather than one record at a time.
fn records_of_every_shape(endian_big: bool) -> Vec<u8> {
    fn build<E: tachyon_core::endian::Endianity>(mut b: FileBuilder<E>) -> Vec<u8> {
        b.frames = (0..300)
            .map(|i| tachyon_core::tables::FrameEntry { filename: 0, funcname: 1, ..b.frames[i % 4] })
            .collect();
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut depth = [0u64; 2];
        let mut samples = 0;
        for _ in 0..300 {
            let t = next(2) as usize;
            let encoding = if depth[t] == 0 { 1 } else { next(4) as u8 };
            b.prefix(t as u64 + 1, 0, encoding);
            if encoding == 0 {
                // Runs longer than the 32 entries checked at once, one in four.
                let count = if next(4) == 0 { 32 + next(70) } else { 1 + next(30) };
                b.varint(count);
                for _ in 0..count {
                    b.varint(if next(3) == 0 { 1000 } else { 20 }).bytes(&[next(256) as u8]);
                }
                samples += count;
                continue;
            }
            // Deltas of one byte and of two (a sampler slower than 8 kHz), by turns.
            b.varint(if next(3) == 0 { 1000 } else { 20 }).bytes(&[0]);
            let push = match encoding {
                1 => {
                    // Stacks deeper than the 64 frame indices checked at once, one in four.
                    let d = if next(4) == 0 { 60 + next(60) } else { 1 + next(40) };
                    b.varint(d);
                    depth[t] = d;
                    d
                }
                2 => {
                    let push = 1 + next(5);
                    b.varint(depth[t]).varint(push);
                    depth[t] += push;
                    push
                }
                _ => {
                    let pop = next(depth[t] + 1);
                    let push = next(6);
                    b.varint(pop).varint(push);
                    depth[t] = depth[t] - pop + push;
                    push
                }
            };
            if depth[t] > 200 {
                depth[t] = 0;
            }
            for _ in 0..push {
                b.varint(if next(5) == 0 { 128 + next(172) } else { next(128) });
            }
            samples += 1;
        }
        b.sample_count = samples;
        b.thread_count = 2;
        b.build()
    }
    if endian_big {
        build(FileBuilder::new(tachyon_core::BigEndian))
    } else {
        build(FileBuilder::new(LittleEndian))
    }
}

/// `check_to_end` gives the count and first error of reading every sample, on a file whose
/// records it mostly reads as the window holds them whole: the file as written, cut, and
/// with each byte flipped (a low bit and a continuation bit by turns), in both byte orders.
/// Under qemu-user every seventh offset is taken instead.
#[test]
fn a_check_of_records_held_whole_gives_the_first_error_of_every_sample() {
    let stride = if cfg!(target_endian = "big") { 7 } else { 1 };
    for big in [false, true] {
        let file = records_of_every_shape(big);
        // Five times the largest record a reader accepts (2,604 bytes).
        assert!(file.len() > 5 * 2604, "{} bytes", file.len());
        let whole = decode(&file, 1 << 16, Walk::Samples, false);
        assert!(whole.end.is_ok(), "{:?}", whole.end);
        let same = |bad: &[u8], what: &str| {
            let want = decode(bad, 1 << 16, Walk::Samples, false).end;
            assert_eq!(decode(bad, 1 << 16, Walk::Check, false).end, want, "{what}");
        };
        same(&file, "as written");
        for at in (0..file.len()).step_by(stride) {
            let flip = if at % 2 == 0 { 0x01 } else { 0x80 };
            let mut bad = file.clone();
            bad[at] ^= flip;
            same(&bad, &format!("big {big}: ^{flip:#x}@{at}"));
        }
        for len in (0..file.len()).step_by(stride * 13) {
            same(&file[..len], &format!("big {big}: [..{len}]"));
        }
    }
}
