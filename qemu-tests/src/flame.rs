//! Our flame graph pages against CPython's: the tree a `--to flamegraph-html` page embeds
//! compared node for node with the tree of CPython's `replay --flamegraph` page, as
//! `qemu-tests/oracle/flame_tree.py` flattens it. Nodes are matched by their path of
//! `(filename, lineno, funcname)` from the root; each must have the same samples, own samples,
//! and per-thread samples and own samples, and neither tree may have a node the other lacks.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

/// Per thread id (as text): samples at or below, own samples.
type PerThread = BTreeMap<String, (u64, u64)>;

/// A node's numbers: samples at or below, own samples, per thread.
type Numbers = (u64, u64, PerThread);

/// Tree nodes keyed by path: each node's key is its parent's key and its function.
#[derive(Default)]
struct Paths {
    ids: HashMap<(u32, String, i64, String), u32>,
    names: Vec<String>,
}

impl Paths {
    fn id(&mut self, parent: u32, file: &str, line: i64, func: &str) -> u32 {
        let next = self.ids.len() as u32 + 1;
        let id = *self.ids.entry((parent, file.to_owned(), line, func.to_owned())).or_insert(next);
        if id == next {
            let above = if parent == 0 { String::new() } else { format!("{};", self.names[parent as usize - 1]) };
            self.names.push(format!("{above}{func} ({file}:{line})"));
        }
        id
    }

    fn name(&self, id: u32) -> &str {
        if id == 0 {
            "(root)"
        } else {
            &self.names[id as usize - 1]
        }
    }
}

/// The JSON a page of ours embeds (`<script id="profile-data" type="application/json">`).
pub fn page_data(html: &str) -> Result<Value, String> {
    const OPEN: &str = "<script id=\"profile-data\" type=\"application/json\">";
    let start = html.find(OPEN).ok_or("no profile-data element")? + OPEN.len();
    let end = start + html[start..].find("</script>").ok_or("profile-data not closed")?;
    serde_json::from_str(&html[start..end]).map_err(|e| format!("profile-data: {e}"))
}

fn num(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// The path numbers of a tree of our page (`columns` holds its `parent` and `func` columns;
/// the page's `strings` and `funcs` name the functions).
fn our_paths(data: &Value, columns: &Value, paths: &mut Paths) -> Vec<u32> {
    let s = data["strings"].as_array().expect("strings");
    let text = |i: &Value| s[num(i) as usize].as_str().expect("string").to_owned();
    let funcs = &data["funcs"];
    let mut ids: Vec<u32> = Vec::new();
    for (i, p) in columns["parent"].as_array().expect("parent").iter().enumerate() {
        let id = match p.as_i64().expect("parent") {
            -1 => 0,
            p => {
                let f = num(&columns["func"][i]) as usize;
                let line = funcs["line"][f].as_i64().expect("line");
                paths.id(ids[p as usize], &text(&funcs["file"][f]), line, &text(&funcs["name"][f]))
            }
        };
        ids.push(id);
    }
    ids
}

/// flame_tree.py's lines of one tree, each with its path number.
fn cpython_rows(lines: &str, paths: &mut Paths) -> Vec<(u32, Value)> {
    let mut rows: Vec<(u32, Value)> = Vec::new();
    for line in lines.lines() {
        let row: Value = serde_json::from_str(line).expect("flame_tree line");
        let id = match row[0].as_i64().expect("parent") {
            -1 => 0,
            p => paths.id(
                rows[p as usize].0,
                row[1].as_str().expect("file"),
                row[2].as_i64().expect("line"),
                row[3].as_str().expect("func"),
            ),
        };
        rows.push((id, row));
    }
    rows
}

/// Our page's tree, by path.
fn ours(data: &Value, paths: &mut Paths) -> (HashMap<u32, Numbers>, Vec<u32>) {
    let nodes = &data["nodes"];
    let ids = our_paths(data, nodes, paths);
    let threads: Vec<String> =
        data["threads"].as_array().expect("threads").iter().map(|t| t.as_str().expect("tid").to_owned()).collect();
    let mut numbers: Vec<Numbers> = Vec::with_capacity(ids.len());
    for i in 0..ids.len() {
        let value = num(&nodes["value"][i]);
        let own = num(&nodes["self"][i]);
        // A node's rows: per thread, its samples and those of the nodes below it the page
        // leaves out; its children's are added below.
        let per_thread: PerThread = match data.get("thread_rows") {
            Some(rows) => rows[i]
                .as_array()
                .expect("thread rows")
                .chunks(3)
                .map(|c| (threads[num(&c[0]) as usize].clone(), (num(&c[1]), num(&c[2]))))
                .collect(),
            None if value > 0 => threads.iter().map(|t| (t.clone(), (value, own))).collect(),
            None => PerThread::new(),
        };
        numbers.push((value, own, per_thread));
    }
    // Children come after their parents: add each node's per-thread samples to its parent's.
    if data.get("thread_rows").is_some() {
        let parent = nodes["parent"].as_array().expect("parent");
        for i in (1..ids.len()).rev() {
            let p = parent[i].as_i64().expect("parent") as usize;
            let child: Vec<(String, u64)> = numbers[i].2.iter().map(|(t, v)| (t.clone(), v.0)).collect();
            for (t, v) in child {
                numbers[p].2.entry(t).or_insert((0, 0)).0 += v;
            }
        }
    }
    let tree = ids.iter().copied().zip(numbers).collect();
    (tree, ids)
}

/// CPython's tree (flame_tree.py's lines), by path; `None` when CPython wrote no page.
fn cpython(lines: &str, paths: &mut Paths) -> Option<HashMap<u32, Numbers>> {
    if lines.trim() == "null" {
        return None;
    }
    let rows = cpython_rows(lines, paths);
    let tree = rows
        .into_iter()
        .map(|(id, row)| {
            let per_thread = row[6]
                .as_object()
                .expect("thread values")
                .iter()
                .map(|(t, v)| (t.clone(), (num(&v[0]), num(&v[1]))))
                .collect();
            (id, (num(&row[4]), num(&row[5]), per_thread))
        })
        .collect();
    Some(tree)
}

/// Compares our page `html` with CPython's flattened tree `cpython_lines`; the number of nodes
/// compared, or what differs (the first few differences).
pub fn compare(html: &str, cpython_lines: &str) -> Result<usize, String> {
    let data = page_data(html)?;
    let mut paths = Paths::default();
    let (mine, ids) = ours(&data, &mut paths);
    let Some(theirs) = cpython(cpython_lines, &mut paths) else {
        // CPython writes no page when it has no function to draw below its root (after making
        // a sole outermost function the root): ours then has no more than that.
        let parents = data["nodes"]["parent"].as_array().expect("parent");
        let children_of = |p: usize| parents.iter().filter(|q| q.as_i64() == Some(p as i64)).count();
        return if children_of(0) == 0 || (children_of(0) == 1 && children_of(1) == 0) {
            Ok(0)
        } else {
            Err(format!("CPython drew no page; ours has {} nodes", ids.len()))
        };
    };
    let mut differences = Vec::new();
    let mut all: Vec<u32> = mine.keys().chain(theirs.keys()).copied().collect();
    all.sort_unstable();
    all.dedup();
    for id in &all {
        match (mine.get(id), theirs.get(id)) {
            (Some(a), Some(b)) if a == b => {}
            (a, b) => differences.push(format!("{}: ours {a:?}, CPython's {b:?}", paths.name(*id))),
        }
    }
    if differences.is_empty() {
        Ok(all.len())
    } else {
        let n = differences.len();
        differences.truncate(5);
        Err(format!("{n} of {} nodes differ, e.g.\n  {}", all.len(), differences.join("\n  ")))
    }
}

/// A node's differential numbers: baseline, baseline_total, diff, diff_pct.
type DiffNumbers = [f64; 4];

const DIFF_FIELDS: [&str; 4] = ["baseline", "baseline_total", "diff", "diff_pct"];

fn float(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Equal as CPython computes them: the same operations in the same order give the same
/// doubles; a last-bit difference is allowed all the same.
fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

/// Compares our differential page `html` with CPython's flattened `--diff-flamegraph` page
/// (`flame_tree.py --diff`): the stats, NEW's tree with every node's numbers (as
/// [`compare`]) and differential numbers, and the tree of elided paths; the number of nodes
/// compared, or what differs. CPython's refusal (`{"error": …}`) is `Err("refused: …")`.
pub fn compare_diff(html: &str, cpython_lines: &str) -> Result<usize, String> {
    let mut lines = cpython_lines.lines();
    let stats: Value = serde_json::from_str(lines.next().ok_or("no lines")?).map_err(|e| e.to_string())?;
    if let Some(e) = stats.get("error") {
        return Err(format!("refused: {e}"));
    }
    if stats.is_null() {
        // CPython drew no page: NEW has no function to draw.
        return compare(html, "null");
    }
    let data = page_data(html)?;
    let mut problems = Vec::new();
    let d = &data["diff"];
    for key in ["baseline_samples", "current_samples", "elided_count"] {
        if d[key].as_u64() != stats[key].as_u64() {
            problems.push(format!("{key}: ours {}, CPython's {}", d[key], stats[key]));
        }
    }
    if !close(float(&d["baseline_scale"]), float(&stats["baseline_scale"])) {
        problems.push(format!("baseline_scale: ours {}, CPython's {}", d["baseline_scale"], stats["baseline_scale"]));
    }
    let rest: Vec<&str> = lines.collect();
    let split = rest.iter().position(|l| *l == "\"elided\"").unwrap_or(rest.len());
    let (current, elided) = (rest[..split].join("\n"), rest.get(split + 1..).map(|l| l.join("\n")));
    // NEW's tree: what the flame graph page must have, and the differential numbers.
    let mut compared = match compare(html, &current) {
        Ok(n) => n,
        Err(e) => {
            problems.push(format!("the new profile's tree: {e}"));
            0
        }
    };
    let mut paths = Paths::default();
    let (_, ids) = ours(&data, &mut paths);
    let mut mine: HashMap<u32, DiffNumbers> = HashMap::new();
    for (i, &id) in ids.iter().enumerate().skip(1) {
        mine.insert(id, DIFF_FIELDS.map(|k| float(&d[k][i])));
    }
    let theirs: HashMap<u32, DiffNumbers> = cpython_rows(&current, &mut paths)
        .into_iter()
        .filter(|(id, _)| *id != 0)
        .map(|(id, row)| (id, [7, 8, 9, 10].map(|k| float(&row[k]))))
        .collect();
    for (id, want) in &theirs {
        match mine.get(id) {
            Some(got) if got.iter().zip(want).all(|(a, b)| close(*a, *b)) => {}
            got => problems.push(format!("{}: ours {got:?}, CPython's {want:?}", paths.name(*id))),
        }
    }
    // The elided paths' tree: value, self and the differential numbers, by path.
    const ELIDED: [&str; 6] = ["value", "self", "baseline", "baseline_total", "diff", "diff_pct"];
    let mine_elided: Option<HashMap<u32, [f64; 6]>> = (!data["elided"].is_null()).then(|| {
        let e = &data["elided"];
        let ids = our_paths(&data, e, &mut paths);
        ids.iter().enumerate().map(|(i, &id)| (id, ELIDED.map(|k| float(&e[k][i])))).collect()
    });
    // The root CPython did not annotate has nulls: ours has zeros.
    let theirs_elided: Option<HashMap<u32, [f64; 6]>> = elided.map(|lines| {
        cpython_rows(&lines, &mut paths)
            .into_iter()
            .map(|(id, row)| (id, [4, 5, 6, 7, 8, 9].map(|k| row[k].as_f64().unwrap_or(0.0))))
            .collect()
    });
    match (&mine_elided, &theirs_elided) {
        (None, None) => {}
        (Some(a), Some(b)) => {
            let mut all: Vec<u32> = a.keys().chain(b.keys()).copied().collect();
            all.sort_unstable();
            all.dedup();
            for id in all {
                match (a.get(&id), b.get(&id)) {
                    // At the root only the samples are compared (CPython annotates a root
                    // that was a function).
                    (Some(x), Some(y)) if id == 0 && close(x[0], y[0]) => {}
                    (Some(x), Some(y)) if x.iter().zip(y).all(|(p, q)| close(*p, *q)) => {}
                    (x, y) => problems.push(format!("elided {}: ours {x:?}, CPython's {y:?}", paths.name(id))),
                }
                compared += 1;
            }
        }
        (a, b) => problems.push(format!(
            "elided tree: ours {}, CPython's {}",
            if a.is_some() { "present" } else { "none" },
            if b.is_some() { "present" } else { "none" }
        )),
    }
    if problems.is_empty() {
        Ok(compared)
    } else {
        let n = problems.len();
        problems.truncate(6);
        Err(format!("{n} differences, e.g.\n  {}", problems.join("\n  ")))
    }
}

/// Compares our heatmap folder `dir` with CPython's numbers (`flame_tree.py --heatmap`): the
/// same source files in the same order, each with the same totals, lines hit, maxima and
/// per-line self and total samples; the number of lines compared, or what differs.
pub fn compare_heatmap(dir: &std::path::Path, cpython_lines: &str) -> Result<usize, String> {
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name)).map_err(|e| format!("{name}: {e}")).and_then(|t| page_data(&t))
    };
    let index = read("index.html")?;
    let files = index["files"].as_array().ok_or("index: no files")?;
    let theirs: Vec<Value> =
        cpython_lines.lines().map(|l| serde_json::from_str(l).map_err(|e| e.to_string())).collect::<Result<_, _>>()?;
    if theirs.first().is_some_and(Value::is_null) {
        return if files.is_empty() {
            Ok(0)
        } else {
            Err(format!("CPython wrote no heatmap; ours has {} files", files.len()))
        };
    }
    let mut problems = Vec::new();
    if files.len() != theirs.len() {
        problems.push(format!("{} files, CPython's {}", files.len(), theirs.len()));
    }
    let mut lines = 0;
    for (k, (ours, cp)) in files.iter().zip(&theirs).enumerate() {
        let name = cp[0].as_str().unwrap_or("?");
        if ours["file"] != cp[0] {
            problems.push(format!("file {}: ours {}, CPython's {}", k + 1, ours["file"], cp[0]));
            continue;
        }
        let fields = [("total", 1), ("self", 2), ("lines", 3), ("max_total", 4), ("max_self", 5)];
        for (field, i) in fields {
            if ours[field] != cp[i] {
                problems.push(format!("{name} {field}: ours {}, CPython's {}", ours[field], cp[i]));
            }
        }
        let page = read(ours["page"].as_str().ok_or("no page")?)?;
        if page["lines"] != cp[6] {
            problems.push(format!("{name}: lines (line, self, total) ours {}, CPython's {}", page["lines"], cp[6]));
        }
        if page["total"] != cp[1] || page["self"] != cp[2] {
            problems.push(format!("{name}: the page's totals differ from the index's"));
        }
        lines += cp[6].as_array().map_or(0, Vec::len);
    }
    if problems.is_empty() {
        Ok(lines)
    } else {
        let n = problems.len();
        problems.truncate(6);
        Err(format!("{n} differences, e.g.\n  {}", problems.join("\n  ")))
    }
}
