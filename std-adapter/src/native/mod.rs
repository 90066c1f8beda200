//! Native return addresses as frames CPython reads, and named later from the binaries.
//!
//! A runtime that samples native stacks (a `SIGPROF` handler walking frame pointers, say)
//! cannot name them where it samples: looking a symbol up allocates and locks, and static
//! functions are in no table the process keeps. So, as gperftools, perf and async-profiler
//! do, the writer records where each address is — the module, the address as the module was
//! linked, its build id — and [`expand`] names them offline from the ELF symbol table, DWARF
//! (static functions, inlined calls as frames of their own, file and line) and split-off
//! debugging files ([`crate::symbolize`]).
//!
//! # The frame form
//!
//! | field | holds | example |
//! |---|---|---|
//! | function | the module's base name, `+0x`, the linked address in lowercase hex | `libz.so.1.3+0x3f2a` |
//! | file | the module's path, then ` (build id HEX)` when it has one | `/usr/lib/x86_64-linux-gnu/libz.so.1.3 (build id 1f0c…)` |
//! | line | none | |
//!
//! The linked address is the one `addr2line -e MODULE` and `nm` use: for the innermost
//! frame the interrupted instruction, for every caller the return address minus one (an
//! address inside the call, whose line is the call's). An address in no module (code a JIT
//! wrote) is `0xADDRESS` in `[unknown]`. [`parse`] reads a frame back only when both fields
//! agree (the function names the file's base name), so no Python frame is ever taken for one.

pub mod expand;
pub mod modules;

pub use expand::{Named, NamedCounts};
pub use modules::Modules;

use std::fmt::Write as _;

/// The file of an address in no module.
pub const UNKNOWN_MODULE: &str = "[unknown]";

const BUILD_ID_OPEN: &str = " (build id ";

/// A native frame: where its address is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NativeFrame<'a> {
    /// The module's path (as the process mapped it).
    pub module: &'a str,
    /// The module's GNU build id in lowercase hex, if it has one.
    pub build_id: Option<&'a str>,
    /// The address as the module was linked.
    pub address: u64,
}

impl NativeFrame<'_> {
    /// Writes the frame's function and file names (see the module's docs) into the two
    /// strings, replacing what they held.
    pub fn write_names(&self, function: &mut String, file: &mut String) {
        function.clear();
        file.clear();
        let _ = write!(function, "{}+0x{:x}", module_base(self.module), self.address);
        file.push_str(self.module);
        if let Some(id) = self.build_id {
            let _ = write!(file, "{BUILD_ID_OPEN}{id})");
        }
    }
}

/// Writes the names of an address in no module: `0xADDRESS` in [`UNKNOWN_MODULE`].
pub fn write_unknown_names(address: u64, function: &mut String, file: &mut String) {
    function.clear();
    file.clear();
    let _ = write!(function, "0x{address:x}");
    file.push_str(UNKNOWN_MODULE);
}

/// The native frame a function and file name stand for, if they are one (both fields as
/// the module's docs say, agreeing on the module).
pub fn parse<'a>(function: &str, file: &'a str) -> Option<NativeFrame<'a>> {
    let (base, hex) = function.rsplit_once("+0x")?;
    if hex.is_empty() || hex.len() > 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) {
        return None;
    }
    let address = u64::from_str_radix(hex, 16).ok()?;
    let (module, build_id) = match file.strip_suffix(')').and_then(|f| f.rsplit_once(BUILD_ID_OPEN)) {
        Some((module, id))
            if !id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) =>
        {
            (module, Some(id))
        }
        _ => (file, None),
    };
    (!module.is_empty() && module_base(module) == base).then_some(NativeFrame { module, build_id, address })
}

/// The base name of a module's path.
fn module_base(module: &str) -> &str {
    module.rsplit('/').next().unwrap_or(module)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back() {
        let (mut function, mut file) = (String::new(), String::new());
        let frame = NativeFrame { module: "/usr/lib/libz.so.1", build_id: Some("00ff1a"), address: 0x3f2a };
        frame.write_names(&mut function, &mut file);
        assert_eq!((function.as_str(), file.as_str()), ("libz.so.1+0x3f2a", "/usr/lib/libz.so.1 (build id 00ff1a)"));
        assert_eq!(parse(&function, &file), Some(frame));
        let bare = NativeFrame { module: "/opt/app", build_id: None, address: 0 };
        bare.write_names(&mut function, &mut file);
        assert_eq!((function.as_str(), file.as_str()), ("app+0x0", "/opt/app"));
        assert_eq!(parse(&function, &file), Some(bare));
    }

    #[test]
    fn other_frames_are_not_native() {
        for (function, file) in [
            ("work", "main.py"),
            ("libz.so.1+0x3f2a", "/usr/lib/libc.so.6"),
            ("libz.so.1+0x", "/usr/lib/libz.so.1"),
            ("libz.so.1+0x3F2A", "/usr/lib/libz.so.1"),
            ("libz.so.1+0x10000000000000000", "/usr/lib/libz.so.1"),
            ("operator+0x1", "a.cpp"),
            ("0x7f00", UNKNOWN_MODULE),
            ("+0x1", ""),
        ] {
            assert_eq!(parse(function, file), None, "{function} in {file}");
        }
        // A file whose build id part is malformed is a plain path, so the names disagree.
        assert_eq!(parse("libz.so.1+0x1", "/usr/lib/libz.so.1 (build id XY)"), None);
        let (mut function, mut file) = (String::new(), String::new());
        write_unknown_names(0x7f00_0000_1000, &mut function, &mut file);
        assert_eq!((function.as_str(), file.as_str()), ("0x7f0000001000", "[unknown]"));
    }
}
