//! pstats: a large file against Python's own `pstats`.

use std::path::{Path, PathBuf};

use super::runner::*;
use tachyon_test_kit::fixtures::root;

/// A pstats file of at least `functions` functions made by our writer from a real cProfile
/// file: its entries copied under new directories (`copyN/`), callers pointing into the same
/// copy, until there are enough.
pub(super) fn big_pstats(real: &Path, out: &Path, functions: usize) -> usize {
    use tachyon::pstats::{load, write, Entry, Key, Name, NameId, Stats};
    let stats = load(&std::fs::read(real).unwrap()).unwrap();
    let mut big = Stats { names: Vec::new(), entries: Vec::new(), sampled: false, total_tt: None };
    let mut ids: std::collections::HashMap<String, NameId> = std::collections::HashMap::new();
    let mut intern = |names: &mut Vec<Name>, text: String| {
        *ids.entry(text.clone()).or_insert_with(|| {
            names.push(Name::Str(text.into()));
            NameId(names.len() as u32 - 1)
        })
    };
    let text = |id: NameId| stats.name(id).to_string();
    let mut copy = 0;
    while big.entries.len() < functions {
        // Files under a directory of the copy's; built-ins keep their file "~" and take the
        // copy's number in their names.
        let mut rename = |names: &mut Vec<Name>, k: &Key| {
            let (file, name) = (text(k.filename), text(k.name));
            let (file, name) =
                if file == "~" { (file, format!("{name}#{copy}")) } else { (format!("copy{copy}/{file}"), name) };
            Key { filename: intern(names, file), line: k.line, name: intern(names, name) }
        };
        for e in &stats.entries {
            let key = rename(&mut big.names, &e.key);
            let callers = e.callers.iter().map(|(k, c)| (rename(&mut big.names, k), c.clone())).collect();
            big.entries.push(Entry { key, callers, ..e.clone() });
        }
        copy += 1;
    }
    let mut bytes = Vec::new();
    write(&big, false, &mut bytes).unwrap();
    std::fs::write(out, bytes).unwrap();
    big.entries.len()
}

/// pstats: printing the cumulative table and drawing the call graph of a large file, beside
/// Python 3.11's pstats and gprof2dot.
pub(super) fn pstats_file(runner: &mut Runner, work: &Path, functions: usize, runs: usize) {
    let recorded = std::env::var_os("TACHYON_PSTATS_PROFILES")
        .map_or_else(|| root().join("target/pstats-profiles"), PathBuf::from);
    let real = recorded.join("c311.pstats");
    assert!(real.exists(), "{}: record it with qemu-tests/oracle/pstats/record.sh", real.display());
    let tools = std::env::var_os("TACHYON_TOOLS_DIR")
        .map_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/tachyon-tools"), PathBuf::from);
    assert!(tools.join("gprof2dot.py").exists(), "run scripts/viewer-tools.sh first (gprof2dot)");
    let big = work.join("big.pstats");
    let n = big_pstats(&real, &big, functions);
    let f = big.display().to_string();
    let bytes = std::fs::metadata(&big).unwrap().len();
    let slow_runs = runs.min(3);
    let (ours_text, theirs_text) = (work.join("ours.pstats.txt"), work.join("theirs.pstats.txt"));
    let (ours_dot, theirs_dot) = (work.join("ours.dot"), work.join("theirs.dot"));
    let python = "/usr/bin/python3.11".to_string();
    let print = "import pstats, sys; pstats.Stats(sys.argv[1], stream=open(sys.argv[2], 'w')).sort_stats('cumulative').print_stats()";
    let ot = runner.median(
        runs,
        &with(
            tachyon_argv(),
            &["convert", &f, "--to", "pstats-text", "--sort", "cumulative", "-o", ours_text.to_str().unwrap()],
        ),
        Some(&ours_text),
    );
    let tt = runner.median(
        slow_runs,
        &[python.clone(), "-c".into(), print.into(), f.clone(), theirs_text.display().to_string()],
        Some(&theirs_text),
    );
    let od = runner.median(
        runs,
        &with(tachyon_argv(), &["convert", &f, "--to", "dot", "-o", ours_dot.to_str().unwrap()]),
        Some(&ours_dot),
    );
    let td = runner.median(
        slow_runs,
        &[
            python,
            tools.join("gprof2dot.py").display().to_string(),
            "-f".into(),
            "pstats".into(),
            f.clone(),
            "-o".into(),
            theirs_dot.display().to_string(),
        ],
        Some(&theirs_dot),
    );
    let same_text = std::fs::read(&ours_text).unwrap() == std::fs::read(&theirs_text).unwrap();
    let same_dot = std::fs::read(&ours_dot).unwrap() == std::fs::read(&theirs_dot).unwrap();
    assert!(same_text && same_dot, "pstats outputs differ (text {same_text}, dot {same_dot})");
    println!("| file | functions | bytes | command | wall | peak RSS | ÷ ours | same output |");
    println!("|---|---|---|---|---|---|---|---|");
    let row = |label: &str, m: &Measured, ours: &Measured| {
        println!(
            "| big.pstats | {n} | {bytes} | {label} | {} | {} | {:.1}× | yes |",
            ms(m),
            mb(m.rss_kb),
            m.seconds / ours.seconds
        );
    };
    row("`tachyon convert --to pstats-text --sort cumulative`", &ot, &ot);
    row("Python 3.11 `Stats(f).sort_stats('cumulative').print_stats()`", &tt, &ot);
    row("`tachyon convert --to dot`", &od, &od);
    row("`gprof2dot -f pstats` (Python 3.11)", &td, &od);
    println!();
}
