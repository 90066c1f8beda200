//! UART0 of the MPS2 boards (ARM CMSDK APB UART), transmit only: the non-seekable link the
//! framed profile goes out on (QEMU's `-serial file:…` keeps what it sends).

use core::convert::Infallible;

const BASE: usize = 0x4000_4000;
const DATA: usize = BASE;
const STATE: usize = BASE + 0x04;
const CTRL: usize = BASE + 0x08;
const BAUDDIV: usize = BASE + 0x10;
/// STATE: the transmit buffer is full.
const TX_FULL: u32 = 1;
/// CTRL: transmitter enabled.
const TX_ENABLE: u32 = 1;

/// The transmitter, owned once.
pub struct Uart(());

impl Uart {
    /// Enables the transmitter (the divider must be at least 16).
    pub fn take() -> Uart {
        // SAFETY: the CMSDK UART0 registers of mps2-an385/an386, written from this one owner.
        unsafe {
            core::ptr::write_volatile(BAUDDIV as *mut u32, 16);
            core::ptr::write_volatile(CTRL as *mut u32, TX_ENABLE);
        }
        Uart(())
    }

    fn send(&mut self, byte: u8) {
        // SAFETY: as in `take`; STATE and DATA are read and written as the CMSDK manual says.
        unsafe {
            while core::ptr::read_volatile(STATE as *const u32) & TX_FULL != 0 {}
            core::ptr::write_volatile(DATA as *mut u32, u32::from(byte));
        }
    }
}

impl embedded_io::ErrorType for Uart {
    type Error = Infallible;
}

impl embedded_io::Write for Uart {
    fn write(&mut self, buf: &[u8]) -> Result<usize, Infallible> {
        for &b in buf {
            self.send(b);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> Result<(), Infallible> {
        Ok(())
    }
}
