//! Several inputs of one format replayed as one profile, one after the other (`tachyon
//! merge`): their frame tables laid end to end (each part's frame ids and mappings shifted
//! past the earlier parts'), their samples replayed in the order of the inputs.

use crate::model::{Call, Collector, FrameTable, Source, SourceInfo};
use crate::output::Output;

/// The parts, as one source.
pub struct Chain<S> {
    parts: Vec<S>,
    frames: FrameTable,
    /// Per part, the id of its first frame in `frames`.
    offsets: Vec<u32>,
    info: SourceInfo,
}

/// The first part's facts, with the parts' expected samples summed; `None` without parts.
fn facts<S: Source>(parts: &[S]) -> Option<SourceInfo> {
    let mut info = parts.first()?.info().clone();
    info.expected_samples = parts.iter().map(|p| p.info().expected_samples).sum();
    Some(info)
}

impl<S: Source> Chain<S> {
    /// The parts in order; the profile's facts are the first part's, its expected samples
    /// the sum. `None` without parts.
    pub fn new(parts: Vec<S>) -> Option<Self> {
        let info = facts(&parts)?;
        let mut chain = Chain { parts, frames: FrameTable::default(), offsets: Vec::new(), info };
        chain.lay_out();
        Some(chain)
    }

    /// The combined frame table, from the parts' tables as they are now.
    fn lay_out(&mut self) {
        let mut frames = FrameTable::default();
        let mut offsets = Vec::with_capacity(self.parts.len());
        for part in &self.parts {
            let own = part.frames();
            let shift = frames.mappings.len() as u32;
            frames.mappings.extend(own.mappings.iter().cloned());
            offsets.push(frames.frames.len() as u32);
            for f in &own.frames {
                let mut f = f.clone();
                f.mapping = f.mapping.map(|m| m + shift);
                frames.push(f);
            }
        }
        self.frames = frames;
        self.offsets = offsets;
    }
}

/// A part's calls, their frame ids shifted into the combined table.
struct Shifted<'a> {
    inner: &'a mut dyn Collector,
    frames: &'a FrameTable,
    offset: u32,
    stack: Vec<u32>,
}

impl Collector for Shifted<'_> {
    fn collect(&mut self, _own: &FrameTable, call: &Call<'_>) {
        self.stack.clear();
        self.stack.extend(call.stack.iter().map(|&id| id + self.offset));
        let shifted = Call { stack: &self.stack, ..*call };
        self.inner.collect(self.frames, &shifted);
    }
}

impl<S: Source> Source for Chain<S> {
    type Error = S::Error;

    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn frames(&self) -> &FrameTable {
        &self.frames
    }

    /// The last part's: its last sample is the chain's.
    fn written_unix_us(&self) -> Option<u64> {
        self.parts.last()?.written_unix_us()
    }

    fn prepare(&mut self, output: &Output) -> Result<(), Self::Error> {
        for part in &mut self.parts {
            part.prepare(output)?;
        }
        // Preparing may reshape a part's frames (gperftools cleans stacks per output) or read
        // them and the file's facts (MOJO): the facts and the layout again.
        if let Some(info) = facts(&self.parts) {
            self.info = info;
        }
        self.lay_out();
        Ok(())
    }

    fn replay(&mut self, collector: &mut dyn Collector, progress: &mut dyn FnMut(u64)) -> Result<u64, Self::Error> {
        let Chain { parts, frames, offsets, .. } = self;
        let mut done = 0;
        for (part, &offset) in parts.iter_mut().zip(offsets.iter()) {
            let mut shifted = Shifted { inner: collector, frames, offset, stack: Vec::new() };
            let before = done;
            done += part.replay(&mut shifted, &mut |n| progress(before + n))?;
        }
        Ok(done)
    }
}
