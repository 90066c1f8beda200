//! Collapsed stacks (`tid:T;root;...;leaf COUNT` per line), byte-identical to CPython's
//! `replay --collapsed`: one line per distinct (thread, stack of `(filename, lineno, funcname)`),
//! frames named `basename:funcname:lineno` (or just the function for pstats' `~` pseudo-file
//! at line 0), lines sorted by descending count, then by text, then in the order first seen.
//!
//! Texts of deep stacks are long (a kilobyte and more) and share most of their bytes, so
//! neither counting nor sorting touches them. A stack is counted under a key of one word a
//! frame (after the thread id's two): the frame's rank among all frame names in text order.
//! When every name is distinct and free of `;`, comparing two texts comes down to comparing
//! the names where the stacks part — a name alone when the line ends there, followed by `;`
//! when it goes on — so each function has two ranks (its name alone, its name and `;`), the
//! key takes the first for the innermost frame and the second for the others, and keys
//! compared word by word compare as their texts do. While the calls come, a stack is held as
//! handed over (frame ids) and found by them alone, no words made per call; when the first
//! output asks, each distinct stack is rewritten in place as its words
//! ([`SequenceIndex::rewrite`]) and stacks that then read alike (one function at another
//! column or opcode) are joined. Each distinct stack is held once, end to end with the others
//! ([`SequenceIndex`]), and a line's key is its thread and its stack's number: threads that
//! share stacks (10,000 threads sampled in the same 1,000 deep stacks) hold each stack once,
//! not once a thread. Texts are made only as the lines are written. A profile whose names
//! collide (`basename` drops the directory) or hold `;` is sorted by its texts instead.

use std::cmp::Ordering;
use std::io::{self, Write};

use crate::hash::{IdMap, SequenceIndex};
use crate::model::{basename, Call, Collector, FrameTable, Naming};
use crate::pyfmt::push_decimal;

/// How frames become key words.
#[derive(Debug, Clone)]
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
#[derive(Debug, Clone)]
pub struct CollapsedCollector {
    naming: Naming,
    /// Lines start with `tid:T`.
    threads: bool,
    ranks: Option<Ranks>,
    /// Distinct stacks, each held once: while collecting, as handed over (frame ids,
    /// innermost first), so that a stack met again is found by its ids alone; once
    /// [`finished`](Self::finish), rewritten in place as `[word of the outermost frame, …,
    /// of the innermost]`.
    stacks: SequenceIndex,
    /// Distinct keys `[tid low, tid high, stack]`, numbered in first-seen order (about 30
    /// bytes a key).
    keys: SequenceIndex,
    /// Samples per key.
    samples: Vec<u64>,
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
    fn collect(&mut self, _frames: &FrameTable, s: &Call<'_>) {
        if s.stack.is_empty() {
            return;
        }
        debug_assert!(self.ranks.is_none(), "a call collected after the lines were made");
        let stack = self.stacks.id(s.stack);
        count(&mut self.keys, &mut self.samples, [s.thread_id as u32, (s.thread_id >> 32) as u32, stack], s.samples());
    }
}

/// Adds `n` samples to `key` (`[tid low, tid high, stack]`), numbering it if it is new.
fn count(keys: &mut SequenceIndex, samples: &mut Vec<u64>, key: [u32; 3], n: u64) {
    let id = keys.id(&key) as usize;
    match samples.get_mut(id) {
        Some(sum) => *sum += n,
        None => samples.push(n),
    }
}

/// How the texts `"A;"` and `"B;"` of two thread ids compare (what orders CPython's `tid:T;`
/// roots), without making them. Ids of as many digits compare as numbers. Otherwise the
/// longer is cut to the shorter's digits: where those differ, they decide; where they are
/// equal, the shorter text has `;` where the longer has a digit, and `;` sorts after every
/// digit, so the shorter comes last.
fn thread_text_cmp(a: u64, b: u64) -> Ordering {
    let digits = |t: u64| t.checked_ilog10().unwrap_or(0);
    let (da, db) = (digits(a), digits(b));
    match da.cmp(&db) {
        Ordering::Equal => a.cmp(&b),
        Ordering::Less => a.cmp(&(b / 10u64.pow(db - da))).then(Ordering::Greater),
        Ordering::Greater => (a / 10u64.pow(da - db)).cmp(&b).then(Ordering::Less),
    }
}

impl CollapsedCollector {
    /// Lines naming frames by `naming`, under a `tid:T` root when `threads`.
    pub fn new(naming: Naming, threads: bool) -> Self {
        CollapsedCollector {
            naming,
            threads,
            ranks: None,
            stacks: SequenceIndex::new(),
            keys: SequenceIndex::new(),
            samples: Vec::new(),
        }
    }

    /// Makes the lines, once all calls are collected: each stack is rewritten in place as its
    /// words, and keys whose stacks now read alike (frames of one function at other columns
    /// or opcodes) become one, their samples added, in first-seen order. The outputs of an
    /// unfinished collector finish a copy of it (every stack held twice meanwhile).
    pub fn finish(&mut self, frames: &FrameTable) {
        if self.ranks.is_some() {
            return;
        }
        let ranks = Ranks::new(frames, &names(frames, self.naming), self.naming == Naming::Native);
        let first = self.stacks.rewrite(|stack| {
            stack.reverse();
            if let Some((innermost, outer)) = stack.split_last_mut() {
                outer.iter_mut().for_each(|id| *id = ranks.outer[*id as usize]);
                *innermost = ranks.innermost[*innermost as usize];
            }
        });
        if first.iter().enumerate().any(|(id, &f)| f as usize != id) {
            let (mut keys, mut samples) = (SequenceIndex::new(), Vec::new());
            for (key, &n) in self.keys.iter().zip(&self.samples) {
                let &[low, high, stack] = key else { continue };
                count(&mut keys, &mut samples, [low, high, first[stack as usize]], n);
            }
            (self.keys, self.samples) = (keys, samples);
        }
        self.ranks = Some(ranks);
    }

    /// This collector finished, or a finished copy of it in `copy`.
    fn finished<'a>(&'a self, frames: &FrameTable, copy: &'a mut Option<CollapsedCollector>) -> &'a Self {
        if self.ranks.is_some() {
            return self;
        }
        let copy = copy.insert(self.clone());
        copy.finish(frames);
        copy
    }

    /// Key `id`'s thread.
    fn thread(&self, id: u32) -> u64 {
        match *self.keys.get(id) {
            [low, high, _] => u64::from(low) | u64::from(high) << 32,
            _ => 0,
        }
    }

    /// Key `id`'s stack's number.
    fn stack(&self, id: u32) -> u32 {
        match *self.keys.get(id) {
            [_, _, stack] => stack,
            _ => u32::MAX,
        }
    }

    /// Key `id`'s stack: a word a frame, the outermost first.
    fn words(&self, id: u32) -> &[u32] {
        self.stacks.get(self.stack(id))
    }

    /// Key `id`'s text; without `threads`, no `tid:T` root.
    fn text(&self, id: u32, ranks: &Ranks, names: &[String], threads: bool) -> String {
        let mut text = Vec::new();
        self.push_text(id, ranks, names, threads, &mut text);
        // (Every piece is a `str` or ASCII digits.)
        String::from_utf8(text).unwrap_or_default()
    }

    /// Appends key `id`'s text to `out`: the one place a line's text is made.
    fn push_text(&self, id: u32, ranks: &Ranks, names: &[String], threads: bool, out: &mut Vec<u8>) {
        if threads {
            out.extend_from_slice(b"tid:");
            push_decimal(out, self.thread(id));
        }
        for (i, &word) in self.words(id).iter().enumerate() {
            if threads || i > 0 {
                out.push(b';');
            }
            out.extend_from_slice(names[ranks.function[word as usize] as usize].as_bytes());
        }
    }

    /// The keys' ids in CPython's order. Memory beyond the keys: 4 bytes a key (no key's
    /// text is made when names are distinct).
    fn sorted(&self, names: &[String]) -> Vec<u32> {
        let Some(ranks) = &self.ranks else { return Vec::new() };
        let mut ids: Vec<u32> = (0..self.samples.len() as u32).collect();
        let samples = &self.samples;
        if ranks.ordered {
            // The order is the thread's text, then the frames' words: keys are distinct.
            // Each key's thread and stack looked up once, not in every comparison (8 and 4
            // bytes a key while sorting).
            let threads: Vec<u64> = ids.iter().map(|&id| self.thread(id)).collect();
            let stacks: Vec<u32> = ids.iter().map(|&id| self.stack(id)).collect();
            ids.sort_unstable_by(|&a, &b| {
                let (a, b) = (a as usize, b as usize);
                samples[b].cmp(&samples[a]).then_with(|| thread_text_cmp(threads[a], threads[b])).then_with(|| {
                    if stacks[a] == stacks[b] {
                        Ordering::Equal
                    } else {
                        self.stacks.get(stacks[a]).cmp(self.stacks.get(stacks[b]))
                    }
                })
            });
        } else {
            let texts: Vec<String> = ids.iter().map(|&id| self.text(id, ranks, names, true)).collect();
            ids.sort_unstable_by(|&a, &b| {
                samples[b as usize]
                    .cmp(&samples[a as usize])
                    .then_with(|| texts[a as usize].cmp(&texts[b as usize]))
                    .then(a.cmp(&b))
            });
        }
        ids
    }

    /// Whether lines start with `tid:T`.
    pub fn threads(&self) -> bool {
        self.threads
    }

    /// The samples of every line.
    pub fn total(&self) -> u64 {
        self.samples.iter().sum()
    }

    /// The lines thread by thread, the threads in the order of their `tid:T;` texts: `thread`
    /// gets each thread's id, its samples and its lines `(text, samples)`, made only when
    /// `wanted` says so of its samples (an empty list otherwise), so that a caller may pass
    /// over threads too small to show without making their texts.
    pub fn each_thread(
        &self,
        frames: &FrameTable,
        mut wanted: impl FnMut(u64) -> bool,
        mut thread: impl FnMut(u64, u64, Vec<(String, u64)>),
    ) {
        let mut copy = None;
        let this = self.finished(frames, &mut copy);
        let Some(ranks) = &this.ranks else { return };
        let names = names(frames, this.naming);
        let mut ids: Vec<u32> = (0..this.samples.len() as u32).collect();
        ids.sort_unstable_by(|&a, &b| thread_text_cmp(this.thread(a), this.thread(b)).then(a.cmp(&b)));
        for group in ids.chunk_by(|&a, &b| this.thread(a) == this.thread(b)) {
            let samples: u64 = group.iter().map(|&id| this.samples[id as usize]).sum();
            let lines = if wanted(samples) {
                group
                    .iter()
                    .map(|&id| (this.text(id, ranks, &names, this.threads), this.samples[id as usize]))
                    .collect()
            } else {
                Vec::new()
            };
            thread(this.thread(group[0]), samples, lines);
        }
    }

    /// The lines `(stack, count)` in CPython's order.
    pub fn lines(&self, frames: &FrameTable) -> Vec<(String, u64)> {
        let mut copy = None;
        let this = self.finished(frames, &mut copy);
        let names = names(frames, this.naming);
        let Some(ranks) = &this.ranks else { return Vec::new() };
        this.sorted(&names)
            .into_iter()
            .map(|id| (this.text(id, ranks, &names, this.threads), this.samples[id as usize]))
            .collect()
    }

    /// Writes the lines, each text made as it is written.
    pub fn write(&self, frames: &FrameTable, out: &mut impl Write) -> io::Result<()> {
        let mut copy = None;
        let this = self.finished(frames, &mut copy);
        let names = names(frames, this.naming);
        let Some(ranks) = &this.ranks else { return Ok(()) };
        let mut line = Vec::new();
        for id in this.sorted(&names) {
            line.clear();
            this.push_text(id, ranks, &names, this.threads, &mut line);
            line.push(b' ');
            push_decimal(&mut line, this.samples[id as usize]);
            line.push(b'\n');
            out.write_all(&line)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{thread_text_cmp, CollapsedCollector};
    use crate::model::{Call, Collector, FrameInfo, FrameTable, Naming, Times};
    use tachyon_core::tables::Location;

    /// Stacks that differ only in a frame's column are one line, with both their samples,
    /// whether the lines are made by `finish` or by an output of an unfinished collector.
    #[test]
    fn stacks_that_read_alike_are_one_line_finished_or_not() {
        let mut table = FrameTable::default();
        for (name, line, col) in [("f", 1, 0), ("f", 1, 4), ("g", 2, 0)] {
            table.push(FrameInfo {
                filename: "/src/a.py".into(),
                funcname: name.into(),
                location: Some(Location { lineno: line, end_lineno: line, col, end_col: col }),
                ..FrameInfo::default()
            });
        }
        let mut c = CollapsedCollector::new(Naming::Python, true);
        for (tid, stack, n) in [(1, &[2, 0][..], 2), (2, &[0], 1), (1, &[2, 1], 3), (2, &[], 7)] {
            let call = Call {
                times: Times::Counted(n),
                interpreter_id: 0,
                thread_id: tid,
                status: 0,
                stack,
                continued: false,
            };
            c.collect(&table, &call);
        }
        let expected = vec![("tid:1;a.py:f:1;a.py:g:2".to_owned(), 5), ("tid:2;a.py:f:1".to_owned(), 1)];
        assert_eq!(c.lines(&table), expected, "unfinished");
        let mut out = Vec::new();
        c.write(&table, &mut out).unwrap();
        c.finish(&table);
        assert_eq!(c.lines(&table), expected, "finished");
        let mut finished = Vec::new();
        c.write(&table, &mut finished).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "tid:1;a.py:f:1;a.py:g:2 5\ntid:2;a.py:f:1 1\n");
        assert_eq!(finished, b"tid:1;a.py:f:1;a.py:g:2 5\ntid:2;a.py:f:1 1\n");
    }

    /// Thread ids ordered by the comparison are ordered as their `T;` texts sort as strings.
    #[test]
    fn thread_ids_order_as_their_texts() {
        let mut ids = vec![0, 1, 9, 10, 12, 19, 99, 100, 120, 123, 1_000, 1_234_567, 2, 20, 21, 3_000_000_000];
        ids.extend([u64::MAX, u64::MAX - 1, 10u64.pow(19), 10u64.pow(19) - 1, 18_446_744_073_709_551_610]);
        ids.extend((0..2_000u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (i % 64)));
        let mut by_text = ids.clone();
        by_text.sort_by_key(|t| format!("{t};"));
        let mut by_cmp = ids;
        by_cmp.sort_by(|&a, &b| thread_text_cmp(a, b));
        assert_eq!(by_cmp, by_text);
    }
}
