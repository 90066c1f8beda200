//! `--to flamegraph-html`: the interactive flame graph, one offline HTML file.
//!
//! The page embeds the [`CallTree`] with the nodes CPython's flame graph keeps
//! ([`CallTree::kept`]), in preorder, each node's children by samples (most first), as
//! columns:
//!
//! ```text
//! {"format": "tachyon-flamegraph", "version": 1,
//!  "title": "…", "input": "Tachyon", "mode": "wall", "interval_us": 100,
//!  "threads": ["31601", "31613"],                                    thread ids, as text
//!  "nodes": {"parent": [-1, 0, 1, …], "func": [-1, 0, …],            the root first
//!            "value": [272374, …], "self": [0, …]},
//!  "thread_rows": [[0, 12, 0, 1, 3, 0], …],                         per node: thread index,
//!                                                                    samples, self; repeated
//!  "strings": ["main", "app.py", …],
//!  "funcs": {"name": [0, …], "file": [1, …], "line": [12, …]}}     indexes into strings
//! ```
//!
//! A node's `thread_rows` hold, per thread, the samples that end in it or in the nodes below
//! it that the page leaves out, and of those the ones in it: a thread's samples at or below a
//! node are its rows' plus its children's (the page adds them up when a thread is picked), so
//! a profile of a million threads on one path is a million rows, not a million per frame.
//! `thread_rows` is left out when the profile has one thread. Thread ids, ascending, are text
//! because JavaScript's numbers hold integers exactly only to 2^53. A native profile's
//! functions have line 0 (a node is a function name; see [`super::tree`]).

use std::io::{self, Write};

use std::collections::HashMap;

use super::tree::{CallTree, NO_FUNCTION, ROOT};
use crate::hash::StringIndex;
use crate::model::{FunctionKey, Naming, SourceInfo};

pub(super) const SCRIPT: &str = include_str!("assets/flame.js");

/// The page's markup around the canvas.
pub(super) fn body(title: &str, info: &SourceInfo) -> String {
    let mode = if info.mode.is_empty() { String::new() } else { format!(" · {} time", super::escape(&info.mode)) };
    let interval =
        if info.sample_interval_us > 0 { format!(" of {} µs", info.sample_interval_us) } else { String::new() };
    format!(
        "<header><h1>{}</h1><span class=\"facts\">a {}{mode} · <span id=\"total\"></span> samples{interval}</span></header>\n\
         <div class=\"controls\"><input type=\"search\" id=\"search\" placeholder=\"Search functions and files\" aria-label=\"Search\">\
         <span id=\"match-info\" class=\"match-info\"></span>\
         <label>Thread <select id=\"thread\"><option value=\"-1\">all threads</option></select></label>\
         <button id=\"reset\" type=\"button\">Reset zoom</button></div>\n\
         <div id=\"crumbs\"></div>\n<div id=\"chart\"><canvas id=\"flame\"></canvas></div>\n<div id=\"tip\"></div>",
        super::escape(title),
        super::escape(info.kind.title()),
    )
}

/// The nodes `keep` keeps (a node only under a kept parent; the root always), in preorder,
/// each node's children by samples, most first: their numbers in the tree.
pub(super) fn preorder(
    tree: &CallTree,
    functions: &[FunctionKey],
    naming: Naming,
    keep: impl Fn(u32) -> bool,
) -> Vec<u32> {
    let n = tree.len();
    // Children of each kept node, as a table of ranges (parents come before children).
    let mut kept = vec![false; n];
    let mut count = vec![0u32; n + 1];
    kept[ROOT as usize] = true;
    for node in 1..n as u32 {
        let p = tree.parent(node);
        if kept[p as usize] && keep(node) {
            kept[node as usize] = true;
            count[p as usize + 1] += 1;
        }
    }
    for i in 1..=n {
        count[i] += count[i - 1];
    }
    let mut children = vec![0u32; count[n] as usize];
    let mut fill = count.clone();
    for node in 1..n as u32 {
        if kept[node as usize] {
            let p = tree.parent(node) as usize;
            children[fill[p] as usize] = node;
            fill[p] += 1;
        }
    }
    let key = |node: u32| {
        let f = &functions[tree.function(node) as usize];
        let line = if naming == Naming::Python { f.lineno } else { 0 };
        (std::cmp::Reverse(tree.value(node)), f.funcname.as_str(), f.filename.as_str(), line)
    };
    for p in 0..n {
        children[count[p] as usize..count[p + 1] as usize].sort_by(|&a, &b| key(a).cmp(&key(b)));
    }
    let mut order = Vec::with_capacity(count[n] as usize + 1);
    let mut stack = vec![ROOT];
    while let Some(node) = stack.pop() {
        order.push(node);
        let range = count[node as usize] as usize..count[node as usize + 1] as usize;
        stack.extend(children[range].iter().rev());
    }
    order
}

/// Writes `items` as a JSON array of numbers.
pub(super) fn write_numbers<T: std::fmt::Display>(
    out: &mut dyn Write,
    items: impl Iterator<Item = T>,
) -> io::Result<()> {
    out.write_all(b"[")?;
    for (k, v) in items.enumerate() {
        if k > 0 {
            out.write_all(b",")?;
        }
        write!(out, "{v}")?;
    }
    out.write_all(b"]")
}

/// The page's string and function tables, filled as nodes are written.
#[derive(Default)]
pub(super) struct Tables {
    strings: StringIndex,
    index: HashMap<(u32, u32, i32), u32>,
    names: Vec<u32>,
    files: Vec<u32>,
    lines: Vec<i32>,
}

impl Tables {
    /// The page's function number of `key` (its line left out for native naming).
    pub(super) fn func(&mut self, key: &FunctionKey, naming: Naming) -> u32 {
        let line = if naming == Naming::Python { key.lineno } else { 0 };
        let (name, file) = (self.strings.id(&key.funcname), self.strings.id(&key.filename));
        let next = self.names.len() as u32;
        let f = *self.index.entry((name, file, line)).or_insert(next);
        if f == next {
            self.names.push(name);
            self.files.push(file);
            self.lines.push(line);
        }
        f
    }

    /// `"strings":[…],"funcs":{…}`.
    pub(super) fn write(&self, out: &mut dyn Write) -> io::Result<()> {
        out.write_all(b"\"strings\":[")?;
        for (k, s) in self.strings.strings().iter().enumerate() {
            if k > 0 {
                out.write_all(b",")?;
            }
            super::write_json_str(out, s)?;
        }
        out.write_all(b"],\"funcs\":{\"name\":")?;
        write_numbers(out, self.names.iter())?;
        out.write_all(b",\"file\":")?;
        write_numbers(out, self.files.iter())?;
        out.write_all(b",\"line\":")?;
        write_numbers(out, self.lines.iter())?;
        out.write_all(b"}")
    }
}

/// The preorder numbers of `order`'s nodes' parents (-1 for the root), and their functions in
/// `tables` (-1 for the root).
pub(super) fn parents_and_funcs(
    tree: &CallTree,
    order: &[u32],
    functions: &[FunctionKey],
    naming: Naming,
    tables: &mut Tables,
) -> (Vec<i64>, Vec<i64>) {
    let mut position = vec![u32::MAX; tree.len()];
    for (k, &node) in order.iter().enumerate() {
        position[node as usize] = k as u32;
    }
    let parents = order.iter().map(|&n| if n == ROOT { -1 } else { i64::from(position[tree.parent(n) as usize]) });
    let funcs = order.iter().map(|&n| match tree.function(n) {
        NO_FUNCTION => -1,
        k => i64::from(tables.func(&functions[k as usize], naming)),
    });
    (parents.collect(), funcs.collect())
}

/// The fields every page of a profile's tree starts with: title, input, mode, interval,
/// threads, and the kept nodes as columns (`"nodes":{…}`, and `"thread_rows"` for several
/// threads). The string and function tables are left to the caller, which may add nodes.
pub(super) fn write_tree_fields(
    out: &mut dyn Write,
    tree: &CallTree,
    order: &[u32],
    parents: &[i64],
    funcs: &[i64],
    info: &SourceInfo,
    title: &str,
) -> io::Result<()> {
    out.write_all(b"\"title\":")?;
    super::write_json_str(out, title)?;
    out.write_all(b",\"input\":")?;
    super::write_json_str(out, info.kind.title())?;
    out.write_all(b",\"mode\":")?;
    super::write_json_str(out, &info.mode)?;
    write!(out, ",\"interval_us\":{},\"threads\":[", info.sample_interval_us)?;
    let threads = tree.threads();
    for (k, t) in threads.iter().enumerate() {
        write!(out, "{}\"{t}\"", if k > 0 { "," } else { "" })?;
    }
    out.write_all(b"],\"nodes\":{\"parent\":")?;
    write_numbers(out, parents.iter())?;
    out.write_all(b",\"func\":")?;
    write_numbers(out, funcs.iter())?;
    out.write_all(b",\"value\":")?;
    write_numbers(out, order.iter().map(|&n| tree.value(n)))?;
    out.write_all(b",\"self\":")?;
    write_numbers(out, order.iter().map(|&n| tree.own(n)))?;
    out.write_all(b"}")?;
    if threads.len() > 1 {
        out.write_all(b",\"thread_rows\":[")?;
        for (k, &n) in order.iter().enumerate() {
            if k > 0 {
                out.write_all(b",")?;
            }
            write_numbers(out, tree.thread_rows(n).iter().flat_map(|r| [r.thread, r.samples, r.own]))?;
        }
        out.write_all(b"]")?;
    }
    Ok(())
}

/// Writes the flame graph page of `tree` (finished; its functions are `functions`, the frame
/// table's) titled `title`.
pub fn write_flamegraph(
    tree: &CallTree,
    functions: &[FunctionKey],
    info: &SourceInfo,
    title: &str,
    out: &mut dyn Write,
) -> io::Result<()> {
    let order = preorder(tree, functions, info.naming, |n| tree.kept(n));
    let mut tables = Tables::default();
    let (parents, funcs) = parents_and_funcs(tree, &order, functions, info.naming, &mut tables);
    let mut write_data = |out: &mut dyn Write| -> io::Result<()> {
        out.write_all(b"{\"format\":\"tachyon-flamegraph\",\"version\":1,")?;
        write_tree_fields(out, tree, &order, &parents, &funcs, info, title)?;
        out.write_all(b",")?;
        tables.write(out)?;
        out.write_all(b"}")
    };
    super::write_page(out, title, &body(title, info), &mut write_data, SCRIPT)
}
