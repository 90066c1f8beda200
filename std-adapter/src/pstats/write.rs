//! Writing a pstats file every Python 3 loads.

use tachyon_core::marshal::{EncodeError, Encoder};

use super::stats::*;

/// Writes `stats` as a pstats file every Python 3 loads: no references, callers as they were
/// (tuples or counts), 3.15's `("__sampled__",): True` marker only with `keep_marker`.
pub fn write(
    stats: &Stats,
    keep_marker: bool,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError<core::convert::Infallible>> {
    let mut m = Encoder::new(out);
    let num = |m: &mut Encoder<&mut Vec<u8>>, n: Num| match n.value() {
        NumValue::Int(i) => m.int(i),
        NumValue::Float(f) => m.float(f),
    };
    let name = |m: &mut Encoder<&mut Vec<u8>>, n: &Name| match n {
        Name::Str(s) => m.str(s.as_bytes()),
        // A code object cannot be written back; its repr stands for it.
        Name::Code(_) => m.str(n.to_string().as_bytes()),
    };
    let key = |m: &mut Encoder<&mut Vec<u8>>, k: &Key| {
        m.tuple(3)?;
        name(m, stats.name(k.filename))?;
        num(m, k.line)?;
        name(m, stats.name(k.name))
    };
    m.dict()?;
    for e in &stats.entries {
        key(&mut m, &e.key)?;
        m.tuple(5)?;
        for n in [e.cc, e.nc, e.tt, e.ct] {
            num(&mut m, n)?;
        }
        m.dict()?;
        for (k, calls) in &e.callers {
            key(&mut m, k)?;
            match calls {
                Calls::Count(n) => num(&mut m, *n)?,
                Calls::Timed(t) => {
                    m.tuple(4)?;
                    for n in t {
                        num(&mut m, *n)?;
                    }
                }
                Calls::Other { numbers: Some(items), tuple, .. } => {
                    let len = u32::try_from(items.len()).map_err(|_| EncodeError::TooLong)?;
                    if *tuple {
                        m.tuple(len)?;
                    } else {
                        m.list(len)?;
                    }
                    for n in items {
                        num(&mut m, *n)?;
                    }
                }
                // Anything else is not kept: its repr as a str, so the file still loads.
                Calls::Other { repr, .. } => m.str(repr.as_bytes())?,
            }
        }
        m.end_dict()?;
    }
    if keep_marker && stats.sampled {
        m.tuple(1)?;
        m.str(b"__sampled__")?;
        m.bool(true)?;
    }
    m.end_dict()
}
