//! A profile streamed in frames over a link that cannot seek (the core's
//! [`tachyon_core::transport`]), put back together from a capture of the link: every frame
//! decoded, checked (CRC, sequence, no holes) and replayed at its offset. A capture with a
//! frame lost, damaged or out of place is refused, naming the frame and where it is: the
//! file made is the device's, byte for byte, or none is.

use std::fmt;

use tachyon_core::transport::{decode, DecodeError, Receiver, StreamError};

/// Why a capture does not give a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReceiveError {
    /// The bytes of a frame (from `offset` of the capture) do not decode.
    Frame {
        /// Capture offset of the frame's first byte.
        offset: usize,
        /// What is wrong.
        why: DecodeError,
    },
    /// A frame breaks the stream's rules.
    Stream {
        /// Capture offset of the frame's first byte.
        offset: usize,
        /// Which rule.
        why: StreamError,
    },
    /// The capture ends before the stream's `End` frame (`frames` frames read).
    NoEnd {
        /// Frames read.
        frames: u32,
    },
}

impl fmt::Display for ReceiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReceiveError::Frame { offset, why: DecodeError::Crc } => {
                write!(f, "offset {offset}: a damaged frame (its CRC does not match)")
            }
            ReceiveError::Frame { offset, why: DecodeError::Malformed } => {
                write!(f, "offset {offset}: bytes that are not a frame (damaged, or part of one lost)")
            }
            ReceiveError::Stream { offset, why } => write!(f, "offset {offset}: {why}"),
            ReceiveError::NoEnd { frames } => {
                write!(f, "the capture ends after {frames} frames, before the stream's End")
            }
        }
    }
}

impl std::error::Error for ReceiveError {}

/// The file a capture of a framed stream holds. Memory: the file (no longer than the
/// capture: every byte of it came in a frame) and one frame's bytes.
pub fn reassemble(capture: &[u8]) -> Result<Vec<u8>, ReceiveError> {
    let mut file = Vec::new();
    let mut receiver = Receiver::new();
    let (mut frame, mut scratch) = (Vec::new(), Vec::new());
    let mut frames = 0;
    let mut offset = 0;
    for bytes in capture.split(|&b| b == 0) {
        let at = offset;
        offset += bytes.len() + 1;
        if bytes.is_empty() {
            continue;
        }
        // Decoded in place, so a copy; the CRC is checked over at most as many bytes.
        frame.clear();
        frame.extend_from_slice(bytes);
        scratch.resize(bytes.len(), 0);
        let decoded = decode(&mut frame, &mut scratch).map_err(|why| ReceiveError::Frame { offset: at, why })?;
        frames += 1;
        let write = receiver.accept(&decoded).map_err(|why| ReceiveError::Stream { offset: at, why })?;
        if let Some((start, data)) = write {
            // No holes: `start` is at most the length so far.
            let start = start as usize;
            let end = start + data.len();
            if file.len() < end {
                file.resize(end, 0);
            }
            file[start..end].copy_from_slice(data);
        }
    }
    if !receiver.complete() {
        return Err(ReceiveError::NoEnd { frames });
    }
    Ok(file)
}
