//! Adding, as `Stats.add` adds.

use super::stats::*;
use crate::hash::IdMap;

/// `pstats.Stats(first, *rest)`: the first file, then the others added in reverse order (as
/// `Stats.add` walks its arguments); each entry's numbers summed, its callers merged
/// (`add_callers`: the earlier callers first, cProfile's tuples summed item by item, counts
/// summed); new keys after the existing ones. The sum is sampled if the first file is (3.15
/// makes the object a `SampledStats` from its first file).
pub fn merge(files: &[Stats]) -> Stats {
    let Some((first, rest)) = files.split_first() else { return Stats::default() };
    let mut sum = first.clone();
    // `self.total_tt += item.total_tt`, in the order `add` takes the items.
    sum.total_tt = Some(rest.iter().rev().fold(first.total_tt(), |total, item| total.add(item.total_tt())));
    let mut names = Names::from(std::mem::take(&mut sum.names));
    let mut index: IdMap<Key, usize> = sum.entries.iter().enumerate().map(|(i, e)| (e.key, i)).collect();
    for item in rest.iter().rev() {
        // The item's names as the sum's.
        let ids: Vec<NameId> = item.names.iter().map(|n| names.intern(n.clone())).collect();
        let map = |k: &Key| Key { filename: ids[k.filename.0 as usize], line: k.line, name: ids[k.name.0 as usize] };
        for e in &item.entries {
            let key = map(&e.key);
            match index.get(&key) {
                Some(&i) => {
                    let t = &mut sum.entries[i];
                    t.cc = e.cc.add(t.cc);
                    t.nc = e.nc.add(t.nc);
                    t.tt = e.tt.add(t.tt);
                    t.ct = e.ct.add(t.ct);
                    for (k, c) in &e.callers {
                        let k = map(k);
                        match t.callers.iter_mut().find(|(x, _)| *x == k) {
                            Some(slot) => slot.1 = c.clone().add(slot.1.clone()),
                            None => t.callers.push((k, c.clone())),
                        }
                    }
                }
                None => {
                    index.insert(key, sum.entries.len());
                    let callers = e.callers.iter().map(|(k, c)| (map(k), c.clone())).collect();
                    sum.entries.push(Entry { key, callers, ..e.clone() });
                }
            }
        }
    }
    sum.names = names.names;
    sum
}
