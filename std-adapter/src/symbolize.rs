//! Native addresses to function, file and line, with the gimli-rs crates `object` and
//! `addr2line`: what google-pprof does by running binutils' `nm` and `addr2line -i`.
//!
//! An address is mapped through its [`Mapping`] to an offset in the mapped file, through the
//! ELF's `PT_LOAD` segments to the address the file was linked at, then to frames: DWARF
//! first (one frame per inlined call, innermost first), else the nearest symbol of
//! `.symtab` or `.dynsym`. Debugging information split off is found by build id under each
//! `--binary-path` folder's `.build-id/` and `/usr/lib/debug/.build-id/`, then by
//! `.gnu_debuglink`, as binutils and gdb find it. Addresses already in a binary's own address
//! space (the capture path's native frames, [`crate::native`]) skip the mapping:
//! [`Symbolizer::symbolize_linked`].
//!
//! A binary is looked for under each `--binary-path` directory (its whole path there, then
//! its base name), then at the path the profile names, as google/pprof's
//! `PPROF_BINARY_PATH` works. A binary that is missing, unreadable, not ELF, or truncated
//! leaves its addresses unsymbolised and adds one warning; nothing here fails a conversion.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use object::{Object, ObjectSection, ObjectSegment};

use tachyon_core::tables::Location;

use crate::model::{FrameInfo, Mapping};

/// Largest binary read (a real one is at most a few hundred megabytes).
pub const MAX_BINARY_BYTES: u64 = 4 << 30;

/// One frame an address resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    /// Function name, demangled.
    pub function: String,
    /// Source file, when the debugging information says (empty otherwise).
    pub file: String,
    /// Line, 0 when unknown.
    pub line: u32,
}

/// The hub's frames for the symbols of one address (innermost first): all but the last are
/// inlined into the next.
pub fn symbol_frames(found: Vec<Symbol>, address: u64, mapping: Option<u32>) -> impl Iterator<Item = FrameInfo> {
    let outermost = found.len().saturating_sub(1);
    found.into_iter().enumerate().map(move |(i, symbol)| FrameInfo {
        filename: symbol.file,
        funcname: symbol.function,
        location: i32::try_from(symbol.line).ok().filter(|&l| l > 0).map(|l| Location {
            lineno: l,
            end_lineno: l,
            col: -1,
            end_col: -1,
        }),
        address: Some(address),
        mapping,
        inlined: i < outermost,
        ..FrameInfo::default()
    })
}

/// Where binaries are looked for, and those already opened.
pub struct Symbolizer {
    binary_paths: Vec<PathBuf>,
    /// Where split-off debugging files are looked for: each binary path, then
    /// `/usr/lib/debug`.
    debug_roots: Vec<PathBuf>,
    binaries: HashMap<String, Option<Rc<Binary>>>,
    /// Binaries by path and the build id a profile recorded for them: the binary found when
    /// its build id is that one, else its debugging file found by that build id.
    builds: HashMap<(String, String), Option<Rc<Binary>>>,
    warnings: Vec<String>,
}

type Slice = gimli::EndianRcSlice<gimli::RunTimeEndian>;

/// An opened binary: its segments, its DWARF (if any) and its symbols.
struct Binary {
    /// `(file offset, file size, linked address)` of each `PT_LOAD` segment.
    segments: Vec<(u64, u64, u64)>,
    dwarf: Option<addr2line::Context<Slice>>,
    /// `(address, name)`, sorted by address.
    symbols: Vec<(u64, String)>,
    /// The GNU build id note, if the binary has one.
    build_id: Option<Vec<u8>>,
}

impl Symbolizer {
    /// Looks for binaries under `binary_paths` first, then where the profile says they are.
    pub fn new(binary_paths: Vec<PathBuf>) -> Self {
        Symbolizer {
            debug_roots: binary_paths.iter().cloned().chain([PathBuf::from("/usr/lib/debug")]).collect(),
            binary_paths,
            binaries: HashMap::new(),
            builds: HashMap::new(),
            warnings: Vec::new(),
        }
    }

    /// What could not be used, one line per binary.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The frames `address` (in `mapping`) stands for, innermost first; empty when nothing
    /// is known of it.
    pub fn symbolize(&mut self, mapping: &Mapping, address: u64) -> Vec<Symbol> {
        let Some(binary) = self.binary(&mapping.file) else { return Vec::new() };
        let file_offset = address.wrapping_sub(mapping.start).wrapping_add(mapping.offset);
        let Some(linked) = binary.linked_address(file_offset) else { return Vec::new() };
        binary.frames(linked)
    }

    /// The frames of `address` as linked in the binary at `file` (the address space
    /// `addr2line -e FILE` and `nm` use), innermost first; empty when nothing is known of it.
    /// With `build_id` (lowercase hex), a binary found with another build id is not used (a
    /// rebuilt library would name the wrong functions): its debugging file found by that
    /// build id is, if installed, else nothing.
    pub fn symbolize_linked(&mut self, file: &str, build_id: Option<&str>, address: u64) -> Vec<Symbol> {
        let binary = match build_id {
            None => self.binary(file),
            Some(id) => self.build(file, id),
        };
        binary.map_or_else(Vec::new, |b| b.frames(address))
    }

    /// The binary at `file` if its build id is `id`, else the debugging file of build `id`;
    /// opened once.
    fn build(&mut self, file: &str, id: &str) -> Option<Rc<Binary>> {
        let key = (file.to_owned(), id.to_owned());
        if let Some(known) = self.builds.get(&key) {
            return known.clone();
        }
        let found = match self.locate(file) {
            Some(path) => match Binary::open(&path, &self.debug_roots) {
                Ok(binary) if binary.build_id.as_deref().map(hex) == Some(id.to_owned()) => Some(Rc::new(binary)),
                Ok(binary) => {
                    let theirs = binary.build_id.as_deref().map_or_else(|| "none".to_owned(), hex);
                    self.warnings.push(format!(
                        "{}: build id {theirs}, not the profile's {id}: another build, its addresses stay unsymbolised \
                         unless its debugging file is installed",
                        path.display()
                    ));
                    None
                }
                Err(why) => {
                    self.warnings.push(format!("{}: {why}, its addresses stay unsymbolised", path.display()));
                    None
                }
            },
            None => None,
        };
        let found = found.or_else(|| {
            let debug = build_id_path(&self.debug_roots, &unhex(id)?)?;
            read_bounded(&debug).ok().and_then(|data| Binary::parse(&data, None).ok()).map(Rc::new)
        });
        if found.is_none() && self.locate(file).is_none() {
            self.warnings.push(format!("{file}: not found, its addresses stay unsymbolised"));
        }
        self.builds.insert(key, found.clone());
        found
    }

    /// The binary a mapping names, opened once.
    fn binary(&mut self, file: &str) -> Option<Rc<Binary>> {
        // Anonymous mappings and the kernel's pseudo-files ([vdso], [stack]) name no binary.
        if file.is_empty() || file.starts_with('[') {
            return None;
        }
        if let Some(known) = self.binaries.get(file) {
            return known.clone();
        }
        let opened = match self.locate(file) {
            None => {
                self.warnings.push(format!("{file}: not found, its addresses stay unsymbolised"));
                None
            }
            Some(path) => match Binary::open(&path, &self.debug_roots) {
                Ok(binary) => Some(Rc::new(binary)),
                Err(why) => {
                    self.warnings.push(format!("{}: {why}, its addresses stay unsymbolised", path.display()));
                    None
                }
            },
        };
        self.binaries.insert(file.to_owned(), opened.clone());
        opened
    }

    /// The first existing candidate for `file`: under each binary path its whole path, then
    /// its base name; then `file` itself.
    fn locate(&self, file: &str) -> Option<PathBuf> {
        let path = Path::new(file);
        let relative = path.strip_prefix("/").unwrap_or(path);
        let candidates = self
            .binary_paths
            .iter()
            .flat_map(|dir| [dir.join(relative), path.file_name().map_or_else(|| dir.join(relative), |n| dir.join(n))])
            .chain(std::iter::once(path.to_path_buf()));
        candidates.into_iter().find(|p| p.is_file())
    }
}

/// The mappings of a `/proc/self/maps` text: `start-limit perms offset dev inode path`. A line
/// `attr=value` (a word, `=`, no spaces: `build=/src/out`) makes `$attr` stand for the value
/// in the lines after it, as go pprof reads them (google-pprof knows `build=` alone). Lines
/// of mappings without `x` permission, like other lines, are skipped.
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    let mut out = Vec::new();
    let mut vars: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if let Some((attr, value)) = line.split_once('=') {
            if !attr.is_empty() && attr.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') && !value.contains(' ')
            {
                let var = format!("${attr}");
                vars.retain(|(a, _)| *a != var);
                vars.push((var, value.to_owned()));
                continue;
            }
        }
        let mut fields = line.split_ascii_whitespace();
        let (Some(range), Some(perms), Some(offset)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        // Code runs only from executable mappings; both real readers skip the others, so an
        // address in a data mapping (a stale return address, say) stays a bare address rather
        // than taking the nearest symbol of code it cannot be in.
        if !perms.contains('x') {
            continue;
        }
        let Some((start, limit)) = range.split_once('-') else { continue };
        let hex = |s: &str| u64::from_str_radix(s, 16).ok();
        let (Some(start), Some(limit), Some(offset)) = (hex(start), hex(limit), hex(offset)) else { continue };
        let (_dev, _inode) = (fields.next(), fields.next());
        let mut file = fields.collect::<Vec<_>>().join(" ");
        for (var, value) in &vars {
            if file.contains(var.as_str()) {
                file = file.replace(var.as_str(), value);
            }
        }
        out.push(Mapping { start, limit, offset, file, build_id: String::new() });
    }
    out
}

/// Reads a file of at most [`MAX_BINARY_BYTES`].
fn read_bounded(path: &Path) -> Result<Vec<u8>, String> {
    let size = fs::metadata(path).map_err(|e| e.to_string())?.len();
    if size > MAX_BINARY_BYTES {
        return Err(format!("{size} bytes, more than a binary this reads ({MAX_BINARY_BYTES})"));
    }
    fs::read(path).map_err(|e| e.to_string())
}

/// The frames of linked address `address` in the ELF image `data` (a binary read into memory,
/// with no separate debugging file), innermost first; the reason when `data` is not a binary
/// this reads.
pub fn symbolize_image(data: &[u8], address: u64) -> Result<Vec<Symbol>, String> {
    Ok(Binary::parse(data, None)?.frames(address))
}

impl Binary {
    fn open(path: &Path, debug_roots: &[PathBuf]) -> Result<Binary, String> {
        let data = read_bounded(path)?;
        Binary::parse(&data, Some((path, debug_roots)))
    }

    /// A binary from its bytes; its debugging file looked for when `installed` says where
    /// the binary is and where debugging files are installed.
    fn parse(data: &[u8], installed: Option<(&Path, &[PathBuf])>) -> Result<Binary, String> {
        let file = object::File::parse(data).map_err(|e| format!("not a binary this reads ({e})"))?;
        if file.format() != object::BinaryFormat::Elf {
            return Err(format!("a {:?} file, not ELF", file.format()));
        }
        let segments = file
            .segments()
            .map(|s| {
                let (offset, size) = s.file_range();
                (offset, size, s.address())
            })
            .collect::<Vec<_>>();
        if segments.is_empty() {
            return Err("no loadable segments".to_owned());
        }
        // Split-off debugging information, when installed, has the DWARF and the full symbol
        // table; the binary itself keeps the segments and at least `.dynsym`.
        let debug_data = installed
            .and_then(|(path, debug_roots)| debug_file(&file, path, debug_roots))
            .and_then(|p| read_bounded(&p).ok());
        let debug_file = debug_data.as_deref().and_then(|d| object::File::parse(d).ok());
        let dwarf_source = debug_file.as_ref().filter(|d| has_dwarf(d)).unwrap_or(&file);
        let dwarf = if has_dwarf(dwarf_source) { load_dwarf(dwarf_source) } else { None };
        let mut symbols = symbols_of(debug_file.as_ref().unwrap_or(&file));
        if symbols.is_empty() {
            symbols = symbols_of(&file);
        }
        let build_id = file.build_id().ok().flatten().map(<[u8]>::to_vec);
        Ok(Binary { segments, dwarf, symbols, build_id })
    }

    /// The linked address of a file offset, through the segment holding it.
    fn linked_address(&self, file_offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|&&(offset, size, _)| file_offset >= offset && file_offset - offset < size)
            .map(|&(offset, _, address)| address.wrapping_add(file_offset - offset))
    }

    /// Frames for a linked address, innermost first: DWARF's inlined chain, each frame's name
    /// completed from the symbol table where DWARF has none.
    fn frames(&self, address: u64) -> Vec<Symbol> {
        let mut out = Vec::new();
        // addr2line searches its ranges for `[address, address + 1)`, which overflows (a panic
        // where overflow is checked) at the last address; no code is linked there, and a
        // crafted profile can map an address to it (found by the `elf_symbols` fuzz target).
        let dwarf = self.dwarf.as_ref().filter(|_| address != u64::MAX);
        if let Some(context) = dwarf {
            if let Ok(mut frames) = context.find_frames(address).skip_all_loads() {
                while let Ok(Some(frame)) = frames.next() {
                    let function = frame
                        .function
                        .as_ref()
                        .and_then(|f| f.demangle().ok())
                        .map(Cow::into_owned)
                        .unwrap_or_default();
                    let (file, line) = frame
                        .location
                        .map(|l| (l.file.unwrap_or_default().to_owned(), l.line.unwrap_or(0)))
                        .unwrap_or_default();
                    out.push(Symbol { function, file, line });
                }
            }
        }
        let symbol = self.symbol(address);
        match out.last_mut() {
            // The outermost frame is the real function: the symbol table names it when
            // DWARF does not.
            Some(last) if last.function.is_empty() => {
                if let Some(name) = symbol {
                    last.function = name.to_owned();
                }
            }
            Some(_) => {}
            None => {
                if let Some(name) = symbol {
                    out.push(Symbol { function: name.to_owned(), file: String::new(), line: 0 });
                }
            }
        }
        out.retain(|s| !s.function.is_empty());
        out
    }

    /// The symbol at or before `address`.
    fn symbol(&self, address: u64) -> Option<&str> {
        let i = self.symbols.partition_point(|&(a, _)| a <= address);
        i.checked_sub(1).map(|i| self.symbols[i].1.as_str())
    }
}

fn has_dwarf(file: &object::File<'_>) -> bool {
    file.section_by_name(".debug_info").is_some_and(|s| s.size() > 0)
}

/// The installed debugging file for `file`: `<root>/.build-id/xx/rest.debug` under each root,
/// then the `.gnu_debuglink` name in `<dir>`, `<dir>/.debug` and each `<root><dir>`.
fn debug_file(file: &object::File<'_>, path: &Path, roots: &[PathBuf]) -> Option<PathBuf> {
    if let Some(found) = file.build_id().ok().flatten().and_then(|id| build_id_path(roots, id)) {
        return Some(found);
    }
    let (name, _crc) = file.gnu_debuglink().ok().flatten()?;
    let name = std::str::from_utf8(name).ok()?;
    let dir = path.parent()?;
    let under_roots = roots.iter().map(|root| root.join(dir.strip_prefix("/").unwrap_or(dir)).join(name));
    [dir.join(name), dir.join(".debug").join(name)].into_iter().chain(under_roots).find(|p| p.is_file() && p != path)
}

/// `<root>/.build-id/xx/rest.debug` for build id `xxrest` under the first root that has it.
fn build_id_path(roots: &[PathBuf], id: &[u8]) -> Option<PathBuf> {
    let (first, rest) = id.split_first()?;
    let relative = Path::new(".build-id").join(format!("{first:02x}")).join(format!("{}.debug", hex(rest)));
    roots.iter().map(|root| root.join(&relative)).find(|p| p.is_file())
}

/// Lowercase hex, as build ids are written.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of lowercase or uppercase hex; `None` for anything else (or an odd length).
fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

fn load_dwarf(file: &object::File<'_>) -> Option<addr2line::Context<Slice>> {
    use gimli::SectionId;
    let endian = if file.is_little_endian() { gimli::RunTimeEndian::Little } else { gimli::RunTimeEndian::Big };
    // `.debug_info` is most of the bytes to inflate: it inflates in a second thread while
    // this one does the others.
    const OTHERS: [SectionId; 9] = [
        SectionId::DebugAbbrev,
        SectionId::DebugAddr,
        SectionId::DebugAranges,
        SectionId::DebugLine,
        SectionId::DebugLineStr,
        SectionId::DebugRanges,
        SectionId::DebugRngLists,
        SectionId::DebugStr,
        SectionId::DebugStrOffsets,
    ];
    let bytes = |id: SectionId| file.section_by_name(id.name()).and_then(|s| section_data(&s));
    let (info, others) = std::thread::scope(|scope| {
        let info = scope.spawn(|| bytes(SectionId::DebugInfo));
        let others: Vec<_> = OTHERS.iter().map(|&id| (id, bytes(id))).collect();
        (info.join().ok().flatten(), others)
    });
    let mut loaded: HashMap<SectionId, Cow<'_, [u8]>> =
        others.into_iter().filter_map(|(id, b)| Some((id, b?))).collect();
    if let Some(info) = info {
        loaded.insert(SectionId::DebugInfo, info);
    }
    // Other sections (location lists, which say where variables live and name no frame;
    // type units) are left unread.
    let load = |id: SectionId| -> Result<Slice, gimli::Error> {
        let data: &[u8] = loaded.get(&id).map_or(&[], |b| b);
        Ok(gimli::EndianRcSlice::new(Rc::from(data), endian))
    };
    let dwarf = gimli::Dwarf::load(load).ok()?;
    addr2line::Context::from_dwarf(dwarf).ok()
}

/// A section's bytes, inflated when compressed with zlib (as Debian's debugging files are).
/// A section compressed otherwise (zstd) or that does not inflate to its stated size reads
/// as absent: its binary is then named from its symbol table.
fn section_data<'d>(section: &object::Section<'d, '_>) -> Option<Cow<'d, [u8]>> {
    let compressed = section.compressed_data().ok()?;
    match compressed.format {
        object::CompressionFormat::None => Some(Cow::Borrowed(compressed.data)),
        object::CompressionFormat::Zlib => {
            // Grows with what actually inflates, up to the stated size: room is made up front
            // only for what the compressed bytes could plausibly hold.
            let plausible = compressed.data.len().saturating_mul(16);
            let mut out =
                Vec::with_capacity(usize::try_from(compressed.uncompressed_size).map_or(0, |n| n.min(plausible)));
            flate2::read::ZlibDecoder::new(compressed.data)
                .take(compressed.uncompressed_size)
                .read_to_end(&mut out)
                .ok()?;
            (out.len() as u64 == compressed.uncompressed_size).then_some(Cow::Owned(out))
        }
        _ => None,
    }
}

/// Defined text and data symbols, by address (`.symtab`, else `.dynsym`), demangled; a
/// 64-bit PowerPC ELFv1 function symbol at its code, not its descriptor.
fn symbols_of(file: &object::File<'_>) -> Vec<(u64, String)> {
    let descriptors = FunctionDescriptors::of(file);
    let mut symbols: Vec<(u64, String)> = file
        .symbol_map()
        .symbols()
        .iter()
        .map(|s| {
            let address = descriptors.as_ref().and_then(|d| d.entry(s.address())).unwrap_or(s.address());
            (address, addr2line::demangle_auto(Cow::Borrowed(s.name()), None).into_owned())
        })
        .collect();
    if descriptors.is_some() {
        symbols.sort_by_key(|&(address, _)| address);
    }
    symbols
}

/// The `.opd` section of a 64-bit PowerPC ELFv1 binary (big-endian Linux before ELFv2): there
/// a function symbol's value is the address of its descriptor (entry point, TOC, environment,
/// 8 bytes each), not of its code, so `nm`'s nearest symbol to a code address is some data
/// symbol (google-pprof names libc's code `__h_errno`).
struct FunctionDescriptors<'d> {
    address: u64,
    data: Cow<'d, [u8]>,
}

impl<'d> FunctionDescriptors<'d> {
    fn of(file: &object::File<'d>) -> Option<Self> {
        let elf_v1 = match file.flags() {
            object::FileFlags::Elf { e_flags, .. } => e_flags & object::elf::EF_PPC64_ABI != 2,
            _ => false,
        };
        if file.architecture() != object::Architecture::PowerPc64 || file.is_little_endian() || !elf_v1 {
            return None;
        }
        let opd = file.section_by_name(".opd")?;
        Some(FunctionDescriptors { address: opd.address(), data: section_data(&opd)? })
    }

    /// The entry point in the descriptor at `address`, if it is one.
    fn entry(&self, address: u64) -> Option<u64> {
        let at = usize::try_from(address.checked_sub(self.address)?).ok()?;
        let word = self.data.get(at..at.checked_add(8)?)?;
        Some(u64::from_be_bytes(word.try_into().ok()?))
    }
}
