//! Flame graphs (SVG, drawn by the inferno crate) from the collapsed stacks of
//! [`super::collapsed`]: one tower per thread (`tid:N` at the root), frames named
//! `file:function:line`. A differential graph takes two profiles: widths from the new one,
//! colour from the change of each frame's share (red grew, blue shrank), threads merged;
//! frames only the base had have no width in the new profile and are not drawn.

use std::io::{self, Write};

use inferno::flamegraph::{self, Options};

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
