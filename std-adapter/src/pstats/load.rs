//! Loading: marshal items → a flat tree (nodes in one vector, children in another, references
//! as node indices, so shared objects are never copied) → entries.

use tachyon_core::marshal::{Decoder, Kind, Open, Value};

use super::print::PrintOptions;
use super::shape;
use super::stats::*;
use crate::hash::IdMap;
use crate::pyfmt::float_repr;

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

/// [`load`] for [`print`](super::print::print) with `options`: the same files load, with the same errors, and
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
