//! Hostile and damaged input: every case ends in a typed error naming the rule, or in a
//! correct decode; never a panic, never memory beyond the caller's storage.

use crate::common::{decode_all, FileBuilder, SMALL_READER};
use tachyon_core::header::Footer;
use tachyon_core::io::Cursor;
use tachyon_core::reader::Metadata;
use tachyon_core::storage::{ReaderCapacity, Resource, StaticReaderStorage};
use tachyon_core::{BigEndian, Endianity, LittleEndian, ReadError, Reader, Rule};
use tachyon_test_kit::fixtures;

fn rule(file: &[u8]) -> Rule {
    match decode_all(file, SMALL_READER) {
        Err(ReadError::Format { rule, .. }) => rule,
        other => panic!("expected a format error, got {other:?}"),
    }
}

#[test]
fn huge_declared_table_counts_in_a_tiny_file() {
    // cpython#152718: a footer declaring 2^32-1 strings and frames made CPython try a huge
    // allocation. Here the count is checked against the file length first.
    for e in [true, false] {
        let mut file = if e { FileBuilder::new(LittleEndian).build() } else { FileBuilder::new(BigEndian).build() };
        let n = file.len();
        let footer = Footer { string_count: u32::MAX, frame_count: u32::MAX, file_size: n as u64 };
        let bytes = if e { footer.encode(LittleEndian) } else { footer.encode(BigEndian) };
        file[n - 32..].copy_from_slice(&bytes);
        assert!(matches!(rule(&file), Rule::StringCountTooLarge { count: u32::MAX, .. }));
        // With a sane string count the frame count is caught the same way.
        let footer = Footer { string_count: 2, frame_count: u32::MAX, file_size: n as u64 };
        let bytes = if e { footer.encode(LittleEndian) } else { footer.encode(BigEndian) };
        file[n - 32..].copy_from_slice(&bytes);
        assert!(matches!(rule(&file), Rule::FrameCountTooLarge { count: u32::MAX, .. }));
    }
}

fn many_threads(count: u64, declared: u32) -> Vec<u8> {
    // REPEAT records with count 0 create a thread each and cost 14 bytes.
    let mut b = FileBuilder::new(LittleEndian);
    b.thread_count = declared;
    for tid in 0..count {
        b.prefix(tid, 0, 0).varint(0);
    }
    b.build()
}

#[test]
#[cfg_attr(target_endian = "big", ignore = "the thread table's bound, the same on every host: run on the host")]
fn millions_of_thread_ids_stay_within_storage() {
    // cpython#149009: distinct thread ids are bounded by the caller's thread table.
    let file = many_threads(2_000_000, u32::MAX);
    match decode_all(&file, SMALL_READER) {
        Err(ReadError::Capacity { resource: Resource::Threads, capacity: 64, .. }) => {}
        other => panic!("{other:?}"),
    }
    // And by the header's declared count, as CPython checks.
    let file = many_threads(100, 10);
    assert_eq!(rule(&file), Rule::TooManyThreads { declared: 10, found: 11 });
    // Within both limits, they decode (no samples, all threads seen).
    let file = many_threads(50, 50);
    assert_eq!(decode_all(&file, SMALL_READER).unwrap().len(), 0);
}

#[test]
fn long_repeat_with_alternating_status_is_linear_and_exact() {
    // cpython#152721: CPython's replay was quadratic in this. Here each entry costs O(1).
    let n = 60_000u64;
    let mut b = FileBuilder::new(BigEndian);
    b.prefix(5, 0, 1).varint(1).bytes(&[0]).varint(1).varint(0); // FULL [frame 0]
    b.prefix(5, 0, 0).varint(n);
    for i in 0..n {
        b.varint(1).bytes(&[(i % 2) as u8]);
    }
    b.sample_count = n + 1;
    let samples = decode_all(&b.build(), SMALL_READER).unwrap();
    assert_eq!(samples.len() as u64, n + 1);
    for (i, s) in samples.iter().enumerate().skip(1) {
        assert_eq!(s.status, ((i - 1) % 2) as u8);
        assert_eq!(s.ts, 1000 + 1 + i as u64);
        assert_eq!(s.frames.len(), 1);
    }
}

#[test]
fn out_of_range_frame_and_string_indices() {
    let mut b = FileBuilder::new(LittleEndian);
    b.prefix(1, 0, 1).varint(0).bytes(&[0]).varint(1).varint(4); // frame 4 of 4
    b.sample_count = 1;
    assert_eq!(rule(&b.build()), Rule::InvalidFrameIndex { index: 4 });

    let mut b = FileBuilder::new(LittleEndian);
    b.frames[2].funcname = 9;
    b.prefix(1, 0, 1).varint(0).bytes(&[0]).varint(1).varint(1);
    b.sample_count = 1;
    // A frame with a bad string index is fine until a sample uses it (CPython is lazy too).
    assert_eq!(decode_all(&b.build(), SMALL_READER).unwrap().len(), 1);
    b.prefix(1, 0, 3).varint(0).bytes(&[0]).varint(1).varint(1).varint(2);
    b.sample_count = 2;
    assert_eq!(rule(&b.build()), Rule::InvalidStringIndex { frame: 2 });
}

#[test]
fn varint_overflow_and_truncation() {
    let mut b = FileBuilder::new(LittleEndian);
    b.prefix(1, 0, 1).bytes(&[0x80; 11]).bytes(&[0, 0]);
    b.sample_count = 1;
    assert_eq!(rule(&b.build()), Rule::MalformedDelta);

    let mut b = FileBuilder::new(LittleEndian);
    b.prefix(1, 0, 1).varint(0).bytes(&[0]).varint(u64::from(u32::MAX) + 1);
    b.sample_count = 1;
    assert_eq!(rule(&b.build()), Rule::MalformedStackVarint);

    let mut b = FileBuilder::new(LittleEndian);
    b.prefix(1, 0, 0).varint(1).bytes(&[0x80]);
    b.sample_count = 1;
    assert_eq!(rule(&b.build()), Rule::RleCountTooLarge { count: 1, max: 0 });

    let mut b = FileBuilder::new(LittleEndian);
    b.prefix(1, 0, 1).varint(0);
    b.sample_count = 1;
    assert_eq!(rule(&b.build()), Rule::TruncatedStatus);

    let mut b = FileBuilder::new(LittleEndian);
    b.bytes(&[1, 2, 3]);
    assert_eq!(rule(&b.build()), Rule::TruncatedRecord { trailing: 3 });

    let mut b = FileBuilder::new(LittleEndian);
    b.prefix(1, 0, 9);
    assert_eq!(rule(&b.build()), Rule::UnknownEncoding { encoding: 9 });
}

#[test]
fn stack_rules_and_cpython_quirks() {
    let full = |b: &mut FileBuilder<LittleEndian>, frames: &[u64]| {
        b.prefix(1, 0, 1).varint(0).bytes(&[0]).varint(frames.len() as u64);
        for &f in frames {
            b.varint(f);
        }
    };
    // POP_PUSH popping more than the depth keeps nothing (no error), then pushes.
    let mut b = FileBuilder::new(LittleEndian);
    full(&mut b, &[0, 1]);
    b.prefix(1, 0, 3).varint(0).bytes(&[0]).varint(7).varint(1).varint(3);
    b.sample_count = 2;
    let s = decode_all(&b.build(), SMALL_READER).unwrap();
    assert_eq!(s[1].frames.iter().map(|f| f.2.unwrap().lineno).collect::<Vec<_>>(), vec![3]);

    // SUFFIX with push 0 keeps the innermost `shared` frames.
    let mut b = FileBuilder::new(LittleEndian);
    full(&mut b, &[0, 1, 2]);
    b.prefix(1, 0, 2).varint(0).bytes(&[0]).varint(2).varint(0);
    b.sample_count = 2;
    let s = decode_all(&b.build(), SMALL_READER).unwrap();
    assert_eq!(s[1].frames.iter().map(|f| f.2.unwrap().lineno).collect::<Vec<_>>(), vec![0, 1]);

    // SUFFIX sharing more than the depth, stacks beyond 256.
    let mut b = FileBuilder::new(LittleEndian);
    full(&mut b, &[0]);
    b.prefix(1, 0, 2).varint(0).bytes(&[0]).varint(2).varint(1).varint(0);
    b.sample_count = 2;
    assert_eq!(rule(&b.build()), Rule::SharedExceedsDepth { shared: 2, depth: 1 });

    let mut b = FileBuilder::new(LittleEndian);
    b.prefix(1, 0, 1).varint(0).bytes(&[0]).varint(257);
    b.sample_count = 1;
    assert_eq!(rule(&b.build()), Rule::StackTooDeep { depth: 257 });

    let mut b = FileBuilder::new(LittleEndian);
    full(&mut b, &[0; 200]);
    b.prefix(1, 0, 2).varint(0).bytes(&[0]).varint(200).varint(57);
    b.sample_count = 2;
    assert_eq!(rule(&b.build()), Rule::FinalStackTooDeep { depth: 257 });

    // A wrong header sample count is reported after the last sample.
    let mut b = FileBuilder::new(LittleEndian);
    full(&mut b, &[0]);
    b.sample_count = 5;
    assert_eq!(rule(&b.build()), Rule::SampleCountMismatch { declared: 5, decoded: 1 });
}

#[test]
fn header_and_offset_checks_in_cpythons_order() {
    assert_eq!(rule(&[0u8; 10]), Rule::FileTooSmall { len: 10 });
    assert!(matches!(rule(&[b'X'; 96]), Rule::BadMagic { .. }));
    let good = FileBuilder::new(BigEndian).build();
    let mut f = good.clone();
    f[7] = 2;
    assert!(matches!(rule(&f), Rule::UnsupportedVersion { version: 2, .. }));
    let mut f = good.clone();
    f[63] = 6;
    assert_eq!(rule(&f), Rule::InvalidMode { mode: 6 });
    let mut f = good.clone();
    f[40..48].copy_from_slice(&BigEndian.u64_bytes(10_000));
    assert!(matches!(rule(&f), Rule::StringTableOffsetPastEnd { offset: 10_000, .. }));
    let mut f = good.clone();
    f[40..48].copy_from_slice(&BigEndian.u64_bytes(8));
    assert_eq!(rule(&f), Rule::StringTableOffsetInHeader { offset: 8 });
    let mut f = good;
    let fto = BigEndian.read_u64(f[48..56].try_into().unwrap());
    f[40..48].copy_from_slice(&BigEndian.u64_bytes(fto + 1));
    assert!(matches!(rule(&f), Rule::TablesOutOfOrder { .. }));
}

/// Reads a whole file through the smallest static storage; returns normally or with an
/// error, never panics.
fn read_everything(file: &[u8], zstd: &mut ZstdBuffers) {
    let mut storage = StaticReaderStorage::<512, 32, 32, 8, 64>::new();
    if let Ok(mut r) = zstd.open(Cursor::new(file), storage.storage()) {
        let mut n = 0u64;
        while let Ok(Some(_)) = r.next_sample() {
            n += 1;
            assert!(n <= file.len() as u64 * 8 + 10, "more samples than the bytes can hold");
        }
    }
    let _ = Metadata::read(&mut Cursor::new(file));
}

/// A decompressor for compressed files when the `zstd` feature is on.
struct ZstdBuffers {
    #[cfg(feature = "zstd")]
    workspace: Vec<u64>,
    #[cfg(feature = "zstd")]
    input: Vec<u8>,
}

impl ZstdBuffers {
    fn new() -> Self {
        ZstdBuffers {
            #[cfg(feature = "zstd")]
            workspace: vec![
                0;
                tachyon_core::compression::workspace_words(
                    tachyon_core::compression::decompressor_workspace_bytes(21)
                )
            ],
            #[cfg(feature = "zstd")]
            input: vec![0; 37],
        }
    }

    fn open<'s>(
        &'s mut self,
        c: Cursor<&'s [u8]>,
        storage: tachyon_core::ReaderStorage<'s>,
    ) -> Result<Reader<'s, Cursor<&'s [u8]>>, ReadError<tachyon_core::io::CursorError>> {
        #[cfg(feature = "zstd")]
        {
            let dec = tachyon_core::compression::Decompressor::new(&mut self.workspace, &mut self.input, 21).unwrap();
            Reader::open_zstd(c, storage, dec)
        }
        #[cfg(not(feature = "zstd"))]
        Reader::open(c, storage)
    }
}

fn vectors() -> Vec<Vec<u8>> {
    let files = fixtures::files(&fixtures::vectors("cpython-3.15.2"), ".bin");
    assert_eq!(files.len(), 28);
    files.iter().map(|p| fixtures::read(p)).collect()
}

#[test]
fn every_truncation_of_every_vector() {
    let mut z = ZstdBuffers::new();
    for file in vectors() {
        for len in 0..file.len() {
            read_everything(&file[..len], &mut z);
        }
    }
}

#[test]
fn every_single_byte_corruption_of_every_vector() {
    let mut z = ZstdBuffers::new();
    for file in vectors() {
        for at in 0..file.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut f = file.clone();
                f[at] ^= flip;
                read_everything(&f, &mut z);
            }
        }
    }
}

#[test]
fn storage_too_small_is_a_capacity_error() {
    let mut b = FileBuilder::new(LittleEndian);
    b.strings = (0..40).map(|i| format!("s{i}").into_bytes()).collect();
    let cap = ReaderCapacity { strings: 10, ..SMALL_READER };
    match decode_all(&b.build(), cap) {
        Err(ReadError::Capacity { resource: Resource::Strings, capacity: 10, .. }) => {}
        other => panic!("{other:?}"),
    }
}
