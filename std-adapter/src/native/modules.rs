//! Which module a native address is in, for the writer: the process's executable mappings
//! (`/proc/self/maps`), each module's build id and load segments read from its file once.
//!
//! Everything here runs where a drain runs (a writer thread), never in a signal handler: it
//! reads files and allocates.

use std::collections::HashMap;
use std::fs::File;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use object::{Object, ObjectSegment};

use super::{write_unknown_names, NativeFrame};
use crate::model::Mapping;
use crate::symbolize::{hex, parse_maps};

/// How often at most the mappings are read again for an address in none of them (a library
/// loaded since, or code a JIT wrote, which no reading will find).
const REREAD_AFTER: Duration = Duration::from_millis(100);

/// A process's modules: where each native address is, and its frame's names.
///
/// ```no_run
/// let mut modules = tachyon::native::Modules::this_process();
/// let (function, file) = modules.names(main as *const () as usize as u64);
/// println!("{function} in {file}");
/// # fn main() {}
/// ```
pub struct Modules {
    maps: PathBuf,
    mappings: Vec<Mapping>,
    read_at: Option<Instant>,
    files: HashMap<String, Option<ModuleFile>>,
    function: String,
    file: String,
}

/// What the writer needs of a module's file.
struct ModuleFile {
    build_id: Option<String>,
    /// `(file offset, file size, linked address)` of each `PT_LOAD` segment.
    segments: Vec<(u64, u64, u64)>,
}

impl Modules {
    /// The modules of this process (`/proc/self/maps`, read when first needed).
    pub fn this_process() -> Self {
        Modules::from_maps("/proc/self/maps")
    }

    /// The modules a maps file lists (`/proc/PID/maps` of another process, or a saved copy).
    pub fn from_maps(maps: impl Into<PathBuf>) -> Self {
        Modules {
            maps: maps.into(),
            mappings: Vec::new(),
            read_at: None,
            files: HashMap::new(),
            function: String::new(),
            file: String::new(),
        }
    }

    /// The module `address` is in and the address as the module was linked; `None` for an
    /// address in no executable mapping of a file.
    pub fn locate(&mut self, address: u64) -> Option<NativeFrame<'_>> {
        let index = match self.mapping_of(address) {
            Some(i) => i,
            None if self.read_at.map_or(true, |at| at.elapsed() >= REREAD_AFTER) => {
                self.reread();
                self.mapping_of(address)?
            }
            None => return None,
        };
        let Modules { mappings, files, .. } = self;
        let mapping = &mappings[index];
        let file_offset = address - mapping.start + mapping.offset;
        let module = files.entry(mapping.file.clone()).or_insert_with(|| ModuleFile::read(&mapping.file));
        // Without the file's segments (unreadable, replaced since), the file offset stands
        // in: in shared libraries and executables linked by GNU ld and lld the two are equal.
        let linked = module.as_ref().and_then(|m| m.linked_address(file_offset)).unwrap_or(file_offset);
        Some(NativeFrame {
            module: &mapping.file,
            build_id: module.as_ref().and_then(|m| m.build_id.as_deref()),
            address: linked,
        })
    }

    /// The frame names of `address` (see [`crate::native`]): `(function, file)`.
    pub fn names(&mut self, address: u64) -> (&str, &str) {
        let (mut function, mut file) = (std::mem::take(&mut self.function), std::mem::take(&mut self.file));
        match self.locate(address) {
            Some(frame) => frame.write_names(&mut function, &mut file),
            None => write_unknown_names(address, &mut function, &mut file),
        }
        (self.function, self.file) = (function, file);
        (&self.function, &self.file)
    }

    fn mapping_of(&self, address: u64) -> Option<usize> {
        let i = self.mappings.partition_point(|m| m.start <= address).checked_sub(1)?;
        let m = &self.mappings[i];
        // Only files: anonymous mappings and the kernel's ([vdso]) name no module to read.
        (address < m.limit && m.file.starts_with('/')).then_some(i)
    }

    fn reread(&mut self) {
        self.read_at = Some(Instant::now());
        if let Ok(text) = std::fs::read_to_string(&self.maps) {
            self.mappings = parse_maps(&text);
            self.mappings.sort_by_key(|m| m.start);
        }
    }
}

impl ModuleFile {
    /// The build id and segments of the ELF file at `path`, reading only its headers and
    /// notes; `None` when it cannot be read as ELF.
    fn read(path: &str) -> Option<ModuleFile> {
        let cache = object::ReadCache::new(File::open(path).ok()?);
        let elf = object::File::parse(&cache).ok()?;
        let segments = elf
            .segments()
            .map(|s| {
                let (offset, size) = s.file_range();
                (offset, size, s.address())
            })
            .collect();
        let build_id = elf.build_id().ok().flatten().map(hex);
        Some(ModuleFile { build_id, segments })
    }

    fn linked_address(&self, file_offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|&&(offset, size, _)| file_offset >= offset && file_offset - offset < size)
            .map(|&(offset, _, address)| address.wrapping_add(file_offset - offset))
    }
}
