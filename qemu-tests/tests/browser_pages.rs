//! The pages tachyon writes, used in Debian's headless Chromium (`qemu-tests/browser/check.cjs`,
//! driven by playwright-core from `scripts/viewer-tools.sh`; run in a network namespace of
//! its own, so nothing can be fetched): flame graphs, differential pages (`tachyon diff
//! --html`) and heatmaps (`--to heatmap`, their sources found through `--source-root`) of real
//! profiles of each input format that has stacks — Tachyon (CPython 3.15.2's sampler),
//! gperftools (libprofiler), pprof (go's `-proto` of it), both symbolised from the recorded
//! binaries, and MOJO (Austin).
//!
//! Two kinds of page ([`qemu_tests::recordings`]):
//! - of **committed** recordings (and pages built from them), the page's controls: the deep
//!   recording drawn within a second, a click zooming, the search, the thread selector, red
//!   where frames grew and blue where they shrank (each by construction: the committed
//!   recording against its samples three times over, both ways), the view of what only the
//!   baseline had, the heatmap's filter, sources and recolouring;
//! - of this run's **fresh** recordings, only what holds for every recording: the totals and
//!   per-thread totals shown equal our collapsed stacks of the same input (byte-identical to
//!   CPython's for Tachyon inputs), a heatmap's file pages add up to its index, no error, no
//!   request.
//!
//! A page whose script is broken must fail. (pstats files hold no stacks: `--to
//! flamegraph-html` refuses them, as every stack output does.) Screenshots land in
//! `target/tmp/browser-pages/screenshots/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use qemu_tests::inputs::{convert_file, convert_file_to, profiled_file, root, viewer_tools};
use qemu_tests::recordings;
use serde_json::json;
use tachyon::convert::{convert, Destination, Output};
use tachyon::gperftools::source::GperftoolsSource;
use tachyon::html::diff::{profiled, Profiled};
use tachyon::model::Source;
use tachyon::pprof::source::{PprofSource, SampleIndex};
use tachyon_core::io::Cursor;

/// Most a page may take from navigation until it is drawn (the goal).
const READY_MS: u64 = 1000;

fn output_of(source: &mut impl Source, output: &Output) -> Vec<u8> {
    let mut out = Vec::new();
    convert(source, output, Destination::Stream(&mut out), &mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
    out
}

/// The samples of collapsed stacks, in all and per thread (`tid:` roots; none without them).
fn totals(collapsed: &[u8]) -> (u64, BTreeMap<String, u64>) {
    let mut total = 0;
    let mut threads = BTreeMap::new();
    for line in String::from_utf8_lossy(collapsed).lines() {
        let (stack, n) = line.rsplit_once(' ').expect("count");
        let n: u64 = n.parse().expect("count");
        total += n;
        if let Some(tid) = stack.strip_prefix("tid:").and_then(|s| s.split(';').next()) {
            *threads.entry(tid.to_owned()).or_insert(0) += n;
        }
    }
    (total, threads)
}

/// A gperftools recording's profile, symbolised from its binaries.
fn gperftools_source(dir: &Path) -> GperftoolsSource<Cursor<Vec<u8>>> {
    let mut source = GperftoolsSource::open(Cursor::new(std::fs::read(dir.join("workload.prof")).unwrap())).unwrap();
    source.symbolize(&mut tachyon::symbolize::Symbolizer::new(vec![dir.join("bins")]));
    source
}

/// go pprof's `-proto` of a gperftools recording (its count index), symbolised from the
/// recording's binaries.
fn pprof_source(dir: &Path) -> PprofSource {
    let proto = std::fs::read(dir.join("go-pprof.pb.gz")).unwrap();
    let mut source = PprofSource::open(&proto[..], &SampleIndex::Name("samples".into())).unwrap();
    source.symbolize(&mut tachyon::symbolize::Symbolizer::new(vec![dir.join("bins")]));
    source
}

fn mojo_source(file: &Path) -> tachyon::mojo::source::MojoSource<Cursor<Vec<u8>>> {
    use tachyon::mojo::source::{MojoMetric, MojoSource};
    MojoSource::open(Cursor::new(std::fs::read(file).unwrap()), MojoMetric::Default)
}

/// The collapsed stacks of what `convert_to` converts (it writes them to a file in `work`).
fn convert_to_bytes(convert_to: &mut dyn FnMut(&Output, &Path), work: &Path) -> Vec<u8> {
    let path = work.join("collapsed.txt");
    convert_to(&Output::Collapsed, &path);
    std::fs::read(path).unwrap()
}

/// Runs check.cjs over `manifest`: its report, and whether it passed.
fn check_pages(tools: &Path, work: &Path, name: &str, manifest: &serde_json::Value) -> (String, bool) {
    let path = work.join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_vec_pretty(manifest).unwrap()).unwrap();
    let out = Command::new("unshare")
        .arg("--net")
        .arg("node")
        .arg(root().join("qemu-tests/browser/check.cjs"))
        .arg(tools.join("browser"))
        .arg(&path)
        .output()
        .expect("unshare --net node (util-linux, nodejs)");
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (report, out.status.success())
}

#[test]
fn flame_graph_pages_work_in_chromium() {
    let tools = viewer_tools();
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser-pages");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(work.join("screenshots")).unwrap();
    let mut pages = Vec::new();
    let fresh_gperftools = recordings::gperftools("x86_64", false);
    let gperftools = recordings::gperftools("x86_64", true);
    let real = recordings::fresh("TACHYON_REAL_PROFILES");
    let committed = root().join("qemu-tests/fixtures/real-3.15.2");

    // Flame graphs: `ui` for those of committed recordings, numbers alone for fresh ones.
    let mut add = |name: &str, ui: bool, convert_to: &mut dyn FnMut(&Output) -> Vec<u8>, ready_ms: Option<u64>| {
        let page = work.join(format!("{name}.html"));
        std::fs::write(&page, convert_to(&Output::FlamegraphHtml { title: name.to_owned() })).unwrap();
        let (total, threads) = totals(&convert_to(&Output::Collapsed));
        assert!(total > 0 || !ui, "{name}: no samples");
        pages.push(json!({
            "kind": "flamegraph",
            "page": page,
            "ui": ui,
            "total": total,
            "threads": threads,
            "screenshot": ui.then(|| work.join("screenshots").join(format!("flamegraph-{name}.png"))),
            "ready_ms": ready_ms,
        }));
    };
    let mut tachyon = |name: &str, ui: bool, file: &Path, ready_ms| {
        add(
            name,
            ui,
            &mut |output| convert_file(file, output).unwrap_or_else(|e| panic!("{}: {e}", file.display())),
            ready_ms,
        )
    };
    tachyon("tachyon-deep", true, &recordings::committed("cpython-3.15.2/deep_varied_zstd.pyb"), Some(READY_MS));
    tachyon("tachyon-gil-threads", true, &committed.join("mixed_gil_raw.pyb"), None);
    tachyon("tachyon-deep-fresh", false, &recordings::fresh("TACHYON_LONG_PROFILES").join("deep_varied_raw.pyb"), None);
    tachyon("tachyon-gil-threads-fresh", false, &real.join("mixed_gil_raw.pyb"), None);
    for (name, ui, dir) in [("gperftools", true, &gperftools), ("gperftools-fresh", false, &fresh_gperftools)] {
        add(name, ui, &mut |output| output_of(&mut gperftools_source(dir), output), None);
    }
    add("pprof", true, &mut |output| output_of(&mut pprof_source(&gperftools), output), None);
    let children = |committed: bool| {
        if committed {
            recordings::committed("austin-4.0.0/a40-children.mojo")
        } else {
            recordings::fresh("TACHYON_MOJO_PROFILES").join("a40-children.mojo")
        }
    };
    for (name, ui) in [("mojo", true), ("mojo-fresh", false)] {
        add(name, ui, &mut |output| output_of(&mut mojo_source(&children(ui)), output), None);
    }

    // Differential pages, all of committed recordings: a gperftools profile against another
    // architecture's, Austin 3.7 against Austin 4, and the committed Tachyon recording against
    // its samples three times over (as `tachyon merge` without `--to` lays files end to end)
    // both ways, so that every frame with samples of its own shrank by two thirds on one page
    // (blue) and grew threefold on the other (red), whatever the recording.
    let mut diff = |name: &str, base: Profiled, new: Profiled| {
        let page = work.join(format!("diff-{name}.html"));
        let mut bytes = Vec::new();
        tachyon::html::diff::write_diff(&base, &new, name, &mut bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        std::fs::write(&page, &bytes).unwrap();
        let data = qemu_tests::flame::page_data(&String::from_utf8(bytes).unwrap()).unwrap();
        let threads: BTreeMap<String, u64> = BTreeMap::new();
        pages.push(json!({
            "kind": "diff",
            "page": page,
            "ui": true,
            "total": data["nodes"]["value"][0],
            "threads": threads,
            "elided_total": data["elided"].get("value").map(|v| v[0].clone()),
            "screenshot": work.join("screenshots").join(format!("diff-{name}.png")),
        }));
        data
    };
    let wall = committed.join("mixed_wall_blocking_raw.pyb");
    let thrice = || {
        use tachyon::model::chain::Chain;
        use tachyon::profile::{Profile, SourceOptions};
        let once = profiled_file(&wall).unwrap();
        let mut copies: Vec<Profile> = (0..3).map(|_| Profile::open(&wall).unwrap()).collect();
        let options = SourceOptions { replayable: true, ..SourceOptions::default() };
        let parts = copies.iter_mut().map(|p| p.source(&options).unwrap()).collect();
        let mut chain = Chain::new(parts).unwrap();
        profiled(&mut chain, once.config, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"))
    };
    // (A frame with no samples of its own has no baseline of its own: 0 %, as in CPython.)
    for (name, base, new, want) in [
        ("tachyon-shrank", thrice(), profiled_file(&wall).unwrap(), -200.0 / 3.0),
        ("tachyon-grew", profiled_file(&wall).unwrap(), thrice(), 200.0),
    ] {
        let data = diff(name, base, new);
        let changes = data["diff"]["diff_pct"].as_array().unwrap();
        let own = data["nodes"]["self"].as_array().unwrap();
        assert!(own.iter().any(|n| n.as_u64() > Some(0)), "{name}: frames with samples of their own");
        for (i, (pct, own)) in changes.iter().zip(own).enumerate().skip(1) {
            let (pct, want) = (pct.as_f64().unwrap(), if own.as_u64() > Some(0) { want } else { 0.0 });
            assert!((pct - want).abs() < 0.01, "{name}: frame {i} changed by {pct} %, not {want} %");
        }
    }
    let native = |arch: &str| {
        profiled(&mut gperftools_source(&recordings::gperftools(arch, true)), None, &mut |_| {})
            .unwrap_or_else(|e| panic!("{e}"))
    };
    diff("gperftools", native("s390x"), native("x86_64"));
    let go_proto = |arch: &str| {
        profiled(&mut pprof_source(&recordings::gperftools(arch, true)), None, &mut |_| {})
            .unwrap_or_else(|e| panic!("{e}"))
    };
    diff("pprof", go_proto("s390x"), go_proto("x86_64"));
    let austin = |file: &str| {
        profiled(&mut mojo_source(&recordings::committed(file)), None, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"))
    };
    diff("mojo", austin("austin-3.7.0/threads.mojo"), austin("austin-4.0.0/a40-threads.mojo"));

    // Heatmaps: made once to find where the sources were when the profile was recorded (the
    // recording clone, the recording chroot's /work and /usr/lib/python3.15), then again
    // with --source-root pointing there in this checkout and the oracle's root.
    let oracle = std::env::var_os("TACHYON_ORACLE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/tachyon-oracle"));
    let mut heat = |name: &str, ui: bool, convert_to: &mut dyn FnMut(&Output, &Path)| {
        let dir = work.join(format!("heatmap-{name}"));
        let plain = Output::Heatmap { title: name.to_owned(), source_roots: Vec::new() };
        convert_to(&plain, &dir);
        let index = std::fs::read_to_string(dir.join("index.html")).unwrap();
        let index = qemu_tests::flame::page_data(&index).unwrap();
        let mut roots = vec![
            ("/work/".to_owned(), root().join("qemu-tests/oracle/workloads/").display().to_string() + "/"),
            ("/usr/lib/python3.15/".to_owned(), oracle.join("root-amd64/usr/lib/python3.15/").display().to_string()),
        ];
        for file in index["files"].as_array().unwrap() {
            let file = file["file"].as_str().unwrap();
            if let Some(at) = file.find("/qemu-tests/") {
                let prefix = file[..at + 1].to_owned();
                if !roots.iter().any(|(old, _)| *old == prefix) {
                    roots.insert(0, (prefix, root().display().to_string() + "/"));
                }
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
        convert_to(&Output::Heatmap { title: name.to_owned(), source_roots: roots }, &dir);
        let (total, _) = totals(&convert_to_bytes(convert_to, &work));
        pages.push(json!({
            "kind": "heatmap",
            "page": dir.join("index.html"),
            "ui": ui,
            "total": total,
            // The folder's own pages, counted from the folder: the index must link each.
            "pages": std::fs::read_dir(&dir)
                .unwrap()
                .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("file-"))
                .count(),
            "sources": 2,
            "screenshot": ui.then(|| work.join("screenshots").join(format!("heatmap-{name}.png"))),
            "file_screenshot": ui.then(|| work.join("screenshots").join(format!("heatmap-{name}-file.png"))),
        }));
    };
    for (name, ui, file) in
        [("tachyon", true, wall.clone()), ("tachyon-fresh", false, real.join("mixed_wall_blocking_raw.pyb"))]
    {
        heat(name, ui, &mut |output, dir| {
            convert_file_to(&file, output, Destination::File(dir)).unwrap();
        });
    }
    heat("gperftools", true, &mut |output, dir| {
        convert(&mut gperftools_source(&gperftools), output, Destination::File(dir), &mut |_| {}).unwrap();
    });
    heat("pprof", true, &mut |output, dir| {
        convert(&mut pprof_source(&gperftools), output, Destination::File(dir), &mut |_| {}).unwrap();
    });
    heat("mojo", true, &mut |output, dir| {
        let file = recordings::committed("austin-4.0.0/a40-threads.mojo");
        convert(&mut mojo_source(&file), output, Destination::File(dir), &mut |_| {}).unwrap();
    });

    let (report, passed) = check_pages(&tools, &work, "pages", &json!(pages));
    eprint!("{report}");
    assert!(passed, "the pages failed in Chromium:\n{report}");
    assert_eq!(report.lines().filter(|l| l.starts_with("ok ")).count(), pages.len(), "{report}");

    // The same check fails on a page whose script throws.
    let good = pages[1]["page"].as_str().unwrap().to_owned();
    let broken = work.join("broken.html");
    let html = std::fs::read_to_string(&good).unwrap();
    let sabotaged = html.replacen("'use strict';", "'use strict'; throw new Error('broken on purpose');", 1);
    assert_ne!(html, sabotaged, "the page's script starts with 'use strict'");
    std::fs::write(&broken, sabotaged).unwrap();
    let mut entry = pages[1].clone();
    entry["page"] = json!(broken);
    entry["screenshot"] = json!(null);
    let (report, passed) = check_pages(&tools, &work, "broken", &json!([entry]));
    assert!(!passed && report.contains("broken on purpose"), "a broken page passed:\n{report}");
}
