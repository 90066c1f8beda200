//! Offsets past 4 GiB, without a 4 GiB file: a virtual source whose bytes are zero except
//! where a segment says otherwise. On 32-bit targets (powerpc) this checks that no offset,
//! size or count is squeezed through a `usize` or `u32`.

use crate::common::FileBuilder;
use embedded_io::{ErrorType, Read, Seek, SeekFrom};
use tachyon_core::header::{Footer, Header};
use tachyon_core::reader::Metadata;
use tachyon_core::storage::StaticReaderStorage;
use tachyon_core::{BigEndian, Position, ReadError, Reader, Rule};

struct VirtualFile {
    len: u64,
    segments: Vec<(u64, Vec<u8>)>,
    pos: u64,
}

impl ErrorType for VirtualFile {
    type Error = core::convert::Infallible;
}

impl Read for VirtualFile {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Self::Error> {
        let n = (buf.len() as u64).min(self.len.saturating_sub(self.pos)) as usize;
        let out = &mut buf[..n];
        out.fill(0);
        for (start, bytes) in &self.segments {
            let end = start + bytes.len() as u64;
            let (lo, hi) = (self.pos.max(*start), (self.pos + n as u64).min(end));
            if lo < hi {
                out[(lo - self.pos) as usize..(hi - self.pos) as usize]
                    .copy_from_slice(&bytes[(lo - start) as usize..(hi - start) as usize]);
            }
        }
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for VirtualFile {
    fn seek(&mut self, to: SeekFrom) -> Result<u64, Self::Error> {
        self.pos = match to {
            SeekFrom::Start(p) => p,
            SeekFrom::End(d) => self.len.wrapping_add_signed(d),
            SeekFrom::Current(d) => self.pos.wrapping_add_signed(d),
        };
        Ok(self.pos)
    }
}

const FAR: u64 = (9 << 29) + 12_345; // 4.5 GiB and change

/// A small valid file whose sample region is padded with zeros so its tables start past 4 GiB.
fn far_file() -> (VirtualFile, u64) {
    let e = BigEndian;
    let mut b = FileBuilder::new(e);
    b.prefix(7, 0, 1).varint(5).bytes(&[3]).varint(2).varint(1).varint(0); // FULL [1, 0]
    b.sample_count = 1;
    let small = b.build();
    let h = Header::decode(small[..64].try_into().unwrap(), small.len() as u64).unwrap().0;
    let region = small[64..h.string_table_offset as usize].to_vec();
    let tables = small[h.string_table_offset as usize..small.len() - 32].to_vec();
    let shift = FAR - h.string_table_offset;
    let header = Header {
        string_table_offset: h.string_table_offset + shift,
        frame_table_offset: h.frame_table_offset + shift,
        ..h
    };
    let len = FAR + tables.len() as u64 + 32;
    let footer = Footer { string_count: 2, frame_count: 4, file_size: len };
    let file = VirtualFile {
        len,
        segments: vec![
            (0, header.encode(e).to_vec()),
            (64, region),
            (FAR, tables),
            (len - 32, footer.encode(e).to_vec()),
        ],
        pos: 0,
    };
    (file, 64 + 13 + 1 + 1 + 1 + 2)
}

#[test]
fn tables_past_four_gib() {
    let (mut file, first_record_end) = far_file();
    let built_len = file.len;
    let meta = Metadata::read(&mut file).unwrap();
    assert!(built_len > 1 << 32);
    assert_eq!(meta.file_len, built_len);
    assert!(meta.header.string_table_offset > u64::from(u32::MAX));
    assert!(meta.header.frame_table_offset > meta.header.string_table_offset);

    let mut storage = StaticReaderStorage::<64, 4, 4, 2, 64>::new();
    let mut r = Reader::open(file, storage.storage()).unwrap();
    assert_eq!(r.tables().string(0), Some(&b"f.py"[..]));
    assert_eq!(r.tables().frame_count(), 4);
    let s = r.next_sample().unwrap().unwrap();
    assert_eq!((s.timestamp_us, s.thread_id, s.status, s.stack), (1005, 7, 3, &[1u32, 0][..]));
    // The zero padding after it reads as a REPEAT record of a second thread, which the header
    // does not declare: the error names its exact 64-bit offset.
    match r.next_sample() {
        Err(ReadError::Format { position: Position::File(at), rule: Rule::TooManyThreads { .. } }) => {
            assert_eq!(at, first_record_end)
        }
        other => panic!("{other:?}"),
    }
}

fn repeat_file(count: u64) -> VirtualFile {
    let (mut file, _) = far_file();
    let mut rec =
        tachyon_core::records::Prefix { thread_id: 7, interpreter_id: 0, encoding: 0 }.encode(BigEndian).to_vec();
    let mut v = [0u8; 10];
    let n = tachyon_core::varint::encode_u64(count, &mut v);
    rec.extend_from_slice(&v[..n]);
    file.segments[1] = (64, rec);
    file
}

#[test]
fn rle_count_bound_uses_64_bit_distances() {
    // Spec 9.3: a REPEAT count may not exceed (bytes left before the string table) / 2. Here
    // that distance is past 4 GiB, so the bound is past 2^31.
    let after_count = 64 + 13 + 5;
    let max = (FAR - after_count) / 2;
    let mut storage = StaticReaderStorage::<64, 4, 4, 2, 64>::new();
    let mut r = Reader::open(repeat_file(u64::from(u32::MAX)), storage.storage()).unwrap();
    assert_eq!(r.next_sample().unwrap_err().rule(), Some(Rule::RleCountTooLarge { count: u32::MAX, max }));

    // A count above 2^31 but within the bound is accepted; the zero bytes that follow read
    // as entries with delta 0 and status 0.
    let mut storage = StaticReaderStorage::<64, 4, 4, 2, 64>::new();
    let mut r = Reader::open(repeat_file((1 << 31) + 5), storage.storage()).unwrap();
    for _ in 0..1000 {
        let s = r.next_sample().unwrap().unwrap();
        assert_eq!((s.thread_id, s.status, s.timestamp_us), (7, 0, 1000));
    }
    assert!(max > 1 << 31);
}
