//! gperftools.

use std::path::{Path, PathBuf};

use tachyon_core::io::Cursor;

use super::runner::*;
use tachyon_test_kit::fixtures::root;

/// Writes `records` records cycling through the real file's (counts and stacks as read), in
/// its slot width and byte order, then libprofiler's trailer and the real maps text.
pub(super) fn big_gperftools(real: &Path, out: &Path, records: usize) {
    use tachyon_core::gperftools::{End, Header, Item, Reader, Writer as GWriter, LARGEST_RECORD_WINDOW};
    let bytes = std::fs::read(real).unwrap();
    let mut window = vec![0u8; LARGEST_RECORD_WINDOW];
    let mut reader = Reader::open(Cursor::new(&bytes[..]), &mut window).unwrap();
    let header: Header = *reader.header();
    let mut read: Vec<(u64, Vec<u64>)> = Vec::new();
    let mut end = None;
    while let Some(item) = reader.next_item().unwrap() {
        match item {
            Item::Record(r) => read.push((r.count, r.pcs.iter().collect())),
            Item::End(e) => end = Some(e),
            Item::ExtraHeaderWord(_) => {}
        }
    }
    let word = reader.word();
    let skip = end.and_then(|e: End| e.text_skip(word)).unwrap() as usize;
    let mut tail = Vec::new();
    let mut rest = reader.into_tail();
    let mut chunk = [0u8; 4096];
    loop {
        let n = rest.read(&mut chunk).unwrap();
        if n == 0 {
            break;
        }
        tail.extend_from_slice(&chunk[..n]);
    }
    let mut staging = vec![0u8; 4096];
    let sink = tachyon::file::create(out).unwrap();
    let mut w = GWriter::with_format(sink, &mut staging, header.word, header.endian, &header).unwrap();
    for (count, pcs) in read.iter().cycle().take(records) {
        w.write_record(*count, pcs).unwrap();
    }
    w.finish(&tail[skip..]).unwrap();
    w.into_inner().0.into_inner().unwrap();
}

pub(super) fn gperftools_profiles(runner: &mut Runner, work: &Path, records: usize, runs: usize) {
    let recorded = std::env::var_os("TACHYON_GPERFTOOLS_PROFILES")
        .map_or_else(|| root().join("target/gperftools-profiles"), PathBuf::from)
        .join("x86_64");
    let real = recorded.join("workload.prof");
    assert!(real.exists(), "{}: record it with qemu-tests/oracle/gperftools/record.sh", real.display());
    let bins = recorded.join("bins");
    let big = work.join("big.prof");
    big_gperftools(&real, &big, records);
    println!(
        "A gperftools CPU profile of {records} records ({} bytes) written by our writer from the real one          libprofiler recorded ({} bytes), symbolised by every tool:
",
        std::fs::metadata(&big).unwrap().len(),
        std::fs::metadata(&real).unwrap().len()
    );
    println!("| file | command | wall | peak RSS | ÷ ours |");
    println!("|---|---|---|---|---|");
    let slow_runs = runs.min(3);
    for file in [&big, &real] {
        let f = file.display().to_string();
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let pb = work.join("out.pb.gz");
        let folded = work.join("out.collapsed");
        let bin_path = bins.display().to_string();
        let ours_pprof = with(
            tachyon_argv(),
            &["convert", "--quiet", &f, "--to", "pprof", "--binary-path", &bin_path, "-o", pb.to_str().unwrap()],
        );
        let ours_collapsed = with(
            tachyon_argv(),
            &[
                "convert",
                "--quiet",
                &f,
                "--to",
                "collapsed",
                "--binary-path",
                &bin_path,
                "-o",
                folded.to_str().unwrap(),
            ],
        );
        let pprof_env = format!("PPROF_BINARY_PATH={bin_path}");
        let go = ["env", &pprof_env, "go", "tool", "pprof", "-raw", &f].map(String::from).to_vec();
        let program = bins.join("workload").display().to_string();
        let perl = ["google-pprof", "--collapsed", &program, &f].map(String::from).to_vec();
        let op = runner.median(runs, &ours_pprof, Some(&pb));
        let oc = runner.median(runs, &ours_collapsed, Some(&folded));
        let g = runner.median(slow_runs, &go, None);
        let p = runner.median(slow_runs, &perl, None);
        let row = |label: &str, m: &Measured, ours: &Measured| {
            println!("| {name} | {label} | {} | {} | {:.1}× |", ms(m), mb(m.rss_kb), m.seconds / ours.seconds);
        };
        row("`tachyon convert --to pprof`", &op, &op);
        row("`go tool pprof -raw`", &g, &op);
        row("`tachyon convert --to collapsed`", &oc, &oc);
        row("google-pprof `--collapsed`", &p, &oc);
        let faster = g.seconds.min(p.seconds);
        println!(
            "| {name} | goal: ≥ 20× the faster real tool ({}) | pprof {:.1}×, collapsed {:.1}× | | |",
            ms(&Measured { seconds: faster, rss_kb: 0 }),
            faster / op.seconds,
            faster / oc.seconds
        );
    }
    println!();
}
