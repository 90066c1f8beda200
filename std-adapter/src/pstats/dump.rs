//! `tachyon dump` of a pstats file.

use super::stats::*;
use crate::pyfmt::float_repr;

/// `tachyon dump` of a pstats file: one JSON line per entry in the dict's order,
/// `{"file", "line", "function", "cc", "nc", "tt", "ct", "callers"}`, each caller
/// `[file, line, function, value]` with `value` a count or cProfile's `[nc, cc, tt, ct]`.
/// Numbers are JSON numbers where JSON holds them; an int beyond 64 bits, a float that is not
/// finite and a value of another shape are strings of Python's repr. Returns the entries.
pub fn dump(stats: &Stats, out: &mut impl std::io::Write) -> std::io::Result<u64> {
    let name = |id: NameId| stats.names.get(id.0 as usize).map_or_else(String::new, |n| n.to_string());
    let number = |n: Num| match n.value() {
        NumValue::Int(i) => i64::try_from(i).map_or_else(|_| serde_json::Value::from(i.to_string()), Into::into),
        NumValue::Float(f) if f.is_finite() => serde_json::Value::from(f),
        NumValue::Float(f) => serde_json::Value::from(float_repr(f)),
    };
    for e in &stats.entries {
        let callers: Vec<serde_json::Value> = e
            .callers
            .iter()
            .map(|(k, calls)| {
                let value = match calls {
                    Calls::Count(n) => number(*n),
                    Calls::Timed(t) => serde_json::Value::from(t.iter().map(|&n| number(n)).collect::<Vec<_>>()),
                    Calls::Other { repr, .. } => serde_json::Value::from(repr.as_str()),
                };
                serde_json::json!([name(k.filename), number(k.line), name(k.name), value])
            })
            .collect();
        let line = serde_json::json!({
            "file": name(e.key.filename), "line": number(e.key.line), "function": name(e.key.name),
            "cc": number(e.cc), "nc": number(e.nc), "tt": number(e.tt), "ct": number(e.ct), "callers": callers,
        });
        serde_json::to_writer(&mut *out, &line)?;
        out.write_all(b"\n")?;
    }
    Ok(stats.entries.len() as u64)
}
