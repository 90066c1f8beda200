//! What a file says before its samples: header, footer counts, stats (spec sections 3, 4
//! and 7), read with positioned reads and checked before anything is trusted.

use super::*;

/// Everything about a file that needs no sample data: header, footer counts and stats.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Metadata {
    /// Header fields.
    pub header: Header,
    /// Byte order of the file.
    pub endian: RunTimeEndian,
    /// Header layout.
    pub layout: HeaderLayout,
    /// Actual file length (the footer's own `file_size` is ignored, as by CPython).
    pub file_len: u64,
    /// Footer fields.
    pub footer: Footer,
    /// The stats trailer, if present and of version 1.
    pub stats: Option<Stats>,
}

pub(super) fn io_err<E>(offset: u64) -> impl FnOnce(E) -> ReadError<E> {
    move |error| ReadError::Io { position: Position::File(offset), error }
}

/// Reads exactly `buf.len()` bytes at `offset`; `Ok(0)` from the source is an early end.
pub(super) fn read_at<R: Read + Seek>(src: &mut R, offset: u64, buf: &mut [u8]) -> Res<(), R::Error> {
    src.seek(SeekFrom::Start(offset)).map_err(io_err(offset))?;
    read_fully(src, buf, offset)
}

pub(super) fn read_fully<R: Read>(src: &mut R, mut buf: &mut [u8], mut offset: u64) -> Res<(), R::Error> {
    while !buf.is_empty() {
        match src.read(buf) {
            Ok(0) => return Err(ReadError::UnexpectedEof { position: Position::File(offset) }),
            Ok(n) => {
                let n = n.min(buf.len());
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) => return Err(io_err(offset)(e)),
        }
    }
    Ok(())
}

impl Metadata {
    /// Runs CPython's open-time checks 1–10 (spec 9.2) in their order; reads 64 header bytes,
    /// the footer and at most 56 trailer bytes.
    pub fn read<R: Read + Seek>(src: &mut R) -> Res<Metadata, R::Error> {
        let file_len = src.seek(SeekFrom::End(0)).map_err(io_err(0))?;
        let at = |o| Position::File(o);
        if file_len < HEADER_SIZE as u64 {
            return Err(ReadError::format(at(0), Rule::FileTooSmall { len: file_len }));
        }
        let mut hb = [0u8; HEADER_SIZE];
        read_at(src, 0, &mut hb)?;
        let (header, endian, layout) = Header::decode(&hb, file_len).map_err(|e| match e {
            HeaderError::BadMagic(magic) => ReadError::format(at(0), Rule::BadMagic { magic }),
            HeaderError::UnsupportedVersion { version, python_version } => {
                ReadError::format(at(4), Rule::UnsupportedVersion { version, python_version })
            }
            HeaderError::InvalidMode(mode) => ReadError::format(at(60), Rule::InvalidMode { mode }),
        })?;
        let foot = file_len - FOOTER_SIZE as u64;
        let mut fb = [0u8; FOOTER_SIZE];
        read_at(src, foot, &mut fb)?;
        let footer = Footer::decode(&fb, endian);
        let stats = if layout == HeaderLayout::V3_15_2 { Self::read_stats(src, foot, endian)? } else { None };

        let (sto, fto) = (header.string_table_offset, header.frame_table_offset);
        let rule = if sto > file_len {
            Some((40, Rule::StringTableOffsetPastEnd { offset: sto, file_len }))
        } else if fto > file_len {
            Some((48, Rule::FrameTableOffsetPastEnd { offset: fto, file_len }))
        } else if sto < HEADER_SIZE as u64 {
            Some((40, Rule::StringTableOffsetInHeader { offset: sto }))
        } else if fto < HEADER_SIZE as u64 {
            Some((48, Rule::FrameTableOffsetInHeader { offset: fto }))
        } else if sto > fto {
            Some((40, Rule::TablesOutOfOrder { strings: sto, frames: fto }))
        } else {
            None
        };
        if let Some((offset, rule)) = rule {
            return Err(ReadError::format(at(offset), rule));
        }
        Ok(Metadata { header, endian, layout, file_len, footer, stats })
    }

    /// The trailer rules of spec 6: magic 16 bytes before the footer, size checked before
    /// version, unknown versions ignored, values validated.
    pub(super) fn read_stats<R: Read + Seek>(src: &mut R, foot: u64, e: RunTimeEndian) -> Res<Option<Stats>, R::Error> {
        let tail_at = foot - 16;
        let mut tb = [0u8; 16];
        read_at(src, tail_at, &mut tb)?;
        let Some(tail) = StatsTail::decode(&tb, e) else {
            return Ok(None);
        };
        if tail.size < 32 || u64::from(tail.size) > foot {
            return Err(ReadError::format(Position::File(tail_at + 12), Rule::StatsSize { size: tail.size }));
        }
        if tail.version != STATS_VERSION {
            return Ok(None);
        }
        let start = foot - u64::from(tail.size);
        let mut prefix = [0u8; 40];
        let prefix = &mut prefix[..stats_prefix_len(tail.size)];
        read_at(src, start, prefix)?;
        let stats = decode_stats(prefix, e);
        if !stats.is_valid() {
            return Err(ReadError::format(Position::File(start), Rule::StatsValues));
        }
        Ok(Some(stats))
    }

    /// Most strings the string table can hold, each taking at least its length byte
    /// (CPython's bound on the footer's string count).
    pub fn max_string_count(&self) -> u64 {
        self.file_len - self.header.string_table_offset
    }

    /// Most frames the frame table can hold, each taking at least 7 bytes (CPython's bound on
    /// the footer's frame count).
    pub fn max_frame_count(&self) -> u64 {
        (self.file_len - self.header.frame_table_offset) / MIN_FRAME_LEN
    }

    /// Whether the sample region is zstd-compressed.
    pub fn is_compressed(&self) -> bool {
        self.header.compression == Compression::Zstd
    }
}
