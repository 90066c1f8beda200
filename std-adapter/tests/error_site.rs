//! `ProfileError::site`: a refused file of each format names the offset and the rule, as the
//! Python package's exceptions carry them.

use std::path::{Path, PathBuf};

use tachyon::profile::{ErrorSite, Profile, ProfileError};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Writes `bytes` to a scratch file and reads it through every step a conversion takes;
/// the error it is refused with.
fn refusal(name: &str, bytes: &[u8]) -> ProfileError {
    let dir = root().join("target/tmp/error-site");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    // `verify` reads everything a format has, as a conversion would.
    match Profile::open(&path).and_then(|mut p| p.verify(&mut |_| {}).map(|v| v.samples)) {
        Err(e) => e,
        Ok(n) => panic!("{name}: read {n} samples, expected a refusal"),
    }
}

fn site(offset: u64, rule: &str) -> Option<ErrorSite> {
    Some(ErrorSite { offset: Some(offset), decompressed: false, rule: rule.into() })
}

#[test]
fn a_tachyon_file_names_offset_and_rule() {
    let mut bytes =
        std::fs::read(root().join("qemu-tests/vectors/cpython-3.15.2/01_single_sample.x86_64.bin")).unwrap();
    let e = refusal("short.pyb", &bytes[..40]);
    // Too short for a header: not even recognised as Tachyon, so no site.
    assert!(matches!(e, ProfileError::UnknownFormat { .. }) || e.site().is_some(), "{e}");
    bytes[4..8].copy_from_slice(&9u32.to_le_bytes());
    let e = refusal("version.pyb", &bytes);
    assert_eq!(e.site(), site(4, "UnsupportedVersion"), "{e}");
}

#[test]
fn a_mojo_file_names_offset_and_rule() {
    let bytes = std::fs::read(root().join("qemu-tests/vectors/mojo-austin-3.7/a37_gc_small_py311.mojo")).unwrap();
    let mut bad = bytes.clone();
    // An event id no MOJO version has, right after the header.
    let header = 4; // "MOJ" and the version, then the first event
    bad[header] = 0x7f;
    let e = refusal("event.mojo", &bad);
    let s = e.site().unwrap_or_else(|| panic!("no site: {e}"));
    assert_eq!(s.offset, Some(header as u64), "{e}");
    assert!(!s.rule.is_empty() && s.rule != "Invalid", "{s:?}");
}

#[test]
fn a_pstats_file_names_offset_and_rule() {
    let bytes = std::fs::read(root().join("qemu-tests/vectors/pstats/contract_big_int_calls.pstats")).unwrap();
    let e = refusal("cut.pstats", &bytes[..bytes.len() / 2]);
    // The first string's length runs past the cut: marshal's "bad marshal data" at its
    // length field.
    assert_eq!(e.site(), site(19, "BadLength"), "{e}");
}
