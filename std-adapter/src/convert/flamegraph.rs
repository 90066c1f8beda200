//! Flame graphs (SVG, drawn by the inferno crate) from the collapsed stacks of
//! [`super::collapsed`]: one tower per thread (`tid:N` at the root), frames named
//! `file:function:line`. A differential graph takes two profiles: widths from the new one,
//! colour from the change of each frame's share (red grew, blue shrank), threads merged;
//! frames only the base had have no width in the new profile and are not drawn.

use std::io::{self, Write};

use inferno::flamegraph::{self, Options};

use super::collapsed::CollapsedCollector;
use crate::model::FrameTable;
use crate::pyfmt::decimal_digits;

/// Options shared by both graphs: deterministic colours per name, counts called samples.
fn options(title: &str) -> Options<'static> {
    let mut opt = Options::default();
    opt.title = title.to_owned();
    opt.count_name = "samples".to_owned();
    opt.deterministic = true;
    opt
}

fn folded(lines: &[(String, u64)]) -> String {
    lines.iter().map(|(stack, n)| format!("{stack} {n}\n")).collect()
}

/// Writes a flame graph of collapsed `lines`; an empty profile is an SVG saying so.
pub fn write(lines: &[(String, u64)], title: &str, out: &mut impl Write) -> io::Result<()> {
    if lines.is_empty() {
        return write_empty(title, out);
    }
    let text = folded(lines);
    flamegraph::from_lines(&mut options(title), text.lines(), out)
}

/// Writes the flame graph of `collapsed`'s lines, as [`write()`] does of all of them, but
/// without making the lines of threads too narrow to draw: memory follows the threads drawn
/// (a million threads of a sample each: none of them), not every line.
///
/// inferno sorts the lines by their text, merges them into frames, and leaves out each frame
/// narrower than `min_width` per cent of all samples. A thread's frames are no wider than its
/// `tid:T` root, so a thread with fewer samples than that is not drawn at all; its lines only
/// move the frames after them to the right, by its samples. So the lines are given to inferno
/// in its own order (threads in the order of their `tid:T;` texts, a thread's lines by their
/// text), each run of such threads as a few lines `tid:T; N` — `T` the first thread of the
/// run, so the order holds, and `N` their samples, kept below the width that is drawn — and
/// the graph is the one of all lines, byte for byte (the tests compare the two).
pub fn write_threads(
    collapsed: &CollapsedCollector,
    frames: &FrameTable,
    title: &str,
    out: &mut impl Write,
) -> io::Result<()> {
    if !collapsed.threads() {
        return write(&collapsed.lines(frames), title, out);
    }
    let total = collapsed.total();
    if total == 0 {
        return write_empty(title, out);
    }
    let mut opt = options(title);
    // inferno's own test of a frame: its samples (as f64) below this are not drawn.
    let min_samples = opt.min_width / (100.0 / total as f64);
    let drawn = |samples: u64| samples as f64 >= min_samples;
    let mut text = String::new();
    // The run of undrawn threads not yet written: its first thread and its samples.
    let mut run: Option<(u64, u64)> = None;
    let end_run = |run: &mut Option<(u64, u64)>, text: &mut String| {
        if let Some((tid, samples)) = run.take() {
            text.push_str(&format!("tid:{tid}; {samples}\n"));
        }
    };
    collapsed.each_thread(frames, drawn, |tid, samples, lines| {
        if drawn(samples) {
            end_run(&mut run, &mut text);
            let mut folded: Vec<String> = lines
                .into_iter()
                .map(|(mut stack, n)| {
                    stack.push(' ');
                    stack.push_str(std::str::from_utf8(decimal_digits(n, &mut [0; 20])).unwrap_or_default());
                    stack
                })
                .collect();
            folded.sort_unstable();
            push_drawn_thread(&folded, drawn, &mut text);
        } else {
            match &mut run {
                Some((_, sum)) if !drawn(*sum + samples) => *sum += samples,
                _ => {
                    end_run(&mut run, &mut text);
                    run = Some((tid, samples));
                }
            }
        }
    });
    end_run(&mut run, &mut text);
    opt.no_sort = true;
    flamegraph::from_lines(&mut opt, text.lines(), out)
}

/// Appends a drawn thread's `lines` (`stack N`, sorted as inferno sorts them) to `text` as
/// fewer lines from which inferno draws the same: each frame narrower than it draws
/// (`drawn` false) and whose parent is drawn — a *top* — keeps only its first line, with
/// the samples of all its lines (every frame below it is narrower still), and a run of such
/// sibling tops becomes one line while their sum stays undrawn, as a run of narrow threads
/// does in [`write_threads`]. The lines kept are some of the sorted lines, so their order
/// holds; the frames inferno draws start and end where they did. (A thread of 100 deep
/// stacks under one trunk: two lines instead of a hundred.)
///
/// inferno merges the frames of consecutive lines while their names agree from the root
/// (one *instance* of a frame), so the instances are found the same way here. A run of tops
/// whose first line would agree, down to the tops' depth, with the line after the run would
/// merge with it (a sibling named like the first between them: `f`, `f!`, `f`): the run is
/// shortened until it does not; a single top never does (its instance ended there).
fn push_drawn_thread(lines: &[String], drawn: impl Fn(u64) -> bool, text: &mut String) {
    let parsed: Vec<(&str, u64)> = lines
        .iter()
        .map(|line| match line.rsplit_once(' ') {
            Some((stack, n)) => (stack, n.parse().unwrap_or(0)),
            None => (line.as_str(), 0),
        })
        .collect();
    let frames: Vec<Vec<&str>> = parsed.iter().map(|(stack, _)| stack.split(';').collect()).collect();
    // Each undrawn instance not inside another: (first line, last line, depth, samples).
    let mut tops: Vec<(usize, usize, usize, u64)> = Vec::new();
    // The open instances, by depth: (first line, samples).
    let mut open: Vec<(usize, u64)> = Vec::new();
    let close =
        |open: &mut Vec<(usize, u64)>, to_depth: usize, last: usize, tops: &mut Vec<(usize, usize, usize, u64)>| {
            while open.len() > to_depth {
                let depth = open.len() - 1;
                let (first, samples) = open.pop().unwrap_or_default();
                if !drawn(samples) {
                    // Deeper ones closed before and start within it: they are inside it.
                    while tops.last().is_some_and(|&(f, ..)| f >= first) {
                        tops.pop();
                    }
                    tops.push((first, last, depth, samples));
                }
            }
        };
    for (i, line) in frames.iter().enumerate() {
        let common = match i.checked_sub(1) {
            Some(prev) => frames[prev].iter().zip(line).take_while(|(a, b)| a == b).count(),
            None => 0,
        };
        close(&mut open, common, i.saturating_sub(1), &mut tops);
        open.resize(line.len(), (i, 0));
        for instance in &mut open {
            instance.1 += parsed[i].1;
        }
    }
    close(&mut open, 0, frames.len().saturating_sub(1), &mut tops);

    let same_to = |a: usize, b: usize, depth: usize| {
        frames[a].len() > depth && frames[b].len() > depth && frames[a][..=depth] == frames[b][..=depth]
    };
    let (mut i, mut t) = (0, 0);
    while i < lines.len() {
        let Some(&(first, last, depth, samples)) = tops.get(t).filter(|top| top.0 == i) else {
            text.push_str(&lines[i]);
            text.push('\n');
            i += 1;
            continue;
        };
        // The run: tops t..end, siblings under one parent, their sum undrawn.
        let mut run = vec![(last, samples)];
        while let Some(&(f, l, d, n)) = tops.get(t + run.len()) {
            let (end, sum) = run[run.len() - 1];
            let sibling = f == end + 1 && d == depth && (depth == 0 || same_to(first, f, depth - 1));
            if !sibling || drawn(sum + n) {
                break;
            }
            run.push((l, sum + n));
        }
        while run.len() > 1 && run[run.len() - 1].0 + 1 < lines.len() && same_to(first, run[run.len() - 1].0 + 1, depth)
        {
            run.pop();
        }
        let (end, sum) = run[run.len() - 1];
        text.push_str(parsed[first].0);
        text.push(' ');
        text.push_str(std::str::from_utf8(decimal_digits(sum, &mut [0; 20])).unwrap_or_default());
        text.push('\n');
        t += run.len();
        i = end + 1;
    }
}

/// Writes a differential flame graph of `new` against `base` (normalised to the same total,
/// so a longer or shorter run does not colour everything). Threads are merged: thread ids of
/// two runs have nothing to do with each other, so per-thread towers would never match.
pub fn write_diff(base: &[(String, u64)], new: &[(String, u64)], title: &str, out: &mut impl Write) -> io::Result<()> {
    if base.is_empty() && new.is_empty() {
        return write_empty(title, out);
    }
    let mut both = Vec::new();
    let diff_opt = inferno::differential::Options { normalize: true, strip_hex: false };
    let (base, new) = (without_threads(base), without_threads(new));
    inferno::differential::from_readers(diff_opt, base.as_bytes(), new.as_bytes(), &mut both)?;
    let text = String::from_utf8(both).map_err(io::Error::other)?;
    flamegraph::from_lines(&mut options(title), text.lines(), out)
}

/// Folded lines without the `tid:N` root frame, equal stacks summed, in first-seen order.
fn without_threads(lines: &[(String, u64)]) -> String {
    let mut order: Vec<&str> = Vec::new();
    let mut counts: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    for (stack, n) in lines {
        let rest = match stack.split_once(';') {
            Some((root, rest)) if root.starts_with("tid:") => rest,
            _ => stack.as_str(),
        };
        let c = counts.entry(rest).or_insert_with(|| {
            order.push(rest);
            0
        });
        *c += n;
    }
    order.iter().map(|s| format!("{s} {}\n", counts[s])).collect()
}

/// A small SVG for a profile without a single non-empty stack (inferno refuses those).
fn write_empty(title: &str, out: &mut impl Write) -> io::Result<()> {
    let escaped = title.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    write!(
        out,
        "<?xml version=\"1.0\" standalone=\"no\"?>\n<svg version=\"1.1\" width=\"1200\" height=\"60\" \
         xmlns=\"http://www.w3.org/2000/svg\"><text x=\"600\" y=\"24\" text-anchor=\"middle\" \
         font-family=\"Verdana\" font-size=\"17\">{escaped}</text><text x=\"600\" y=\"48\" \
         text-anchor=\"middle\" font-family=\"Verdana\" font-size=\"12\">no samples with a stack</text></svg>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Call, Collector, FrameInfo, Times};
    use tachyon_core::tables::Location;

    /// A table of `n` Python frames `f0` … in two files.
    fn frames(n: u32) -> FrameTable {
        let mut table = FrameTable::default();
        for i in 0..n {
            table.push(FrameInfo {
                filename: format!("/src/mod{}.py", i % 2),
                funcname: format!("f{i}"),
                location: Some(Location { lineno: 10 + i as i32, end_lineno: 10 + i as i32, col: 0, end_col: 0 }),
                ..FrameInfo::default()
            });
        }
        table
    }

    /// Counts `stack` (innermost first) `samples` times on thread `tid`.
    fn call(c: &mut CollapsedCollector, table: &FrameTable, tid: u64, stack: &[u32], samples: u64) {
        c.collect(
            table,
            &Call {
                times: Times::Counted(samples),
                interpreter_id: 0,
                thread_id: tid,
                status: 0,
                stack,
                continued: false,
            },
        );
    }

    /// inferno's graph of every line: what the bounded one must equal.
    fn every_line(c: &CollapsedCollector, table: &FrameTable) -> Vec<u8> {
        let mut svg = Vec::new();
        write(&c.lines(table), "t", &mut svg).unwrap();
        svg
    }

    fn bounded(c: &CollapsedCollector, table: &FrameTable) -> Vec<u8> {
        let mut svg = Vec::new();
        write_threads(c, table, "t", &mut svg).unwrap();
        svg
    }

    #[test]
    fn threads_too_narrow_to_draw_leave_the_graph_as_every_line_draws_it() {
        let table = frames(6);
        let mut c = CollapsedCollector::new(crate::model::Naming::Python, true);
        // Three wide threads among 30,000 of one or two samples each, whose ids sort before,
        // between and after theirs as texts (1 < 10 < 100 < 2 …), with stacks that share
        // frames with the wide ones.
        for tid in 0..30_000u64 {
            call(&mut c, &table, tid * 7 + 3, &[(tid % 6) as u32, 0], 1 + tid % 2);
            if tid == 5_000 || tid == 17_000 || tid == 29_999 {
                for (i, stack) in [[1u32, 0].as_slice(), &[2, 1, 0], &[3, 0], &[5, 4, 2, 1, 0]].iter().enumerate() {
                    call(&mut c, &table, tid * 7 + 3, stack, 4_000 + 1_000 * i as u64);
                }
            }
        }
        let (all, fewer) = (every_line(&c, &table), bounded(&c, &table));
        assert!(all.len() > 5_000, "a graph with frames: {} bytes", all.len());
        assert_eq!(String::from_utf8_lossy(&fewer), String::from_utf8_lossy(&all));
    }

    /// `push_drawn_thread` of `lines` with frames of 50 samples or more drawn.
    fn reduced(lines: &[&str]) -> String {
        let lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        let mut text = String::new();
        push_drawn_thread(&lines, |n| n >= 50, &mut text);
        text
    }

    #[test]
    fn narrow_frames_keep_one_line_a_run_of_siblings_and_never_merge_with_the_next() {
        // `a` is narrow (2): its first line stands for both; `b` is drawn, as is its `c`.
        assert_eq!(reduced(&["t;a;x 1", "t;a;y 1", "t;b 10", "t;b;c 90"]), "t;a;x 2\nt;b 10\nt;b;c 90\n");
        // Three narrow siblings, one run: `f`, then `f!`, then `f` again (a second instance).
        assert_eq!(reduced(&["t;f 1", "t;f! 1", "t;f;x 1", "t;z 100"]), "t;f 3\nt;z 100\n");
        // The run f, f! would end before `f;x`, whose `f` would then merge with the run's
        // line into a frame of 60, drawn: the run stops at `f`, and f! takes f;x with it.
        assert_eq!(reduced(&["t;f 30", "t;f! 10", "t;f;x 30", "t;z 100"]), "t;f 30\nt;f! 40\nt;z 100\n");
        // Nothing narrow: every line as it was.
        assert_eq!(reduced(&["t;a 60", "t;a;b 70"]), "t;a 60\nt;a;b 70\n");
    }

    #[test]
    fn narrow_frames_inside_drawn_threads_leave_the_graph_as_every_line_draws_it() {
        // Names whose texts sort around each other: `g:1` before `g:1!:1` before `g:1;…`
        // (a frame, a sibling named like it, the frame again), digits before `;`.
        let mut table = FrameTable::default();
        for name in ["g", "g:1!", "a0", "a1", "a10", "a2", "b b", "c", "d", "e"] {
            table.push(FrameInfo {
                filename: "/a.py".into(),
                funcname: name.into(),
                location: Some(Location { lineno: 1, end_lineno: 1, col: 0, end_col: 0 }),
                ..FrameInfo::default()
            });
        }
        let mut c = CollapsedCollector::new(crate::model::Naming::Python, true);
        // One stack wide enough that a frame needs hundreds of samples to be drawn.
        call(&mut c, &table, 1, &[9, 8], 5_000_000);
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for _ in 0..20_000 {
            let depth = 1 + next(7) as usize;
            let stack: Vec<u32> = (0..depth).map(|_| next(8) as u32).collect();
            // Mostly narrow, some wide enough to draw, on four threads.
            let samples = if next(10) == 0 { 400 + next(400) } else { 1 + next(40) };
            call(&mut c, &table, 1 + next(4), &stack, samples);
        }
        let (all, fewer) = (every_line(&c, &table), bounded(&c, &table));
        assert!(all.len() > 20_000, "a graph with frames: {} bytes", all.len());
        assert_eq!(String::from_utf8_lossy(&fewer), String::from_utf8_lossy(&all));
    }

    #[test]
    fn a_profile_of_narrow_threads_only_is_its_root_alone_either_way() {
        let table = frames(3);
        let mut c = CollapsedCollector::new(crate::model::Naming::Python, true);
        for tid in 0..50_000u64 {
            call(&mut c, &table, tid, &[(tid % 3) as u32], 1);
        }
        assert_eq!(bounded(&c, &table), every_line(&c, &table));
    }

    #[test]
    fn without_threads_the_lines_are_drawn_as_before() {
        let table = frames(4);
        let mut c = CollapsedCollector::new(crate::model::Naming::Python, false);
        call(&mut c, &table, 0, &[1, 0], 5);
        call(&mut c, &table, 0, &[3, 2, 0], 7);
        assert_eq!(bounded(&c, &table), every_line(&c, &table));
    }
}
