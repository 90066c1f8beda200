//! A device's sample stream ([`tachyon_core::stream`]) written as the Tachyon file: each
//! definition interned in the order it came, each sample written by the ids it names, the
//! counts as the stats trailer — the calls a [`tachyon_core::Writer`] on the device would
//! have had, so the same file. A stream cut anywhere gives the file of every sample in the
//! frames that arrived whole.

use std::collections::HashMap;

use tachyon_core::header::{Header, Stats, HEADER_SIZE};
use tachyon_core::records::MAX_STACK_DEPTH;
use tachyon_core::stream::{self, Body, Item, StreamFrame};
use tachyon_core::transport::{DecodeError, StreamError};
use tachyon_core::{FrameId, WriterConfig};

use super::{ReceiveError, Received, Salvage};
use crate::memory::VecSink;
use crate::tachyon::storage::OwnedWriterStorage;

/// True when `first` (the bytes of a capture's first frame, before its `0x00`) is this
/// format's `Begin`.
pub(super) fn begins_stream(first: &[u8]) -> bool {
    let mut bytes = first.to_vec();
    matches!(stream::decode(&mut bytes), Ok(StreamFrame { seq: 0, body: Body::Begin { magic, .. } }) if magic == stream::MAGIC)
}

/// The file a capture of a sample stream holds.
pub(super) fn receive(capture: &[u8]) -> Result<Received, ReceiveError> {
    let mut frames = Frames::new(capture);
    match frames.next_head()? {
        Some((_, Head::Begin { magic, version })) if (magic, version) == (stream::MAGIC, stream::VERSION) => {}
        Some((at, Head::Begin { magic, version })) => {
            return Err(ReceiveError::Stream { offset: at, why: StreamError::NotOurs { magic, version } })
        }
        Some((at, _)) => return Err(ReceiveError::Stream { offset: at, why: StreamError::NoBegin }),
        None => return Err(ReceiveError::NoEnd { frames: 0 }),
    }
    let (header_at, header) = match frames.next_head()? {
        Some((at, Head::Header(header))) => (at, header),
        Some((at, _)) => return Err(bad(at, "the frame after Begin is not the header")),
        None => return Err(ReceiveError::NoEnd { frames: frames.next_seq }),
    };
    let (head, endian, _) =
        Header::decode(&header, u64::MAX).map_err(|e| bad(header_at, &format!("its header: {e:?}")))?;
    let mut storage = OwnedWriterStorage::growing(head.compression);
    let config = WriterConfig::of_header(&head);
    let write_error = |at: usize, e: &dyn std::fmt::Display| bad(at, &format!("writing the file: {e}"));
    let mut writer = storage.writer(VecSink::new(), config, endian).map_err(|e| write_error(header_at, &e))?;
    let mut ids: HashMap<u32, FrameId> = HashMap::new();
    let mut stack = [FrameId(0); MAX_STACK_DEPTH];
    let (mut samples, mut last_us, mut counts, mut ended) = (0u64, None, None, false);
    while let Some(piece) = frames.next_piece()? {
        let Piece::Frame(at, body) = piece else { continue };
        if ended {
            return Err(ReceiveError::Stream { offset: at, why: StreamError::AfterEnd });
        }
        match body {
            Body::Items(items) => {
                for item in items {
                    match item.map_err(|e| bad(at, &e.to_string()))? {
                        Item::Define { id, frame } => {
                            ids.insert(id, writer.intern_frame(frame).map_err(|e| write_error(at, &e))?);
                        }
                        Item::Sample { taken, ids: named } => {
                            let depth = named.len();
                            for (slot, id) in stack.iter_mut().zip(named) {
                                *slot = *ids.get(&id).ok_or_else(|| {
                                    bad(at, &format!("a sample names frame id {id}, which the stream never defined"))
                                })?;
                            }
                            let t = taken;
                            writer
                                .write_thread_sample_ids(
                                    t.timestamp_us,
                                    t.interpreter_id,
                                    t.thread_id,
                                    t.status,
                                    &stack[..depth],
                                )
                                .map_err(|e| write_error(at, &e))?;
                            samples += 1;
                            last_us = Some(t.timestamp_us);
                        }
                        Item::Counts { dropped, refused } => counts = Some((dropped, refused)),
                    }
                }
            }
            Body::End { samples: said } => {
                if said != samples {
                    return Err(ReceiveError::Stream { offset: at, why: StreamError::Length { said, made: samples } });
                }
                ended = true;
            }
            Body::Begin { .. } => return Err(ReceiveError::Stream { offset: at, why: StreamError::NoBegin }),
            Body::Header(_) => return Err(bad(at, "a second header")),
        }
    }
    let left = capture.len() - frames.whole_end;
    if ended && left > 0 {
        return Err(ReceiveError::Stream { offset: frames.whole_end, why: StreamError::AfterEnd });
    }
    if let Some((dropped, refused)) = counts {
        let stats = Stats::of_counts(head.start_time_us, last_us, samples, refused, dropped);
        writer.set_stats(stats).map_err(|e| write_error(capture.len(), &e))?;
    }
    writer.finish().map_err(|e| write_error(capture.len(), &e))?;
    let file = writer.into_inner().into_inner();
    let salvage =
        (!ended).then_some(Salvage { frames: frames.next_seq, incomplete_bytes: left, cut_record_bytes: 0, samples });
    Ok(Received { file, salvage })
}

/// A rule of the stream broken at capture offset `at`.
fn bad(at: usize, why: &str) -> ReceiveError {
    ReceiveError::BadJournal { why: format!("offset {at}: {why}") }
}

/// The frames of a capture in order, checked: each the one due, or damage (bytes that do
/// not decode) followed by the one due — the sender's failed send, skipped.
struct Frames<'c> {
    capture: &'c [u8],
    /// Where the next piece starts.
    at: usize,
    /// The frame due next: also how many were read (wrapping, as the sender's numbers do).
    next_seq: u32,
    /// Pieces that did not decode since the last frame: the first's offset and why.
    damaged: Option<(usize, DecodeError)>,
    /// The end of the last frame read (its `0x00` included).
    whole_end: usize,
    bytes: Vec<u8>,
}

impl<'c> Frames<'c> {
    fn new(capture: &'c [u8]) -> Self {
        Frames { capture, at: 0, next_seq: 0, damaged: None, whole_end: 0, bytes: Vec::new() }
    }

    /// The next piece of the capture: a frame and its capture offset, or damage skipped
    /// for now; `None` at the capture's end or at bytes that never got their `0x00` (a cut).
    /// Damage that no frame follows is refused: a cut leaves bytes without their `0x00`, and
    /// a failed send is followed by the frame sent again.
    fn next_piece(&mut self) -> Result<Option<Piece<'_>>, ReceiveError> {
        let rest = self.capture.get(self.at..).unwrap_or_default();
        let Some(len) = rest.iter().position(|&b| b == 0) else {
            return match self.damaged {
                Some((offset, why)) => Err(ReceiveError::Frame { offset, why }),
                None => Ok(None),
            };
        };
        let start = self.at;
        self.at += len + 1;
        if len == 0 {
            return Ok(Some(Piece::Skipped));
        }
        self.bytes.clear();
        self.bytes.extend_from_slice(&rest[..len]);
        let frame = match stream::decode(&mut self.bytes) {
            Ok(frame) => frame,
            Err(why) => {
                let why = match why {
                    stream::DecodeError::Crc => DecodeError::Crc,
                    stream::DecodeError::Malformed => DecodeError::Malformed,
                };
                self.damaged.get_or_insert((start, why));
                return Ok(Some(Piece::Skipped));
            }
        };
        if frame.seq != self.next_seq {
            return Err(match self.damaged {
                Some((offset, why)) => ReceiveError::Frame { offset, why },
                None => ReceiveError::Stream {
                    offset: start,
                    why: StreamError::Gap { expected: self.next_seq, got: frame.seq },
                },
            });
        }
        self.damaged = None;
        self.next_seq = self.next_seq.wrapping_add(1);
        self.whole_end = self.at;
        Ok(Some(Piece::Frame(start, frame.body)))
    }

    /// The next frame as [`Head`], damage skipped: for the two frames a stream starts with.
    fn next_head(&mut self) -> Result<Option<(usize, Head)>, ReceiveError> {
        loop {
            let head = match self.next_piece()? {
                Some(Piece::Skipped) => continue,
                Some(Piece::Frame(at, Body::Begin { magic, version })) => (at, Head::Begin { magic, version }),
                Some(Piece::Frame(at, Body::Header(header))) => (at, Head::Header(*header)),
                Some(Piece::Frame(at, _)) => (at, Head::Other),
                None => return Ok(None),
            };
            return Ok(Some(head));
        }
    }
}

/// A piece of a capture between two `0x00`.
enum Piece<'a> {
    /// A frame, at its capture offset.
    Frame(usize, Body<'a>),
    /// Nothing (two `0x00` in a row), or damage the next frame judges.
    Skipped,
}

/// A stream's first frames, owned.
enum Head {
    Begin { magic: [u8; 4], version: u8 },
    Header([u8; HEADER_SIZE]),
    Other,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// COBS of `bytes`, by the textbook's loop, and the closing `0x00`.
    fn cobs(bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![0];
        let mut code_at = 0;
        for &b in bytes {
            if b == 0 || out.len() - code_at == 0xff {
                out[code_at] = (out.len() - code_at) as u8;
                code_at = out.len();
                out.push(0);
                if b == 0 {
                    continue;
                }
            }
            out.push(b);
        }
        out[code_at] = (out.len() - code_at) as u8;
        out.push(0);
        out
    }

    /// An `End` frame of no samples numbered `seq`, as the wire table lays it out.
    fn end_frame(seq: u32) -> Vec<u8> {
        let mut frame = Vec::new();
        let mut v = u64::from(seq);
        while v >= 0x80 {
            frame.push(v as u8 | 0x80);
            v >>= 7;
        }
        frame.push(v as u8);
        frame.extend_from_slice(&[3, 0]);
        let crc = zlib_rs::crc32::crc32(0, &frame);
        frame.extend_from_slice(&crc.to_le_bytes());
        cobs(&frame)
    }

    /// The frame due wraps with the sender's `seq` (a `u32`): after `u32::MAX` comes 0, and
    /// a gap after the wrap is still a gap. Built by starting the count near its limit.
    #[test]
    fn frames_in_sequence_across_the_seq_wrap() {
        let capture: Vec<u8> = [u32::MAX - 1, u32::MAX, 0, 1, 3].into_iter().flat_map(end_frame).collect();
        let mut frames = Frames { next_seq: u32::MAX - 1, ..Frames::new(&capture) };
        for due in [u32::MAX, 0, 1, 2] {
            let piece = frames.next_piece().unwrap();
            assert!(matches!(piece, Some(Piece::Frame(_, Body::End { samples: 0 }))), "before {due}");
            assert_eq!(frames.next_seq, due);
        }
        match frames.next_piece() {
            Err(ReceiveError::Stream { why: StreamError::Gap { expected: 2, got: 3 }, .. }) => {}
            Err(other) => panic!("{other}"),
            Ok(_) => panic!("frame 3 taken where 2 was due"),
        }
    }
}
