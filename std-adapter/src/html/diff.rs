//! `tachyon diff BASE NEW --html`: the differential flame graph page, with the numbers of
//! CPython's `replay --diff-flamegraph BASE NEW`.
//!
//! The page draws NEW's tree ([`super::flame`]'s page, same nodes) and gives each node what
//! CPython's `DiffFlamegraphCollector` gives it, from two aggregates of each whole tree (every
//! node, none left out): samples at or below and own samples per *path* of `(file, function)`
//! from the root, lines left out so that a function whose lines moved still matches. For a
//! node with `value` samples, `self` of them its own, on a path with NEW's aggregate
//! `(total, self)` and BASE's `(b_total, b_self)`:
//!
//! ```text
//! scale          = BASE's interval / NEW's (1 when BASE has no samples)
//! self weight    = self / path self            (or value / path total when that is 0)
//! others' weight = (value - self) / (path total - path self)    (same fallback)
//! baseline       = b_self · scale · self weight
//! baseline_total = baseline + (b_total - b_self) · scale · others' weight
//! diff           = self - baseline;  diff_pct = diff / baseline · 100 (100 or 0 without one)
//! ```
//!
//! so a path's baseline is shared among the nodes it was split into by line. Paths BASE has and
//! NEW lacks are *elided*: the page has a second tree of them, BASE's whole tree cut to the
//! elided nodes and their ancestors (an ancestor's samples are then its kept children's, its
//! own none), every number times `scale`, each elided node's own samples as its `baseline`
//! and `-baseline` as its `diff` (−100 %).
//!
//! ```text
//! "diff": {"baseline_samples": 900, "current_samples": 1000, "baseline_scale": 1,
//!          "elided_count": 2,                      elided paths with own samples
//!          "baseline": [...], "baseline_total": [...], "diff": [...], "diff_pct": [...]},
//! "elided": {"parent": [...], "func": [...], "value": [...], "self": [...], "baseline": [...],
//!            "baseline_total": [...], "diff": [...], "diff_pct": [...]}      or null
//! ```
//!
//! (per node of NEW's tree, in the page's order; the root's numbers are 0). As CPython, this
//! refuses profiles of different modes, and Tachyon profiles recorded with different capture
//! features.

use std::collections::HashMap;
use std::io::{self, Write};

use super::flame::{parents_and_funcs, preorder, write_numbers, write_tree_fields, Tables};
use super::tree::{CallTree, ROOT};
use crate::model::{FunctionKey, Source, SourceInfo};
use crate::output::{ConvertError, Output};
use tachyon_core::header::{CaptureFeatures, ProfilingConfig};

/// A profile's call tree with the function keys its nodes refer to.
pub struct Profiled {
    /// The tree, finished.
    pub tree: CallTree,
    /// The frame table's function keys.
    pub functions: Vec<FunctionKey>,
    /// The profile's facts.
    pub info: SourceInfo,
    /// A Tachyon header's profiling configuration (mode and capture features), which CPython
    /// requires two compared profiles to share; `None` for other formats.
    pub config: Option<ProfilingConfig>,
}

/// Replays `source` into its call tree; `config` is the Tachyon header's, if it is one.
pub fn profiled<S: Source>(
    source: &mut S,
    config: Option<ProfilingConfig>,
    progress: &mut dyn FnMut(u64),
) -> Result<Profiled, ConvertError<S::Error>> {
    source.prepare(&Output::FlamegraphHtml { title: String::new() }).map_err(ConvertError::Read)?;
    let info = source.info().clone();
    let mut tree = CallTree::new(info.naming);
    source.replay(&mut tree, progress).map_err(ConvertError::Read)?;
    tree.finish();
    Ok(Profiled { tree, functions: source.frames().functions.clone(), info, config })
}

/// Why two profiles cannot be compared.
#[derive(Debug)]
pub enum DiffError {
    /// Profiles of different modes (CPython's own refusal).
    Modes {
        /// BASE's mode.
        base: String,
        /// NEW's mode.
        new: String,
    },
    /// Tachyon profiles recorded with different capture features (CPython's own refusal).
    Features(Vec<&'static str>),
    /// Writing failed.
    Write(io::Error),
}

impl std::fmt::Display for DiffError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DiffError::Modes { base, new } => {
                write!(f, "the baseline is a {base} profile and the other a {new} one: they do not compare")
            }
            DiffError::Features(names) => write!(
                f,
                "the two profiles were recorded with different capture features ({}): they do not compare",
                names.join(", ")
            ),
            DiffError::Write(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for DiffError {}

impl From<io::Error> for DiffError {
    fn from(e: io::Error) -> Self {
        DiffError::Write(e)
    }
}

/// Paths of `(file, function)` from the root, numbered across both trees (0: the root's).
#[derive(Default)]
struct Paths(HashMap<(u32, String, String), u32>);

impl Paths {
    /// Each node's path number.
    fn of(&mut self, p: &Profiled) -> Vec<u32> {
        let mut ids = vec![0u32; p.tree.len()];
        for node in 1..p.tree.len() as u32 {
            let key = &p.functions[p.tree.function(node) as usize];
            let next = self.0.len() as u32 + 1;
            let parent = ids[p.tree.parent(node) as usize];
            ids[node as usize] = *self.0.entry((parent, key.filename.clone(), key.funcname.clone())).or_insert(next);
        }
        ids
    }

    /// Per path number, the samples at or below and own of the tree's nodes on it.
    fn totals(&self, p: &Profiled, ids: &[u32]) -> Vec<(u64, u64)> {
        let mut totals = vec![(0u64, 0u64); self.0.len() + 1];
        for node in 1..p.tree.len() as u32 {
            let t = &mut totals[ids[node as usize] as usize];
            t.0 += p.tree.value(node);
            t.1 += p.tree.own(node);
        }
        totals
    }
}

/// CPython's `_sample_weight`.
fn weight(value: f64, aggregate: f64, fallback_value: f64, fallback_aggregate: f64) -> f64 {
    if aggregate > 0.0 {
        value / aggregate
    } else if fallback_aggregate > 0.0 {
        fallback_value / fallback_aggregate
    } else {
        0.0
    }
}

/// Writes the differential flame graph page of `new` against `base`.
pub fn write_diff(base: &Profiled, new: &Profiled, title: &str, out: &mut dyn Write) -> Result<(), DiffError> {
    if let (Some(a), Some(b)) = (base.info.cpython_mode, new.info.cpython_mode) {
        if a != b {
            return Err(DiffError::Modes { base: base.info.mode.to_string(), new: new.info.mode.to_string() });
        }
    }
    let features = |p: &Profiled| p.config.and_then(|c| c.capture_features);
    if let (Some(a), Some(b)) = (features(base), features(new)) {
        if a != b {
            let differ = CaptureFeatures::new(a.bits() ^ b.bits()).expect("five bits");
            let mut names: Vec<&'static str> = differ.names().collect();
            names.sort_unstable();
            return Err(DiffError::Features(names));
        }
    }
    let mut paths = Paths::default();
    let (new_ids, base_ids) = (paths.of(new), paths.of(base));
    let (new_totals, base_totals) = (paths.totals(new, &new_ids), paths.totals(base, &base_ids));
    let base_samples = base.tree.value(ROOT);
    let (bi, ni) = (base.info.sample_interval_us, new.info.sample_interval_us);
    let scale = if base_samples > 0 && ni > 0 { bi as f64 / ni as f64 } else { 1.0 };

    // NEW's tree as the flame graph page has it, each node with its share of BASE.
    let (tree, naming) = (&new.tree, new.info.naming);
    let order = preorder(tree, &new.functions, naming, |n| tree.kept(n));
    let mut tables = Tables::default();
    let (parents, funcs) = parents_and_funcs(tree, &order, &new.functions, naming, &mut tables);
    let mut columns = [(); 4].map(|()| Vec::with_capacity(order.len()));
    for &node in &order {
        let row = if node == ROOT {
            [0.0; 4]
        } else {
            let path = new_ids[node as usize] as usize;
            let (total, own) = new_totals[path];
            let (b_total, b_own) = base_totals[path];
            let (value, self_) = (tree.value(node) as f64, tree.own(node) as f64);
            let self_weight = weight(self_, own as f64, value, total as f64);
            let others_weight = weight(value - self_, (total - own) as f64, value, total as f64);
            let baseline = b_own as f64 * scale * self_weight;
            let baseline_total = baseline + (b_total - b_own) as f64 * scale * others_weight;
            let diff = self_ - baseline;
            let pct = if baseline > 0.0 {
                diff / baseline * 100.0
            } else if self_ > 0.0 {
                100.0
            } else {
                0.0
            };
            [baseline, baseline_total, diff, pct]
        };
        for (c, v) in columns.iter_mut().zip(row) {
            c.push(v);
        }
    }

    // BASE's paths NEW lacks, with their ancestors.
    let elided =
        |node: u32| node != ROOT && matches!(new_totals.get(base_ids[node as usize] as usize), None | Some(&(0, _)));
    // An elided node keeps its samples; an ancestor kept for it has its kept children's.
    let n = base.tree.len();
    let mut holds = vec![false; n];
    let mut value = vec![0u64; n];
    for node in (1..n as u32).rev() {
        if elided(node) {
            holds[node as usize] = true;
            value[node as usize] = base.tree.value(node);
        }
        if holds[node as usize] {
            let p = base.tree.parent(node);
            holds[p as usize] = true;
            if !elided(p) {
                value[p as usize] += value[node as usize];
            }
        }
    }
    let elided_count = {
        let mut seen = vec![false; paths.0.len() + 1];
        (1..n as u32)
            .filter(|&node| elided(node))
            .filter(|&node| {
                let path = base_ids[node as usize] as usize;
                !std::mem::replace(&mut seen[path], true) && base_totals[path].1 > 0
            })
            .count()
    };
    let elided_order = holds[ROOT as usize]
        .then(|| preorder(&base.tree, &base.functions, base.info.naming, |node| holds[node as usize]));

    let mut write_data = |out: &mut dyn Write| -> io::Result<()> {
        out.write_all(b"{\"format\":\"tachyon-diff-flamegraph\",\"version\":1,")?;
        write_tree_fields(out, tree, &order, &parents, &funcs, &new.info, title)?;
        write!(
            out,
            ",\"diff\":{{\"baseline_samples\":{base_samples},\"current_samples\":{},\"baseline_scale\":{scale},\
             \"elided_count\":{elided_count}",
            tree.value(ROOT)
        )?;
        for (name, column) in ["baseline", "baseline_total", "diff", "diff_pct"].iter().zip(&columns) {
            write!(out, ",\"{name}\":")?;
            write_numbers(out, column.iter())?;
        }
        out.write_all(b"},\"elided\":")?;
        match &elided_order {
            None => out.write_all(b"null")?,
            Some(order) => {
                let (parents, funcs) =
                    parents_and_funcs(&base.tree, order, &base.functions, base.info.naming, &mut tables);
                let own = |node: u32| if elided(node) { base.tree.own(node) as f64 } else { 0.0 };
                out.write_all(b"{\"parent\":")?;
                write_numbers(out, parents.iter())?;
                out.write_all(b",\"func\":")?;
                write_numbers(out, funcs.iter())?;
                out.write_all(b",\"value\":")?;
                write_numbers(out, order.iter().map(|&n| value[n as usize] as f64 * scale))?;
                out.write_all(b",\"self\":")?;
                write_numbers(out, order.iter().map(|&n| own(n) * scale))?;
                out.write_all(b",\"baseline\":")?;
                write_numbers(out, order.iter().map(|&n| own(n) * scale))?;
                out.write_all(b",\"baseline_total\":")?;
                write_numbers(
                    out,
                    order.iter().map(|&n| if n == ROOT { 0.0 } else { value[n as usize] as f64 * scale }),
                )?;
                out.write_all(b",\"diff\":")?;
                write_numbers(out, order.iter().map(|&n| -(own(n) * scale)))?;
                out.write_all(b",\"diff_pct\":")?;
                write_numbers(out, order.iter().map(|&n| if own(n) * scale > 0.0 { -100.0 } else { 0.0 }))?;
                out.write_all(b"}")?;
            }
        }
        out.write_all(b",")?;
        tables.write(out)?;
        out.write_all(b"}")
    };
    let body = super::flame::body(title, &new.info).replace(
        "<button id=\"reset\"",
        "<label>Show <select id=\"view\"><option value=\"current\">the new profile, coloured by change</option>\
         <option value=\"elided\">what the baseline had and the new one lacks</option></select></label>\
         <button id=\"reset\"",
    );
    super::write_page(out, title, &body, &mut write_data, super::flame::SCRIPT)?;
    Ok(())
}
