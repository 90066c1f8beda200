//! The decoder: one object's items in file order, containers opened and closed explicitly.

use core::fmt;

use super::FLAG_REF;

/// A container kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `)` or `(`.
    Tuple,
    /// `[`.
    List,
    /// `<`.
    Set,
    /// `>`.
    FrozenSet,
    /// `{`: key and value items alternate until [`Value::Close`].
    Dict,
    /// `c`: a code object's ten objects, with [`Value::CodeFirstLine`] after the eighth.
    Code,
}

/// What an item is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    /// `None`.
    None,
    /// `True`.
    True,
    /// `False`.
    False,
    /// `...`.
    Ellipsis,
    /// `StopIteration`.
    StopIteration,
    /// An int that fits 32 bits (`i`).
    Int(i32),
    /// A long (`l`): base-2^15 digits as little-endian u16 pairs, least significant first,
    /// each below 2^15, the last non-zero (checked). No digits is 0.
    Long {
        /// The number is negative.
        negative: bool,
        /// The digits' bytes.
        digits: &'a [u8],
    },
    /// A binary float (`g`).
    Float(f64),
    /// A float as text (`f`, marshal versions 0 and 1).
    FloatText(&'a [u8]),
    /// A binary complex (`y`).
    Complex(f64, f64),
    /// A complex as text (`x`).
    ComplexText(&'a [u8], &'a [u8]),
    /// Bytes (`s`).
    Bytes(&'a [u8]),
    /// A str: `ascii` for the ASCII codes (`z` `Z` `a` `A`), otherwise UTF-8 as CPython
    /// writes it (`u` `t`, surrogates allowed: not checked here).
    Str {
        /// The text's bytes.
        bytes: &'a [u8],
        /// Written with an ASCII type code.
        ascii: bool,
    },
    /// A container begins; its items follow, then [`Value::Close`].
    Open {
        /// Which.
        kind: Kind,
        /// Items (tuples, lists, sets), `None` for dicts and code objects.
        len: Option<u32>,
    },
    /// The innermost open container ends.
    Close(Kind),
    /// A back reference to the flagged object with this index (already complete).
    Ref(u32),
    /// A code object's `co_firstlineno` (a raw i32 between its qualname and linetable).
    CodeFirstLine(i32),
}

/// One item and where it is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Item<'a> {
    /// Offset of its type code (for `Close`: of a dict's NULL, or of the byte after a
    /// sequence or code object).
    pub offset: usize,
    /// The reference index the object takes (its type code had [`FLAG_REF`]).
    pub reference: Option<u32>,
    /// What it is.
    pub value: Value<'a>,
}

/// The rule an input broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// The bytes end inside an object.
    UnexpectedEnd,
    /// A type code marshal does not have.
    UnknownType(u8),
    /// A NULL (`0`) where an object must be (anywhere but a dict's key).
    Null,
    /// A length or count that is negative or larger than the bytes left could hold.
    BadLength,
    /// Containers nested deeper than the decoder's stack.
    TooDeep {
        /// The stack's length.
        limit: usize,
    },
    /// A reference to an index no flagged object has yet.
    RefOutOfRange {
        /// The index.
        index: u32,
    },
    /// A reference to a container that is not complete (itself or one around it).
    RefToUnfinished {
        /// The index.
        index: u32,
    },
    /// A long digit of 2^15 or more.
    DigitOutOfRange,
    /// A long whose most significant digit is 0.
    UnnormalizedLong,
    /// More flagged objects than 2^32 − 1.
    TooManyRefs,
}

/// Where and why the input is bad.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarshalError {
    /// Offset of the object (or field) that breaks the rule.
    pub offset: usize,
    /// Which rule.
    pub rule: Rule,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::UnexpectedEnd => f.write_str("the data ends inside an object"),
            Rule::UnknownType(c) => write!(f, "unknown type code 0x{c:02x}"),
            Rule::Null => f.write_str("NULL object where a value must be"),
            Rule::BadLength => f.write_str("length negative or beyond the data"),
            Rule::TooDeep { limit } => write!(f, "containers nested deeper than {limit}"),
            Rule::RefOutOfRange { index } => write!(f, "reference {index} to no object"),
            Rule::RefToUnfinished { index } => write!(f, "reference {index} to an unfinished container"),
            Rule::DigitOutOfRange => f.write_str("long digit out of range"),
            Rule::UnnormalizedLong => f.write_str("unnormalized long data"),
            Rule::TooManyRefs => f.write_str("more than 2^32 - 1 references"),
        }
    }
}

impl fmt::Display for MarshalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad marshal data at offset {}: {}", self.offset, self.rule)
    }
}

impl core::error::Error for MarshalError {}

/// An open container, in the stack the caller lends to [`Decoder::new`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Open {
    kind: Kind,
    /// Items left (sequences); fields read (code); items read (dict: even = key next).
    count: u32,
    reference: Option<u32>,
}

impl Open {
    /// A placeholder for stack storage.
    pub const EMPTY: Open = Open { kind: Kind::Tuple, count: 0, reference: None };
}

/// Objects of a code object; `CodeFirstLine` comes after the eighth (qualname).
const CODE_OBJECTS: u32 = 10;
const CODE_FIRSTLINE_AFTER: u32 = 8;

/// Reads one marshalled object from a byte slice as [`Item`]s.
pub struct Decoder<'a, 's> {
    data: &'a [u8],
    pos: usize,
    stack: &'s mut [Open],
    depth: usize,
    refs: u32,
    /// The root object was read whole.
    done: bool,
    /// A code object's first line is due before its next object.
    first_line_due: bool,
}

type Res<T> = Result<T, MarshalError>;

impl<'a, 's> Decoder<'a, 's> {
    /// A decoder over `data` whose containers may nest `stack.len()` deep.
    pub fn new(data: &'a [u8], stack: &'s mut [Open]) -> Self {
        Decoder { data, pos: 0, stack, depth: 0, refs: 0, done: false, first_line_due: false }
    }

    /// Bytes read so far (after the root object: where it ended).
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Reference indices given so far.
    pub fn references(&self) -> u32 {
        self.refs
    }

    /// Open containers now.
    pub fn depth(&self) -> usize {
        self.depth
    }

    fn err<T>(&self, offset: usize, rule: Rule) -> Res<T> {
        Err(MarshalError { offset, rule })
    }

    fn take(&mut self, n: usize) -> Res<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len());
        match end {
            Some(end) => {
                let bytes = &self.data[self.pos..end];
                self.pos = end;
                Ok(bytes)
            }
            None => self.err(self.pos, Rule::UnexpectedEnd),
        }
    }

    fn u8(&mut self) -> Res<u8> {
        Ok(self.take(1)?[0])
    }

    fn i32(&mut self) -> Res<i32> {
        let b = self.take(4)?;
        Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn f64(&mut self) -> Res<f64> {
        let b = self.take(8)?;
        let mut w = [0u8; 8];
        w.copy_from_slice(b);
        Ok(f64::from_le_bytes(w))
    }

    fn left(&self) -> usize {
        self.data.len() - self.pos
    }

    /// A length (`i32`, or `u8` for the short codes) that the bytes left can hold at
    /// `per_item` bytes each.
    fn length(&mut self, short: bool, per_item: usize, at: usize) -> Res<u32> {
        let n = if short { i64::from(self.u8()?) } else { i64::from(self.i32()?) };
        let fits = u64::try_from(n).ok().filter(|&n| n.saturating_mul(per_item as u64) <= self.left() as u64);
        match fits {
            Some(n) => Ok(n as u32),
            None => self.err(at, Rule::BadLength),
        }
    }

    /// The next item, or `None` once the root object is complete.
    #[inline(always)]
    pub fn next_item(&mut self) -> Res<Option<Item<'a>>> {
        if self.done {
            return Ok(None);
        }
        // A finished sequence closes; a code object's raw first line comes in its place.
        if let Some(top) = self.depth.checked_sub(1).map(|i| self.stack[i]) {
            let finished = match top.kind {
                Kind::Tuple | Kind::List | Kind::Set | Kind::FrozenSet => top.count == 0,
                Kind::Code => top.count == CODE_OBJECTS,
                Kind::Dict => false,
            };
            if finished {
                return Ok(Some(self.close(top.kind, self.pos)));
            }
            if self.first_line_due {
                self.first_line_due = false;
                let at = self.pos;
                let line = self.i32()?;
                return Ok(Some(Item { offset: at, reference: None, value: Value::CodeFirstLine(line) }));
            }
        }
        let at = self.pos;
        let code = self.u8()?;
        let flagged = code & FLAG_REF != 0;
        let code = code & !FLAG_REF;
        if code == b'0' {
            // NULL ends a dict in key position and is an error anywhere else.
            let top = self.depth.checked_sub(1).map(|i| self.stack[i]);
            return match top {
                Some(t) if t.kind == Kind::Dict && t.count % 2 == 0 => Ok(Some(self.close(Kind::Dict, at))),
                _ => self.err(at, Rule::Null),
            };
        }
        if code == b'r' {
            let index = self.i32()? as u32;
            if index >= self.refs {
                return self.err(at, Rule::RefOutOfRange { index });
            }
            if self.stack[..self.depth].iter().any(|o| o.reference == Some(index)) {
                return self.err(at, Rule::RefToUnfinished { index });
            }
            self.counted();
            return Ok(Some(Item { offset: at, reference: None, value: Value::Ref(index) }));
        }
        let reference = if flagged {
            let index = self.refs;
            self.refs = self
                .refs
                .checked_add(1)
                .filter(|&n| n != u32::MAX)
                .ok_or(MarshalError { offset: at, rule: Rule::TooManyRefs })?;
            Some(index)
        } else {
            None
        };
        let value = match code {
            b'N' => Value::None,
            b'T' => Value::True,
            b'F' => Value::False,
            b'.' => Value::Ellipsis,
            b'S' => Value::StopIteration,
            b'i' => Value::Int(self.i32()?),
            b'l' => self.long(at)?,
            b'g' => Value::Float(self.f64()?),
            b'y' => Value::Complex(self.f64()?, self.f64()?),
            b'f' => {
                let n = self.u8()? as usize;
                Value::FloatText(self.take(n)?)
            }
            b'x' => {
                let n = self.u8()? as usize;
                let re = self.take(n)?;
                let n = self.u8()? as usize;
                Value::ComplexText(re, self.take(n)?)
            }
            b's' => {
                let n = self.length(false, 1, at)?;
                Value::Bytes(self.take(n as usize)?)
            }
            b'z' | b'Z' | b'a' | b'A' | b'u' | b't' => {
                let n = self.length(matches!(code, b'z' | b'Z'), 1, at)?;
                Value::Str { bytes: self.take(n as usize)?, ascii: matches!(code, b'z' | b'Z' | b'a' | b'A') }
            }
            b')' | b'(' | b'[' | b'<' | b'>' => {
                let n = self.length(code == b')', 1, at)?;
                let kind = match code {
                    b'[' => Kind::List,
                    b'<' => Kind::Set,
                    b'>' => Kind::FrozenSet,
                    _ => Kind::Tuple,
                };
                self.open(kind, n, reference, at)?;
                Value::Open { kind, len: Some(n) }
            }
            b'{' => {
                self.open(Kind::Dict, 0, reference, at)?;
                Value::Open { kind: Kind::Dict, len: None }
            }
            b'c' => {
                // argcount, posonlyargcount, kwonlyargcount, stacksize, flags.
                self.take(20)?;
                self.open(Kind::Code, 0, reference, at)?;
                Value::Open { kind: Kind::Code, len: None }
            }
            other => return self.err(at, Rule::UnknownType(other)),
        };
        if !matches!(value, Value::Open { .. }) {
            self.counted();
        }
        Ok(Some(Item { offset: at, reference, value }))
    }

    fn long(&mut self, at: usize) -> Res<Value<'a>> {
        let n = self.i32()?;
        let count = n.unsigned_abs() as usize;
        if n == i32::MIN || count.saturating_mul(2) > self.left() {
            return self.err(at, Rule::BadLength);
        }
        let digits = self.take(count * 2)?;
        let mut last = 0;
        for d in digits.chunks_exact(2) {
            last = u16::from_le_bytes([d[0], d[1]]);
            if last >= 1 << 15 {
                return self.err(at, Rule::DigitOutOfRange);
            }
        }
        if count > 0 && last == 0 {
            return self.err(at, Rule::UnnormalizedLong);
        }
        Ok(Value::Long { negative: n < 0, digits })
    }

    /// Pushes a container (its place in its parent is counted when it closes).
    fn open(&mut self, kind: Kind, count: u32, reference: Option<u32>, at: usize) -> Res<()> {
        if self.depth == self.stack.len() {
            return self.err(at, Rule::TooDeep { limit: self.stack.len() });
        }
        self.stack[self.depth] = Open { kind, count, reference };
        self.depth += 1;
        Ok(())
    }

    fn close(&mut self, kind: Kind, offset: usize) -> Item<'a> {
        self.depth -= 1;
        self.counted();
        Item { offset, reference: None, value: Value::Close(kind) }
    }

    /// One more object is complete in the innermost open container (or the root is).
    fn counted(&mut self) {
        let Some(i) = self.depth.checked_sub(1) else {
            self.done = true;
            return;
        };
        let top = &mut self.stack[i];
        match top.kind {
            Kind::Tuple | Kind::List | Kind::Set | Kind::FrozenSet => top.count -= 1,
            Kind::Dict => top.count = top.count.wrapping_add(1),
            Kind::Code => {
                top.count += 1;
                if top.count == CODE_FIRSTLINE_AFTER {
                    self.first_line_due = true;
                }
            }
        }
    }
}
