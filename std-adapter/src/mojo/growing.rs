//! A MOJO file read while Austin writes it: each read decodes the events written since the
//! last ([`Reader::resume`]), keeping the definitions and every thread's last stack (for
//! STACK_REPEAT) between reads, so a read costs what the file gained, not its length. An
//! event cut by the end of what is written is read again, whole, by the next read.
//!
//! A MOJO sample ends where the next STACK (or the file) does, so the last one read may still
//! grow: it is handed over on its own ([`GrowingMojo::pending`]) and not kept, and the
//! samples of the file so far are those read plus that one, as a reader of the whole file
//! gives them. Samples become the hub's calls as [`MojoSource`](super::source::MojoSource)
//! makes them (weighed by the metric), the metric resolved by the metadata before the first
//! sample (Austin writes the mode first).

use embedded_io::{Read, Seek, SeekFrom};
use tachyon_core::mojo::{ReadError, Reader, Rule, Samples, MIN_WINDOW};

use super::source::{read_metadata, Calls, MojoFrames, MojoMetric};
use super::{samples, SamplesError, WINDOW};
use crate::model::{Collector, FrameTable};

/// A MOJO file followed as it grows.
pub struct GrowingMojo {
    asked: MojoMetric,
    /// The file's version, once its header is written.
    version: Option<u8>,
    /// Where the next event starts: the bytes before it are read.
    taken: u64,
    window: Vec<u8>,
    samples: Samples<'static>,
    frames: MojoFrames,
    mode: String,
    interval_us: u64,
    /// Made at the first sample, from the metadata before it.
    calls: Option<Calls>,
    /// Samples read whole (finished by a later STACK).
    finished: u64,
}

impl GrowingMojo {
    /// A file not read yet, its samples weighed by `metric`.
    pub fn new(metric: MojoMetric) -> Self {
        GrowingMojo {
            asked: metric,
            version: None,
            taken: 0,
            window: vec![0; WINDOW],
            samples: samples(),
            frames: MojoFrames::new(),
            mode: String::new(),
            interval_us: 0,
            calls: None,
            finished: 0,
        }
    }

    /// Bytes of the file read: where the next read starts.
    pub fn taken(&self) -> u64 {
        self.taken
    }

    /// Samples read whole so far (the pending one not counted).
    pub fn finished(&self) -> u64 {
        self.finished
    }

    /// The frames of every sample read, the pending one's too.
    pub fn frames(&self) -> &FrameTable {
        &self.frames.table
    }

    /// Reads the events the file gained since the last read, handing `collector` each
    /// sample they finished; `source` is the file, at any position. The bytes read.
    pub fn read<R: Read + Seek>(
        &mut self,
        source: R,
        collector: &mut dyn Collector,
    ) -> Result<u64, SamplesError<R::Error>> {
        let io = |offset| move |error| SamplesError::Read(ReadError::Io { offset, error });
        let mut source = Counting { source, read: 0 };
        let version = match self.version {
            Some(version) => version,
            None => {
                source.seek(SeekFrom::Start(0)).map_err(io(0))?;
                // (A window the header fits in: no more is read for it.)
                match Reader::open(&mut source, &mut self.window[..MIN_WINDOW]) {
                    Ok(reader) => {
                        let version = reader.version();
                        self.taken = reader.offset();
                        self.version = Some(version);
                        version
                    }
                    // The header is not all written yet.
                    Err(ReadError::Format { rule: Rule::Truncated, .. }) => return Ok(source.read),
                    Err(e) => return Err(SamplesError::Read(e)),
                }
            }
        };
        let from = self.taken;
        source.seek(SeekFrom::Start(from)).map_err(io(from))?;
        let mut reader = Reader::resume(&mut source, &mut self.window, version, from).map_err(SamplesError::Read)?;
        while let Some((offset, event)) = reader.next_item().map_err(SamplesError::Read)? {
            if let tachyon_core::mojo::Event::Metadata { key, value } = event {
                read_metadata(key, value, &mut self.mode, &mut self.interval_us);
            }
            if self.samples.push(offset, &event).map_err(SamplesError::Sample)? {
                let sample = self.samples.sample().expect("a finished sample");
                self.frames.learn(&sample);
                let calls = calls(&mut self.calls, self.asked, &self.mode, self.interval_us);
                calls.collect(&self.frames, &sample, collector, true);
                self.finished += 1;
            }
        }
        self.taken = reader.offset();
        if let Some(sample) = self.samples.pending() {
            self.frames.learn(&sample);
        }
        Ok(source.read)
    }

    /// Hands `collector` the sample the file ends in so far, which a later read may add to:
    /// not kept. Its frames are in [`GrowingMojo::frames`] since the read.
    pub fn pending(&mut self, collector: &mut dyn Collector) {
        let Some(sample) = self.samples.pending() else { return };
        let calls = calls(&mut self.calls, self.asked, &self.mode, self.interval_us);
        calls.collect(&self.frames, &sample, collector, false);
    }
}

/// The calls, made (weighed, the metric resolved by the mode) at the first sample.
fn calls<'c>(calls: &'c mut Option<Calls>, asked: MojoMetric, mode: &str, interval_us: u64) -> &'c mut Calls {
    calls.get_or_insert_with(|| Calls::new(mode, asked.resolve(mode), false, interval_us))
}

/// A source counting the bytes read from it.
struct Counting<R> {
    source: R,
    read: u64,
}

impl<R: embedded_io::ErrorType> embedded_io::ErrorType for Counting<R> {
    type Error = R::Error;
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, Self::Error> {
        let n = self.source.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

impl<R: Seek> Seek for Counting<R> {
    fn seek(&mut self, pos: SeekFrom) -> Result<u64, Self::Error> {
        self.source.seek(pos)
    }
}
