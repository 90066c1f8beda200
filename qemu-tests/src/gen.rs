//! Seeded, reproducible writer-input documents (the vectors' `.input.json` format) that
//! cover what spec section 5 covers: many threads and interpreters, REPEAT runs long enough
//! to split, stacks deeper than 256, empty stacks and lists, timestamps before the start and
//! going backwards, every status byte and values beyond it, locations and opcodes at their
//! edges, non-ASCII and very long names, every mode and feature mask, stats with and
//! without optional values, interpreter ids past 2^32-1 (a limit), zstd on and off.

use serde_json::{json, Value};

/// A small deterministic generator (xorshift64*).
pub struct Rng(u64);

impl Rng {
    /// Seeded; the same seed gives the same documents on every machine.
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// Next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// True with probability `p` percent.
    pub fn chance(&mut self, p: u64) -> bool {
        self.below(100) < p
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// Location parts at their edges, as JSON: int32 limits, values CPython truncates to int32,
/// values beyond int64 (which CPython turns into -1), and -1 itself.
fn location_part(r: &mut Rng) -> Value {
    match r.below(12) {
        0 => json!(-1),
        1 => json!(i32::MAX),
        2 => json!(i32::MIN),
        3 => json!((1u64 << 31) + 5),
        4 => json!((1u64 << 32) + 7),
        5 => json!(1u64 << 40),
        6 => json!(-(1i64 << 31) - 1),
        7 => json!(u64::MAX),
        8 => json!(i64::MIN),
        _ => json!(r.below(2000) as i64),
    }
}

fn opcode(r: &mut Rng) -> Value {
    match r.below(8) {
        0 => Value::Null,
        1 => json!(255),
        2 => json!(254),
        3 => json!(300),
        4 => json!(-3),
        5 => json!(0),
        _ => json!(r.below(255)),
    }
}

fn name(r: &mut Rng, kind: &str, i: u64) -> String {
    match r.below(10) {
        0 => format!("{kind}_ünïcødé_→_{i}_日本"),
        1 => format!("{kind}_{}", "x".repeat(1000 + r.below(3000) as usize)),
        2 => String::new(),
        3 => format!("<{kind}>"),
        _ => format!("/srv/app/{kind}_{i}.py"),
    }
}

/// A frame pool: `[filename, funcname, location | null, opcode | null]`.
fn pool(r: &mut Rng, n: u64) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let file = name(r, "mod", i % 7);
            let func = name(r, "fn", i);
            let loc = if r.chance(15) {
                Value::Null
            } else {
                json!([location_part(r), location_part(r), location_part(r), location_part(r)])
            };
            json!([file, func, loc, opcode(r)])
        })
        .collect()
}

fn status(r: &mut Rng) -> Value {
    match r.below(20) {
        0 => json!(256 + r.below(1000)),
        1 => json!(-(r.below(300) as i64) - 1),
        _ => json!(r.below(256)),
    }
}

/// An object from its fields, in order. Large generated parts are moved in rather than
/// given to `json!`, which serialises every `Value` it is handed into a new one (most of the
/// exchange matrix's time under qemu went there).
fn object<const N: usize>(fields: [(&str, Value); N]) -> Value {
    Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// A sample call with one interpreter (0) and one thread.
fn one_thread(ts: u64, tid: u64, status: u64, frames: Vec<Value>) -> Value {
    let thread = object([("tid", tid.into()), ("status", status.into()), ("frames", frames.into())]);
    let interpreter = object([("iid", 0.into()), ("threads", vec![thread].into())]);
    object([("ts", ts.into()), ("interpreters", vec![interpreter].into())])
}

fn doc(r: &mut Rng, samples: Vec<Value>) -> Value {
    let stats = if r.chance(50) {
        let opt = |r: &mut Rng, v: f64| if r.chance(50) { json!(v) } else { Value::Null };
        let ev = r.below(800) as f64 / 8.0;
        let e = opt(r, ev);
        let mv = r.below(800) as f64 / 4.0 - 20.0;
        let m = opt(r, mv);
        json!([r.below(100_000) as f64 / 16.0, r.below(20_000) as f64 / 2.0, e, m])
    } else {
        Value::Null
    };
    object([
        ("sample_interval_us", (1 + r.below(20_000)).into()),
        ("start_time_us", (1_000_000 + r.below(1 << 40)).into()),
        ("compression", (if r.chance(50) { 1 } else { 0 }).into()),
        ("mode", (r.below(6) as i64 - 1).into()),
        ("capture_features", (r.below(33) as i64 - 1).into()),
        ("stats", stats),
        ("samples", samples.into()),
    ])
}

/// Many threads and interpreters with stacks that push, pop and swap, empty stacks, time
/// going backwards now and then, and an occasional interpreter id past 2^32-1.
pub fn mixed(seed: u64) -> Value {
    let mut r = Rng::new(seed);
    let n = 3 + r.below(40);
    let frames = pool(&mut r, n);
    let threads = 1 + r.below(12);
    let mut stacks: Vec<Vec<Value>> = vec![Vec::new(); threads as usize];
    let mut ts: u64 = 1_000_000 + r.below(1 << 40);
    let mut samples = Vec::new();
    for _ in 0..(50 + r.below(400)) {
        ts = match r.below(30) {
            0 => ts.wrapping_sub(r.below(5000)),
            1 => r.below(1000),
            _ => ts.wrapping_add(r.below(3000)),
        };
        let mut interpreters: Vec<Value> = Vec::new();
        for iid in 0..(1 + r.below(3)) {
            let mut list = Vec::new();
            for t in 0..threads {
                if r.chance(30) {
                    continue;
                }
                let stack = &mut stacks[t as usize];
                match r.below(10) {
                    0 => stack.clear(),
                    1..=2 => {
                        let pop = r.below(stack.len() as u64 + 1) as usize;
                        stack.drain(..pop);
                    }
                    3..=4 => {
                        for _ in 0..(1 + r.below(4)) {
                            stack.insert(0, r.pick(&frames).clone());
                        }
                    }
                    5 if !stack.is_empty() => {
                        let at = r.below(stack.len() as u64) as usize;
                        stack[at] = r.pick(&frames).clone();
                    }
                    _ => {}
                }
                list.push(object([
                    ("tid", json!(t * 0x1_0001 + (t % 3) * (1 << 62))),
                    ("status", status(&mut r)),
                    ("frames", stack.clone().into()),
                ]));
            }
            let id = if r.chance(1) { json!((1u64 << 32) + iid) } else { json!(iid) };
            interpreters.push(object([("iid", id), ("threads", list.into())]));
        }
        samples.push(object([("ts", ts.into()), ("interpreters", interpreters.into())]));
    }
    doc(&mut r, samples)
}

/// One thread on one stack for `n` samples with deltas of 1–2 bytes and changing statuses:
/// REPEAT runs longer than CPython's 16 KiB budget, split like CPython splits them.
pub fn long_repeat(seed: u64, n: u64) -> Value {
    let mut r = Rng::new(seed);
    let frames = pool(&mut r, 3);
    let mut ts = 1_000_000u64 + r.below(1000);
    let step = if r.chance(50) { 100 } else { 1000 };
    let samples = (0..n)
        .map(|i| {
            ts += step;
            let st = if i % 97 == 0 { 5 } else { 4 };
            one_thread(ts, 42, st, frames.clone())
        })
        .collect();
    doc(&mut r, samples)
}

/// Stacks of 250 to 300 frames (only the innermost 256 are kept), changing at both ends.
pub fn deep(seed: u64) -> Value {
    let mut r = Rng::new(seed);
    let frames = pool(&mut r, 400);
    let mut stack: Vec<Value> = (0..280).map(|i| frames[i].clone()).collect();
    let mut ts = 1_000_000u64;
    let mut samples = Vec::new();
    for _ in 0..60 {
        ts += 1000;
        match r.below(4) {
            0 => {
                stack.drain(..r.below(20) as usize);
            }
            1 => {
                for _ in 0..r.below(30) {
                    stack.insert(0, r.pick(&frames).clone());
                }
            }
            2 => {
                let at = stack.len().saturating_sub(1 + r.below(40) as usize);
                if at < stack.len() {
                    stack[at] = r.pick(&frames).clone();
                }
            }
            _ => {}
        }
        stack.truncate(300);
        samples.push(one_thread(ts, 1, 0, stack.clone()));
    }
    doc(&mut r, samples)
}

/// Empty stacks first, empty thread and interpreter lists, and transitions to and from empty.
pub fn empties(seed: u64) -> Value {
    let mut r = Rng::new(seed);
    let frames = pool(&mut r, 5);
    let mut samples = vec![json!({"ts": 1, "interpreters": []})];
    for i in 0..40u64 {
        let stack: Vec<Value> = if r.chance(50) { Vec::new() } else { frames[..1 + r.below(4) as usize].to_vec() };
        let threads = if r.chance(10) { json!([]) } else { json!([{"tid": i % 3, "status": 0, "frames": stack}]) };
        samples.push(json!({"ts": 1_000_000 + i * 10, "interpreters": [{"iid": 0, "threads": threads}]}));
    }
    doc(&mut r, samples)
}

/// The generated set: name and document, all from `seed`.
pub fn corpus(seed: u64) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for i in 0..24 {
        out.push((format!("mixed_{i}"), mixed(seed + i)));
    }
    out.push(("long_repeat_a".into(), long_repeat(seed + 100, 20_000)));
    out.push(("long_repeat_b".into(), long_repeat(seed + 101, 12_000)));
    for i in 0..3 {
        out.push((format!("deep_{i}"), deep(seed + 200 + i)));
        out.push((format!("empties_{i}"), empties(seed + 300 + i)));
    }
    out
}

/// A valid little-endian file in which each of `threads` threads has one sample (a FULL
/// record of two frames): what a server with short-lived threads gives. Built directly (the
/// writer's thread table is fixed-size by design, sized for long-lived threads).
pub fn many_threads(threads: u32) -> Vec<u8> {
    use tachyon_core::header::{Compression, Footer, Header, ProfilingConfig, CPYTHON_VERSION};
    use tachyon_core::records::{Encoding, Prefix};
    use tachyon_core::tables::{FrameEntry, MAX_FRAME_ENTRY_LEN};
    use tachyon_core::{LittleEndian, Location};

    let mut file = vec![0u8; 64];
    for tid in 0..u64::from(threads) {
        let prefix = Prefix { thread_id: 1_000_000 + tid, interpreter_id: 0, encoding: Encoding::Full as u8 };
        file.extend_from_slice(&prefix.encode(LittleEndian));
        // delta 0, status 0, depth 2, frames (tid % 4, 0): all one-byte varints.
        file.extend_from_slice(&[0, 0, 2, (tid % 4) as u8, 0]);
    }
    let string_table_offset = file.len() as u64;
    for s in [&b"server.py"[..], b"handle"] {
        file.push(s.len() as u8);
        file.extend_from_slice(s);
    }
    let frame_table_offset = file.len() as u64;
    for line in 1..=4 {
        let entry = FrameEntry {
            filename: 0,
            funcname: 1,
            location: Location { lineno: line, end_lineno: line, col: 4, end_col: 20 },
            opcode: 255,
        };
        let mut b = [0u8; MAX_FRAME_ENTRY_LEN];
        let n = entry.encode(&mut b);
        file.extend_from_slice(&b[..n]);
    }
    let header = Header {
        python_version: CPYTHON_VERSION,
        start_time_us: 1_000_000,
        sample_interval_us: 1000,
        sample_count: u64::from(threads),
        thread_count: threads,
        string_table_offset,
        frame_table_offset,
        compression: Compression::None,
        config: ProfilingConfig::default(),
    };
    file[..64].copy_from_slice(&header.encode(LittleEndian));
    let file_size = file.len() as u64 + 32;
    file.extend_from_slice(&Footer { string_count: 2, frame_count: 4, file_size }.encode(LittleEndian));
    file
}
