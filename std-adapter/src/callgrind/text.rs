//! The text every Callgrind file of ours shares: the header and the name compression.

use std::io::{self, Write};

/// The file or name of what has none (an empty name would end the line where the reader
/// wants one), as valgrind names what it cannot place.
pub const UNKNOWN: &str = "???";

/// Numbers for names written once (callgrind's name compression): `(n) name` the first time,
/// `(n)` after; a name is known by its index in the caller's table.
pub struct Names {
    numbers: Vec<u32>,
    next: u32,
}

impl Names {
    /// Numbers for a table of `count` names.
    pub fn new(count: usize) -> Self {
        Names { numbers: vec![0; count], next: 1 }
    }

    /// Writes `tag=` name `index` (`name` is made into text only the first time).
    pub fn write(
        &mut self,
        out: &mut impl Write,
        tag: &str,
        index: usize,
        name: impl std::fmt::Display,
    ) -> io::Result<()> {
        match self.numbers[index] {
            0 => {
                self.numbers[index] = self.next;
                self.next += 1;
                writeln!(out, "{tag}=({}) {}", self.numbers[index], one_line(&name.to_string()))
            }
            n => writeln!(out, "{tag}=({n})"),
        }
    }
}

/// A name as one line of the file: an empty one would end the line where the reader wants a
/// name (`???`, as valgrind names what it cannot place), a line break would end it early.
fn one_line(name: &str) -> std::borrow::Cow<'_, str> {
    if name.is_empty() {
        UNKNOWN.into()
    } else if name.contains(['\n', '\r']) {
        name.replace(['\n', '\r'], " ").into()
    } else {
        name.into()
    }
}

/// The file's first lines: the format, the creator, positions by line, the one event (with
/// its long name where it has one) and its total.
pub fn write_header(out: &mut impl Write, event: &str, long_name: Option<&str>, summary: u64) -> io::Result<()> {
    writeln!(out, "# callgrind format")?;
    writeln!(out, "version: 1")?;
    writeln!(out, "creator: tachyon {}", env!("CARGO_PKG_VERSION"))?;
    writeln!(out, "positions: line")?;
    if let Some(long_name) = long_name {
        writeln!(out, "event: {event} : {long_name}")?;
    }
    writeln!(out, "events: {event}")?;
    writeln!(out, "summary: {summary}")
}
