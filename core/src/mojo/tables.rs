//! String and frame definitions per process, in the caller's storage.
//!
//! MOJO keys belong to the pid of the last STACK, so both tables are keyed by `(pid, key)`.
//! They are open-addressing hash tables over the caller's slots (linear probing, at most
//! 7/8 full), hashed with the caller's seed so that keys crafted against one run cannot make
//! lookups linear; names live in the caller's byte arena. A table or arena that is full is a
//! [`TableError::Capacity`] naming which, so a file defining millions of keys costs the memory
//! the caller gave, not an allocation per key.
//!
//! The rules are the real readers': a later definition of a key replaces the earlier one; a
//! frame takes its file and scope names when it is defined (a string redefined later does not
//! rename it); string key 1 in a frame is `"<unknown>"` whether defined or not; a definition
//! before any STACK, or a frame naming a string its process never defined, is an error.

use super::{FrameDef, UNKNOWN_STRING_KEY};

/// What string key 1 stands for in a frame.
pub const UNKNOWN: &[u8] = b"<unknown>";

/// A name in the arena, or `"<unknown>"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Name {
    Unknown,
    Arena { start: u32, len: u32 },
}

/// One slot of the string table; [`StringSlot::EMPTY`] to make storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StringSlot {
    entry: Option<(u64, u64, Name)>,
}

impl StringSlot {
    /// A free slot.
    pub const EMPTY: StringSlot = StringSlot { entry: None };
}

/// One slot of the frame table; [`FrameSlot::EMPTY`] to make storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameSlot {
    entry: Option<(u64, FrameDef, Name, Name)>,
}

impl FrameSlot {
    /// A free slot.
    pub const EMPTY: FrameSlot = FrameSlot { entry: None };
}

/// Which part of the storage ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TableResource {
    /// String slots.
    Strings,
    /// Frame slots.
    Frames,
    /// Bytes of names.
    NameBytes,
}

/// A definition the tables cannot take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TableError {
    /// The caller's storage is full.
    Capacity(TableResource),
    /// A frame names a string its process has not defined.
    UndefinedString {
        /// Process id.
        pid: u64,
        /// String key.
        key: u64,
    },
}

impl core::fmt::Display for TableError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TableError::Capacity(r) => write!(f, "no room for more {r:?} in the tables' storage"),
            TableError::UndefinedString { pid, key } => write!(f, "undefined string key {key} (pid {pid})"),
        }
    }
}

/// A frame as defined, with its names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameNames<'t> {
    /// The definition (string keys and span).
    pub def: FrameDef,
    /// File name.
    pub filename: &'t [u8],
    /// Scope (function) name.
    pub scope: &'t [u8],
}

/// The definitions of a MOJO file so far.
pub struct Tables<'s> {
    strings: &'s mut [StringSlot],
    frames: &'s mut [FrameSlot],
    bytes: &'s mut [u8],
    used_bytes: usize,
    string_count: usize,
    frame_count: usize,
    seed: u64,
}

/// Slot index for `(pid, key)`: a keyed mix, so collisions cannot be planned without `seed`.
fn home(seed: u64, pid: u64, key: u64, slots: usize) -> usize {
    let mut h = seed ^ key.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ pid.rotate_left(29);
    h ^= h >> 31;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    (h % slots as u64) as usize
}

/// Most slots of a table in use: 7/8, so that every probe meets a free slot.
fn room(slots: usize) -> usize {
    slots - slots / 8 - 1
}

impl<'s> Tables<'s> {
    /// Tables over the caller's slots and name bytes. `seed` keys the hash (any value; a
    /// random one where inputs may be hostile).
    pub fn new(strings: &'s mut [StringSlot], frames: &'s mut [FrameSlot], bytes: &'s mut [u8], seed: u64) -> Self {
        strings.fill(StringSlot::EMPTY);
        frames.fill(FrameSlot::EMPTY);
        Tables { strings, frames, bytes, used_bytes: 0, string_count: 0, frame_count: 0, seed }
    }

    /// Defines (or redefines) string `key` of process `pid`.
    pub fn define_string(&mut self, pid: u64, key: u64, value: &[u8]) -> Result<(), TableError> {
        let slots = self.strings.len();
        if slots == 0 {
            return Err(TableError::Capacity(TableResource::Strings));
        }
        let mut i = home(self.seed, pid, key, slots);
        loop {
            match self.strings[i].entry {
                Some((p, k, _)) if (p, k) == (pid, key) => break,
                Some(_) => i = (i + 1) % slots,
                None => {
                    if self.string_count >= room(slots) {
                        return Err(TableError::Capacity(TableResource::Strings));
                    }
                    break;
                }
            }
        }
        let name = self.store(value)?;
        if self.strings[i].entry.is_none() {
            self.string_count += 1;
        }
        self.strings[i].entry = Some((pid, key, name));
        Ok(())
    }

    /// String `key` of process `pid`, if defined.
    pub fn string(&self, pid: u64, key: u64) -> Option<&[u8]> {
        self.string_name(pid, key).map(|n| self.name(n))
    }

    /// Defines (or redefines) a frame of process `pid`, taking its names now.
    pub fn define_frame(&mut self, pid: u64, def: FrameDef) -> Result<(), TableError> {
        let lookup = |key| match key {
            UNKNOWN_STRING_KEY => Ok(Name::Unknown),
            key => self.string_name(pid, key).ok_or(TableError::UndefinedString { pid, key }),
        };
        let (filename, scope) = (lookup(def.filename)?, lookup(def.scope)?);
        let slots = self.frames.len();
        if slots == 0 {
            return Err(TableError::Capacity(TableResource::Frames));
        }
        let mut i = home(self.seed, pid, def.key, slots);
        loop {
            match self.frames[i].entry {
                Some((p, d, _, _)) if (p, d.key) == (pid, def.key) => break,
                Some(_) => i = (i + 1) % slots,
                None => {
                    if self.frame_count >= room(slots) {
                        return Err(TableError::Capacity(TableResource::Frames));
                    }
                    self.frame_count += 1;
                    break;
                }
            }
        }
        self.frames[i].entry = Some((pid, def, filename, scope));
        Ok(())
    }

    /// Frame `key` of process `pid`, if defined.
    pub fn frame(&self, pid: u64, key: u64) -> Option<FrameNames<'_>> {
        let slots = self.frames.len();
        if slots == 0 {
            return None;
        }
        let mut i = home(self.seed, pid, key, slots);
        loop {
            match self.frames[i].entry {
                Some((p, def, filename, scope)) if (p, def.key) == (pid, key) => {
                    return Some(FrameNames { def, filename: self.name(filename), scope: self.name(scope) })
                }
                Some(_) => i = (i + 1) % slots,
                None => return None,
            }
        }
    }

    /// Strings defined.
    pub fn string_count(&self) -> usize {
        self.string_count
    }

    /// Frames defined.
    pub fn frame_count(&self) -> usize {
        self.frame_count
    }

    /// Name bytes used (redefinitions keep the bytes of earlier values: frames may name them).
    pub fn name_bytes(&self) -> usize {
        self.used_bytes
    }

    fn string_name(&self, pid: u64, key: u64) -> Option<Name> {
        let slots = self.strings.len();
        if slots == 0 {
            return None;
        }
        let mut i = home(self.seed, pid, key, slots);
        loop {
            match self.strings[i].entry {
                Some((p, k, name)) if (p, k) == (pid, key) => return Some(name),
                Some(_) => i = (i + 1) % slots,
                None => return None,
            }
        }
    }

    fn store(&mut self, value: &[u8]) -> Result<Name, TableError> {
        let full = TableError::Capacity(TableResource::NameBytes);
        let end = self.used_bytes.checked_add(value.len()).filter(|&e| e <= self.bytes.len()).ok_or(full)?;
        let (start, len) =
            (u32::try_from(self.used_bytes).map_err(|_| full)?, u32::try_from(value.len()).map_err(|_| full)?);
        self.bytes[self.used_bytes..end].copy_from_slice(value);
        self.used_bytes = end;
        Ok(Name::Arena { start, len })
    }

    fn name(&self, name: Name) -> &[u8] {
        match name {
            Name::Unknown => UNKNOWN,
            Name::Arena { start, len } => {
                self.bytes.get(start as usize..start as usize + len as usize).unwrap_or_default()
            }
        }
    }
}
