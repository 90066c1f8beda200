//! Python's marshal format, as pstats files use it (feature `marshal`).
//!
//! A pstats file is one marshalled dictionary (no header, no version byte): keys
//! `(filename, lineno, funcname)`, values `(cc, nc, tt, ct, callers)`. The decoder
//! ([`Decoder`]) reads every object type CPython's marshal writes (versions 0–5, the ones
//! found in real pstats files first: dicts, tuples, ints, longs, floats, strings, `True`,
//! code objects inside the keys `python -m profile` writes, back references), as a stream of
//! [`Item`]s over a byte slice: no recursion (open containers live on a stack the caller
//! lends, whose length bounds the nesting), no allocation, lengths checked against the bytes
//! left before they are used, back references only to objects already complete. The encoder
//! ([`Encoder`]) writes the subset a stats dictionary needs, without references, which every
//! Python 3 loads.
//!
//! The wire format, as this module reads it:
//!
//! | code | object | payload |
//! |---|---|---|
//! | `0` | NULL (ends a dict) | — |
//! | `N` `T` `F` `.` `S` | None, True, False, Ellipsis, StopIteration | — |
//! | `i` | int | i32 LE |
//! | `l` | long | i32 digit count n (sign = the number's), \|n\| × u16 LE base-2^15 digits |
//! | `g` / `f` | float | f64 LE / u8 length + ASCII text |
//! | `y` / `x` | complex | two `g` / two `f` payloads |
//! | `s` | bytes | i32 length + bytes |
//! | `z` `Z` / `a` `A` / `u` `t` | str | u8 / i32 / i32 length + ASCII / ASCII / UTF-8 |
//! | `)` / `(` `[` `<` `>` | tuple / tuple, list, set, frozenset | u8 / i32 count + items |
//! | `{` | dict | key, value pairs until a NULL key |
//! | `c` | code (3.11+) | 5 × i32, then code, consts, names, localsplusnames, localspluskinds, filename, name, qualname, i32 firstlineno, linetable, exceptiontable |
//! | `r` | reference | u32 index of an earlier flagged object |
//!
//! A code with bit 0x80 (FLAG_REF) set gives the object the next reference index, in
//! pre-order (a container's index is taken before its items').

mod read;
mod write;

pub use read::{Decoder, Item, Kind, MarshalError, Open, Rule, Value};
pub use write::{EncodeError, Encoder};

/// Bit of a type code that gives the object a reference index.
pub const FLAG_REF: u8 = 0x80;
