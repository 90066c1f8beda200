//! The marshal decoder on real pstats files and on hostile input.
//!
//! The files are the shared pstats set's (`qemu-tests/vectors/pstats`): written by Python
//! 3.11.7 (cProfile, profile) and CPython 3.15.2 (profiling.tracing, profiling.sampling);
//! `*.tree.txt` beside them list every marshal token with its offset, type code, FLAG_REF and
//! reference index as an independent walker over the same bytes saw them.

use tachyon_core::marshal::{Decoder, Encoder, Item, Kind, MarshalError, Open, Rule, Value, FLAG_REF};
use tachyon_test_kit::fixtures;

const FILES: [&str; 4] =
    ["cprofile_py311_simple", "profile_py311_workload", "sampling_py315_workload", "tracing_py315_workload"];

fn data(name: &str) -> Vec<u8> {
    fixtures::read(&fixtures::vectors("pstats").join(name))
}

fn items(bytes: &[u8], depth: usize) -> Result<Vec<Item<'_>>, MarshalError> {
    let mut stack = vec![Open::EMPTY; depth];
    let mut d = Decoder::new(bytes, &mut stack);
    let mut out = Vec::new();
    while let Some(item) = d.next_item()? {
        out.push(item);
    }
    Ok(out)
}

/// (offset, type code, flagged, reference index) of each token of a tree file.
fn tree(name: &str) -> Vec<(usize, u8, bool, Option<u32>)> {
    let text = String::from_utf8(data(&format!("{name}.tree.txt"))).unwrap();
    text.lines()
        .map(|line| {
            let mut words = line.split_whitespace();
            let offset = words.next().unwrap().parse().unwrap();
            let code = words.next().unwrap().as_bytes();
            let reference = line.rsplit_once("[ref#").map(|(_, r)| r.trim_end_matches(']').parse().unwrap());
            (offset, code[0], code.get(1) == Some(&b'*'), reference)
        })
        .collect()
}

#[test]
fn every_token_of_real_files_where_the_walker_saw_it() {
    for name in FILES {
        let bytes = data(&format!("{name}.pstats"));
        let ours: Vec<_> = items(&bytes, 64)
            .unwrap()
            .into_iter()
            .filter(|i| match i.value {
                Value::Close(kind) => kind == Kind::Dict,
                Value::CodeFirstLine(_) => false,
                _ => true,
            })
            .map(|i| (i.offset, bytes[i.offset] & !FLAG_REF, bytes[i.offset] & FLAG_REF != 0, i.reference))
            .collect();
        let expected = tree(name);
        assert_eq!(ours.len(), expected.len(), "{name}: token count");
        for (k, (o, e)) in ours.iter().zip(&expected).enumerate() {
            assert_eq!(o, e, "{name}: token {k}");
        }
    }
}

#[test]
fn code_objects_give_their_first_line() {
    let bytes = data("profile_py311_workload.pstats");
    let lines: Vec<i32> = items(&bytes, 64)
        .unwrap()
        .iter()
        .filter_map(|i| match i.value {
            Value::CodeFirstLine(l) => Some(l),
            _ => None,
        })
        .collect();
    // The module's code object (line 1) holds those of its functions (fib on line 7, as the
    // file's own key ("../scripts/workload.py", 7, "fib") says), which come first.
    assert!(lines.contains(&1) && lines.contains(&7), "{lines:?}");
    assert_eq!(lines.len(), 15, "one per code object: {lines:?}");
}

fn rule(bytes: &[u8], depth: usize) -> Rule {
    items(bytes, depth).map(|_| ()).unwrap_err().rule
}

#[test]
fn hostile_input_is_a_typed_error() {
    // A million nested tuples: refused at the stack's depth, no recursion.
    let deep: Vec<u8> = std::iter::repeat([b')', 1]).take(1_000_000).flatten().chain([b'N']).collect();
    let e = items(&deep, 200).unwrap_err();
    assert_eq!(e, MarshalError { offset: 400, rule: Rule::TooDeep { limit: 200 } });
    // Lengths of 2^31 - 1 and negative ones, with nothing behind them.
    for code in [b'(', b'[', b'<', b'>', b's', b'a', b'u', b't', b'A'] {
        let mut b = vec![code];
        b.extend_from_slice(&0x7fff_ffffu32.to_le_bytes());
        assert_eq!(rule(&b, 8), Rule::BadLength, "{}", code as char);
        let mut b = vec![code];
        b.extend_from_slice(&(-5i32).to_le_bytes());
        assert_eq!(rule(&b, 8), Rule::BadLength, "{} negative", code as char);
    }
    // A long of 2^31 digits, of i32::MIN digits, with a digit of 2^15, unnormalized.
    assert_eq!(rule(b"l\xff\xff\xff\x7f", 8), Rule::BadLength);
    assert_eq!(rule(b"l\x00\x00\x00\x80", 8), Rule::BadLength);
    assert_eq!(rule(b"l\x01\x00\x00\x00\x00\x80", 8), Rule::DigitOutOfRange);
    assert_eq!(rule(b"l\x02\x00\x00\x00\x01\x00\x00\x00", 8), Rule::UnnormalizedLong);
    // References: forward, to itself (the tuple being read), to an enclosing dict.
    assert_eq!(rule(b"r\x00\x00\x00\x00", 8), Rule::RefOutOfRange { index: 0 });
    assert_eq!(rule(b"\xa9\x01r\x00\x00\x00\x00", 8), Rule::RefToUnfinished { index: 0 });
    assert_eq!(rule(b"\xfbr\x00\x00\x00\x00N0", 8), Rule::RefToUnfinished { index: 0 });
    // NULL as a dict value, in a tuple, at the top; an unknown code; nothing at all.
    assert_eq!(rule(b"{N0", 8), Rule::Null);
    assert_eq!(rule(b")\x010", 8), Rule::Null);
    assert_eq!(rule(b"0", 8), Rule::Null);
    assert_eq!(rule(b"Q", 8), Rule::UnknownType(b'Q'));
    assert_eq!(rule(b"", 8), Rule::UnexpectedEnd);
}

#[test]
fn references_to_finished_objects_resolve() {
    // (t1 := ("a",)) flagged, then a reference to it: both fine.
    let b = b")\x02\xa9\x01\xfa\x01ar\x00\x00\x00\x00";
    let got = items(b, 8).unwrap();
    assert!(matches!(got.last().unwrap().value, Value::Close(Kind::Tuple)));
    assert!(got.iter().any(|i| i.value == Value::Ref(0)));
}

#[test]
#[cfg_attr(
    target_endian = "big",
    ignore = "marshal is little-endian on every host, read byte by byte: run on the host (10 s under qemu-s390x)"
)]
fn truncations_and_flips_never_panic() {
    for name in FILES {
        let bytes = data(&format!("{name}.pstats"));
        // About 1,500 cuts and flips per file.
        let step = (bytes.len() / 1500).max(1);
        for cut in (0..bytes.len()).step_by(step) {
            assert!(items(&bytes[..cut], 64).is_err(), "{name} cut at {cut} decoded whole");
        }
        for at in (0..bytes.len()).step_by(step) {
            let mut b = bytes.clone();
            b[at] ^= 0xff;
            let _ = items(&b, 64);
        }
    }
}

#[test]
fn the_encoder_writes_what_the_decoder_reads() {
    let mut buf = [0u8; 256];
    let mut e = Encoder::new(tachyon_core::io::Cursor::new(&mut buf[..]));
    e.dict().unwrap();
    e.tuple(3).unwrap();
    e.str(b"f\xc3\xa9.py").unwrap();
    e.int(7).unwrap();
    e.str(b"main").unwrap();
    e.tuple(2).unwrap();
    e.int(1 << 40).unwrap();
    e.float(0.25).unwrap();
    e.end_dict().unwrap();
    let cursor = e.into_inner();
    let out = cursor.written().to_vec();
    // Python 3.11's marshal.dumps({("fé.py", 7, "main"): (1 << 40, 0.25)}, 4) is
    // b'{\xa9\x03\xf5\x06\x00\x00\x00f\xc3\xa9.py\xe9\x07\x00\x00\x00\xda\x04main\xa9\x02
    // \xec\x03\x00\x00\x00\x00\x00\x00\x00\x00\x04\xe7\x00\x00\x00\x00\x00\x00\xd0?0':
    // the same bytes with FLAG_REF cleared from its type codes (the encoder writes none).
    let want: &[u8] = b"{)\x03u\x06\x00\x00\x00f\xc3\xa9.pyi\x07\x00\x00\x00z\x04main)\x02l\x03\x00\x00\x00\x00\x00\x00\x00\x00\x04g\x00\x00\x00\x00\x00\x00\xd0?0";
    assert_eq!(out, want);
    assert!(items(&out, 8).is_ok());
}
