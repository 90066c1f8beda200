//! The committed fixtures: real files written by the real tools and what their readers gave,
//! one folder per set under `qemu-tests/vectors/` (its README says how each was made).

use std::path::{Path, PathBuf};

/// The workspace's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The folder of a fixture set: `vectors("cpython-3.15.2")`, `vectors("pstats")`.
pub fn vectors(set: &str) -> PathBuf {
    root().join("qemu-tests/vectors").join(set)
}

/// The files of `dir` whose names end in `suffix` (`".bin"`, `".input.json"`), sorted;
/// panics when there are none, so that a moved set cannot make a test pass on nothing.
pub fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(suffix)))
        .collect();
    found.sort();
    assert!(!found.is_empty(), "no {suffix} files in {}", dir.display());
    found
}

/// A file's bytes; panics naming the file.
pub fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
