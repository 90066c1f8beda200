//! The Firefox Profiler's processed profile format, with the content CPython's
//! `replay --gecko` gives it (its `gecko_collector.py`, opcode markers off as in `replay`):
//! per thread the stack, frame, function and resource tables, one sample per thread sample
//! (time in ms from the first sample), and interval markers for state changes (GIL held or
//! not, on or off CPU, Python or native code, waiting for the GIL, exception set or not, GC),
//! each taken at the first sample of a CPython `collect()` call.
//!
//! Where CPython writes facts about the converting process rather than the profile, this
//! writes: `meta.startTime` = the profile's start (ms since the epoch; CPython writes its own
//! monotonic clock) and `pid` = `"0"` (CPython writes its own pid); architecture, OS and CPU
//! counts are the converting machine's, as in CPython.

use std::collections::HashMap;
use std::io::{self, Write};

use crate::hash::{IdMap, SequenceIndex, StringIndex, ThreadNumbers};
use crate::model::{basename, Call, Collector, FrameTable};
use crate::pyfmt::write_json_str;

const HAS_GIL: u8 = 1;
const ON_CPU: u8 = 1 << 1;
const GIL_REQUESTED: u8 = 1 << 3;
const HAS_EXCEPTION: u8 = 1 << 4;
const MAIN_THREAD: u8 = 1 << 5;

const CATEGORY_PYTHON: u8 = 1;
const CATEGORY_NATIVE: u8 = 2;
const CATEGORY_GC: u8 = 3;
const CATEGORY_GIL: u8 = 4;
const CATEGORY_CPU: u8 = 5;
const CATEGORY_CODE_TYPE: u8 = 6;
const CATEGORY_EXCEPTION: u8 = 8;

const CATEGORIES: &str = r#"[{"name":"Other","color":"grey","subcategories":["Other"]},{"name":"Python","color":"yellow","subcategories":["Other"]},{"name":"Native","color":"blue","subcategories":["Other"]},{"name":"GC","color":"orange","subcategories":["Other"]},{"name":"GIL","color":"green","subcategories":["Other"]},{"name":"CPU","color":"purple","subcategories":["Other"]},{"name":"Code Type","color":"red","subcategories":["Other"]},{"name":"Opcodes","color":"magenta","subcategories":["Other"]},{"name":"Exception","color":"lightblue","subcategories":["Other"]}]"#;

/// Open interval states, in CPython's order of closing them at the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    HasGil,
    NoGil,
    OnCpu,
    OffCpu,
    PythonCode,
    NativeCode,
    GilWait,
    Gc,
    HasException,
    NoException,
}

const STATES: [(State, &str, u8); 10] = [
    (State::HasGil, "Has GIL", CATEGORY_GIL),
    (State::NoGil, "No GIL", CATEGORY_GIL),
    (State::OnCpu, "On CPU", CATEGORY_CPU),
    (State::OffCpu, "Off CPU", CATEGORY_CPU),
    (State::PythonCode, "Python Code", CATEGORY_CODE_TYPE),
    (State::NativeCode, "Native Code", CATEGORY_CODE_TYPE),
    (State::GilWait, "Waiting for GIL", CATEGORY_GIL),
    (State::Gc, "GC Collecting", CATEGORY_GC),
    (State::HasException, "Has Exception", CATEGORY_EXCEPTION),
    (State::NoException, "No Exception", CATEGORY_EXCEPTION),
];

/// The slot of each state: the states of a pair (GIL held or not, on CPU or off, Python or
/// native code, exception set or not) are never open together, nor is a state open twice,
/// so a thread holds at most one open state per slot, with its start.
const SLOT: [usize; 10] = [0, 0, 1, 1, 2, 2, 3, 4, 5, 5];
const SLOTS: usize = 6;
/// No state open in a slot.
const CLOSED: u8 = u8::MAX;
/// The end of a chain of samples or markers.
const END: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Marker {
    name: u32,
    state: usize,
    start: f64,
    end: f64,
}

/// What a thread holds while the samples are read: its open states (CPython keeps them in
/// one dict per state, keyed by thread), and where its samples and markers are in the
/// collector's vectors. Its tables are made when it is written. 40 bytes: a file of a
/// million threads holds a million of these while it is read.
#[derive(Debug, Clone)]
struct ThreadState {
    /// [`IS_MAIN`] and [`INITIALIZED`].
    flags: u8,
    /// Per slot, the open state, or [`CLOSED`].
    open: [u8; SLOTS],
    /// Per slot, when its open state started, as a [`Start`].
    start: [u32; SLOTS],
    /// Its latest sample and marker ([`END`] when none), each linked to the one before.
    last_sample: u32,
    last_marker: u32,
}

/// [`ThreadState::flags`]: the thread is the main thread.
const IS_MAIN: u8 = 1;
/// [`ThreadState::flags`]: CPython's collector has seen the thread (states then close as
/// well as open).
const INITIALIZED: u8 = 2;

/// A state's start time, kept in 4 bytes: a state starts at the first sample of a call, so
/// its time is that sample's, by index; a call without a stack records no sample, and its
/// time is kept apart (the top bit set).
#[derive(Debug, Clone, Copy)]
struct Start(u32);

impl Start {
    const APART: u32 = 1 << 31;
}

/// A thread's tables, made as it is written: the stack, frame, function and resource tables
/// CPython's collector fills as the thread's calls come.
#[derive(Debug, Default)]
struct Thread {
    // stackTable
    stack_frame: Vec<u32>,
    stack_prefix: Vec<Option<u32>>,
    stack_category: Vec<u8>,
    stack_cache: HashMap<(u32, Option<u32>), u32>,
    // frameTable
    frame_func: Vec<u32>,
    frame_category: Vec<u8>,
    frame_line: Vec<Option<i32>>,
    frame_column: Vec<Option<i32>>,
    frame_cache: HashMap<(u32, Option<i32>, Option<i32>), u32>,
    /// Per table frame id met: its index in this thread's frame table.
    frame_of_id: IdMap<u32, u32>,
    // funcTable
    func_name: Vec<u32>,
    func_is_python: Vec<bool>,
    func_resource: Vec<u32>,
    func_file: Vec<Option<u32>>,
    func_line: Vec<Option<i32>>,
    func_cache: HashMap<(String, String), u32>,
    // resourceTable
    resource_name: Vec<u32>,
    resource_cache: HashMap<String, u32>,
}

/// Builds the profile. Memory follows the threads (about 60 bytes each: a state and a number), the samples (16
/// bytes each), the markers and the distinct stacks; each thread's tables exist only while
/// it is written (a million threads of a sample each: their tables took 2 GB held together).
#[derive(Debug)]
pub struct GeckoCollector {
    strings: StringIndex,
    /// Thread ids, numbered in first-seen order (each one's state by its number).
    thread_ids: ThreadNumbers,
    threads: Vec<ThreadState>,
    /// Distinct stacks of frame ids (innermost first, as calls give them).
    stacks: SequenceIndex,
    /// Samples in file order: stack id, time, the sample of the same thread before it.
    sample_stack: Vec<u32>,
    sample_time: Vec<f64>,
    sample_before: Vec<u32>,
    /// Markers made while reading, each with the one of the same thread before it.
    markers: Vec<Marker>,
    marker_before: Vec<u32>,
    /// The start times of states opened by calls without a stack (see [`Start`]).
    starts_apart: Vec<f64>,
    /// The call in progress's start for the states it opens: its first sample's (`Ok`), or,
    /// for a call without a stack, its time until a state takes it (`Err`).
    call_start: Result<Start, f64>,
    /// Per table frame id, whether its names have been given to `strings`.
    named: Vec<bool>,
    base_us: Option<u64>,
    interval: f64,
    sample_count: u64,
    last_sample_time: f64,
    /// The call in progress: (last time, samples).
    call: Option<(f64, u64)>,
    /// The call in progress's thread and stack, when its stack is not empty.
    call_stack: Option<(usize, u32)>,
}

impl Default for GeckoCollector {
    fn default() -> Self {
        let mut strings = StringIndex::default();
        strings.id("(root)");
        GeckoCollector {
            strings,
            thread_ids: ThreadNumbers::new(),
            threads: Vec::new(),
            stacks: SequenceIndex::new(),
            sample_stack: Vec::new(),
            sample_time: Vec::new(),
            sample_before: Vec::new(),
            markers: Vec::new(),
            marker_before: Vec::new(),
            starts_apart: Vec::new(),
            call_start: Err(0.0),
            named: Vec::new(),
            base_us: None,
            interval: 1.0,
            sample_count: 0,
            last_sample_time: 0.0,
            call: None,
            call_stack: None,
        }
    }
}

/// Makes item `at` (the last of `before`, about to be pushed) the latest of the chain whose
/// latest was `last`.
fn link(last: &mut u32, before: &mut Vec<u32>, at: u32) {
    before.push(*last);
    *last = at;
}

/// The items of the chain whose latest is `last`, latest first.
fn walk_back(last: u32, before: &[u32]) -> impl Iterator<Item = usize> + '_ {
    let mut at = last;
    std::iter::from_fn(move || {
        let i = at as usize;
        at = *before.get(i)?;
        Some(i)
    })
}

fn is_python(filename: &str) -> bool {
    !filename.starts_with('<') || filename == "<stdin>" || filename == "<string>"
}

/// `(a - b) / 1000` rounded once, like Python's `int / int` on integers of any size.
fn ms_between(a: u64, b: u64) -> f64 {
    let diff = i128::from(a) - i128::from(b);
    let n = diff.unsigned_abs();
    if n < 1 << 53 {
        // Both operands are exact doubles: one IEEE division rounds correctly.
        return diff as f64 / 1000.0;
    }
    // n < 2^65: scale by 2^60 (fits in 128 bits), divide, round the quotient to 53 bits
    // half to even, with the division's remainder as a sticky bit.
    let scaled = n << 60;
    let (q, r) = (scaled / 1000, scaled % 1000);
    let drop = 128 - q.leading_zeros() - 53;
    let mut mant = q >> drop;
    let rest = q & ((1u128 << drop) - 1);
    let half = 1u128 << (drop - 1);
    if rest > half || (rest == half && (r != 0 || mant & 1 == 1)) {
        mant += 1;
    }
    let v = mant as f64 * 2f64.powi(drop as i32 - 60);
    if diff < 0 {
        -v
    } else {
        v
    }
}

impl GeckoCollector {
    fn marker(&mut self, thread: usize, state: usize, start: f64, end: f64) {
        let name = self.strings.id(STATES[state].1);
        let at = self.markers.len() as u32;
        self.markers.push(Marker { name, state, start, end });
        link(&mut self.threads[thread].last_marker, &mut self.marker_before, at);
    }

    /// The time of a state's start.
    fn time(&self, start: Start) -> f64 {
        if start.0 & Start::APART != 0 {
            self.starts_apart[(start.0 & !Start::APART) as usize]
        } else {
            self.sample_time[start.0 as usize]
        }
    }

    /// The start of the call in progress, for a state it opens: a call without a stack
    /// keeps its time apart the first time a state takes it.
    fn call_start(&mut self) -> Start {
        let start = self.call_start.unwrap_or_else(|t| {
            self.starts_apart.push(t);
            Start((self.starts_apart.len() - 1) as u32 | Start::APART)
        });
        self.call_start = Ok(start);
        start
    }

    /// CPython's `dict.setdefault(tid, t)` on the dict of `state`, `t` being the call's start.
    fn set_default(&mut self, thread: usize, state: State) {
        let slot = SLOT[state as usize];
        if self.threads[thread].open[slot] == CLOSED {
            let start = self.call_start();
            let th = &mut self.threads[thread];
            th.open[slot] = state as u8;
            th.start[slot] = start.0;
        }
    }

    /// CPython's `dict.pop(tid)` on the dict of `state`, ending its interval in a marker.
    fn close(&mut self, thread: usize, state: State, t: f64) {
        let th = &mut self.threads[thread];
        let slot = SLOT[state as usize];
        if th.open[slot] == state as u8 {
            th.open[slot] = CLOSED;
            let start = Start(th.start[slot]);
            let start = self.time(start);
            self.marker(thread, state as usize, start, t);
        }
    }

    /// CPython's `_track_state_transition`.
    fn transition(&mut self, thread: usize, condition: bool, active: State, inactive: State, t: f64) {
        let (on, off) = if condition { (active, inactive) } else { (inactive, active) };
        if self.threads[thread].flags & INITIALIZED == 0 {
            self.set_default(thread, on);
            return;
        }
        // (`off` closes after `on` opens in CPython; they share a slot here, so the other
        // way round.)
        self.close(thread, off, t);
        self.set_default(thread, on);
    }

    /// Ends the call in progress: CPython's interval bookkeeping at the end of `collect`.
    fn end_call(&mut self) {
        if let Some((last, n)) = self.call.take() {
            if self.sample_count > 0 && self.last_sample_time > 0.0 {
                self.interval = (last - self.last_sample_time) / self.sample_count as f64;
            }
            self.last_sample_time = last;
            self.sample_count += n;
        }
    }

    fn start_call(&mut self, frames: &FrameTable, s: &Call<'_>, t: f64) {
        self.end_call();
        self.call = Some((t, 0));
        self.call_stack = None;
        // A call with a stack records its first sample after the states are set.
        self.call_start = if s.stack.is_empty() { Err(t) } else { Ok(Start(self.sample_time.len() as u32)) };
        let tid = s.thread_id;
        let thread = self.thread_ids.number(0, tid).0 as usize;
        if thread == self.threads.len() {
            self.threads.push(ThreadState {
                flags: if s.status & MAIN_THREAD != 0 { IS_MAIN } else { 0 },
                open: [CLOSED; SLOTS],
                start: [0; SLOTS],
                last_sample: END,
                last_marker: END,
            });
        }
        let has_gil = s.status & HAS_GIL != 0;
        let on_cpu = s.status & ON_CPU != 0;
        self.transition(thread, has_gil, State::HasGil, State::NoGil, t);
        self.transition(thread, on_cpu, State::OnCpu, State::OffCpu, t);
        if has_gil {
            self.transition(thread, true, State::PythonCode, State::NativeCode, t);
        } else if on_cpu {
            self.transition(thread, true, State::NativeCode, State::PythonCode, t);
        } else if self.threads[thread].flags & INITIALIZED != 0 {
            self.close(thread, State::PythonCode, t);
            self.close(thread, State::NativeCode, t);
        }
        if s.status & GIL_REQUESTED != 0 {
            self.set_default(thread, State::GilWait);
        } else {
            self.close(thread, State::GilWait, t);
        }
        self.transition(thread, s.status & HAS_EXCEPTION != 0, State::HasException, State::NoException, t);
        let in_gc = s.stack.iter().any(|&id| frames.frame(id).funcname == "<GC>");
        if in_gc {
            self.set_default(thread, State::Gc);
        } else {
            self.close(thread, State::Gc, t);
        }
        self.threads[thread].flags |= INITIALIZED;
        if !s.stack.is_empty() {
            self.name_frames(frames, s.stack);
            self.call_stack = Some((thread, self.stacks.id(s.stack)));
        }
    }

    /// Gives `strings` the names CPython's collector interns as a thread first meets each
    /// frame of `stack` (outermost first): the function's name, its resource's, its file's.
    /// A name is numbered the first time any thread meets it, so each frame's names are
    /// given once, when the first stack holding it comes, in the order CPython's would be.
    fn name_frames(&mut self, frames: &FrameTable, stack: &[u32]) {
        if self.named.len() < frames.frames.len() {
            self.named.resize(frames.frames.len(), false);
        }
        for &id in stack.iter().rev() {
            if std::mem::replace(&mut self.named[id as usize], true) {
                continue;
            }
            let f = frames.frame(id);
            self.strings.id(&f.funcname);
            self.strings.id(resource_name(&f.filename));
            if is_python(&f.filename) {
                self.strings.id(basename(&f.filename));
            }
        }
    }
}

/// The name of a file's resource: its base name when it is a path.
fn resource_name(filename: &str) -> &str {
    if filename.contains('/') {
        basename(filename)
    } else {
        filename
    }
}

impl Thread {
    /// The thread's stack index of `stack` (innermost first), its rows made on first use.
    fn stack(&mut self, strings: &mut StringIndex, frames: &FrameTable, stack: &[u32]) -> u32 {
        let mut prefix: Option<u32> = None;
        for &id in stack.iter().rev() {
            let f = frames.frame(id);
            let frame = self.frame(strings, frames, id);
            prefix = Some(match self.stack_cache.get(&(frame, prefix)) {
                Some(&i) => i,
                None => {
                    let i = self.stack_frame.len() as u32;
                    self.stack_frame.push(frame);
                    self.stack_prefix.push(prefix);
                    self.stack_category.push(if is_python(&f.filename) { CATEGORY_PYTHON } else { CATEGORY_NATIVE });
                    self.stack_cache.insert((frame, prefix), i);
                    i
                }
            });
        }
        prefix.unwrap_or(0)
    }

    /// The thread's frame-table index for table frame `id`, made on first use.
    fn frame(&mut self, strings: &mut StringIndex, frames: &FrameTable, id: u32) -> u32 {
        if let Some(&i) = self.frame_of_id.get(&id) {
            return i;
        }
        let f = frames.frame(id);
        let lineno = f.location.map(|l| l.lineno);
        let col = f.location.map(|l| l.col).filter(|&c| c >= 0);
        let func = self.func(strings, &f.filename, &f.funcname, lineno);
        let frame = match self.frame_cache.get(&(func, lineno, col)) {
            Some(&i) => i,
            None => {
                let i = self.frame_func.len() as u32;
                let python = self.func_is_python[func as usize];
                self.frame_func.push(func);
                self.frame_category.push(if python { CATEGORY_PYTHON } else { CATEGORY_NATIVE });
                self.frame_line.push(lineno.filter(|&l| l != 0));
                self.frame_column.push(col);
                self.frame_cache.insert((func, lineno, col), i);
                i
            }
        };
        self.frame_of_id.insert(id, frame);
        frame
    }

    fn func(&mut self, strings: &mut StringIndex, filename: &str, funcname: &str, lineno: Option<i32>) -> u32 {
        let key = (filename.to_owned(), funcname.to_owned());
        if let Some(&i) = self.func_cache.get(&key) {
            return i;
        }
        let name = strings.id(funcname);
        let python = is_python(filename);
        let resource = match self.resource_cache.get(filename) {
            Some(&r) => r,
            None => {
                let n = strings.id(resource_name(filename));
                let r = self.resource_name.len() as u32;
                self.resource_name.push(n);
                self.resource_cache.insert(filename.to_owned(), r);
                r
            }
        };
        let file = if python { Some(strings.id(basename(filename))) } else { None };
        let i = self.func_name.len() as u32;
        self.func_name.push(name);
        self.func_is_python.push(python);
        self.func_resource.push(resource);
        self.func_file.push(file);
        self.func_line.push(if python { lineno } else { None });
        self.func_cache.insert(key, i);
        i
    }
}

impl Collector for GeckoCollector {
    fn collect(&mut self, frames: &FrameTable, s: &Call<'_>) {
        let Some(&first) = s.timestamps_us().first() else { return };
        let base = *self.base_us.get_or_insert(first);
        if !s.continued {
            self.start_call(frames, s, ms_between(first, base));
        }
        for &ts in s.timestamps_us() {
            let t = ms_between(ts, base);
            if let Some(call) = &mut self.call {
                *call = (t, call.1 + 1);
            }
            if let Some((thread, stack)) = self.call_stack {
                let at = self.sample_stack.len() as u32;
                self.sample_stack.push(stack);
                self.sample_time.push(t);
                link(&mut self.threads[thread].last_sample, &mut self.sample_before, at);
            }
        }
    }
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "null".to_owned(), |v| v.to_string())
}

/// A JSON array of `items` formatted by `f`.
fn array<T>(out: &mut impl Write, items: &[T], f: impl Fn(&T) -> String) -> io::Result<()> {
    out.write_all(b"[")?;
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        out.write_all(f(item).as_bytes())?;
    }
    out.write_all(b"]")
}

fn repeat(out: &mut impl Write, n: usize, token: &str) -> io::Result<()> {
    out.write_all(b"[")?;
    for i in 0..n {
        if i > 0 {
            out.write_all(b",")?;
        }
        out.write_all(token.as_bytes())?;
    }
    out.write_all(b"]")
}

/// A float as JSON that reads back as a float (Python writes `1.0`, not `1`).
fn float(v: f64) -> String {
    format!("{v:?}")
}

impl GeckoCollector {
    /// Closes open markers and writes the profile; `start_time_ms` goes to `meta.startTime`.
    /// Each thread's tables are made from its samples in order, written, and dropped.
    pub fn write(mut self, frames: &FrameTable, start_time_ms: f64, out: &mut impl Write) -> io::Result<()> {
        self.end_call();
        // CPython closes what is still open state by state, each over every thread: a
        // state's name is numbered when the first thread with it open is closed.
        for state in 0..STATES.len() {
            if self.threads.iter().any(|th| th.open[SLOT[state]] == state as u8) {
                self.strings.id(STATES[state].1);
            }
        }
        if self.sample_count > 0 && self.last_sample_time > 0.0 {
            self.interval = self.last_sample_time / self.sample_count as f64;
        }
        let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
        let arch = std::env::consts::ARCH;
        let os = match std::env::consts::OS {
            "linux" => "Linux",
            "macos" => "Darwin",
            "windows" => "Windows",
            other => other,
        };
        write!(
            out,
            "{{\"meta\":{{\"interval\":{},\"startTime\":{},\"abi\":\"{arch}\",\"misc\":\"Python profiler\",\
             \"oscpu\":\"{arch}\",\"platform\":\"{os}\",\"processType\":0,\"categories\":{CATEGORIES},\
             \"stackwalk\":0,\"toolkit\":\"\",\"version\":32,\"preprocessedProfileVersion\":57,\"appBuildID\":\"\",\
             \"physicalCPUs\":{cpus},\"logicalCPUs\":{cpus},\"CPUName\":\"\",\"product\":\"Python\",\
             \"symbolicated\":true,\"markerSchema\":[],\"importedFrom\":\"Tachyon Sampling Profiler\",\
             \"extensions\":{{\"id\":[],\"name\":[],\"baseURL\":[],\"length\":0}}}},\"libs\":[],\"threads\":[",
            float(self.interval),
            float(start_time_ms)
        )?;
        let end = self.last_sample_time;
        let mut samples = Vec::new();
        let mut order = Vec::new();
        let mut markers = Vec::new();
        // Each stack's index in the thread's table: most samples repeat the one before.
        let mut stack_of: IdMap<u32, u32> = IdMap::default();
        for (i, th) in self.threads.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            let tid = self.thread_ids.get(i as u32).map_or(0, |(_, tid)| tid);
            let mut tables = Thread::default();
            stack_of.clear();
            let mut last: Option<(u32, u32)> = None;
            // The thread's samples in file order (its chain runs from the latest).
            order.clear();
            order.extend(walk_back(th.last_sample, &self.sample_before));
            samples.clear();
            for &at in order.iter().rev() {
                let id = self.sample_stack[at];
                let stack = match last {
                    Some((was, stack)) if was == id => stack,
                    _ => *stack_of
                        .entry(id)
                        .or_insert_with(|| tables.stack(&mut self.strings, frames, self.stacks.get(id))),
                };
                last = Some((id, stack));
                samples.push((stack, self.sample_time[at]));
            }
            markers.clear();
            markers.extend(walk_back(th.last_marker, &self.marker_before).map(|at| self.markers[at]));
            markers.reverse();
            for (slot, &state) in th.open.iter().enumerate() {
                if state != CLOSED {
                    let name = self.strings.id(STATES[state as usize].1);
                    let start = self.time(Start(th.start[slot]));
                    markers.push(Marker { name, state: state as usize, start, end });
                }
            }
            write_thread(tid, th.flags & IS_MAIN != 0, &tables, &samples, &markers, out)?;
        }
        out.write_all(b"],\"pages\":[],\"shared\":{\"stringArray\":[")?;
        for (i, s) in self.strings.strings().iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            write_json_str(out, s)?;
        }
        out.write_all(b"],\"sources\":{\"length\":0,\"uuid\":[],\"filename\":[]}}}")
    }
}

fn write_thread(
    tid: u64,
    is_main: bool,
    th: &Thread,
    samples: &[(u32, f64)],
    markers: &[Marker],
    out: &mut impl Write,
) -> io::Result<()> {
    write!(
        out,
        "{{\"name\":\"Thread-{tid}\",\"isMainThread\":{},\"processStartupTime\":0,\"processShutdownTime\":null,\
         \"registerTime\":0,\"unregisterTime\":null,\"pausedRanges\":[],\"pid\":\"0\",\"tid\":{tid},\
         \"processType\":\"default\",\"processName\":\"Python Process\",\"samples\":{{\"stack\":",
        is_main
    )?;
    array(out, samples, |s| s.0.to_string())?;
    out.write_all(b",\"time\":")?;
    array(out, samples, |s| float(s.1))?;
    out.write_all(b",\"eventDelay\":")?;
    repeat(out, samples.len(), "null")?;
    write!(out, ",\"weight\":null,\"weightType\":\"samples\",\"length\":{}}}", samples.len())?;

    let n = th.stack_frame.len();
    out.write_all(b",\"stackTable\":{\"frame\":")?;
    array(out, &th.stack_frame, u32::to_string)?;
    out.write_all(b",\"category\":")?;
    array(out, &th.stack_category, u8::to_string)?;
    out.write_all(b",\"subcategory\":")?;
    repeat(out, n, "0")?;
    out.write_all(b",\"prefix\":")?;
    array(out, &th.stack_prefix, |p| opt(*p))?;
    write!(out, ",\"length\":{n}}}")?;

    let n = th.frame_func.len();
    out.write_all(b",\"frameTable\":{\"address\":")?;
    repeat(out, n, "-1")?;
    out.write_all(b",\"category\":")?;
    array(out, &th.frame_category, u8::to_string)?;
    out.write_all(b",\"subcategory\":")?;
    repeat(out, n, "0")?;
    out.write_all(b",\"func\":")?;
    array(out, &th.frame_func, u32::to_string)?;
    for key in ["innerWindowID", "implementation", "optimizations"] {
        if key == "optimizations" {
            out.write_all(b",\"line\":")?;
            array(out, &th.frame_line, |l| opt(*l))?;
            out.write_all(b",\"column\":")?;
            array(out, &th.frame_column, |c| opt(*c))?;
        }
        write!(out, ",\"{key}\":")?;
        repeat(out, n, "null")?;
    }
    out.write_all(b",\"inlineDepth\":")?;
    repeat(out, n, "0")?;
    out.write_all(b",\"nativeSymbol\":")?;
    repeat(out, n, "null")?;
    write!(out, ",\"length\":{n}}}")?;

    let n = th.func_name.len();
    out.write_all(b",\"funcTable\":{\"name\":")?;
    array(out, &th.func_name, u32::to_string)?;
    out.write_all(b",\"isJS\":")?;
    array(out, &th.func_is_python, bool::to_string)?;
    out.write_all(b",\"relevantForJS\":")?;
    array(out, &th.func_is_python, bool::to_string)?;
    out.write_all(b",\"resource\":")?;
    array(out, &th.func_resource, u32::to_string)?;
    out.write_all(b",\"fileName\":")?;
    array(out, &th.func_file, |f| opt(*f))?;
    out.write_all(b",\"lineNumber\":")?;
    array(out, &th.func_line, |l| opt(*l))?;
    out.write_all(b",\"columnNumber\":")?;
    repeat(out, n, "null")?;
    write!(out, ",\"length\":{n}}}")?;

    let n = th.resource_name.len();
    out.write_all(b",\"resourceTable\":{\"lib\":")?;
    repeat(out, n, "null")?;
    out.write_all(b",\"name\":")?;
    array(out, &th.resource_name, u32::to_string)?;
    out.write_all(b",\"host\":")?;
    repeat(out, n, "null")?;
    out.write_all(b",\"type\":")?;
    repeat(out, n, "1")?;
    write!(out, ",\"length\":{n}}}")?;
    out.write_all(b",\"nativeSymbols\":{\"libIndex\":[],\"address\":[],\"name\":[],\"functionSize\":[],\"length\":0}")?;

    out.write_all(b",\"markers\":{\"data\":")?;
    array(out, markers, |m| {
        let ty: String = STATES[m.state].1.chars().filter(|&c| c != ' ').collect();
        format!("{{\"type\":\"{ty}\",\"duration\":{},\"tid\":{tid}}}", float(m.end - m.start))
    })?;
    out.write_all(b",\"name\":")?;
    array(out, markers, |m| m.name.to_string())?;
    out.write_all(b",\"startTime\":")?;
    array(out, markers, |m| float(m.start))?;
    out.write_all(b",\"endTime\":")?;
    array(out, markers, |m| float(m.end))?;
    out.write_all(b",\"phase\":")?;
    repeat(out, markers.len(), "1")?;
    out.write_all(b",\"category\":")?;
    array(out, markers, |m| STATES[m.state].2.to_string())?;
    write!(out, ",\"length\":{}}}}}", markers.len())
}

#[cfg(test)]
mod tests {
    use super::ms_between;

    /// Expected values are Python's `(a - b) / 1000` for the same integers.
    #[test]
    fn millisecond_differences_round_like_python() {
        assert_eq!(ms_between(1_500, 0), 1.5);
        assert_eq!(ms_between(0, 1_500), -1.5);
        assert_eq!(ms_between(u64::MAX, 0), 1.844674407370955e16);
        assert_eq!(ms_between(0, u64::MAX), -1.844674407370955e16);
        assert_eq!(ms_between(9_007_199_254_740_993_123, 0), 9007199254740994.0);
        assert_eq!(ms_between(9_007_199_254_740_995_500, 0), 9007199254740996.0);
        assert_eq!(ms_between(12_345_678_901_234_567_891, 3), 1.2345678901234568e16);
    }
}
