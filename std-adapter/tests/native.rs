//! Native frames in this test program's own code: located by the module table as the capture
//! path's drain writes them, read back by the symboliser, and named by a conversion.

use std::path::PathBuf;

use tachyon::convert::{convert, Destination, Output};
use tachyon::memory::VecSink;
use tachyon::native::{parse, Modules, UNKNOWN_MODULE};
use tachyon::profile::{Profile, SourceOptions};
use tachyon::symbolize::Symbolizer;
use tachyon_core::storage::{VecWriterStorage, WriterCapacity};
use tachyon_core::{Frame, Writer, WriterConfig};

#[inline(never)]
fn a_function_to_find() -> u64 {
    std::hint::black_box(7)
}

fn this_program() -> String {
    std::fs::canonicalize(std::env::current_exe().unwrap()).unwrap().to_str().unwrap().to_owned()
}

/// The frame names the drain writes for the address of `a_function_to_find`, plus one.
fn names_of_the_function() -> (String, String) {
    let mut modules = Modules::this_process();
    let (function, file) = modules.names(a_function_to_find as *const () as usize as u64 + 1);
    (function.to_owned(), file.to_owned())
}

#[test]
fn the_module_table_finds_this_program_and_the_symboliser_names_it() {
    let (function, file) = names_of_the_function();
    let native = parse(&function, &file).unwrap_or_else(|| panic!("{function} in {file} is not a native frame"));
    assert_eq!(std::fs::canonicalize(native.module).unwrap().to_str().unwrap(), this_program());
    let id = native.build_id.expect("rustc links a build id on Linux");
    let mut symbolizer = Symbolizer::new(Vec::new());
    let symbols = symbolizer.symbolize_linked(native.module, Some(id), native.address);
    let outermost =
        symbols.last().unwrap_or_else(|| panic!("nothing named at {function}: {:?}", symbolizer.warnings()));
    assert!(outermost.function.ends_with("a_function_to_find"), "{symbols:?}");

    // Another build's id: the binary is not used, and the warning says why.
    let mut symbolizer = Symbolizer::new(Vec::new());
    assert_eq!(symbolizer.symbolize_linked(native.module, Some("00ff"), native.address), Vec::new());
    assert!(symbolizer.warnings().iter().any(|w| w.contains("not the profile's 00ff")), "{:?}", symbolizer.warnings());
}

#[test]
fn an_address_in_no_module_is_unknown() {
    let mut modules = Modules::this_process();
    assert_eq!(modules.names(0x10), ("0x10", UNKNOWN_MODULE));
    assert_eq!(parse("0x10", UNKNOWN_MODULE), None);
}

#[test]
fn a_conversion_names_native_frames_and_keeps_the_rest() {
    let (function, file) = names_of_the_function();
    let cap = WriterCapacity { string_bytes: 1 << 12, strings: 64, frames: 64, threads: 8, rle_budget: 16384 };
    let mut storage = VecWriterStorage::new(cap).unwrap();
    let mut w = Writer::new(VecSink::default(), storage.storage(), WriterConfig::new(1_000, 1_000)).unwrap();
    let gone = Frame::new(b"/no/such/libgone.so (build id 0a0b)", b"libgone.so+0x1234");
    let python = Frame::new(b"main.py", b"main");
    let native = Frame::new(file.as_bytes(), function.as_bytes());
    for t in 0..3 {
        w.write_thread_sample(1_000 + t, 0, 1, 0, [native, gone, python]).unwrap();
    }
    w.finish().unwrap();
    let dir = std::env::temp_dir().join(format!("tachyon-native-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path: PathBuf = dir.join("raw.pyb");
    std::fs::write(&path, w.into_inner().into_inner()).unwrap();

    let collapsed = |symbolize: Option<Vec<PathBuf>>| {
        let mut profile = Profile::open(&path).unwrap();
        let options = SourceOptions { symbolize, ..SourceOptions::default() };
        let mut source = profile.source(&options).unwrap();
        let warnings = source.warnings().to_vec();
        let counts = source.native_counts();
        let mut out = Vec::new();
        convert(&mut source, &Output::Collapsed, Destination::Stream(&mut out), &mut |_| {}).unwrap();
        (String::from_utf8(out).unwrap(), counts, warnings)
    };
    let (named, counts, warnings) = collapsed(Some(Vec::new()));
    let counts = counts.unwrap();
    assert_eq!((counts.native, counts.named), (2, 1), "{named}");
    assert!(named.contains("a_function_to_find"), "{named}");
    assert!(named.contains("libgone.so+0x1234"), "the frame not found stays: {named}");
    assert!(named.contains("main.py:main"), "{named}");
    assert!(named.ends_with(" 3\n"), "{named}");
    assert!(warnings.iter().any(|w| w.contains("/no/such/libgone.so: not found")), "{warnings:?}");
    // Asked not to: every frame as written.
    let (raw, counts, _) = collapsed(None);
    assert_eq!(counts, None);
    assert!(raw.contains(&function) && !raw.contains("a_function_to_find"), "{raw}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A pprof location that is a bare address in a mapping of this program is named from the
/// binary; a location with lines stays as it is; without symbolising, the address stays.
#[test]
fn a_pprof_address_without_lines_is_named_from_its_mapping() {
    use prost::Message;
    use tachyon::pprof::proto::{Function, Line, Location, Mapping, Profile as Message_, Sample, ValueType};
    let address = a_function_to_find as *const () as usize as u64;
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let (start, limit, offset, file) = maps
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (start, limit) = fields[0].split_once('-')?;
            let (start, limit) = (u64::from_str_radix(start, 16).ok()?, u64::from_str_radix(limit, 16).ok()?);
            let offset = u64::from_str_radix(fields[2], 16).ok()?;
            let file = fields.get(5)?.to_string();
            (start <= address && address < limit).then_some((start, limit, offset, file))
        })
        .expect("the function's mapping");
    let message = Message_ {
        sample_type: vec![ValueType { r#type: 1, unit: 2 }],
        sample: vec![Sample { location_id: vec![1, 2], value: vec![3], label: vec![] }],
        mapping: vec![Mapping {
            id: 1,
            memory_start: start,
            memory_limit: limit,
            file_offset: offset,
            filename: 3,
            ..Default::default()
        }],
        location: vec![
            Location { id: 1, mapping_id: 1, address, ..Default::default() },
            Location { id: 2, line: vec![Line { function_id: 1, line: 5 }], ..Default::default() },
        ],
        function: vec![Function { id: 1, name: 4, filename: 5, ..Default::default() }],
        string_table: ["", "samples", "count", &file, "main", "main.py"].map(String::from).to_vec(),
        ..Default::default()
    };
    let dir = std::env::temp_dir().join(format!("tachyon-native-pprof-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bare.pb");
    std::fs::write(&path, message.encode_to_vec()).unwrap();
    let collapsed = |symbolize: Option<Vec<PathBuf>>| {
        let mut profile = Profile::open(&path).unwrap();
        let options = SourceOptions { symbolize, ..SourceOptions::default() };
        let mut source = profile.source(&options).unwrap();
        let mut out = Vec::new();
        convert(&mut source, &Output::Collapsed, Destination::Stream(&mut out), &mut |_| {}).unwrap();
        String::from_utf8(out).unwrap()
    };
    let named = collapsed(Some(Vec::new()));
    assert!(named.starts_with("main;") && named.contains(";a_function_to_find"), "{named}");
    // Folded as a merge folds it: the names symbolised, not the addresses where they lie.
    let mut profile = Profile::open(&path).unwrap();
    let options = SourceOptions { symbolize: Some(Vec::new()), ..SourceOptions::default() };
    let mut source = profile.source(&options).unwrap();
    let mut fold = tachyon::model::fold::Fold::new(tachyon::model::fold::FoldOptions::default());
    fold.add(&mut source, &Output::Collapsed, &mut |_| {}).unwrap();
    let mut out = Vec::new();
    convert(&mut fold.finish().unwrap(), &Output::Collapsed, Destination::Stream(&mut out), &mut |_| {}).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), named);
    assert!(named.ends_with(" 3\n"), "{named}");
    let raw = collapsed(None);
    assert!(raw.contains(&format!("{address:#x}")) && !raw.contains("a_function_to_find"), "{raw}");
    std::fs::remove_dir_all(&dir).unwrap();
}
