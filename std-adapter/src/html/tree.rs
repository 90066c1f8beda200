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
//! path as far as they agree). Per-thread samples are kept only where a sample ends, as
//! (node, thread, samples) rows compacted as they grow, and are summed per thread at the end:
//! memory follows distinct paths and (path, thread) pairs, never samples, and never the
//! (node, thread) pairs of every ancestor (a million threads on one path are a million rows,
//! not a million per frame of the path).
//!
//! [`CallTree::finish`] then applies CPython's page's rule for which nodes it shows
//! ([`CallTree::kept`]) and folds the samples of the nodes it drops into their nearest kept
//! ancestor, per thread ([`CallTree::thread_rows`]), so that a kept node's per-thread
//! samples are its rows' plus its kept children's.

use std::collections::{BinaryHeap, HashMap};

use crate::hash::IdMap;
use crate::model::{Call, Collector, FrameTable, Naming};

/// The root's node number.
pub const ROOT: u32 = 0;
/// The function of the root.
pub const NO_FUNCTION: u32 = u32::MAX;

/// Samples of one thread ending at one node; after [`CallTree::finish`], of one thread in a
/// kept node and the dropped nodes below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadRow {
    /// Index into [`CallTree::threads`] (before `finish`, the thread id itself).
    pub thread: u64,
    /// Samples of the thread ending in the node or (after `finish`) in dropped nodes below it.
    pub samples: u64,
    /// Of those, the samples ending in the node itself.
    pub own: u64,
    node: u32,
}

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
    /// (node, thread id, samples) where samples ended; compacted (sorted, equal keys added)
    /// whenever it doubles. After `finish`: rows by kept node, then thread index.
    rows: Vec<ThreadRow>,
    compacted: usize,
    /// After `finish`: thread ids in ascending order; per node, where its rows start; kept.
    threads: Vec<u64>,
    row_start: Vec<u32>,
    kept: Vec<bool>,
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
            rows: Vec::new(),
            compacted: 0,
            threads: Vec::new(),
            row_start: Vec::new(),
            kept: Vec::new(),
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
        }
        n
    }

    /// Sorts the rows by `key` and adds up the samples of rows with equal keys.
    fn merge_rows(rows: &mut Vec<ThreadRow>, key: impl Fn(&ThreadRow) -> (u32, u64)) {
        rows.sort_unstable_by_key(&key);
        rows.dedup_by(|b, a| {
            let same = key(a) == key(b);
            if same {
                a.samples += b.samples;
                a.own += b.own;
            }
            same
        });
    }

    fn add_row(&mut self, node: u32, thread: u64, n: u64) {
        if let Some(last) = self.rows.last_mut() {
            if last.node == node && last.thread == thread {
                last.samples += n;
                last.own += n;
                return;
            }
        }
        self.rows.push(ThreadRow { thread, samples: n, own: n, node });
        if self.rows.len() >= 2 * self.compacted.max(4096) {
            Self::merge_rows(&mut self.rows, |r| (r.node, r.thread));
            self.compacted = self.rows.len();
        }
    }

    /// Sums the tree up, decides which nodes CPython's page keeps, and folds the dropped ones'
    /// samples into their kept ancestors; call once, after the replay.
    pub fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.child = IdMap::default();
        let n = self.parent.len();
        self.value = self.own.clone();
        // A child is numbered after its parent: children first when counting down.
        for node in (1..n).rev() {
            self.value[self.parent[node] as usize] += self.value[node];
        }
        let mut rows = std::mem::take(&mut self.rows);
        // Per thread (rows grouped by thread), its 0.1 %, and the nodes where the thread's
        // samples reach it.
        Self::merge_rows(&mut rows, |r| (r.node, r.thread));
        rows.sort_unstable_by_key(|r| (r.thread, r.node));
        let mut significant = vec![false; n];
        let mut sums: IdMap<u32, u64> = IdMap::default();
        let mut pending = BinaryHeap::new();
        self.threads.clear();
        for group in rows.chunk_by(|a, b| a.thread == b.thread) {
            self.threads.push(group[0].thread);
            let floor = floor(group.iter().map(|r| r.samples).sum());
            sums.clear();
            for r in group {
                *sums.entry(r.node).or_insert(0) += r.samples;
                pending.push(r.node);
            }
            // Deepest numbers first: a node's sum is whole when it comes up.
            while let Some(node) = pending.pop() {
                while pending.peek() == Some(&node) {
                    pending.pop();
                }
                if node == ROOT {
                    continue;
                }
                let sum = sums[&node];
                significant[node as usize] |= sum >= floor;
                let parent = self.parent[node as usize];
                let entry = sums.entry(parent).or_insert(0);
                if *entry == 0 {
                    pending.push(parent);
                }
                *entry += sum;
            }
        }
        // Kept: CPython's rule, under a kept parent. Anchor: the nearest kept node.
        let total_floor = floor(self.value[ROOT as usize]);
        self.kept = vec![false; n];
        self.kept[ROOT as usize] = true;
        let mut anchor = vec![ROOT; n];
        for node in 1..n {
            let p = self.parent[node] as usize;
            self.kept[node] = self.kept[p] && (self.value[node] >= total_floor || significant[node]);
            anchor[node] = if self.kept[node] { node as u32 } else { anchor[p] };
        }
        for r in &mut rows {
            let k = anchor[r.node as usize];
            if k != r.node {
                r.own = 0;
            }
            r.node = k;
            r.thread = self.threads.binary_search(&r.thread).expect("a thread of the rows") as u64;
        }
        Self::merge_rows(&mut rows, |r| (r.node, r.thread));
        self.row_start = vec![0; n + 1];
        for r in &rows {
            self.row_start[r.node as usize + 1] += 1;
        }
        for i in 1..=n {
            self.row_start[i] += self.row_start[i - 1];
        }
        self.rows = rows;
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

    /// Thread ids, ascending (after [`CallTree::finish`]).
    pub fn threads(&self) -> &[u64] {
        &self.threads
    }

    /// Whether CPython's flame graph shows the node (after [`CallTree::finish`]): it drops a
    /// node, and all below it, with fewer than 0.1 % of the profile's samples (at least 1)
    /// unless, for one of the threads, it holds at least 0.1 % of that thread's samples (at
    /// least 1) — the same float arithmetic as its `int(n * 0.001)`.
    pub fn kept(&self, node: u32) -> bool {
        self.kept[node as usize]
    }

    /// A kept node's samples per thread, leaving out its kept children's (after
    /// [`CallTree::finish`]): its own and those of the dropped nodes below it, by thread index.
    pub fn thread_rows(&self, node: u32) -> &[ThreadRow] {
        let (a, b) = (self.row_start[node as usize], self.row_start[node as usize + 1]);
        &self.rows[a as usize..b as usize]
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
        self.add_row(node, call.thread_id, n);
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

    /// A kept node's (thread id, samples at or below, own samples), from the rows of the kept
    /// nodes below it.
    fn per_thread(tree: &CallTree, node: u32) -> Vec<(u64, u64, u64)> {
        let mut sums = std::collections::BTreeMap::new();
        for d in 0..tree.len() as u32 {
            let mut a = d;
            while a != node && a != ROOT {
                a = tree.parent(a);
            }
            if a != node || !tree.kept(d) {
                continue;
            }
            for r in tree.thread_rows(d) {
                let e = sums.entry(tree.threads()[r.thread as usize]).or_insert((0, 0));
                e.0 += r.samples;
                if d == node {
                    e.1 += r.own;
                }
            }
        }
        sums.into_iter().map(|(t, (v, o))| (t, v, o)).collect()
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
        assert_eq!(per_thread(&tree, f), [(7, 7, 0), (9, 3, 3)]);
        assert_eq!(per_thread(&tree, ROOT), [(7, 8, 0), (9, 3, 0)]);
        assert_eq!(tree.len(), 5);
    }

    #[test]
    fn rows_compact_as_they_grow() {
        let t = table(&["a", "b"]);
        let mut tree = CallTree::new(Naming::Python);
        // Alternating stacks on 3 threads: never two equal rows in a row.
        for i in 0..100_000u64 {
            call(&t, &mut tree, i % 3, 1, &[(i % 2) as u32]);
        }
        assert!(tree.rows.len() <= 2 * 4096, "{} rows", tree.rows.len());
        tree.finish();
        let a = find(&t, &tree, &["a"]);
        assert_eq!(per_thread(&tree, a), [(0, 16667, 16667), (1, 16666, 16666), (2, 16667, 16667)]);
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
        let t = table(&["big", "small", "lone", "under"]);
        let mut tree = CallTree::new(Naming::Python);
        call(&t, &mut tree, 1, 5000, &[0]);
        // 4 of 5,005 samples: under 0.1 % of the profile (5) and of thread 1 (5).
        call(&t, &mut tree, 1, 4, &[1]);
        // Thread 2's only sample: 0.1 % of the profile is 5, of thread 2 it is 1.
        call(&t, &mut tree, 2, 1, &[2]);
        // 1 sample under "big": dropped, its sample folded into big's row for thread 1.
        call(&t, &mut tree, 1, 1, &[3, 0]);
        tree.finish();
        let kept = |path: &[&str]| tree.kept(find(&t, &tree, path));
        assert!(kept(&["big"]));
        assert!(!kept(&["small"]));
        assert!(kept(&["lone"]));
        assert!(!kept(&["big", "under"]));
        let big = find(&t, &tree, &["big"]);
        assert_eq!(tree.thread_rows(big), [ThreadRow { thread: 0, samples: 5001, own: 5000, node: big }]);
        // The root holds what its dropped child "small" had.
        assert_eq!(tree.thread_rows(ROOT), [ThreadRow { thread: 0, samples: 4, own: 0, node: ROOT }]);
    }
}
