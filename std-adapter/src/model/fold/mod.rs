//! Many profiles folded into one aggregate, a file at a time (`tachyon merge --to …`, and
//! the workers of a distributed merge): distinct frames and distinct stacks with their
//! sample counts. Memory grows with distinct frames and stacks only, never with the number of
//! files or samples: each source is replayed into the fold and dropped before the next.
//!
//! A fold is an aggregate: sample times are not kept (a fleet's clocks do not line up), nor
//! statuses; threads only when asked ([`FoldOptions::threads`]: thread ids of different
//! processes are unrelated, and keeping them makes the stacks grow with the fleet). Inputs
//! must share what a sample means: the same mode (`wall`, `cpu` …, whatever the format calls
//! it). Their intervals may
//! differ: counts are kept in units of the intervals' greatest common divisor, so a sample
//! of a 10 ms profile weighs ten of a 1 ms one and times stay exact.
//!
//! Folds combine ([`Fold::combine`]) in any grouping and order into the same result:
//! [`Fold::finish`] puts frames and stacks in an order of their content alone, so the output
//! of a tree of partial folds is byte for byte that of one fold of every file.

use std::cmp::Ordering;
use std::fmt;

use tachyon_core::header::ProfilingMode;
use tachyon_core::kind::FileKind;
use tachyon_core::tables::Location;

use std::hash::BuildHasher;

use crate::hash::{HashedIds, IdHash, IdMap, PackedStrings, SequenceIndex};
use crate::model::{
    Call, Clock, Collector, FrameInfo, FrameNames, FrameRef, FrameTable, Mapping, NamedCollector, Naming, Source,
    SourceInfo, Ticker, Times,
};
use crate::output::Output;

pub mod wire;

/// How profiles are folded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FoldOptions {
    /// Keep thread ids (stacks of different threads stay apart).
    pub threads: bool,
}

/// Why a profile could not join a fold.
#[derive(Debug)]
pub enum FoldError<E> {
    /// Reading the profile failed.
    Read(E),
    /// The profile's samples mean something else than the fold's, or it has none to fold.
    Mismatch(String),
}

impl<E: fmt::Display> fmt::Display for FoldError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FoldError::Read(e) => write!(f, "{e}"),
            FoldError::Mismatch(why) => f.write_str(why),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for FoldError<E> {}

/// The facts a fold keeps of its profiles.
#[derive(Debug, Clone, PartialEq)]
struct Facts {
    mode: String,
    cpython_mode: Option<ProfilingMode>,
    /// Every input's kind, sorted, once each.
    kinds: Vec<&'static str>,
    /// Units of the counts, µs (the intervals' greatest common divisor; 0 = no interval).
    unit_us: u64,
    /// Every input names frames as Python does.
    python_naming: bool,
    any_threads: bool,
    /// Earliest start and latest end, µs since the Unix epoch, of the inputs that say.
    start_unix_us: Option<u64>,
    end_unix_us: Option<u64>,
}

/// Distinct frames and stacks of many profiles, with their counts.
#[derive(Debug, Clone, Default)]
pub struct Fold {
    options: FoldOptions,
    facts: Option<Facts>,
    /// The frames' names, each held once. A frame's strings were two allocations, made
    /// and freed again for every file a merge read, on the thread that read it and the one
    /// that combined it: with them most of a merge of small files (measured).
    strings: PackedStrings,
    frames: Vec<Frame>,
    /// The table that finds a frame by its hash, the frame held once (in `frames`; ids are
    /// positions there as in the table). A part holds its frames as they come, not found
    /// again here (see `log`): its table stays empty. (The process-keyed fast hash: SipHash
    /// was a sixth of a merge of deep stacks.)
    frame_index: HashedIds,
    hash: IdHash,
    mappings: Vec<Mapping>,
    mapping_index: IdMap<Mapping, u32>,
    /// Distinct stacks, each `[tid low, tid high, frames leaf → root]`, held once end to end
    /// and numbered as first met. (A `HashMap<Box<[u32]>, _>` beside a list of the same
    /// boxes: on deep stacks most of a merge's look-up was waiting for memory, a bucket, a
    /// box and a count in three places, each key held twice.)
    stacks: SequenceIndex,
    /// Each stack's count, by its number.
    counts: Vec<u64>,
    /// In a part that [`Fold::add`] fills from one source: its stacks as they come, end to
    /// end, not found again here — the fold it is combined into finds each (a stack hashed
    /// once, not in the part and again in the fold; no allocation a stack).
    log: Option<Log>,
    /// The logs, strings and frames of parts that were combined, emptied with their memory
    /// kept, for the next parts of this fold (on any thread): a merge's parts are about one
    /// file's size each, and a new log grown by doubling for every file spent a tenth of a
    /// merge of deep profiles faulting in and copying fresh pages; growing each small file's
    /// strings and frames afresh was 2% of the instructions of a merge of a thousand
    /// (measured).
    /// Shared by a fold and its parts; holds at most as many as parts were alive at once.
    spares: SpareParts,
    samples: u64,
    profiles: u64,
    /// The facts of the fold a part is made for: checked before the part's samples are read.
    check_against: Option<Facts>,
}

/// A frame of a fold: a [`FrameInfo`] whose names are numbers in the fold's strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Frame {
    filename: u32,
    funcname: u32,
    location: Option<Location>,
    opcode: Option<u8>,
    address: Option<u64>,
    mapping: Option<u32>,
    anonymous: bool,
    hidden: bool,
    inlined: bool,
}

impl Frame {
    /// `f` with the names numbered `filename` and `funcname` in a fold's strings, and mapping
    /// `mapping`.
    fn named(f: &FrameRef<'_>, filename: u32, funcname: u32, mapping: Option<u32>) -> Frame {
        Frame {
            filename,
            funcname,
            location: f.location,
            opcode: f.opcode,
            address: f.address,
            mapping,
            anonymous: f.anonymous,
            hidden: f.hidden,
            inlined: f.inlined,
        }
    }
}

/// Keys and counts in the order they came, each key `[tid low, tid high, frames…]` ending
/// where `ends` says.
#[derive(Debug, Clone, Default)]
struct Log {
    words: Vec<u32>,
    ends: Vec<usize>,
    counts: Vec<u64>,
}

impl Log {
    fn clear(&mut self) {
        self.words.clear();
        self.ends.clear();
        self.counts.clear();
    }

    /// Logs a key, given word by word, and its count.
    fn push(&mut self, key: impl IntoIterator<Item = u32>, count: u64) {
        self.words.extend(key);
        self.ends.push(self.words.len());
        self.counts.push(count);
    }

    fn entries(&self) -> impl Iterator<Item = (&[u32], u64)> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(&self.ends).zip(&self.counts).map(|((start, &end), &count)| (&self.words[start..end], count))
    }
}

/// The storage a part fills: its log, strings, frames and mappings; and its facts, to be
/// freed with the rest.
#[derive(Debug, Default)]
struct PartStorage {
    log: Log,
    strings: PackedStrings,
    frames: Vec<Frame>,
    mappings: Vec<Mapping>,
    mapping_index: IdMap<Mapping, u32>,
    facts: [Option<Facts>; 2],
}

/// Emptied storage for a fold's next parts (see [`Fold::spares`]).
#[derive(Debug, Clone, Default)]
struct SpareParts(std::sync::Arc<std::sync::Mutex<Vec<PartStorage>>>);

impl SpareParts {
    /// Spare storage, emptied, or new. (A poisoned lock — a thread panicked while it held
    /// it — only costs the spares.)
    ///
    /// Storage is emptied here, not when it is given back: a merge on threads gives each
    /// thread spares of its own ([`Fold::own_spares`]), so what a part allocated is freed
    /// by the thread that allocated it, not by the one that combined the part. glibc's
    /// malloc hands such memory between the threads' arenas, and their locks then made
    /// the threads wait for each other about once a file (3,000 small files on two
    /// threads: 0.16 s with 2,000 waits, and 0.11 s without; measured).
    fn take(&self) -> PartStorage {
        let mut storage = self.0.lock().ok().and_then(|mut spares| spares.pop()).unwrap_or_default();
        storage.log.clear();
        storage.strings.clear();
        storage.frames.clear();
        storage.mappings.clear();
        storage.mapping_index.clear();
        storage.facts = [None, None];
        storage
    }

    fn give_back(&self, storage: PartStorage) {
        if let Ok(mut spares) = self.0.lock() {
            spares.push(storage);
        }
    }
}

/// Refuses `facts` that do not share the sample meaning of `mine`.
fn check(mine: &Facts, facts: &Facts) -> Result<(), String> {
    if mine.mode != facts.mode {
        return Err(format!(
            "its samples are {} samples, the merged profile's are {} (profiles of one mode merge)",
            or_unnamed(&facts.mode),
            or_unnamed(&mine.mode)
        ));
    }
    if (mine.unit_us == 0) != (facts.unit_us == 0) {
        return Err("it states no sampling interval and the merged profile does, or the other way round".into());
    }
    Ok(())
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Fold {
    /// An empty fold.
    pub fn new(options: FoldOptions) -> Self {
        Fold { options, ..Fold::default() }
    }

    /// Profiles folded so far.
    pub fn profiles(&self) -> u64 {
        self.profiles
    }

    /// Samples the folded sources replayed, each in its own unit (a MOJO time metric counts
    /// µs).
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Distinct stacks so far.
    pub fn stack_count(&self) -> usize {
        self.counts.len()
    }

    /// Distinct frames so far.
    pub fn frame_count(&self) -> usize {
        self.frames.len()
    }

    /// Replays `source` (readied for `output`, the output the fold will be written as) into
    /// the fold; returns its samples. All or nothing: a source whose samples mean something
    /// else than the fold's, or that turns out bad halfway, adds none of its samples (it is
    /// folded on its own first, then combined), so a caller may skip it and go on.
    pub fn add<S: Source>(
        &mut self,
        source: &mut S,
        output: &Output,
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64, FoldError<S::Error>> {
        let mut part = self.part();
        let samples = part.add_alone(source, output, progress)?;
        self.combine(part).map_err(FoldError::Mismatch)?;
        Ok(samples)
    }

    /// An empty fold for one source, to be given it by [`Fold::add_alone`] and then
    /// [`combined`](Fold::combine) into this one — on another thread meanwhile, if need be:
    /// [`Fold::add`] in two steps. A source whose samples mean something else than this
    /// fold's so far is refused before it is read.
    pub fn part(&self) -> Fold {
        Fold {
            check_against: self.facts.clone(),
            log: Some(Log::default()),
            spares: self.spares.clone(),
            ..Fold::new(self.options)
        }
    }

    /// This part with spares of its own, not its fold's: for the parts one thread makes by
    /// cloning it, so that their storage comes back to that thread (see [`SpareParts::take`]).
    pub(crate) fn own_spares(&self) -> Fold {
        Fold { spares: SpareParts::default(), ..self.clone() }
    }

    /// Replays `source` into this fold, a [`Fold::part`] (so its unit is the source's, and
    /// only the fold it is for has facts to check against); returns its samples.
    pub fn add_alone<S: Source>(
        &mut self,
        source: &mut S,
        output: &Output,
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64, FoldError<S::Error>> {
        if source.info().kind == FileKind::Marshal {
            return Err(FoldError::Mismatch(
                "a pstats file keeps caller→callee edges, not stacks, so it cannot be folded with sample profiles \
                 (tachyon merge of pstats files alone adds them as pstats does)"
                    .into(),
            ));
        }
        source.prepare(output).map_err(FoldError::Read)?;
        let info = source.info().clone();
        let mut facts = Facts {
            mode: meaning(&info),
            cpython_mode: info.cpython_mode,
            kinds: vec![info.kind.name()],
            unit_us: info.sample_interval_us,
            python_naming: info.naming == Naming::Python,
            any_threads: info.threads,
            start_unix_us: None,
            end_unix_us: None,
        };
        if let Some(other) = &self.check_against {
            check(other, &facts).map_err(FoldError::Mismatch)?;
        }
        // A part's storage is taken from the spares when it is filled, not when it is made
        // (a merge on threads makes its parts as clones of one made beforehand).
        let unfilled = self.log.as_ref().is_some_and(|log| log.words.capacity() == 0);
        if unfilled && self.strings.is_empty() && self.frames.is_empty() {
            let spare = self.spares.take();
            (self.log, self.strings, self.frames) = (Some(spare.log), spare.strings, spare.frames);
            if self.mappings.is_empty() {
                (self.mappings, self.mapping_index) = (spare.mappings, spare.mapping_index);
            }
        }
        let mut kept = crate::memory::take_kept(&KEPT_INTAKE);
        kept.iter_mut().for_each(Vec::clear);
        let [frame_of, string_of, mapping_of, key] = kept;
        let mut into = Intake { fold: self, frame_of, string_of, mapping_of, key, last_us: None, first_us: None };
        // The names lent where the source keeps them, else its frame table.
        let samples = match source.replay_named(&mut into, progress) {
            Some(done) => done,
            None => source.replay(&mut into, progress),
        };
        let (first_us, last_us) = (into.first_us, into.last_us);
        let kept = [into.frame_of, into.string_of, into.mapping_of, into.key];
        if kept.iter().all(|v| v.capacity() <= KEPT_INTAKE_SLOTS) {
            crate::memory::keep(&KEPT_INTAKE, kept);
        }
        let samples = samples.map_err(FoldError::Read)?;
        let span = info.unix_span(source.written_unix_us(), first_us, last_us);
        (facts.start_unix_us, facts.end_unix_us) = (span.map(|s| s.start_us), span.map(|s| s.end_us));
        match self.facts {
            None => self.facts = Some(facts),
            Some(_) => self.merge_facts(&facts),
        }
        self.samples = self.samples.saturating_add(samples);
        self.profiles += 1;
        Ok(samples)
    }

    /// Refuses facts that do not share the fold's sample meaning.
    fn check(&self, facts: &Facts) -> Result<(), String> {
        match &self.facts {
            Some(mine) => check(mine, facts),
            None => Ok(()),
        }
    }

    /// Makes the fold's unit the greatest common divisor of its own and `unit_us`, rescaling
    /// the counts so far; returns what the new profile's counts are multiplied by.
    fn join_unit(&mut self, unit_us: u64) -> u64 {
        let Some(facts) = &mut self.facts else { return 1 };
        if unit_us == 0 || facts.unit_us == 0 {
            return 1;
        }
        let unit = gcd(facts.unit_us, unit_us);
        let grow = facts.unit_us / unit;
        if grow > 1 {
            for count in &mut self.counts {
                *count = count.saturating_mul(grow);
            }
            facts.unit_us = unit;
        }
        unit_us / unit
    }

    fn merge_facts(&mut self, facts: &Facts) {
        let Some(mine) = &mut self.facts else {
            self.facts = Some(facts.clone());
            return;
        };
        if mine.cpython_mode != facts.cpython_mode {
            mine.cpython_mode = None;
        }
        for &k in &facts.kinds {
            if let Err(at) = mine.kinds.binary_search(&k) {
                mine.kinds.insert(at, k);
            }
        }
        mine.python_naming &= facts.python_naming;
        mine.any_threads |= facts.any_threads;
        mine.start_unix_us = min_some(mine.start_unix_us, facts.start_unix_us);
        mine.end_unix_us = mine.end_unix_us.max(facts.end_unix_us);
    }

    /// Adds `other` into this fold (a tree of partial folds: any grouping, same result).
    pub fn combine(&mut self, other: Fold) -> Result<(), String> {
        if other.options != self.options {
            return Err("the folds were made with different options (threads kept in one only)".into());
        }
        let Some(facts) = other.facts else { return Ok(()) };
        self.check(&facts)?;
        // The other's counts are in its unit, which the fold's unit now divides.
        let scale = self.join_unit(facts.unit_us);
        let mapping_of: Vec<u32> = other.mappings.iter().map(|m| self.mapping(m.clone())).collect();
        let string_of: Vec<u32> =
            (0..other.strings.len() as u32).map(|i| self.strings.id(other.strings.get(i))).collect();
        let frame_of: Vec<u32> = other
            .frames
            .iter()
            .map(|&f| {
                self.frame(Frame {
                    filename: string_of[f.filename as usize],
                    funcname: string_of[f.funcname as usize],
                    mapping: f.mapping.map(|m| mapping_of[m as usize]),
                    ..f
                })
            })
            .collect();
        let mut key = Vec::new();
        for (stack, count) in other.stacks.iter().zip(other.counts.iter().copied()) {
            key.clear();
            key.extend_from_slice(&stack[..2]);
            key.extend(stack[2..].iter().map(|&f| frame_of[f as usize]));
            self.count(&key, count.saturating_mul(scale));
        }
        self.merge_facts(&facts);
        if let Some(mut log) = other.log {
            // The part's frames made the fold's in place (the log is the part's own), then
            // counted as one run of look-ups.
            let mut start = 0;
            for &end in &log.ends {
                if let Some(frames) = log.words.get_mut(start + 2..end) {
                    frames.iter_mut().for_each(|f| *f = frame_of[*f as usize]);
                }
                start = end;
            }
            self.count_all(&log, scale);
            // Back to the spares it came from: a part's are its fold's (or its thread's); a
            // fold read from bytes has its own, dropped with it (its log is the size of the
            // whole fold).
            other.spares.give_back(PartStorage {
                log,
                strings: other.strings,
                frames: other.frames,
                mappings: other.mappings,
                mapping_index: other.mapping_index,
                facts: [Some(facts), other.check_against],
            });
        }
        self.samples = self.samples.saturating_add(other.samples);
        self.profiles += other.profiles;
        Ok(())
    }

    fn mapping(&mut self, m: Mapping) -> u32 {
        let next = self.mappings.len() as u32;
        let mappings = &mut self.mappings;
        *self.mapping_index.entry(m).or_insert_with_key(|m| {
            mappings.push(m.clone());
            next
        })
    }

    /// `f` as a frame of this fold, its names numbered here and its mapping `mapping`.
    pub(crate) fn intern(&mut self, f: &FrameRef<'_>, mapping: Option<u32>) -> Frame {
        let (filename, funcname) = (self.strings.id(f.filename), self.strings.id(&f.funcname));
        Frame::named(f, filename, funcname, mapping)
    }

    /// Frame `f` of this fold, its names borrowed from the fold.
    pub(crate) fn frame_ref(&self, f: &Frame) -> FrameRef<'_> {
        FrameRef {
            filename: self.strings.get(f.filename),
            funcname: std::borrow::Cow::Borrowed(self.strings.get(f.funcname)),
            location: f.location,
            opcode: f.opcode,
            address: f.address,
            mapping: f.mapping,
            anonymous: f.anonymous,
            hidden: f.hidden,
            inlined: f.inlined,
        }
    }

    /// The fold's frames, by id.
    pub(crate) fn frames(&self) -> &[Frame] {
        &self.frames
    }

    /// The fold's id of frame `f`, numbering it if it is new; in a part, the next id.
    fn frame(&mut self, f: Frame) -> u32 {
        let next = self.frames.len() as u32;
        if self.log.is_some() {
            self.frames.push(f);
            return next;
        }
        let hash = self.hash.hash_one(f);
        let frames = &self.frames;
        match self.frame_index.find(hash, |id| frames[id as usize] == f) {
            Ok(id) => id,
            Err(free) => {
                self.frames.push(f);
                self.frame_index.insert(free, hash)
            }
        }
    }

    fn count(&mut self, key: &[u32], n: u64) {
        if let Some(log) = &mut self.log {
            log.push(key.iter().copied(), n);
            return;
        }
        let id = self.stacks.id(key);
        self.add_to(id, n);
    }

    /// Adds `n` to the count of stack `id`, the newest stack's first.
    fn add_to(&mut self, id: u32, n: u64) {
        match self.counts.get_mut(id as usize) {
            Some(count) => *count = count.saturating_add(n),
            None => self.counts.push(n),
        }
    }

    /// Counts every stack of `log` (the fold's frames), times `scale`. Every stack's hash is
    /// made first, then each look-up prefetches the slot of the one eight stacks ahead, so
    /// that the table's memory arrives for several look-ups at once rather than being waited
    /// for by each in turn.
    fn count_all(&mut self, log: &Log, scale: u64) {
        if self.log.is_some() {
            log.entries().for_each(|(key, n)| self.count(key, n.saturating_mul(scale)));
            return;
        }
        const AHEAD: usize = 8;
        let hashes: Vec<u32> = log.entries().map(|(key, _)| self.stacks.hash(key)).collect();
        for (i, ((key, n), &hash)) in log.entries().zip(&hashes).enumerate() {
            if let Some(&ahead) = hashes.get(i + AHEAD) {
                self.stacks.prefetch(ahead);
            }
            let id = self.stacks.id_hashed(key, hash);
            self.add_to(id, n.saturating_mul(scale));
        }
    }

    /// The fold as a profile of the hub, frames and stacks in an order of their content
    /// alone; `None` when nothing was folded.
    pub fn finish(self) -> Option<Folded> {
        let infos: Vec<FrameInfo> = self.frames.iter().map(|f| self.frame_ref(f).to_info()).collect();
        let facts = self.facts?;
        // Frames and mappings ranked by content; stacks sorted by thread, then by their
        // frames' ranks, root first; frames then numbered in the order the sorted stacks reach
        // them, innermost first, which keeps a frame inlined at an address just before its
        // caller (what the table's readers expect, FrameInfo::inlined).
        let mut mapping_order: Vec<u32> = (0..self.mappings.len() as u32).collect();
        mapping_order.sort_by(|&a, &b| mapping_cmp(&self.mappings[a as usize], &self.mappings[b as usize]));
        let mut mapping_rank = vec![0u32; self.mappings.len()];
        for (rank, &m) in mapping_order.iter().enumerate() {
            mapping_rank[m as usize] = rank as u32;
        }
        let mut frame_order: Vec<u32> = (0..infos.len() as u32).collect();
        fn content<'a>(f: &'a FrameInfo, mapping_rank: &[u32]) -> impl Ord + 'a {
            (
                f.filename.as_str(),
                f.funcname.as_str(),
                f.location.map(|l| (l.lineno, l.end_lineno, l.col, l.end_col)),
                f.opcode,
                f.address,
                f.mapping.map(|m| mapping_rank[m as usize]),
                (f.anonymous, f.hidden, f.inlined),
            )
        }
        let frames = &infos;
        frame_order.sort_by(|&a, &b| {
            content(&frames[a as usize], &mapping_rank).cmp(&content(&frames[b as usize], &mapping_rank))
        });
        let mut frame_rank = vec![0u32; infos.len()];
        for (rank, &f) in frame_order.iter().enumerate() {
            frame_rank[f as usize] = rank as u32;
        }
        let mut stacks: Vec<(u64, Vec<u32>, u64)> = self
            .stacks
            .iter()
            .zip(self.counts)
            .map(|(key, n)| (u64::from(key[0]) | (u64::from(key[1]) << 32), key[2..].to_vec(), n))
            .collect();
        stacks.sort_by_cached_key(|(thread, stack, _)| {
            (*thread, stack.iter().rev().map(|&f| frame_rank[f as usize]).collect::<Vec<_>>())
        });
        let mut table = FrameTable {
            mappings: mapping_order.iter().map(|&m| self.mappings[m as usize].clone()).collect(),
            ..FrameTable::default()
        };
        let mut new_id = vec![u32::MAX; infos.len()];
        let mut frames: Vec<Option<FrameInfo>> = infos.into_iter().map(Some).collect();
        for (_, stack, _) in &mut stacks {
            for f in stack.iter_mut() {
                if new_id[*f as usize] == u32::MAX {
                    let mut frame = frames[*f as usize].take().unwrap_or_default();
                    frame.mapping = frame.mapping.map(|m| mapping_rank[m as usize]);
                    new_id[*f as usize] = table.push(frame);
                }
                *f = new_id[*f as usize];
            }
        }
        let threads = self.options.threads && facts.any_threads;
        let info = SourceInfo {
            kind: match facts.kinds[..] {
                [one] => kind_named(one),
                _ => FileKind::Unknown,
            },
            start_time_us: facts.start_unix_us.unwrap_or(0),
            sample_interval_us: facts.unit_us,
            mode: facts.mode.clone().into(),
            cpython_mode: facts.cpython_mode,
            expected_samples: stacks.iter().map(|s| s.2).fold(0u64, u64::saturating_add),
            timestamps: false,
            threads,
            naming: if facts.python_naming { Naming::Python } else { Naming::Native },
            clock: if facts.start_unix_us.is_some() { Clock::Unix } else { Clock::None },
        };
        Some(Folded { info, frames: table, stacks, kinds: facts.kinds, end_unix_us: facts.end_unix_us })
    }
}

/// What a sample of `info`'s profile measures: CPython's mode where the input says one
/// (Tachyon's header, gperftools' `cpu`, a pprof period type, Austin's mode), else its own
/// name for it.
fn meaning(info: &SourceInfo) -> String {
    info.cpython_mode.map_or_else(|| info.mode.to_string(), |m| m.name().to_owned())
}

fn or_unnamed(mode: &str) -> &str {
    if mode.is_empty() {
        "unnamed"
    } else {
        mode
    }
}

fn min_some(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn mapping_cmp(a: &Mapping, b: &Mapping) -> Ordering {
    (a.start, a.limit, a.offset, &a.file, &a.build_id).cmp(&(b.start, b.limit, b.offset, &b.file, &b.build_id))
}

fn kind_named(name: &str) -> FileKind {
    match name {
        "tachyon" => FileKind::Tachyon,
        "gperftools" => FileKind::Gperftools,
        "pprof" => FileKind::Pprof { gzipped: false },
        "mojo" => FileKind::Mojo,
        _ => FileKind::Unknown,
    }
}

/// A source's calls entering a fold of its own: frames and mappings interned on first use,
/// threads dropped unless kept.
struct Intake<'f> {
    fold: &'f mut Fold,
    /// Per source frame id, the fold's (u32::MAX: not yet).
    frame_of: Vec<u32>,
    /// Per string of the source's own table, the fold's (u32::MAX: not yet).
    string_of: Vec<u32>,
    mapping_of: Vec<u32>,
    key: Vec<u32>,
    first_us: Option<u64>,
    last_us: Option<u64>,
}

/// An [`Intake`]'s four look-up tables are kept by the thread for its next file, when each
/// holds at most this many slots (so that a thread does not hold a large profile's tables
/// after it): made new for each file, they grew a dozen times a file in a merge of small
/// files (1,111 on one thread: 1% of the instructions; measured).
const KEPT_INTAKE_SLOTS: usize = 1 << 16;

thread_local! {
    static KEPT_INTAKE: std::cell::RefCell<[Vec<u32>; 4]> = const { std::cell::RefCell::new([const { Vec::new() }; 4]) };
}

impl Collector for Intake<'_> {
    fn collect(&mut self, frames: &FrameTable, call: &Call<'_>) {
        self.take(call, |id| (frames.frame(id).to_ref(), [None, None]), |m| &frames.mappings[m as usize]);
    }
}

impl NamedCollector for Intake<'_> {
    fn collect(&mut self, frames: &dyn FrameNames, call: &Call<'_>) {
        self.take(call, |id| frames.numbered_frame(id), |m| frames.mapping(m));
    }
}

impl Intake<'_> {
    /// Counts `call`, its source's frames `frame` (with the numbers of their names in the
    /// source's string table, if it has one) and mappings `mapping` (each asked for the first
    /// time its id is met).
    fn take<'n>(
        &mut self,
        call: &Call<'_>,
        frame: impl Fn(u32) -> (FrameRef<'n>, [Option<u32>; 2]),
        mapping: impl Fn(u32) -> &'n Mapping,
    ) {
        if let Some(&first) = call.timestamps_us().iter().min() {
            self.first_us = min_some(self.first_us, Some(first));
        }
        if let Some(&last) = call.timestamps_us().iter().max() {
            self.last_us = self.last_us.max(Some(last));
        }
        if call.stack.is_empty() {
            return;
        }
        let tid = if self.fold.options.threads { call.thread_id } else { 0 };
        let Intake { fold, frame_of, string_of, mapping_of, key, .. } = self;
        key.clear();
        key.extend([tid as u32, (tid >> 32) as u32]);
        for &id in call.stack {
            let folded = memo(frame_of, id as usize, || {
                let (f, numbers) = frame(id);
                let mapping = f.mapping.map(|m| memo(mapping_of, m as usize, || fold.mapping(mapping(m).clone())));
                // A name the source numbers is looked up by its text once, however many
                // frames name it.
                let mut name = |s: &str, number: Option<u32>| match number {
                    Some(n) => memo(string_of, n as usize, || fold.strings.id(s)),
                    None => fold.strings.id(s),
                };
                let (filename, funcname) = (name(f.filename, numbers[0]), name(&f.funcname, numbers[1]));
                fold.frame(Frame::named(&f, filename, funcname, mapping))
            });
            key.push(folded);
        }
        fold.count(key, call.samples());
    }
}

/// The value at `at` in `slots` (`u32::MAX`: none yet), made by `make` the first time: the
/// fold's ids of a source's frames, mappings and strings, each by the source's own number.
#[inline]
fn memo(slots: &mut Vec<u32>, at: usize, make: impl FnOnce() -> u32) -> u32 {
    if let Some(&made) = slots.get(at).filter(|&&made| made != u32::MAX) {
        return made;
    }
    if slots.len() <= at {
        slots.resize(at + 1, u32::MAX);
    }
    let made = make();
    slots[at] = made;
    made
}

/// A finished fold: a profile of the hub whose samples are counted stacks
/// ([`Times::Counted`]), every output able to read it.
#[derive(Debug, Clone)]
pub struct Folded {
    info: SourceInfo,
    frames: FrameTable,
    /// (thread, frames leaf first, count), in the fold's canonical order.
    stacks: Vec<(u64, Vec<u32>, u64)>,
    kinds: Vec<&'static str>,
    end_unix_us: Option<u64>,
}

impl Folded {
    /// The formats the folded profiles were read from (`tachyon info`'s names), sorted.
    pub fn kinds(&self) -> &[&'static str] {
        &self.kinds
    }

    /// When the latest folded profile ends, µs since the Unix epoch, where known.
    pub fn end_unix_us(&self) -> Option<u64> {
        self.end_unix_us
    }
}

impl Source for Folded {
    type Error = std::convert::Infallible;

    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn frames(&self) -> &FrameTable {
        &self.frames
    }

    fn replay(&mut self, collector: &mut dyn Collector, progress: &mut dyn FnMut(u64)) -> Result<u64, Self::Error> {
        let mut ticker = Ticker::default();
        let mut done = 0u64;
        for (thread_id, stack, n) in &self.stacks {
            let call = Call {
                times: Times::Counted(*n),
                interpreter_id: 0,
                thread_id: *thread_id,
                status: 0,
                stack,
                continued: false,
            };
            collector.collect(&self.frames, &call);
            done = done.saturating_add(*n);
            ticker.tick(done, progress);
        }
        Ok(done)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::convert::collapsed_lines;

    /// A profile of the hub made of (thread, stack of function names root first, samples).
    pub(crate) struct Calls {
        info: SourceInfo,
        frames: FrameTable,
        calls: Vec<(u64, Vec<u32>, u64)>,
        /// Fail after this many calls.
        fail_after: Option<usize>,
    }

    pub(crate) fn profile(kind: FileKind, mode: &str, interval_us: u64, calls: &[(u64, &[&str], u64)]) -> Calls {
        let mut frames = FrameTable::default();
        let mut ids: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
        let calls = calls
            .iter()
            .map(|(tid, stack, n)| {
                let ids = stack
                    .iter()
                    .rev()
                    .map(|name| {
                        *ids.entry(name.to_string()).or_insert_with(|| {
                            frames.push(FrameInfo {
                                filename: "app.py".into(),
                                funcname: name.to_string(),
                                ..FrameInfo::default()
                            })
                        })
                    })
                    .collect();
                (*tid, ids, *n)
            })
            .collect();
        let info = SourceInfo {
            kind,
            start_time_us: 0,
            sample_interval_us: interval_us,
            mode: mode.to_string().into(),
            cpython_mode: ProfilingMode::from_name(mode),
            expected_samples: 0,
            timestamps: false,
            threads: true,
            naming: Naming::Python,
            clock: Clock::None,
        };
        Calls { info, frames, calls, fail_after: None }
    }

    impl Source for Calls {
        type Error = String;
        fn info(&self) -> &SourceInfo {
            &self.info
        }
        fn frames(&self) -> &FrameTable {
            &self.frames
        }
        fn replay(&mut self, collector: &mut dyn Collector, _: &mut dyn FnMut(u64)) -> Result<u64, String> {
            let mut done = 0;
            for (i, (tid, stack, n)) in self.calls.iter().enumerate() {
                if self.fail_after == Some(i) {
                    return Err("damaged".into());
                }
                let call = Call {
                    times: Times::Counted(*n),
                    interpreter_id: 0,
                    thread_id: *tid,
                    status: 0,
                    stack,
                    continued: false,
                };
                collector.collect(&self.frames, &call);
                done += n;
            }
            Ok(done)
        }
    }

    pub(crate) fn folded(fold: Fold) -> Vec<(String, u64)> {
        let mut f = fold.finish().expect("something folded");
        collapsed_lines(&mut f, &mut |_| {}).unwrap()
    }

    pub(crate) fn add(fold: &mut Fold, mut p: Calls) -> Result<u64, FoldError<String>> {
        fold.add(&mut p, &Output::Collapsed, &mut |_| {})
    }

    #[test]
    fn counts_add_up_and_threads_go_unless_kept() {
        let a = || profile(FileKind::Tachyon, "wall", 1000, &[(1, &["main", "work"], 3), (2, &["main"], 1)]);
        let b = || profile(FileKind::Tachyon, "wall", 1000, &[(7, &["main", "work"], 2)]);
        let mut fold = Fold::new(FoldOptions::default());
        add(&mut fold, a()).unwrap();
        add(&mut fold, b()).unwrap();
        let lines = folded(fold);
        assert_eq!(lines, vec![("app.py:main:0;app.py:work:0".to_string(), 5), ("app.py:main:0".into(), 1)]);
        let mut fold = Fold::new(FoldOptions { threads: true });
        add(&mut fold, a()).unwrap();
        add(&mut fold, b()).unwrap();
        let mut lines = folded(fold);
        lines.sort();
        assert_eq!(
            lines,
            vec![
                ("tid:1;app.py:main:0;app.py:work:0".to_string(), 3),
                ("tid:2;app.py:main:0".into(), 1),
                ("tid:7;app.py:main:0;app.py:work:0".into(), 2)
            ]
        );
    }

    #[test]
    fn different_intervals_count_in_their_common_unit() {
        // 2 samples at 10 ms and 3 at 4 ms: 20 ms + 12 ms = 32 ms, in units of 2 ms.
        let mut fold = Fold::new(FoldOptions::default());
        add(&mut fold, profile(FileKind::Gperftools, "cpu", 10_000, &[(0, &["f"], 2)])).unwrap();
        add(&mut fold, profile(FileKind::Pprof { gzipped: false }, "cpu", 4_000, &[(0, &["f"], 3)])).unwrap();
        let f = fold.finish().unwrap();
        assert_eq!(f.info().sample_interval_us, 2_000);
        assert_eq!(f.info().kind, FileKind::Unknown);
        assert_eq!(f.kinds(), ["gperftools", "pprof"]);
        assert_eq!(f.info().expected_samples * f.info().sample_interval_us, 32_000);
    }

    #[test]
    fn another_mode_or_a_bad_file_adds_nothing() {
        let mut fold = Fold::new(FoldOptions::default());
        add(&mut fold, profile(FileKind::Tachyon, "wall", 1000, &[(0, &["f"], 2)])).unwrap();
        let e = add(&mut fold, profile(FileKind::Tachyon, "cpu", 1000, &[(0, &["g"], 5)])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "its samples are cpu samples, the merged profile's are wall (profiles of one mode merge)"
        );
        let mut bad = profile(FileKind::Tachyon, "wall", 1000, &[(0, &["f"], 4), (0, &["h"], 1)]);
        bad.fail_after = Some(1);
        assert!(matches!(add(&mut fold, bad), Err(FoldError::Read(e)) if e == "damaged"));
        assert_eq!((fold.profiles(), fold.frame_count()), (1, 1));
        assert_eq!(folded(fold), vec![("app.py:f:0".to_string(), 2)]);
    }

    /// How many storages wait in `fold`'s spares, and how many of them hold a part's facts.
    fn spares(fold: &Fold) -> (usize, usize) {
        let spares = fold.spares.0.lock().unwrap();
        (spares.len(), spares.iter().filter(|s| s.facts[0].is_some()).count())
    }

    #[test]
    fn a_part_made_with_spares_of_its_own_gives_its_storage_back_to_them() {
        let mut fold = Fold::new(FoldOptions::default());
        let on_a_thread = fold.part().own_spares();
        for round in 0..3 {
            let mut part = on_a_thread.clone();
            let mut p = profile(FileKind::Tachyon, "wall", 1000, &[(1, &["main", "work"], 3)]);
            part.add_alone(&mut p, &Output::Collapsed, &mut |_| {}).unwrap();
            fold.combine(part).unwrap();
            // Back with the spares it was made with, facts and all, to be freed or used
            // again there; the fold's own spares get nothing. (One storage each round: the
            // part takes it again.)
            assert_eq!(spares(&on_a_thread), (1, 1), "round {round}");
            assert_eq!(spares(&fold), (0, 0), "round {round}");
        }
        // A part of the fold's own goes back to the fold's.
        let mut part = fold.part();
        part.add_alone(
            &mut profile(FileKind::Tachyon, "wall", 1000, &[(1, &["f"], 1)]),
            &Output::Collapsed,
            &mut |_| {},
        )
        .unwrap();
        fold.combine(part).unwrap();
        assert_eq!(spares(&fold), (1, 1));
        assert_eq!(folded(fold), [("app.py:main:0;app.py:work:0".to_owned(), 9), ("app.py:f:0".to_owned(), 1)]);
    }

    #[test]
    fn any_grouping_gives_the_same_profile() {
        let parts = || {
            vec![
                profile(FileKind::Tachyon, "wall", 1000, &[(0, &["z", "b"], 1), (0, &["a"], 2)]),
                profile(FileKind::Tachyon, "wall", 1000, &[(0, &["a", "y"], 3)]),
                profile(FileKind::Tachyon, "wall", 1000, &[(0, &["z", "b"], 4), (0, &["c"], 5)]),
            ]
        };
        let mut one = Fold::new(FoldOptions::default());
        for p in parts() {
            add(&mut one, p).unwrap();
        }
        // ((3, 1), 2) instead of ((1, 2), 3).
        let mut p = parts();
        let mut left = Fold::new(FoldOptions::default());
        add(&mut left, p.remove(2)).unwrap();
        add(&mut left, p.remove(0)).unwrap();
        let mut right = Fold::new(FoldOptions::default());
        add(&mut right, p.remove(0)).unwrap();
        left.combine(right).unwrap();
        let (one, tree) = (one.finish().unwrap(), left.finish().unwrap());
        assert_eq!(one.frames().frames, tree.frames().frames);
        assert_eq!(one.stacks, tree.stacks);
        assert_eq!(one.info(), tree.info());
    }
}
