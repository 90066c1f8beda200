//! The string and frame tables (spec section 6), loaded before the first sample and
//! resolved on demand.

use super::*;

/// The string and frame tables of an open file.
pub struct Tables<'a> {
    pub(super) strings: StringTable<'a>,
    pub(super) frames: Table<'a, FrameEntry>,
    pub(super) frame_count: usize,
    /// The frame count when every frame names strings that exist (known once the tables are
    /// loaded), so an index below it needs no other check; else 0.
    pub(super) trusted_limit: u32,
}

/// A frame resolved to its strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResolvedFrame<'a> {
    /// File name bytes (see [`crate::text::Lossy`] for CPython's text view).
    pub filename: &'a [u8],
    /// Function name bytes.
    pub funcname: &'a [u8],
    /// Location as CPython's reader reports it (`None` iff the line is unknown).
    pub location: Option<Location>,
    /// Opcode, `None` for 255.
    pub opcode: Option<u8>,
}

impl<'a> Tables<'a> {
    /// Number of strings.
    pub fn string_count(&self) -> usize {
        self.strings.len()
    }

    /// Number of frames.
    pub fn frame_count(&self) -> usize {
        self.frame_count
    }

    /// String `index`.
    pub fn string(&self, index: u32) -> Option<&[u8]> {
        self.strings.get(index)
    }

    /// Raw frame-table entry `index`.
    pub fn frame_entry(&self, index: u32) -> Option<&FrameEntry> {
        self.frames.as_slice()[..self.frame_count].get(index as usize)
    }

    /// Frame `index` with its strings; `None` if the index or its string indices are out of
    /// range.
    pub fn frame(&self, index: u32) -> Option<ResolvedFrame<'_>> {
        let f = self.frame_entry(index)?;
        Some(ResolvedFrame {
            filename: self.strings.get(f.filename)?,
            funcname: self.strings.get(f.funcname)?,
            location: f.reported_location(),
            opcode: f.reported_opcode(),
        })
    }

    /// Whether every frame names strings that exist.
    pub(super) fn all_frames_valid(&self) -> bool {
        let strings = self.strings.len() as u64;
        self.frames.as_slice()[..self.frame_count]
            .iter()
            .all(|f| u64::from(f.filename) < strings && u64::from(f.funcname) < strings)
    }

    /// Indices below this need no check: the frame count when every frame names valid
    /// strings, else 0.
    #[inline]
    pub(super) fn trusted_index_limit(&self) -> u32 {
        self.trusted_limit
    }

    /// Sets [`Self::trusted_index_limit`] for the tables as loaded.
    pub(super) fn trust(&mut self) {
        let valid = self.all_frames_valid();
        self.trusted_limit = if valid { u32::try_from(self.frame_count).unwrap_or(u32::MAX) } else { 0 };
    }

    /// Checks that frame `index` exists and names valid strings (CPython checks this when a
    /// sample using the frame is emitted).
    #[inline]
    pub(super) fn check_frame(&self, index: u32) -> Result<(), Rule> {
        if index < self.trusted_limit {
            return Ok(());
        }
        let f = self.frame_entry(index).ok_or(Rule::InvalidFrameIndex { index })?;
        let n = self.strings.len() as u64;
        if u64::from(f.filename) >= n || u64::from(f.funcname) >= n {
            return Err(Rule::InvalidStringIndex { frame: index });
        }
        Ok(())
    }
}

/// Loads the string table (checks 12–14): count bounded by the bytes left in the file before
/// anything is read, each length by the bytes left, each string into the caller's arena.
pub(super) fn load_strings<R: Read + Seek>(
    src: &mut R,
    meta: &Metadata,
    window: &mut Window<'_>,
    tables: &mut Tables<'_>,
) -> Res<(), R::Error> {
    let start = meta.header.string_table_offset;
    let count = meta.footer.string_count;
    let max = meta.max_string_count();
    if u64::from(count) > max {
        let rule = Rule::StringCountTooLarge { count, max };
        return Err(ReadError::format(Position::File(meta.file_len - FOOTER_SIZE as u64), rule));
    }
    src.seek(SeekFrom::Start(start)).map_err(io_err(start))?;
    window.reset(start);
    let mut pos = start;
    let mut file = FileRange { src, pos: &mut pos, end: meta.file_len };
    for _ in 0..count {
        let at = window.pos;
        let len = window
            .varint32(&mut file)?
            .map_err(|_| ReadError::format(Position::File(at), Rule::MalformedStringLength))?;
        if u64::from(len) > meta.file_len - window.pos {
            return Err(ReadError::format(Position::File(at), Rule::StringOverflow { len }));
        }
        let body_at = window.pos;
        let pushed = tables.strings.push_with(len as usize, |dst| {
            if window.copy_out(&mut file, dst)? {
                Ok(())
            } else {
                Err(ReadError::UnexpectedEof { position: Position::File(body_at) })
            }
        })?;
        if let Err(resource) = pushed {
            let capacity = if resource == Resource::Strings { tables.strings.len() } else { 0 };
            return Err(ReadError::Capacity { position: Position::File(at), resource, capacity });
        }
    }
    Ok(())
}

/// The smallest frame entry: six one-byte varints and the opcode byte.
pub(super) const MIN_FRAME_LEN: u64 = 7;

/// Loads the frame table (checks 15–17) into the caller's frame storage.
pub(super) fn load_frames<R: Read + Seek>(
    src: &mut R,
    meta: &Metadata,
    window: &mut Window<'_>,
    tables: &mut Tables<'_>,
) -> Res<(), R::Error> {
    let start = meta.header.frame_table_offset;
    let count = meta.footer.frame_count;
    let max = meta.max_frame_count();
    if u64::from(count) > max {
        let rule = Rule::FrameCountTooLarge { count, max };
        return Err(ReadError::format(Position::File(meta.file_len - FOOTER_SIZE as u64 + 4), rule));
    }
    if !tables.frames.grow(count as usize, FrameEntry::EMPTY) {
        let capacity = tables.frames.as_slice().len();
        return Err(ReadError::Capacity { position: Position::File(start), resource: Resource::Frames, capacity });
    }
    src.seek(SeekFrom::Start(start)).map_err(io_err(start))?;
    window.reset(start);
    let mut pos = start;
    let mut file = FileRange { src, pos: &mut pos, end: meta.file_len };
    for slot in tables.frames.as_mut_slice()[..count as usize].iter_mut() {
        let mut fields = [0u32; 6];
        for (value, field) in fields.iter_mut().zip(FrameField::VARINTS) {
            let at = window.pos;
            *value = window
                .varint32(&mut file)?
                .map_err(|_| ReadError::format(Position::File(at), Rule::MalformedFrameField { field }))?;
        }
        let at = window.pos;
        let opcode =
            window.byte(&mut file)?.ok_or_else(|| ReadError::format(Position::File(at), Rule::FrameTableTruncated))?;
        *slot = frame_from_fields(fields, opcode);
        tables.frame_count += 1;
    }
    Ok(())
}
