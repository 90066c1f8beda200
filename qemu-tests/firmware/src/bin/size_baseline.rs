//! The size baseline: `size_encoder` without the encoder (the same start-up, a 4 KiB output
//! buffer taken the same way), so the difference of the two builds' sections is what the
//! encoder costs (`scripts/firmware.sh` prints it).

#![no_std]
#![no_main]

#[path = "../halt.rs"]
mod halt;

use cortex_m_rt::entry;

#[entry]
fn main() -> ! {
    let out: &'static mut [u8; 4096] = cortex_m::singleton!(: [u8; 4096] = [0; 4096]).unwrap();
    core::hint::black_box(&mut out[..]);
    halt::halt()
}
