//! `--to heatmap -o DIR`: samples per source line, as CPython's `replay --heatmap` counts them —
//! an `index.html` ranking the source files by samples, and a page per file showing each
//! line's samples over its source.
//!
//! What is counted (CPython's `HeatmapCollector`): for each sample, every line its stack passes
//! through counts once in that line's *total* (a recursive function's line once a sample, not
//! once a frame), and the innermost frame's line counts in its *self*. Frames without a real
//! file are left out — an empty name, one starting with `<` or `[` (`<GC>`, `<frozen ...>`,
//! `[native]`), `__init__` at line 0 — and so are the files `~`, `...` and `.` and lines below
//! 0. A frame's line is its first line (0 without a location). Native profiles have lines where
//! the symboliser found them in DWARF; MOJO files have Austin's.
//!
//! Each page embeds its numbers (`<script id="profile-data">`):
//!
//! ```text
//! index.html:  {"format": "tachyon-heatmap-index", "version": 1, "samples": 8142,
//!               "files": [{"file": "/app/main.py", "page": "file-1.html", "total": 4074,
//!                          "self": 115, "lines": 7, "max_total": 1007, "max_self": 2}, ...]}
//! file-1.html: {"format": "tachyon-heatmap-file", "version": 1, "file": "/app/main.py",
//!               "source": "/src/app/main.py" or null, "total": 4074, "self": 115,
//!               "lines": [[12, 3, 40], ...]}                 line, self, total; by line
//! ```
//!
//! Sources are read from the paths the profile names, each `--source-root OLD=NEW` replacing a
//! leading `OLD` with `NEW` (the first that matches); a file that cannot be read gets a page
//! saying so, with its sampled lines listed without their text.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::hash::{IdMap, StringIndex};
use crate::model::{extract_lineno, Call, Collector, FrameTable, SourceInfo};

/// A frame that counts for no line.
const NO_LINE: u32 = u32::MAX;
/// A frame not looked at yet.
const UNSEEN: u32 = u32::MAX - 1;

/// Samples per source line, collected from the hub.
#[derive(Debug, Default)]
pub struct LineCounts {
    /// Per frame id: its line here, [`NO_LINE`] or [`UNSEEN`].
    line_of_frame: Vec<u32>,
    files: StringIndex,
    /// Per line here: (file, line number), samples through it, samples in it.
    lines: Vec<(u32, i32)>,
    index: IdMap<(u32, i32), u32>,
    total: Vec<u64>,
    own: Vec<u64>,
    /// Per line, the call that last counted it (each counts once a sample).
    seen: Vec<u64>,
    call: u64,
    samples: u64,
}

impl LineCounts {
    fn line(&mut self, frames: &FrameTable, id: u32) -> u32 {
        if self.line_of_frame.len() <= id as usize {
            self.line_of_frame.resize(frames.frames.len().max(id as usize + 1), UNSEEN);
        }
        if self.line_of_frame[id as usize] != UNSEEN {
            return self.line_of_frame[id as usize];
        }
        let frame = frames.frame(id);
        let (file, line) = (frame.filename.as_str(), extract_lineno(frame.location));
        let real = !(file.is_empty()
            || file.starts_with('<')
            || file.starts_with('[')
            || (file == "__init__" && line == 0)
            || matches!(file, "~" | "..." | ".")
            || line < 0);
        let l = if real {
            let f = self.files.id(file);
            let next = self.lines.len() as u32;
            let l = *self.index.entry((f, line)).or_insert(next);
            if l == next {
                self.lines.push((f, line));
                self.total.push(0);
                self.own.push(0);
                self.seen.push(0);
            }
            l
        } else {
            NO_LINE
        };
        self.line_of_frame[id as usize] = l;
        l
    }
}

impl Collector for LineCounts {
    fn collect(&mut self, frames: &FrameTable, call: &Call<'_>) {
        if call.stack.is_empty() {
            return;
        }
        let n = call.samples();
        self.samples += n;
        self.call += 1;
        for (depth, &id) in call.stack.iter().enumerate() {
            let l = self.line(frames, id);
            if l == NO_LINE {
                continue;
            }
            let l = l as usize;
            if self.seen[l] != self.call {
                self.seen[l] = self.call;
                self.total[l] += n;
            }
            if depth == 0 {
                self.own[l] += n;
            }
        }
    }
}

/// One source file's numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStats {
    /// The path the profile names.
    pub file: String,
    /// Samples through its lines (a sample once a line).
    pub total: u64,
    /// Samples whose innermost frame is one of its lines.
    pub own: u64,
    /// Lines with samples.
    pub lines: usize,
    /// The most samples through one line, and in one line.
    pub max_total: u64,
    /// The most samples in one line.
    pub max_own: u64,
    /// (line, self, total), by line.
    pub by_line: Vec<(i32, u64, u64)>,
}

impl LineCounts {
    /// Samples with a stack.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The files, most samples first (files of equal samples in the order first met), as
    /// CPython's index ranks them.
    pub fn files(&self) -> Vec<FileStats> {
        let mut files: Vec<FileStats> = self
            .files
            .strings()
            .iter()
            .map(|f| FileStats {
                file: f.clone(),
                total: 0,
                own: 0,
                lines: 0,
                max_total: 0,
                max_own: 0,
                by_line: Vec::new(),
            })
            .collect();
        for (l, &(f, line)) in self.lines.iter().enumerate() {
            let s = &mut files[f as usize];
            s.by_line.push((line, self.own[l], self.total[l]));
        }
        for s in &mut files {
            s.by_line.sort_unstable();
            s.total = s.by_line.iter().map(|l| l.2).sum();
            s.own = s.by_line.iter().map(|l| l.1).sum();
            s.lines = s.by_line.len();
            s.max_total = s.by_line.iter().map(|l| l.2).max().unwrap_or(0);
            s.max_own = s.by_line.iter().map(|l| l.1).max().unwrap_or(0);
        }
        // Stable: equal totals keep the order first met.
        files.sort_by_key(|f| std::cmp::Reverse(f.total));
        files
    }
}

/// Where the source of `file` is read from: `file` with the first matching `OLD` prefix of
/// `roots` replaced by its `NEW`.
pub fn source_path(file: &str, roots: &[(String, String)]) -> PathBuf {
    for (old, new) in roots {
        if let Some(rest) = file.strip_prefix(old.as_str()) {
            return PathBuf::from(format!("{new}{rest}"));
        }
    }
    PathBuf::from(file)
}

const SCRIPT: &str = include_str!("assets/heatmap.js");

/// The page name of the `k`th file (from 1).
fn page_name(k: usize) -> String {
    format!("file-{k}.html")
}

/// A background for a line: CPython's intensity, `log(n + 1) / log(max + 1)`, as a warm colour.
fn heat(n: u64, max: u64) -> String {
    if n == 0 || max == 0 {
        return String::new();
    }
    let t = ((n as f64 + 1.0).ln() / (max as f64 + 1.0).ln()).clamp(0.0, 1.0);
    format!(" style=\"background:hsla({:.0},90%,55%,{:.3})\"", 50.0 - 45.0 * t, 0.12 + 0.6 * t)
}

/// A file's page; `text` is its source read from `looked_at`, if it could be.
fn write_file_page(
    out: &mut dyn Write,
    stats: &FileStats,
    looked_at: &Path,
    text: Option<&str>,
    info: &SourceInfo,
    title: &str,
) -> io::Result<()> {
    let esc = super::escape;
    let mut hottest: Vec<&(i32, u64, u64)> = stats.by_line.iter().collect();
    hottest.sort_by(|a, b| (b.2, b.1).cmp(&(a.2, a.1)).then(a.0.cmp(&b.0)));
    hottest.truncate(10);
    let hot_links: String = hottest
        .iter()
        .map(|&&(line, _, total)| format!(" <a class=\"hot-link\" href=\"#line-{line}\">{line}</a> ({total})"))
        .collect();
    let mut body = format!(
        "<header><h1>{}</h1><span class=\"facts\"><span id=\"total\">{}</span> samples ran through this file, \
         <span id=\"self\">{}</span> in it · {} lines hit · <a href=\"index.html\">all files of {}</a> ({})</span></header>\n\
         <div class=\"controls\"><label>Colour by <select id=\"mode\"><option value=\"total\">samples through the line</option>\
         <option value=\"self\">samples in the line itself</option></select></label>\
         <span>Hottest lines:{hot_links}</span></div>\n",
        esc(&stats.file),
        stats.total,
        stats.own,
        stats.lines,
        esc(title),
        esc(info.kind.title()),
    );
    let by_line: std::collections::HashMap<i32, (u64, u64)> =
        stats.by_line.iter().map(|&(l, s, t)| (l, (s, t))).collect();
    let hot: std::collections::HashSet<i32> = hottest.iter().map(|l| l.0).collect();
    let row = |body: &mut String, line: i32, text: Option<&str>| {
        let (own, total) = by_line.get(&line).copied().unwrap_or((0, 0));
        let show = |n: u64| if n > 0 { n.to_string() } else { String::new() };
        body.push_str(&format!(
            "<tr id=\"line-{line}\" data-self=\"{own}\" data-total=\"{total}\"{}{}><td class=\"n\">{line}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"src\">{}</td></tr>\n",
            if hot.contains(&line) { " class=\"hot\"" } else { "" },
            heat(total, stats.max_total),
            show(own),
            show(total),
            text.map(esc).unwrap_or_default()
        ));
    };
    match text {
        Some(text) => {
            body.push_str("<table class=\"lines\"><thead><tr><th>line</th><th>self</th><th>total</th><th></th></tr></thead><tbody>\n");
            let mut count = 0;
            for (k, text) in text.lines().enumerate() {
                row(&mut body, k as i32 + 1, Some(text));
                count = k as i32 + 1;
            }
            // Lines the profile has beyond the file's end: the file changed since.
            for &(line, _, _) in stats.by_line.iter().filter(|l| l.0 > count || l.0 == 0) {
                row(&mut body, line, None);
            }
        }
        None => {
            body.push_str(&format!(
                "<p class=\"missing\" id=\"missing\">The source of this file was not found at {}. Its sampled \
                 lines are listed without their text; <code>--source-root OLD=NEW</code> tells where the \
                 sources are.</p>\n<table class=\"lines\"><thead><tr><th>line</th><th>self</th><th>total</th><th></th></tr></thead><tbody>\n",
                esc(&looked_at.to_string_lossy())
            ));
            for &(line, _, _) in &stats.by_line {
                row(&mut body, line, None);
            }
        }
    }
    body.push_str("</tbody></table>");
    let mut write_data = |out: &mut dyn Write| -> io::Result<()> {
        out.write_all(b"{\"format\":\"tachyon-heatmap-file\",\"version\":1,\"file\":")?;
        super::write_json_str(out, &stats.file)?;
        out.write_all(b",\"source\":")?;
        match text {
            Some(_) => super::write_json_str(out, &looked_at.to_string_lossy())?,
            None => out.write_all(b"null")?,
        }
        write!(out, ",\"total\":{},\"self\":{},\"lines\":[", stats.total, stats.own)?;
        for (k, (line, own, total)) in stats.by_line.iter().enumerate() {
            write!(out, "{}[{line},{own},{total}]", if k > 0 { "," } else { "" })?;
        }
        out.write_all(b"]}")
    };
    super::write_page(out, &format!("{} — {title}", stats.file), &body, &mut write_data, SCRIPT)
}

/// Writes the heatmap of `counts` into the folder `dir` (created if need be): `index.html`
/// and a page per source file; sources read as [`source_path`] says.
pub fn write_heatmap(
    counts: &LineCounts,
    info: &SourceInfo,
    title: &str,
    roots: &[(String, String)],
    dir: &Path,
) -> io::Result<()> {
    let at = |p: &Path, e: io::Error| crate::output::at(p, e);
    std::fs::create_dir_all(dir).map_err(|e| at(dir, e))?;
    let files = counts.files();
    for (k, stats) in files.iter().enumerate() {
        let path = source_path(&stats.file, roots);
        let text = std::fs::read(&path).ok().map(|b| String::from_utf8_lossy(&b).into_owned());
        let page = dir.join(page_name(k + 1));
        let mut out = BufWriter::new(std::fs::File::create(&page).map_err(|e| at(&page, e))?);
        write_file_page(&mut out, stats, &path, text.as_deref(), info, title)
            .and_then(|()| out.flush())
            .map_err(|e| at(&page, e))?;
    }
    let esc = super::escape;
    let samples = counts.samples();
    let mut body = format!(
        "<header><h1>{}</h1><span class=\"facts\">a {} · <span id=\"total\">{samples}</span> samples · {} source files, \
         by the samples that ran through them</span></header>\n\
         <div class=\"controls\"><input type=\"search\" id=\"filter\" placeholder=\"Filter files\" aria-label=\"Filter files\"></div>\n\
         <table class=\"files\"><thead><tr><th>#</th><th>file</th><th>samples</th><th>of all</th><th>self</th><th>lines hit</th>\
         <th>hottest line</th></tr></thead><tbody>\n",
        esc(title),
        esc(info.kind.title()),
        files.len()
    );
    for (k, s) in files.iter().enumerate() {
        let hottest = s.by_line.iter().max_by(|a, b| a.2.cmp(&b.2).then(b.0.cmp(&a.0))).map_or(0, |l| l.0);
        let share = if samples > 0 { 100.0 * s.total as f64 / samples as f64 } else { 0.0 };
        body.push_str(&format!(
            "<tr{}><td class=\"n\">{}</td><td><a class=\"file\" href=\"{page}\">{}</a></td><td class=\"n\">{}</td>\
             <td class=\"n\">{share:.1}%</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\"><a href=\"{page}#line-{hottest}\">{hottest}</a></td></tr>\n",
            heat(s.total, files[0].total),
            k + 1,
            esc(&s.file),
            s.total,
            s.own,
            s.lines,
            page = page_name(k + 1),
        ));
    }
    body.push_str("</tbody></table>");
    if files.is_empty() {
        body.push_str("\n<p class=\"empty\">No sample ran through a source file.</p>");
    }
    let mut write_data = |out: &mut dyn Write| -> io::Result<()> {
        write!(out, "{{\"format\":\"tachyon-heatmap-index\",\"version\":1,\"samples\":{samples},\"files\":[")?;
        for (k, s) in files.iter().enumerate() {
            out.write_all(if k > 0 { b",{\"file\":" } else { b"{\"file\":" })?;
            super::write_json_str(out, &s.file)?;
            write!(
                out,
                ",\"page\":\"{}\",\"total\":{},\"self\":{},\"lines\":{},\"max_total\":{},\"max_self\":{}}}",
                page_name(k + 1),
                s.total,
                s.own,
                s.lines,
                s.max_total,
                s.max_own
            )?;
        }
        out.write_all(b"]}")
    };
    let index = dir.join("index.html");
    let mut out = BufWriter::new(std::fs::File::create(&index).map_err(|e| at(&index, e))?);
    super::write_page(&mut out, title, &body, &mut write_data, SCRIPT)
        .and_then(|()| out.flush())
        .map_err(|e| at(&index, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{FrameInfo, Times};
    use tachyon_core::tables::Location;

    fn frame(file: &str, line: i32) -> FrameInfo {
        FrameInfo {
            filename: file.into(),
            funcname: "f".into(),
            location: Some(Location { lineno: line, end_lineno: line, col: 0, end_col: 0 }),
            ..FrameInfo::default()
        }
    }

    #[test]
    fn a_line_counts_once_a_sample_and_self_only_innermost() {
        let mut t = FrameTable::default();
        let a10 = t.push(frame("a.py", 10));
        let a20 = t.push(frame("a.py", 20));
        let b5 = t.push(frame("b.py", 5));
        let gc = t.push(frame("<GC>", 0));
        let mut c = LineCounts::default();
        let mut call = |stack: &[u32], n: u64| {
            let call =
                Call { times: Times::Counted(n), interpreter_id: 0, thread_id: 1, status: 0, stack, continued: false };
            c.collect(&t, &call);
        };
        // Innermost first: a:10 recursing through b:5 and a:10 again.
        call(&[a10, b5, a10, a20], 3);
        call(&[gc, a20], 2);
        call(&[], 7);
        let files = c.files();
        assert_eq!(c.samples(), 5);
        assert_eq!(files[0].file, "a.py");
        assert_eq!(files[0].by_line, [(10, 3, 3), (20, 0, 5)]);
        assert_eq!((files[0].total, files[0].own, files[0].lines), (8, 3, 2));
        assert_eq!(files[1].by_line, [(5, 0, 3)]);
        assert_eq!(files.len(), 2, "<GC> is no file");
    }

    #[test]
    fn source_roots_replace_the_first_matching_prefix() {
        let roots = [("/build/".to_owned(), "/src/".to_owned()), ("/".to_owned(), "/other/".to_owned())];
        assert_eq!(source_path("/build/app.py", &roots), PathBuf::from("/src/app.py"));
        assert_eq!(source_path("/usr/x.py", &roots), PathBuf::from("/other/usr/x.py"));
        assert_eq!(source_path("rel.py", &roots), PathBuf::from("rel.py"));
    }
}
