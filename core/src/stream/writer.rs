//! The device's side: samples by id, each definition sent once, a frame of items at a time.

use embedded_io::Write;

use super::{item, kind, CRC_LEN, MAGIC, VERSION};
use crate::capture::Taken;
use crate::endian::{Endianity, NativeEndian};
use crate::framing::{crc32, write_all, write_cobs, Failure};
use crate::header::HEADER_SIZE;
use crate::records::MAX_STACK_DEPTH;
use crate::varint;
use crate::writer::{Frame, WriterConfig};

/// Room before a frame's body for its `seq` (at most 5 bytes) and kind.
const HEAD: usize = 6;

/// The least transmit buffer [`StreamWriter`] takes: the header's frame fits, and a sample
/// of a few frames.
pub const MIN_BUFFER: usize = HEAD + HEADER_SIZE + CRC_LEN;

/// The `u32` words of a `sent` bitmap for ids `0..ids`.
pub const fn ids_words(ids: usize) -> usize {
    ids.div_ceil(32)
}

/// What went wrong in a [`StreamWriter`] call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum WriteError<E> {
    /// The link failed while a frame went out: its samples (the call's own included, when it
    /// was one) are lost and counted dropped; the writer goes on with the next frame.
    Sink {
        /// The link's error.
        error: E,
        /// Samples lost with the frame.
        dropped: u32,
    },
    /// The link took no bytes of a non-empty write (which `embedded_io::Write` forbids);
    /// `dropped` as for [`WriteError::Sink`].
    SinkWroteZero {
        /// Samples lost with the frame.
        dropped: u32,
    },
    /// A sample or a definition longer than an empty frame of the transmit buffer: refused.
    TooLarge {
        /// The transmit buffer's length.
        buffer: usize,
    },
    /// An id past the `sent` bitmap: the sample is refused.
    IdOutOfRange {
        /// The id.
        id: u32,
        /// The ids the bitmap holds.
        ids: usize,
    },
    /// The transmit buffer is shorter than [`MIN_BUFFER`].
    BufferTooSmall {
        /// Its length.
        buffer: usize,
    },
    /// `End` went out ([`StreamWriter::finish`] succeeded, or is to be called again for its
    /// last byte): no more samples.
    Finished,
}

impl<E: core::fmt::Debug> core::fmt::Display for WriteError<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            WriteError::Sink { error, dropped } => write!(f, "link error: {error:?} ({dropped} samples lost)"),
            WriteError::SinkWroteZero { dropped } => write!(f, "the link took no bytes ({dropped} samples lost)"),
            WriteError::TooLarge { buffer } => write!(f, "an item longer than the {buffer}-byte transmit buffer"),
            WriteError::IdOutOfRange { id, ids } => write!(f, "id {id} past the {ids} ids of the sent bitmap"),
            WriteError::BufferTooSmall { buffer } => {
                write!(f, "a {buffer}-byte transmit buffer ({MIN_BUFFER} at least)")
            }
            WriteError::Finished => f.write_str("the stream is finished"),
        }
    }
}

impl<E: core::fmt::Debug> core::error::Error for WriteError<E> {}

type Error<L> = WriteError<<L as embedded_io::ErrorType>::Error>;

/// Streams samples by id over `link` (see the module's wire format). Storage is the
/// caller's: `buffer`, one frame of items, sent when the next item does not fit or on
/// [`StreamWriter::flush`]; `sent`, a bit per id whose definition went out.
pub struct StreamWriter<'b, L: Write> {
    link: L,
    buffer: &'b mut [u8],
    sent: &'b mut [u32],
    seq: u32,
    /// End of the staged body in `buffer` (`HEAD` when nothing is staged).
    staged: usize,
    staged_samples: u32,
    /// The staged frame's thread and time base.
    thread: Option<(u32, u64)>,
    time_base_us: u64,
    /// Samples in frames that went out.
    samples: u64,
    /// Samples lost before this writer (the caller's) and in frames the link failed.
    dropped_upstream: u64,
    dropped: u64,
    refused: u64,
    /// The totals the last `Counts` that went out said.
    counts_sent: Option<(u64, u64)>,
    /// A send failed: a `0x00` goes out before the next frame, ending what the link took.
    resync: bool,
    /// `End` went out: no more samples (finished once its `0x00` went too, `resync` clear).
    ended: bool,
}

impl<'b, L: Write> StreamWriter<'b, L> {
    /// A stream on `link` in this machine's byte order; sends `Begin` and the header.
    pub fn new(link: L, buffer: &'b mut [u8], sent: &'b mut [u32], config: WriterConfig) -> Result<Self, Error<L>> {
        Self::with_endian(link, buffer, sent, config, NativeEndian::default())
    }

    /// As [`StreamWriter::new`], the file to be written in byte order `endian`.
    pub fn with_endian<E: Endianity>(
        link: L,
        buffer: &'b mut [u8],
        sent: &'b mut [u32],
        config: WriterConfig,
        endian: E,
    ) -> Result<Self, Error<L>> {
        if buffer.len() < MIN_BUFFER {
            return Err(WriteError::BufferTooSmall { buffer: buffer.len() });
        }
        sent.fill(0);
        let mut stream = StreamWriter {
            link,
            buffer,
            sent,
            seq: 0,
            staged: HEAD,
            staged_samples: 0,
            thread: None,
            time_base_us: 0,
            samples: 0,
            dropped_upstream: 0,
            dropped: 0,
            refused: 0,
            counts_sent: None,
            resync: false,
            ended: false,
        };
        let mut begin = [0u8; 5];
        begin[..4].copy_from_slice(&MAGIC);
        begin[4] = VERSION;
        stream.send(kind::BEGIN, &begin)?;
        stream.send(kind::HEADER, &config.header_template().encode(endian))?;
        Ok(stream)
    }

    /// Writes a sample of frames `ids`, innermost first (at most 256 are kept, as the
    /// [`Writer`](crate::Writer) keeps them); `define` gives the frame of each id whose
    /// definition has not gone out yet.
    pub fn write_sample<'f>(
        &mut self,
        taken: Taken,
        ids: &[u32],
        mut define: impl FnMut(u32) -> Frame<'f>,
    ) -> Result<(), Error<L>> {
        if self.ended {
            return Err(WriteError::Finished);
        }
        let ids = ids.get(..MAX_STACK_DEPTH).unwrap_or(ids);
        let capacity = self.sent.len() * 32;
        if let Some(&id) = ids.iter().find(|&&id| id as usize >= capacity) {
            self.refused += 1;
            return Err(WriteError::IdOutOfRange { id, ids: capacity });
        }
        for &id in ids {
            if self.is_sent(id) {
                continue;
            }
            let frame = define(id);
            self.stage(1, |body, _| body.define(id, &frame))?;
            self.mark_sent(id);
        }
        let thread = (taken.interpreter_id, taken.thread_id);
        let ts = taken.timestamp_us;
        self.stage(1, |body, staged| {
            if staged.thread != Some(thread) {
                body.byte(item::THREAD)?;
                body.varint(u64::from(thread.0))?;
                body.varint(thread.1)?;
            }
            if ts < staged.time_base_us {
                body.byte(item::TIME)?;
                body.varint(ts)?;
            }
            body.byte(item::SAMPLE)?;
            body.varint(ts - ts.min(staged.time_base_us))?;
            body.byte(taken.status)?;
            body.varint(ids.len() as u64)?;
            ids.iter().try_for_each(|&id| body.varint(u64::from(id)))
        })?;
        self.thread = Some(thread);
        self.time_base_us = ts;
        self.staged_samples += 1;
        Ok(())
    }

    /// Samples lost before they reached this writer (a capture ring's dropped and garbled),
    /// a running total: the file's stats count them with those lost on the link.
    pub fn set_dropped_upstream(&mut self, total: u64) {
        self.dropped_upstream = total;
    }

    /// Sends the staged items, with the counts when they changed (nothing when neither).
    pub fn flush(&mut self) -> Result<(), Error<L>> {
        if self.ended {
            return Err(WriteError::Finished);
        }
        // Counts of nothing lost go with `finish` only.
        self.send_items(self.counts() != (0, 0))
    }

    /// Sends the staged items and the counts, then `End`; the stream is complete. Can be
    /// called again after an error. Returns the samples the stream carried.
    pub fn finish(&mut self) -> Result<u64, Error<L>> {
        if self.ended {
            // Only `End`'s closing `0x00` may be left to go.
            return if self.resync { self.end_delimited() } else { Err(WriteError::Finished) };
        }
        self.send_items(true)?;
        let mut end = [0u8; varint::MAX_VARINT_LEN];
        let n = varint::encode_u64(self.samples, &mut end);
        self.send(kind::END, end.get(..n).unwrap_or_default())?;
        self.ended = true;
        self.end_delimited()
    }

    /// Sends `End`'s `0x00` if it did not go out with it; then the stream is complete.
    fn end_delimited(&mut self) -> Result<u64, Error<L>> {
        if self.resync {
            write_all(&mut self.link, &[0]).map_err(|failure| lost(failure, 0))?;
            self.resync = false;
        }
        Ok(self.samples)
    }

    /// Samples in frames that went out.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Samples lost: before this writer ([`Self::set_dropped_upstream`]) and on the link.
    pub fn dropped(&self) -> u64 {
        self.dropped_upstream.wrapping_add(self.dropped)
    }

    /// Samples refused (an id past the bitmap, an item larger than a frame).
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Frames that went out.
    pub fn frames(&self) -> u32 {
        self.seq
    }

    /// The link.
    pub fn get_ref(&self) -> &L {
        &self.link
    }

    /// The link, mutably (writing to it directly breaks the stream).
    pub fn get_mut(&mut self) -> &mut L {
        &mut self.link
    }

    /// The link (finish first for a complete stream).
    pub fn into_inner(self) -> L {
        self.link
    }

    fn counts(&self) -> (u64, u64) {
        (self.dropped(), self.refused)
    }

    /// Sends the staged items, after the counts when `with_counts` and they changed since
    /// they last went.
    fn send_items(&mut self, with_counts: bool) -> Result<(), Error<L>> {
        if with_counts && self.counts_sent != Some(self.counts()) {
            self.stage_counts()?;
        }
        if self.staged > HEAD {
            self.send_staged(0)?;
        }
        Ok(())
    }

    fn stage_counts(&mut self) -> Result<(), Error<L>> {
        let (dropped, refused) = self.counts();
        self.stage(0, |body, _| {
            body.byte(item::COUNTS)?;
            body.varint(dropped)?;
            body.varint(refused)
        })?;
        // Sent with the frame; a failed send clears it.
        self.counts_sent = Some((dropped, refused));
        Ok(())
    }

    fn is_sent(&self, id: u32) -> bool {
        self.sent.get(id as usize / 32).is_some_and(|w| w & (1 << (id % 32)) != 0)
    }

    fn mark_sent(&mut self, id: u32) {
        if let Some(w) = self.sent.get_mut(id as usize / 32) {
            *w |= 1 << (id % 32);
        }
    }

    /// Appends one item to the staged frame, sending the frame first when the item does not
    /// fit; an item that does not fit an empty frame is refused. `samples` is the call's own
    /// samples, lost with a frame whose send fails.
    fn stage(&mut self, samples: u32, item: impl Fn(&mut Body<'_>, Staged) -> Option<()>) -> Result<(), Error<L>> {
        loop {
            let staged = Staged { thread: self.thread, time_base_us: self.time_base_us };
            let end = self.buffer.len() - CRC_LEN;
            let mut body = Body { bytes: self.buffer.get_mut(..end).unwrap_or_default(), at: self.staged };
            let fits = item(&mut body, staged).is_some();
            let at = body.at;
            if fits {
                self.staged = at;
                return Ok(());
            }
            if self.staged == HEAD {
                self.refused += u64::from(samples);
                return Err(WriteError::TooLarge { buffer: self.buffer.len() });
            }
            self.send_staged(samples)?;
        }
    }

    /// Sends the staged items as one frame.
    fn send_staged(&mut self, samples: u32) -> Result<(), Error<L>> {
        let end = self.staged;
        let sent = self.send_frame(kind::ITEMS, end);
        let staged_samples = self.staged_samples;
        self.staged = HEAD;
        self.staged_samples = 0;
        self.thread = None;
        self.time_base_us = 0;
        match sent {
            Ok(()) => {
                self.samples += u64::from(staged_samples);
                Ok(())
            }
            Err(failure) => {
                // What the frame defined must go again; its samples and the call's are lost.
                self.sent.fill(0);
                self.counts_sent = None;
                let dropped = staged_samples + samples;
                self.dropped += u64::from(dropped);
                Err(lost(failure, dropped))
            }
        }
    }

    /// Sends a frame of `kind` with `body` (nothing may be staged).
    fn send(&mut self, kind: u8, body: &[u8]) -> Result<(), Error<L>> {
        let end = HEAD + body.len();
        match self.buffer.get_mut(HEAD..end + CRC_LEN) {
            Some(room) => room[..body.len()].copy_from_slice(body),
            None => return Err(WriteError::TooLarge { buffer: self.buffer.len() }),
        }
        self.send_frame(kind, end).map_err(|failure| lost(failure, 0))
    }

    /// Sends the frame whose body is `buffer[HEAD..end]`: `seq` and `kind` go just before
    /// it, the CRC just after, and the whole goes out COBS-encoded.
    fn send_frame(&mut self, kind: u8, end: usize) -> Result<(), Failure<L::Error>> {
        let mut seq = [0u8; varint::MAX_VARINT_LEN];
        let n = varint::encode_u64(u64::from(self.seq), &mut seq);
        let start = HEAD - 1 - n;
        let frame_end = end + CRC_LEN;
        // (Always there: `stage` and `send` leave room for the CRC.)
        let Some(frame) = self.buffer.get_mut(start..frame_end) else { return Err(Failure::WroteZero) };
        frame[..n].copy_from_slice(&seq[..n]);
        frame[n] = kind;
        let crc_at = frame.len() - CRC_LEN;
        let crc = crc32(&frame[..crc_at]).to_le_bytes();
        frame[crc_at..].copy_from_slice(&crc);
        if self.resync {
            write_all(&mut self.link, &[0])?;
            self.resync = false;
        }
        if let Err(failure) = write_cobs(&mut self.link, frame) {
            // What went out is part of a frame: the `0x00` before the next one ends it, and
            // the receiver finds it damaged (a COBS block or the CRC cut short).
            self.resync = true;
            return Err(failure);
        }
        self.seq = self.seq.wrapping_add(1);
        // The frame went out whole but for its `0x00`: it is sent, and the `0x00` goes out
        // before the next frame (or when `finish` is retried).
        self.resync = write_all(&mut self.link, &[0]).is_err();
        Ok(())
    }
}

/// The error of a failed send that lost `dropped` samples.
fn lost<E>(failure: Failure<E>, dropped: u32) -> WriteError<E> {
    match failure {
        Failure::Link(error) => WriteError::Sink { error, dropped },
        Failure::WroteZero => WriteError::SinkWroteZero { dropped },
    }
}

/// What the items staged so far set: the thread and time base the next sample is read with.
#[derive(Clone, Copy)]
struct Staged {
    thread: Option<(u32, u64)>,
    time_base_us: u64,
}

/// The staged frame's body, written at `at` up to the end of `bytes`.
struct Body<'a> {
    bytes: &'a mut [u8],
    at: usize,
}

impl Body<'_> {
    fn byte(&mut self, b: u8) -> Option<()> {
        *self.bytes.get_mut(self.at)? = b;
        self.at += 1;
        Some(())
    }

    fn varint(&mut self, value: u64) -> Option<()> {
        // Most values (ids, the time between samples) take one byte: written as it is.
        if value < 0x80 {
            return self.byte(value as u8);
        }
        let mut v = [0u8; varint::MAX_VARINT_LEN];
        let n = varint::encode_u64(value, &mut v);
        self.put(v.get(..n)?)
    }

    fn put(&mut self, bytes: &[u8]) -> Option<()> {
        let end = self.at.checked_add(bytes.len())?;
        self.bytes.get_mut(self.at..end)?.copy_from_slice(bytes);
        self.at = end;
        Some(())
    }

    fn define(&mut self, id: u32, frame: &Frame<'_>) -> Option<()> {
        self.byte(item::DEFINE)?;
        self.varint(u64::from(id))?;
        for name in [frame.filename, frame.funcname] {
            self.varint(name.len() as u64)?;
            self.put(name)?;
        }
        let at = frame.location.unwrap_or(crate::tables::Location { lineno: -1, end_lineno: -1, col: -1, end_col: -1 });
        for n in [at.lineno, at.end_lineno, at.col, at.end_col] {
            self.varint(u64::from(varint::zigzag_encode(n)))?;
        }
        self.byte(frame.opcode.unwrap_or(255))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::Cursor;
    use crate::stream::{decode, Body};

    /// `seq` is a `u32` that wraps (2^32 frames: over a year at 100 frames a second): the
    /// frames around the wrap carry `u32::MAX - 1`, `u32::MAX` (five bytes, the most the
    /// room before a body holds), then 0, 1 …, each whole, whether sent by `flush` or
    /// because the buffer filled. Built by starting the counter near its limit.
    #[test]
    fn frames_across_the_seq_wrap_carry_the_wrapped_numbers() {
        let mut out = [0u8; 8192];
        let (mut buffer, mut sent) = ([0u8; MIN_BUFFER], [0u32; 1]);
        let config = WriterConfig::new(1_000, 100);
        let mut w = StreamWriter::new(Cursor::new(&mut out[..]), &mut buffer, &mut sent, config).unwrap();
        assert_eq!(w.frames(), 2, "Begin and Header went out");
        w.seq = u32::MAX - 1;
        let frame = Frame::new(b"a.py", b"f");
        let taken = |i: u64| Taken { timestamp_us: 1_000 + i, interpreter_id: 0, thread_id: 7, status: 0 };
        for i in 0..3 {
            w.write_sample(taken(i), &[1, 2], |_| frame).unwrap();
            w.flush().unwrap();
        }
        // Enough samples that full buffers go out on their own.
        for i in 3..60 {
            w.write_sample(taken(i), &[3, 1, 2], |_| frame).unwrap();
        }
        assert_eq!(w.finish().unwrap(), 60);
        let frames = w.frames();
        assert!(frames > 8 && frames < 100, "{frames} frames after the wrap");
        let link = w.into_inner();
        let capture = link.written();
        let mut seqs = [0u32; 128];
        let mut n = 0;
        let mut end_seen = false;
        for piece in capture.split(|&b| b == 0).filter(|p| !p.is_empty()) {
            let mut bytes = [0u8; 512];
            let bytes = &mut bytes[..piece.len()];
            bytes.copy_from_slice(piece);
            let frame = decode(bytes).unwrap();
            seqs[n] = frame.seq;
            n += 1;
            end_seen |= matches!(frame.body, Body::End { samples: 60 });
        }
        assert!(end_seen);
        assert_eq!(&seqs[..4], &[0, 1, u32::MAX - 1, u32::MAX]);
        for (i, &seq) in seqs[4..n].iter().enumerate() {
            assert_eq!(seq, i as u32, "frame {} after the wrap", i);
        }
        assert_eq!(frames, (n - 4) as u32, "frames() counts on across the wrap");
    }
}
