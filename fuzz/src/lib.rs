//! What each fuzz target runs, as plain functions: the targets under `fuzz_targets/` call them
//! under libFuzzer, and `tests/replay.rs` calls them on every seed and every saved crash with
//! a plain `cargo test`, so a crash found once stays a regression test.
//!
//! Each function feeds its bytes to one reader as a user's command would (opening, reading
//! everything, converting), and panics only where a promise is broken: a reader itself must
//! never panic, whatever the bytes.

use std::io::Cursor as StdCursor;

use tachyon::convert::{convert, Destination, Output};
use tachyon::gperftools::source::GperftoolsSource;
use tachyon::mojo::source::{MojoMetric, MojoSource};
use tachyon::pprof::source::{PprofSource, SampleIndex};
use tachyon::tachyon::source::TachyonSource;
use tachyon::tachyon::storage::{Limits, OwnedReaderStorage};
use tachyon_core::io::Cursor;
use tachyon_core::marshal::{Decoder, Open};
use tachyon_core::reader::Metadata;
use tachyon_core::FileKind;

pub mod roundtrip;

/// The reader's limits with CPython's zstd window and a small read window: a file may still
/// ask for anything CPython's reader takes, and an execution does not zero megabytes.
fn limits() -> Limits {
    Limits { max_window_log: tachyon_core::compression::CPYTHON_WINDOW_LOG, read_buffer: 4096, ..Limits::default() }
}

/// A Tachyon file (raw or zstd) opened as `tachyon info` opens it: header, footer, stats and
/// both tables, every frame resolved.
pub fn tachyon_metadata(data: &[u8]) {
    let Ok(meta) = Metadata::read(&mut Cursor::new(data)) else { return };
    let Ok(mut storage) = OwnedReaderStorage::for_metadata(&meta, limits()) else { return };
    let Ok(reader) = storage.open(Cursor::new(data)) else { return };
    let tables = reader.tables();
    let _ = tachyon::tachyon::view::info(reader.metadata(), tables.string_count(), tables.frame_count());
    for i in 0..tables.frame_count() as u32 {
        if let Some(f) = tables.frame(i) {
            let _ = tachyon::tachyon::view::frame(&f);
        }
    }
}

/// A Tachyon file replayed whole: every sample read, then converted as CPython's `replay`
/// would (collapsed stacks, which go through the replay rules), and re-encoded.
pub fn tachyon_replay(data: &[u8]) {
    let Ok(meta) = Metadata::read(&mut Cursor::new(data)) else { return };
    let Ok(mut storage) = OwnedReaderStorage::for_metadata(&meta, limits()) else { return };
    // Reading every sample and checking without stacks end alike: the same count or the
    // same first error.
    let read = storage.open(Cursor::new(data)).map(|mut reader| loop {
        match reader.next_sample() {
            Ok(Some(_)) => {}
            Ok(None) => break Ok(reader.samples_decoded()),
            Err(e) => break Err(format!("{e:?}")),
        }
    });
    if let Ok(read) = read {
        let mut reader = storage.open(Cursor::new(data)).expect("it opened before");
        let checked = reader.check_to_end(|_| {}).map_err(|e| format!("{e:?}"));
        assert_eq!(checked, read, "check_to_end and next_sample disagree");
    }
    if let Ok(mut reader) = storage.open(Cursor::new(data)) {
        let mut source = TachyonSource::new(&mut reader);
        let _ = convert(&mut source, &Output::Collapsed, Destination::Stream(&mut Vec::new()), &mut |_| {});
    }
    if let Ok(mut reader) = storage.open(Cursor::new(data)) {
        let _ = tachyon::tachyon::write::reencode(
            &mut reader,
            tachyon::memory::VecSink::default(),
            tachyon_core::LittleEndian,
            // Raw: the compressor has its own target (roundtrip), and a compressing
            // re-encoder would start a thread per execution.
            Some(tachyon_core::Compression::None),
            &mut |_| {},
        );
    }
}

/// A gperftools CPU profile, converted to collapsed stacks (pprof output is gzip over the
/// same hub: the pprof target reads it).
pub fn gperftools(data: &[u8]) {
    if let Ok(mut source) = GperftoolsSource::open(Cursor::new(data)) {
        let _ = convert(&mut source, &Output::Collapsed, Destination::Stream(&mut Vec::new()), &mut |_| {});
    }
    let _ = tachyon::gperftools::info(tachyon::file::StdIo(StdCursor::new(data)), data.len() as u64);
}

/// A MOJO file: Austin's text, re-encoding, and a conversion through the hub.
pub fn mojo(data: &[u8]) {
    let _ = tachyon::mojo::austin::austin_text(Cursor::new(data), Vec::new());
    let _ = tachyon::mojo::reencode(Cursor::new(data), &mut Vec::new(), None);
    let _ = tachyon::mojo::info(Cursor::new(data), data.len() as u64);
    let mut source = MojoSource::open(Cursor::new(data), MojoMetric::Default);
    let _ = convert(&mut source, &Output::Collapsed, Destination::Stream(&mut Vec::new()), &mut |_| {});
}

/// A pstats file: loaded, printed sorted with callers and callees, drawn as a call graph,
/// written back. The table-only load (`--to pstats-text` without callers) must take the same
/// files with the same errors, and print the same table.
pub fn pstats(data: &[u8]) {
    use tachyon::pstats::{load, load_for_print, print, PrintOptions, Restriction};
    let table = PrintOptions {
        sort: vec!["cumulative".into()],
        restrictions: vec![Restriction::Fraction(0.5), Restriction::Pattern("[a-m]".into())],
        files: vec!["fuzz".into()],
        ..PrintOptions::default()
    };
    let whole = load(data);
    let for_table = load_for_print(data, &table);
    assert_eq!(whole.as_ref().err(), for_table.as_ref().err(), "the loads disagree");
    let (Ok(stats), Ok(for_table)) = (whole, for_table) else { return };
    let printed = |s| print(s, &table).map_err(|e| e.0);
    assert_eq!(printed(&stats), printed(&for_table), "the table-only load prints otherwise");
    for (sort, callers, callees, strip_dirs) in [("name,line", true, false, true), ("calls", false, true, false)] {
        let options = PrintOptions {
            sort: sort.split(',').map(str::to_string).collect(),
            restrictions: vec![Restriction::Count(50)],
            strip_dirs,
            callers,
            callees,
            files: vec!["fuzz".into()],
        };
        let _ = print(&stats, &options);
    }
    let _ = tachyon::pstats::dot::dot(&stats);
    let _ = tachyon::pstats::write(&stats, true, &mut Vec::new());
}

/// Python's marshal format on its own: every item of the object the bytes begin with.
pub fn marshal(data: &[u8]) {
    let mut stack = [Open::EMPTY; tachyon::pstats::MAX_DEPTH];
    let mut decoder = Decoder::new(data, &mut stack);
    while let Ok(Some(_)) = decoder.next_item() {}
}

/// A pprof profile (gzipped or not), converted to collapsed stacks.
pub fn pprof(data: &[u8]) {
    if let Ok(mut source) = PprofSource::open(data, &SampleIndex::Default) {
        let _ = convert(&mut source, &Output::Collapsed, Destination::Stream(&mut Vec::new()), &mut |_| {});
    }
}

/// The JSON input of `tachyon encode`: a document of writer arguments and samples, written
/// as a Tachyon file in both byte orders.
pub fn json_encode(data: &[u8]) {
    let Ok(doc) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let _ = tachyon::tachyon::input::encode_document(&doc, tachyon_core::LittleEndian, None);
    let _ = tachyon::tachyon::input::encode_document(&doc, tachyon_core::BigEndian, None);
}

/// Format detection by magic: any prefix, and the name of what it finds.
pub fn detect(data: &[u8]) {
    let _ = FileKind::detect(data).name();
}

/// An ELF image as the symboliser reads a binary: segments, symbols, DWARF; a few addresses
/// resolved (from the bytes themselves, so inputs can aim at their own sections).
pub fn elf_symbols(data: &[u8]) {
    let mut addresses = vec![0, 0x1000, 0x40_0000];
    if let Some(word) = data.get(data.len().saturating_sub(8)..) {
        let mut w = [0u8; 8];
        w[..word.len()].copy_from_slice(word);
        addresses.push(u64::from_le_bytes(w));
    }
    for address in addresses {
        if tachyon::symbolize::symbolize_image(data, address).is_err() {
            return;
        }
    }
}

/// A capture of the framed transport, reassembled as `tachyon receive` does.
pub fn transport_receiver(data: &[u8]) {
    // A device's sample stream (`tachyon_core::stream`): its Begin frame carries this magic.
    if data.get(3..7) == Some(&tachyon_core::stream::MAGIC[..]) {
        if let Ok(received) = tachyon::tachyon::receive::receive(data) {
            // Our writer's file of what the stream carried: linear in the capture (a sample
            // record is at most a few times its item: a thread's 13-byte prefix, a time delta
            // per thread), and read whole.
            let (file, len) = (&received.file, data.len());
            assert!(file.len() <= 8 * len + 512, "{} bytes from a capture of {len}", file.len());
            let meta = Metadata::read(&mut Cursor::new(&file[..])).expect("the received file's metadata");
            let mut storage = OwnedReaderStorage::for_metadata(&meta, limits()).expect("its storage");
            let mut reader = storage.open(Cursor::new(&file[..])).expect("the received file opens");
            while reader.next_sample().expect("the received file reads").is_some() {}
        }
        return;
    }
    match tachyon::tachyon::receive::receive(data) {
        // Every byte of a complete stream's file came in a frame.
        Ok(received) if received.salvage.is_none() => {
            assert!(received.file.len() <= data.len(), "{} bytes from a capture of {}", received.file.len(), data.len())
        }
        // A salvaged file is read like any other (its tables came from the journal).
        Ok(received) => tachyon_replay(&received.file),
        Err(_) => {}
    }
}
