//! `tachyon top`'s counts checked against collapsed stacks: own and total samples per frame
//! name, computed here from `tid:T;root;…;leaf COUNT` lines (CPython's `replay --collapsed`,
//! or ours for inputs CPython does not read), against our table keyed by the same names.

use std::collections::BTreeMap;
use std::path::Path;

use tachyon::model::{basename, Naming, Source};
use tachyon::profile::{Profile, SourceOptions};
use tachyon::top::{Counts, SortBy};

/// Own and total samples per frame name, and all samples (of stacks with a frame).
pub type ByName = (BTreeMap<String, (u64, u64)>, u64);

/// The counts collapsed lines give: a line's count is its innermost frame's own, and the
/// total of each distinct frame name it holds.
pub fn from_collapsed(text: &str) -> ByName {
    let mut by_name: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut all = 0;
    for line in text.lines() {
        let (stack, count) = line.rsplit_once(' ').expect("a count after the stack");
        let count: u64 = count.parse().expect("a count");
        // CPython's lines (and ours of Python profiles) begin with the thread; native ones not.
        let names: Vec<&str> = stack.split(';').skip_while(|n| n.starts_with("tid:")).collect();
        all += count;
        by_name.entry(names.last().expect("a frame").to_string()).or_default().0 += count;
        let mut distinct = names.clone();
        distinct.sort_unstable();
        distinct.dedup();
        for name in distinct {
            by_name.entry(name.to_owned()).or_default().1 += count;
        }
    }
    (by_name, all)
}

/// `tachyon top`'s table of `path`, each row under the name collapsed stacks give its
/// function; `Err` when two rows share a name (files of one base name), which collapsed
/// stacks cannot tell apart.
pub fn from_top(path: &Path) -> Result<ByName, String> {
    let mut profile = Profile::open(path).map_err(|e| e.to_string())?;
    let options = SourceOptions { symbolize: Some(Vec::new()), ..SourceOptions::default() };
    let naming = profile.source(&options).map_err(|e| e.to_string())?.info().naming;
    let mut counts = Counts::new(None);
    counts.add_path(path).map_err(|e| e.to_string())?;
    let mut by_name = BTreeMap::new();
    for row in counts.table(SortBy::Own) {
        let name = if naming == Naming::Native || (row.file == "~" && row.line == 0) {
            row.function.clone()
        } else {
            format!("{}:{}:{}", basename(&row.file), row.function, row.line)
        };
        if by_name.insert(name.clone(), (row.own, row.total)).is_some() {
            return Err(format!("two functions named {name}"));
        }
    }
    Ok((by_name, counts.samples()))
}

/// `Err` naming the first difference between two tables.
pub fn compare(what: &str, ours: &ByName, theirs: &ByName) -> Result<(), String> {
    if ours.1 != theirs.1 {
        return Err(format!("{what}: {} samples, collapsed stacks hold {}", ours.1, theirs.1));
    }
    for (name, want) in &theirs.0 {
        match ours.0.get(name) {
            Some(got) if got == want => {}
            got => return Err(format!("{what}: {name}: (own, total) {got:?}, collapsed stacks give {want:?}")),
        }
    }
    match ours.0.keys().find(|k| !theirs.0.contains_key(*k)) {
        Some(extra) => Err(format!("{what}: {extra} is in no collapsed stack")),
        None => Ok(()),
    }
}
