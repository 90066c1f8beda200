//! A link that keeps what a framed stream sends, and the file a complete stream holds: the
//! transport's tests and the journal's restart tests replay streams with them.

use std::convert::Infallible;

use embedded_io::{ErrorType, Write};
use tachyon_core::transport::{decode, Accepted, Receiver};

/// A link that keeps what is sent (a UART capture).
#[derive(Default)]
pub struct Link(pub Vec<u8>);

impl ErrorType for Link {
    type Error = Infallible;
}

impl Write for Link {
    fn write(&mut self, buf: &[u8]) -> Result<usize, Infallible> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> Result<(), Infallible> {
        Ok(())
    }
}

/// The file a capture holds, or the first thing wrong with it.
pub fn replay(capture: &[u8]) -> Result<Vec<u8>, String> {
    let mut file = Vec::new();
    let mut receiver = Receiver::new();
    let mut scratch = vec![0u8; capture.len()];
    let mut bytes = capture.to_vec();
    let mut at = 0;
    for chunk in bytes.split_mut(|&b| b == 0) {
        let len = chunk.len();
        if len > 0 {
            let frame = decode(chunk, &mut scratch).map_err(|e| format!("{e:?} at {at}"))?;
            if let Accepted::Write { offset, bytes: data } =
                receiver.accept(&frame).map_err(|e| format!("{e} at {at}"))?
            {
                let end = offset as usize + data.len();
                if file.len() < end {
                    file.resize(end, 0);
                }
                file[offset as usize..end].copy_from_slice(data);
            }
        }
        at += len + 1;
    }
    if !receiver.complete() {
        return Err("no End".into());
    }
    Ok(file)
}
