//! `tachyon top`'s live view: the table redrawn every interval in the terminal's alternate
//! screen, with keys to sort, pick a thread, pause, show full paths and quit.
//!
//! Built on crossterm (raw mode, the alternate screen, key events with a timeout, sizes):
//! the table is plain text, which needs no widget library, and crossterm is what ratatui
//! itself draws with. Each refresh reads what changed ([`Follow`]).

use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use crossterm::style::{Attribute, Print, SetAttribute};
use crossterm::terminal::{self, ClearType};
use crossterm::{cursor, execute, queue};

use super::{Counts, Follow, FunctionCounts, SortBy, TopError};
use crate::model::basename;

/// What the view shows; the keys change it.
#[derive(Debug, Clone)]
pub struct View {
    /// Row order.
    pub sort: SortBy,
    /// One thread's samples, or every thread's.
    pub thread: Option<u64>,
    /// Whole file paths instead of base names.
    pub full_paths: bool,
    /// Frozen: the last table stays until unpaused.
    pub paused: bool,
    /// Bold header and key names (off with `NO_COLOR`).
    pub styled: bool,
    /// The span of sample time the window key shows, µs.
    pub span_us: u64,
    /// The last span only, instead of the whole recording.
    pub windowed: bool,
}

/// Restores the terminal however the view ends (an error, a panic unwinding).
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = execute!(io::stdout(), cursor::Show, terminal::LeaveAlternateScreen);
        let _ = terminal::disable_raw_mode();
    }
}

/// Runs the live view of `path` until `q` (or Esc, or Ctrl-C).
pub fn run(path: &Path, interval: Duration, mut view: View) -> Result<(), TopError> {
    let io_error = |e: io::Error| TopError::Stream { path: path.to_owned(), why: format!("the terminal: {e}") };
    // Read once before touching the terminal: a bad input fails as with --once.
    let mut follow = Follow::windowed(path, view.thread, view.span_us);
    let mut counts = follow.refresh()?;
    terminal::enable_raw_mode().map_err(io_error)?;
    let _restore = Restore;
    execute!(io::stdout(), terminal::EnterAlternateScreen, cursor::Hide).map_err(io_error)?;
    let mut threads: Vec<u64> = counts.threads().iter().copied().collect();
    // A read that fails once the view is up (a file replaced as it was read) keeps the last
    // table on the screen, saying why.
    let mut problem: Option<String> = None;
    // Another thread asked for: counted anew (the counts keep one thread's samples).
    let view_span = view.span_us;
    let reread = |follow: &mut Follow, counts: &mut Counts, problem: &mut Option<String>, thread| {
        if follow.thread() != thread {
            *follow = Follow::windowed(path, thread, view_span);
        }
        match follow.refresh() {
            Ok(read) => {
                *counts = read;
                *problem = None;
            }
            Err(e) => *problem = Some(e.to_string()),
        }
    };
    let mut next = Instant::now() + interval;
    loop {
        let recent = if view.windowed { counts.recent() } else { None };
        draw(path, recent.as_ref().unwrap_or(&counts), &view, problem.as_deref()).map_err(io_error)?;
        let wait = next.saturating_duration_since(Instant::now());
        if event::poll(wait).map_err(io_error)? {
            if let Event::Key(key) = event::read().map_err(io_error)? {
                match act(key, &mut view, &threads) {
                    Act::Quit => return Ok(()),
                    Act::Reread => reread(&mut follow, &mut counts, &mut problem, view.thread),
                    Act::Redraw => {}
                }
            }
            continue;
        }
        next = Instant::now() + interval;
        if !view.paused {
            reread(&mut follow, &mut counts, &mut problem, view.thread);
            threads = counts.threads().iter().copied().collect();
        }
    }
}

enum Act {
    Quit,
    Reread,
    Redraw,
}

/// What a key does: `q` quits; `o`, `t`, `n` sort by own, total, name; Tab the next thread
/// (after the last, all again); `a` all threads; `p` or space pauses; `f` full paths; `w`
/// the last span of sample time, or the whole recording again.
fn act(key: KeyEvent, view: &mut View, threads: &[u64]) -> Act {
    if key.kind == KeyEventKind::Release {
        return Act::Redraw;
    }
    match key.code {
        KeyCode::Char('q') | KeyCode::Esc => Act::Quit,
        KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => Act::Quit,
        KeyCode::Char('o') => {
            view.sort = SortBy::Own;
            Act::Redraw
        }
        KeyCode::Char('t') => {
            view.sort = SortBy::Total;
            Act::Redraw
        }
        KeyCode::Char('n') => {
            view.sort = SortBy::Name;
            Act::Redraw
        }
        KeyCode::Tab => {
            view.thread = match view.thread {
                None => threads.first().copied(),
                Some(t) => threads.iter().copied().find(|&next| next > t),
            };
            Act::Reread
        }
        KeyCode::Char('a') => {
            view.thread = None;
            Act::Reread
        }
        KeyCode::Char('p') | KeyCode::Char(' ') => {
            view.paused = !view.paused;
            Act::Redraw
        }
        KeyCode::Char('f') => {
            view.full_paths = !view.full_paths;
            Act::Redraw
        }
        KeyCode::Char('w') => {
            view.windowed = !view.windowed;
            Act::Redraw
        }
        _ => Act::Redraw,
    }
}

/// The screen's lines: a header, the keys (or why the last read failed), the column titles
/// and as many rows as fit, each cut to the width; narrow screens drop the count columns,
/// then the total's share.
pub fn lines(
    path: &Path,
    counts: &Counts,
    view: &View,
    problem: Option<&str>,
    width: usize,
    height: usize,
) -> Vec<String> {
    let thread = view.thread.map_or_else(|| "all".to_owned(), |t| t.to_string());
    let mut out = vec![
        format!(
            "tachyon top {} - {} samples{}, {} threads - thread {thread} - sort {}{}",
            path.display(),
            counts.samples(),
            if view.windowed { format!(" in the last {} s", seconds(view.span_us)) } else { String::new() },
            counts.threads().len(),
            match view.sort {
                SortBy::Own => "own",
                SortBy::Total => "total",
                SortBy::Name => "name",
            },
            if view.paused { " - paused" } else { "" }
        ),
        problem.map_or_else(
            || {
                "q quit  o/t/n sort own/total/name  Tab next thread  a all threads  p pause  f full paths  w window"
                    .to_owned()
            },
            |why| format!("reading again failed, the last table shown: {why}"),
        ),
    ];
    let wide = width >= 72;
    let medium = width >= 40;
    out.push(match (wide, medium) {
        (true, _) => format!("{:>7} {:>7} {:>9} {:>9}  Function (file:line)", "%Own", "%Total", "Own", "Total"),
        (false, true) => format!("{:>7} {:>7}  Function (file:line)", "%Own", "%Total"),
        _ => format!("{:>7}  Function", "%Own"),
    });
    let percent = |n: u64| if counts.samples() > 0 { n as f64 * 100.0 / counts.samples() as f64 } else { 0.0 };
    let rows = height.saturating_sub(out.len());
    for FunctionCounts { function, file, line, own, total } in counts.table(view.sort).into_iter().take(rows) {
        let file = if view.full_paths { file.as_str() } else { basename(&file) };
        out.push(match (wide, medium) {
            (true, _) => format!(
                "{:>6.2}% {:>6.2}% {own:>9} {total:>9}  {function} ({file}:{line})",
                percent(own),
                percent(total)
            ),
            (false, true) => format!("{:>6.2}% {:>6.2}%  {function} ({file}:{line})", percent(own), percent(total)),
            _ => format!("{:>6.2}%  {function}", percent(own)),
        });
    }
    // A screen of fewer lines than the titles shows what fits.
    out.truncate(height);
    for line in &mut out {
        if let Some((cut, _)) = line.char_indices().nth(width) {
            line.truncate(cut);
        }
    }
    out
}

/// `span_us` in seconds, as short as it reads.
fn seconds(span_us: u64) -> String {
    let s = span_us as f64 / 1e6;
    if s.fract() == 0.0 {
        format!("{s:.0}")
    } else {
        format!("{s}")
    }
}

fn draw(path: &Path, counts: &Counts, view: &View, problem: Option<&str>) -> io::Result<()> {
    let (width, height) = terminal::size().map(|(w, h)| (w as usize, h as usize))?;
    let mut out = io::stdout().lock();
    queue!(out, cursor::MoveTo(0, 0), terminal::Clear(ClearType::All))?;
    for (i, line) in lines(path, counts, view, problem, width, height).iter().enumerate() {
        queue!(out, cursor::MoveTo(0, i as u16))?;
        if view.styled && i == 0 {
            queue!(out, SetAttribute(Attribute::Reverse), Print(line), SetAttribute(Attribute::Reset))?;
        } else if view.styled && i == 2 {
            queue!(out, SetAttribute(Attribute::Bold), Print(line), SetAttribute(Attribute::Reset))?;
        } else {
            queue!(out, Print(line))?;
        }
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_screens_get_fewer_columns_and_no_line_longer_than_the_width() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../qemu-tests/vectors/cpython-3.15.2/08_opcodes.x86_64.bin");
        let mut counts = Counts::new(None);
        counts.add_path(&path).unwrap();
        let view = View {
            sort: SortBy::Own,
            thread: None,
            full_paths: false,
            paused: false,
            styled: false,
            span_us: 10_000_000,
            windowed: false,
        };
        for (width, titles) in [
            (12, "   %Own  Function"),
            (39, "   %Own  Function"),
            (40, "   %Own  %Total  Function (file:line)"),
            (71, "   %Own  %Total  Function (file:line)"),
            (72, "   %Own  %Total       Own     Total  Function (file:line)"),
            (200, "   %Own  %Total       Own     Total  Function (file:line)"),
        ] {
            for height in [0, 3, 4, 50] {
                let shown = lines(&path, &counts, &view, None, width, height);
                assert!(shown.iter().all(|l| l.chars().count() <= width), "{width}: {shown:?}");
                assert_eq!(shown.len(), height.min(3 + counts.table(SortBy::Own).len()), "{height}: {shown:?}");
                if height >= 3 {
                    assert_eq!(shown[2], titles.chars().take(width).collect::<String>(), "{width}");
                }
            }
        }
        let tall = lines(&path, &counts, &view, Some("gone"), 100, 50);
        assert_eq!(tall.len(), 3 + counts.table(SortBy::Own).len());
        assert_eq!(tall[1], "reading again failed, the last table shown: gone");
    }
}
