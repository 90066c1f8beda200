//! The string and frame tables (spec sections 3 and 4).
//!
//! A string entry is `uvarint32 length` + bytes. A frame entry is seven fields: two string
//! indices, the line, the end-line delta, the column, the end-column delta (all svarint32 but
//! the indices) and an opcode byte (255 = none).

use crate::varint::{self, MAX_VARINT32_LEN};

/// Opcode byte meaning "no opcode".
pub const NO_OPCODE: u8 = 255;

/// Most bytes one frame-table entry can take: six 5-byte varints and the opcode.
pub const MAX_FRAME_ENTRY_LEN: usize = 6 * MAX_VARINT32_LEN + 1;

/// A source location; `-1` in a field means "unknown", as in CPython.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Location {
    /// First line.
    pub lineno: i32,
    /// Last line.
    pub end_lineno: i32,
    /// First column.
    pub col: i32,
    /// End column.
    pub end_col: i32,
}

impl Location {
    /// The all-unknown location CPython stores for `location=None`.
    pub const NONE: Location = Location { lineno: -1, end_lineno: -1, col: -1, end_col: -1 };
}

/// A frame-table entry with absolute values: the writer's interning key (spec 5.4) and the
/// reader's decoded entry.
///
/// The key keeps the raw end line and column, so `(5, -1, 3, -1)` and `(5, 5, 3, 3)` are two
/// entries whose encodings are byte-identical, exactly as CPython interns them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FrameEntry {
    /// String index of the file name.
    pub filename: u32,
    /// String index of the function name.
    pub funcname: u32,
    /// Location with -1 for unknown parts.
    pub location: Location,
    /// Opcode, [`NO_OPCODE`] for none.
    pub opcode: u8,
}

impl FrameEntry {
    /// An all-zero entry, for initialising storage.
    pub const EMPTY: FrameEntry = FrameEntry { filename: 0, funcname: 0, location: Location::NONE, opcode: NO_OPCODE };

    /// Encodes the entry into `out`, returning the length. Deltas are stored only when both
    /// ends are known, and wrap modulo 2^32 like CPython's `-fwrapv` arithmetic.
    pub fn encode(&self, out: &mut [u8; MAX_FRAME_ENTRY_LEN]) -> usize {
        let loc = self.location;
        let delta = |start: i32, end: i32| if start != -1 && end != -1 { end.wrapping_sub(start) } else { 0 };
        let fields = [
            self.filename,
            self.funcname,
            varint::zigzag_encode(loc.lineno),
            varint::zigzag_encode(delta(loc.lineno, loc.end_lineno)),
            varint::zigzag_encode(loc.col),
            varint::zigzag_encode(delta(loc.col, loc.end_col)),
        ];
        let mut len = 0;
        let mut tmp = [0u8; varint::MAX_VARINT_LEN];
        for field in fields {
            let n = varint::encode_u64(u64::from(field), &mut tmp);
            out[len..len + n].copy_from_slice(&tmp[..n]);
            len += n;
        }
        out[len] = self.opcode;
        len + 1
    }

    /// The location as CPython's reader reports it: `None` iff the line is unknown; an
    /// unknown column makes the end column unknown too.
    pub fn reported_location(&self) -> Option<Location> {
        (self.location.lineno != -1).then_some(self.location)
    }

    /// The opcode as CPython's reader reports it.
    pub fn reported_opcode(&self) -> Option<u8> {
        (self.opcode != NO_OPCODE).then_some(self.opcode)
    }
}

/// Names of the frame fields, for error messages (CPython's wording).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum FrameField {
    /// Field 1.
    Filename,
    /// Field 2.
    Funcname,
    /// Field 3.
    Lineno,
    /// Field 4.
    EndLinenoDelta,
    /// Field 5.
    Column,
    /// Field 6.
    EndColumnDelta,
    /// Field 7.
    Opcode,
}

impl FrameField {
    /// The six varint fields in file order.
    pub const VARINTS: [FrameField; 6] = [
        FrameField::Filename,
        FrameField::Funcname,
        FrameField::Lineno,
        FrameField::EndLinenoDelta,
        FrameField::Column,
        FrameField::EndColumnDelta,
    ];

    /// CPython's name for the field.
    pub fn name(self) -> &'static str {
        match self {
            FrameField::Filename => "filename",
            FrameField::Funcname => "funcname",
            FrameField::Lineno => "lineno",
            FrameField::EndLinenoDelta => "end_lineno_delta",
            FrameField::Column => "column",
            FrameField::EndColumnDelta => "end_column_delta",
            FrameField::Opcode => "opcode",
        }
    }
}

/// Rebuilds an entry from the six decoded varint fields and the opcode, applying the
/// reader rule of spec 4: an end is unknown when its start is unknown.
pub fn frame_from_fields(fields: [u32; 6], opcode: u8) -> FrameEntry {
    let lineno = varint::zigzag_decode(fields[2]);
    let col = varint::zigzag_decode(fields[4]);
    let end = |start: i32, delta: u32| {
        if start == -1 {
            -1
        } else {
            start.wrapping_add(varint::zigzag_decode(delta))
        }
    };
    FrameEntry {
        filename: fields[0],
        funcname: fields[1],
        location: Location { lineno, end_lineno: end(lineno, fields[3]), col, end_col: end(col, fields[5]) },
        opcode,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(f: FrameEntry) -> ([u8; MAX_FRAME_ENTRY_LEN], usize) {
        let mut out = [0u8; MAX_FRAME_ENTRY_LEN];
        let n = f.encode(&mut out);
        (out, n)
    }

    #[test]
    fn lossy_end_line_is_written_like_cpython() {
        // Vector 07: (5, -1, 3, -1) is written as 0a 00 06 00 and reads back as (5, 5, 3, 3).
        let f = FrameEntry {
            filename: 1,
            funcname: 3,
            location: Location { lineno: 5, end_lineno: -1, col: 3, end_col: -1 },
            opcode: NO_OPCODE,
        };
        let (b, n) = encoded(f);
        assert_eq!(&b[..n], &[0x01, 0x03, 0x0a, 0x00, 0x06, 0x00, 0xff]);
        let back = frame_from_fields([1, 3, 0x0a, 0, 6, 0], NO_OPCODE);
        assert_eq!(back.location, Location { lineno: 5, end_lineno: 5, col: 3, end_col: 3 });
    }

    #[test]
    fn unknown_start_hides_end() {
        // Vector 07 frame "k": (7, 12, -1, 40) reads back as (7, 12, -1, -1).
        let f = FrameEntry {
            filename: 1,
            funcname: 5,
            location: Location { lineno: 7, end_lineno: 12, col: -1, end_col: 40 },
            opcode: NO_OPCODE,
        };
        let (b, n) = encoded(f);
        assert_eq!(&b[..n], &[0x01, 0x05, 0x0e, 0x0a, 0x01, 0x00, 0xff]);
        let back = frame_from_fields([1, 5, 0x0e, 0x0a, 0x01, 0], NO_OPCODE);
        assert_eq!(back.reported_location(), Some(Location { lineno: 7, end_lineno: 12, col: -1, end_col: -1 }));
        assert_eq!(frame_from_fields([0, 0, 1, 0, 1, 0], 7).reported_location(), None);
    }

    #[test]
    fn deltas_wrap() {
        let f = FrameEntry {
            filename: 0,
            funcname: 0,
            location: Location { lineno: i32::MAX, end_lineno: i32::MIN, col: 0, end_col: 0 },
            opcode: 0,
        };
        let (b, n) = encoded(f);
        let mut fields = [0u32; 6];
        let mut at = 0;
        for slot in &mut fields {
            let (v, used) = varint::decode_u32(&b[at..n]).unwrap();
            *slot = v;
            at += used;
        }
        assert_eq!(frame_from_fields(fields, b[at]), f);
    }
}
