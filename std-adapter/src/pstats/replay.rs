//! pstats: what CPython's `PstatsCollector` builds from a replay, written as the marshal file
//! `replay --pstats -o` writes (which `pstats.Stats` loads), or printed as the table `replay`
//! prints by default.
//!
//! Per function key `(filename, lineno, funcname)`: `direct` samples (the key is the
//! innermost frame), `cumulative` samples (the key is anywhere on the stack, once per
//! sample), and per caller key the samples in which the caller called it. The file maps each
//! key to `(direct, cumulative, direct × interval, cumulative × interval, {caller: samples})`,
//! in the order keys were first met, plus the marker key `("__sampled__",): True` that makes
//! 3.15's `pstats.Stats` print sampled columns; older Pythons cannot load a file with that
//! key, which is what `compat` leaves out.

use std::collections::HashMap;
use std::io::{self, Write};

use std::convert::Infallible;

use tachyon_core::header::ProfilingMode;
use tachyon_core::marshal::{EncodeError, Encoder};

use crate::model::{basename, Call, Collector, FrameTable, FunctionKey};
pub use crate::output::SortOrder;

/// Aggregates samples per function key.
#[derive(Debug, Default)]
pub struct PstatsCollector {
    /// Per function key: (direct, cumulative), once touched.
    counts: Vec<Option<(u64, u64)>>,
    /// Keys in the order CPython's `defaultdict` met them.
    order: Vec<u32>,
    /// Per callee: callers with samples, in the order met.
    callers: HashMap<u32, Vec<(u32, u64)>>,
    seen: Vec<u64>,
    generation: u64,
}

impl Collector for PstatsCollector {
    fn collect(&mut self, frames: &FrameTable, s: &Call<'_>) {
        if s.stack.is_empty() {
            return;
        }
        let n = s.samples();
        if self.counts.len() < frames.functions.len() {
            self.counts.resize(frames.functions.len(), None);
            self.seen.resize(frames.functions.len(), 0);
        }
        self.generation += 1;
        for &id in s.stack {
            let k = frames.function(id) as usize;
            if self.seen[k] != self.generation {
                self.seen[k] = self.generation;
                self.touch(k).1 += n;
            }
        }
        let top = frames.function(s.stack[0]) as usize;
        self.touch(top).0 += n;
        for pair in s.stack.windows(2) {
            let callee = frames.function(pair[0]);
            let caller = frames.function(pair[1]);
            let list = self.callers.entry(callee).or_default();
            match list.iter_mut().find(|(c, _)| *c == caller) {
                Some((_, calls)) => *calls += n,
                None => list.push((caller, n)),
            }
        }
    }
}

/// One row of the statistics: `(cc, nc, tt, ct, callers)` in pstats' terms.
#[derive(Debug, Clone, PartialEq)]
pub struct StatRow {
    /// The function.
    pub key: FunctionKey,
    /// Samples with the function innermost.
    pub direct: u64,
    /// Samples with the function anywhere on the stack.
    pub cumulative: u64,
    /// `direct` × interval, seconds.
    pub total_time: f64,
    /// `cumulative` × interval, seconds.
    pub cumulative_time: f64,
    /// Callers and the samples in which each called this function.
    pub callers: Vec<(FunctionKey, u64)>,
}

impl PstatsCollector {
    fn touch(&mut self, k: usize) -> &mut (u64, u64) {
        if self.counts[k].is_none() {
            self.order.push(k as u32);
        }
        self.counts[k].get_or_insert((0, 0))
    }

    /// The statistics as CPython's `create_stats` makes them, in its order.
    pub fn rows(&self, frames: &FrameTable, sample_interval_us: u64) -> Vec<StatRow> {
        // Python: interval / 1_000_000 (correctly rounded), then count * that.
        let interval_sec = sample_interval_us as f64 / 1_000_000.0;
        self.order
            .iter()
            .map(|&k| {
                let (direct, cumulative) = self.counts[k as usize].unwrap_or((0, 0));
                let callers = self.callers.get(&k).map_or(&[][..], |v| &v[..]);
                StatRow {
                    key: frames.functions[k as usize].clone(),
                    direct,
                    cumulative,
                    total_time: direct as f64 * interval_sec,
                    cumulative_time: cumulative as f64 * interval_sec,
                    callers: callers.iter().map(|&(c, n)| (frames.functions[c as usize].clone(), n)).collect(),
                }
            })
            .collect()
    }
}

/// Writes `rows` as the marshal file of `replay --pstats -o`; `compat` leaves out the
/// `("__sampled__",)` marker so that Pythons before 3.15 can load it. Written through the
/// core's marshal encoder (always little-endian, whatever the machine), in memory first.
pub fn write_marshal(rows: &[StatRow], compat: bool, out: &mut impl Write) -> io::Result<()> {
    let mut bytes = Vec::new();
    let mut m = Encoder::new(&mut bytes);
    let key = |m: &mut Encoder<&mut Vec<u8>>, k: &FunctionKey| -> Result<(), EncodeError<Infallible>> {
        m.tuple(3)?;
        m.str(k.filename.as_bytes())?;
        m.int(k.lineno.into())?;
        m.str(k.funcname.as_bytes())
    };
    let mut body = || -> Result<(), EncodeError<Infallible>> {
        m.dict()?;
        for row in rows {
            key(&mut m, &row.key)?;
            m.tuple(5)?;
            m.int(row.direct.into())?;
            m.int(row.cumulative.into())?;
            m.float(row.total_time)?;
            m.float(row.cumulative_time)?;
            m.dict()?;
            for (caller, n) in &row.callers {
                key(&mut m, caller)?;
                m.int((*n).into())?;
            }
            m.end_dict()?;
        }
        if !compat {
            m.tuple(1)?;
            m.str(b"__sampled__")?;
            m.bool(true)?;
        }
        m.end_dict()
    };
    body().map_err(|_| io::Error::other("a string of 4 GiB or more"))?;
    out.write_all(&bytes)
}

/// Prints the table CPython's `replay` prints (without colour): rows merged by base file
/// name like `pstats.Stats.strip_dirs`, sorted, cut to `limit`, the legend, and with
/// `summary` the "interesting functions".
pub fn write_text(
    rows: &[StatRow],
    sort: SortOrder,
    limit: Option<usize>,
    summary: bool,
    mode: Option<ProfilingMode>,
    out: &mut impl Write,
) -> io::Result<()> {
    let mut stripped = strip_dirs(rows);
    if stripped.is_empty() {
        writeln!(out, "No samples were collected.")?;
        if mode == Some(ProfilingMode::Cpu) {
            writeln!(out, "This can happen in CPU mode when all threads are idle.")?;
        }
        return Ok(());
    }
    let total: u64 = stripped.iter().map(|r| r.direct).sum();
    let pct = |n: u64| if total > 0 { n as f64 / total as f64 * 100.0 } else { 0.0 };
    // Python's sort(reverse=True) is stable, like sort_by with the comparison flipped.
    let desc = |a: f64, b: f64| b.partial_cmp(&a).unwrap_or(std::cmp::Ordering::Equal);
    match sort {
        SortOrder::Name => {
            let mut keyed: Vec<(String, Row)> = stripped.into_iter().map(|r| (py_repr_key(&r.key), r)).collect();
            keyed.sort_by(|a, b| a.0.cmp(&b.0));
            stripped = keyed.into_iter().map(|(_, r)| r).collect();
        }
        SortOrder::Nsamples => stripped.sort_by_key(|r| std::cmp::Reverse(r.direct)),
        SortOrder::Tottime => stripped.sort_by(|a, b| desc(a.total_time, b.total_time)),
        SortOrder::Cumtime => stripped.sort_by(|a, b| desc(a.cumulative_time, b.cumulative_time)),
        SortOrder::SamplePct => stripped.sort_by(|a, b| desc(pct(a.direct), pct(b.direct))),
        SortOrder::CumulPct => stripped.sort_by(|a, b| desc(pct(a.cumulative), pct(b.cumulative))),
        SortOrder::NsamplesCumul => stripped.sort_by_key(|r| std::cmp::Reverse(r.cumulative)),
    }
    if let Some(limit) = limit {
        stripped.truncate(limit);
    }
    let max_tt = stripped.iter().map(|r| r.total_time).fold(0.0, f64::max);
    let max_ct = stripped.iter().map(|r| r.cumulative_time).fold(0.0, f64::max);
    let (tt_unit, tt_scale) = best_unit(max_tt);
    let (ct_unit, ct_scale) = best_unit(max_ct);
    let tt_head = format!("tottime ({tt_unit})");
    let ct_head = format!("cumtime ({ct_unit})");
    let tt_w = 12.max(tt_head.chars().count());
    let ct_w = 12.max(ct_head.chars().count());
    writeln!(out, "Profile Stats:")?;
    writeln!(
        out,
        "{:>15}  {:>8}  {:>tt_w$}  {:>8}  {:>ct_w$}  filename:lineno(function)",
        "nsamples", "sample%", tt_head, "cumul%", ct_head
    )?;
    for r in &stripped {
        writeln!(
            out,
            "{:>15}  {:8.1}  {:tt_w$.3}  {:8.1}  {:ct_w$.3}  {}:{}({})",
            format!("{}/{}", r.direct, r.cumulative),
            pct(r.direct),
            r.total_time * tt_scale,
            pct(r.cumulative),
            r.cumulative_time * ct_scale,
            r.key.filename,
            r.key.lineno,
            r.key.funcname
        )?;
    }
    out.write_all(
        "\nLegend:
  nsamples: Direct/Cumulative samples (direct executing / on call stack)
  sample%: Percentage of total samples this function was directly executing
  tottime: Estimated total time spent directly in this function
  cumul%: Percentage of total samples when this function was on the call stack
  cumtime: Estimated cumulative time (including time in called functions)
  filename:lineno(function): Function location and name
"
        .as_bytes(),
    )?;
    if summary {
        write_summary(&stripped, total, out)?;
    }
    Ok(())
}

/// A row after `strip_dirs`.
#[derive(Debug, Clone)]
struct Row {
    key: FunctionKey,
    direct: u64,
    cumulative: u64,
    total_time: f64,
    cumulative_time: f64,
}

/// `pstats.Stats.strip_dirs`: keys reduced to base file names, rows that then collide
/// summed, in first-seen order.
fn strip_dirs(rows: &[StatRow]) -> Vec<Row> {
    let mut index: HashMap<FunctionKey, usize> = HashMap::new();
    let mut out: Vec<Row> = Vec::new();
    for r in rows {
        let key = FunctionKey { filename: basename(&r.key.filename).to_owned(), ..r.key.clone() };
        match index.get(&key) {
            Some(&i) => {
                let o = &mut out[i];
                o.direct += r.direct;
                o.cumulative += r.cumulative;
                o.total_time += r.total_time;
                o.cumulative_time += r.cumulative_time;
            }
            None => {
                index.insert(key.clone(), out.len());
                out.push(Row {
                    key,
                    direct: r.direct,
                    cumulative: r.cumulative,
                    total_time: r.total_time,
                    cumulative_time: r.cumulative_time,
                });
            }
        }
    }
    out
}

fn best_unit(max: f64) -> (&'static str, f64) {
    if max >= 1.0 {
        ("s", 1.0)
    } else if max >= 0.001 {
        ("ms", 1000.0)
    } else {
        ("μs", 1_000_000.0)
    }
}

/// `filename:funcname`, direct and cumulative samples.
type Merged = (String, u64, u64);

/// CPython's "Summary of Interesting Functions": rows merged on `filename:funcname` (split
/// back at the last `:`, as CPython does), top three by three measures.
fn write_summary(rows: &[Row], total: u64, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "\nSummary of Interesting Functions:")?;
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut agg: Vec<Merged> = Vec::new();
    for r in rows {
        let q = format!("{}:{}", r.key.filename, r.key.funcname);
        match index.get(&q) {
            Some(&i) => {
                agg[i].1 += r.direct;
                agg[i].2 += r.cumulative;
            }
            None => {
                index.insert(q.clone(), agg.len());
                agg.push((q, r.direct, r.cumulative));
            }
        }
    }
    let name = |q: &str| {
        let (file, func) = q.rsplit_once(':').unwrap_or(("", q));
        format!("{file}:({func})")
    };
    let pct = |n: u64| if total > 0 { n as f64 / total as f64 * 100.0 } else { 0.0 };
    let top = |out: &mut dyn Write,
               title: &str,
               key: &dyn Fn(&Merged) -> f64,
               line: &dyn Fn(&Merged) -> Option<String>|
     -> io::Result<()> {
        writeln!(out, "\n{title}:")?;
        let mut sorted: Vec<&Merged> = agg.iter().collect();
        sorted.sort_by(|a, b| key(b).partial_cmp(&key(a)).unwrap_or(std::cmp::Ordering::Equal));
        for s in sorted.into_iter().take(3) {
            if let Some(l) = line(s) {
                writeln!(out, "  {l}")?;
            }
        }
        Ok(())
    };
    top(
        out,
        "Functions with Highest Direct/Cumulative Ratio (Hot Spots)",
        &|a| if a.2 > 0 { a.1 as f64 / a.2 as f64 } else { 0.0 },
        &|a| {
            (a.1 > 0 && a.2 > 0).then(|| {
                format!(
                    "{:.3} direct/cumulative ratio, {:.1}% direct samples: {}",
                    a.1 as f64 / a.2 as f64,
                    pct(a.1),
                    name(&a.0)
                )
            })
        },
    )?;
    top(out, "Functions with Highest Call Frequency (Indirect Calls)", &|a| a.2 as f64 - a.1 as f64, &|a| {
        (a.2 > a.1)
            .then(|| format!("{} indirect calls, {:.1}% total stack presence: {}", a.2 - a.1, pct(a.2), name(&a.0)))
    })?;
    top(
        out,
        "Functions with Highest Call Magnification (Cumulative/Direct)",
        &|a| if a.1 > 0 { a.2 as f64 / a.1 as f64 } else { 0.0 },
        &|a| {
            (a.1 > 0 && a.2 > a.1).then(|| {
                format!(
                    "{:.1}x call magnification, {} indirect calls from {} direct: {}",
                    a.2 as f64 / a.1 as f64,
                    a.2 - a.1,
                    a.1,
                    name(&a.0)
                )
            })
        },
    )
}

/// Python's `str()` of a `(filename, lineno, funcname)` tuple, the key of `--sort name`.
fn py_repr_key(k: &FunctionKey) -> String {
    format!("({}, {}, {})", crate::pyfmt::str_repr(&k.filename), k.lineno, crate::pyfmt::str_repr(&k.funcname))
}
