//! pstats input against Python's own `pstats`: every committed pstats file and every file
//! recorded during the run (`qemu-tests/oracle/pstats/record.sh`, `TACHYON_PSTATS_PROFILES`)
//! printed by Python 3.11 and CPython 3.15.2 (`qemu-tests/oracle/pstats_print.py`) in many
//! sort orders, limits, with and without `strip_dirs`, as `print_stats`, `print_callers` and
//! `print_callees` — and by `tachyon::pstats`: the text must be the same byte for byte, and
//! where Python raises, tachyon must refuse. A file 3.11 cannot load (3.15's sampled marker)
//! is compared with 3.15 alone. Then the re-encoding: `--to pstats` of every file loads in
//! both Pythons and prints the same tables as the original.

use std::path::{Path, PathBuf};
use std::process::Command;

use qemu_tests::inputs::{oracle_ready, root};
use tachyon::pstats::{ctime_line, load, load_for_print, merge, print, write, PrintOptions, Restriction};

const SORTS: [&str; 12] = [
    "",
    "cumulative",
    "tottime",
    "calls,name",
    "nfl",
    "stdname",
    "pcalls",
    "line",
    "file",
    "cu",
    "time,cumtime",
    "nsamples",
];
/// `print_stats(*amount)`'s arguments, as the command reads `--restrict` values (an int, a
/// float, else a pattern), several joined by [`RESTRICTIONS_SEPARATOR`].
const LIMITS: [&str; 8] = ["", "3", "0", "0.25", "0.0", "work", "\\.py\x1f0.5", "2\x1f[a-m]_"];
const RESTRICTIONS_SEPARATOR: char = '\x1f';
const WHATS: [&str; 3] = ["stats", "callers", "callees"];

fn files() -> Vec<PathBuf> {
    let mut files = qemu_tests::inputs::files_in(&root().join("qemu-tests/vectors/pstats"), "pstats");
    let recorded = std::env::var_os("TACHYON_PSTATS_PROFILES").map(PathBuf::from).expect(
        "TACHYON_PSTATS_PROFILES is not set: run `bash scripts/test-all.sh`, or \
         `qemu-tests/oracle/pstats/record.sh DIR` and set it to DIR",
    );
    let fresh = qemu_tests::inputs::files_in(&recorded, "pstats");
    for name in ["c311", "p311", "c311_long", "d311", "m311", "c315", "t315", "s315", "r315"] {
        assert!(fresh.iter().any(|f| f.file_stem().is_some_and(|s| s == name)), "no recorded {name}.pstats");
    }
    files.extend(fresh);
    files
}

struct Variant {
    file: PathBuf,
    sort: &'static str,
    limit: &'static str,
    strip: bool,
    what: &'static str,
}

fn variants(files: &[PathBuf]) -> Vec<Variant> {
    let mut out = Vec::new();
    for file in files {
        for sort in SORTS {
            for limit in LIMITS {
                for strip in [false, true] {
                    for what in WHATS {
                        out.push(Variant { file: file.clone(), sort, limit, strip, what });
                    }
                }
            }
        }
    }
    out
}

/// Has `python` print every variant; returns each one's text.
fn python_prints(python: &[&str], work: &Path, name: &str, variants: &[Variant]) -> Vec<String> {
    let dir = work.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let manifest: String = variants
        .iter()
        .enumerate()
        .map(|(i, v)| {
            format!(
                "{}\t{}\t{}\t{}\t{}\t{}\n",
                v.file.display(),
                v.sort,
                v.limit,
                u8::from(v.strip),
                v.what,
                dir.join(format!("{i}.txt")).display()
            )
        })
        .collect();
    let manifest_path = work.join(format!("{name}.tsv"));
    std::fs::write(&manifest_path, manifest).unwrap();
    let status = Command::new(python[0])
        .args(&python[1..])
        .arg(root().join("qemu-tests/oracle/pstats_print.py"))
        .arg(&manifest_path)
        .status()
        .unwrap();
    assert!(status.success(), "{name}: pstats_print.py failed");
    (0..variants.len()).map(|i| std::fs::read_to_string(dir.join(format!("{i}.txt"))).unwrap()).collect()
}

fn ours(v: &Variant) -> Result<String, String> {
    let bytes = std::fs::read(&v.file).unwrap();
    let o = PrintOptions {
        sort: if v.sort.is_empty() { Vec::new() } else { v.sort.split(',').map(str::to_string).collect() },
        restrictions: v.limit.split(RESTRICTIONS_SEPARATOR).filter(|r| !r.is_empty()).map(Restriction::parse).collect(),
        strip_dirs: v.strip,
        callers: v.what == "callers",
        callees: v.what == "callees",
        files: vec![ctime_line(&v.file)],
    };
    // As the command loads it.
    let stats = load_for_print(&bytes, &o).map_err(|e| e.to_string())?;
    print(&stats, &o).map_err(|e| e.to_string())
}

fn describe(v: &Variant) -> String {
    format!("{} sort={:?} limit={:?} strip={} {}", v.file.display(), v.sort, v.limit, v.strip, v.what)
}

fn python311() -> Vec<&'static str> {
    vec!["/usr/bin/python3.11"]
}

fn oracle() -> Vec<String> {
    vec![root().join("scripts/oracle-python.sh").display().to_string(), "amd64".into()]
}

#[test]
fn pstats_text_is_pythons() {
    oracle_ready();
    let work = root().join("target/pstats-text-test");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let files = files();
    let variants = variants(&files);
    let oracle = oracle();
    let oracle: Vec<&str> = oracle.iter().map(String::as_str).collect();
    let py315 = python_prints(&oracle, &work, "py315", &variants);
    let py311 = python_prints(&python311(), &work, "py311", &variants);
    let (mut compared, mut refused, mut only_315) = (0, 0, 0);
    let mut failures = Vec::new();
    for (i, v) in variants.iter().enumerate() {
        let got = ours(v);
        for (python, text) in [("3.15", &py315[i]), ("3.11", &py311[i])] {
            if text.starts_with("EXCEPTION AT LOAD") && python == "3.11" {
                // 3.11 cannot load 3.15's sampled files; 3.15's reading is the reference.
                let sampled = load(&std::fs::read(&v.file).unwrap()).map(|s| s.sampled).unwrap_or(false);
                if !sampled && got.is_ok() {
                    failures.push(format!("{}: 3.11 cannot load it, tachyon prints it", describe(v)));
                }
                only_315 += 1;
                continue;
            }
            match (&got, text.starts_with("EXCEPTION")) {
                (Err(_), true) => refused += 1,
                (Ok(ours), false) if ours == text => compared += 1,
                (Ok(ours), false) => {
                    let line = ours.lines().zip(text.lines()).position(|(a, b)| a != b).unwrap_or(0);
                    failures.push(format!(
                        "{} vs Python {python}: first difference at line {}:\n  python : {:?}\n  tachyon: {:?}",
                        describe(v),
                        line + 1,
                        text.lines().nth(line).unwrap_or(""),
                        ours.lines().nth(line).unwrap_or("")
                    ))
                }
                (Err(e), false) => failures.push(format!("{} vs Python {python}: tachyon refuses ({e})", describe(v))),
                (Ok(_), true) => {
                    failures.push(format!("{}: Python {python} raises ({}), tachyon prints", describe(v), text.trim()))
                }
            }
        }
    }
    eprintln!(
        "{} files, {} variants: {compared} texts identical, {refused} refused as Python raises, {only_315} only 3.15 loads",
        files.len(),
        variants.len()
    );
    assert!(
        failures.is_empty(),
        "{} differences, the first:\n{}",
        failures.len(),
        failures[..failures.len().min(5)].join("\n")
    );
    assert!(compared > 5000, "only {compared} texts compared");
}

/// `--to pstats` of every file: both Pythons load the re-encoding and print the same tables
/// (the first line, the file's name and time, aside) as for the original; the sampled marker
/// is left out unless asked for, and then 3.15 prints the sampled table.
#[test]
fn reencoded_files_print_as_the_originals() {
    oracle_ready();
    let work = root().join("target/pstats-reencode-test");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let mut originals = Vec::new();
    let mut reencoded = Vec::new();
    for (i, file) in files().into_iter().enumerate() {
        let Ok(stats) = load(&std::fs::read(&file).unwrap()) else { continue };
        for keep in [false, true] {
            let mut out = Vec::new();
            write(&stats, keep, &mut out).unwrap();
            let path = work.join(format!("{i}-{}.pstats", u8::from(keep)));
            std::fs::write(&path, out).unwrap();
            let again = load(&std::fs::read(&path).unwrap()).unwrap();
            assert_eq!(again.sampled, keep && stats.sampled, "{}: marker", file.display());
            assert_eq!(again.entries.len(), stats.entries.len(), "{}: entries", file.display());
            originals.push((file.clone(), stats.sampled, keep));
            reencoded.push(path);
        }
    }
    let variant = |f: &PathBuf, what| Variant { file: f.clone(), sort: "cumulative", limit: "", strip: true, what };
    let mut all = Vec::new();
    for ((f, _, _), r) in originals.iter().zip(&reencoded) {
        for what in WHATS {
            all.push(variant(f, what));
            all.push(variant(r, what));
        }
    }
    let oracle = oracle();
    let oracle: Vec<&str> = oracle.iter().map(String::as_str).collect();
    let mut checked = 0;
    for (python, texts) in [
        ("3.15", python_prints(&oracle, &work, "py315", &all)),
        ("3.11", python_prints(&python311(), &work, "py311", &all)),
    ] {
        for (k, (file, sampled, keep)) in originals.iter().enumerate() {
            for (w, what) in WHATS.iter().enumerate() {
                let j = (k * WHATS.len() + w) * 2;
                let (original, copy) = (&texts[j], &texts[j + 1]);
                let what_file = format!("{} ({what}, marker kept: {keep}) under Python {python}", file.display());
                assert!(
                    !copy.starts_with("EXCEPTION AT LOAD") || (*keep && *sampled && python == "3.11"),
                    "{what_file}: the re-encoding does not load: {copy}"
                );
                if original.starts_with("EXCEPTION") || copy.starts_with("EXCEPTION") {
                    continue;
                }
                if *sampled && !*keep {
                    // Without the marker 3.15 prints call columns instead of sample ones.
                    continue;
                }
                let body = |t: &str| {
                    if *what == "stats" {
                        t.split_once('\n').map(|(_, b)| b.to_string()).unwrap_or_default()
                    } else {
                        t.to_string()
                    }
                };
                assert_eq!(body(copy), body(original), "{what_file}");
                checked += 1;
            }
        }
    }
    assert!(checked > 50, "only {checked} tables compared");
}

/// `tachyon merge A B C`: the sum prints as `pstats.Stats(A, B, C)` prints (Python adds the
/// later files in reverse order, and lists them so in the header), and the merged file, loaded
/// by Python, prints the same table.
#[test]
fn merged_files_print_as_pythons_sum() {
    oracle_ready();
    let work = root().join("target/pstats-merge-test");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let recorded = PathBuf::from(std::env::var_os("TACHYON_PSTATS_PROFILES").expect("TACHYON_PSTATS_PROFILES"));
    let vectors = root().join("qemu-tests/vectors/pstats");
    let groups: Vec<Vec<PathBuf>> = vec![
        vec![recorded.join("c311.pstats"), recorded.join("c311_long.pstats")],
        vec![recorded.join("c311.pstats"), recorded.join("c315.pstats"), recorded.join("t315.pstats")],
        // profile's code-object keys: the same file twice (Python compares code objects by
        // their bytecode, tachyon by name, file and first line; they agree on one file).
        vec![recorded.join("p311.pstats"), recorded.join("p311.pstats")],
        vec![recorded.join("s315.pstats"), recorded.join("r315.pstats")],
        vec![
            vectors.join("cprofile_py311_simple.pstats"),
            vectors.join("contract_float_cc_nc.pstats"),
            vectors.join("contract_int_tt_ct.pstats"),
        ],
    ];
    let mut variants = Vec::new();
    let mut expected_ours = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        let loaded: Vec<_> = group.iter().map(|f| load(&std::fs::read(f).unwrap()).unwrap()).collect();
        let sum = merge(&loaded);
        // The header lists the first file, then the others from the last.
        let mut order = vec![&group[0]];
        order.extend(group[1..].iter().rev());
        let files: Vec<String> = order.iter().map(|f| ctime_line(f)).collect();
        let out = work.join(format!("merged-{g}.pstats"));
        let mut bytes = Vec::new();
        write(&sum, false, &mut bytes).unwrap();
        std::fs::write(&out, bytes).unwrap();
        let joined = PathBuf::from(group.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join("|"));
        for what in WHATS {
            let o = PrintOptions {
                sort: vec!["cumulative".into()],
                restrictions: Vec::new(),
                strip_dirs: false,
                callers: what == "callers",
                callees: what == "callees",
                files: files.clone(),
            };
            expected_ours.push((print(&sum, &o), sum.sampled));
            variants.push(Variant { file: joined.clone(), sort: "cumulative", limit: "", strip: false, what });
            variants.push(Variant { file: out.clone(), sort: "cumulative", limit: "", strip: false, what });
        }
    }
    let oracle = oracle();
    let oracle: Vec<&str> = oracle.iter().map(String::as_str).collect();
    let texts = python_prints(&oracle, &work, "py315", &variants);
    let mut compared = 0;
    for (k, (ours, sampled)) in expected_ours.iter().enumerate() {
        let (python_sum, python_of_file) = (&texts[2 * k], &texts[2 * k + 1]);
        let v = &variants[2 * k];
        let ours = ours.as_ref().unwrap_or_else(|e| panic!("{}: {e}", describe(v)));
        assert!(!python_sum.starts_with("EXCEPTION"), "{}: Python: {python_sum}", describe(v));
        assert_eq!(ours, python_sum, "{}: tachyon's sum vs pstats.Stats(A, B, ...)", describe(v));
        if !*sampled {
            // The merged file holds one file's header; the rest is the same, but for the total
            // time: Python sums a loaded file's own times, and `Stats(A, B)` the files'
            // totals, and floats summed in two orders can round apart in the third decimal.
            let body = |t: &str| t.split_once("\n\n").map(|(_, b)| b.to_string()).unwrap_or_else(|| t.to_string());
            let (file_body, sum_body) = (body(python_of_file), body(python_sum));
            let seconds = |t: &str| -> Option<f64> {
                let line = t.lines().find(|l| l.contains(" function calls "))?;
                line.rsplit_once(" in ")?.1.strip_suffix(" seconds")?.parse().ok()
            };
            let without_total =
                |t: &str| t.lines().filter(|l| !l.contains(" function calls ")).collect::<Vec<_>>().join("\n");
            assert_eq!(
                without_total(&file_body),
                without_total(&sum_body),
                "{}: Python on the merged file",
                describe(v)
            );
            let (a, b) = (seconds(&file_body), seconds(&sum_body));
            assert!(
                matches!((a, b), (Some(a), Some(b)) if (a - b).abs() <= 0.001 + 1e-9) || a == b,
                "{}: Python's total of the merged file {a:?} vs of the sum {b:?}",
                describe(v)
            );
        }
        compared += 1;
    }
    assert_eq!(compared, groups.len() * WHATS.len());
}

/// `--to dot` of every file is what gprof2dot 2025.4.14 (PyPI) writes with `-f pstats` and
/// its defaults — byte for byte, a code object's address aside — run by Python 3.11, or by
/// CPython 3.15.2 for files only 3.15 loads; where gprof2dot fails, tachyon refuses. Graphviz
/// renders every graph.
#[test]
fn dot_is_gprof2dots() {
    oracle_ready();
    let tools = qemu_tests::inputs::viewer_tools();
    let gprof2dot = tools.join("gprof2dot.py");
    let work = root().join("target/pstats-dot-test");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let address = |text: &str| {
        // " at 0x7f1a94a41070," → twelve zero digits, as tachyon writes it.
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(i) = rest.find(" at 0x") {
            let (head, tail) = rest.split_at(i + 6);
            out.push_str(head);
            let digits = tail.bytes().take_while(u8::is_ascii_hexdigit).count();
            out.push_str("000000000000");
            rest = &tail[digits..];
        }
        out.push_str(rest);
        out
    };
    let (mut same, mut refused) = (0, 0);
    for (i, file) in files().iter().enumerate() {
        let bytes = std::fs::read(file).unwrap();
        let Ok(stats) = load(&bytes) else { continue };
        let ours = tachyon::pstats::dot::dot(&stats);
        let theirs = work.join(format!("{i}.gprof2dot.dot"));
        let mut cmd = if stats.sampled {
            let mut c = Command::new(root().join("scripts/oracle-python.sh"));
            c.arg("amd64");
            c
        } else {
            Command::new("/usr/bin/python3.11")
        };
        let status = cmd
            .arg(&gprof2dot)
            .args(["-f", "pstats"])
            .arg(file)
            .arg("-o")
            .arg(&theirs)
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        match (status.success(), ours) {
            (true, Ok(ours)) => {
                let theirs = address(&std::fs::read_to_string(&theirs).unwrap());
                assert_eq!(ours, theirs, "{}: --to dot differs from gprof2dot's", file.display());
                let ours_path = work.join(format!("{i}.dot"));
                std::fs::write(&ours_path, &ours).unwrap();
                let svg = Command::new("dot").arg("-Tsvg").arg(&ours_path).output().unwrap();
                assert!(
                    svg.status.success() && svg.stdout.starts_with(b"<?xml"),
                    "{}: dot cannot render it",
                    file.display()
                );
                same += 1;
            }
            (false, Err(_)) => refused += 1,
            (true, Err(e)) => panic!("{}: gprof2dot draws it, tachyon refuses: {e}", file.display()),
            (false, Ok(_)) => panic!("{}: gprof2dot fails, tachyon draws it", file.display()),
        }
    }
    eprintln!("--to dot: {same} graphs identical to gprof2dot's and rendered, {refused} refused as gprof2dot fails");
    assert!(same >= 20, "only {same} graphs compared");
}

/// `--to dot` of sample inputs: gprof2dot draws a sampled profile from the pstats file
/// CPython's `replay --pstats` makes of it; tachyon's graph of the same profile must be that
/// graph, byte for byte (the profile in the box, the sampler's recording of the pstats
/// workload, and the real profiles of the test run when there).
#[test]
fn dot_of_sample_inputs_is_gprof2dots_of_cpythons_pstats() {
    oracle_ready();
    let gprof2dot = qemu_tests::inputs::viewer_tools().join("gprof2dot.py");
    let work = root().join("target/pstats-dot-samples-test");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let recorded = PathBuf::from(std::env::var_os("TACHYON_PSTATS_PROFILES").expect("TACHYON_PSTATS_PROFILES"));
    let mut inputs = vec![root().join("examples/stdlib_work.pyb"), recorded.join("s315.pyb")];
    if let Some(real) = std::env::var_os("TACHYON_REAL_PROFILES") {
        inputs.extend(qemu_tests::inputs::files_in(Path::new(&real), "pyb"));
    }
    let oracle = root().join("scripts/oracle-python.sh");
    for (i, input) in inputs.iter().enumerate() {
        let pstats = work.join(format!("{i}.pstats"));
        let replay = Command::new(&oracle)
            .args(["amd64", "-m", "profiling.sampling", "replay", "--pstats", "-o"])
            .arg(&pstats)
            .arg(input)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(replay.success(), "{}: CPython's replay --pstats failed", input.display());
        let theirs = work.join(format!("{i}.gprof2dot.dot"));
        let drawn = Command::new(&oracle)
            .arg("amd64")
            .arg(&gprof2dot)
            .args(["-f", "pstats"])
            .arg(&pstats)
            .arg("-o")
            .arg(&theirs)
            .output()
            .unwrap();
        let ours = qemu_tests::inputs::convert_file(input, &tachyon::convert::Output::Dot);
        if !drawn.status.success() {
            // A recording without samples (exception mode in a run where nothing was
            // raised while sampled): CPython's pstats file holds only the sampled marker,
            // pstats cannot load it, so gprof2dot draws nothing, and neither do we.
            let stderr = String::from_utf8_lossy(&drawn.stderr);
            assert!(stderr.contains("Cannot create or construct"), "{}: gprof2dot failed: {stderr}", input.display());
            let why = ours.expect_err("a graph of a profile pstats cannot load");
            assert!(why.contains("no samples"), "{}: {why}", input.display());
            continue;
        }
        let ours = ours.unwrap();
        assert_eq!(
            String::from_utf8(ours).unwrap(),
            std::fs::read_to_string(&theirs).unwrap(),
            "{}: --to dot differs from gprof2dot's graph of CPython's pstats",
            input.display()
        );
    }
}

/// `tachyon merge` of Tachyon files: CPython 3.15.2's `replay --collapsed` of the merged file
/// is the sum of its replays of the inputs (the profile in the box, the pstats workload's
/// recording, and the run's real profiles when there).
#[test]
fn merged_tachyon_files_replay_in_cpython_as_the_sum() {
    oracle_ready();
    let work = root().join("target/merge-tachyon-test");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let recorded = PathBuf::from(std::env::var_os("TACHYON_PSTATS_PROFILES").expect("TACHYON_PSTATS_PROFILES"));
    let mut inputs = vec![root().join("examples/stdlib_work.pyb"), recorded.join("s315.pyb")];
    if let Some(real) = std::env::var_os("TACHYON_REAL_PROFILES") {
        inputs.extend(qemu_tests::inputs::files_in(Path::new(&real), "pyb").into_iter().take(3));
    }
    let merged = work.join("merged.pyb");
    // What `tachyon merge` does with Tachyon files.
    let loaded: Vec<_> = inputs.iter().map(|f| tachyon::tachyon::source::TachyonFile::open(f).unwrap()).collect();
    let mut chain = tachyon::model::chain::Chain::new(loaded).unwrap();
    tachyon::convert::convert(
        &mut chain,
        &tachyon::convert::Output::Tachyon { big_endian: None, compression: None },
        tachyon::convert::Destination::File(&merged),
        &mut |_| {},
    )
    .unwrap();
    let replay = |file: &Path, i: usize| {
        let out = work.join(format!("{i}.collapsed"));
        let ok = Command::new(root().join("scripts/oracle-python.sh"))
            .args(["amd64", "-m", "profiling.sampling", "replay", "--collapsed", "-o"])
            .arg(&out)
            .arg(file)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(ok.success(), "{}: CPython's replay failed", file.display());
        let mut stacks = std::collections::BTreeMap::new();
        for line in std::fs::read_to_string(&out).unwrap().lines() {
            let (stack, n) = line.rsplit_once(' ').unwrap();
            *stacks.entry(stack.to_string()).or_insert(0u64) += n.parse::<u64>().unwrap();
        }
        stacks
    };
    let mut sum = std::collections::BTreeMap::new();
    for (i, input) in inputs.iter().enumerate() {
        for (stack, n) in replay(input, i) {
            *sum.entry(stack).or_insert(0) += n;
        }
    }
    assert_eq!(replay(&merged, inputs.len()), sum, "CPython reads the merged file as other than the sum");
}
