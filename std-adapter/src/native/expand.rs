//! A source's native frames named: each `module+0xADDRESS` frame becomes the frames the
//! binary says the address is in (the function, and every call inlined at it as a frame of
//! its own, innermost first), and every stack holding it is replayed with them in its place.

use crate::model::{Call, Collector, FrameTable};
use crate::symbolize::{symbol_frames, Symbolizer};

/// How a source's native frames fared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NamedCounts {
    /// Frames in the `module+0xADDRESS` form.
    pub native: u64,
    /// Of those, named from their binaries.
    pub named: u64,
    /// Frames the named ones became (more than `named` where calls were inlined).
    pub frames: u64,
}

/// A frame table with its native frames named, and each old frame's new ids.
#[derive(Debug, Clone)]
pub struct Named {
    frames: FrameTable,
    /// Old frame `id`'s new ids are `ids[first[id]..first[id + 1]]`, innermost first.
    first: Vec<u32>,
    ids: Vec<u32>,
    counts: NamedCounts,
}

impl Named {
    /// `frames` with its native frames named by `symbolizer`; `None` when it has none (the
    /// source is then used as it is).
    pub fn of(frames: &FrameTable, symbolizer: &mut Symbolizer) -> Option<Named> {
        let mut counts = NamedCounts::default();
        let mut table = FrameTable::default();
        table.mappings = frames.mappings.clone();
        let (mut first, mut ids) = (Vec::with_capacity(frames.frames.len() + 1), Vec::new());
        for frame in &frames.frames {
            first.push(ids.len() as u32);
            let found = super::parse(&frame.funcname, &frame.filename).map(|native| {
                counts.native += 1;
                let symbols = symbolizer.symbolize_linked(native.module, native.build_id, native.address);
                (native.module, native.address, symbols)
            });
            match found {
                Some((module, address, mut symbols)) if !symbols.is_empty() => {
                    counts.named += 1;
                    // A function named by the symbol table alone is in its module.
                    for symbol in symbols.iter_mut().filter(|s| s.file.is_empty()) {
                        symbol.file = module.to_owned();
                    }
                    for named in symbol_frames(symbols, address, None) {
                        counts.frames += 1;
                        ids.push(table.push(named));
                    }
                }
                // Not native, or not found: the frame stays as it was, never dropped.
                _ => ids.push(table.push(frame.clone())),
            }
        }
        first.push(ids.len() as u32);
        (counts.native > 0).then_some(Named { frames: table, first, ids, counts })
    }

    /// The frame table with native frames named.
    pub fn frames(&self) -> &FrameTable {
        &self.frames
    }

    /// How the native frames fared.
    pub fn counts(&self) -> NamedCounts {
        self.counts
    }

    /// A collector that hands `inner` each call with its stack in the named frames' ids.
    pub fn collector<'a>(&'a self, inner: &'a mut dyn Collector) -> impl Collector + 'a {
        Expanding { named: self, inner, stack: Vec::new() }
    }
}

struct Expanding<'a> {
    named: &'a Named,
    inner: &'a mut dyn Collector,
    stack: Vec<u32>,
}

impl Collector for Expanding<'_> {
    fn collect(&mut self, _frames: &FrameTable, call: &Call<'_>) {
        let Named { first, ids, frames, .. } = self.named;
        self.stack.clear();
        for &id in call.stack {
            // An id outside the table cannot come from a source (its stacks use its frames);
            // it is dropped rather than trusted.
            if let (Some(&from), Some(&to)) = (first.get(id as usize), first.get(id as usize + 1)) {
                self.stack.extend_from_slice(&ids[from as usize..to as usize]);
            }
        }
        self.inner.collect(frames, &Call { stack: &self.stack, ..*call });
    }
}
