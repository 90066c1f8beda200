//! gperftools CPU profiles as a [`Source`]: each record is one call of `count` samples of
//! one stack (no threads, no times), each distinct address one frame.
//!
//! The maps text comes after the records, and frames must be complete before the first
//! sample, so the file is read twice: the first pass gathers the distinct addresses and the
//! maps text, the second replays the records. Memory grows with distinct addresses and the
//! maps text, never with the records.
//!
//! Addresses are adjusted as both real readers adjust them: the innermost is the signal's
//! program counter, every other one a return address, so 1 is subtracted from those to point
//! into the call instruction. An address without a symbol is named `0x…` (hex, as go pprof
//! shows it). Records of zero samples add nothing and are skipped.

use embedded_io::{Read, Seek, SeekFrom};
use tachyon_core::gperftools::{Item, ReadError, Reader, LARGEST_RECORD_WINDOW};
use tachyon_core::kind::FileKind;

use crate::hash::IdMap;
use crate::model::{Call, Collector, FrameInfo, FrameTable, Mapping, Naming, Source, SourceInfo, Ticker, Times};

/// Most bytes of maps text read: a real one is a few kilobytes; more is not a process's map.
pub const MAX_MAPS_TEXT: usize = 16 << 20;

/// A gperftools CPU profile, read twice from `R`.
pub struct GperftoolsSource<R: Read + Seek> {
    source: R,
    window: Vec<u8>,
    info: SourceInfo,
    frames: FrameTable,
    /// Adjusted address → its frame id.
    frame_of: IdMap<u64, u32>,
}

/// The address a stack slot stands for: return addresses (all but the innermost) minus one.
fn adjusted(index: usize, pc: u64) -> u64 {
    if index == 0 {
        pc
    } else {
        pc.wrapping_sub(1)
    }
}

impl<R: Read + Seek> GperftoolsSource<R> {
    /// Reads the profile once for its addresses and maps text.
    pub fn open(mut source: R) -> Result<Self, ReadError<R::Error>> {
        let mut window = vec![0u8; LARGEST_RECORD_WINDOW];
        let mut frame_of: IdMap<u64, u32> = IdMap::default();
        let mut order: Vec<u64> = Vec::new();
        let (period_us, samples, maps_text) = {
            let mut reader = Reader::open(&mut source, &mut window)?;
            let mut end = None;
            while let Some(item) = reader.next_item()? {
                match item {
                    Item::Record(r) if r.count > 0 => {
                        for (i, pc) in r.pcs.iter().enumerate() {
                            let a = adjusted(i, pc);
                            if let std::collections::hash_map::Entry::Vacant(e) = frame_of.entry(a) {
                                e.insert(order.len() as u32);
                                order.push(a);
                            }
                        }
                    }
                    Item::End(e) => end = Some(e),
                    _ => {}
                }
            }
            let (period, samples, word) = (reader.header().period_us, reader.samples(), reader.word());
            let skip = end.as_ref().and_then(|e| e.text_skip(word));
            let mut maps_text = Vec::new();
            if let Some(skip) = skip {
                let mut tail = reader.into_tail();
                let mut chunk = [0u8; 8192];
                let mut skipped = 0u64;
                loop {
                    let n = tail.read(&mut chunk)?;
                    if n == 0 || maps_text.len() >= MAX_MAPS_TEXT {
                        break;
                    }
                    let from = (skip.saturating_sub(skipped)).min(n as u64) as usize;
                    skipped += n as u64;
                    maps_text.extend_from_slice(&chunk[from..n]);
                }
                maps_text.truncate(MAX_MAPS_TEXT);
            }
            (period, samples, maps_text)
        };
        let mut frames = FrameTable::default();
        frames.mappings = parse_maps(&String::from_utf8_lossy(&maps_text));
        frames.mappings.sort_by_key(|m| m.start);
        for &a in &order {
            let mapping = frames.mapping_of(a);
            frames.push(FrameInfo {
                funcname: format!("{a:#x}"),
                address: Some(a),
                mapping,
                anonymous: true,
                ..FrameInfo::default()
            });
        }
        let info = SourceInfo {
            kind: FileKind::Gperftools,
            start_time_us: 0,
            sample_interval_us: period_us,
            mode: "cpu",
            cpython_mode: None,
            expected_samples: samples,
            timestamps: false,
            threads: false,
            naming: Naming::Native,
        };
        Ok(GperftoolsSource { source, window, info, frames, frame_of })
    }
}

/// The mappings of a `/proc/self/maps` text: `start-limit perms offset dev inode path`. Lines
/// that are not of that shape (libprofiler writes nothing else, but other writers add
/// `build=` lines and comments) are skipped.
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut fields = line.split_ascii_whitespace();
        let (Some(range), Some(_perms), Some(offset)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        let Some((start, limit)) = range.split_once('-') else { continue };
        let hex = |s: &str| u64::from_str_radix(s, 16).ok();
        let (Some(start), Some(limit), Some(offset)) = (hex(start), hex(limit), hex(offset)) else { continue };
        let (_dev, _inode) = (fields.next(), fields.next());
        let file = fields.collect::<Vec<_>>().join(" ");
        out.push(Mapping { start, limit, offset, file, build_id: String::new() });
    }
    out
}

impl<R: Read + Seek> Source for GperftoolsSource<R> {
    type Error = ReadError<R::Error>;

    fn info(&self) -> &SourceInfo {
        &self.info
    }

    fn frames(&self) -> &FrameTable {
        &self.frames
    }

    fn replay(&mut self, collector: &mut dyn Collector, progress: &mut dyn FnMut(u64)) -> Result<u64, Self::Error> {
        self.source.seek(SeekFrom::Start(0)).map_err(|error| ReadError::Io { offset: 0, error })?;
        let mut reader = Reader::open(&mut self.source, &mut self.window)?;
        let mut stack: Vec<u32> = Vec::new();
        let mut ticker = Ticker::default();
        while let Some(item) = reader.next_item()? {
            let Item::Record(r) = item else { continue };
            if r.count == 0 {
                continue;
            }
            stack.clear();
            // Every address was numbered by the first pass over the same bytes.
            stack.extend(r.pcs.iter().enumerate().filter_map(|(i, pc)| self.frame_of.get(&adjusted(i, pc)).copied()));
            let call = Call {
                times: Times::Counted(r.count),
                interpreter_id: 0,
                thread_id: 0,
                status: 0,
                stack: &stack,
                continued: false,
            };
            collector.collect(&self.frames, &call);
            ticker.tick(reader.samples(), progress);
        }
        let done = reader.samples();
        progress(done);
        Ok(done)
    }
}
