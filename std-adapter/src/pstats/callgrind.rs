//! A pstats file's call graph in Callgrind's format (`--to callgrind` of a pstats input), for
//! KCachegrind and `callgrind_annotate`, laid out as [`crate::callgrind`] writes sampled
//! profiles but with pstats' times:
//!
//! ```text
//! events: ns              one event: nanoseconds (pstats' seconds × 10^9, rounded)
//! fl=(1) app.py           a function's file, named once, then by its number
//! fn=(1) main             the function (its name alone: two keys of one name in one file,
//! 20 1500                 at different lines, are one function whose costs add up), its
//!                         own time `tt` at its key's line
//! cfn=(2) work            a call: `calls=` the calls (at least 1: a reader takes the cost
//! calls=3 31              after `calls=0` as the caller's own), the callee's line, then the
//! 20 9000                 caller's line and the time spent in the callee below the call
//! ```
//!
//! A call's time is gprof's: cProfile's per-caller `ct`; for a plain count (`profile`, the
//! sampler) the callee's `ct` shared among its other callers by their calls. A function's
//! calls of itself are left out, as gprof leaves them out of the times it propagates: their
//! time is already in the calls from its callers, and a reader would count it twice (the
//! recursive calls are in `--to pstats-text`). So `callgrind_annotate --inclusive=yes` prints
//! a function's `ct` — for one with callers the sum of its calls' times, for one without its
//! own time and its calls' — wherever it is not part of a longer cycle of calls (there, as in
//! gprof before it merges cycles, the times of the cycle's calls overlap).

use std::io::{self, Write};

use crate::callgrind::text::{write_header, Names};
use crate::hash::IdMap;

use super::{Key, NameId, Num, NumValue, Stats};

/// `seconds` as whole nanoseconds (a negative or not-a-number time as 0).
fn ns(seconds: f64) -> u64 {
    let n = (seconds * 1e9).round();
    if n > 0.0 {
        n as u64
    } else {
        0
    }
}

/// A count or line as callgrind's unsigned number (a float truncated, as `%d` prints it;
/// below 0 as 0).
fn unsigned(n: Num) -> u64 {
    match n.value() {
        NumValue::Int(i) => u64::try_from(i).unwrap_or(0),
        NumValue::Float(f) if f > 0.0 => f as u64,
        NumValue::Float(_) => 0,
    }
}

/// A call: the callee's entry, the calls, the time below them (s).
type Edge = (usize, u64, f64);

/// Writes `stats`' call graph; fails, as gprof2dot does, on a caller value that is neither a
/// count nor `(nc, cc, tt, ct)` groups.
pub fn callgrind(stats: &Stats, out: &mut impl Write) -> Result<(), CallgrindError> {
    // Per function met (entries first, then callers that are not entries): its calls.
    let mut ids: IdMap<Key, usize> = IdMap::default();
    let mut keys: Vec<Key> = Vec::with_capacity(stats.entries.len());
    for e in &stats.entries {
        ids.entry(e.key).or_insert_with(|| {
            keys.push(e.key);
            keys.len() - 1
        });
    }
    let mut calls: Vec<Vec<Edge>> = Vec::new();
    for (callee, e) in stats.entries.iter().enumerate() {
        let parsed: Vec<(Key, Num, Option<f64>)> = e
            .callers
            .iter()
            .map(|(k, v)| v.calls_and_time().map(|(n, t)| (*k, n, t)))
            .collect::<Result<_, _>>()
            .map_err(CallgrindError::Shape)?;
        // A plain count's share: of the calls from other functions.
        let shared: f64 = parsed.iter().filter(|(k, _, _)| *k != e.key).map(|(_, n, _)| n.to_f64()).sum();
        for (caller, n, time) in parsed.into_iter().filter(|(k, _, _)| *k != e.key) {
            let time = time.unwrap_or_else(|| if shared > 0.0 { e.ct.to_f64() * n.to_f64() / shared } else { 0.0 });
            let id = *ids.entry(caller).or_insert_with(|| {
                keys.push(caller);
                keys.len() - 1
            });
            calls.resize_with(keys.len(), Vec::new);
            calls[id].push((callee, unsigned(n).max(1), time));
        }
    }
    calls.resize_with(keys.len(), Vec::new);
    write(stats, &keys, &calls, out).map_err(CallgrindError::Write)
}

fn write(stats: &Stats, keys: &[Key], calls: &[Vec<Edge>], out: &mut impl Write) -> io::Result<()> {
    let total = stats.entries.iter().map(|e| ns(e.tt.to_f64())).fold(0u64, u64::saturating_add);
    write_header(out, "ns", Some("Time (ns)"), total)?;
    // Files and functions are numbered by their names' places in the table (each distinct
    // name is held there once).
    let (mut files, mut names) = (Names::new(stats.names.len()), Names::new(stats.names.len()));
    let name = |id: NameId| stats.name(id);
    for (id, key) in keys.iter().enumerate() {
        let line = unsigned(key.line);
        writeln!(out)?;
        files.write(out, "fl", key.filename.0 as usize, name(key.filename))?;
        names.write(out, "fn", key.name.0 as usize, name(key.name))?;
        // A caller that is not an entry has no time of its own.
        let own = stats.entries.get(id).map_or(0, |e| ns(e.tt.to_f64()));
        writeln!(out, "{line} {own}")?;
        for &(callee, n, time) in &calls[id] {
            let c = &keys[callee];
            if c.filename != key.filename {
                files.write(out, "cfl", c.filename.0 as usize, name(c.filename))?;
            }
            names.write(out, "cfn", c.name.0 as usize, name(c.name))?;
            writeln!(out, "calls={n} {}", unsigned(c.line))?;
            writeln!(out, "{line} {}", ns(time))?;
        }
    }
    Ok(())
}

/// Why a pstats file's callgrind could not be written.
#[derive(Debug)]
pub enum CallgrindError {
    /// A caller value the call graph cannot take.
    Shape(String),
    /// The output failed.
    Write(io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pstats::{Calls, Entry, Name};

    /// A file written by hand: `main` calls `fib` (cProfile's timed callers, `fib` also
    /// calling itself) and `helper` (a plain count, as `profile` writes, shared 1 : 3 with
    /// `fib`'s calls).
    #[test]
    fn a_graph_written_by_hand() {
        let key = |file: u32, line: i64, name: u32| Key {
            filename: NameId(file),
            line: Num::small(line),
            name: NameId(name),
        };
        let (main, fib, helper) = (key(0, 1, 1), key(0, 5, 2), key(3, 3, 4));
        let s = Num::float;
        let timed = |nc: i64, cc: i64, tt: f64, ct: f64| Calls::Timed([Num::small(nc), Num::small(cc), s(tt), s(ct)]);
        let entry = |key, tt: f64, ct: f64, callers| Entry {
            key,
            cc: Num::small(1),
            nc: Num::small(1),
            tt: s(tt),
            ct: s(ct),
            callers,
        };
        let names = ["a.py", "main", "fib", "b.py", "helper"].map(|n| Name::Str(n.into())).to_vec();
        let stats = Stats {
            names,
            entries: vec![
                entry(main, 0.001, 0.010, vec![]),
                entry(fib, 0.006, 0.009, vec![(main, timed(1, 1, 0.002, 0.009)), (fib, timed(10, 0, 0.004, 0.007))]),
                entry(
                    helper,
                    0.001,
                    0.002,
                    vec![(main, Calls::Count(Num::small(1))), (fib, Calls::Count(Num::small(3)))],
                ),
            ],
            sampled: false,
            total_tt: None,
        };
        let mut out = Vec::new();
        callgrind(&stats, &mut out).unwrap();
        let want = format!(
            "# callgrind format\nversion: 1\ncreator: tachyon {}\npositions: line\nevent: ns : Time (ns)\nevents: ns\n\
             summary: 8000000\n\
             \nfl=(1) a.py\nfn=(1) main\n1 1000000\ncfn=(2) fib\ncalls=1 5\n1 9000000\ncfl=(2) b.py\ncfn=(3) helper\ncalls=1 3\n1 500000\n\
             \nfl=(1)\nfn=(2)\n5 6000000\ncfl=(2)\ncfn=(3)\ncalls=3 3\n5 1500000\n\
             \nfl=(2)\nfn=(3)\n3 1000000\n",
            env!("CARGO_PKG_VERSION")
        );
        assert_eq!(String::from_utf8(out).unwrap(), want);
    }

    #[test]
    fn a_caller_value_of_another_shape_is_refused() {
        let k = Key { filename: NameId(0), line: Num::small(1), name: NameId(0) };
        let other = Calls::Other { repr: "(3, 2, 0.25)".into(), tuple: true, numbers: None };
        let stats = Stats {
            names: vec![Name::Str("f".into())],
            entries: vec![Entry {
                key: k,
                cc: Num::small(1),
                nc: Num::small(1),
                tt: Num::small(0),
                ct: Num::small(0),
                callers: vec![(k, other)],
            }],
            sampled: false,
            total_tt: None,
        };
        let e = callgrind(&stats, &mut Vec::new()).unwrap_err();
        assert!(matches!(&e, CallgrindError::Shape(m) if m.contains("(3, 2, 0.25)")), "{e:?}");
    }
}
