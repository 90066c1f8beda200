//! gperftools CPU profiles as a [`Source`]: each distinct stack is one call of the samples
//! of all its records (no threads, no times).
//!
//! The maps text comes after the records, and frames must be complete before the first
//! sample, so the file is read once into its distinct stacks, which both real readers sum
//! anyway (libprofiler writes a stack again each time its hash table evicts it), and the
//! replay comes from them, in the order the stacks first appear. Memory grows with the
//! distinct stacks and the maps text, never with the records.
//!
//! Stacks are cleaned as google-pprof, the format's own reader, cleans them:
//! - the innermost address is the signal's program counter, every other one a return
//!   address, so 1 is subtracted from those to point into the call instruction;
//! - when every record has the same second address, it is the profiler's signal frame and
//!   is removed (with the leaf's duplicate just below it, if any), at most twice as go pprof
//!   does (google-pprof repeats while the rule holds; two is as far as either has been seen
//!   to need);
//! - after [`GperftoolsSource::symbolize`], addresses in the profiler's own functions
//!   (`CpuProfiler::prof_handler`, `__restore`, …) are dropped.
//!
//! An address is one frame named `0x…` (hex, as go pprof shows it) until symbolised, then
//! one frame per function inlined there, innermost first. Records of zero samples add
//! nothing and are skipped.

use std::collections::hash_map::Entry;
use std::ops::Range;

use embedded_io::{Read, Seek, SeekFrom};
use tachyon_core::gperftools::{Item, ReadError, Reader, LARGEST_RECORD_WINDOW};
use tachyon_core::kind::FileKind;

use crate::gperftools::write::{reencode, IoSink};
use crate::hash::IdMap;
use crate::model::{
    Call, Clock, Collector, FrameInfo, FrameTable, Naming, Source, SourceInfo, Ticker, Times, MAX_COUNTED_TOTAL,
};
use crate::output::{ConvertError, Destination, Output};
use crate::symbolize::{symbol_frames, Symbol, Symbolizer};

/// Most bytes of maps text read: a real one is a few kilobytes; more is not a process's map.
pub const MAX_MAPS_TEXT: usize = 16 << 20;

/// Functions of the profiler itself that google-pprof drops from CPU profiles' stacks.
pub const PROFILER_FRAMES: [&str; 6] = [
    "ProfileData::Add",
    "ProfileData::prof_handler",
    "CpuProfiler::prof_handler",
    "__FRAME_END__",
    "__pthread_sighandler",
    "__restore",
];

/// How many times the signal-frame rule may remove a second address.
const MAX_SIGNAL_FRAME_PASSES: usize = 2;

/// Why a gperftools profile cannot be read for conversion.
#[derive(Debug)]
pub enum GperftoolsError<E> {
    /// The file broke a rule of the format, or reading it failed.
    Read(ReadError<E>),
    /// The records' counts add up to more than [`MAX_COUNTED_TOTAL`] samples, first with the
    /// record at this file offset.
    CountsTooLarge {
        /// File offset of the record.
        offset: u64,
    },
}

impl<E> From<ReadError<E>> for GperftoolsError<E> {
    fn from(e: ReadError<E>) -> Self {
        GperftoolsError::Read(e)
    }
}

impl<E: std::fmt::Debug> std::fmt::Display for GperftoolsError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GperftoolsError::Read(e) => write!(f, "{e}"),
            GperftoolsError::CountsTooLarge { offset } => write!(
                f,
                "offset {offset}: the records' counts add up to more than 2^53 samples here (a corrupted count; \
                 conversions add counts up to 2^53)"
            ),
        }
    }
}

impl<E: std::fmt::Debug> std::error::Error for GperftoolsError<E> {}

/// A gperftools CPU profile, read once from `R` (and again by `--to gperftools`).
pub struct GperftoolsSource<R: Read + Seek> {
    source: R,
    info: SourceInfo,
    frames: FrameTable,
    /// Distinct adjusted addresses in first-seen order.
    addresses: Vec<u64>,
    /// Adjusted address → the frame ids standing for it (innermost first), a range of the
    /// frame table since each address's frames are pushed together.
    frames_of: IdMap<u64, Range<u32>>,
    /// Distinct stacks of adjusted addresses with their summed counts, in first-seen order.
    stacks: StackSet,
    /// Signal-frame passes to apply to every record (google-pprof's rule).
    signal_passes: usize,
    /// go pprof's rule instead, for pprof output: the second addresses it removes.
    go_removals: Vec<u64>,
    /// Which reader's cleaning replay applies.
    cleaning: Cleaning,
    /// Scratch for one record's addresses.
    scratch: Vec<u64>,
}

/// The address a stack slot stands for: return addresses (all but the innermost) minus one.
fn adjusted(index: usize, pc: u64) -> u64 {
    if index == 0 {
        pc
    } else {
        pc.wrapping_sub(1)
    }
}

/// One signal-frame pass on a stack of adjusted addresses (google-pprof's
/// `RemoveUninterestingFrames`): the second address goes, and then the new second one too if
/// it is the leaf's own address minus one (the handler's copy of the interrupted frame).
fn remove_second(stack: &mut Vec<u64>) {
    if stack.len() < 2 {
        return;
    }
    stack.remove(1);
    if stack.len() > 2 && stack[1].wrapping_add(1) == stack[0] {
        stack.remove(1);
    }
}

/// Distinct stacks of adjusted addresses, stored end to end in first-seen order, found by a
/// hash of their addresses keyed per process (so a crafted file cannot choose collisions).
#[derive(Default)]
struct StackSet {
    addresses: Vec<u64>,
    stacks: Vec<StackEntry>,
    /// Hash → the latest stack of that hash; each stack links to the previous one.
    latest: IdMap<u64, u32>,
    key: u64,
}

struct StackEntry {
    start: usize,
    len: usize,
    /// Samples of all its records.
    samples: u64,
    /// Its records (go pprof's signal-frame rule counts records).
    records: u64,
    /// The previous stack of the same hash.
    previous: Option<u32>,
}

impl StackSet {
    fn new() -> Self {
        let key = crate::hash::IdHash::default().key();
        StackSet { key, ..StackSet::default() }
    }

    /// The hash of a stack, as [`StackSet::add`] wants it.
    #[inline]
    fn hash(&self, stack: &[u64]) -> u64 {
        stack.iter().fold(self.key, |h, &a| (h.rotate_left(29) ^ a).wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }

    /// Counts one record of `stack`.
    fn add(&mut self, stack: &[u64], samples: u64) {
        let hash = self.hash(stack);
        let mut at = self.latest.get(&hash).copied();
        while let Some(i) = at {
            let e = &mut self.stacks[i as usize];
            if self.addresses[e.start..e.start + e.len] == *stack {
                e.samples += samples;
                e.records += 1;
                return;
            }
            at = e.previous;
        }
        let previous = self.latest.insert(hash, self.stacks.len() as u32);
        self.stacks.push(StackEntry { start: self.addresses.len(), len: stack.len(), samples, records: 1, previous });
        self.addresses.extend_from_slice(stack);
    }

    /// `(addresses, samples, records)` of each stack, in first-seen order.
    fn iter(&self) -> impl Iterator<Item = (&[u64], u64, u64)> + '_ {
        self.stacks.iter().map(|e| (&self.addresses[e.start..e.start + e.len], e.samples, e.records))
    }
}

/// Whose cleaning of stacks a conversion reproduces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cleaning {
    /// google-pprof's (every output but pprof): see the module's documentation.
    GooglePprof,
    /// go pprof's legacy parser's (pprof output, which go pprof then reads as it read the
    /// original): a second address shared by all records but one in 32 is removed, up to
    /// twice, from the records that have it; then a second address equal to the leaf's
    /// minus one is removed.
    GoPprof,
}

/// The second addresses go pprof's legacy parser removes (`parseCPU`): per pass, an address
/// that is the second of at least `N − N/32` of the `N` records (each record counts once,
/// whatever its samples), removed from those records before the next pass.
fn go_signal_frames(stacks: &StackSet) -> Vec<u64> {
    let total: u64 = stacks.iter().map(|(_, _, records)| records).sum();
    let margin = total / 32;
    let mut removals: Vec<u64> = Vec::new();
    for _ in 0..MAX_SIGNAL_FRAME_PASSES {
        let mut seconds: IdMap<u64, u64> = IdMap::default();
        let mut scratch = Vec::new();
        for (stack, _, n) in stacks.iter() {
            scratch.clear();
            scratch.extend_from_slice(stack);
            go_remove(&mut scratch, &removals);
            if let Some(&a) = scratch.get(1) {
                *seconds.entry(a).or_insert(0) += n;
            }
        }
        match seconds.into_iter().find(|&(_, n)| n >= total - margin) {
            Some((a, _)) => removals.push(a),
            None => break,
        }
    }
    removals
}

/// go's signal-frame passes on one stack.
fn go_remove(stack: &mut Vec<u64>, removals: &[u64]) {
    for &a in removals {
        if stack.len() > 1 && stack[1] == a {
            stack.remove(1);
        }
    }
}

/// go's passes, then its `cleanupDuplicateLocations`.
fn go_clean(stack: &mut Vec<u64>, removals: &[u64]) {
    go_remove(stack, removals);
    if stack.len() > 1 && stack[0] == stack[1].wrapping_add(1) {
        stack.remove(1);
    }
}

/// Tracks whether every record has the same second address, pass after pass.
#[derive(Default)]
struct SignalFrames {
    /// Per pass, the second address every record so far had (`None` before the first), or
    /// `Err` once two differ or a record is too short.
    second: [Option<Result<u64, ()>>; MAX_SIGNAL_FRAME_PASSES],
}

impl SignalFrames {
    fn record(&mut self, stack: &mut Vec<u64>) {
        for pass in 0..MAX_SIGNAL_FRAME_PASSES {
            let seen = match stack.get(1) {
                Some(&a) => Ok(a),
                None => Err(()),
            };
            let slot = &mut self.second[pass];
            *slot = match (*slot, seen) {
                (None, s) => Some(s),
                (Some(Ok(a)), Ok(b)) if a == b => Some(Ok(a)),
                _ => Some(Err(())),
            };
            remove_second(stack);
        }
    }

    /// Passes to apply: the leading passes whose rule held for every record.
    fn passes(&self) -> usize {
        self.second.iter().take_while(|s| matches!(s, Some(Ok(_)))).count()
    }
}

impl<R: Read + Seek> GperftoolsSource<R> {
    /// Reads the profile once for its addresses, the signal-frame rule and the maps text.
    pub fn open(mut source: R) -> Result<Self, GperftoolsError<R::Error>> {
        let mut window = vec![0u8; LARGEST_RECORD_WINDOW];
        // Distinct stacks (adjusted addresses); a stack's records are summed, as both real
        // readers sum them.
        let mut stacks = StackSet::new();
        let mut scratch = Vec::new();
        let (period_us, samples, maps_text) = {
            let mut reader = Reader::open(&mut source, &mut window)?;
            let mut end = None;
            let mut total = 0u64;
            while let Some(item) = reader.next_item()? {
                match item {
                    Item::Record(r) => {
                        total = total.saturating_add(r.count);
                        if total > MAX_COUNTED_TOTAL {
                            return Err(GperftoolsError::CountsTooLarge { offset: r.offset });
                        }
                        scratch.clear();
                        scratch.extend(r.pcs.iter().enumerate().map(|(i, pc)| adjusted(i, pc)));
                        stacks.add(&scratch, r.count);
                    }
                    Item::End(e) => end = Some(e),
                    Item::ExtraHeaderWord(_) => {}
                }
            }
            let (period, samples, word) = (reader.header().period_us, reader.samples(), reader.word());
            let skip = end.as_ref().and_then(|e| e.text_skip(word));
            let mut maps_text = Vec::new();
            if let Some(skip) = skip {
                let mut tail = reader.into_tail();
                let mut chunk = [0u8; 8192];
                let mut skipped = 0u64;
                loop {
                    let n = tail.read(&mut chunk)?;
                    if n == 0 || maps_text.len() >= MAX_MAPS_TEXT {
                        break;
                    }
                    let from = (skip.saturating_sub(skipped)).min(n as u64) as usize;
                    skipped += n as u64;
                    maps_text.extend_from_slice(&chunk[from..n]);
                }
                maps_text.truncate(MAX_MAPS_TEXT);
            }
            (period, samples, maps_text)
        };
        // The signal-frame rule looks at every record, those of no samples too.
        let mut signal = SignalFrames::default();
        for (stack, _, _) in stacks.iter() {
            scratch.clear();
            scratch.extend_from_slice(stack);
            signal.record(&mut scratch);
        }
        let go_removals = go_signal_frames(&stacks);
        // Addresses of the stacks that have samples, in first-seen order.
        let mut frames_of: IdMap<u64, Range<u32>> = IdMap::default();
        let mut addresses: Vec<u64> = Vec::new();
        for (stack, _, _) in stacks.iter().filter(|(_, n, _)| *n > 0) {
            for &a in stack.iter() {
                if let Entry::Vacant(e) = frames_of.entry(a) {
                    e.insert(0..0);
                    addresses.push(a);
                }
            }
        }
        let mut frames = FrameTable::default();
        frames.mappings = parse_maps(&String::from_utf8_lossy(&maps_text));
        frames.mappings.sort_by_key(|m| m.start);
        let info = SourceInfo {
            kind: FileKind::Gperftools,
            start_time_us: 0,
            sample_interval_us: period_us,
            mode: "cpu".into(),
            cpython_mode: Some(tachyon_core::header::ProfilingMode::Cpu),
            expected_samples: samples,
            timestamps: false,
            threads: false,
            naming: Naming::Native,
            clock: Clock::None,
        };
        let mut this = GperftoolsSource {
            source,
            info,
            frames,
            addresses,
            frames_of,
            stacks,
            signal_passes: signal.passes(),
            go_removals,
            cleaning: Cleaning::GooglePprof,
            scratch,
        };
        this.name_frames(|_, _| Vec::new());
        Ok(this)
    }

    /// Names every address from the binaries `symbolizer` finds: function, file and line,
    /// one frame per inlined function; addresses in the profiler's own functions are
    /// dropped. Addresses it knows nothing of keep their `0x…` name.
    pub fn symbolize(&mut self, symbolizer: &mut Symbolizer) {
        let mappings = self.frames.mappings.clone();
        self.name_frames(|address, mapping| match mapping {
            Some(m) => symbolizer.symbolize(&mappings[m as usize], address),
            None => Vec::new(),
        });
    }

    /// Rebuilds the frame table, asking `symbols` for each address's frames.
    fn name_frames(&mut self, mut symbols: impl FnMut(u64, Option<u32>) -> Vec<Symbol>) {
        let mut frames = FrameTable::default();
        frames.mappings = std::mem::take(&mut self.frames.mappings);
        for &a in &self.addresses {
            let mapping = frames.mapping_of(a);
            let found = symbols(a, mapping);
            let first = frames.frames.len() as u32;
            let profiler = found.last().is_some_and(|s| PROFILER_FRAMES.contains(&s.function.as_str()));
            if profiler {
                // No frames: the address drops out of every stack.
            } else if found.is_empty() {
                frames.push(FrameInfo {
                    funcname: format!("{a:#x}"),
                    address: Some(a),
                    mapping,
                    anonymous: true,
                    ..FrameInfo::default()
                });
            } else {
                for frame in symbol_frames(found, a, mapping) {
                    frames.push(frame);
                }
            }
            let end = frames.frames.len() as u32;
            if let Some(range) = self.frames_of.get_mut(&a) {
                *range = first..end;
            }
        }
        self.frames = frames;
    }
}

/// The maps text's reader lives with the symboliser, which the capture path's module table
/// shares.
pub use crate::symbolize::parse_maps;

impl<R: Read + Seek> Source for GperftoolsSource<R> {
    type Error = GperftoolsError<R::Error>;

    /// pprof output reproduces go pprof's cleaning, so that go pprof shows for our file the
    /// samples it shows for the original; every other output google-pprof's.
    fn prepare(&mut self, output: &Output) -> Result<(), Self::Error> {
        self.cleaning = if matches!(output, Output::Pprof) { Cleaning::GoPprof } else { Cleaning::GooglePprof };
        Ok(())
    }

    /// `--to gperftools`: the records re-encoded from the file, not from the hub (which has
    /// cleaned and symbolised them).
    fn pass_through(
        &mut self,
        output: &Output,
        dest: &mut Destination<'_>,
        progress: &mut dyn FnMut(u64),
    ) -> Option<Result<u64, ConvertError<Self::Error>>> {
        let Output::Gperftools { word, big_endian } = *output else { return None };
        if let Err(error) = self.source.seek(SeekFrom::Start(0)) {
            return Some(Err(ConvertError::Read(ReadError::Io { offset: 0, error }.into())));
        }
        let source = &mut self.source;
        Some(
            dest.write_buffered(|out| reencode(source, IoSink(out), word, big_endian, progress))
                .map_err(|e| e.map_read(GperftoolsError::Read)),
        )
    }

    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn frames(&self) -> &FrameTable {
        &self.frames
    }

    fn replay(&mut self, collector: &mut dyn Collector, progress: &mut dyn FnMut(u64)) -> Result<u64, Self::Error> {
        let mut stack: Vec<u32> = Vec::new();
        let mut ticker = Ticker::default();
        let mut done = 0u64;
        for (addresses, count, _) in self.stacks.iter().filter(|(_, n, _)| *n > 0) {
            self.scratch.clear();
            self.scratch.extend_from_slice(addresses);
            match self.cleaning {
                Cleaning::GooglePprof => {
                    for _ in 0..self.signal_passes {
                        remove_second(&mut self.scratch);
                    }
                }
                Cleaning::GoPprof => go_clean(&mut self.scratch, &self.go_removals),
            }
            stack.clear();
            for a in &self.scratch {
                // Every address of a stack with samples was numbered when the file was read.
                if let Some(range) = self.frames_of.get(a) {
                    stack.extend(range.clone());
                }
            }
            let call = Call {
                times: Times::Counted(count),
                interpreter_id: 0,
                thread_id: 0,
                status: 0,
                stack: &stack,
                continued: false,
            };
            collector.collect(&self.frames, &call);
            done += count;
            ticker.tick(done, progress);
        }
        progress(done);
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::parse_maps;

    #[test]
    fn maps_lines_and_attribute_substitution() {
        let text = "00400000-00401000 r-xp 00001000 00:00 12   $build/prog\n\
                    build=/src/out\n\
                    00500000-00501000 r-xp 00002000 00:00 12   $build/prog\n\
                    not a mapping\n\
                    00600000-00601000 r--p 00003000 00:00 12   /src/out/prog\n\
                    7f00-7f10 r-xp 0 00:00 0 [vdso]\n";
        let maps = parse_maps(text);
        let files: Vec<&str> = maps.iter().map(|m| m.file.as_str()).collect();
        // Before the attribute line, `$build` stands for nothing yet; the data mapping is
        // not one (no `x`).
        assert_eq!(files, ["$build/prog", "/src/out/prog", "[vdso]"]);
        assert_eq!((maps[1].start, maps[1].limit, maps[1].offset), (0x500000, 0x501000, 0x2000));
    }
}
