//! speedscope's file format (<https://www.speedscope.app/file-format-schema.json>): one
//! `sampled` profile per thread, in the order threads first appear, sharing one frame list.
//! A frame is a distinct `(funcname, filename, lineno)`; a sample is a stack root first,
//! weighted by the sampling interval in microseconds. Consecutive samples of a thread with the
//! same stack are one entry with the summed weight, so REPEAT runs stay one entry. Samples
//! with an empty stack are left out, as CPython's collectors leave them out.

use std::collections::HashMap;
use std::io::{self, Write};

use crate::model::{Call, Collector, FrameTable};
use crate::pyfmt::write_json_str;

#[derive(Debug, Default)]
struct Thread {
    interpreter_id: u32,
    thread_id: u64,
    /// Distinct stacks, root first, as frame indices.
    stacks: Vec<Box<[u32]>>,
    stack_ids: HashMap<Box<[u32]>, u32>,
    /// (stack, samples) in order.
    runs: Vec<(u32, u64)>,
}

/// Builds one sampled profile per thread.
#[derive(Debug, Default)]
pub struct SpeedscopeCollector {
    threads: Vec<Thread>,
    index: HashMap<(u32, u64), usize>,
    key: Vec<u32>,
}

impl Collector for SpeedscopeCollector {
    fn collect(&mut self, frames: &FrameTable, s: &Call<'_>) {
        if s.stack.is_empty() {
            return;
        }
        let next = self.threads.len();
        let t = *self.index.entry((s.interpreter_id, s.thread_id)).or_insert(next);
        if t == next {
            self.threads.push(Thread { interpreter_id: s.interpreter_id, thread_id: s.thread_id, ..Thread::default() });
        }
        self.key.clear();
        self.key.extend(s.stack.iter().rev().map(|&id| frames.function(id)));
        let th = &mut self.threads[t];
        let stack = match th.stack_ids.get(&self.key[..]) {
            Some(&i) => i,
            None => {
                let i = th.stacks.len() as u32;
                th.stacks.push(self.key.clone().into_boxed_slice());
                th.stack_ids.insert(self.key.clone().into_boxed_slice(), i);
                i
            }
        };
        match th.runs.last_mut() {
            Some((last, n)) if *last == stack => *n += s.samples(),
            _ => th.runs.push((stack, s.samples())),
        }
    }
}

impl SpeedscopeCollector {
    /// Writes the file; `name` titles it, `interval_us` weighs each sample (a profile with
    /// no interval is weighed in samples, unit `none`).
    pub fn write(&self, frames: &FrameTable, name: &str, interval_us: u64, out: &mut impl Write) -> io::Result<()> {
        let (unit, interval_us) = if interval_us == 0 { ("none", 1) } else { ("microseconds", interval_us) };
        let many_interpreters = self.threads.iter().any(|t| t.interpreter_id != 0);
        out.write_all(b"{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"name\":")?;
        write_json_str(out, name)?;
        write!(out, ",\"exporter\":\"tachyon {}\",\"activeProfileIndex\":0", env!("CARGO_PKG_VERSION"))?;
        out.write_all(b",\"shared\":{\"frames\":[")?;
        for (i, f) in frames.functions.iter().enumerate() {
            out.write_all(if i > 0 { b",{\"name\":" } else { b"{\"name\":" })?;
            write_json_str(out, &f.funcname)?;
            out.write_all(b",\"file\":")?;
            write_json_str(out, &f.filename)?;
            if f.lineno > 0 {
                write!(out, ",\"line\":{}", f.lineno)?;
            }
            out.write_all(b"}")?;
        }
        out.write_all(b"]},\"profiles\":[")?;
        for (i, t) in self.threads.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            // Saturating: a corrupt header can claim any interval.
            let total = t.runs.iter().fold(0u64, |acc, r| acc.saturating_add(r.1.saturating_mul(interval_us)));
            let title = if many_interpreters {
                format!("Thread {} (interpreter {})", t.thread_id, t.interpreter_id)
            } else {
                format!("Thread {}", t.thread_id)
            };
            out.write_all(b"{\"type\":\"sampled\",\"name\":")?;
            write_json_str(out, &title)?;
            write!(out, ",\"unit\":\"{unit}\",\"startValue\":0,\"endValue\":{total},\"samples\":[")?;
            for (j, (stack, _)) in t.runs.iter().enumerate() {
                out.write_all(if j > 0 { b",[" } else { b"[" })?;
                for (k, f) in t.stacks[*stack as usize].iter().enumerate() {
                    if k > 0 {
                        out.write_all(b",")?;
                    }
                    write!(out, "{f}")?;
                }
                out.write_all(b"]")?;
            }
            out.write_all(b"],\"weights\":[")?;
            for (j, (_, n)) in t.runs.iter().enumerate() {
                if j > 0 {
                    out.write_all(b",")?;
                }
                write!(out, "{}", n.saturating_mul(interval_us))?;
            }
            out.write_all(b"]}")?;
        }
        out.write_all(b"]}")
    }
}
