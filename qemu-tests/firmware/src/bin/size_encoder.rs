//! The encoder alone, for its size: a Tachyon writer (no zstd) over a `Cursor` on a static
//! buffer, storage for 8 strings, 32 frames and one thread, a frame interned and a sample
//! written by id, the file finished; inputs through `black_box` so nothing is folded away.
//! `size_baseline` is the same without the encoder.

#![no_std]
#![no_main]

#[path = "../halt.rs"]
mod halt;

use core::hint::black_box;

use cortex_m_rt::entry;
use tachyon_core::io::Cursor;
use tachyon_core::storage::StaticWriterStorage;
use tachyon_core::{Frame, Location, Writer, WriterConfig};

type Storage = StaticWriterStorage<256, 8, 32, 1>;

#[entry]
fn main() -> ! {
    let out: &'static mut [u8; 4096] = cortex_m::singleton!(: [u8; 4096] = [0; 4096]).unwrap();
    let storage: &'static mut Storage = cortex_m::singleton!(: Storage = Storage::new()).unwrap();
    if let Ok(mut w) = Writer::new(Cursor::new(&mut out[..]), storage.storage(), WriterConfig::new(0, 100)) {
        let line = black_box(3);
        let at = Location { lineno: line, end_lineno: line, col: -1, end_col: -1 };
        if let Ok(id) = w.intern_frame(Frame::new(black_box(b"fw/demo.tl"), black_box(b"main")).at(at)) {
            let _ = w.write_thread_sample_ids(black_box(100), 0, black_box(1), 0, &[id]);
        }
        let _ = black_box(w.finish());
        black_box(w.into_inner().written_len());
    }
    halt::halt()
}
