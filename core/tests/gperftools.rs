//! The gperftools reader and writer on real libprofiler 2.10 files (x86_64, i386, s390x) and
//! their one-change variants, against what the real readers printed for them
//! (`qemu-tests/vectors/gperftools-2.10/`, see its README): google-pprof 2.10's sample
//! totals and go pprof's samples; every file re-encodes to the same bytes; every truncation
//! is an error or a result, never a panic.

use tachyon_test_kit::Broken;

use std::collections::BTreeMap;

#[path = "../../qemu-tests/src/gperftools_oracle.rs"]
mod oracle;
use oracle::{go_samples, perl_total};

use tachyon_core::endian::Endianity;
use tachyon_core::gperftools::{
    End, Item, Quirks, ReadError, Reader, Rule, RunTimeWord, Word, Word32, Word64, WriteError, Writer,
    LARGEST_RECORD_WINDOW,
};
use tachyon_core::io::{Cursor, CursorError};
use tachyon_core::{BigEndian, LittleEndian, RunTimeEndian};

macro_rules! vector {
    ($path:literal) => {
        ($path, include_bytes!(concat!("../../qemu-tests/vectors/gperftools-2.10/", $path)) as &[u8])
    };
}

const REAL: [(&str, &[u8]); 3] = [
    vector!("x86_64-le64-gperftools2.10/burn-x86_64.prof"),
    vector!("i386-le32-gperftools2.10/burn-i386.prof"),
    vector!("s390x-be64-gperftools2.10-qemu/burn-s390x.prof"),
];

/// go pprof's `-raw -symbolize=none` output for each real file.
const GO_RAW: [&str; 3] = [
    include_str!("../../qemu-tests/vectors/gperftools-2.10/x86_64-le64-gperftools2.10/go-pprof.raw.txt"),
    include_str!("../../qemu-tests/vectors/gperftools-2.10/i386-le32-gperftools2.10/go-pprof.raw.txt"),
    include_str!("../../qemu-tests/vectors/gperftools-2.10/s390x-be64-gperftools2.10-qemu/go-pprof.raw.txt"),
];

/// google-pprof's `--text` for each real file ("Total: N samples").
const PERL_TEXT: [&str; 3] = [
    include_str!("../../qemu-tests/vectors/gperftools-2.10/x86_64-le64-gperftools2.10/google-pprof.text.txt"),
    include_str!("../../qemu-tests/vectors/gperftools-2.10/i386-le32-gperftools2.10/google-pprof.text.txt"),
    include_str!("../../qemu-tests/vectors/gperftools-2.10/s390x-be64-gperftools2.10-qemu/google-pprof.text.txt"),
];

const EDGE_RESULTS: &str = include_str!("../../qemu-tests/vectors/gperftools-2.10/edge-synthetic/RESULTS.txt");

macro_rules! edge {
    ($($name:literal),* $(,)?) => {
        [$(($name, include_bytes!(concat!("../../qemu-tests/vectors/gperftools-2.10/edge-synthetic/", $name)) as &[u8])),*]
    };
}

const EDGE: [(&str, &[u8]); 36] = edge!(
    "i386-build_var.prof",
    "i386-count0_record.prof",
    "i386-hdrwords4.prof",
    "i386-identity.prof",
    "i386-notrailer_nomaps.prof",
    "i386-period0.prof",
    "i386-trailer_count5.prof",
    "i386-trailer_depth3.prof",
    "i386-truncated_mid_slot.prof",
    "i386-version1.prof",
    "i386-version2.prof",
    "i386-zeropc_midrecord.prof",
    "s390x-build_var.prof",
    "s390x-count0_record.prof",
    "s390x-hdrwords4.prof",
    "s390x-identity.prof",
    "s390x-notrailer_nomaps.prof",
    "s390x-period0.prof",
    "s390x-trailer_count5.prof",
    "s390x-trailer_depth3.prof",
    "s390x-truncated_mid_slot.prof",
    "s390x-version1.prof",
    "s390x-version2.prof",
    "s390x-zeropc_midrecord.prof",
    "x64-build_var.prof",
    "x64-count0_record.prof",
    "x64-hdrwords4.prof",
    "x64-identity.prof",
    "x64-notrailer_nomaps.prof",
    "x64-period0.prof",
    "x64-trailer_count5.prof",
    "x64-trailer_depth3.prof",
    "x64-truncated_mid_slot.prof",
    "x64-version1.prof",
    "x64-version2.prof",
    "x64-zeropc_midrecord.prof",
);

/// Everything a reader gives for a file.
#[derive(Debug, Default)]
struct Parsed {
    word: usize,
    big: bool,
    extra_header: Vec<u64>,
    /// (count, declared depth, program counters)
    records: Vec<(u64, Option<u64>, Vec<u64>)>,
    end: Option<End>,
    tail: Vec<u8>,
    quirks: Quirks,
    samples: u64,
    period_us: u64,
    words: u64,
    version: u64,
    padding: u64,
}

fn parse(file: &[u8], window: usize) -> Result<Parsed, ReadError<CursorError>> {
    let mut buf = vec![0u8; window];
    let mut r = Reader::open(Cursor::new(file), &mut buf)?;
    let h = *r.header();
    let mut p = Parsed {
        word: r.word().bytes(),
        big: r.endian().is_big_endian(),
        period_us: h.period_us,
        words: h.words,
        version: h.version,
        padding: h.padding,
        ..Parsed::default()
    };
    while let Some(item) = r.next_item()? {
        match item {
            Item::ExtraHeaderWord(v) => p.extra_header.push(v),
            Item::Record(rec) => p.records.push((rec.count, rec.depth, rec.pcs.iter().collect())),
            Item::End(end) => p.end = Some(end),
        }
    }
    p.quirks = r.quirks();
    p.samples = r.samples();
    let mut tail = r.into_tail();
    let mut chunk = [0u8; 100];
    loop {
        let n = tail.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        p.tail.extend_from_slice(&chunk[..n]);
    }
    Ok(p)
}

#[test]
fn real_files_read_as_google_pprof_totals_and_go_pprof_samples() {
    let expected_formats = [(8, false), (4, false), (8, true)];
    for (i, (name, file)) in REAL.iter().enumerate() {
        let p = parse(file, 4096).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!((p.word, p.big), expected_formats[i], "{name}");
        assert_eq!((p.words, p.version, p.period_us, p.padding), (3, 0, 10_000, 0), "{name}");
        assert_eq!(p.quirks, Quirks::default(), "{name}: a real file has no quirks");
        assert!(matches!(p.end, Some(End::Marker { count: 0, depth: 1, .. })), "{name}: {:?}", p.end);
        assert!(p.tail.starts_with(&[0; 8][..p.word]), "{name}: tail starts with the trailer's pc");
        assert!(std::str::from_utf8(&p.tail[p.word..]).unwrap().contains("r-xp"), "{name}: maps text");
        assert_eq!(p.samples, perl_total(PERL_TEXT[i]), "{name}: google-pprof's total");
        // Readers subtract 1 from every program counter but the first, then sum stacks.
        let mut ours = BTreeMap::new();
        for (count, _, pcs) in &p.records {
            let stack: Vec<u64> = pcs.iter().enumerate().map(|(k, &pc)| if k == 0 { pc } else { pc - 1 }).collect();
            *ours.entry(stack).or_insert(0) += count;
        }
        assert_eq!(ours, go_samples(GO_RAW[i]), "{name}: go pprof's samples");
    }
}

#[test]
fn variants_total_what_google_pprof_totals() {
    let mut checked = 0;
    for (name, file) in EDGE {
        let line = EDGE_RESULTS.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{name} in RESULTS"));
        let perl = line.split('|').nth(1).unwrap();
        let total: u64 = perl.trim().strip_prefix("perl: Total: ").unwrap().split(' ').next().unwrap().parse().unwrap();
        let p = parse(file, 4096).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(p.samples, total, "{name}");
        checked += 1;
        let q = p.quirks;
        let expect = |what: &str, met: bool| assert!(met, "{name}: expected quirk {what}, got {q:?}");
        match name.split_once('-').unwrap().1.trim_end_matches(".prof") {
            "hdrwords4" => expect("extra header words", q.extra_header_words && p.extra_header.len() == 1),
            "period0" => expect("period 0", q.period_zero),
            "version1" | "version2" => expect("version", q.version_not_zero),
            "notrailer_nomaps" => expect("no trailer", q.no_trailer && p.tail.is_empty()),
            "truncated_mid_slot" => expect("partial slot", q.partial_slot || q.cut_record),
            "trailer_count5" | "trailer_depth3" | "zeropc_midrecord" => expect("early end", q.end_not_trailer),
            "count0_record" => expect("count 0", q.zero_count_record),
            "identity" | "build_var" => assert_eq!(q, Quirks::default(), "{name}"),
            other => panic!("{other}: no expectation"),
        }
    }
    assert_eq!(checked, EDGE.len());
}

/// Writes back what the reader read, in the file's own slot width and byte order.
fn reencode(p: &Parsed) -> Vec<u8> {
    fn go<W: Word, E: Endianity>(p: &Parsed, word: W, endian: E) -> Vec<u8> {
        let mut out = vec![0u8; 1 << 20];
        let mut staging = vec![0u8; 4096];
        let header = tachyon_core::gperftools::Header {
            word: if word.bytes() == 4 { RunTimeWord::Four } else { RunTimeWord::Eight },
            endian: if endian.is_big_endian() { RunTimeEndian::Big } else { RunTimeEndian::Little },
            words: p.words,
            version: p.version,
            period_us: p.period_us,
            padding: p.padding,
        };
        let mut w = Writer::with_format(Cursor::new(&mut out[..]), &mut staging, word, endian, &header).unwrap();
        for &v in &p.extra_header {
            w.extra_header_word(v).unwrap();
        }
        for (count, depth, pcs) in &p.records {
            w.write_raw_record(*count, *depth, pcs).unwrap();
        }
        if let Some(End::Marker { count, depth, .. }) = p.end {
            w.write_raw_record(count, Some(depth), &[]).unwrap();
        }
        w.finish_raw(&p.tail).unwrap();
        let n = w.into_inner().position() as usize;
        out.truncate(n);
        out
    }
    match (p.word, p.big) {
        (4, false) => go(p, Word32, LittleEndian),
        (4, true) => go(p, Word32, BigEndian),
        (8, false) => go(p, Word64, LittleEndian),
        _ => go(p, Word64, BigEndian),
    }
}

#[test]
fn every_file_reencodes_to_its_own_bytes() {
    for (name, file) in REAL.iter().chain(EDGE.iter()) {
        let p = parse(file, 4096).unwrap();
        let again = reencode(&p);
        assert!(again == *file, "{name}: re-encoded {} bytes differ from the {} read", again.len(), file.len());
    }
}

#[test]
fn a_new_profile_reads_back() {
    for big in [false, true] {
        let mut out = vec![0u8; 4096];
        let mut staging = [0u8; 256];
        let header = tachyon_core::gperftools::Header::libprofiler(2500);
        let w = if big {
            let mut w =
                Writer::with_format(Cursor::new(&mut out[..]), &mut staging, Word32, BigEndian, &header).unwrap();
            w.write_record(3, &[0x1000, 0x2004, 0x3008]).unwrap();
            w.write_record(1, &[0x1010]).unwrap();
            assert_eq!(w.write_record(1, &[0, 1]), Err(WriteError::ZeroPc));
            assert_eq!(w.write_record(1, &[]), Err(WriteError::EmptyStack));
            assert_eq!(w.write_record(1, &[1 << 32]), Err(WriteError::TooWide { value: 1 << 32 }));
            w.finish(b"maps\n").unwrap();
            w.into_inner().position()
        } else {
            let mut w = Writer::new(Cursor::new(&mut out[..]), &mut staging, 2500).unwrap();
            w.write_record(3, &[0x1000, 0x2004, 0x3008]).unwrap();
            w.write_record(1, &[0x1010]).unwrap();
            w.finish(b"maps\n").unwrap();
            assert_eq!(w.write_record(1, &[1]), Err(WriteError::Finished));
            w.into_inner().position()
        };
        let file = &out[..w as usize];
        let p = parse(file, 64).unwrap();
        assert_eq!(p.records, [(3, Some(3), vec![0x1000, 0x2004, 0x3008]), (1, Some(1), vec![0x1010])]);
        assert_eq!(p.samples, 4);
        assert_eq!(p.period_us, 2500);
        assert!(p.end.unwrap().is_trailer());
        assert_eq!(&p.tail[p.word..], b"maps\n");
        assert_eq!(p.quirks, Quirks::default());
        // The header's known bytes: slot 1 (3 words) and slot 3 (period).
        if big {
            assert_eq!(&file[..8], [0, 0, 0, 0, 0, 0, 0, 3]);
        }
    }
}

#[test]
fn truncations_and_small_windows_never_panic() {
    for (name, file) in REAL.iter().chain(EDGE.iter().take(12)) {
        let whole = parse(file, 4096).unwrap().samples;
        // Every cut in the header and near the end, and every 7th elsewhere (7 is prime to
        // both slot widths, so each offset within a slot is met).
        let cuts = (0..file.len()).filter(|&len| len < 200 || len + 200 > file.len() || len % 7 == 0);
        for len in cuts {
            match parse(&file[..len], 4096) {
                // A cut can only lose samples, or add those of a record cut after its count.
                Ok(p) => assert!(p.samples <= whole + 1000, "{name}[..{len}]"),
                Err(ReadError::Format { rule: Rule::TooShort { .. }, offset: 0 }) => {
                    assert!(len < 40, "{name}[..{len}]")
                }
                Err(e) => panic!("{name}[..{len}]: {e}"),
            }
        }
        for window in [64, 65, 70, 100] {
            match parse(file, window) {
                Ok(p) => assert_eq!(p.samples, whole, "{name} window {window}"),
                Err(ReadError::TooLarge { window: w, .. }) => assert_eq!(w, window),
                Err(e) => panic!("{name} window {window}: {e}"),
            }
        }
    }
}

#[test]
fn hostile_headers_and_depths_are_named() {
    let slots64 = |v: &[u64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let at = |bytes: &[u8]| match parse(bytes, 4096) {
        Err(ReadError::Format { offset, rule }) => (offset, rule),
        other => panic!("{other:?}"),
    };
    assert_eq!(at(&slots64(&[0, 2, 0, 100, 0])), (8, Rule::HeaderWords { words: 2 }));
    assert_eq!(at(&slots64(&[0, 3, 1 << 33, 100, 0])), (16, Rule::Version { version: 1 << 33 }));
    assert_eq!(at(&slots64(&[0, 3, 0, 1 << 33, 0])), (24, Rule::Period { period_us: 1 << 33 }));
    assert_eq!(at(&slots64(&[0, 3, 0, 100, 0, 1, 70_000, 5])), (48, Rule::Depth { depth: 70_000 }));
    assert_eq!(at(&[0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1]), (0, Rule::HeaderWordsUnreadable));
    assert_eq!(
        at(&[7, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]),
        (0, Rule::NotAProfile { first_slot: 7 })
    );
    // A depth of 2^16 that the file does not have: refused by a small window, read (cut)
    // by one that could hold it, without reserving anything for the depth.
    let lying = slots64(&[0, 3, 0, 100, 0, 1, 1 << 16, 5]);
    assert!(matches!(parse(&lying, 4096), Err(ReadError::TooLarge { depth: 65536, .. })));
    let p = parse(&lying, LARGEST_RECORD_WINDOW).unwrap();
    assert_eq!(p.records, [(1, Some(1 << 16), vec![5])]);
    assert!(p.quirks.cut_record && p.quirks.no_trailer);
}

/// A sink that fails one write call, then works.
struct FailOnce<'a> {
    out: &'a mut Vec<u8>,
    call: usize,
    fail_at: usize,
    short: bool,
    failed: bool,
}

impl embedded_io::ErrorType for FailOnce<'_> {
    type Error = Broken;
}

impl embedded_io::Write for FailOnce<'_> {
    fn write(&mut self, buf: &[u8]) -> Result<usize, Broken> {
        self.call += 1;
        if self.call == self.fail_at {
            if self.short && buf.len() > 1 {
                // A short write, then the error on the next call.
                self.out.extend_from_slice(&buf[..buf.len() / 2]);
                self.fail_at += 1;
                return Ok(buf.len() / 2);
            }
            self.failed = true;
            return Err(Broken);
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> Result<(), Broken> {
        Ok(())
    }
}

#[test]
fn a_failing_sink_still_yields_a_valid_file_of_what_was_accepted() {
    let records: Vec<(u64, Vec<u64>)> =
        (1..=6u64).map(|i| (i, (0..i).map(|k| 0x1000 * (k + 1) + i).collect())).collect();
    let mut met = 0;
    for short in [false, true] {
        for fail_at in 1..=12 {
            let mut out = Vec::new();
            let sink = FailOnce { out: &mut out, call: 0, fail_at, short, failed: false };
            let mut staging = [0u8; 512];
            let mut w = match Writer::with_format(sink, &mut staging, Word64, LittleEndian, &Default::default()) {
                Ok(w) => w,
                Err(WriteError::Sink { accepted: true, .. }) => continue, // the header: nothing to finish
                Err(e) => panic!("{e:?}"),
            };
            let mut accepted = Vec::new();
            for (count, pcs) in &records {
                match w.write_record(*count, pcs) {
                    Ok(()) | Err(WriteError::Sink { accepted: true, .. }) => {
                        accepted.push((*count, Some(pcs.len() as u64), pcs.clone()))
                    }
                    Err(WriteError::Sink { accepted: false, .. }) => {}
                    Err(e) => panic!("{e:?}"),
                }
            }
            let mut tries = 0;
            while let Err(e) = w.finish(b"text") {
                assert!(matches!(e, WriteError::Sink { .. }), "{e:?}");
                tries += 1;
                assert!(tries < 3);
            }
            met += usize::from(w.into_inner().failed);
            let p = parse(&out, 4096).unwrap_or_else(|e| panic!("fail_at {fail_at} short {short}: {e}"));
            assert_eq!(p.records, accepted, "fail_at {fail_at} short {short}");
            assert!(p.end.unwrap().is_trailer());
            assert_eq!(&p.tail[8..], b"text");
        }
    }
    // The header, six records, the trailer and the text are nine write calls: calls 2 to 9
    // fail after a writer exists, in both modes.
    assert_eq!(met, 16, "failures met");
}
