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
//!
//! With the `alloc` feature, `Tables::growable` owns its storage and doubles a full table
//! or arena up to the caller's [`Limits`], so a host reads any file in memory that follows
//! its definitions (each took bytes of the file), and a flood still ends at the limits.

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

/// What the probing and growing of both tables need of a slot.
trait Slot: Copy {
    #[cfg_attr(not(feature = "alloc"), allow(dead_code))]
    const FREE: Self;
    /// `(pid, key)` of the entry held, `None` when free.
    fn owner(&self) -> Option<(u64, u64)>;
}

impl Slot for StringSlot {
    const FREE: Self = StringSlot::EMPTY;
    fn owner(&self) -> Option<(u64, u64)> {
        self.entry.map(|(pid, key, _)| (pid, key))
    }
}

impl Slot for FrameSlot {
    const FREE: Self = FrameSlot::EMPTY;
    fn owner(&self) -> Option<(u64, u64)> {
        self.entry.map(|(pid, def, _, _)| (pid, def.key))
    }
}

/// The slot holding `(pid, key)` (`true`), or the free slot where it would go (`false`), by
/// linear probing from its home slot; `None` when there are no slots (or, which the 7/8 rule
/// prevents, no free one).
fn probe<T: Slot>(seed: u64, slots: &[T], pid: u64, key: u64) -> Option<(usize, bool)> {
    let len = slots.len();
    let mut i = home(seed, pid, key, len.max(1));
    for _ in 0..len {
        match slots[i].owner() {
            Some(owner) if owner == (pid, key) => return Some((i, true)),
            Some(_) => i = (i + 1) % len,
            None => return Some((i, false)),
        }
    }
    None
}

/// Doubles owned slots up to `limit`, every entry rehashed; false for borrowed slots, without
/// a limit (fixed tables) or at it.
fn grow<T: Slot>(slots: &mut Slots<'_, T>, limit: Option<usize>, seed: u64) -> bool {
    #[cfg(feature = "alloc")]
    if let (Slots::Owned(old), Some(limit)) = (slots, limit) {
        let len = (old.len() * 2).max(64).min(limit);
        if len > old.len() {
            let mut new = alloc::vec![T::FREE; len];
            for slot in old.iter() {
                if let Some((i, _)) = slot.owner().and_then(|(pid, key)| probe(seed, &new, pid, key)) {
                    new[i] = *slot;
                }
            }
            *old = new;
            return true;
        }
    }
    #[cfg(not(feature = "alloc"))]
    let _ = (slots, limit, seed);
    false
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

/// The most a growable table holds (`Tables::growable`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// String slots (7/8 of them usable).
    pub string_slots: usize,
    /// Frame slots (7/8 of them usable).
    pub frame_slots: usize,
    /// Name bytes.
    pub name_bytes: usize,
}

/// Storage the caller lends, or (feature `alloc`) storage the tables own and grow.
pub(super) enum Slots<'s, T> {
    Borrowed(&'s mut [T]),
    #[cfg(feature = "alloc")]
    Owned(alloc::vec::Vec<T>),
}

impl<T> core::ops::Deref for Slots<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            Slots::Borrowed(s) => s,
            #[cfg(feature = "alloc")]
            Slots::Owned(v) => v,
        }
    }
}

impl<T> core::ops::DerefMut for Slots<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match self {
            Slots::Borrowed(s) => s,
            #[cfg(feature = "alloc")]
            Slots::Owned(v) => v,
        }
    }
}

/// The definitions of a MOJO file so far.
pub struct Tables<'s> {
    strings: Slots<'s, StringSlot>,
    frames: Slots<'s, FrameSlot>,
    bytes: Slots<'s, u8>,
    used_bytes: usize,
    string_count: usize,
    frame_count: usize,
    seed: u64,
    /// Set for growable tables.
    #[cfg_attr(not(feature = "alloc"), allow(dead_code))]
    limits: Option<Limits>,
}

/// Slot index for `(pid, key)`: a keyed mix, so collisions cannot be planned without `seed`.
pub(super) fn home(seed: u64, pid: u64, key: u64, slots: usize) -> usize {
    let mut h = seed ^ key.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ pid.rotate_left(29);
    h ^= h >> 31;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    (h % slots as u64) as usize
}

/// Most slots of a table in use: 7/8, so that every probe meets a free slot.
pub(super) fn room(slots: usize) -> usize {
    slots.saturating_sub(slots / 8 + 1)
}

impl<'s> Tables<'s> {
    /// Tables over the caller's slots and name bytes. `seed` keys the hash (any value; a
    /// random one where inputs may be hostile).
    pub fn new(strings: &'s mut [StringSlot], frames: &'s mut [FrameSlot], bytes: &'s mut [u8], seed: u64) -> Self {
        strings.fill(StringSlot::EMPTY);
        frames.fill(FrameSlot::EMPTY);
        Tables {
            strings: Slots::Borrowed(strings),
            frames: Slots::Borrowed(frames),
            bytes: Slots::Borrowed(bytes),
            used_bytes: 0,
            string_count: 0,
            frame_count: 0,
            seed,
            limits: None,
        }
    }

    /// Tables that own their storage, starting small and doubling what fills up to `limits`.
    #[cfg(feature = "alloc")]
    pub fn growable(limits: Limits, seed: u64) -> Tables<'static> {
        use alloc::vec;
        let start = |max: usize, want: usize| want.min(max);
        Tables {
            strings: Slots::Owned(vec![StringSlot::EMPTY; start(limits.string_slots, 64)]),
            frames: Slots::Owned(vec![FrameSlot::EMPTY; start(limits.frame_slots, 64)]),
            bytes: Slots::Owned(vec![0; start(limits.name_bytes, 4096)]),
            used_bytes: 0,
            string_count: 0,
            frame_count: 0,
            seed,
            limits: Some(limits),
        }
    }

    /// Makes the arena of growable tables hold `needed` bytes within its limit.
    fn grow_bytes(&mut self, needed: usize) -> bool {
        #[cfg(feature = "alloc")]
        if let (Slots::Owned(old), Some(limits)) = (&mut self.bytes, self.limits) {
            if needed <= limits.name_bytes {
                let len = (old.len() * 2).max(needed).min(limits.name_bytes);
                old.resize(len, 0);
                return true;
            }
        }
        let _ = needed;
        false
    }

    /// Defines (or redefines) string `key` of process `pid`.
    pub fn define_string(&mut self, pid: u64, key: u64, value: &[u8]) -> Result<(), TableError> {
        let i = loop {
            match probe(self.seed, &self.strings, pid, key) {
                Some((i, found)) if found || self.string_count < room(self.strings.len()) => break i,
                _ if grow(&mut self.strings, self.limits.map(|l| l.string_slots), self.seed) => {}
                _ => return Err(TableError::Capacity(TableResource::Strings)),
            }
        };
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
        let i = loop {
            match probe(self.seed, &self.frames, pid, def.key) {
                Some((i, found)) if found || self.frame_count < room(self.frames.len()) => break i,
                _ if grow(&mut self.frames, self.limits.map(|l| l.frame_slots), self.seed) => {}
                _ => return Err(TableError::Capacity(TableResource::Frames)),
            }
        };
        if self.frames[i].entry.is_none() {
            self.frame_count += 1;
        }
        self.frames[i].entry = Some((pid, def, filename, scope));
        Ok(())
    }

    /// Frame `key` of process `pid`, if defined.
    pub fn frame(&self, pid: u64, key: u64) -> Option<FrameNames<'_>> {
        match probe(self.seed, &self.frames, pid, key)? {
            (i, true) => self.frames[i].entry.map(|(_, def, filename, scope)| FrameNames {
                def,
                filename: self.name(filename),
                scope: self.name(scope),
            }),
            _ => None,
        }
    }

    /// The seed of the tables' hash.
    pub(super) fn seed(&self) -> u64 {
        self.seed
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
        match probe(self.seed, &self.strings, pid, key)? {
            (i, true) => self.strings[i].entry.map(|(_, _, name)| name),
            _ => None,
        }
    }

    fn store(&mut self, value: &[u8]) -> Result<Name, TableError> {
        let full = TableError::Capacity(TableResource::NameBytes);
        let end = self.used_bytes.checked_add(value.len()).ok_or(full)?;
        if end > self.bytes.len() && !self.grow_bytes(end) {
            return Err(full);
        }
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
