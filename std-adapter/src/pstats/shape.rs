//! The common case read directly: a stats dictionary of the shape every profiler writes —
//! `{(file, line, name): (cc, nc, tt, ct, {(file, line, name): (nc, cc, tt, ct) or count})}`
//! with str names — turned into entries as its items stream out of the decoder, with no tree
//! of the file's objects in between. Back references are kept as the small values they
//! stand for (a name, a number, a key, a caller's four numbers).
//!
//! Anything else (code objects in keys, odd caller values, references to other objects,
//! repeated callers, an error of any kind) makes [`load`] give up with `None`, and the general
//! reader ([`super::load`]) reads the file instead: it owns every rule and every message.
//! For a file this reader accepts, both give the same [`Stats`] (tested on every fixture).

use tachyon_core::marshal::{Decoder, Item, Kind, Open, Value};

use super::stats::{is_jprofile, long_value, Calls, Entry, Key, Name, NameId, Num, Stats, MAX_DEPTH};
use crate::hash::{IdHash, IdMap};

/// What a flagged object stands for when a reference names it again.
#[derive(Clone, Copy)]
enum Shared {
    Name(NameId),
    Num(Num),
    Key(Key),
    Timed([Num; 4]),
    /// Anything else: a reference to it sends the file to the general reader.
    Other,
}

struct Reader<'a, 's> {
    items: Decoder<'a, 's>,
    shared: Vec<Shared>,
    names: Vec<Name>,
    strs: IdMap<&'a [u8], NameId>,
}

/// The id of a name read and checked but not kept ([`Callers::Jprofile`]).
const UNKEPT: NameId = NameId(u32::MAX);

/// Which callers [`load`] keeps.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Callers {
    /// Every caller.
    All,
    /// Only a `("jprofile", 0, "profiler")` caller, the one thing `print_stats` looks at in
    /// them; the others are read and checked, and their names kept only where a later
    /// reference may need them.
    Jprofile,
}

/// The file's entries, or `None` when it is not of the common shape (or not valid).
pub(super) fn load(data: &[u8], keep: Callers) -> Option<Stats> {
    let mut stack = [Open::EMPTY; MAX_DEPTH];
    // Distinct names: one per 500 bytes or so of a large file (a table grown one doubling
    // at a time would hash every name again at each).
    let strs = IdMap::with_capacity_and_hasher(data.len() / 512, IdHash::default());
    let mut r = Reader { items: Decoder::new(data, &mut stack), shared: Vec::new(), names: Vec::new(), strs };
    // Room for an entry per 100 bytes (a cProfile file has one per 150 to 250): growing the
    // vector by doubling would copy it again and again, and pages reserved but never written
    // cost nothing. (Not so for hash tables, whose entries land all over their memory.)
    let guess = data.len() / 100;
    let mut stats = Stats { entries: Vec::with_capacity(guess), ..Stats::default() };
    crate::memory::advise_huge_pages(stats.entries.as_ptr().cast(), guess * std::mem::size_of::<Entry>());
    r.open(Kind::Dict, None)?;
    // Callers seen in the current entry, when it has many.
    let mut seen: IdMap<Key, ()> = IdMap::default();
    let mut callers = Vec::new();
    loop {
        let item = r.next()?;
        if let Value::Close(Kind::Dict) = item.value {
            break;
        }
        let Some(key) = r.key_or_marker(item)? else {
            stats.sampled = true;
            let value = r.next()?;
            r.skip(value)?;
            continue;
        };
        let first = r.next()?;
        let len = match first.value {
            Value::Open { kind: Kind::Tuple | Kind::List, len } => len,
            _ => None,
        };
        if len != Some(5) {
            return None;
        }
        r.placeholder(first);
        let (cc, nc, tt, ct) = (r.num()?, r.num()?, r.num()?, r.num()?);
        r.open(Kind::Dict, None)?;
        callers.clear();
        loop {
            let item = r.next()?;
            if let Value::Close(Kind::Dict) = item.value {
                break;
            }
            let caller = r.key(item, keep == Callers::All)?;
            let calls = r.calls()?;
            if keep == Callers::Jprofile {
                if is_jprofile(&r.names, &caller) {
                    callers.push((caller, calls));
                }
                continue;
            }
            // A repeated caller (which the general reader resolves as the dict does).
            let repeated = if callers.len() < 16 {
                callers.iter().any(|(k, _): &(Key, Calls)| *k == caller)
            } else {
                if callers.len() == 16 {
                    seen.clear();
                    seen.extend(callers.iter().map(|&(k, _)| (k, ())));
                }
                seen.insert(caller, ()).is_some()
            };
            if repeated {
                return None;
            }
            callers.push((caller, calls));
        }
        r.close()?;
        // Exactly as long as needed (a vector grown by pushes would hold room for four).
        stats.entries.push(Entry { key, cc, nc, tt, ct, callers: callers.to_vec() });
    }
    if stats.entries.is_empty() {
        return None;
    }
    stats.settle_entries();
    stats.names = r.names;
    Some(stats)
}

impl<'a> Reader<'a, '_> {
    #[inline(always)]
    fn next(&mut self) -> Option<Item<'a>> {
        self.items.next_item().ok().flatten()
    }

    /// A flagged container takes its reference index when it opens; what it stands for is
    /// known when it closes ([`Self::share`]).
    #[inline(always)]
    fn placeholder(&mut self, item: Item<'a>) -> Option<usize> {
        item.reference.map(|_| {
            self.shared.push(Shared::Other);
            self.shared.len() - 1
        })
    }

    fn share(&mut self, at: Option<usize>, value: Shared) {
        if let Some(i) = at {
            self.shared[i] = value;
        }
    }

    fn shared(&self, index: u32) -> Shared {
        // The decoder lets through only references to objects it has numbered.
        self.shared.get(index as usize).copied().unwrap_or(Shared::Other)
    }

    /// The next item opens a container of `kind` (of `len` items, for sequences).
    fn open(&mut self, kind: Kind, len: Option<u32>) -> Option<Option<usize>> {
        let item = self.next()?;
        match item.value {
            Value::Open { kind: k, len: l } if k == kind && l == len => Some(self.placeholder(item)),
            _ => None,
        }
    }

    fn close(&mut self) -> Option<()> {
        matches!(self.next()?.value, Value::Close(_)).then_some(())
    }

    /// A name, interned when `keep` (else [`UNKEPT`], unless a reference may name it again
    /// or it may be part of the jprofile key).
    #[inline(always)]
    fn name(&mut self, item: Item<'a>, keep: bool) -> Option<NameId> {
        let id = match item.value {
            // Not even checked for UTF-8: nothing shows a name that is not kept.
            Value::Str { bytes, .. }
                if !keep && item.reference.is_none() && bytes != b"jprofile" && bytes != b"profiler" =>
            {
                UNKEPT
            }
            Value::Str { bytes, .. } => self.intern(bytes)?,
            Value::Ref(i) => match self.shared(i) {
                Shared::Name(n) => return Some(n),
                _ => return None,
            },
            _ => return None,
        };
        if item.reference.is_some() {
            self.shared.push(Shared::Name(id));
        }
        Some(id)
    }

    /// Each distinct str once. Bytes that are not UTF-8 are left to the general reader
    /// (two such strs can show as the same name, which it makes one).
    fn intern(&mut self, bytes: &'a [u8]) -> Option<NameId> {
        if let Some(&id) = self.strs.get(bytes) {
            return Some(id);
        }
        let text = std::str::from_utf8(bytes).ok()?;
        let id = NameId(self.names.len() as u32);
        self.names.push(Name::Str(text.into()));
        self.strs.insert(bytes, id);
        Some(id)
    }

    /// A number as the tree reader takes one: an int, a float, a bool.
    #[inline(always)]
    fn num_of(&mut self, item: Item<'a>) -> Option<Num> {
        let n = match item.value {
            Value::Int(i) => Num::small(i.into()),
            Value::Long { negative, digits } => Num::int(long_value(negative, digits)?)?,
            Value::Float(f) => Num::float(f),
            Value::FloatText(t) => Num::float(std::str::from_utf8(t).ok()?.trim().parse().ok()?),
            Value::True => Num::small(1),
            Value::False => Num::small(0),
            Value::Ref(i) => match self.shared(i) {
                Shared::Num(n) => return Some(n),
                _ => return None,
            },
            _ => return None,
        };
        if item.reference.is_some() {
            self.shared.push(Shared::Num(n));
        }
        Some(n)
    }

    #[inline(always)]
    fn num(&mut self) -> Option<Num> {
        let item = self.next()?;
        self.num_of(item)
    }

    /// A `(file, line, name)` key, its names interned when `keep` or when a reference may
    /// name the key again.
    #[inline(always)]
    fn key(&mut self, item: Item<'a>, keep: bool) -> Option<Key> {
        match item.value {
            Value::Ref(i) => match self.shared(i) {
                Shared::Key(k) => Some(k),
                _ => None,
            },
            Value::Open { kind: Kind::Tuple, len: Some(3) } => {
                let at = self.placeholder(item);
                let key = self.key_items(keep || at.is_some())?;
                self.share(at, Shared::Key(key));
                Some(key)
            }
            _ => None,
        }
    }

    #[inline(always)]
    fn key_items(&mut self, keep: bool) -> Option<Key> {
        let item = self.next()?;
        let filename = self.name(item, keep)?;
        let line = self.num()?;
        let item = self.next()?;
        let name = self.name(item, keep)?;
        self.close()?;
        Some(Key { filename, line, name })
    }

    /// A key, or `Some(None)` for 3.15's `("__sampled__",)` marker.
    fn key_or_marker(&mut self, item: Item<'a>) -> Option<Option<Key>> {
        if let Value::Open { kind: Kind::Tuple, len: Some(1) } = item.value {
            // Its reference, if any, stands for something a key cannot be.
            self.placeholder(item);
            let inner = self.next()?;
            let name = self.name(inner, true)?;
            self.close()?;
            let marker = matches!(&self.names[name.0 as usize], Name::Str(s) if &**s == "__sampled__");
            return if marker { Some(None) } else { None };
        }
        self.key(item, true).map(Some)
    }

    /// A caller's value: cProfile's `(nc, cc, tt, ct)` or a count.
    #[inline(always)]
    fn calls(&mut self) -> Option<Calls> {
        let item = self.next()?;
        match item.value {
            Value::Open { kind: Kind::Tuple, len: Some(4) } => {
                let at = self.placeholder(item);
                let t = [self.num()?, self.num()?, self.num()?, self.num()?];
                self.close()?;
                self.share(at, Shared::Timed(t));
                Some(Calls::Timed(t))
            }
            Value::Ref(i) => match self.shared(i) {
                Shared::Timed(t) => Some(Calls::Timed(t)),
                Shared::Num(n) => Some(Calls::Count(n)),
                _ => None,
            },
            _ => self.num_of(item).map(Calls::Count),
        }
    }

    /// Reads past the value `item` begins (the marker's), numbering its flagged objects and
    /// interning its strs as the general reader does. Nesting is bounded by the decoder.
    fn skip(&mut self, item: Item<'a>) -> Option<()> {
        let mut depth = 0usize;
        let mut item = item;
        loop {
            match item.value {
                Value::Open { kind: Kind::Code, .. } => return None,
                Value::Open { .. } => {
                    self.placeholder(item);
                    depth += 1;
                }
                Value::Close(_) => depth -= 1,
                Value::Str { bytes, .. } => {
                    let id = self.intern(bytes)?;
                    if item.reference.is_some() {
                        self.shared.push(Shared::Name(id));
                    }
                }
                _ => {
                    if item.reference.is_some() {
                        self.shared.push(Shared::Other);
                    }
                }
            }
            if depth == 0 {
                return Some(());
            }
            item = self.next()?;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use tachyon_core::marshal::Encoder;

    use super::super::load_tree;

    fn fixtures() -> Vec<PathBuf> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = Vec::new();
        for dir in ["qemu-tests/vectors/pstats"] {
            for entry in std::fs::read_dir(root.join(dir)).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "pstats") {
                    files.push(path);
                }
            }
        }
        files.sort();
        assert!(files.len() > 20, "{files:?}");
        files
    }

    /// Whether the direct reader took `data`, having given what the general reader gives.
    fn same_as_tree(data: &[u8], what: &str) -> bool {
        let Some(direct) = super::load(data, super::Callers::All) else { return false };
        let tree =
            load_tree(data).unwrap_or_else(|e| panic!("{what}: the direct reader took it, the tree refused: {e}"));
        assert_eq!(format!("{direct:?}"), format!("{tree:?}"), "{what}");
        true
    }

    #[test]
    fn real_files_of_the_common_shape_are_read_directly_and_alike() {
        let mut direct = Vec::new();
        for file in fixtures() {
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            if same_as_tree(&std::fs::read(&file).unwrap(), &name) {
                direct.push(name);
            }
        }
        // Every real file but `profile`'s (a code object in a key), and the contract files
        // of the common shape, among them 3.15's sampled marker.
        for name in [
            "cprofile_py311_simple.pstats",
            "cprofile_py311_tiny.pstats",
            "replay_py315_workload.pstats",
            "sampling_py315_workload.pstats",
            "tracing_py315_workload.pstats",
            "contract_ok_cprofile_style.pstats",
            "contract_int_callers_ok.pstats",
            "contract_sampled_marker_int_callers.pstats",
            "contract_float_cc_nc.pstats",
        ] {
            assert!(direct.iter().any(|d| d == name), "{name} not read directly: {direct:?}");
        }
        assert!(!direct.iter().any(|d| d.starts_with("profile_")), "{direct:?}");
    }

    #[test]
    fn cut_and_flipped_files_read_directly_are_what_the_tree_reads() {
        let mut direct = 0;
        for file in fixtures() {
            let bytes = std::fs::read(&file).unwrap();
            let step = (bytes.len() / 300).max(1);
            for at in (0..bytes.len()).step_by(step) {
                direct += usize::from(same_as_tree(&bytes[..at], "cut"));
                for flip in [0xff, 0x80, 0x01, 0x40] {
                    let mut b = bytes.clone();
                    b[at] ^= flip;
                    direct += usize::from(same_as_tree(&b, &format!("{}: byte {at} ^ {flip:#x}", file.display())));
                }
            }
        }
        // Flips in numbers keep a file valid: many are read directly.
        assert!(direct > 1_000, "{direct}");
    }

    /// What `print_stats` prints (no callers) of a file loaded whole and loaded for the table.
    fn tables(data: &[u8]) -> Option<(String, String)> {
        let options = super::super::PrintOptions {
            sort: vec!["cumulative".into()],
            restrictions: Vec::new(),
            strip_dirs: false,
            callers: false,
            callees: false,
            files: vec!["f".into()],
        };
        let whole = super::super::load(data);
        let table = super::super::load_for_print(data, &options);
        assert_eq!(whole.as_ref().err(), table.as_ref().err(), "the same files load, with the same errors");
        let print = |s: &super::Stats| super::super::print(s, &options).map_err(|e| e.0);
        Some((print(&whole.ok()?).ok()?, print(&table.ok()?).ok()?))
    }

    #[test]
    fn files_loaded_for_the_table_print_the_same_table() {
        let mut compared = 0;
        for file in fixtures() {
            let bytes = std::fs::read(&file).unwrap();
            let step = (bytes.len() / 100).max(1);
            for at in (0..bytes.len()).step_by(step) {
                let mut flipped = bytes.clone();
                flipped[at] ^= 0x01;
                for data in [&bytes[..], &bytes[..at], &flipped[..]] {
                    if let Some((whole, table)) = tables(data) {
                        assert_eq!(whole, table, "{}, at {at}", file.display());
                        compared += 1;
                    }
                }
            }
        }
        assert!(compared > 2_000, "{compared}");
    }

    #[test]
    fn a_jprofile_caller_is_kept_for_the_table() {
        // Python names the function above the totals: `print(indent, func_get_function_name(func))`.
        let mut data = Vec::new();
        let mut e = Encoder::new(&mut data);
        e.dict().unwrap();
        for (function, jprofile) in [(&b"f"[..], true), (&b"g"[..], false)] {
            e.tuple(3).unwrap();
            e.str(b"a.py").unwrap();
            e.int(1).unwrap();
            e.str(function).unwrap();
            e.tuple(5).unwrap();
            for n in [1, 1] {
                e.int(n).unwrap();
            }
            for t in [0.5, 0.5] {
                e.float(t).unwrap();
            }
            e.dict().unwrap();
            caller(&mut e, 7, 1);
            if jprofile {
                e.tuple(3).unwrap();
                e.str(b"jprofile").unwrap();
                e.int(0).unwrap();
                e.str(b"profiler").unwrap();
                e.int(1).unwrap();
            }
            caller(&mut e, 8, 1);
            e.end_dict().unwrap();
        }
        e.end_dict().unwrap();
        let (whole, table) = tables(&data).unwrap();
        assert_eq!(whole, table);
        assert!(table.contains("\n         f\n"), "{table}");
        assert!(!table.contains("         g\n"), "{table}");
        let options = super::super::PrintOptions { callers: false, callees: false, ..Default::default() };
        let stats = super::super::load_for_print(&data, &options).unwrap();
        assert_eq!(stats.entries.iter().map(|e| e.callers.len()).collect::<Vec<_>>(), [1, 0]);
    }

    /// `{key: (1, 1, 0.5, 0.5, callers)}` with `callers` written by `f`.
    fn one_entry(f: impl Fn(&mut Encoder<&mut Vec<u8>>)) -> Vec<u8> {
        let mut out = Vec::new();
        let mut e = Encoder::new(&mut out);
        e.dict().unwrap();
        e.tuple(3).unwrap();
        e.str(b"a.py").unwrap();
        e.int(1).unwrap();
        e.str(b"f").unwrap();
        e.tuple(5).unwrap();
        e.int(1).unwrap();
        e.int(1).unwrap();
        e.float(0.5).unwrap();
        e.float(0.5).unwrap();
        f(&mut e);
        e.end_dict().unwrap();
        out
    }

    fn caller(e: &mut Encoder<&mut Vec<u8>>, line: i128, count: i128) {
        e.tuple(3).unwrap();
        e.str(b"b.py").unwrap();
        e.int(line).unwrap();
        e.str(b"g").unwrap();
        e.int(count).unwrap();
    }

    #[test]
    fn what_the_direct_reader_leaves_to_the_tree() {
        // A plain entry is read directly.
        let plain = one_entry(|e| {
            e.dict().unwrap();
            caller(e, 2, 3);
            e.end_dict().unwrap();
        });
        assert!(same_as_tree(&plain, "plain"));
        // A repeated caller: the dict keeps the last value where the first stands.
        for n in [2, 20] {
            let repeated = one_entry(|e| {
                e.dict().unwrap();
                for i in 0..n {
                    caller(e, i, i);
                }
                caller(e, 1, 99);
                e.end_dict().unwrap();
            });
            assert!(super::load(&repeated, super::Callers::All).is_none(), "{n} callers");
            let tree = load_tree(&repeated).unwrap();
            assert_eq!(tree.entries[0].callers.len(), n as usize);
            assert!(
                matches!(tree.entries[0].callers[1].1, super::Calls::Count(n) if n.value() == super::super::NumValue::Int(99))
            );
        }
        // Many distinct callers are read directly (the repeat check switches to a map).
        let many = one_entry(|e| {
            e.dict().unwrap();
            for i in 0..40 {
                caller(e, i, i);
            }
            e.end_dict().unwrap();
        });
        assert!(same_as_tree(&many, "many callers"));
        // Bytes that are not UTF-8 in a name; a list of four as a caller's value.
        let mut odd_name = plain.clone();
        let at = odd_name.windows(4).position(|w| w == b"b.py").unwrap();
        odd_name[at] = 0xff;
        assert!(super::load(&odd_name, super::Callers::All).is_none());
        assert!(load_tree(&odd_name).is_ok());
        let list_value = one_entry(|e| {
            e.dict().unwrap();
            e.tuple(3).unwrap();
            e.str(b"b.py").unwrap();
            e.int(2).unwrap();
            e.str(b"g").unwrap();
            e.list(4).unwrap();
            for _ in 0..4 {
                e.int(1).unwrap();
            }
            e.end_dict().unwrap();
        });
        assert!(super::load(&list_value, super::Callers::All).is_none());
        assert!(load_tree(&list_value).is_ok());
    }
}
