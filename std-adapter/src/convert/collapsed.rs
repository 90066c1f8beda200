//! Collapsed stacks (`tid:T;root;...;leaf COUNT` per line), byte-identical to CPython's
//! `replay --collapsed`: one line per distinct (thread, stack of `(filename, lineno, funcname)`),
//! frames named `basename:funcname:lineno` (or just the function for pstats' `~` pseudo-file
//! at line 0), lines sorted by descending count, then by text.

use std::collections::HashMap;
use std::io::{self, Write};

use crate::replay::{basename, Call, Collector, FrameTable};

/// Counts stacks per thread.
#[derive(Debug, Default)]
pub struct CollapsedCollector {
    /// `[tid low, tid high, function keys root → leaf]` → (count, first-seen order).
    stacks: HashMap<Box<[u32]>, (u64, usize)>,
    key: Vec<u32>,
}

impl Collector for CollapsedCollector {
    fn collect(&mut self, frames: &FrameTable, s: &Call<'_>) {
        if s.stack.is_empty() {
            return;
        }
        self.key.clear();
        self.key.extend([s.thread_id as u32, (s.thread_id >> 32) as u32]);
        self.key.extend(s.stack.iter().rev().map(|&id| frames.frame(id).function));
        if let Some(entry) = self.stacks.get_mut(&self.key[..]) {
            entry.0 += s.samples();
        } else {
            let order = self.stacks.len();
            self.stacks.insert(self.key.clone().into_boxed_slice(), (s.samples(), order));
        }
    }
}

impl CollapsedCollector {
    /// The lines `(stack, count)` in CPython's order.
    pub fn lines(&self, frames: &FrameTable) -> Vec<(String, u64)> {
        let parts: Vec<String> = frames
            .functions
            .iter()
            .map(|f| {
                if f.filename == "~" && f.lineno == 0 {
                    f.funcname.clone()
                } else {
                    format!("{}:{}:{}", basename(&f.filename), f.funcname, f.lineno)
                }
            })
            .collect();
        let mut entries: Vec<(&[u32], u64, usize)> = self.stacks.iter().map(|(k, &(n, o))| (&k[..], n, o)).collect();
        // CPython sorts a Counter's items, which come in first-seen order; its sort is stable.
        entries.sort_unstable_by_key(|e| e.2);
        let mut lines: Vec<(String, u64)> = entries
            .into_iter()
            .map(|(key, count, _)| {
                let tid = u64::from(key[0]) | (u64::from(key[1]) << 32);
                let mut text = format!("tid:{tid}");
                for &f in &key[2..] {
                    text.push(';');
                    text.push_str(&parts[f as usize]);
                }
                (text, count)
            })
            .collect();
        lines.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        lines
    }

    /// Writes the lines.
    pub fn write(&self, frames: &FrameTable, out: &mut impl Write) -> io::Result<()> {
        for (stack, count) in self.lines(frames) {
            writeln!(out, "{stack} {count}")?;
        }
        Ok(())
    }
}
