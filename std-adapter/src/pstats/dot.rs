//! The call graph of a pstats file in Graphviz's DOT language, as gprof2dot (2025.4.14, the
//! PyPI release the tests compare with) draws it with `-f pstats` and its defaults: nodes of
//! at least 0.5 % total time, edges of at least 0.1 %, the "color" theme, labels of total and
//! self time percentages and call counts.
//!
//! How gprof2dot makes the graph from a pstats dictionary: one function per key (named
//! `module:line:name`, the module being the file name without directory and extension), ids
//! in the order keys are met (each entry, then its callers); a function's self time is `tt`,
//! its total time `ct`, its call count `nc`; an edge per caller, with `cc` calls and `ct` time
//! summed over cProfile's 4-tuples, or for a plain count that count and its share of the
//! callee's `ct`. Ratios are over the sum of self times and over the largest of the profile's
//! total time and every `ct`, clamped to [0, 1] (0/0 is 1). Nodes and edges below the
//! thresholds go; the rest are written in id order, attributes sorted by name.

use std::fmt::Write as _;

use crate::hash::{IdHash, IdMap};
use crate::pstats::{Key, Num, NumValue, Stats};

/// gprof2dot's `--node-thres` default, as a ratio.
const NODE_THRESHOLD: f64 = 0.005;
/// gprof2dot's `--edge-thres` default, as a ratio.
const EDGE_THRESHOLD: f64 = 0.001;

struct Function {
    /// The key it was made from: its name and file are written only for the nodes drawn.
    key: Key,
    called: Option<Num>,
    time: f64,
    total_time: f64,
    /// Callee id → (calls, total time), in gprof2dot's `add_call` order (a later call to the
    /// same callee replaces the earlier).
    calls: Vec<(usize, Num, f64)>,
}

/// `ratio()`: a share clamped to [0, 1], 0/0 (and any division by zero) being 1.
fn ratio(numerator: f64, denominator: f64) -> f64 {
    if denominator == 0.0 {
        return 1.0;
    }
    let r = numerator / denominator;
    r.clamp(0.0, 1.0)
}

/// `os.path.basename(os.path.splitext(filename)[0])`: the extension starts at the last dot
/// of the last component, if a character other than a dot comes before it there.
fn module_of(filename: &str) -> &str {
    let start = filename.rfind('/').map_or(0, |s| s + 1);
    let stem = match filename.rfind('.') {
        Some(dot) if dot >= start && filename[start..dot].bytes().any(|b| b != b'.') => &filename[..dot],
        _ => filename,
    };
    stem.rsplit('/').next().unwrap_or(stem)
}

/// `"%u" % n`.
fn unsigned(n: Num) -> String {
    match n.value() {
        NumValue::Int(i) => i.to_string(),
        NumValue::Float(f) => format!("{}", f.trunc() as i128),
    }
}

/// The graph's ids and functions from the dictionary.
fn profile(stats: &Stats) -> Result<(Vec<Function>, f64, f64), String> {
    // Every key is a function, and callers are keys too (gprof2dot refuses others): sized
    // once rather than rehashed at every doubling.
    let mut ids: IdMap<Key, usize> = IdMap::with_capacity_and_hasher(stats.entries.len(), IdHash::default());
    let mut functions: Vec<Function> = Vec::with_capacity(stats.entries.len());
    let mut id_of = |key: &Key, functions: &mut Vec<Function>| -> usize {
        *ids.entry(*key).or_insert_with(|| {
            functions.push(Function { key: *key, called: None, time: 0.0, total_time: 0.0, calls: Vec::new() });
            functions.len() - 1
        })
    };
    let mut total_tt = 0.0f64;
    for e in &stats.entries {
        total_tt += e.tt.to_f64();
    }
    let mut profile_time = 0.0f64;
    let mut profile_total = total_tt;
    for e in &stats.entries {
        let callee = id_of(&e.key, &mut functions);
        let ct = e.ct.to_f64();
        functions[callee].called = Some(e.nc);
        functions[callee].total_time = ct;
        functions[callee].time = e.tt.to_f64();
        profile_time += e.tt.to_f64();
        if ct > profile_total {
            profile_total = ct;
        }
        for (caller_key, value) in &e.callers {
            let caller = id_of(caller_key, &mut functions);
            let (calls, time) = match value.calls_and_time()? {
                (calls, Some(time)) => (calls, time),
                (n, None) => (n, ratio(n.to_f64(), e.nc.to_f64()) * ct),
            };
            let list = &mut functions[caller].calls;
            match list.iter_mut().find(|(id, _, _)| *id == callee) {
                Some(slot) => *slot = (callee, calls, time),
                None => list.push((callee, calls, time)),
            }
        }
    }
    Ok((functions, profile_time, profile_total))
}

/// gprof2dot's function name: `module:line:name`.
fn name_of(stats: &Stats, key: &Key) -> String {
    let filename = stats.name(key.filename).to_string();
    format!("{}:{}:{}", module_of(&filename), unsigned(key.line), stats.name(key.name))
}

/// The "color" theme's colour for a weight: HSL from dark blue to saturated red, gamma 1.
fn color(weight: f64) -> String {
    let w = weight.clamp(0.0, 1.0);
    let (hmin, smin, lmin) = (2.0 / 3.0, 0.80, 0.25);
    let (hmax, smax, lmax) = (0.0, 1.0, 0.5);
    let h = hmin + w * (hmax - hmin);
    let s = smin + w * (smax - smin);
    let l = lmin + w * (lmax - lmin);
    rgb_hex(hsl_to_rgb(h, s, l))
}

fn hsl_to_rgb(h: f64, s: f64, l: f64) -> (f64, f64, f64) {
    let h = h.rem_euclid(1.0);
    let s = s.clamp(0.0, 1.0);
    let l = l.clamp(0.0, 1.0);
    let m2 = if l <= 0.5 { l * (s + 1.0) } else { l + s - l * s };
    let m1 = l * 2.0 - m2;
    (hue_to_rgb(m1, m2, h + 1.0 / 3.0), hue_to_rgb(m1, m2, h), hue_to_rgb(m1, m2, h - 1.0 / 3.0))
}

fn hue_to_rgb(m1: f64, m2: f64, mut h: f64) -> f64 {
    if h < 0.0 {
        h += 1.0;
    } else if h > 1.0 {
        h -= 1.0;
    }
    if h * 6.0 < 1.0 {
        m1 + (m2 - m1) * h * 6.0
    } else if h * 2.0 < 1.0 {
        m2
    } else if h * 3.0 < 2.0 {
        m1 + (m2 - m1) * (2.0 / 3.0 - h) * 6.0
    } else {
        m1
    }
}

fn rgb_hex((r, g, b): (f64, f64, f64)) -> String {
    let byte = |f: f64| {
        if f <= 0.0 {
            0
        } else if f >= 1.0 {
            255
        } else {
            (255.0 * f + 0.5) as u32
        }
    };
    format!("#{:02x}{:02x}{:02x}", byte(r), byte(g), byte(b))
}

/// A DOT id: bare when alphanumeric (and not `0x…`), else quoted with `\`, newline, tab and
/// `"` escaped.
fn id(s: &str) -> String {
    if !s.is_empty() && s.chars().all(char::is_alphanumeric) && !s.starts_with("0x") {
        return s.to_string();
    }
    let escaped = s.replace('\\', "\\\\").replace('\n', "\\n").replace('\t', "\\t").replace('"', "\\\"");
    format!("\"{escaped}\"")
}

/// `"%.02f%%" % (p * 100)`.
fn percentage(p: f64) -> String {
    format!("{:.2}%", p * 100.0)
}

/// The call graph gprof2dot draws of `stats` (`gprof2dot -f pstats FILE`), or why gprof2dot
/// fails on it (a caller that is not a key has no times: its assertion fails).
pub fn dot(stats: &Stats) -> Result<String, String> {
    let (functions, profile_time, profile_total) = profile(stats)?;
    if let Some(f) = functions.iter().find(|f| f.called.is_none()) {
        return Err(format!("the caller {} is not a key of the file (gprof2dot fails on it)", name_of(stats, &f.key)));
    }
    let kept: Vec<bool> = functions.iter().map(|f| ratio(f.total_time, profile_total) >= NODE_THRESHOLD).collect();
    let mut out = String::from("digraph {\n\ttooltip=\" \"\n");
    out.push_str("\tgraph [fontname=Arial, nodesep=0.125, ranksep=0.25];\n");
    out.push_str("\tnode [fontcolor=white, fontname=Arial, height=0, shape=box, style=filled, width=0];\n");
    out.push_str("\tedge [fontname=Arial];\n");
    for (i, f) in functions.iter().enumerate() {
        if !kept[i] {
            continue;
        }
        let weight = ratio(f.total_time, profile_total);
        let mut label =
            vec![name_of(stats, &f.key), percentage(weight), format!("({})", percentage(ratio(f.time, profile_time)))];
        if let Some(n) = f.called {
            label.push(format!("{}×", unsigned(n)));
        }
        let _ = writeln!(
            out,
            "\t{i} [color={}, fontcolor={}, fontsize={}, label={}, tooltip={}];",
            id(&color(weight)),
            id("#ffffff"),
            id(&format!("{:.2}", (weight * weight * 10.0).max(10.0))),
            id(&label.join("\n")),
            id(&stats.name(f.key.filename).to_string())
        );
        let mut calls: Vec<&(usize, Num, f64)> = f.calls.iter().collect();
        calls.sort_by_key(|(callee, _, _)| *callee);
        for (callee, n, time) in calls {
            let w = ratio(*time, profile_total);
            if !kept[*callee] || w < EDGE_THRESHOLD {
                continue;
            }
            let penwidth = (w * 4.0).max(0.5);
            let label = format!("{}\n{}×", percentage(w), unsigned(*n));
            let _ = writeln!(
                out,
                "\t{i} -> {callee} [arrowsize={}, color={}, fontcolor={}, fontsize={}, label={}, labeldistance={}, penwidth={}];",
                id(&format!("{:.2}", 0.5 * penwidth.sqrt())),
                id(&color(w)),
                id(&color(w)),
                id(&format!("{:.2}", (w * w * 10.0).max(10.0))),
                id(&label),
                id(&format!("{penwidth:.2}")),
                id(&format!("{penwidth:.2}"))
            );
        }
    }
    out.push_str("}\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::module_of;

    #[test]
    fn module_names_as_os_path_makes_them() {
        assert_eq!(module_of("../scripts/workload.py"), "workload");
        assert_eq!(module_of("~"), "~");
        assert_eq!(module_of("<frozen runpy>"), "<frozen runpy>");
        assert_eq!(module_of("/a.b/c"), "c");
        assert_eq!(module_of("/x/.bashrc"), ".bashrc");
        assert_eq!(module_of("/x/..a.py"), "..a");
        assert_eq!(module_of("a.tar.gz"), "a.tar");
    }
}
