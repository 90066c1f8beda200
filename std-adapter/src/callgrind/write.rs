//! Sampled profiles in Callgrind's format, from the hub (`--to callgrind`; the layout is
//! [`super`]'s).

use std::collections::HashMap;
use std::io::{self, Write};

use super::text::{write_header, Names, UNKNOWN};
use crate::hash::IdMap;
use crate::model::{Call, Collector, FrameTable};

/// The caller of every stack's outermost function.
const ROOT: u32 = 0;

/// Samples per function, line and call, on the hub's frames.
#[derive(Debug)]
pub struct CallgrindCollector {
    /// Per function key of the frame table: its function here (`u32::MAX`: not met yet).
    function_of_key: Vec<u32>,
    /// Functions here: (file, name); `ROOT` first.
    functions: Vec<(String, String)>,
    index: HashMap<(String, String), u32>,
    /// (function, line) → samples with the function innermost there.
    own: IdMap<(u32, i32), u64>,
    /// (caller, line, callee) → samples below that call.
    calls: IdMap<(u32, i32, u32), u64>,
    /// Per function: the sample that last met it (each is charged once a sample).
    seen: Vec<u64>,
    sample: u64,
    total: u64,
}

impl Default for CallgrindCollector {
    fn default() -> Self {
        let root = (UNKNOWN.to_owned(), "(root)".to_owned());
        CallgrindCollector {
            function_of_key: Vec::new(),
            index: HashMap::from([(root.clone(), ROOT)]),
            functions: vec![root],
            own: IdMap::default(),
            calls: IdMap::default(),
            seen: vec![0],
            sample: 0,
            total: 0,
        }
    }
}

impl CallgrindCollector {
    /// The function here of frame `id`, and the frame's line.
    fn place(&mut self, frames: &FrameTable, id: u32) -> (u32, i32) {
        let k = frames.function(id) as usize;
        if self.function_of_key.len() <= k {
            self.function_of_key.resize(frames.functions.len().max(k + 1), u32::MAX);
        }
        let key = &frames.functions[k];
        if self.function_of_key[k] == u32::MAX {
            let or_unknown = |s: &str| if s.is_empty() { UNKNOWN.to_owned() } else { s.to_owned() };
            let name = (or_unknown(&key.filename), or_unknown(&key.funcname));
            let next = self.functions.len() as u32;
            let f = *self.index.entry(name).or_insert_with_key(|name| {
                self.functions.push(name.clone());
                next
            });
            self.seen.resize(self.functions.len(), 0);
            self.function_of_key[k] = f;
        }
        (self.function_of_key[k], key.lineno)
    }
}

impl Collector for CallgrindCollector {
    fn collect(&mut self, frames: &FrameTable, s: &Call<'_>) {
        let Some(&leaf) = s.stack.first() else { return };
        let n = s.samples();
        self.total += n;
        self.sample += 1;
        // The innermost frame first: functions are numbered, and written, in the order met.
        let (f, line) = self.place(frames, leaf);
        *self.own.entry((f, line)).or_insert(0) += n;
        // Outermost first: each function is charged to the call of its outermost frame.
        let mut caller = (ROOT, 0);
        for &id in s.stack.iter().rev() {
            let (f, line) = self.place(frames, id);
            if self.seen[f as usize] != self.sample {
                self.seen[f as usize] = self.sample;
                *self.calls.entry((caller.0, caller.1, f)).or_insert(0) += n;
            }
            caller = (f, line);
        }
    }
}

impl CallgrindCollector {
    /// Writes the file: functions in the order first met (`(root)` first), each with its
    /// own costs by line, then its calls by line and callee.
    pub fn write(&self, out: &mut impl Write) -> io::Result<()> {
        write_header(out, "Samples", None, self.total)?;
        let count = self.functions.len();
        // A function's first line seen, the target position of the calls to it.
        let mut first_line = vec![i32::MAX; count];
        let mut own: Vec<Vec<(i32, u64)>> = vec![Vec::new(); count];
        for (&(f, line), &n) in &self.own {
            own[f as usize].push((line, n));
            first_line[f as usize] = first_line[f as usize].min(line);
        }
        let mut calls: Vec<Vec<(i32, u32, u64)>> = vec![Vec::new(); count];
        for (&(caller, line, callee), &n) in &self.calls {
            calls[caller as usize].push((line, callee, n));
            first_line[caller as usize] = first_line[caller as usize].min(line);
        }
        let (mut files, mut names) = (Names::new(count), Names::new(count));
        // Files are numbered by their first function.
        let file_of: Vec<usize> = {
            let mut first: HashMap<&str, usize> = HashMap::new();
            self.functions.iter().enumerate().map(|(i, (file, _))| *first.entry(file.as_str()).or_insert(i)).collect()
        };
        for f in 0..count {
            if own[f].is_empty() && calls[f].is_empty() {
                continue;
            }
            own[f].sort_unstable();
            calls[f].sort_unstable();
            writeln!(out)?;
            files.write(out, "fl", file_of[f], &self.functions[f].0)?;
            names.write(out, "fn", f, &self.functions[f].1)?;
            for &(line, n) in &own[f] {
                writeln!(out, "{} {n}", line.max(0))?;
            }
            for &(line, callee, n) in &calls[f] {
                let c = callee as usize;
                if file_of[c] != file_of[f] {
                    files.write(out, "cfl", file_of[c], &self.functions[c].0)?;
                }
                names.write(out, "cfn", c, &self.functions[c].1)?;
                let target = if first_line[c] == i32::MAX { 0 } else { first_line[c].max(0) };
                writeln!(out, "calls={n} {target}")?;
                writeln!(out, "{} {n}", line.max(0))?;
            }
        }
        Ok(())
    }
}
