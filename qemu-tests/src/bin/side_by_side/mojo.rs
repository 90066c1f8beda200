//! MOJO: a large file against austin-python's converters.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tachyon::file::FileSource;
use tachyon_core::io::Cursor;

use super::runner::*;
use tachyon_test_kit::fixtures::root;

/// A MOJO file of at least `samples` samples made by our writer from the real one `real`:
/// its events once (metadata, definitions, samples), then its samples' events again (no
/// definitions: the keys are defined already), cycling, then its closing metadata. Returns
/// the samples written.
pub(super) fn big_mojo(real: &Path, out: &Path, samples: u64) -> u64 {
    use tachyon_core::mojo::{Event, Reader, Writer as MWriter};
    let bytes = std::fs::read(real).unwrap();
    let mut window = vec![0u8; 1 << 20];
    let mut reader = Reader::open(Cursor::new(&bytes[..]), &mut window).unwrap();
    let version = reader.version();
    let mut all: Vec<Event<Vec<u8>>> = Vec::new();
    while let Some((_, e)) = reader.next_item().unwrap() {
        all.push(e.map(<[u8]>::to_vec));
    }
    // The closing metadata: after the last sample's events.
    let tail_start = all.iter().rposition(|e| !matches!(e, Event::Metadata { .. })).map_or(0, |i| i + 1);
    let first_stack = all.iter().position(|e| matches!(e, Event::Stack { .. })).expect("a sample");
    let body: Vec<&Event<Vec<u8>>> = all[first_stack..tail_start]
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::Stack { .. }
                    | Event::FrameRef { .. }
                    | Event::FrameInvalid
                    | Event::FrameKernel { .. }
                    | Event::Gc
                    | Event::Idle
                    | Event::Time(_)
                    | Event::Memory(_)
            )
        })
        .collect();
    let per_cycle = body.iter().filter(|e| matches!(e, Event::Stack { .. })).count() as u64;
    let mut staging = vec![0u8; 1 << 20];
    let mut file = std::io::BufWriter::new(std::fs::File::create(out).unwrap());
    let mut w = MWriter::new(tachyon::memory::IoSink(&mut file), &mut staging, version).unwrap();
    let mut written = per_cycle;
    for e in &all[..tail_start] {
        w.write(&e.as_bytes()).unwrap();
    }
    while written < samples {
        for e in &body {
            w.write(&e.as_bytes()).unwrap();
        }
        written += per_cycle;
    }
    for e in &all[tail_start..] {
        w.write(&e.as_bytes()).unwrap();
    }
    w.finish().unwrap();
    written
}

/// Austin's converters on a large MOJO file beside ours: `mojo2austin` against `--to austin`,
/// `austin2speedscope` (on `mojo2austin`'s text, as Austin's tools chain them) against `--to
/// speedscope` of the MOJO file; the outputs must be identical. Also the real file itself, to
/// show our memory does not follow the samples.
pub(super) fn mojo_profiles(runner: &mut Runner, work: &Path, samples: u64, runs: usize) {
    let recorded =
        std::env::var_os("TACHYON_MOJO_PROFILES").map_or_else(|| root().join("target/mojo-profiles"), PathBuf::from);
    let austin = std::env::var_os("TACHYON_AUSTIN_DIR")
        .map_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/tachyon-austin"), PathBuf::from);
    let tool = |name: &str| austin.join("austin-3.7/bin").join(name).display().to_string();
    let slow_runs = runs.min(3);
    println!("| file | samples | bytes | command | wall | peak RSS | ÷ ours | same output |");
    println!("|---|---|---|---|---|---|---|---|");
    for mode in ["wall", "full"] {
        let real = recorded.join(format!("{mode}.mojo"));
        assert!(real.exists(), "{}: record it with qemu-tests/oracle/austin/record.sh", real.display());
        let big = work.join(format!("big-{mode}.mojo"));
        let n = big_mojo(&real, &big, samples);
        for (file, n) in [(&big, n), (&real, 0)] {
            let f = file.display().to_string();
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            let n = if n == 0 {
                tachyon::mojo::info(FileSource::open(file).unwrap(), 0).unwrap()["samples"].as_u64().unwrap()
            } else {
                n
            };
            let bytes = std::fs::metadata(file).unwrap().len();
            let (ours_text, theirs_text) = (work.join("ours.austin"), work.join(format!("{name}.austin")));
            let (ours_json, theirs_json) = (work.join("ours.json"), work.join("theirs.json"));
            let oa = runner.median(
                runs,
                &with(tachyon_argv(), &["convert", "--quiet", &f, "--to", "austin", "-o", ours_text.to_str().unwrap()]),
                Some(&ours_text),
            );
            let ta = runner.median(
                slow_runs,
                &[tool("mojo2austin"), f.clone(), theirs_text.display().to_string()],
                Some(&theirs_text),
            );
            // austin2speedscope names its JSON after its input: ours gets the same name.
            let os = runner.median(
                runs,
                &with(
                    tachyon_argv(),
                    &["convert", "--quiet", &f, "--to", "speedscope", "-o", ours_json.to_str().unwrap()],
                ),
                Some(&ours_json),
            );
            let ts = runner.median(
                slow_runs,
                &[tool("austin2speedscope"), theirs_text.display().to_string(), theirs_json.display().to_string()],
                Some(&theirs_json),
            );
            let same_text = std::fs::read(&ours_text).unwrap() == std::fs::read(&theirs_text).unwrap();
            let ours_doc: Value = serde_json::from_slice(&std::fs::read(&ours_json).unwrap()).unwrap();
            let mut theirs_doc: Value = serde_json::from_slice(&std::fs::read(&theirs_json).unwrap()).unwrap();
            theirs_doc["name"] = ours_doc["name"].clone();
            let same_json = ours_doc == theirs_doc;
            assert!(same_text && same_json, "{name}: outputs differ (text {same_text}, speedscope {same_json})");
            let row = |label: &str, m: &Measured, ours: &Measured| {
                println!(
                    "| {name} | {n} | {bytes} | {label} | {} | {} | {:.1}× | yes |",
                    ms(m),
                    mb(m.rss_kb),
                    m.seconds / ours.seconds
                );
            };
            row("`tachyon convert --to austin`", &oa, &oa);
            row("`mojo2austin`", &ta, &oa);
            row("`tachyon convert --to speedscope`", &os, &os);
            row("`austin2speedscope` (on the text)", &ts, &os);
            row(
                "`mojo2austin` + `austin2speedscope`",
                &Measured { seconds: ta.seconds + ts.seconds, rss_kb: ta.rss_kb.max(ts.rss_kb) },
                &os,
            );
        }
    }
    println!();
}
