//! Printing, as pstats.Stats prints.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt::{self, Write as _};

use super::stats::*;
use crate::hash::IdMap;
use crate::pyfmt::{f8, f8_into, float_repr};

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
                #[cfg(feature = "regex")]
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
                #[cfg(not(feature = "regex"))]
                Restriction::Pattern(_) => {
                    return Err(PrintError(format!(
                        "the restriction {}: regular expressions need the `regex` feature, which this build \
                         of the library leaves out",
                        restriction.py_repr()
                    )));
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
    // time_t as localtime_r takes it (not named: the libc crate deprecates the name on musl,
    // whose time_t changed width).
    let t = seconds as _;
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

/// Civil time in UTC, as `local_time` gives it (month from 0).
fn utc_time(seconds: i64) -> (i64, usize, u32, u32, u32, u32, usize) {
    let c = crate::civil::utc(seconds);
    (c.year, (c.month - 1) as usize, c.day, c.hour, c.minute, c.second, c.weekday as usize)
}
