//! The aggregate pprof and OpenTelemetry profiles share: samples counted per (thread, stack of
//! locations) ([`StackCounts`]), and the location and function tables those stacks point into
//! ([`Locations`]), made on first use. Both formats descend from pprof's `profile.proto`, so
//! what a location or a function is lives here once and each format only encodes it.
//!
//! A Python frame's location is its `(filename, lineno, funcname)` (frames differing only in
//! columns or opcode share one); a native frame's is its address, with one line per function
//! inlined there (innermost first, as both formats order them) and no line when no symbol was
//! found, so that readers may symbolise the address themselves.

use std::collections::HashMap;

use crate::hash::SequenceIndex;
use crate::model::{Call, Collector, FrameTable};

/// Samples per distinct (thread, stack of locations), in first-seen order, with every
/// sample's timestamp when asked to keep them. Memory follows the distinct stacks and the
/// distinct (thread, stack) pairs, each stack held once (about 30 bytes a pair: a million
/// threads of one stack each take 30 MB), plus 12 bytes a sample when times are kept.
#[derive(Debug, Default)]
pub struct StackCounts {
    /// Per frame id, the frame standing for its location: the first frame of its function
    /// key for a Python frame, itself for a native one.
    location_frame: Vec<u32>,
    /// Distinct stacks of location frames, leaf first, inlined frames left out (they are
    /// lines of their caller's location).
    stacks: SequenceIndex,
    /// Distinct `[tid low, tid high, stack id]`, numbered in first-seen order: the entries.
    entries: SequenceIndex,
    /// Samples per entry.
    samples: Vec<u64>,
    /// Kept timestamps (µs), in file order, each with the index of the next one of its
    /// entry (`u32::MAX` at the end), and per entry its first and last: an entry's times
    /// are a chain through one vector, not a vector each.
    times_us: Vec<u64>,
    next_time: Vec<u32>,
    entry_times: Vec<[u32; 2]>,
    key: Vec<u32>,
    keep_times: bool,
    first_us: Option<u64>,
    last_us: Option<u64>,
}

/// One distinct (thread, stack) and its samples.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'c> {
    /// Thread id (0 for profiles without threads).
    pub thread_id: u64,
    /// The stack's id in [`StackCounts::stacks`].
    pub stack: u32,
    /// Location frames (frame ids standing for their location), leaf first.
    pub frames: &'c [u32],
    /// Samples.
    pub samples: u64,
    counts: &'c StackCounts,
    index: usize,
}

impl<'c> Entry<'c> {
    /// Its samples' timestamps (µs) in file order, when kept and the input has them.
    pub fn times_us(&self) -> impl Iterator<Item = u64> + 'c {
        let counts = self.counts;
        let mut at = counts.entry_times.get(self.index).map_or(NO_TIME, |t| t[0]);
        std::iter::from_fn(move || {
            let t = *counts.times_us.get(at as usize)?;
            at = counts.next_time[at as usize];
            Some(t)
        })
    }
}

/// The end of a chain of times.
const NO_TIME: u32 = u32::MAX;

impl StackCounts {
    /// Counts only.
    pub fn new() -> Self {
        StackCounts::default()
    }

    /// Counts and every sample's timestamp (memory then grows with the samples).
    pub fn with_times() -> Self {
        StackCounts { keep_times: true, ..StackCounts::default() }
    }

    /// The distinct stacks of location frames, numbered in first-seen order.
    pub fn stacks(&self) -> &SequenceIndex {
        &self.stacks
    }

    /// How many distinct (thread, stack) entries.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether no sample had a stack.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// The entries, in first-seen order.
    pub fn entries(&self) -> impl ExactSizeIterator<Item = Entry<'_>> + '_ {
        self.samples.iter().enumerate().map(move |(index, &samples)| {
            let key = self.entries.get(index as u32);
            let (thread_id, stack) = match *key {
                [low, high, stack] => (u64::from(low) | u64::from(high) << 32, stack),
                _ => (0, u32::MAX),
            };
            Entry { thread_id, stack, frames: self.stacks.get(stack), samples, counts: self, index }
        })
    }

    /// The latest timestamp seen (µs), if any.
    pub fn last_us(&self) -> Option<u64> {
        self.last_us
    }

    /// The earliest timestamp seen (µs), if any (CPython's may be before the profile's start).
    pub fn first_us(&self) -> Option<u64> {
        self.first_us
    }

    fn keep(&mut self, entry: usize, times: &[u64]) {
        if self.entry_times.len() <= entry {
            self.entry_times.resize(entry + 1, [NO_TIME; 2]);
        }
        for &t in times {
            // (More than 2^32 − 1 kept times would be 48 GiB of them: the chain stops there.)
            let Ok(at) = u32::try_from(self.times_us.len()) else { return };
            if at == NO_TIME {
                return;
            }
            self.times_us.push(t);
            self.next_time.push(NO_TIME);
            let [first, last] = &mut self.entry_times[entry];
            if *first == NO_TIME {
                *first = at;
            } else {
                self.next_time[*last as usize] = at;
            }
            *last = at;
        }
    }
}

impl Collector for StackCounts {
    fn collect(&mut self, frames: &FrameTable, s: &Call<'_>) {
        let last = s.timestamps_us().iter().copied().max().unwrap_or(0);
        self.last_us = Some(self.last_us.map_or(last, |t| t.max(last)));
        if let Some(first) = s.timestamps_us().iter().copied().min() {
            self.first_us = Some(self.first_us.map_or(first, |t| t.min(first)));
        }
        if s.stack.is_empty() {
            return;
        }
        if self.location_frame.len() != frames.frames.len() {
            let mut first_of_function: Vec<Option<u32>> = vec![None; frames.functions.len()];
            self.location_frame = (0..frames.frames.len() as u32)
                .map(|id| match frames.frame(id).address {
                    Some(_) => id,
                    None => *first_of_function[frames.function(id) as usize].get_or_insert(id),
                })
                .collect();
        }
        self.key.clear();
        let location_frame = &self.location_frame;
        self.key.extend(s.stack.iter().filter(|&&id| !frames.frame(id).inlined).map(|&id| location_frame[id as usize]));
        let stack = self.stacks.id(&self.key);
        let entry = self.entries.id(&[s.thread_id as u32, (s.thread_id >> 32) as u32, stack]) as usize;
        if entry == self.samples.len() {
            self.samples.push(0);
        }
        self.samples[entry] += s.samples();
        if self.keep_times {
            self.keep(entry, s.timestamps_us());
        }
    }
}

/// A location of the tables: an address in a mapping, source lines, or both.
#[derive(Debug, Clone, PartialEq)]
pub struct Location {
    /// Index into [`FrameTable::mappings`].
    pub mapping: Option<u32>,
    /// Native address (0 for a Python frame).
    pub address: u64,
    /// The lines, innermost first: an index into [`Locations::functions`], the line and the
    /// column (0 = unknown).
    pub lines: Vec<Line>,
}

/// A source line of a location.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Line {
    /// Index into [`Locations::functions`].
    pub function: u32,
    /// Line (0 = unknown).
    pub line: i64,
    /// Column (0 = unknown).
    pub column: i64,
}

/// A function of the tables: one per `(funcname, filename)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Function<'f> {
    /// Name.
    pub name: &'f str,
    /// Source file.
    pub filename: &'f str,
    /// The first line seen of it.
    pub start_line: i64,
}

/// Locations and functions numbered in the order stacks first reach them.
#[derive(Debug)]
pub struct Locations<'f> {
    frames: &'f FrameTable,
    /// Per frame id, 1 + its location's index (0 = not made yet).
    location_of: Vec<u32>,
    /// The locations.
    pub locations: Vec<Location>,
    /// The functions.
    pub functions: Vec<Function<'f>>,
    function_index: HashMap<(&'f str, &'f str), u32>,
}

impl<'f> Locations<'f> {
    /// Empty tables over `frames`.
    pub fn new(frames: &'f FrameTable) -> Self {
        Locations {
            frames,
            location_of: vec![0; frames.frames.len()],
            locations: Vec::new(),
            functions: Vec::new(),
            function_index: HashMap::new(),
        }
    }

    /// The index of the location of `frame` (a location frame of an [`Entry`]), made on first
    /// use.
    pub fn location(&mut self, frame: u32) -> u32 {
        if let Some(i) = self.location_of[frame as usize].checked_sub(1) {
            return i;
        }
        let frames = self.frames;
        let f = frames.frame(frame);
        // The frames inlined at this address come just before it, innermost first.
        let mut first = frame;
        while first > 0 && frames.frame(first - 1).inlined && frames.frame(first - 1).address == f.address {
            first -= 1;
        }
        let mut lines = Vec::new();
        for l in first..=frame {
            if frames.frame(l).anonymous {
                continue;
            }
            let key = &frames.functions[frames.function(l) as usize];
            let next = self.functions.len() as u32;
            let function = *self.function_index.entry((&key.funcname, &key.filename)).or_insert_with(|| {
                self.functions.push(Function {
                    name: &key.funcname,
                    filename: &key.filename,
                    start_line: i64::from(key.lineno),
                });
                next
            });
            // CPython's columns count from 0 (-1: unknown); pprof's and OTLP's from 1 (0: unknown).
            let column = frames.frame(l).location.map_or(0, |loc| i64::from(loc.col).max(-1) + 1);
            lines.push(Line { function, line: i64::from(key.lineno), column });
        }
        self.locations.push(Location { mapping: f.mapping, address: f.address.unwrap_or(0), lines });
        let i = self.locations.len() as u32 - 1;
        self.location_of[frame as usize] = i + 1;
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{FrameInfo, Times};
    use tachyon_core::tables::Location as Span;

    #[test]
    fn columns_count_from_one_whatever_the_input_holds() {
        let mut frames = FrameTable::default();
        for (i, col) in [-1, 0, 7, i32::MAX, i32::MIN].into_iter().enumerate() {
            frames.push(FrameInfo {
                filename: "a.py".into(),
                funcname: format!("f{i}"),
                location: Some(Span { lineno: 1, end_lineno: 1, col, end_col: -1 }),
                ..FrameInfo::default()
            });
        }
        let mut counts = StackCounts::new();
        let stack = [0, 1, 2, 3, 4];
        let call = Call {
            times: Times::Counted(1),
            interpreter_id: 0,
            thread_id: 0,
            status: 0,
            stack: &stack,
            continued: false,
        };
        counts.collect(&frames, &call);
        let mut tables = Locations::new(&frames);
        let mut columns = Vec::new();
        for &f in counts.entries().next().unwrap().frames {
            let at = tables.location(f) as usize;
            columns.push(tables.locations[at].lines[0].column);
        }
        assert_eq!(columns, [0, 1, 8, 1 << 31, 0]);
    }
}
