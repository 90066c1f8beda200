//! Byte-identical writes and identical decodes against every CPython 3.15.2 vector, in both
//! byte orders, compressed and not.

use qemu_tests::{compare_bytes, compare_views, decode_to_json, parse_jsonl, VECTORS};
use tachyon::input::encode_document;
use tachyon_core::{BigEndian, Compression, LittleEndian, NativeEndian};

fn doc(v: &qemu_tests::Vector) -> serde_json::Value {
    serde_json::from_str(v.input).expect("vector input is JSON")
}

#[test]
fn little_endian_writes_equal_cpython_x86_64() {
    let failures: Vec<String> = VECTORS
        .iter()
        .filter_map(|v| {
            let got = encode_document(&doc(v), LittleEndian, None).map_err(|e| format!("{}: {e}", v.name)).ok()?;
            compare_bytes(v.name, &got, v.x86_64).err()
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn big_endian_writes_equal_cpython_s390x() {
    let failures: Vec<String> = VECTORS
        .iter()
        .filter_map(|v| {
            let got = encode_document(&doc(v), BigEndian, None).map_err(|e| format!("{}: {e}", v.name)).ok()?;
            compare_bytes(v.name, &got, v.s390x).err()
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn native_writes_equal_cpython_of_the_same_byte_order() {
    for v in VECTORS {
        let got = encode_document(&doc(v), NativeEndian::default(), None).unwrap();
        let want = if cfg!(target_endian = "big") { v.s390x } else { v.x86_64 };
        compare_bytes(v.name, &got, want).unwrap();
    }
}

#[test]
fn every_vector_decodes_to_cpython_view() {
    let mut failures = Vec::new();
    for v in VECTORS {
        let want = parse_jsonl(v.expected);
        for (arch, file) in [("x86_64", v.x86_64), ("s390x", v.s390x)] {
            let what = format!("{}.{arch}", v.name);
            match decode_to_json(file) {
                Ok(got) => failures.extend(compare_views(&what, &got, &want).err()),
                Err(e) => failures.push(format!("{what}: {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn compression_toggled_round_trips_to_the_same_view() {
    // Each vector written with the other compression setting still decodes to its view.
    for v in VECTORS {
        let want = parse_jsonl(v.expected);
        let d = doc(v);
        let flipped = if d["compression"] == 1 { Compression::None } else { Compression::Zstd };
        for bytes in [
            encode_document(&d, LittleEndian, Some(flipped)).unwrap(),
            encode_document(&d, BigEndian, Some(flipped)).unwrap(),
        ] {
            let mut got = decode_to_json(&bytes).unwrap();
            // The compression field is the one thing that legitimately differs.
            got[0]["compression_type"] = want[0]["compression_type"].clone();
            compare_views(v.name, &got, &want).unwrap();
        }
    }
}
