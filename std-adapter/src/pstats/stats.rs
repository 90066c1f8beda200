//! What a pstats file holds, as `pstats.Stats` holds it: entries keyed by function, their
//! numbers and callers; every distinct name once.

use std::cmp::Ordering;
use std::fmt::{self, Write as _};

use tachyon_core::marshal::MarshalError;

use crate::hash::{IdHash, IdMap};
use crate::pyfmt::{float_repr, push_int};

/// Deepest nesting of containers read (CPython's own marshal stops at 2000; a stats file
/// needs 4, a code object in a key a few more).
pub const MAX_DEPTH: usize = 200;

/// A Python number as pstats holds it: an int or a float, in 16 bytes (an entry holds four,
/// each caller four more: a hundred thousand functions are tens of megabytes either way).
///
/// An int is its two's-complement 128 bits; a float is its bits under a high word that no
/// int of the range kept has (`i64::MIN`): ints from -2^127 + 2^64 to 2^127 - 1 are held (a file's int outside them is refused when loading; a sum leaving them becomes a
/// float).
#[derive(Clone, Copy)]
pub struct Num {
    hi: i64,
    lo: u64,
}

/// What a [`Num`] holds, to match on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NumValue {
    /// An int.
    Int(i128),
    /// A float.
    Float(f64),
}

impl fmt::Debug for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value().fmt(f)
    }
}

impl Num {
    /// The high word that marks a float.
    const FLOAT: i64 = i64::MIN;

    /// An int that fits a machine word (every int of a real file).
    pub const fn small(i: i64) -> Num {
        Num { hi: i >> 63, lo: i as u64 }
    }

    /// An int, `None` outside the range held (see [`Num`]).
    pub fn int(i: i128) -> Option<Num> {
        let hi = (i >> 64) as i64;
        (hi != Num::FLOAT).then_some(Num { hi, lo: i as u64 })
    }

    /// A float.
    pub fn float(f: f64) -> Num {
        Num { hi: Num::FLOAT, lo: f.to_bits() }
    }

    /// The int or float held.
    pub fn value(self) -> NumValue {
        if self.hi == Num::FLOAT {
            NumValue::Float(f64::from_bits(self.lo))
        } else {
            NumValue::Int((i128::from(self.hi) << 64) | i128::from(self.lo))
        }
    }

    /// The int when it fits a machine word (the common case, without 128-bit arithmetic).
    pub(super) fn as_small(self) -> Option<i64> {
        (self.hi == (self.lo as i64) >> 63).then_some(self.lo as i64)
    }

    pub(crate) fn to_f64(self) -> f64 {
        match self.as_small() {
            Some(small) => small as f64,
            None => match self.value() {
                NumValue::Int(i) => i as f64,
                NumValue::Float(f) => f,
            },
        }
    }

    /// `a + b` as Python adds (int + int stays int; a sum beyond the range held becomes a
    /// float).
    pub(crate) fn add(self, other: Num) -> Num {
        if let (Some(a), Some(b)) = (self.as_small(), other.as_small()) {
            if let Some(sum) = a.checked_add(b) {
                return Num::small(sum);
            }
        }
        match (self.value(), other.value()) {
            (NumValue::Int(a), NumValue::Int(b)) => {
                a.checked_add(b).and_then(Num::int).unwrap_or(Num::float(a as f64 + b as f64))
            }
            _ => Num::float(self.to_f64() + other.to_f64()),
        }
    }

    pub(super) fn is_zero(self) -> bool {
        match self.value() {
            NumValue::Int(i) => i == 0,
            NumValue::Float(f) => f == 0.0,
        }
    }

    /// Python's `a / b` (true division), `b` not zero.
    pub(super) fn div(self, other: Num) -> f64 {
        self.to_f64() / other.to_f64()
    }

    /// Python's `int(x)` for `%d` formatting.
    pub(super) fn trunc(self) -> String {
        match self.value() {
            NumValue::Int(i) => i.to_string(),
            NumValue::Float(f) if f.is_finite() => format!("{}", f.trunc() as i128),
            NumValue::Float(f) => float_repr(f),
        }
    }

    /// Python's `str(x)` (and `repr`).
    pub(super) fn py_str(self) -> String {
        let mut s = String::new();
        self.write_py_str(&mut s);
        s
    }

    /// [`Num::py_str`] appended to `out`.
    pub(super) fn write_py_str(self, out: &mut String) {
        match (self.as_small(), self.value()) {
            (Some(small), _) => push_int(out, small),
            (None, NumValue::Int(i)) => {
                let _ = write!(out, "{i}");
            }
            (None, NumValue::Float(f)) => out.push_str(&float_repr(f)),
        }
    }

    /// Python's comparison of two numbers, exact across int and float; `None` when either
    /// is NaN (every comparison is false).
    pub(super) fn py_cmp(self, other: Num) -> Option<Ordering> {
        match (self.value(), other.value()) {
            (NumValue::Int(a), NumValue::Int(b)) => Some(a.cmp(&b)),
            (NumValue::Float(a), NumValue::Float(b)) => a.partial_cmp(&b),
            (NumValue::Int(a), NumValue::Float(b)) => int_float_cmp(a, b),
            (NumValue::Float(a), NumValue::Int(b)) => int_float_cmp(b, a).map(Ordering::reverse),
        }
    }

    /// Equal as Python's `==` says (1 == 1.0), for keys and `nc != cc`.
    pub(super) fn py_eq(self, other: Num) -> bool {
        if self.hi != Num::FLOAT && other.hi != Num::FLOAT {
            return self.hi == other.hi && self.lo == other.lo;
        }
        self.py_cmp(other) == Some(Ordering::Equal)
    }

    /// A hashable form equal for numbers Python finds equal.
    pub(super) fn key(self) -> NumKey {
        match self.value() {
            NumValue::Int(i) => NumKey::Int(i),
            NumValue::Float(f) if f.fract() == 0.0 && f.abs() < 1.7e38 => NumKey::Int(f as i128),
            NumValue::Float(f) => NumKey::Float(f.to_bits()),
        }
    }

    pub(super) fn is_nan(self) -> bool {
        matches!(self.value(), NumValue::Float(f) if f.is_nan())
    }
}

pub(super) fn int_float_cmp(a: i128, b: f64) -> Option<Ordering> {
    if b.is_nan() {
        return None;
    }
    let af = a as f64;
    match af.partial_cmp(&b) {
        Some(Ordering::Equal) if b.abs() < 1.7e38 => Some(a.cmp(&(b as i128))),
        other => other,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum NumKey {
    Int(i128),
    Float(u64),
}

/// A code object, as far as pstats shows it (`python -m profile` puts one in a key).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Code {
    /// `co_name`.
    pub name: String,
    /// `co_filename`.
    pub filename: String,
    /// `co_firstlineno`.
    pub firstlineno: i32,
}

/// A part of a key: a str, or a code object where `profile` puts one.
/// A part of a key: a str, or a code object where `profile` puts one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Name {
    /// A str.
    Str(Box<str>),
    /// A code object.
    Code(Code),
}

impl Name {
    /// The first byte of a str (to bring it into the cache), 0 for anything else.
    pub(super) fn first_byte(&self) -> u8 {
        match self {
            Name::Str(s) => s.as_bytes().first().copied().unwrap_or(0),
            Name::Code(_) => 0,
        }
    }
}

impl fmt::Display for Name {
    /// `%s`: the text, or the code object's repr. Python's repr has the object's address,
    /// which no file records: twelve zero digits (the width of an x86-64 heap address) stand for it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Name::Str(s) => f.write_str(s),
            Name::Code(c) => {
                write!(f, "<code object {} at 0x000000000000, file \"{}\", line {}>", c.name, c.filename, c.firstlineno)
            }
        }
    }
}

/// A name's place in [`Stats::names`]: every distinct name is held once, so keys are small
/// values compared and hashed as numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NameId(pub u32);

/// A function key `(filename, lineno, funcname)`.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    /// File name.
    pub filename: NameId,
    /// Line (an int, or a float Python also takes).
    pub line: Num,
    /// Function name.
    pub name: NameId,
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.filename == other.filename && self.line.py_eq(other.line) && self.name == other.name
    }
}

impl Eq for Key {}

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.filename.hash(h);
        self.line.key().hash(h);
        self.name.hash(h);
    }
}

/// What a callers dict holds per caller.
#[derive(Debug, Clone)]
pub enum Calls {
    /// `profile` and the sampler: a count.
    Count(Num),
    /// `cProfile`: `(nc, cc, tt, ct)`.
    Timed([Num; 4]),
    /// Anything else `pstats.Stats` loads (a list, a tuple of another length): printed with
    /// its repr as a count is, or, a tuple, refused when printed as Python's unpacking
    /// refuses it.
    Other {
        /// Python's repr of the value.
        repr: String,
        /// The value is a tuple (of a length other than 4).
        tuple: bool,
        /// Its items when it is a list or tuple of numbers (so it can be written back).
        numbers: Option<Vec<Num>>,
    },
}

impl Calls {
    /// The calls and the time spent below them as the call graphs (`dot`, `callgrind`) take
    /// them, as gprof2dot does: cProfile's primitive calls `cc` and `ct` (a tuple of several
    /// such groups summed group by group), or a plain count and no time of its own (`None`:
    /// the graph gives the caller a share of the callee's). Anything else is refused.
    pub(super) fn calls_and_time(&self) -> Result<(Num, Option<f64>), String> {
        match self {
            Calls::Timed([_, cc, _, ct]) => Ok((*cc, Some(ct.to_f64()))),
            Calls::Count(n) => Ok((*n, None)),
            Calls::Other { tuple: true, numbers: Some(items), .. } if items.len() % 4 == 0 => {
                let (n, t) =
                    items.chunks_exact(4).fold((Num::small(0), 0.0), |(n, t), g| (n.add(g[1]), t + g[3].to_f64()));
                Ok((n, Some(t)))
            }
            Calls::Other { repr, .. } => Err(format!(
                "the caller value {repr} is neither a count nor (nc, cc, tt, ct) groups (gprof2dot fails on it)"
            )),
        }
    }

    pub(super) fn add(self, other: Calls) -> Calls {
        match (self, other) {
            (Calls::Timed(a), Calls::Timed(b)) => {
                Calls::Timed([a[0].add(b[0]), a[1].add(b[1]), a[2].add(b[2]), a[3].add(b[3])])
            }
            (Calls::Count(a), Calls::Count(b)) => Calls::Count(a.add(b)),
            // Python would fail (tuple + int) or concatenate lists; keep the first.
            (a, _) => a,
        }
    }
}

/// One function's statistics.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The function.
    pub key: Key,
    /// Primitive (non-recursive) calls.
    pub cc: Num,
    /// All calls.
    pub nc: Num,
    /// Own time, seconds.
    pub tt: Num,
    /// Cumulative time, seconds.
    pub ct: Num,
    /// Callers in the dict's order.
    pub callers: Vec<(Key, Calls)>,
}

/// A loaded pstats file.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Every distinct file and function name, once; keys refer to them by [`NameId`].
    pub names: Vec<Name>,
    /// Entries in the dict's order.
    pub entries: Vec<Entry>,
    /// The file had 3.15's `("__sampled__",)` key (dropped from the entries).
    pub sampled: bool,
    /// `pstats.Stats.total_tt` where it is not the entries' own times summed in order: after
    /// `add`, which sums the files' totals, and `strip_dirs`, which keeps the total it had.
    /// Floats summed in another order can differ in the last place, and the table prints the
    /// total to three decimals. `None`: the entries' sum ([`Stats::total_tt`]).
    pub total_tt: Option<Num>,
}

impl Stats {
    /// Own time of the whole profile as `pstats.Stats` holds it: the running total where
    /// one is kept, else the entries' times summed in order (as loading a file sums them).
    pub fn total_tt(&self) -> Num {
        self.total_tt.unwrap_or_else(|| self.entries.iter().fold(Num::small(0), |sum, e| sum.add(e.tt)))
    }

    /// Adds `entry` as a dict assignment does: a repeated key replaces the value where the
    /// first one stands (`index` maps keys to their place in [`Stats::entries`]).
    pub(super) fn set_entry(&mut self, index: &mut IdMap<Key, usize>, entry: Entry) {
        match index.get(&entry.key) {
            Some(&i) => self.entries[i] = entry,
            None => {
                index.insert(entry.key, self.entries.len());
                self.entries.push(entry);
            }
        }
    }

    /// Applies the rule of [`Stats::set_entry`] to entries pushed as they came. Keys repeat
    /// only in crafted files, so this first checks, with one table of the final size (a table
    /// grown while reading is rehashed again and again), and rebuilds only when one does.
    pub(super) fn settle_entries(&mut self) {
        let mut index: IdMap<Key, usize> = IdMap::with_capacity_and_hasher(self.entries.len(), IdHash::default());
        if self.entries.iter().enumerate().all(|(i, e)| index.insert(e.key, i).is_none()) {
            return;
        }
        index.clear();
        for entry in std::mem::take(&mut self.entries) {
            self.set_entry(&mut index, entry);
        }
    }

    /// The name behind an id.
    pub fn name(&self, id: NameId) -> &Name {
        &self.names[id.0 as usize]
    }

    /// `pstats.func_std_string`: `{built-in …}` for `('~', 0, '<…>')`, else
    /// `file:line(name)`.
    pub fn std_string(&self, key: &Key) -> String {
        let mut out = String::new();
        self.write_std_string(key, &mut out);
        out
    }

    /// [`Stats::std_string`] appended to `out`.
    pub fn write_std_string(&self, key: &Key, out: &mut String) {
        let (file, name) = (self.name(key.filename), self.name(key.name));
        if matches!(file, Name::Str(s) if &**s == "~") && key.line.py_eq(Num::small(0)) {
            match name {
                Name::Str(n) if n.len() >= 2 && n.starts_with('<') && n.ends_with('>') => {
                    out.push('{');
                    out.push_str(&n[1..n.len() - 1]);
                    out.push('}');
                }
                Name::Str(n) => out.push_str(n),
                code => {
                    let _ = write!(out, "{code}");
                }
            }
            return;
        }
        match file {
            Name::Str(f) => out.push_str(f),
            code => {
                let _ = write!(out, "{code}");
            }
        }
        out.push(':');
        match key.line.as_small() {
            Some(i) => {
                let _ = write!(out, "{i}");
            }
            None => out.push_str(&key.line.trunc()),
        }
        out.push('(');
        match name {
            Name::Str(n) => out.push_str(n),
            code => {
                let _ = write!(out, "{code}");
            }
        }
        out.push(')');
    }
}

/// Whether `key` is `("jprofile", 0, "profiler")`, the caller that makes `print_stats` name
/// its function above the totals (an id not in `names` is no name).
pub(super) fn is_jprofile(names: &[Name], key: &Key) -> bool {
    let is = |id: NameId, text: &str| matches!(names.get(id.0 as usize), Some(Name::Str(s)) if &**s == text);
    is(key.filename, "jprofile") && key.line.py_eq(Num::small(0)) && is(key.name, "profiler")
}

/// Names made unique: each distinct one gets one [`NameId`].
#[derive(Default)]
pub(super) struct Names {
    pub(super) names: Vec<Name>,
    pub(super) index: IdMap<Name, NameId>,
}

impl Names {
    pub(super) fn from(names: Vec<Name>) -> Names {
        let index = names.iter().enumerate().map(|(i, n)| (n.clone(), NameId(i as u32))).collect();
        Names { names, index }
    }

    pub(super) fn intern(&mut self, name: Name) -> NameId {
        if let Some(&id) = self.index.get(&name) {
            return id;
        }
        let id = NameId(self.names.len() as u32);
        self.names.push(name.clone());
        self.index.insert(name, id);
        id
    }
}

/// Why a file is not a stats dictionary.
#[derive(Debug, Clone, PartialEq)]
pub enum PstatsError {
    /// The marshal data is bad.
    Marshal(MarshalError),
    /// Valid marshal data that `pstats.Stats` would not load, or that this reader cannot
    /// represent (an int beyond 128 bits, or within 2^64 of -2^127), with the offset of the
    /// object.
    Shape {
        /// Offset.
        offset: usize,
        /// What is wrong.
        what: String,
    },
}

impl fmt::Display for PstatsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PstatsError::Marshal(e) => e.fmt(f),
            PstatsError::Shape { offset, what } => write!(f, "not a pstats dictionary at offset {offset}: {what}"),
        }
    }
}

impl std::error::Error for PstatsError {}

/// A marshal long's value, `None` outside the range a [`Num`] holds.
pub(super) fn long_value(negative: bool, digits: &[u8]) -> Option<i128> {
    let mut v: i128 = 0;
    for d in digits.chunks_exact(2).rev() {
        let digit = i128::from(u16::from_le_bytes([d[0], d[1]]));
        v = v.checked_mul(1 << 15)?.checked_add(digit)?;
    }
    let v = if negative { -v } else { v };
    Num::int(v).map(|_| v)
}
