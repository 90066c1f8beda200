//! Samples from events, as austin-python 2.4.0's `MojoStreamReader` makes them.
//!
//! A sample is everything from its STACK event to the next STACK (or the end of the file):
//! its frames, root first, with FRAME_INVALID and FRAME_KERNEL markers where they came;
//! its metrics (TIME, MEMORY; a later value replaces an earlier one); IDLE and GC flags; the
//! running task (v4). [`Samples`] is pushed the events a [`super::Reader`] yields and says
//! when a sample is finished, so it works over any source and never holds the reader's
//! window:
//!
//! ```
//! # use tachyon_core::mojo::*;
//! # fn run(file: &[u8]) -> Result<(), ()> {
//! let mut window = [0u8; 4096];
//! let mut reader = Reader::open(file, &mut window).map_err(drop)?;
//! let (mut strings, mut frames, mut names) = ([StringSlot::EMPTY; 256], [FrameSlot::EMPTY; 256], [0u8; 8192]);
//! let tables = Tables::new(&mut strings, &mut frames, &mut names, 0x5eed);
//! let (mut items, mut text) = ([ItemSlot::EMPTY; 512], [0u8; 1024]);
//! let (mut threads, mut history) = ([ThreadSlot::EMPTY; 8], [0u64; 8 * 512]);
//! let storage = SampleStorage::new(&mut items, &mut text, &mut threads, &mut history);
//! let mut samples = Samples::new(tables, storage);
//! while let Some((offset, event)) = reader.next_item().map_err(drop)? {
//!     if samples.push(offset, &event).map_err(drop)? {
//!         let sample = samples.sample().ok_or(())?;
//!         # let _ = sample;
//!     }
//! }
//! if samples.finish() {
//!     let last = samples.sample().ok_or(())?;
//!     # let _ = last;
//! }
//! # Ok(()) }
//! # run(b"MOJ\x03").unwrap();
//! ```
//!
//! The rules are the real reader's:
//! - a FRAME_REF takes the frame's definition of that moment, by `(pid, key)`;
//! - STACK_REPEAT puts before the frames so far the frames of the thread's previous sample
//!   (same pid and tid) less its innermost native frames (a frame whose file name neither
//!   ends in `.py` nor is `<…>`): those were above the interpreter's frame and are replaced;
//!   a thread without a previous sample repeats nothing;
//! - TASK_STACK's next `frames` FRAME_REFs are the task's coroutine stack, not the sample's:
//!   they are checked as any reference is and left out;
//! - GC, IDLE, metrics and task events before any STACK are errors (the reader asserts);
//!   FRAME_INVALID and FRAME_KERNEL there are accepted and belong to no sample.
//!
//! austin-python 2.4.0's samples leave out the INVALID and kernel markers, which its 1.7.1
//! text and Austin's own text show; they are here, and a caller wanting 2.4.0's view skips
//! them.
//!
//! Storage is the caller's, as for [`Tables`]: the current sample's frames and strings (its
//! tid and kernel symbols), and for STACK_REPEAT each thread's last frame keys: on the
//! caller's slices a fixed share of the history per thread; on growable storage a chunk of
//! the history that follows the thread's deepest sample (the smallest power of two that holds
//! it, moved to the history's end when a deeper one comes, so the history at most doubles
//! what the threads hold and never grows with a thread count alone). A sample deeper than its
//! storage, more threads than the history holds, is a [`Problem::Capacity`] — for the history
//! only when a STACK_REPEAT needs what could not be kept, so a file without one never fails
//! for it.

use super::tables::{home, room, Slots};
use super::{Event, FrameNames, TableError, Tables};

/// One frame of the current sample: a frame key of its pid, or a marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    Frame(u64),
    Invalid,
    /// A kernel symbol: bytes of the sample's text.
    Kernel {
        start: u32,
        len: u32,
    },
}

/// One slot of a sample's frames; [`ItemSlot::EMPTY`] to make storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemSlot(Item);

impl ItemSlot {
    /// A free slot.
    pub const EMPTY: ItemSlot = ItemSlot(Item::Invalid);
}

/// Longest thread id whose frames are kept for STACK_REPEAT (Austin writes at most 16 hex
/// digits).
pub const MAX_TID: usize = 32;

/// One slot of the threads' history; [`ThreadSlot::EMPTY`] to make storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadSlot {
    entry: Option<Thread>,
}

impl ThreadSlot {
    /// A free slot.
    pub const EMPTY: ThreadSlot = ThreadSlot { entry: None };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Thread {
    pid: u64,
    tid: [u8; MAX_TID],
    tid_len: u8,
    /// Frame keys of its last sample.
    depth: u32,
    /// False when its last sample had more frames than its chunk holds.
    complete: bool,
    /// Its chunk of the history: where it starts, and how many keys it holds.
    chunk: usize,
    chunk_len: usize,
}

impl Thread {
    fn is(&self, pid: u64, tid: &[u8]) -> bool {
        self.pid == pid && self.tid.get(..self.tid_len as usize) == Some(tid)
    }
}

/// Which part of the sample storage ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SampleResource {
    /// Frames of one sample.
    Frames,
    /// Bytes of one sample's tid and kernel symbols.
    Text,
    /// The history of previous samples (threads, or frames per thread) a STACK_REPEAT needs.
    History,
}

/// The most growable storage holds (`SampleStorage::growable`, feature `alloc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleLimits {
    /// Frames of one sample.
    pub frames: usize,
    /// Bytes of one sample's tid and kernel symbols.
    pub text: usize,
    /// Threads whose last frames are kept for STACK_REPEAT.
    pub threads: usize,
    /// Frames kept per thread.
    pub history_depth: usize,
}

/// Where samples are assembled: the caller's, or (feature `alloc`) owned and grown.
pub struct SampleStorage<'s> {
    items: Slots<'s, ItemSlot>,
    text: Slots<'s, u8>,
    threads: Slots<'s, ThreadSlot>,
    history: Slots<'s, u64>,
    /// Frame keys per thread slot, on the caller's slices.
    share: usize,
    /// End of the chunks handed out, on growable storage.
    #[cfg_attr(not(feature = "alloc"), allow(dead_code))]
    history_used: usize,
    /// Thread slots in use.
    thread_count: usize,
    #[cfg_attr(not(feature = "alloc"), allow(dead_code))]
    limits: Option<SampleLimits>,
}

impl<'s> SampleStorage<'s> {
    /// Storage over the caller's slices: `items` and `text` bound one sample, and each slot
    /// of `threads` keeps `history.len() / threads.len()` frame keys.
    pub fn new(
        items: &'s mut [ItemSlot],
        text: &'s mut [u8],
        threads: &'s mut [ThreadSlot],
        history: &'s mut [u64],
    ) -> Self {
        threads.fill(ThreadSlot::EMPTY);
        let share = history.len() / threads.len().max(1);
        SampleStorage {
            items: Slots::Borrowed(items),
            text: Slots::Borrowed(text),
            threads: Slots::Borrowed(threads),
            history: Slots::Borrowed(history),
            share,
            history_used: 0,
            thread_count: 0,
            limits: None,
        }
    }

    /// Storage that starts small and doubles what fills up to `limits`.
    #[cfg(feature = "alloc")]
    pub fn growable(limits: SampleLimits) -> SampleStorage<'static> {
        use alloc::vec;
        let threads = limits.threads.min(8);
        SampleStorage {
            items: Slots::Owned(vec![ItemSlot::EMPTY; limits.frames.min(64)]),
            text: Slots::Owned(vec![0; limits.text.min(256)]),
            threads: Slots::Owned(vec![ThreadSlot::EMPTY; threads]),
            history: Slots::Owned(alloc::vec::Vec::new()),
            share: 0,
            history_used: 0,
            thread_count: 0,
            limits: Some(limits),
        }
    }

    /// Makes owned `items` (or `text`) hold `needed` within `limit`; false when it cannot.
    fn reserve<T: Copy>(slots: &mut Slots<'_, T>, needed: usize, limit: Option<usize>, fill: T) -> bool {
        if needed <= slots.len() {
            return true;
        }
        #[cfg(feature = "alloc")]
        if let (Slots::Owned(v), Some(limit)) = (slots, limit) {
            if needed <= limit {
                let len = (v.len() * 2).max(needed).min(limit);
                v.resize(len, fill);
                return true;
            }
        }
        #[cfg(not(feature = "alloc"))]
        let _ = (limit, fill);
        false
    }

    /// Doubles owned thread slots up to the limit, every thread moved to its new slot (its
    /// history chunk stays where it is); false when it cannot.
    fn grow_threads(&mut self, seed: u64) -> bool {
        #[cfg(feature = "alloc")]
        if let (Slots::Owned(old), Some(limits)) = (&mut self.threads, self.limits) {
            let len = (old.len() * 2).max(8).min(limits.threads);
            if len > old.len() {
                let mut threads = alloc::vec![ThreadSlot::EMPTY; len];
                for slot in old.iter() {
                    let Some(t) = slot.entry else { continue };
                    if let Some((j, _)) = find_thread(seed, &threads, t.pid, t.tid.get(..t.tid_len as usize)) {
                        threads[j] = *slot;
                    }
                }
                *old = threads;
                return true;
            }
        }
        let _ = seed;
        false
    }

    /// The chunk of history a thread new in slot `i` starts with: its share of the caller's
    /// slices, or nothing yet on growable storage.
    fn first_chunk(&self, i: usize) -> (usize, usize) {
        match self.history {
            Slots::Borrowed(_) => (i * self.share, self.share),
            #[cfg(feature = "alloc")]
            Slots::Owned(_) => (0, 0),
        }
    }

    /// A new chunk at the history's end for `depth` keys (growable storage, within the
    /// limit; as many as the limit allows when `depth` is beyond it), or `None` when no larger
    /// chunk than `current` can be had.
    fn grow_chunk(&mut self, depth: usize, current: usize) -> Option<(usize, usize)> {
        #[cfg(feature = "alloc")]
        if let (Slots::Owned(v), Some(limits)) = (&mut self.history, self.limits) {
            let len = depth.next_power_of_two().max(4).min(limits.history_depth);
            let end = self.history_used.checked_add(len)?;
            if len <= current || (end > v.len() && v.try_reserve(end - v.len()).is_err()) {
                return None;
            }
            if end > v.len() {
                v.resize(end, 0);
            }
            let start = core::mem::replace(&mut self.history_used, end);
            return Some((start, len));
        }
        let _ = (depth, current);
        None
    }
}

/// The slot of thread `(pid, tid)` (`true`) or the free slot where it would go (`false`);
/// `None` when there is none or the tid is too long to keep.
fn find_thread(seed: u64, slots: &[ThreadSlot], pid: u64, tid: Option<&[u8]>) -> Option<(usize, bool)> {
    let tid = tid.filter(|t| t.len() <= MAX_TID)?;
    let key = tid.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let len = slots.len();
    let mut i = home(seed, pid, key, len.max(1));
    for _ in 0..len {
        match &slots[i].entry {
            Some(t) if t.is(pid, tid) => return Some((i, true)),
            Some(_) => i = (i + 1) % len,
            None => return Some((i, false)),
        }
    }
    None
}

/// What a sample's events broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Problem {
    /// An event that belongs to a sample (a definition, reference, metric, flag or task
    /// event) before any STACK.
    NoStack,
    /// A reference to a frame key its process has not defined.
    UndefinedFrame {
        /// Process id.
        pid: u64,
        /// Frame key.
        key: u64,
    },
    /// A reference to a string key its process has not defined.
    UndefinedString {
        /// Process id.
        pid: u64,
        /// String key.
        key: u64,
    },
    /// The tables could not take a definition.
    Table(TableError),
    /// The sample storage is full.
    Capacity(SampleResource),
    /// An event of a later version than the file's, which a reader of the file's version
    /// cannot follow (austin-python 1.7.1 reading event 13 in a version 3 file). The samples
    /// here follow austin-python 2.4.0, which takes every event in any version, so they never
    /// give this; Austin 3's text does.
    NotInVersion {
        /// The event id.
        id: u8,
        /// The file's version.
        version: u8,
    },
}

/// The event at `offset` could not be made part of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SampleError {
    /// File offset of the event.
    pub offset: u64,
    /// What is wrong.
    pub problem: Problem,
}

impl core::fmt::Display for Problem {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Problem::NoStack => f.write_str("an event of a sample before any STACK event"),
            Problem::UndefinedFrame { pid, key } => write!(f, "undefined frame key {key} (pid {pid})"),
            Problem::UndefinedString { pid, key } => write!(f, "undefined string key {key} (pid {pid})"),
            Problem::Table(e) => write!(f, "{e}"),
            Problem::Capacity(r) => write!(f, "no room for more {r:?} in the sample storage"),
            Problem::NotInVersion { id, version } => {
                write!(f, "event {id} does not exist in MOJO version {version} (it came in version 4)")
            }
        }
    }
}

impl core::fmt::Display for SampleError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "offset {}: {}", self.offset, self.problem)
    }
}

impl core::error::Error for SampleError {}

/// The sample being assembled.
#[derive(Debug, Clone, Copy, Default)]
struct Head {
    offset: u64,
    pid: u64,
    iid: u64,
    /// Its tid: bytes `start..end` of the text.
    tid: (usize, usize),
    time: Option<i64>,
    memory: Option<i64>,
    idle: bool,
    gc: bool,
    running_task: Option<u64>,
}

/// One frame of a sample, root first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A FRAME_REF: the frame as defined when referenced.
    Defined(FrameNames<'a>),
    /// FRAME_INVALID: a frame Austin could not read.
    Invalid,
    /// FRAME_KERNEL: a kernel symbol.
    Kernel(&'a [u8]),
}

/// A finished sample.
#[derive(Clone, Copy)]
pub struct Sample<'a> {
    /// File offset of its STACK event.
    pub offset: u64,
    /// Process id.
    pub pid: u64,
    /// Interpreter id (0 before version 3).
    pub iid: u64,
    /// Thread id as written (Austin: lowercase hex).
    pub tid: &'a [u8],
    /// METRIC_TIME, µs.
    pub time: Option<i64>,
    /// METRIC_MEMORY, bytes.
    pub memory: Option<i64>,
    /// IDLE came (full mode).
    pub idle: bool,
    /// GC came: sampled during a collection.
    pub gc: bool,
    /// The task the thread ran (v4 TASK_RUNNING).
    pub running_task: Option<u64>,
    items: &'a [ItemSlot],
    text: &'a [u8],
    tables: &'a Tables<'a>,
}

impl core::fmt::Debug for Sample<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Sample")
            .field("offset", &self.offset)
            .field("pid", &self.pid)
            .field("iid", &self.iid)
            .field("tid", &self.tid)
            .field("time", &self.time)
            .field("memory", &self.memory)
            .field("idle", &self.idle)
            .field("gc", &self.gc)
            .field("running_task", &self.running_task)
            .field("frames", &self.items.len())
            .finish()
    }
}

impl<'a> Sample<'a> {
    /// Its frames, root first.
    pub fn frames(&self) -> impl DoubleEndedIterator<Item = Frame<'a>> + ExactSizeIterator + 'a {
        let (pid, text, tables) = (self.pid, self.text, self.tables);
        self.items.iter().map(move |slot| match slot.0 {
            // Every key was checked when pushed, and definitions are never removed.
            Item::Frame(key) => tables.frame(pid, key).map_or(Frame::Invalid, Frame::Defined),
            Item::Invalid => Frame::Invalid,
            Item::Kernel { start, len } => {
                Frame::Kernel(text.get(start as usize..start as usize + len as usize).unwrap_or_default())
            }
        })
    }
}

/// Assembles samples from events (see the module's documentation).
pub struct Samples<'s> {
    tables: Tables<'s>,
    store: SampleStorage<'s>,
    /// The sample being assembled.
    current: Option<Head>,
    /// Its frames and bytes of text.
    items: usize,
    text: usize,
    /// `current` is finished and shown by [`Samples::sample`].
    finished: bool,
    /// A STACK met while `current` ran: the next sample, its tid stored after `current`'s text.
    next: Option<Head>,
    /// FRAME_REFs still to come of a TASK_STACK.
    task_frames: u64,
    /// Some thread's frames could not be kept for STACK_REPEAT.
    history_lost: bool,
}

impl<'s> Samples<'s> {
    /// Assembles samples with `tables` for the definitions and `store` for the samples.
    pub fn new(tables: Tables<'s>, store: SampleStorage<'s>) -> Self {
        Samples {
            tables,
            store,
            current: None,
            items: 0,
            text: 0,
            finished: false,
            next: None,
            task_frames: 0,
            history_lost: false,
        }
    }

    /// The definitions so far.
    pub fn tables(&self) -> &Tables<'s> {
        &self.tables
    }

    /// The finished sample, after [`Samples::push`] or [`Samples::finish`] said one is.
    pub fn sample(&self) -> Option<Sample<'_>> {
        let head = self.current.filter(|_| self.finished)?;
        Some(self.show(head, self.items, self.text))
    }

    /// The sample the events so far end in, as [`Samples::finish`] would finish it if the
    /// file ended here, without finishing it: a file still being written may add to it.
    /// `None` when there is none (before the first STACK, or after `finish`).
    pub fn pending(&self) -> Option<Sample<'_>> {
        let (head, items, text) = match (self.finished, self.current, self.next) {
            (false, Some(head), _) => (head, self.items, self.text),
            // The shown sample is finished; a STACK met since is the next one, so far without frames.
            (true, _, Some(head)) => (head, 0, head.tid.1),
            _ => return None,
        };
        Some(self.show(head, items, text))
    }

    /// The sample of `head`, its first `items` items and `text` bytes of text.
    fn show(&self, head: Head, items: usize, text: usize) -> Sample<'_> {
        let text = self.store.text.get(..text).unwrap_or_default();
        Sample {
            offset: head.offset,
            pid: head.pid,
            iid: head.iid,
            tid: text.get(head.tid.0..head.tid.1).unwrap_or_default(),
            time: head.time,
            memory: head.memory,
            idle: head.idle,
            gc: head.gc,
            running_task: head.running_task,
            items: self.store.items.get(..items).unwrap_or_default(),
            text,
            tables: &self.tables,
        }
    }

    /// Takes the event at `offset`; true when it finished a sample (a STACK after one),
    /// which [`Samples::sample`] then shows until the next push.
    pub fn push(&mut self, offset: u64, event: &Event<&[u8]>) -> Result<bool, SampleError> {
        if self.finished {
            self.start_next();
        }
        let fail = |problem| SampleError { offset, problem };
        let no_stack = fail(Problem::NoStack);
        match *event {
            Event::Metadata { .. } | Event::TaskWaiter { .. } => {}
            Event::Stack { pid, iid, tid } => {
                // The new sample's tid goes after the running one's text, until it is shown.
                let at = if self.current.is_some() { self.text } else { 0 };
                let end = at + tid.len();
                let limit = self.store.limits.map(|l| l.text);
                if !SampleStorage::reserve(&mut self.store.text, end, limit, 0) {
                    return Err(fail(Problem::Capacity(SampleResource::Text)));
                }
                self.store.text[at..end].copy_from_slice(tid);
                let head = Head { offset, pid, iid, tid: (at, end), ..Head::default() };
                if self.current.is_some() {
                    self.next = Some(head);
                    self.end_current();
                    return Ok(true);
                }
                self.current = Some(head);
                self.text = end;
            }
            Event::String { key, value } => {
                let pid = self.current.ok_or(no_stack)?.pid;
                self.tables.define_string(pid, key, value).map_err(|e| fail(Problem::Table(e)))?;
            }
            Event::Frame(def) => {
                let pid = self.current.ok_or(no_stack)?.pid;
                self.tables.define_frame(pid, def).map_err(|e| fail(Problem::Table(e)))?;
            }
            Event::FrameRef { key } => {
                let pid = self.current.ok_or(no_stack)?.pid;
                if self.tables.frame(pid, key).is_none() {
                    return Err(fail(Problem::UndefinedFrame { pid, key }));
                }
                if self.task_frames > 0 {
                    self.task_frames -= 1;
                } else {
                    self.add(Item::Frame(key)).map_err(fail)?;
                }
            }
            Event::StringRef { key } => {
                let pid = self.current.ok_or(no_stack)?.pid;
                if self.tables.string(pid, key).is_none() {
                    return Err(fail(Problem::UndefinedString { pid, key }));
                }
            }
            Event::FrameInvalid if self.current.is_some() => self.add(Item::Invalid).map_err(fail)?,
            Event::FrameKernel { symbol } if self.current.is_some() => {
                let (start, end) = (self.text, self.text + symbol.len());
                let limit = self.store.limits.map(|l| l.text);
                let text = fail(Problem::Capacity(SampleResource::Text));
                if !SampleStorage::reserve(&mut self.store.text, end, limit, 0) {
                    return Err(text);
                }
                let (start32, len) =
                    (u32::try_from(start).map_err(|_| text)?, u32::try_from(symbol.len()).map_err(|_| text)?);
                self.add(Item::Kernel { start: start32, len }).map_err(fail)?;
                self.store.text[start..end].copy_from_slice(symbol);
                self.text = end;
            }
            Event::FrameInvalid | Event::FrameKernel { .. } => {}
            Event::Gc => self.current.as_mut().ok_or(no_stack)?.gc = true,
            Event::Idle => self.current.as_mut().ok_or(no_stack)?.idle = true,
            Event::Time(v) => self.current.as_mut().ok_or(no_stack)?.time = Some(v),
            Event::Memory(v) => self.current.as_mut().ok_or(no_stack)?.memory = Some(v),
            Event::TaskRunning { task } => self.current.as_mut().ok_or(no_stack)?.running_task = Some(task),
            Event::TaskStack { name, frames, .. } => {
                let pid = self.current.ok_or(no_stack)?.pid;
                if name > super::UNKNOWN_STRING_KEY && self.tables.string(pid, name).is_none() {
                    return Err(fail(Problem::UndefinedString { pid, key: name }));
                }
                self.task_frames = frames;
            }
            Event::StackRepeat => {
                let head = self.current.ok_or(no_stack)?;
                self.repeat(head).map_err(fail)?;
            }
        }
        Ok(false)
    }

    /// The end of the file: true when it finished the last sample.
    pub fn finish(&mut self) -> bool {
        if self.finished {
            self.start_next();
        }
        if self.current.is_none() {
            return false;
        }
        self.end_current();
        true
    }

    /// Finishes `current`: its frames become its thread's history.
    fn end_current(&mut self) {
        self.finished = true;
        self.task_frames = 0;
        let Some(head) = self.current else { return };
        let seed = self.tables.seed();
        let mut id = [0u8; MAX_TID];
        let tid = self.store.text.get(head.tid.0..head.tid.1).filter(|t| t.len() <= MAX_TID).map(|t| {
            id[..t.len()].copy_from_slice(t);
            t.len()
        });
        let tid = tid.map(|len| &id[..len]);
        let slot = loop {
            match find_thread(seed, &self.store.threads, head.pid, tid) {
                Some((i, true)) => break Some(i),
                Some((i, false)) if self.store.thread_count < room(self.store.threads.len()) => {
                    self.store.thread_count += 1;
                    break Some(i);
                }
                Some(_) if self.store.grow_threads(seed) => {}
                _ => break None,
            }
        };
        let (Some(i), Some(tid)) = (slot, tid) else {
            self.history_lost = true;
            return;
        };
        let (mut chunk, mut chunk_len) = match self.store.threads[i].entry {
            Some(t) => (t.chunk, t.chunk_len),
            None => self.store.first_chunk(i),
        };
        // Room for the sample's items, frames being nearly all of them (a marker is rare), so
        // the keys are copied in the one pass below.
        if self.items > chunk_len {
            if let Some(grown) = self.store.grow_chunk(self.items, chunk_len) {
                (chunk, chunk_len) = grown;
            }
        }
        // Keys are copied while they fit; a deeper stack is marked incomplete.
        let history = &mut self.store.history[chunk..chunk + chunk_len];
        let mut depth = 0usize;
        for slot in self.store.items.get(..self.items).unwrap_or_default() {
            if let Item::Frame(key) = slot.0 {
                if let Some(to) = history.get_mut(depth) {
                    *to = key;
                }
                depth += 1;
            }
        }
        let complete = depth <= chunk_len;
        let tid_len = tid.len() as u8;
        self.store.threads[i].entry =
            Some(Thread { pid: head.pid, tid: id, tid_len, depth: depth as u32, complete, chunk, chunk_len });
    }

    /// Starts the STACK met while the shown sample ran, its tid moved to the front.
    fn start_next(&mut self) {
        self.finished = false;
        self.items = 0;
        self.current = self.next.take().map(|mut head| {
            self.store.text.copy_within(head.tid.0..head.tid.1, 0);
            head.tid = (0, head.tid.1 - head.tid.0);
            head
        });
        self.text = self.current.map_or(0, |h| h.tid.1);
    }

    fn add(&mut self, item: Item) -> Result<(), Problem> {
        let limit = self.store.limits.map(|l| l.frames);
        if !SampleStorage::reserve(&mut self.store.items, self.items + 1, limit, ItemSlot::EMPTY) {
            return Err(Problem::Capacity(SampleResource::Frames));
        }
        self.store.items[self.items] = ItemSlot(item);
        self.items += 1;
        Ok(())
    }

    /// STACK_REPEAT: the thread's previous frames, less the innermost native ones, before
    /// the frames so far.
    fn repeat(&mut self, head: Head) -> Result<(), Problem> {
        let full = Problem::Capacity(SampleResource::History);
        let tid = self.store.text.get(head.tid.0..head.tid.1);
        let thread = match find_thread(self.tables.seed(), &self.store.threads, head.pid, tid) {
            Some((i, true)) => self.store.threads[i].entry.ok_or(full)?,
            _ if self.history_lost => return Err(full),
            _ => return Ok(()),
        };
        if !thread.complete {
            return Err(full);
        }
        let previous = &self.store.history[thread.chunk..thread.chunk + thread.depth as usize];
        let native = |key: &u64| self.tables.frame(head.pid, *key).is_some_and(|f| is_native(f.filename));
        let kept = previous.len() - previous.iter().rev().take_while(|k| native(k)).count();
        let limit = self.store.limits.map(|l| l.frames);
        if !SampleStorage::reserve(&mut self.store.items, self.items + kept, limit, ItemSlot::EMPTY) {
            return Err(Problem::Capacity(SampleResource::Frames));
        }
        self.store.items.copy_within(..self.items, kept);
        for j in 0..kept {
            self.store.items[j] = ItemSlot(Item::Frame(self.store.history[thread.chunk + j]));
        }
        self.items += kept;
        Ok(())
    }
}

/// austin-python 2.4.0's test for a native frame: a file name neither ending in `.py` nor
/// `<…>` (`<frozen …>`, `<string>`).
fn is_native(filename: &[u8]) -> bool {
    !(filename.ends_with(b".py") || (filename.starts_with(b"<") && filename.ends_with(b">")))
}
