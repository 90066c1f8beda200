//! Collapsed stacks (`tid:T;root;...;leaf COUNT` per line), byte-identical to CPython's
//! `replay --collapsed`: one line per distinct (thread, stack of `(filename, lineno, funcname)`),
//! frames named `basename:funcname:lineno` (or just the function for pstats' `~` pseudo-file
//! at line 0), lines sorted by descending count, then by text, then in the order first seen.
//!
//! Texts of deep stacks are long (a kilobyte and more) and share most of their bytes, so
//! neither counting nor sorting touches them. A stack is counted under a key of four bytes a
//! frame: the frame's rank among all frame names in text order. When every name is distinct
//! and free of `;`, comparing two texts comes down to comparing the names where the stacks
//! part — a name alone when the line ends there, followed by `;` when it goes on — so each
//! function has two ranks (its name alone, its name and `;`), the key takes the first for the
//! innermost frame and the second for the others, and big-endian keys compare as their texts
//! do. Texts are made only as the lines are written. A profile whose names collide
//! (`basename` drops the directory) or hold `;` is sorted by its texts instead.

use std::io::{self, Write};

use crate::hash::IdMap;
use crate::model::{basename, Call, Collector, FrameTable, Naming};
use crate::pyfmt::push_decimal;

/// Byte length of the thread id at the front of a key.
const TID: usize = 8;

/// How frames become key words.
#[derive(Debug)]
struct Ranks {
    /// Per table frame id: the word when the frame has callees, and when it is innermost.
    outer: Vec<u32>,
    innermost: Vec<u32>,
    /// Word → function key.
    function: Vec<u32>,
    /// Key order is text order (names distinct and without `;`).
    ordered: bool,
}

impl Ranks {
    /// Ranks of the functions' `names`; with `merge_equal`, functions of one name are one
    /// frame of a line (native names: one function at several lines of its file).
    fn new(frames: &FrameTable, names: &[String], merge_equal: bool) -> Ranks {
        let n = names.len();
        // Per function, the function whose words it uses: the first of its name when merging.
        let class: Vec<u32> = if merge_equal {
            let mut first: IdMap<&str, u32> = IdMap::default();
            (0..n as u32).map(|f| *first.entry(names[f as usize].as_str()).or_insert(f)).collect()
        } else {
            (0..n as u32).collect()
        };
        let mut distinct: Vec<&str> = names.iter().map(String::as_str).collect();
        distinct.sort_unstable();
        let collide = !merge_equal && distinct.windows(2).any(|w| w[0] == w[1]);
        let ordered = !collide && !names.iter().any(|s| s.contains(';'));
        // Word 2k is function k innermost, 2k + 1 function k with callees; ordered, the words
        // are renumbered by the texts those stand for.
        let mut word: Vec<u32> = (0..2 * n as u32).collect();
        if ordered {
            let key = |w: u32| names[w as usize / 2].bytes().chain((w % 2 == 1).then_some(b';'));
            let mut by_text: Vec<u32> = word.clone();
            by_text.sort_unstable_by(|&a, &b| key(a).cmp(key(b)));
            for (rank, &w) in by_text.iter().enumerate() {
                word[w as usize] = rank as u32;
            }
        }
        let mut function = vec![0u32; 2 * n];
        for (w, &rank) in word.iter().enumerate() {
            function[rank as usize] = w as u32 / 2;
        }
        let of = |odd: u32| {
            (0..frames.frames.len() as u32)
                .map(|id| word[(2 * class[frames.function(id) as usize] + odd) as usize])
                .collect()
        };
        Ranks { outer: of(1), innermost: of(0), function, ordered }
    }
}

/// Counts stacks per thread.
#[derive(Debug)]
pub struct CollapsedCollector {
    naming: Naming,
    /// Lines start with `tid:T`.
    threads: bool,
    ranks: Option<Ranks>,
    /// Key → (samples, first-seen ordinal).
    stacks: IdMap<Box<[u8]>, (u64, u32)>,
    key: Vec<u8>,
}

impl Default for CollapsedCollector {
    /// CPython's lines: Python names under a `tid:T` root.
    fn default() -> Self {
        CollapsedCollector::new(Naming::Python, true)
    }
}

/// Frame names by function key.
fn names(frames: &FrameTable, naming: Naming) -> Vec<String> {
    frames
        .functions
        .iter()
        .map(|f| {
            if naming == Naming::Native || (f.filename == "~" && f.lineno == 0) {
                f.funcname.clone()
            } else {
                format!("{}:{}:{}", basename(&f.filename), f.funcname, f.lineno)
            }
        })
        .collect()
}

impl Collector for CollapsedCollector {
    fn collect(&mut self, frames: &FrameTable, s: &Call<'_>) {
        let Some((&innermost, outer)) = s.stack.split_first() else { return };
        let naming = self.naming;
        let ranks =
            self.ranks.get_or_insert_with(|| Ranks::new(frames, &names(frames, naming), naming == Naming::Native));
        self.key.clear();
        self.key.extend_from_slice(&s.thread_id.to_le_bytes());
        for &id in outer.iter().rev() {
            self.key.extend_from_slice(&ranks.outer[id as usize].to_be_bytes());
        }
        self.key.extend_from_slice(&ranks.innermost[innermost as usize].to_be_bytes());
        if let Some(entry) = self.stacks.get_mut(&self.key[..]) {
            entry.0 += s.samples();
        } else {
            let order = self.stacks.len() as u32;
            self.stacks.insert(self.key.as_slice().into(), (s.samples(), order));
        }
    }
}

impl CollapsedCollector {
    /// Lines naming frames by `naming`, under a `tid:T` root when `threads`.
    pub fn new(naming: Naming, threads: bool) -> Self {
        CollapsedCollector { naming, threads, ranks: None, stacks: IdMap::default(), key: Vec::new() }
    }

    /// The stacks in CPython's order: `(key, samples)`.
    fn sorted(&self, names: &[String]) -> Vec<(&[u8], u64)> {
        let Some(ranks) = &self.ranks else { return Vec::new() };
        let mut stacks: Vec<(&[u8], u64, u32)> = self.stacks.iter().map(|(k, &(n, o))| (&k[..], n, o)).collect();
        if ranks.ordered {
            // Threads in the order of "tid:T;" (every line has a frame after the id).
            let mut tids: Vec<u64> = stacks.iter().map(|s| thread_of(s.0)).collect();
            tids.sort_unstable();
            tids.dedup();
            tids.sort_by_cached_key(|t| format!("{t};"));
            let rank: IdMap<u64, u32> = tids.iter().enumerate().map(|(i, &t)| (t, i as u32)).collect();
            // The order is the thread's rank, then the key's words: keys are distinct.
            for s in &mut stacks {
                s.2 = rank[&thread_of(s.0)];
            }
            stacks.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.2.cmp(&b.2)).then_with(|| a.0[TID..].cmp(&b.0[TID..])));
        } else {
            let mut texts: Vec<(String, &[u8], u64, u32)> =
                stacks.into_iter().map(|(k, n, o)| (text(k, ranks, names, true), k, n, o)).collect();
            texts.sort_unstable_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(&b.0)).then_with(|| a.3.cmp(&b.3)));
            stacks = texts.into_iter().map(|(_, k, n, o)| (k, n, o)).collect();
        }
        stacks.into_iter().map(|(k, n, _)| (k, n)).collect()
    }

    /// The lines `(stack, count)` in CPython's order.
    pub fn lines(&self, frames: &FrameTable) -> Vec<(String, u64)> {
        let names = names(frames, self.naming);
        let Some(ranks) = &self.ranks else { return Vec::new() };
        self.sorted(&names).into_iter().map(|(k, n)| (text(k, ranks, &names, self.threads), n)).collect()
    }

    /// Writes the lines, each text made as it is written.
    pub fn write(&self, frames: &FrameTable, out: &mut impl Write) -> io::Result<()> {
        let names = names(frames, self.naming);
        let Some(ranks) = &self.ranks else { return Ok(()) };
        let mut line = Vec::new();
        for (key, count) in self.sorted(&names) {
            line.clear();
            if self.threads {
                line.extend_from_slice(b"tid:");
                push_decimal(&mut line, thread_of(key));
            }
            for (i, word) in key[TID..].chunks_exact(4).enumerate() {
                if self.threads || i > 0 {
                    line.push(b';');
                }
                line.extend_from_slice(names[function_of(word, ranks)].as_bytes());
            }
            line.push(b' ');
            push_decimal(&mut line, count);
            line.push(b'\n');
            out.write_all(&line)?;
        }
        Ok(())
    }
}

fn thread_of(key: &[u8]) -> u64 {
    let mut t = [0u8; TID];
    t.copy_from_slice(&key[..TID]);
    u64::from_le_bytes(t)
}

fn function_of(word: &[u8], ranks: &Ranks) -> usize {
    let mut w = [0u8; 4];
    w.copy_from_slice(word);
    ranks.function[u32::from_be_bytes(w) as usize] as usize
}

/// The line's text; without `threads`, no `tid:T` root.
fn text(key: &[u8], ranks: &Ranks, names: &[String], threads: bool) -> String {
    let mut text = if threads { format!("tid:{}", thread_of(key)) } else { String::new() };
    for (i, word) in key[TID..].chunks_exact(4).enumerate() {
        if threads || i > 0 {
            text.push(';');
        }
        text.push_str(&names[function_of(word, ranks)]);
    }
    text
}
