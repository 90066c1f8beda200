//! gperftools CPU profiles on std: a file's facts for `tachyon info` (here), the file as an
//! input of the hub ([`source`]), and the file re-encoded or the hub written as one ([`write`](mod@write)).

pub mod source;
pub mod write;

use std::collections::HashSet;
use std::io;

use embedded_io::Read;
use serde_json::{json, Value};
use tachyon_core::gperftools::{End, Item, ReadError, Reader, Word, LARGEST_RECORD_WINDOW};
use tachyon_core::RunTimeEndian;

/// What `info` shows of a gperftools profile: the header, then, from one pass over the
/// records, their count, the samples (summed as google-pprof sums them), the distinct
/// stacks, how the data ended, the maps text's size and every quirk met. Memory grows with
/// the distinct stacks only.
pub fn info<R: Read<Error = io::Error>>(source: R, file_bytes: u64) -> Result<Value, ReadError<io::Error>> {
    let mut window = vec![0u8; LARGEST_RECORD_WINDOW];
    let mut reader = Reader::open(source, &mut window)?;
    let h = *reader.header();
    let mut stacks: HashSet<Vec<u64>> = HashSet::new();
    let mut end = None;
    let mut extra_words = 0u64;
    while let Some(item) = reader.next_item()? {
        match item {
            Item::ExtraHeaderWord(_) => extra_words += 1,
            Item::Record(r) => {
                stacks.insert(r.pcs.iter().collect());
            }
            Item::End(e) => end = Some(e),
        }
    }
    let (records, samples, quirks, word) = (reader.records(), reader.samples(), reader.quirks(), reader.word());
    let data_end = reader.offset();
    let (trailer, text_bytes) = match end {
        Some(e @ End::Marker { count, depth, .. }) => {
            let skip = e.text_skip(word).unwrap_or(0);
            let rest = file_bytes.saturating_sub(data_end);
            (
                json!(if e.is_trailer() { "0, 1, 0".to_owned() } else { format!("{count}, {depth}, 0 …") }),
                rest.saturating_sub(skip),
            )
        }
        _ => (Value::Null, 0),
    };
    Ok(json!({
        "word_bytes": word.bytes(),
        "byte_order": if h.endian == RunTimeEndian::Big { "big" } else { "little" },
        "header_words": h.words,
        "extra_header_words": extra_words,
        "version": h.version,
        "period_us": h.period_us,
        "records": records,
        "samples": samples,
        "distinct_stacks": stacks.len(),
        "end_marker": trailer,
        "maps_text_bytes": text_bytes,
        "file_bytes": file_bytes,
        "quirks": quirks.names().collect::<Vec<_>>(),
    }))
}
