//! pstats files as input: the marshalled dictionary `cProfile`, `profile`, 3.15's
//! `profiling.tracing` and `profiling.sampling --pstats` write, loaded as Python's
//! `pstats.Stats` loads it, and printed as its `print_stats`, `print_callers` and
//! `print_callees` print (`Lib/pstats.py` of 3.11 and 3.15.2 is the reference: the two print
//! alike, except that 3.15 prints a file with the `("__sampled__",)` marker as sampled
//! statistics, which 3.11 cannot load at all).
//!
//! Loading goes through [`tachyon_core::marshal::Decoder`]: no recursion (nesting is bounded
//! by [`MAX_DEPTH`]), back references shared rather than copied (so a file of references to
//! references cannot make memory grow beyond a fixed multiple of its size), and every value
//! checked against what `pstats.Stats` accepts (keys of three items with a numeric middle,
//! values of five), with the offset of the entry that breaks it. Files of the shape every
//! profiler writes are read straight into entries, without a tree of their objects (`shape`);
//! the tree reader reads the rest and says what is wrong with a bad file. Every distinct name is held
//! once ([`Stats::names`]); keys are small values over them, so that tables of a hundred
//! thousand functions load, sort and print in a fraction of Python's time.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt::{self, Write as _};

use tachyon_core::marshal::{Decoder, EncodeError, Encoder, Kind, MarshalError, Open, Value};

use crate::hash::{IdHash, IdMap};
use crate::pyfmt::{f8, f8_into, float_repr, push_int};

mod shape;

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
    fn as_small(self) -> Option<i64> {
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

    fn is_zero(self) -> bool {
        match self.value() {
            NumValue::Int(i) => i == 0,
            NumValue::Float(f) => f == 0.0,
        }
    }

    /// Python's `a / b` (true division), `b` not zero.
    fn div(self, other: Num) -> f64 {
        self.to_f64() / other.to_f64()
    }

    /// Python's `int(x)` for `%d` formatting.
    fn trunc(self) -> String {
        match self.value() {
            NumValue::Int(i) => i.to_string(),
            NumValue::Float(f) if f.is_finite() => format!("{}", f.trunc() as i128),
            NumValue::Float(f) => float_repr(f),
        }
    }

    /// Python's `str(x)` (and `repr`).
    fn py_str(self) -> String {
        let mut s = String::new();
        self.write_py_str(&mut s);
        s
    }

    /// [`Num::py_str`] appended to `out`.
    fn write_py_str(self, out: &mut String) {
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
    fn py_cmp(self, other: Num) -> Option<Ordering> {
        match (self.value(), other.value()) {
            (NumValue::Int(a), NumValue::Int(b)) => Some(a.cmp(&b)),
            (NumValue::Float(a), NumValue::Float(b)) => a.partial_cmp(&b),
            (NumValue::Int(a), NumValue::Float(b)) => int_float_cmp(a, b),
            (NumValue::Float(a), NumValue::Int(b)) => int_float_cmp(b, a).map(Ordering::reverse),
        }
    }

    /// Equal as Python's `==` says (1 == 1.0), for keys and `nc != cc`.
    fn py_eq(self, other: Num) -> bool {
        if self.hi != Num::FLOAT && other.hi != Num::FLOAT {
            return self.hi == other.hi && self.lo == other.lo;
        }
        self.py_cmp(other) == Some(Ordering::Equal)
    }

    /// A hashable form equal for numbers Python finds equal.
    fn key(self) -> NumKey {
        match self.value() {
            NumValue::Int(i) => NumKey::Int(i),
            NumValue::Float(f) if f.fract() == 0.0 && f.abs() < 1.7e38 => NumKey::Int(f as i128),
            NumValue::Float(f) => NumKey::Float(f.to_bits()),
        }
    }

    fn is_nan(self) -> bool {
        matches!(self.value(), NumValue::Float(f) if f.is_nan())
    }
}

fn int_float_cmp(a: i128, b: f64) -> Option<Ordering> {
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
enum NumKey {
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
    fn first_byte(&self) -> u8 {
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
    fn add(self, other: Calls) -> Calls {
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
    fn set_entry(&mut self, index: &mut IdMap<Key, usize>, entry: Entry) {
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
    fn settle_entries(&mut self) {
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
fn is_jprofile(names: &[Name], key: &Key) -> bool {
    let is = |id: NameId, text: &str| matches!(names.get(id.0 as usize), Some(Name::Str(s)) if &**s == text);
    is(key.filename, "jprofile") && key.line.py_eq(Num::small(0)) && is(key.name, "profiler")
}

/// Names made unique: each distinct one gets one [`NameId`].
#[derive(Default)]
struct Names {
    names: Vec<Name>,
    index: IdMap<Name, NameId>,
}

impl Names {
    fn from(names: Vec<Name>) -> Names {
        let index = names.iter().enumerate().map(|(i, n)| (n.clone(), NameId(i as u32))).collect();
        Names { names, index }
    }

    fn intern(&mut self, name: Name) -> NameId {
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

// ------------------------------------------------------------------------------------------
// Loading: marshal items → a flat tree (nodes in one vector, children in another, references
// as node indices, so shared objects are never copied) → entries.

/// A value of the file, 16 bytes: ints beyond 64 bits sit in [`Tree::big`].
#[derive(Debug, Clone, Copy)]
enum Node {
    None,
    Bool(bool),
    Int(i64),
    /// An int of 65 to 128 bits: `big[index]`.
    Big(u32),
    Float(f64),
    Name(NameId),
    /// A tuple (`tuple`) or list: `children[start..start + len]`.
    Seq {
        start: u32,
        len: u32,
        tuple: bool,
    },
    /// `children[start..start + 2 * len]`: key, value, key, value…
    Dict {
        start: u32,
        len: u32,
    },
    /// What pstats never looks into.
    Other(Opaque),
}

/// Values pstats never looks into, by kind (for messages).
#[derive(Debug, Clone, Copy)]
enum Opaque {
    Set,
    Singleton,
    Complex,
    Bytes,
    /// An int outside the range a [`Num`] holds.
    Huge,
}

impl Opaque {
    fn name(self) -> &'static str {
        match self {
            Opaque::Set => "set",
            Opaque::Singleton => "singleton",
            Opaque::Complex => "complex",
            Opaque::Bytes => "bytes",
            Opaque::Huge => "int beyond 128 bits (or within 2^64 of -2^127)",
        }
    }
}

impl Node {
    fn type_name(&self) -> &'static str {
        match self {
            Node::None => "None",
            Node::Bool(_) => "bool",
            Node::Int(_) | Node::Big(_) => "int",
            Node::Float(_) => "float",
            Node::Name(_) => "str",
            Node::Seq { tuple: true, .. } => "tuple",
            Node::Seq { tuple: false, .. } => "list",
            Node::Dict { .. } => "dict",
            Node::Other(t) => t.name(),
        }
    }
}

struct Tree {
    nodes: Vec<Node>,
    /// Offset of each node's first byte, kept only when a reading is repeated to say where
    /// an error is (a second pass, on the error path only).
    offsets: Option<Vec<usize>>,
    children: Vec<u32>,
    big: Vec<i128>,
}

impl Tree {
    fn node(&self, id: u32) -> Node {
        self.nodes[id as usize]
    }

    fn num(&self, id: u32) -> Option<Num> {
        match self.node(id) {
            Node::Int(i) => Some(Num::small(i)),
            // Only ints of the range held are kept (`long_value`).
            Node::Big(b) => Num::int(self.big[b as usize]),
            Node::Float(f) => Some(Num::float(f)),
            Node::Bool(b) => Some(Num::small(i64::from(b))),
            _ => None,
        }
    }

    fn offset(&self, id: u32) -> usize {
        self.offsets.as_ref().and_then(|o| o.get(id as usize).copied()).unwrap_or(0)
    }

    fn items(&self, start: u32, len: u32) -> &[u32] {
        &self.children[start as usize..start as usize + len as usize]
    }
}

/// A container being read: where its children start in the pending list.
struct Partial {
    kind: Kind,
    first_child: usize,
    reference: Option<u32>,
    first_line: i32,
    offset: usize,
}

/// A marshal long's value, `None` outside the range a [`Num`] holds.
fn long_value(negative: bool, digits: &[u8]) -> Option<i128> {
    let mut v: i128 = 0;
    for d in digits.chunks_exact(2).rev() {
        let digit = i128::from(u16::from_le_bytes([d[0], d[1]]));
        v = v.checked_mul(1 << 15)?.checked_add(digit)?;
    }
    let v = if negative { -v } else { v };
    Num::int(v).map(|_| v)
}

fn shape<T>(offset: usize, what: impl Into<String>) -> Result<T, PstatsError> {
    Err(PstatsError::Shape { offset, what: what.into() })
}

/// The root object of `data` as a flat tree, its strs and code objects interned in `names`
/// (with every node's offset when `offsets`).
fn read_tree(data: &[u8], names: &mut Names, offsets: bool) -> Result<(Tree, u32), PstatsError> {
    let mut stack = vec![Open::EMPTY; MAX_DEPTH];
    let mut d = Decoder::new(data, &mut stack);
    // Room for a node every 8 bytes of the file (a real file has one every 10 or so): grown
    // if needed, never sized beyond what the bytes can hold.
    let guess = data.len() / 8;
    let mut tree = Tree {
        nodes: Vec::with_capacity(guess),
        offsets: offsets.then(|| Vec::with_capacity(guess)),
        children: Vec::with_capacity(guess),
        big: Vec::new(),
    };
    let mut refs: Vec<u32> = Vec::new();
    let mut open: Vec<Partial> = Vec::new();
    // Children of the open containers, innermost last.
    let mut pending: Vec<u32> = Vec::new();
    let mut strs: IdMap<&[u8], NameId> = IdMap::default();
    let mut root = None;
    let push = |tree: &mut Tree, node: Node, offset: usize| -> u32 {
        tree.nodes.push(node);
        if let Some(o) = &mut tree.offsets {
            o.push(offset);
        }
        (tree.nodes.len() - 1) as u32
    };
    while let Some(item) = d.next_item().map_err(PstatsError::Marshal)? {
        let id = match item.value {
            Value::Open { kind, .. } => {
                if item.reference.is_some() {
                    // Filled in when the container is complete (the decoder refuses
                    // references to it until then).
                    refs.push(u32::MAX);
                }
                open.push(Partial {
                    kind,
                    first_child: pending.len(),
                    reference: item.reference,
                    first_line: 0,
                    offset: item.offset,
                });
                continue;
            }
            Value::CodeFirstLine(line) => {
                if let Some(p) = open.last_mut() {
                    p.first_line = line;
                }
                continue;
            }
            Value::Close(_) => {
                let Some(p) = open.pop() else { continue };
                let start = tree.children.len() as u32;
                let items = &pending[p.first_child..];
                let node = match p.kind {
                    Kind::Tuple | Kind::List => {
                        tree.children.extend_from_slice(items);
                        Node::Seq { start, len: items.len() as u32, tuple: p.kind == Kind::Tuple }
                    }
                    Kind::Dict => {
                        tree.children.extend_from_slice(items);
                        Node::Dict { start, len: (items.len() / 2) as u32 }
                    }
                    Kind::Set | Kind::FrozenSet => Node::Other(Opaque::Set),
                    Kind::Code => {
                        let text = |i: usize| match items.get(i).map(|&c| tree.node(c)) {
                            Some(Node::Name(n)) => match &names.names[n.0 as usize] {
                                Name::Str(s) => s.to_string(),
                                other => other.to_string(),
                            },
                            _ => String::new(),
                        };
                        let code = Code { name: text(6), filename: text(5), firstlineno: p.first_line };
                        Node::Name(names.intern(Name::Code(code)))
                    }
                };
                pending.truncate(p.first_child);
                let id = push(&mut tree, node, p.offset);
                if let Some(r) = p.reference {
                    refs[r as usize] = id;
                }
                id
            }
            Value::Ref(index) => refs.get(index as usize).copied().filter(|&r| r != u32::MAX).unwrap_or_else(|| {
                // The decoder only lets through references to complete objects.
                push(&mut tree, Node::None, item.offset)
            }),
            scalar => {
                let node = match scalar {
                    Value::None => Node::None,
                    Value::True => Node::Bool(true),
                    Value::False => Node::Bool(false),
                    Value::Int(i) => Node::Int(i.into()),
                    Value::Long { negative, digits } => match long_value(negative, digits) {
                        Some(v) => match i64::try_from(v) {
                            Ok(small) => Node::Int(small),
                            Err(_) => {
                                tree.big.push(v);
                                Node::Big((tree.big.len() - 1) as u32)
                            }
                        },
                        None => Node::Other(Opaque::Huge),
                    },
                    Value::Float(f) => Node::Float(f),
                    Value::FloatText(t) => match std::str::from_utf8(t).ok().and_then(|s| s.trim().parse::<f64>().ok())
                    {
                        Some(f) => Node::Float(f),
                        None => return shape(item.offset, "a float's text is not a number"),
                    },
                    Value::Str { bytes, .. } => Node::Name(match strs.get(bytes) {
                        Some(&id) => id,
                        None => {
                            let id = names.intern(Name::Str(String::from_utf8_lossy(bytes).into()));
                            strs.insert(bytes, id);
                            id
                        }
                    }),
                    Value::Ellipsis | Value::StopIteration => Node::Other(Opaque::Singleton),
                    Value::Complex(..) | Value::ComplexText(..) => Node::Other(Opaque::Complex),
                    Value::Bytes(_) => Node::Other(Opaque::Bytes),
                    Value::Open { .. } | Value::Close(_) | Value::Ref(_) | Value::CodeFirstLine(_) => {
                        unreachable!("matched above")
                    }
                };
                let id = push(&mut tree, node, item.offset);
                if item.reference.is_some() {
                    refs.push(id);
                }
                id
            }
        };
        if open.is_empty() {
            root = Some(id);
        } else {
            pending.push(id);
        }
    }
    match root {
        Some(r) => Ok((tree, r)),
        None => shape(0, "no object"),
    }
}

/// Python's `repr` of a loaded value (what `%r` prints of a caller's odd value). Nesting is
/// bounded by the decoder's depth; strings get repr's quotes and common escapes.
fn py_repr(tree: &Tree, names: &Names, id: u32) -> String {
    match tree.node(id) {
        Node::None => "None".into(),
        Node::Bool(b) => if b { "True" } else { "False" }.into(),
        Node::Int(i) => i.to_string(),
        Node::Big(b) => tree.big[b as usize].to_string(),
        Node::Float(f) => float_repr(f),
        Node::Name(n) => match &names.names[n.0 as usize] {
            Name::Str(s) => crate::pyfmt::str_repr(s),
            code => code.to_string(),
        },
        Node::Seq { start, len, tuple } => {
            let inner: Vec<String> = tree.items(start, len).iter().map(|&c| py_repr(tree, names, c)).collect();
            match (tuple, inner.len()) {
                (true, 1) => format!("({},)", inner[0]),
                (true, _) => format!("({})", inner.join(", ")),
                (false, _) => format!("[{}]", inner.join(", ")),
            }
        }
        Node::Dict { start, len } => {
            let items = tree.items(start, 2 * len);
            let inner: Vec<String> = items
                .chunks_exact(2)
                .map(|kv| format!("{}: {}", py_repr(tree, names, kv[0]), py_repr(tree, names, kv[1])))
                .collect();
            format!("{{{}}}", inner.join(", "))
        }
        Node::Other(t) => format!("<{}>", t.name()),
    }
}

fn key_of(tree: &Tree, id: u32, offset: usize) -> Result<Key, PstatsError> {
    let node = tree.node(id);
    let Node::Seq { start, len, tuple: true } = node else {
        return shape(offset, format!("a key is a {}, not a tuple", node.type_name()));
    };
    if len != 3 {
        return shape(offset, format!("a key has {len} items, not 3"));
    }
    let items = tree.items(start, len);
    let part = |c: u32| match tree.node(c) {
        Node::Name(n) => Ok(n),
        other => shape(offset, format!("a key's file or function name is a {}", other.type_name())),
    };
    let Some(line) = tree.num(items[1]) else {
        return shape(offset, format!("a key's line is a {}, not a number", tree.node(items[1]).type_name()));
    };
    Ok(Key { filename: part(items[0])?, line, name: part(items[2])? })
}

fn num_of(tree: &Tree, id: u32, offset: usize, what: &str) -> Result<Num, PstatsError> {
    tree.num(id).ok_or_else(|| PstatsError::Shape {
        offset,
        what: format!("{what} is a {}, not a number", tree.node(id).type_name()),
    })
}

/// Loads a pstats file as `pstats.Stats` does.
pub fn load(data: &[u8]) -> Result<Stats, PstatsError> {
    if let Some(stats) = shape::load(data, shape::Callers::All) {
        return Ok(stats);
    }
    load_tree(data)
}

/// [`load`] for [`print()`] with `options`: the same files load, with the same errors, and
/// print the same. Without `callers` or `callees`, printing looks at callers only for
/// `("jprofile", 0, "profiler")`, so every caller is read and checked but an entry keeps only
/// that one, if it has it: on a large file about half the work, most of a file being callers.
pub fn load_for_print(data: &[u8], options: &PrintOptions) -> Result<Stats, PstatsError> {
    if options.callers || options.callees {
        return load(data);
    }
    if let Some(stats) = shape::load(data, shape::Callers::Jprofile) {
        return Ok(stats);
    }
    let mut stats = load_tree(data)?;
    for e in &mut stats.entries {
        let jprofile = e.callers.iter().position(|(k, _)| is_jprofile(&stats.names, k));
        e.callers = jprofile.map(|i| e.callers.swap_remove(i)).into_iter().collect();
    }
    Ok(stats)
}

/// [`load`] through the general reader alone (a tree of every object of the file).
pub fn load_tree(data: &[u8]) -> Result<Stats, PstatsError> {
    let mut names = Names::default();
    let (tree, root) = read_tree(data, &mut names, false)?;
    match interpret(&tree, root, names) {
        // The error names a node: read again, with offsets, to say where it is.
        Err(PstatsError::Shape { offset: node, what }) => {
            let (tree, _) = read_tree(data, &mut Names::default(), true)?;
            Err(PstatsError::Shape { offset: tree.offset(node as u32), what })
        }
        other => other,
    }
}

/// The entries of a tree. Its errors' `offset` is the node's index in the tree, made a byte
/// offset by [`load`].
fn interpret(tree: &Tree, root: u32, names: Names) -> Result<Stats, PstatsError> {
    let offset = root as usize;
    let root_node = tree.node(root);
    let Node::Dict { start, len } = root_node else {
        return shape(offset, format!("the file holds a {}, not a dict", root_node.type_name()));
    };
    let marker = names.names.iter().position(|n| matches!(n, Name::Str(s) if &**s == "__sampled__"));
    let mut stats = Stats::default();
    let mut index: IdMap<Key, usize> = IdMap::default();
    let mut seen: IdMap<Key, usize> = IdMap::default();
    for kv in tree.items(start, 2 * len).chunks_exact(2) {
        let (k, v) = (kv[0], kv[1]);
        let at = k as usize;
        if let Node::Seq { start, len: 1, tuple: true } = tree.node(k) {
            if matches!(tree.node(tree.items(start, 1)[0]), Node::Name(n) if Some(n.0 as usize) == marker) {
                stats.sampled = true;
                continue;
            }
        }
        let key = key_of(tree, k, at)?;
        // A list unpacks as well as a tuple.
        let value = tree.node(v);
        let Node::Seq { start: vs, len: vl, .. } = value else {
            return shape(at, format!("a value is a {}, not a tuple", value.type_name()));
        };
        if vl != 5 {
            return shape(at, format!("a value has {vl} items, not 5"));
        }
        let fields = tree.items(vs, vl);
        let callers_node = tree.node(fields[4]);
        let Node::Dict { start: cs, len: cl } = callers_node else {
            return shape(at, format!("callers are a {}, not a dict", callers_node.type_name()));
        };
        let mut list: Vec<(Key, Calls)> = Vec::with_capacity(cl as usize);
        seen.clear();
        for ckv in tree.items(cs, 2 * cl).chunks_exact(2) {
            let cat = ckv[0] as usize;
            let caller = key_of(tree, ckv[0], cat)?;
            let cv = tree.node(ckv[1]);
            let calls = match cv {
                Node::Seq { start, len: 4, tuple: true }
                    if tree.items(start, 4).iter().all(|&c| tree.num(c).is_some()) =>
                {
                    let t = tree.items(start, 4);
                    Calls::Timed([
                        num_of(tree, t[0], cat, "a caller's nc")?,
                        num_of(tree, t[1], cat, "a caller's cc")?,
                        num_of(tree, t[2], cat, "a caller's tt")?,
                        num_of(tree, t[3], cat, "a caller's ct")?,
                    ])
                }
                other => match tree.num(ckv[1]) {
                    Some(n) => Calls::Count(n),
                    None => Calls::Other {
                        repr: py_repr(tree, &names, ckv[1]),
                        tuple: matches!(other, Node::Seq { tuple: true, .. }),
                        numbers: match other {
                            Node::Seq { start, len, .. } => {
                                tree.items(start, len).iter().map(|&c| tree.num(c)).collect()
                            }
                            _ => None,
                        },
                    },
                },
            };
            match seen.get(&caller) {
                Some(&i) => list[i].1 = calls,
                None => {
                    seen.insert(caller, list.len());
                    list.push((caller, calls));
                }
            }
        }
        let entry = Entry {
            key,
            cc: num_of(tree, fields[0], at, "cc")?,
            nc: num_of(tree, fields[1], at, "nc")?,
            tt: num_of(tree, fields[2], at, "tt")?,
            ct: num_of(tree, fields[3], at, "ct")?,
            callers: list,
        };
        stats.set_entry(&mut index, entry);
    }
    if stats.entries.is_empty() {
        return shape(offset, "an empty dict (pstats: \"Cannot create or construct\")");
    }
    stats.names = names.names;
    Ok(stats)
}

// ------------------------------------------------------------------------------------------
// Adding, as Stats.add adds.

/// `tachyon dump` of a pstats file: one JSON line per entry in the dict's order,
/// `{"file", "line", "function", "cc", "nc", "tt", "ct", "callers"}`, each caller
/// `[file, line, function, value]` with `value` a count or cProfile's `[nc, cc, tt, ct]`.
/// Numbers are JSON numbers where JSON holds them; an int beyond 64 bits, a float that is not
/// finite and a value of another shape are strings of Python's repr. Returns the entries.
pub fn dump(stats: &Stats, out: &mut impl std::io::Write) -> std::io::Result<u64> {
    let name = |id: NameId| stats.names.get(id.0 as usize).map_or_else(String::new, |n| n.to_string());
    let number = |n: Num| match n.value() {
        NumValue::Int(i) => i64::try_from(i).map_or_else(|_| serde_json::Value::from(i.to_string()), Into::into),
        NumValue::Float(f) if f.is_finite() => serde_json::Value::from(f),
        NumValue::Float(f) => serde_json::Value::from(float_repr(f)),
    };
    for e in &stats.entries {
        let callers: Vec<serde_json::Value> = e
            .callers
            .iter()
            .map(|(k, calls)| {
                let value = match calls {
                    Calls::Count(n) => number(*n),
                    Calls::Timed(t) => serde_json::Value::from(t.iter().map(|&n| number(n)).collect::<Vec<_>>()),
                    Calls::Other { repr, .. } => serde_json::Value::from(repr.as_str()),
                };
                serde_json::json!([name(k.filename), number(k.line), name(k.name), value])
            })
            .collect();
        let line = serde_json::json!({
            "file": name(e.key.filename), "line": number(e.key.line), "function": name(e.key.name),
            "cc": number(e.cc), "nc": number(e.nc), "tt": number(e.tt), "ct": number(e.ct), "callers": callers,
        });
        serde_json::to_writer(&mut *out, &line)?;
        out.write_all(b"\n")?;
    }
    Ok(stats.entries.len() as u64)
}

/// `pstats.Stats(first, *rest)`: the first file, then the others added in reverse order (as
/// `Stats.add` walks its arguments); each entry's numbers summed, its callers merged
/// (`add_callers`: the earlier callers first, cProfile's tuples summed item by item, counts
/// summed); new keys after the existing ones. The sum is sampled if the first file is (3.15
/// makes the object a `SampledStats` from its first file).
pub fn merge(files: &[Stats]) -> Stats {
    let Some((first, rest)) = files.split_first() else { return Stats::default() };
    let mut sum = first.clone();
    // `self.total_tt += item.total_tt`, in the order `add` takes the items.
    sum.total_tt = Some(rest.iter().rev().fold(first.total_tt(), |total, item| total.add(item.total_tt())));
    let mut names = Names::from(std::mem::take(&mut sum.names));
    let mut index: IdMap<Key, usize> = sum.entries.iter().enumerate().map(|(i, e)| (e.key, i)).collect();
    for item in rest.iter().rev() {
        // The item's names as the sum's.
        let ids: Vec<NameId> = item.names.iter().map(|n| names.intern(n.clone())).collect();
        let map = |k: &Key| Key { filename: ids[k.filename.0 as usize], line: k.line, name: ids[k.name.0 as usize] };
        for e in &item.entries {
            let key = map(&e.key);
            match index.get(&key) {
                Some(&i) => {
                    let t = &mut sum.entries[i];
                    t.cc = e.cc.add(t.cc);
                    t.nc = e.nc.add(t.nc);
                    t.tt = e.tt.add(t.tt);
                    t.ct = e.ct.add(t.ct);
                    for (k, c) in &e.callers {
                        let k = map(k);
                        match t.callers.iter_mut().find(|(x, _)| *x == k) {
                            Some(slot) => slot.1 = c.clone().add(slot.1.clone()),
                            None => t.callers.push((k, c.clone())),
                        }
                    }
                }
                None => {
                    index.insert(key, sum.entries.len());
                    let callers = e.callers.iter().map(|(k, c)| (map(k), c.clone())).collect();
                    sum.entries.push(Entry { key, callers, ..e.clone() });
                }
            }
        }
    }
    sum.names = names.names;
    sum
}

// ------------------------------------------------------------------------------------------
// Printing, as pstats.Stats prints.

/// One argument of `print_stats(*amount)` (and of `print_callers`, `print_callees`), which
/// narrow the sorted rows one after the other.
#[derive(Debug, Clone, PartialEq)]
pub enum Restriction {
    /// An int: the first N rows (a negative N, or one not below the number of rows, keeps
    /// them all).
    Count(i64),
    /// A float: the first `int(rows * f + .5)` rows when `0.0 <= f < 1.0`, else all.
    Fraction(f64),
    /// A str: the rows whose standard name (`file:line(name)`) the regular expression finds
    /// a match in (`re.search`). The `regex` crate evaluates it: the patterns it refuses
    /// (look-around, back-references; anything invalid) are refused when printing, rather
    /// than evaluated otherwise than Python's `re` would.
    Pattern(String),
}

impl Restriction {
    /// A command-line value as one: an integer, else a float, else a pattern (Python tells
    /// them apart by type; a pattern that reads as a number cannot be given this way).
    pub fn parse(text: &str) -> Restriction {
        if let Ok(n) = text.parse() {
            Restriction::Count(n)
        } else if let Ok(f) = text.parse() {
            Restriction::Fraction(f)
        } else {
            Restriction::Pattern(text.to_string())
        }
    }

    /// `%r` of the argument, as the "List reduced" line shows it.
    fn py_repr(&self) -> String {
        match self {
            Restriction::Count(n) => n.to_string(),
            Restriction::Fraction(f) => float_repr(*f),
            Restriction::Pattern(p) => crate::pyfmt::str_repr(p),
        }
    }
}

/// What to print and how.
#[derive(Debug, Clone, Default)]
pub struct PrintOptions {
    /// `sort_stats` keys (none: the file's order, "Random listing order was used").
    pub sort: Vec<String>,
    /// `print_stats(*restrictions)`: applied in order to the sorted rows.
    pub restrictions: Vec<Restriction>,
    /// `strip_dirs()` first.
    pub strip_dirs: bool,
    /// Print `print_callers` instead of `print_stats`.
    pub callers: bool,
    /// Print `print_callees` instead of `print_stats`.
    pub callees: bool,
    /// The header lines `Stats(path)` makes: `time.ctime(mtime) + "    " + path` per file.
    pub files: Vec<String>,
}

/// Why Python would raise instead of printing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrintError(pub String);

impl fmt::Display for PrintError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PrintError {}

/// The sort keys of `Stats.sort_arg_dict_default`: name, fields (index into (cc, nc, tt, ct,
/// file, line, name, std string), ascending?), description. A sampled file loaded by
/// `Stats(path)` keeps them: `load_stats` turns the object into a `SampledStats` without
/// running that class's `__init__`, which is where its own keys (`samples`, `nsamples`,
/// `psamples`) would be set; only its title and sub-heading change.
struct SortKey {
    name: &'static str,
    fields: &'static [(u8, bool)],
    description: &'static str,
}

const fn sort_key(name: &'static str, fields: &'static [(u8, bool)], description: &'static str) -> SortKey {
    SortKey { name, fields, description }
}

const STATS_KEYS: &[SortKey] = &[
    sort_key("calls", &[(1, false)], "call count"),
    sort_key("ncalls", &[(1, false)], "call count"),
    sort_key("cumtime", &[(3, false)], "cumulative time"),
    sort_key("cumulative", &[(3, false)], "cumulative time"),
    sort_key("filename", &[(4, true)], "file name"),
    sort_key("line", &[(5, true)], "line number"),
    sort_key("module", &[(4, true)], "file name"),
    sort_key("name", &[(6, true)], "function name"),
    sort_key("nfl", &[(6, true), (4, true), (5, true)], "name/file/line"),
    sort_key("pcalls", &[(0, false)], "primitive call count"),
    sort_key("stdname", &[(7, true)], "standard name"),
    sort_key("time", &[(2, false)], "internal time"),
    sort_key("tottime", &[(2, false)], "internal time"),
];

type SortDef = (&'static [(u8, bool)], &'static str);

/// `get_sort_arg_defs`: every key and every unique prefix of one.
fn sort_def(word: &str) -> Option<SortDef> {
    let mut map: Vec<(String, SortDef)> = Vec::new();
    let mut bad: Vec<String> = Vec::new();
    for k in STATS_KEYS {
        let (fields, desc) = (k.fields, k.description);
        let mut fragment = k.name.to_string();
        while !fragment.is_empty() {
            if map.iter().any(|(f, _)| *f == fragment) {
                bad.push(fragment);
                break;
            }
            map.push((fragment.clone(), (fields, desc)));
            fragment.pop();
        }
    }
    map.retain(|(f, _)| !bad.contains(f));
    map.into_iter().find(|(f, _)| f == word).map(|(_, d)| d)
}

/// The names `--sort` takes (and their unique prefixes), for messages.
pub fn sort_names() -> Vec<&'static str> {
    STATS_KEYS.iter().map(|k| k.name).collect()
}

struct Printer<'a> {
    stats: Cow<'a, Stats>,
    files: &'a [String],
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

const CODE_COMPARED: &str = "TypeError: '<' not supported between a code object and another name";

impl<'a> Printer<'a> {
    fn new(stats: &'a Stats, o: &'a PrintOptions) -> Self {
        let stats = if o.strip_dirs { Cow::Owned(strip_dirs(stats)) } else { Cow::Borrowed(stats) };
        Printer { stats, files: &o.files }
    }

    fn entries(&self) -> &[Entry] {
        &self.stats.entries
    }

    /// `max_name_len`: the longest standard name, in characters.
    fn max_name_len(&self) -> usize {
        self.entries().iter().map(|e| chars(&self.stats.std_string(&e.key))).max().unwrap_or(0)
    }

    /// One field of two entries compared, with a total order (so that sorting can never
    /// fail): numbers exactly, NaN above every number (Python's order with NaN depends on
    /// its sort's path; files do not hold NaN); `failed` is set where Python raises (a code
    /// object compared), the order then placing code objects after strs.
    fn field_cmp(&self, x: usize, y: usize, field: u8, std: &[String], failed: &mut bool) -> Ordering {
        let (a, b) = (&self.entries()[x], &self.entries()[y]);
        match field {
            0 => num_total(a.cc, b.cc),
            1 => num_total(a.nc, b.nc),
            2 => num_total(a.tt, b.tt),
            3 => num_total(a.ct, b.ct),
            4 => name_total(self.stats.name(a.key.filename), self.stats.name(b.key.filename), failed),
            5 => num_total(a.key.line, b.key.line),
            6 => name_total(self.stats.name(a.key.name), self.stats.name(b.key.name), failed),
            _ => std[x].cmp(&std[y]),
        }
    }

    /// A numeric field of every entry as an integer of the same order (`!` of it when
    /// descending), or `None` when the field is a name or some value is not exactly a double
    /// (NaN, an int beyond 2^53), where the general comparison decides.
    fn column(&self, field: u8, ascending: bool) -> Option<Vec<u64>> {
        let value = |e: &Entry| match field {
            0 => e.cc,
            1 => e.nc,
            2 => e.tt,
            3 => e.ct,
            5 => e.key.line,
            _ => Num::float(f64::NAN),
        };
        self.entries()
            .iter()
            .map(|e| {
                let f = match value(e).value() {
                    NumValue::Int(i) if i.unsigned_abs() <= 1 << 53 => i as i64 as f64,
                    NumValue::Float(f) if !f.is_nan() => f,
                    _ => return None,
                };
                // + 0.0 makes -0.0 the same key as 0.0 (Python finds them equal).
                let bits = (f + 0.0).to_bits();
                let key = if bits >> 63 == 1 { !bits } else { bits | 1 << 63 };
                Some(if ascending { key } else { !key })
            })
            .collect()
    }

    /// `sort_stats(*keys)`: the order of entries and the "Ordered by" text.
    fn sort(&self, keys: &[String]) -> Result<(Vec<usize>, String), PrintError> {
        let mut fields: Vec<(u8, bool)> = Vec::new();
        let mut description = Vec::new();
        for word in keys {
            let Some((f, d)) = sort_def(word) else {
                return Err(PrintError(format!(
                    "KeyError: {word:?} is not a sort key (keys: {})",
                    sort_names().join(", ")
                )));
            };
            fields.extend_from_slice(f);
            description.push(d);
        }
        // Standard names only where a key sorts by them.
        let std: Vec<String> = if fields.iter().any(|&(f, _)| f == 7) {
            self.entries().iter().map(|e| self.stats.std_string(&e.key)).collect()
        } else {
            Vec::new()
        };
        let mut failed = false;
        // Numeric fields as integers in the same order, where every value allows (what a
        // large table sorts by: no lookups through the entries while sorting).
        let columns: Vec<Option<Vec<u64>>> = fields.iter().map(|&(f, asc)| self.column(f, asc)).collect();
        // A stable sort, as Python's list.sort.
        let order: Vec<usize> = if let [Some(column)] = &columns[..] {
            let mut keyed: Vec<(u64, u32)> = column.iter().enumerate().map(|(i, &k)| (k, i as u32)).collect();
            keyed.sort_by_key(|&(k, _)| k);
            keyed.into_iter().map(|(_, i)| i as usize).collect()
        } else {
            let mut order: Vec<usize> = (0..self.entries().len()).collect();
            order.sort_by(|&x, &y| {
                for (&(field, ascending), column) in fields.iter().zip(&columns) {
                    let o = match column {
                        // Already in the field's direction.
                        Some(c) => c[x].cmp(&c[y]),
                        None => match self.field_cmp(x, y, field, &std, &mut failed) {
                            o if ascending => o,
                            o => o.reverse(),
                        },
                    };
                    if o != Ordering::Equal {
                        return o;
                    }
                }
                Ordering::Equal
            });
            order
        };
        if failed {
            return Err(PrintError(CODE_COMPARED.into()));
        }
        Ok((order, description.join(", ")))
    }

    /// `get_print_list`: the rows, the message before them, the width of names.
    fn print_list(
        &self,
        o: &PrintOptions,
        out: &mut String,
        want_width: bool,
    ) -> Result<Option<(usize, Vec<usize>)>, PrintError> {
        let (mut list, mut msg) = if o.sort.is_empty() {
            ((0..self.entries().len()).collect::<Vec<_>>(), String::from("   Random listing order was used\n"))
        } else {
            let (order, description) = self.sort(&o.sort)?;
            (order, format!("   Ordered by: {description}\n"))
        };
        // `eval_print_amount`, one restriction after the other.
        for restriction in &o.restrictions {
            let before = list.len();
            match restriction {
                Restriction::Count(n) => {
                    if let Ok(n) = usize::try_from(*n) {
                        list.truncate(n);
                    }
                }
                Restriction::Fraction(f) => {
                    if (0.0..1.0).contains(f) {
                        list.truncate((before as f64 * f + 0.5) as usize);
                    }
                }
                Restriction::Pattern(p) => {
                    let pattern = regex::Regex::new(p).map_err(|e| {
                        PrintError(format!(
                            "the restriction {}: not a regular expression this tool can evaluate as Python's re \
                             would ({e})",
                            restriction.py_repr()
                        ))
                    })?;
                    list.retain(|&i| pattern.is_match(&self.stats.std_string(&self.entries()[i].key)));
                }
            }
            if list.len() != before {
                let _ = writeln!(
                    msg,
                    "   List reduced from {before} to {} due to restriction <{}>",
                    list.len(),
                    restriction.py_repr()
                );
            }
        }
        if list.is_empty() {
            return Ok(None);
        }
        let _ = writeln!(out, "{msg}");
        let mut width = 0;
        if want_width {
            width = if list.len() < self.entries().len() {
                list.iter().map(|&i| chars(&self.stats.std_string(&self.entries()[i].key))).max().unwrap_or(0)
            } else {
                self.max_name_len()
            };
        }
        Ok(Some((width + 2, list)))
    }

    fn print_stats(&self, o: &PrintOptions, out: &mut String) -> Result<(), PrintError> {
        for f in self.files {
            let _ = writeln!(out, "{f}");
        }
        if !self.files.is_empty() {
            out.push('\n');
        }
        let mut total_calls = Num::small(0);
        let mut prim_calls = Num::small(0);
        for e in self.entries() {
            total_calls = total_calls.add(e.nc);
            prim_calls = prim_calls.add(e.cc);
        }
        let total_tt = self.stats.total_tt();
        for e in self.entries() {
            if e.callers.iter().any(|(k, _)| is_jprofile(&self.stats.names, k)) {
                let _ = writeln!(out, "         {}", self.stats.name(e.key.name));
            }
        }
        let _ = write!(out, "         {} function calls ", total_calls.py_str());
        if !total_calls.py_eq(prim_calls) {
            let _ = write!(out, "({} primitive calls) ", prim_calls.trunc());
        }
        let _ = writeln!(out, "in {:.3} seconds\n", total_tt.to_f64());
        let Some((_, list)) = self.print_list(o, out, false)? else { return Ok(()) };
        if self.stats.sampled {
            out.push_str(" nsamples  tottime persample cumtime persample filename:lineno(function)\n");
        } else {
            out.push_str("   ncalls  tottime  percall  cumtime  percall filename:lineno(function)\n");
        }
        // A row is some 45 bytes of numbers and its name: room for most, so that the text
        // is not copied again and again as it grows.
        out.reserve(list.len() * 128);
        crate::memory::advise_huge_pages(out.as_ptr(), out.capacity());
        let mut count = String::new();
        for block in list.chunks(32) {
            // The rows of a sorted table lie all over memory. A tight loop of independent
            // loads brings a block's entries and names into the cache together (their misses
            // overlap), where formatting row by row would wait for each in turn.
            let mut touched = 0u8;
            for &i in block {
                let key = &self.entries()[i].key;
                touched ^= self.stats.name(key.filename).first_byte() ^ self.stats.name(key.name).first_byte();
            }
            std::hint::black_box(touched);
            for &i in block {
                self.row(&self.entries()[i], &mut count, out);
            }
        }
        out.push_str("\n\n");
        Ok(())
    }

    /// One row of `print_stats`; `count` is scratch space.
    fn row(&self, e: &Entry, count: &mut String, out: &mut String) {
        count.clear();
        e.nc.write_py_str(count);
        if !e.nc.py_eq(e.cc) {
            count.push('/');
            e.cc.write_py_str(count);
        }
        // `%9s`: the count is ASCII, so bytes are characters.
        for _ in count.len()..9 {
            out.push(' ');
        }
        out.push_str(count);
        out.push(' ');
        time_and_per_call(out, e.tt, e.nc);
        time_and_per_call(out, e.ct, e.cc);
        self.stats.write_std_string(&e.key, out);
        out.push('\n');
    }

    fn call_heading(&self, width: usize, title: &str, out: &mut String) {
        let _ = writeln!(out, "{}{title}", pad_right("Function ", width));
        // The sub-header only when the first entry with callers has cProfile's tuples.
        let timed = self
            .entries()
            .iter()
            .find(|e| !e.callers.is_empty())
            .is_some_and(|e| matches!(e.callers[0].1, Calls::Timed(_) | Calls::Other { tuple: true, .. }));
        if timed {
            let what = if self.stats.sampled { "nsamples" } else { "ncalls" };
            let _ = writeln!(out, "{}    {what}  tottime  cumtime", " ".repeat(width));
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn call_line(
        &self,
        width: usize,
        source: &Key,
        calls: &[(Key, Calls)],
        arrow: &str,
        index: &IdMap<Key, usize>,
        out: &mut String,
    ) -> Result<(), PrintError> {
        let _ = write!(out, "{}{arrow} ", pad_right(&self.stats.std_string(source), width));
        if calls.is_empty() {
            out.push('\n');
            return Ok(());
        }
        // sorted(call_dict.keys()): tuples compared item by item.
        let mut sorted: Vec<&(Key, Calls)> = calls.iter().collect();
        let mut failed = false;
        sorted.sort_by(|(a, _), (b, _)| {
            // Tuples: an item decides only where the items before it are equal; equal code
            // objects (the same one) compare without raising.
            let names = |x: NameId, y: NameId, failed: &mut bool| {
                if x == y {
                    Ordering::Equal
                } else {
                    name_total(self.stats.name(x), self.stats.name(y), failed)
                }
            };
            names(a.filename, b.filename, &mut failed)
                .then_with(|| num_total(a.line, b.line))
                .then_with(|| names(a.name, b.name, &mut failed))
        });
        if failed {
            return Err(PrintError(CODE_COMPARED.into()));
        }
        let mut indent = "";
        for (func, value) in sorted {
            let name = self.stats.std_string(func);
            let (text, left) = match value {
                Calls::Timed([nc, cc, tt, ct]) => {
                    let count = if nc.py_eq(*cc) { nc.trunc() } else { format!("{}/{}", nc.trunc(), cc.trunc()) };
                    let w = 7 + 2 * indent.len();
                    (format!("{count:>w$} {} {}  {name}", f8(tt.to_f64()), f8(ct.to_f64())), width + 1)
                }
                Calls::Other { tuple: true, repr, .. } => {
                    return Err(PrintError(format!("ValueError: a caller's value {repr} does not unpack to 4 items")));
                }
                Calls::Count(_) | Calls::Other { .. } => {
                    let Some(&i) = index.get(func) else {
                        return Err(PrintError(format!("KeyError: {name} (a caller that is not a key)")));
                    };
                    let shown = match value {
                        Calls::Count(n) => n.py_str(),
                        Calls::Other { repr, .. } => repr.clone(),
                        Calls::Timed(_) => unreachable!("handled above"),
                    };
                    (format!("{name}({shown}) {}", f8(self.entries()[i].ct.to_f64())), width + 3)
                }
            };
            let _ = writeln!(out, "{}{text}", indent.repeat(left));
            indent = " ";
        }
        Ok(())
    }

    fn index(&self) -> IdMap<Key, usize> {
        self.entries().iter().enumerate().map(|(i, e)| (e.key, i)).collect()
    }

    fn print_callers(&self, o: &PrintOptions, out: &mut String) -> Result<(), PrintError> {
        let Some((width, list)) = self.print_list(o, out, true)? else { return Ok(()) };
        self.call_heading(width, "was called by...", out);
        let index = self.index();
        for &i in &list {
            let e = &self.entries()[i];
            self.call_line(width, &e.key, &e.callers, "<-", &index, out)?;
        }
        out.push_str("\n\n");
        Ok(())
    }

    fn print_callees(&self, o: &PrintOptions, out: &mut String) -> Result<(), PrintError> {
        let Some((width, list)) = self.print_list(o, out, true)? else { return Ok(()) };
        // calc_callees: per function, its callees in the order met.
        let mut callees: IdMap<Key, Vec<(Key, Calls)>> = IdMap::default();
        for e in self.entries() {
            callees.entry(e.key).or_default();
            for (caller, calls) in &e.callers {
                let list = callees.entry(*caller).or_default();
                match list.iter_mut().find(|(k, _)| *k == e.key) {
                    Some(slot) => slot.1 = calls.clone(),
                    None => list.push((e.key, calls.clone())),
                }
            }
        }
        self.call_heading(width, "called...", out);
        let index = self.index();
        for &i in &list {
            let key = &self.entries()[i].key;
            self.call_line(width, key, callees.get(key).map_or(&[][..], |v| &v[..]), "->", &index, out)?;
        }
        out.push_str("\n\n");
        Ok(())
    }
}

/// Numbers in Python's order, NaN above all (a total order).
fn num_total(a: Num, b: Num) -> Ordering {
    match a.py_cmp(b) {
        Some(o) => o,
        None => a.is_nan().cmp(&b.is_nan()),
    }
}

/// Names in Python's order for strs; a code object makes Python raise (`failed`), and is
/// placed after every str, code objects by their repr (a total order).
fn name_total(a: &Name, b: &Name, failed: &mut bool) -> Ordering {
    match (a, b) {
        (Name::Str(x), Name::Str(y)) => x.cmp(y),
        (Name::Str(_), Name::Code(_)) => {
            *failed = true;
            Ordering::Less
        }
        (Name::Code(_), Name::Str(_)) => {
            *failed = true;
            Ordering::Greater
        }
        (Name::Code(_), Name::Code(_)) => {
            *failed = true;
            a.to_string().cmp(&b.to_string())
        }
    }
}

/// `str.ljust`.
fn pad_right(s: &str, width: usize) -> String {
    let n = chars(s);
    if n >= width {
        s.to_string()
    } else {
        format!("{s}{}", " ".repeat(width - n))
    }
}

/// A time column and its per-call column (`%8.3f ` each; blank, nine spaces, for no calls).
fn time_and_per_call(out: &mut String, time: Num, calls: Num) {
    f8_into(out, time.to_f64());
    out.push(' ');
    if calls.is_zero() {
        out.push_str("         ");
    } else {
        f8_into(out, time.div(calls));
        out.push(' ');
    }
}

/// `Stats.strip_dirs`: keys by base file name; entries that then collide are added
/// (`add_func_stats`), each keeping the first one's place; callers likewise renamed (a later
/// caller replacing an earlier one of the same new name, as the dict assignment does).
fn strip_dirs(stats: &Stats) -> Stats {
    let mut names = Names::from(stats.names.clone());
    // Each name's base-name id, made once per name.
    let base: Vec<NameId> = (0..stats.names.len())
        .map(|i| match &stats.names[i] {
            Name::Str(s) => {
                let b = s.rsplit('/').next().unwrap_or(s);
                if b.len() == s.len() {
                    NameId(i as u32)
                } else {
                    names.intern(Name::Str(b.into()))
                }
            }
            Name::Code(_) => NameId(i as u32),
        })
        .collect();
    let strip = |k: &Key| Key { filename: base[k.filename.0 as usize], ..*k };
    let mut out: Vec<Entry> = Vec::with_capacity(stats.entries.len());
    let mut index: IdMap<Key, usize> = IdMap::default();
    for e in &stats.entries {
        let key = strip(&e.key);
        let mut callers: Vec<(Key, Calls)> = Vec::with_capacity(e.callers.len());
        for (k, c) in &e.callers {
            let k = strip(k);
            match callers.iter_mut().find(|(x, _)| *x == k) {
                Some(slot) => slot.1 = c.clone(),
                None => callers.push((k, c.clone())),
            }
        }
        match index.get(&key) {
            Some(&i) => {
                let t = &mut out[i];
                t.cc = e.cc.add(t.cc);
                t.nc = e.nc.add(t.nc);
                t.tt = e.tt.add(t.tt);
                t.ct = e.ct.add(t.ct);
                for (k, c) in callers {
                    match t.callers.iter_mut().find(|(x, _)| *x == k) {
                        Some(slot) => slot.1 = c.add(slot.1.clone()),
                        None => t.callers.push((k, c)),
                    }
                }
            }
            None => {
                index.insert(key, out.len());
                out.push(Entry { key, cc: e.cc, nc: e.nc, tt: e.tt, ct: e.ct, callers });
            }
        }
    }
    Stats { names: names.names, entries: out, sampled: stats.sampled, total_tt: Some(stats.total_tt()) }
}

/// Prints `stats` as `pstats.Stats(path).sort_stats(...).print_stats(*restrictions)` (or
/// `print_callers` / `print_callees`) prints it.
pub fn print(stats: &Stats, o: &PrintOptions) -> Result<String, PrintError> {
    let p = Printer::new(stats, o);
    let mut out = String::new();
    if o.callers {
        p.print_callers(o, &mut out)?;
    } else if o.callees {
        p.print_callees(o, &mut out)?;
    } else {
        p.print_stats(o, &mut out)?;
    }
    Ok(out)
}

// ------------------------------------------------------------------------------------------
// Writing.

/// Writes `stats` as a pstats file every Python 3 loads: no references, callers as they were
/// (tuples or counts), 3.15's `("__sampled__",): True` marker only with `keep_marker`.
pub fn write(
    stats: &Stats,
    keep_marker: bool,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError<core::convert::Infallible>> {
    let mut m = Encoder::new(out);
    let num = |m: &mut Encoder<&mut Vec<u8>>, n: Num| match n.value() {
        NumValue::Int(i) => m.int(i),
        NumValue::Float(f) => m.float(f),
    };
    let name = |m: &mut Encoder<&mut Vec<u8>>, n: &Name| match n {
        Name::Str(s) => m.str(s.as_bytes()),
        // A code object cannot be written back; its repr stands for it.
        Name::Code(_) => m.str(n.to_string().as_bytes()),
    };
    let key = |m: &mut Encoder<&mut Vec<u8>>, k: &Key| {
        m.tuple(3)?;
        name(m, stats.name(k.filename))?;
        num(m, k.line)?;
        name(m, stats.name(k.name))
    };
    m.dict()?;
    for e in &stats.entries {
        key(&mut m, &e.key)?;
        m.tuple(5)?;
        for n in [e.cc, e.nc, e.tt, e.ct] {
            num(&mut m, n)?;
        }
        m.dict()?;
        for (k, calls) in &e.callers {
            key(&mut m, k)?;
            match calls {
                Calls::Count(n) => num(&mut m, *n)?,
                Calls::Timed(t) => {
                    m.tuple(4)?;
                    for n in t {
                        num(&mut m, *n)?;
                    }
                }
                Calls::Other { numbers: Some(items), tuple, .. } => {
                    let len = u32::try_from(items.len()).map_err(|_| EncodeError::TooLong)?;
                    if *tuple {
                        m.tuple(len)?;
                    } else {
                        m.list(len)?;
                    }
                    for n in items {
                        num(&mut m, *n)?;
                    }
                }
                // Anything else is not kept: its repr as a str, so the file still loads.
                Calls::Other { repr, .. } => m.str(repr.as_bytes())?,
            }
        }
        m.end_dict()?;
    }
    if keep_marker && stats.sampled {
        m.tuple(1)?;
        m.str(b"__sampled__")?;
        m.bool(true)?;
    }
    m.end_dict()
}

/// The line `pstats.Stats(path)` prints for a file: `time.ctime(mtime) + "    " + path`
/// (local time, as Python's `ctime`), or the path alone when the file has no time.
pub fn ctime_line(path: &std::path::Path) -> String {
    let shown = path.to_string_lossy();
    let Ok(modified) = std::fs::metadata(path).and_then(|m| m.modified()) else { return shown.into_owned() };
    let seconds = match modified.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs_f64().ceil() as i64),
    };
    format!("{}    {shown}", ctime(seconds))
}

/// `time.ctime(seconds)`: `Www Mmm dd hh:mm:ss yyyy` in local time (UTC where the C
/// library's local time is not available).
fn ctime(seconds: i64) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let (year, month, day, hour, minute, second, weekday) = local_time(seconds);
    format!("{} {}{:3} {:02}:{:02}:{:02} {}", DAYS[weekday % 7], MONTHS[month % 12], day, hour, minute, second, year)
}

#[cfg(unix)]
extern "C" {
    /// POSIX: reads TZ (the libc crate does not bind it).
    fn tzset();
}

#[cfg(unix)]
fn local_time(seconds: i64) -> (i64, usize, u32, u32, u32, u32, usize) {
    let t = seconds as libc::time_t;
    // SAFETY: tzset reads TZ as Python's time module does; localtime_r writes only `tm`.
    let tm = unsafe {
        tzset();
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&t, &mut tm).is_null() {
            return utc_time(seconds);
        }
        tm
    };
    (
        i64::from(tm.tm_year) + 1900,
        tm.tm_mon as usize,
        tm.tm_mday as u32,
        tm.tm_hour as u32,
        tm.tm_min as u32,
        tm.tm_sec as u32,
        tm.tm_wday as usize,
    )
}

#[cfg(not(unix))]
fn local_time(seconds: i64) -> (i64, usize, u32, u32, u32, u32, usize) {
    utc_time(seconds)
}

/// Civil time in UTC (days from 1970-01-01 to a date: Howard Hinnant's algorithm).
fn utc_time(seconds: i64) -> (i64, usize, u32, u32, u32, u32, usize) {
    let days = seconds.div_euclid(86_400);
    let secs = seconds.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let weekday = (days + 4).rem_euclid(7) as usize;
    (year, (month - 1) as usize, day, (secs / 3600) as u32, (secs % 3600 / 60) as u32, (secs % 60) as u32, weekday)
}

#[cfg(test)]
mod tests {
    use super::{f8, push_int};

    /// `%8.3f` is printed as Rust's exact formatter prints `{:8.3}` (correctly rounded, ties
    /// to even on the exact binary value, as C's printf and so Python's `%` do), whichever
    /// path a value takes.
    #[test]
    fn times_print_as_the_exact_formatter_prints_them() {
        let mut values = vec![0.0, 0.0004999, 0.0005, 0.0015, 0.0025, 0.9995, 2.5, 1e9, 1.0995e9, 1.2e9, 1e300];
        let (up, down) = (|x: f64| f64::from_bits(x.to_bits() + 1), |x: f64| f64::from_bits(x.to_bits() - 1));
        // Halfway between thousandths, and the doubles on either side: where the product can
        // round the wrong way.
        for k in (0..200_000u64).chain((1u64 << 40) - 2_000..(1u64 << 40) + 2_000) {
            let tie = (k as f64 + 0.5) / 1000.0;
            values.extend([tie, up(tie), down(tie), up(up(tie)), down(down(tie))]);
        }
        // Doubles of every magnitude from 1e-5 to 1e13, their bits from a xorshift.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..300_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let exponent = (state >> 52) % 60; // 2^-17 .. 2^43
            values.push(f64::from_bits(((1006 + exponent) << 52) | (state & ((1 << 52) - 1))));
        }
        for v in values {
            for x in [v, -v] {
                assert_eq!(f8(x), format!("{x:8.3}"), "{x:e}");
            }
        }
    }

    #[test]
    fn ints_print_as_display_prints_them() {
        for i in [0, 1, -1, 9, 10, 99, 100, -100, 123_456_789, i64::MAX, i64::MIN, i64::MIN + 1] {
            let mut s = String::new();
            push_int(&mut s, i);
            assert_eq!(s, i.to_string());
        }
    }
}
