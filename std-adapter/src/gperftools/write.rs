//! gperftools CPU profiles out: a gperftools input written again through the core writer,
//! record by record, in its own slot width and byte order (the same bytes, quirks and all,
//! as `tachyon_core::gperftools::Writer::write_raw_record` keeps them) or in another
//! ([`reencode`]); any other input with addresses (pprof) from the hub ([`write_from_hub`]).
//!
//! In another format, each slot's value is kept; what only makes sense in the input's slot
//! width is normalised as google-pprof reads it: the end marker's program counters are
//! re-encoded and the maps text follows them as it was, a partial last slot (which readers
//! drop) is dropped, and a value wider than a 4-byte slot is an error naming it.

use embedded_io::{Read, Write};
use tachyon_core::gperftools::{End, Header, Item, ReadError, Reader, RunTimeWord, Word, Writer, MAX_DEPTH};
use tachyon_core::RunTimeEndian;

use crate::model::{Call, Collector, FrameTable, Source, Ticker};
use crate::output::ConvertError;

pub use crate::memory::IoSink;

/// Writes every record of the profile `source` holds into `sink`, in slot width `word` and
/// byte order `endian` (default: the input's); returns the samples.
pub fn reencode<R: Read, S: Write>(
    source: R,
    sink: S,
    word: Option<RunTimeWord>,
    big_endian: Option<bool>,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, ConvertError<ReadError<R::Error>>>
where
    S::Error: std::fmt::Debug,
{
    let mut window = vec![0u8; tachyon_core::gperftools::LARGEST_RECORD_WINDOW];
    let mut reader = Reader::open(source, &mut window).map_err(ConvertError::Read)?;
    let input = *reader.header();
    let word = word.unwrap_or(input.word);
    let endian = match big_endian {
        Some(true) => RunTimeEndian::Big,
        Some(false) => RunTimeEndian::Little,
        None => input.endian,
    };
    let same = word == input.word && endian == input.endian;
    let header = Header { word, endian, ..input };
    // Room for the deepest record a reader accepts.
    let mut staging = vec![0u8; (MAX_DEPTH as usize + 2) * word.bytes()];
    let encode = |e: tachyon_core::gperftools::WriteError<S::Error>| ConvertError::Encode(e.to_string());
    let mut writer = Writer::with_format(sink, &mut staging, word, endian, &header).map_err(encode)?;
    let mut pcs: Vec<u64> = Vec::new();
    let mut end = None;
    let mut ticker = Ticker::default();
    while let Some(item) = reader.next_item().map_err(ConvertError::Read)? {
        match item {
            Item::ExtraHeaderWord(v) => writer.extra_header_word(v).map_err(encode)?,
            Item::Record(r) => {
                pcs.clear();
                pcs.extend(r.pcs.iter());
                writer.write_raw_record(r.count, r.depth, &pcs).map_err(encode)?;
                ticker.tick(reader.samples(), progress);
            }
            Item::End(e) => end = Some(e),
        }
    }
    let samples = reader.samples();
    let in_word = reader.word();
    // The tail is the maps text: kept whole, it is what the file holds after its records.
    let mut tail = Vec::new();
    let mut rest = reader.into_tail();
    let mut chunk = [0u8; 8192];
    loop {
        let n = rest.read(&mut chunk).map_err(ConvertError::Read)?;
        if n == 0 {
            break;
        }
        tail.extend_from_slice(&chunk[..n]);
    }
    match end {
        Some(End::Marker { count, depth, .. }) if same => {
            writer.write_raw_record(count, Some(depth), &[]).map_err(encode)?;
            writer.finish_raw(&tail).map_err(encode)?;
        }
        Some(End::Marker { count, depth, .. }) => {
            // The marker's program counters open the tail, in the input's slots.
            let slots = usize::try_from(depth).unwrap_or(usize::MAX).min(tail.len() / in_word.bytes());
            pcs.clear();
            pcs.extend(
                tail.chunks_exact(in_word.bytes()).take(slots).filter_map(|slot| in_word.read(input.endian, slot)),
            );
            writer.write_raw_record(count, Some(pcs.len() as u64), &pcs).map_err(encode)?;
            writer.finish_raw(&tail[slots * in_word.bytes()..]).map_err(encode)?;
        }
        Some(End::EndOfFile { .. }) | None => writer.finish_raw(if same { &tail } else { &[] }).map_err(encode)?,
    }
    progress(samples);
    Ok(samples)
}

/// Writes the hub's samples as a gperftools CPU profile: one record per call (its samples as
/// the count, its frames' addresses as the program counters, return addresses given back
/// the 1 readers take off), then libprofiler's trailer and a maps text of the source's
/// mappings in libprofiler 2.10's layout. Slots are `word` wide, by default this machine's
/// (as libprofiler's) unless an address needs 8 bytes. Every frame must have an address (native inputs:
/// pprof); frames inlined at an address are that address once.
pub fn write_from_hub<S: Source, W: Write>(
    source: &mut S,
    sink: W,
    word: Option<RunTimeWord>,
    endian: RunTimeEndian,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, ConvertError<S::Error>>
where
    W::Error: std::fmt::Debug,
{
    let frames = source.frames();
    // Default: this machine's slot width, as libprofiler's, unless an address needs 8 bytes.
    let wide = frames.frames.iter().any(|f| f.address.is_some_and(|a| a > u64::from(u32::MAX)));
    let word = word.unwrap_or(if wide { RunTimeWord::Eight } else { RunTimeWord::default() });
    if let Some(f) = frames.frames.iter().find(|f| f.address.is_none()) {
        return Err(ConvertError::Unsupported {
            output: crate::output::OutputKind::Gperftools,
            input: source.info().kind,
            why: if f.funcname.is_empty() {
                "a gperftools profile holds addresses, and a frame of this input has none"
            } else {
                "a gperftools profile holds addresses, and this input's frames have names without addresses"
            },
        });
    }
    let mut maps_text = String::new();
    for m in &frames.mappings {
        maps_text
            .push_str(&format!("{:08x}-{:08x} r-xp {:08x} 00:00 0           {}\n", m.start, m.limit, m.offset, m.file));
    }
    let period_us = match source.info().sample_interval_us {
        0 => 10_000,
        p => p,
    };
    let header = Header { word, endian, ..Header::libprofiler(period_us) };
    let mut staging = vec![0u8; (MAX_DEPTH as usize + 2) * word.bytes()];
    let mut collector = RecordWriter {
        writer: Writer::with_format(sink, &mut staging, word, endian, &header)
            .map_err(|e| ConvertError::Encode(e.to_string()))?,
        pcs: Vec::new(),
        error: None,
    };
    let n = source.replay(&mut collector, progress).map_err(ConvertError::Read)?;
    if let Some(e) = collector.error {
        return Err(ConvertError::Encode(e));
    }
    collector.writer.finish(maps_text.as_bytes()).map_err(|e| ConvertError::Encode(e.to_string()))?;
    Ok(n)
}

/// A record per call; keeps the first error.
struct RecordWriter<'b, W: Write> {
    writer: Writer<'b, W, RunTimeWord, RunTimeEndian>,
    pcs: Vec<u64>,
    error: Option<String>,
}

impl<W: Write> Collector for RecordWriter<'_, W>
where
    W::Error: std::fmt::Debug,
{
    fn collect(&mut self, frames: &FrameTable, call: &Call<'_>) {
        if self.error.is_some() || call.stack.is_empty() {
            return;
        }
        self.pcs.clear();
        for &id in call.stack {
            let f = frames.frame(id);
            if f.inlined {
                continue;
            }
            let address = f.address.unwrap_or(0);
            self.pcs.push(if self.pcs.is_empty() { address } else { address.wrapping_add(1) });
        }
        if let Err(e) = self.writer.write_record(call.samples(), &self.pcs) {
            self.error = Some(e.to_string());
        }
    }
}
