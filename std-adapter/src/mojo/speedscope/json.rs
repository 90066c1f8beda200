//! The profiles written as `austin2speedscope` writes them: Python's `json.dump`, `", "` and
//! `": "` separators, non-ASCII as `\uXXXX`.

use std::io::{self, Write};

use super::profiles::*;
use crate::pyfmt::{push_decimal, write_json_str};

impl Profiles {
    pub(super) fn write_json(&self, name: &str, out: impl Write) -> io::Result<()> {
        let mut out = io::BufWriter::with_capacity(1 << 16, out);
        out.write_all(
            b"{\"$schema\": \"https://www.speedscope.app/file-format-schema.json\", \"shared\": {\"frames\": [",
        )?;
        for (i, [function, file, line]) in self.order.iter().map(|&f| &self.frames[f as usize]).enumerate() {
            if i > 0 {
                out.write_all(b", ")?;
            }
            out.write_all(b"{\"name\": ")?;
            write_json_str(&mut out, function)?;
            out.write_all(b", \"file\": ")?;
            write_json_str(&mut out, file)?;
            write!(out, ", \"line\": {line}}}")?;
        }
        out.write_all(b"]}, \"profiles\": [")?;
        let last_word = |p: &Profile| p.name.rsplit(python_space).find(|w| !w.is_empty()).unwrap_or("").to_owned();
        let mut order: Vec<&Profile> = self.profiles.iter().collect();
        order.sort_by_cached_key(|p| last_word(p));
        // Each distinct stack as JSON once (`[1, 2, 3]`), written again per sample.
        let mut stacks = Vec::new();
        let mut ends = Vec::with_capacity(self.stacks.len());
        for stack in &self.stacks {
            stacks.push(b'[');
            for (k, &id) in stack.iter().enumerate() {
                if k > 0 {
                    stacks.extend_from_slice(b", ");
                }
                push_decimal(&mut stacks, id.into());
            }
            stacks.push(b']');
            ends.push(stacks.len());
        }
        let stack_json = |id: u32| {
            let id = id as usize;
            &stacks[if id == 0 { 0 } else { ends[id - 1] }..ends[id]]
        };
        let mut buf = Vec::with_capacity(2 << 16);
        for (i, p) in order.iter().enumerate() {
            if i > 0 {
                out.write_all(b", ")?;
            }
            out.write_all(b"{\"name\": ")?;
            write_json_str(&mut out, &p.name)?;
            write!(out, ", \"unit\": \"{}\", \"startValue\": 0, \"endValue\": {}, \"samples\": [", p.unit, p.end)?;
            for (j, &stack) in p.stacks.iter().enumerate() {
                if j > 0 {
                    buf.extend_from_slice(b", ");
                }
                buf.extend_from_slice(stack_json(stack));
                if buf.len() >= 1 << 16 {
                    out.write_all(&buf)?;
                    buf.clear();
                }
            }
            buf.extend_from_slice(b"], \"weights\": [");
            for (j, &weight) in p.weights.iter().enumerate() {
                if j > 0 {
                    buf.extend_from_slice(b", ");
                }
                push_i128(&mut buf, weight);
                if buf.len() >= 1 << 16 {
                    out.write_all(&buf)?;
                    buf.clear();
                }
            }
            buf.extend_from_slice(b"], \"type\": \"sampled\"}");
            out.write_all(&buf)?;
            buf.clear();
        }
        out.write_all(b"], \"name\": ")?;
        write_json_str(&mut out, name)?;
        write!(out, ", \"exporter\": \"{EXPORTER}\"}}")?;
        out.flush()
    }
}
