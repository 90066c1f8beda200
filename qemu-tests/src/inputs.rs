//! The files the conversion tests run over (host only: they read the repository's files):
//! the shared vectors in both byte orders, the committed real profiles, those the test
//! command records (`TACHYON_REAL_PROFILES`), and seeded generated streams.

use std::path::{Path, PathBuf};

use tachyon::convert::{convert, Destination, Output};
use tachyon::file::FileSource;
use tachyon::pstats::replay::SortOrder;
use tachyon::tachyon::input::encode_document;
use tachyon::tachyon::source::TachyonSource;
use tachyon::tachyon::storage::{Limits, OwnedReaderStorage};
use tachyon::tachyon::write::reencode;
use tachyon_core::io::Cursor;
use tachyon_core::reader::Metadata;
use tachyon_core::LittleEndian;

pub use tachyon_test_kit::fixtures::root;

/// Files ending in `.ext` in `dir`, sorted; panics if there are none.
pub fn files_in(dir: &Path, ext: &str) -> Vec<PathBuf> {
    tachyon_test_kit::fixtures::files(dir, &format!(".{ext}"))
}

/// Every input; generated streams from `seed` are encoded into `work`.
pub fn inputs(work: &Path, seed: u64) -> Vec<PathBuf> {
    let mut files = files_in(&root().join("qemu-tests/vectors/cpython-3.15.2"), "bin");
    files.extend(files_in(&root().join("qemu-tests/fixtures/real-3.15.2"), "pyb"));
    if let Some(dir) = std::env::var_os("TACHYON_REAL_PROFILES") {
        files.extend(files_in(Path::new(&dir), "pyb"));
    }
    for (name, doc) in crate::gen::corpus(seed) {
        let path = work.join(format!("{name}.bin"));
        std::fs::write(&path, encode_document(&doc, LittleEndian, None).expect("corpus encodes")).expect("write");
        files.push(path);
    }
    files
}

/// Our conversion of `file` into `format`, read as the `tachyon` command reads it (mapped,
/// a zstd region decompressed in a second thread).
pub fn convert_file(file: &Path, format: &Output) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    convert_file_to(file, format, Destination::Stream(&mut out))?;
    Ok(out)
}

/// Our conversion of `file` into `format` at `dest` (a folder for a heatmap), read as
/// [`convert_file`] reads it.
pub fn convert_file_to(file: &Path, format: &Output, dest: Destination<'_>) -> Result<u64, String> {
    let mut src = FileSource::open(file).map_err(|e| e.to_string())?;
    let meta = Metadata::read(&mut src).map_err(|e| e.to_string())?;
    let mut storage = OwnedReaderStorage::for_metadata(&meta, Limits::default()).map_err(|e| e.to_string())?;
    let mut reader = storage.open_file(src).map_err(|e| e.to_string())?;
    convert(&mut TachyonSource::new(&mut reader), format, dest, &mut |_| {}).map_err(|e| e.to_string())
}

/// The call tree of Tachyon `file` (for differential pages), read as [`convert_file`] reads it.
pub fn profiled_file(file: &Path) -> Result<tachyon::html::diff::Profiled, String> {
    let mut src = FileSource::open(file).map_err(|e| e.to_string())?;
    let meta = Metadata::read(&mut src).map_err(|e| e.to_string())?;
    let mut storage = OwnedReaderStorage::for_metadata(&meta, Limits::default()).map_err(|e| e.to_string())?;
    let mut reader = storage.open_file(src).map_err(|e| e.to_string())?;
    tachyon::html::diff::profiled(&mut TachyonSource::new(&mut reader), Some(meta.header.config), &mut |_| {})
        .map_err(|e| e.to_string())
}

/// Panics unless the CPython oracle of `scripts/oracle.sh` is set up.
pub fn oracle_ready() {
    let dir = std::env::var_os("TACHYON_ORACLE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/tachyon-oracle"));
    assert!(dir.join("ready").exists(), "CPython oracle not set up in {}: run scripts/oracle.sh first", dir.display());
}

/// The directory of `scripts/viewer-tools.sh`; panics unless it is set up.
pub fn viewer_tools() -> PathBuf {
    let dir = std::env::var_os("TACHYON_TOOLS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/tachyon-tools"));
    assert!(
        dir.join("ready").exists(),
        "viewer tools not set up in {}: run scripts/viewer-tools.sh first",
        dir.display()
    );
    dir
}

/// `file` re-encoded in its own byte order and compression.
pub fn reencode_file(file: &Path) -> Result<Vec<u8>, String> {
    let bytes = std::fs::read(file).map_err(|e| e.to_string())?;
    let meta = Metadata::read(&mut Cursor::new(&bytes[..])).map_err(|e| e.to_string())?;
    let mut storage = OwnedReaderStorage::for_metadata(&meta, Limits::default()).map_err(|e| e.to_string())?;
    let mut reader = storage.open(Cursor::new(&bytes[..])).map_err(|e| e.to_string())?;
    let sink = tachyon::memory::VecSink::default();
    let sink = if meta.endian == tachyon_core::RunTimeEndian::Big {
        reencode(&mut reader, sink, tachyon_core::BigEndian, None, &mut |_| {})
    } else {
        reencode(&mut reader, sink, LittleEndian, None, &mut |_| {})
    }
    .map_err(|e| e.to_string())?;
    Ok(sink.into_inner())
}

/// The pstats tables `qemu-tests/oracle/cpython_replay.py` has CPython print, by its file
/// name (`text-NAME.txt`): sort order, limit, summary.
pub const TEXT_VARIANTS: [(&str, SortOrder, Option<usize>, bool); 7] = [
    ("default", SortOrder::Nsamples, Some(15), true),
    ("tottime", SortOrder::Tottime, Some(15), true),
    ("cumtime-all", SortOrder::Cumtime, Some(100_000), true),
    ("sample-pct", SortOrder::SamplePct, Some(7), true),
    ("cumul-pct", SortOrder::CumulPct, Some(15), true),
    ("nsamples-cumul", SortOrder::NsamplesCumul, Some(15), false),
    ("name", SortOrder::Name, Some(100_000), true),
];

/// Runs CPython 3.15.2's `replay` in-process (`qemu-tests/oracle/cpython_replay.py`) over
/// each `(input, output directory)`; panics if the driver itself fails.
pub fn cpython_replay(work: &Path, jobs: &[(PathBuf, PathBuf)]) {
    let manifest = work.join("replay.tsv");
    let text: String = jobs.iter().map(|(f, d)| format!("{}\t{}\n", f.display(), d.display())).collect();
    std::fs::write(&manifest, text).unwrap();
    let status = std::process::Command::new(root().join("scripts/oracle-python.sh"))
        .arg("amd64")
        .arg(root().join("qemu-tests/oracle/cpython_replay.py"))
        .arg(&manifest)
        .env("NO_COLOR", "1")
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "CPython replay driver failed");
}

/// Runs CPython 3.15.2's reader (`qemu-tests/oracle/cpython_batch.py dump`) over each
/// `(file, dump)` pair, the manifest written to `work/NAME.tsv`; panics if the driver fails
/// (a file CPython cannot read ends its dump with an error line instead).
pub fn cpython_dump(work: &Path, name: &str, jobs: &[(PathBuf, PathBuf)]) {
    let manifest = work.join(format!("{name}.tsv"));
    let text: String = jobs.iter().map(|(f, d)| format!("{}\t{}\n", f.display(), d.display())).collect();
    std::fs::write(&manifest, text).unwrap();
    let status = std::process::Command::new(root().join("scripts/oracle-python.sh"))
        .arg("amd64")
        .arg(root().join("qemu-tests/oracle/cpython_batch.py"))
        .args(["dump".as_ref(), manifest.as_os_str()])
        .status()
        .unwrap();
    assert!(status.success(), "CPython's dump failed");
}

/// The table in what `replay` printed: from its first line to before "Replayed N samples".
pub fn replay_table(stdout: &str) -> String {
    let start = ["Profile Stats:\n", "No samples were collected."]
        .iter()
        .filter_map(|m| stdout.find(m))
        .min()
        .unwrap_or_else(|| panic!("no table in CPython's output:\n{stdout}"));
    let end = stdout.rfind("Replayed ").expect("CPython's closing line");
    stdout[start..end].to_string()
}

/// The run id in CPython's `--jsonl` output, so that ours can be given the same.
pub fn jsonl_run_id(cpython_jsonl: &str) -> Option<String> {
    cpython_jsonl.split("\"run_id\":\"").nth(1).and_then(|t| t.get(..32)).map(str::to_owned)
}
