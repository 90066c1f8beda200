//! What a reader must return for a writer-input document, derived from the writer rules
//! (spec 5.1, 5.4) and reader rules (spec 4) — never from the code under test — and the
//! same samples grouped per thread from a decoded view. Samples are compared per thread
//! because REPEAT deferral reorders records across threads.

use std::collections::BTreeMap;

use serde_json::Value;

/// Per `(thread_id, interpreter_id)`: `[ts, status, frames]` in order.
pub type PerThread = BTreeMap<(u64, u64), Vec<Value>>;

/// The samples a reader must return for a document, per thread in order, from the writer
/// rules (spec 5.1, 5.4) and reader rules (spec 4) — not from the code under test.
pub fn model(doc: &Value) -> PerThread {
    let mut out = PerThread::new();
    let part = |v: &Value| v.as_i64().map_or(-1, |n| n as i32);
    for call in doc["samples"].as_array().unwrap() {
        'call: for it in call["interpreters"].as_array().unwrap() {
            let Some(iid) = it["iid"].as_u64().filter(|&i| i <= u64::from(u32::MAX)) else { break 'call };
            for th in it["threads"].as_array().unwrap() {
                let frames: Vec<Value> = th["frames"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .take(256)
                    .map(|f| {
                        let loc = match &f[2] {
                            Value::Null => None,
                            l => Some([part(&l[0]), part(&l[1]), part(&l[2]), part(&l[3])]),
                        };
                        let loc = loc.filter(|l| l[0] != -1).map(|[a, b, c, d]| {
                            let end = |s: i32, e: i32| {
                                if s == -1 {
                                    -1
                                } else if e == -1 {
                                    s
                                } else {
                                    e
                                }
                            };
                            Value::from(vec![a, end(a, b), c, end(c, d)])
                        });
                        let op = f[3].as_i64().filter(|o| (0..255).contains(o));
                        Value::Array(vec![f[0].clone(), f[1].clone(), Value::from(loc), Value::from(op)])
                    })
                    .collect();
                let status = th["status"].as_i64().unwrap() as u8;
                let key = (th["tid"].as_u64().unwrap(), iid);
                out.entry(key).or_default().push(Value::Array(vec![call["ts"].clone(), status.into(), frames.into()]));
            }
        }
    }
    out
}

// The rows are built as `Value::Array`s of clones: `json!` serialises each `Value` it is
// given into a new one, which was most of the exchange readers' time under qemu.

/// The samples of a decoded view (`get_info()` line first), grouped per thread.
pub fn per_thread(lines: &[Value]) -> PerThread {
    let mut out = PerThread::new();
    for s in &lines[1..] {
        let key = (s["tid"].as_u64().unwrap(), s["iid"].as_u64().unwrap());
        out.entry(key).or_default().push(Value::Array(vec![s["ts"].clone(), s["status"].clone(), s["frames"].clone()]));
    }
    out
}
