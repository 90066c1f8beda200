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

use crate::hash::StringIndex;
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

/// A Python dict `tid → start time`: insertion-ordered, a re-inserted key goes last.
#[derive(Debug, Default)]
struct Starts {
    map: HashMap<u64, (f64, u64)>,
    next: u64,
}

impl Starts {
    fn set_default(&mut self, tid: u64, t: f64) {
        if !self.map.contains_key(&tid) {
            self.map.insert(tid, (t, self.next));
            self.next += 1;
        }
    }
    fn pop(&mut self, tid: u64) -> Option<f64> {
        self.map.remove(&tid).map(|v| v.0)
    }
    fn drain_in_order(&mut self) -> Vec<(u64, f64)> {
        let mut v: Vec<(u64, f64, u64)> = self.map.drain().map(|(k, (t, o))| (k, t, o)).collect();
        v.sort_unstable_by_key(|e| e.2);
        v.into_iter().map(|(k, t, _)| (k, t)).collect()
    }
}

#[derive(Debug, Clone, Copy)]
struct Marker {
    name: u32,
    state: usize,
    start: f64,
    end: f64,
}

#[derive(Debug, Default)]
struct Thread {
    tid: u64,
    is_main: bool,
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
    /// Per table frame id: its index in this thread's frame table, once made.
    frame_of_id: Vec<Option<u32>>,
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
    samples: Vec<(u32, f64)>,
    markers: Vec<Marker>,
}

/// Builds the profile.
#[derive(Debug)]
pub struct GeckoCollector {
    strings: StringIndex,
    threads: Vec<Thread>,
    thread_index: HashMap<u64, usize>,
    starts: [Starts; 10],
    initialized: std::collections::HashSet<u64>,
    base_us: Option<u64>,
    interval: f64,
    sample_count: u64,
    last_sample_time: f64,
    /// The call in progress: (last time, samples).
    call: Option<(f64, u64)>,
    /// The call in progress's thread and stack index, when its stack is not empty.
    call_stack: Option<(usize, u32)>,
}

impl Default for GeckoCollector {
    fn default() -> Self {
        let mut strings = StringIndex::default();
        strings.id("(root)");
        GeckoCollector {
            strings,
            threads: Vec::new(),
            thread_index: HashMap::new(),
            starts: Default::default(),
            initialized: Default::default(),
            base_us: None,
            interval: 1.0,
            sample_count: 0,
            last_sample_time: 0.0,
            call: None,
            call_stack: None,
        }
    }
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
    fn intern(&mut self, s: &str) -> u32 {
        self.strings.id(s)
    }

    fn marker(&mut self, thread: usize, state: usize, start: f64, end: f64) {
        let name = self.intern(STATES[state].1);
        self.threads[thread].markers.push(Marker { name, state, start, end });
    }

    /// CPython's `_track_state_transition`.
    fn transition(&mut self, thread: usize, tid: u64, condition: bool, active: State, inactive: State, t: f64) {
        let (a, i) = (active as usize, inactive as usize);
        if !self.initialized.contains(&tid) {
            self.starts[if condition { a } else { i }].set_default(tid, t);
            return;
        }
        let (on, off) = if condition { (a, i) } else { (i, a) };
        self.starts[on].set_default(tid, t);
        if let Some(start) = self.starts[off].pop(tid) {
            self.marker(thread, off, start, t);
        }
    }

    fn close(&mut self, thread: usize, tid: u64, state: State, t: f64) {
        if let Some(start) = self.starts[state as usize].pop(tid) {
            self.marker(thread, state as usize, start, t);
        }
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
        let tid = s.thread_id;
        let thread = *self.thread_index.entry(tid).or_insert_with(|| {
            self.threads.push(Thread { tid, is_main: s.status & MAIN_THREAD != 0, ..Thread::default() });
            self.threads.len() - 1
        });
        let has_gil = s.status & HAS_GIL != 0;
        let on_cpu = s.status & ON_CPU != 0;
        self.transition(thread, tid, has_gil, State::HasGil, State::NoGil, t);
        self.transition(thread, tid, on_cpu, State::OnCpu, State::OffCpu, t);
        if has_gil {
            self.transition(thread, tid, true, State::PythonCode, State::NativeCode, t);
        } else if on_cpu {
            self.transition(thread, tid, true, State::NativeCode, State::PythonCode, t);
        } else if self.initialized.contains(&tid) {
            self.close(thread, tid, State::PythonCode, t);
            self.close(thread, tid, State::NativeCode, t);
        }
        if s.status & GIL_REQUESTED != 0 {
            self.starts[State::GilWait as usize].set_default(tid, t);
        } else {
            self.close(thread, tid, State::GilWait, t);
        }
        self.transition(thread, tid, s.status & HAS_EXCEPTION != 0, State::HasException, State::NoException, t);
        let in_gc = s.stack.iter().any(|&id| frames.frame(id).funcname == "<GC>");
        if in_gc {
            self.starts[State::Gc as usize].set_default(tid, t);
        } else {
            self.close(thread, tid, State::Gc, t);
        }
        self.initialized.insert(tid);
        if !s.stack.is_empty() {
            self.call_stack = Some((thread, self.process_stack(frames, thread, s.stack)));
        }
    }

    fn process_stack(&mut self, frames: &FrameTable, thread: usize, stack: &[u32]) -> u32 {
        let mut prefix: Option<u32> = None;
        for &id in stack.iter().rev() {
            let f = frames.frame(id);
            let frame = self.frame(frames, thread, id);
            let th = &mut self.threads[thread];
            prefix = Some(match th.stack_cache.get(&(frame, prefix)) {
                Some(&i) => i,
                None => {
                    let i = th.stack_frame.len() as u32;
                    th.stack_frame.push(frame);
                    th.stack_prefix.push(prefix);
                    th.stack_category.push(if is_python(&f.filename) { CATEGORY_PYTHON } else { CATEGORY_NATIVE });
                    th.stack_cache.insert((frame, prefix), i);
                    i
                }
            });
        }
        prefix.unwrap_or(0)
    }

    /// The thread's frame-table index for table frame `id`, made on first use. A table frame
    /// always maps to the same index, so after the first time this is one vector lookup.
    fn frame(&mut self, frames: &FrameTable, thread: usize, id: u32) -> u32 {
        let th = &mut self.threads[thread];
        if th.frame_of_id.len() < frames.frames.len() {
            th.frame_of_id.resize(frames.frames.len(), None);
        }
        if let Some(i) = th.frame_of_id[id as usize] {
            return i;
        }
        let f = frames.frame(id);
        let lineno = f.location.map(|l| l.lineno);
        let col = f.location.map(|l| l.col).filter(|&c| c >= 0);
        let func = self.func(thread, &f.filename, &f.funcname, lineno);
        let th = &mut self.threads[thread];
        let frame = match th.frame_cache.get(&(func, lineno, col)) {
            Some(&i) => i,
            None => {
                let i = th.frame_func.len() as u32;
                let python = th.func_is_python[func as usize];
                th.frame_func.push(func);
                th.frame_category.push(if python { CATEGORY_PYTHON } else { CATEGORY_NATIVE });
                th.frame_line.push(lineno.filter(|&l| l != 0));
                th.frame_column.push(col);
                th.frame_cache.insert((func, lineno, col), i);
                i
            }
        };
        th.frame_of_id[id as usize] = Some(frame);
        frame
    }

    fn func(&mut self, thread: usize, filename: &str, funcname: &str, lineno: Option<i32>) -> u32 {
        let key = (filename.to_owned(), funcname.to_owned());
        if let Some(&i) = self.threads[thread].func_cache.get(&key) {
            return i;
        }
        let name = self.intern(funcname);
        let python = is_python(filename);
        let resource = match self.threads[thread].resource_cache.get(filename) {
            Some(&r) => r,
            None => {
                let rname = if filename.contains('/') { basename(filename) } else { filename };
                let n = self.intern(rname);
                let th = &mut self.threads[thread];
                let r = th.resource_name.len() as u32;
                th.resource_name.push(n);
                th.resource_cache.insert(filename.to_owned(), r);
                r
            }
        };
        let file = if python { Some(self.intern(basename(filename))) } else { None };
        let th = &mut self.threads[thread];
        let i = th.func_name.len() as u32;
        th.func_name.push(name);
        th.func_is_python.push(python);
        th.func_resource.push(resource);
        th.func_file.push(file);
        th.func_line.push(if python { lineno } else { None });
        th.func_cache.insert(key, i);
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
                self.threads[thread].samples.push((stack, t));
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
    pub fn write(mut self, start_time_ms: f64, out: &mut impl Write) -> io::Result<()> {
        self.end_call();
        let end = self.last_sample_time;
        for state in 0..STATES.len() {
            for (tid, start) in self.starts[state].drain_in_order() {
                let thread = self.thread_index[&tid];
                self.marker(thread, state, start, end);
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
        for (i, th) in self.threads.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            write_thread(th, out)?;
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

fn write_thread(th: &Thread, out: &mut impl Write) -> io::Result<()> {
    let tid = th.tid;
    write!(
        out,
        "{{\"name\":\"Thread-{tid}\",\"isMainThread\":{},\"processStartupTime\":0,\"processShutdownTime\":null,\
         \"registerTime\":0,\"unregisterTime\":null,\"pausedRanges\":[],\"pid\":\"0\",\"tid\":{tid},\
         \"processType\":\"default\",\"processName\":\"Python Process\",\"samples\":{{\"stack\":",
        th.is_main
    )?;
    array(out, &th.samples, |s| s.0.to_string())?;
    out.write_all(b",\"time\":")?;
    array(out, &th.samples, |s| float(s.1))?;
    out.write_all(b",\"eventDelay\":")?;
    repeat(out, th.samples.len(), "null")?;
    write!(out, ",\"weight\":null,\"weightType\":\"samples\",\"length\":{}}}", th.samples.len())?;

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
    array(out, &th.markers, |m| {
        let ty: String = STATES[m.state].1.chars().filter(|&c| c != ' ').collect();
        format!("{{\"type\":\"{ty}\",\"duration\":{},\"tid\":{tid}}}", float(m.end - m.start))
    })?;
    out.write_all(b",\"name\":")?;
    array(out, &th.markers, |m| m.name.to_string())?;
    out.write_all(b",\"startTime\":")?;
    array(out, &th.markers, |m| float(m.start))?;
    out.write_all(b",\"endTime\":")?;
    array(out, &th.markers, |m| float(m.end))?;
    out.write_all(b",\"phase\":")?;
    repeat(out, th.markers.len(), "1")?;
    out.write_all(b",\"category\":")?;
    array(out, &th.markers, |m| STATES[m.state].2.to_string())?;
    write!(out, ",\"length\":{}}}}}", th.markers.len())
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
