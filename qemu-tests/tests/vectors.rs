//! Byte-identical writes and identical decodes against every CPython 3.15.2 vector, in both
//! byte orders, compressed and not.

use qemu_tests::{compare_bytes, compare_views, decode_to_json, parse_jsonl, VECTORS};
use tachyon::tachyon::input::encode_document;
use tachyon_core::{BigEndian, Compression, LittleEndian};

fn doc(v: &qemu_tests::Vector) -> serde_json::Value {
    serde_json::from_str(v.input).expect("vector input is JSON")
}

/// Encodes every vector in byte order `e`; `Err` lists each file that differs from CPython's.
fn writes_equal<E: tachyon_core::Endianity>(
    e: E,
    cpython: fn(&qemu_tests::Vector) -> &'static [u8],
) -> Result<(), String> {
    let failures: Vec<String> = VECTORS
        .iter()
        .filter_map(|v| match encode_document(&doc(v), e, None) {
            Ok(got) => compare_bytes(v.name, &got, cpython(v)).err(),
            Err(err) => Some(format!("{}: {err}", v.name)),
        })
        .collect();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

#[test]
fn little_endian_writes_equal_cpython_x86_64() {
    writes_equal(LittleEndian, |v| v.x86_64).unwrap();
}

#[test]
fn big_endian_writes_equal_cpython_s390x() {
    writes_equal(BigEndian, |v| v.s390x).unwrap();
}

#[test]
fn native_writes_equal_cpython_of_the_same_byte_order() {
    for v in VECTORS {
        let got = tachyon::tachyon::input::encode_document_native(&doc(v), None).unwrap();
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

/// Re-packs a 3.15.2 file into the December 2025 design's layout (spec 10.1): u32 sample
/// count at 28, thread count at 32, offsets at 36 and 44, compression at 52, bytes 56–63
/// zero; no stats trailer; footer file size fixed.
fn dec2025_twin(file: &[u8], big: bool) -> Vec<u8> {
    let u32_at = |b: &[u8], at: usize| {
        let w: [u8; 4] = b[at..at + 4].try_into().unwrap();
        if big {
            u32::from_be_bytes(w)
        } else {
            u32::from_le_bytes(w)
        }
    };
    let u64_at = |b: &[u8], at: usize| {
        let w: [u8; 8] = b[at..at + 8].try_into().unwrap();
        if big {
            u64::from_be_bytes(w)
        } else {
            u64::from_le_bytes(w)
        }
    };
    let p32 = |v: u32| if big { v.to_be_bytes() } else { v.to_le_bytes() };
    let p64 = |v: u64| if big { v.to_be_bytes() } else { v.to_le_bytes() };
    let has_trailer = file.len() >= 96 + 56 && &file[file.len() - 48..file.len() - 40] == b"TACHSTAT";
    let body_end = file.len() - 32 - if has_trailer { 56 } else { 0 };
    let mut out = file[..body_end].to_vec();
    let mut h = [0u8; 64];
    h[..28].copy_from_slice(&file[..28]);
    h[28..32].copy_from_slice(&p32(u64_at(file, 28) as u32));
    h[32..36].copy_from_slice(&p32(u32_at(file, 36)));
    h[36..44].copy_from_slice(&p64(u64_at(file, 40)));
    h[44..52].copy_from_slice(&p64(u64_at(file, 48)));
    h[52..56].copy_from_slice(&p32(u32_at(file, 56)));
    out[..64].copy_from_slice(&h);
    out.extend_from_slice(&file[file.len() - 32..file.len() - 24]);
    out.extend_from_slice(&p64(out.len() as u64 + 24));
    out.extend_from_slice(&[0; 16]);
    out
}

#[test]
fn dec2025_layout_twins_decode_to_the_same_samples() {
    for v in VECTORS {
        let want = parse_jsonl(v.expected);
        for (file, big) in [(v.x86_64, false), (v.s390x, true)] {
            let twin = dec2025_twin(file, big);
            let meta = tachyon_core::reader::Metadata::read(&mut tachyon_core::io::Cursor::new(&twin[..])).unwrap();
            assert_eq!(meta.layout, tachyon_core::HeaderLayout::Dec2025, "{}", v.name);
            let got = decode_to_json(&twin).unwrap();
            // The old layout has no mode, features or stats; samples must be identical.
            compare_views(v.name, &got[1..], &want[1..]).unwrap();
            assert_eq!(got[0]["sample_count"], want[0]["sample_count"]);
        }
    }
}

#[test]
fn decompressed_size_is_capped() {
    use tachyon_core::compression::{decompressor_workspace_bytes, workspace_words, Decompressor};
    use tachyon_core::io::Cursor;
    use tachyon_core::storage::StaticReaderStorage;
    let v = VECTORS.iter().find(|v| v.name == "09_zstd").unwrap();
    // Vector 09 has the input of vector 05, whose raw sample region is 114 bytes.
    for (limit, ok) in [(114u64, true), (113, false)] {
        let mut ws = vec![0u64; workspace_words(decompressor_workspace_bytes(21))];
        let mut input = [0u8; 64];
        let mut storage = StaticReaderStorage::<256, 8, 8, 4, 64>::new();
        let dec = Decompressor::new(&mut ws, &mut input, 21).unwrap();
        let mut r = tachyon_core::Reader::open_zstd(Cursor::new(v.x86_64), storage.storage(), dec).unwrap();
        r.set_max_decompressed(limit);
        let result = loop {
            match r.next_sample() {
                Ok(Some(_)) => continue,
                Ok(None) => break Ok(()),
                Err(e) => break Err(e.rule()),
            }
        };
        if ok {
            assert_eq!(result, Ok(()));
        } else {
            assert_eq!(result, Err(Some(tachyon_core::Rule::ZstdTooLarge { limit })));
        }
    }
}
