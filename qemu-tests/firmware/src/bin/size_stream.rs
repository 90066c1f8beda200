//! The streaming encoder alone, for its size: a `StreamWriter` over a `Cursor` on a static
//! buffer (the link), its state, a bitmap of 256 ids and a 256-byte transmit buffer in
//! statics, a sample written (its frame defined) and the stream finished; inputs through
//! `black_box` so nothing is folded away. `size_baseline` is the same without the encoder;
//! `scripts/firmware.sh` subtracts the transmit buffer (`STREAM_TX`, found by its symbol) to
//! state it apart.

#![no_std]
#![no_main]

#[path = "../halt.rs"]
mod halt;

use core::hint::black_box;

use cortex_m_rt::entry;
use tachyon_core::capture::Taken;
use tachyon_core::io::Cursor;
use tachyon_core::stream::{ids_words, StreamWriter};
use tachyon_core::{Frame, Location, WriterConfig};

type Link = Cursor<&'static mut [u8]>;

#[entry]
fn main() -> ! {
    let out: &'static mut [u8; 4096] = cortex_m::singleton!(: [u8; 4096] = [0; 4096]).unwrap();
    let tx: &'static mut [u8; 256] = cortex_m::singleton!(STREAM_TX: [u8; 256] = [0; 256]).unwrap();
    let sent: &'static mut [u32; ids_words(256)] =
        cortex_m::singleton!(: [u32; ids_words(256)] = [0; ids_words(256)]).unwrap();
    let state: &'static mut Option<StreamWriter<'static, Link>> =
        cortex_m::singleton!(: Option<StreamWriter<'static, Link>> = None).unwrap();
    let config = WriterConfig::new(0, 100);
    if let Ok(w) = StreamWriter::new(Cursor::new(&mut out[..]), &mut tx[..], &mut sent[..], config) {
        let w = state.insert(w);
        let line = black_box(3);
        let at = Location { lineno: line, end_lineno: line, col: -1, end_col: -1 };
        let taken = Taken { timestamp_us: black_box(100), interpreter_id: 0, thread_id: black_box(1), status: 0 };
        let _ =
            w.write_sample(taken, &[black_box(7)], |_| Frame::new(black_box(b"fw/demo.tl"), black_box(b"main")).at(at));
        let _ = black_box(w.finish());
    }
    halt::halt()
}
