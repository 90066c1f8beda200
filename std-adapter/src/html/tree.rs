//! The call tree a flame graph draws: one node per path of functions from the outermost frame,
//! with the samples below it (its value), the samples with it innermost (its own), and both per
//! thread — the tree CPython's `FlamegraphCollector` builds, node for node, so that a page's
//! numbers are CPython's.
//!
//! A node is a function as CPython keys it, `(filename, lineno, funcname)` (the frame table's
//! function keys); for native profiles, a function name (as their collapsed stacks and go
//! pprof's flame graph merge a function's lines). Samples with an empty stack are not in the
//! tree, nor is a thread that has only those: CPython's collectors are not handed them.
//!
//! Building costs a hash look-up per frame of a stack that differs from the previous call's
//! (consecutive samples share most of their frames, so a call walks down the previous one's
//! path as far as they agree), and per-thread numbers are kept only at the node a sample ends
//! in and summed up the tree at the end: memory follows distinct paths and (path, thread)
//! pairs, never samples.

use std::collections::HashMap;

use crate::hash::IdMap;
use crate::model::{Call, Collector, FrameTable, Naming};

/// The root's node number.
pub const ROOT: u32 = 0;
/// The function of the root.
pub const NO_FUNCTION: u32 = u32::MAX;

/// Per node and thread: samples below and own, and the next entry of the same node.
#[derive(Debug, Clone, Copy)]
struct ThreadEntry {
    thread: u32,
    value: u64,
    own: u64,
    next: u32,
}

/// No entry.
const NONE: u32 = u32::MAX;

/// The call tree of a profile, collected from the hub ([`Collector`]); [`CallTree::finish`]
/// sums it up.
#[derive(Debug)]
pub struct CallTree {
    naming: Naming,
    /// Per node: its parent (the root's is itself), its function (a frame-table function key,
    /// or the first key of its name for native naming; [`NO_FUNCTION`] at the root), the
    /// samples with it innermost, and (after `finish`) the samples below it.
    parent: Vec<u32>,
    function: Vec<u32>,
    own: Vec<u64>,
    value: Vec<u64>,
    child: IdMap<(u32, u32), u32>,
    /// Per frame-table function key: the key the tree uses for it (native naming merges one
    /// name's keys), `NO_FUNCTION` until met.
    class_of: Vec<u32>,
    first_of_name: HashMap<String, u32>,
    /// Threads by first sample; per node, its first thread entry.
    threads: Vec<u64>,
    thread_index: IdMap<u64, u32>,
    entries: Vec<ThreadEntry>,
    first_entry: Vec<u32>,
    entry_of: IdMap<(u32, u32), u32>,
    /// The previous call's path: functions outermost first, and their nodes.
    last_functions: Vec<u32>,
    last_nodes: Vec<u32>,
    finished: bool,
}

impl CallTree {
    /// An empty tree; `naming` says how frames are keyed ([`Naming::Native`]: by name).
    pub fn new(naming: Naming) -> Self {
        CallTree {
            naming,
            parent: vec![ROOT],
            function: vec![NO_FUNCTION],
            own: vec![0],
            value: Vec::new(),
            child: IdMap::default(),
            class_of: Vec::new(),
            first_of_name: HashMap::new(),
            threads: Vec::new(),
            thread_index: IdMap::default(),
            entries: Vec::new(),
            first_entry: vec![NONE],
            entry_of: IdMap::default(),
            last_functions: Vec::new(),
            last_nodes: Vec::new(),
            finished: false,
        }
    }

    fn class(&mut self, frames: &FrameTable, id: u32) -> u32 {
        let k = frames.function(id);
        if self.class_of.len() <= k as usize {
            self.class_of.resize(frames.functions.len().max(k as usize + 1), NO_FUNCTION);
        }
        let c = &mut self.class_of[k as usize];
        if *c == NO_FUNCTION {
            *c = match self.naming {
                Naming::Python => k,
                Naming::Native => *self.first_of_name.entry(frames.functions[k as usize].funcname.clone()).or_insert(k),
            };
        }
        *c
    }

    fn node(&mut self, parent: u32, function: u32) -> u32 {
        let next = self.parent.len() as u32;
        let n = *self.child.entry((parent, function)).or_insert(next);
        if n == next {
            self.parent.push(parent);
            self.function.push(function);
            self.own.push(0);
            self.first_entry.push(NONE);
        }
        n
    }

    fn add_thread_own(&mut self, node: u32, thread: u32, n: u64) {
        let next = self.entries.len() as u32;
        let e = *self.entry_of.entry((node, thread)).or_insert(next);
        if e == next {
            self.entries.push(ThreadEntry { thread, value: 0, own: 0, next: self.first_entry[node as usize] });
            self.first_entry[node as usize] = e;
        }
        self.entries[e as usize].own += n;
    }

    /// Sums each node's samples up the tree; call once, after the replay.
    pub fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.value = self.own.clone();
        for e in &mut self.entries {
            e.value = e.own;
        }
        // A child is numbered after its parent: children first when counting down.
        for node in (1..self.parent.len()).rev() {
            let parent = self.parent[node];
            self.value[parent as usize] += self.value[node];
            let mut e = self.first_entry[node];
            while e != NONE {
                let ThreadEntry { thread, value, next, .. } = self.entries[e as usize];
                let at = self.entries.len() as u32;
                let p = *self.entry_of.entry((parent, thread)).or_insert(at);
                if p == at {
                    self.entries.push(ThreadEntry {
                        thread,
                        value: 0,
                        own: 0,
                        next: self.first_entry[parent as usize],
                    });
                    self.first_entry[parent as usize] = p;
                }
                self.entries[p as usize].value += value;
                e = next;
            }
        }
        self.entry_of = IdMap::default();
        self.child = IdMap::default();
    }

    /// Nodes, the root first, each after its parent.
    pub fn len(&self) -> usize {
        self.parent.len()
    }

    /// Whether nothing was sampled.
    pub fn is_empty(&self) -> bool {
        self.value.first().copied().unwrap_or(0) == 0
    }

    /// The node's parent (the root's is the root).
    pub fn parent(&self, node: u32) -> u32 {
        self.parent[node as usize]
    }

    /// The node's function: a frame-table function key, [`NO_FUNCTION`] at the root.
    pub fn function(&self, node: u32) -> u32 {
        self.function[node as usize]
    }

    /// Samples at or below the node (after [`CallTree::finish`]).
    pub fn value(&self, node: u32) -> u64 {
        self.value[node as usize]
    }

    /// Samples with the node innermost (none at the root).
    pub fn own(&self, node: u32) -> u64 {
        self.own[node as usize]
    }

    /// Thread ids, by first sample.
    pub fn threads(&self) -> &[u64] {
        &self.threads
    }

    /// Per thread that sampled at or below the node: (thread's index in
    /// [`CallTree::threads`], samples at or below, samples with the node innermost).
    pub fn thread_values(&self, node: u32) -> impl Iterator<Item = (u32, u64, u64)> + '_ {
        let mut e = self.first_entry[node as usize];
        std::iter::from_fn(move || {
            let entry = self.entries.get(e as usize)?;
            e = entry.next;
            Some((entry.thread, entry.value, entry.own))
        })
    }

    /// Whether CPython's flame graph keeps the node: it drops a node (and all below) with
    /// fewer than 0.1 % of the profile's samples (at least 1) unless, for one of its threads,
    /// it holds at least 0.1 % of that thread's samples (at least 1) — the same float
    /// arithmetic as its `int(n * 0.001)`. `thread_floor` is [`CallTree::thread_floors`].
    pub fn kept(&self, node: u32, thread_floor: &[u64]) -> bool {
        node == ROOT
            || self.value(node) >= floor(self.value(ROOT))
            || self.thread_values(node).any(|(t, v, _)| v >= thread_floor[t as usize])
    }

    /// Per thread, the fewest samples that keep a node for that thread ([`CallTree::kept`]).
    pub fn thread_floors(&self) -> Vec<u64> {
        let mut floors = vec![1; self.threads.len()];
        for (t, v, _) in self.thread_values(ROOT) {
            floors[t as usize] = floor(v);
        }
        floors
    }
}

/// CPython's `max(1, int(n * 0.001))`.
fn floor(n: u64) -> u64 {
    ((n as f64 * 0.001) as u64).max(1)
}

impl Collector for CallTree {
    fn collect(&mut self, frames: &FrameTable, call: &Call<'_>) {
        if call.stack.is_empty() {
            return;
        }
        let n = call.samples();
        let next = self.threads.len() as u32;
        let thread = *self.thread_index.entry(call.thread_id).or_insert(next);
        if thread == next {
            self.threads.push(call.thread_id);
        }
        // Down the previous call's path while the functions agree, then by look-up.
        let mut node = ROOT;
        for (depth, &id) in call.stack.iter().rev().enumerate() {
            let f = self.class(frames, id);
            if self.last_functions.get(depth) == Some(&f) {
                node = self.last_nodes[depth];
                continue;
            }
            self.last_functions.truncate(depth);
            self.last_nodes.truncate(depth);
            node = self.node(node, f);
            self.last_functions.push(f);
            self.last_nodes.push(node);
        }
        self.last_functions.truncate(call.stack.len());
        self.last_nodes.truncate(call.stack.len());
        self.own[node as usize] += n;
        self.add_thread_own(node, thread, n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{FrameInfo, Times};

    fn table(names: &[&str]) -> FrameTable {
        let mut t = FrameTable::default();
        for n in names {
            t.push(FrameInfo { filename: "a.py".into(), funcname: (*n).into(), ..FrameInfo::default() });
        }
        t
    }

    fn call(t: &FrameTable, tree: &mut CallTree, thread: u64, n: u64, stack: &[u32]) {
        let c =
            Call { times: Times::Counted(n), interpreter_id: 0, thread_id: thread, status: 0, stack, continued: false };
        tree.collect(t, &c);
    }

    /// The node reached from the root through `path` (function names, outermost first).
    fn find(t: &FrameTable, tree: &CallTree, path: &[&str]) -> u32 {
        let mut node = ROOT;
        for name in path {
            node = (1..tree.len() as u32)
                .find(|&n| tree.parent(n) == node && t.functions[tree.function(n) as usize].funcname == *name)
                .unwrap_or_else(|| panic!("no {name} under node {node}"));
        }
        node
    }

    #[test]
    fn values_own_and_threads_sum_up_the_tree() {
        let t = table(&["main", "f", "g"]);
        let mut tree = CallTree::new(Naming::Python);
        // Innermost first: main→f→g on thread 7 twice, main→f on thread 9, main→g, and an
        // empty stack (not in the tree).
        call(&t, &mut tree, 7, 2, &[2, 1, 0]);
        call(&t, &mut tree, 9, 3, &[1, 0]);
        call(&t, &mut tree, 7, 1, &[2, 0]);
        call(&t, &mut tree, 9, 4, &[]);
        call(&t, &mut tree, 7, 5, &[2, 1, 0]);
        tree.finish();
        assert_eq!(tree.threads(), &[7, 9]);
        assert_eq!((tree.value(ROOT), tree.own(ROOT)), (11, 0));
        let main = find(&t, &tree, &["main"]);
        let f = find(&t, &tree, &["main", "f"]);
        let fg = find(&t, &tree, &["main", "f", "g"]);
        let g = find(&t, &tree, &["main", "g"]);
        assert_eq!((tree.value(main), tree.own(main)), (11, 0));
        assert_eq!((tree.value(f), tree.own(f)), (10, 3));
        assert_eq!((tree.value(fg), tree.own(fg)), (7, 7));
        assert_eq!((tree.value(g), tree.own(g)), (1, 1));
        let mut per: Vec<_> = tree.thread_values(f).collect();
        per.sort();
        assert_eq!(per, [(0, 7, 0), (1, 3, 3)]);
        let mut root: Vec<_> = tree.thread_values(ROOT).collect();
        root.sort();
        assert_eq!(root, [(0, 8, 0), (1, 3, 0)]);
        assert_eq!(tree.len(), 5);
    }

    #[test]
    fn native_naming_merges_a_functions_lines() {
        let mut t = FrameTable::default();
        for line in [1, 2] {
            t.push(FrameInfo {
                filename: "prog".into(),
                funcname: "work".into(),
                location: Some(tachyon_core::tables::Location { lineno: line, end_lineno: line, col: 0, end_col: 0 }),
                ..FrameInfo::default()
            });
        }
        for (naming, nodes) in [(Naming::Python, 3), (Naming::Native, 2)] {
            let mut tree = CallTree::new(naming);
            call(&t, &mut tree, 0, 1, &[0]);
            call(&t, &mut tree, 0, 1, &[1]);
            tree.finish();
            assert_eq!(tree.len(), nodes, "{naming:?}");
        }
    }

    #[test]
    fn cpython_keeps_a_node_by_the_profile_or_by_one_of_its_threads() {
        let t = table(&["big", "small", "lone"]);
        let mut tree = CallTree::new(Naming::Python);
        call(&t, &mut tree, 1, 5000, &[0]);
        // 4 of 5,004 samples: under 0.1 % of the profile (5) and of thread 1 (5).
        call(&t, &mut tree, 1, 4, &[1]);
        // Thread 2's only sample: 0.1 % of the profile is 5, of thread 2 it is 1.
        call(&t, &mut tree, 2, 1, &[2]);
        tree.finish();
        let floors = tree.thread_floors();
        assert_eq!(floors, [5, 1]);
        let kept = |name| tree.kept(find(&t, &tree, &[name]), &floors);
        assert!(kept("big"));
        assert!(!kept("small"));
        assert!(kept("lone"));
    }
}
