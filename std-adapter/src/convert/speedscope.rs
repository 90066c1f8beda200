//! speedscope's file format (<https://www.speedscope.app/file-format-schema.json>): one
//! `sampled` profile per thread, in the order threads first appear, sharing one frame list.
//! A frame is a distinct `(funcname, filename, lineno)`; a sample is a stack root first,
//! weighted by the sampling interval in microseconds. Consecutive samples of a thread with the
//! same stack are one entry with the summed weight, so REPEAT runs stay one entry. Samples
//! with an empty stack are left out, as CPython's collectors leave them out.

use std::hash::BuildHasher;
use std::io::{self, Write};

use crate::hash::{Found, IdHash, IdSlots, SequenceIndex};
use crate::model::{Call, Collector, FrameTable};
use crate::pyfmt::write_json_str;

/// A thread and the chain of its runs.
#[derive(Debug)]
struct Thread {
    interpreter_id: u32,
    thread_id: u64,
    first_run: u32,
    last_run: u32,
}

/// Consecutive samples of one thread with one stack.
#[derive(Debug)]
struct Run {
    stack: u32,
    /// The thread's next run ([`NO_RUN`] at its last).
    next: u32,
    samples: u64,
}

const NO_RUN: u32 = u32::MAX;

/// Builds one sampled profile per thread. Memory follows the distinct stacks (held once,
/// whatever the threads sharing them), the threads (about 40 bytes each) and the runs (16
/// bytes each), chained per thread in one vector rather than a vector a thread.
#[derive(Debug, Default)]
pub struct SpeedscopeCollector {
    threads: Vec<Thread>,
    thread_index: IdSlots,
    hash: IdHash,
    /// Distinct stacks, root first, as function ids.
    stacks: SequenceIndex,
    runs: Vec<Run>,
    key: Vec<u32>,
}

impl Collector for SpeedscopeCollector {
    fn collect(&mut self, frames: &FrameTable, s: &Call<'_>) {
        if s.stack.is_empty() {
            return;
        }
        let hash = self.hash;
        let hash_of = |interpreter_id: u32, thread_id: u64| hash.hash_one((interpreter_id, thread_id));
        let threads = &self.threads;
        self.thread_index.reserve_one(|t| hash_of(threads[t as usize].interpreter_id, threads[t as usize].thread_id));
        let found = self.thread_index.find(hash_of(s.interpreter_id, s.thread_id), |t| {
            let t = &self.threads[t as usize];
            (t.interpreter_id, t.thread_id) == (s.interpreter_id, s.thread_id)
        });
        let t = match found {
            Found::Id(t) => t as usize,
            Found::Free(free) => {
                let t = self.threads.len();
                self.thread_index.insert(free, t as u32);
                self.threads.push(Thread {
                    interpreter_id: s.interpreter_id,
                    thread_id: s.thread_id,
                    first_run: NO_RUN,
                    last_run: NO_RUN,
                });
                t
            }
        };
        self.key.clear();
        self.key.extend(s.stack.iter().rev().map(|&id| frames.function(id)));
        let stack = self.stacks.id(&self.key);
        let thread = &mut self.threads[t];
        if let Some(last) = self.runs.get_mut(thread.last_run as usize) {
            if last.stack == stack {
                last.samples += s.samples();
                return;
            }
        }
        // (Past 2^32 − 1 runs, 64 GiB of them, a thread's chain ends where it was.)
        let Ok(at) = u32::try_from(self.runs.len()) else { return };
        if at == NO_RUN {
            return;
        }
        self.runs.push(Run { stack, next: NO_RUN, samples: s.samples() });
        match self.runs.get_mut(thread.last_run as usize) {
            Some(last) => last.next = at,
            None => thread.first_run = at,
        }
        thread.last_run = at;
    }
}

impl SpeedscopeCollector {
    /// A thread's runs, in order.
    fn runs_of<'a>(&'a self, thread: &Thread) -> impl Iterator<Item = &'a Run> + 'a {
        let mut at = thread.first_run;
        std::iter::from_fn(move || {
            let run = self.runs.get(at as usize)?;
            at = run.next;
            Some(run)
        })
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
            let total = self.runs_of(t).fold(0u64, |acc, r| acc.saturating_add(r.samples.saturating_mul(interval_us)));
            let title = if many_interpreters {
                format!("Thread {} (interpreter {})", t.thread_id, t.interpreter_id)
            } else {
                format!("Thread {}", t.thread_id)
            };
            out.write_all(b"{\"type\":\"sampled\",\"name\":")?;
            write_json_str(out, &title)?;
            write!(out, ",\"unit\":\"{unit}\",\"startValue\":0,\"endValue\":{total},\"samples\":[")?;
            for (j, run) in self.runs_of(t).enumerate() {
                out.write_all(if j > 0 { b",[" } else { b"[" })?;
                for (k, f) in self.stacks.get(run.stack).iter().enumerate() {
                    if k > 0 {
                        out.write_all(b",")?;
                    }
                    write!(out, "{f}")?;
                }
                out.write_all(b"]")?;
            }
            out.write_all(b"],\"weights\":[")?;
            for (j, run) in self.runs_of(t).enumerate() {
                if j > 0 {
                    out.write_all(b",")?;
                }
                write!(out, "{}", run.samples.saturating_mul(interval_us))?;
            }
            out.write_all(b"]}")?;
        }
        out.write_all(b"]}")
    }
}
