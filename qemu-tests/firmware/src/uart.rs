//! UART0 and UART1 of the MPS2 boards (ARM CMSDK APB UART), transmit only: the non-seekable
//! links the framed profile and the sample stream go out on (QEMU's `-serial file:…`, once per
//! UART, keeps what each sends).

use core::convert::Infallible;

/// UART0's registers; UART1's are the next 4 KiB.
const UART0: usize = 0x4000_4000;
const UART1: usize = 0x4000_5000;
const DATA: usize = 0;
const STATE: usize = 0x04;
const CTRL: usize = 0x08;
const BAUDDIV: usize = 0x10;
/// STATE: the transmit buffer is full.
const TX_FULL: u32 = 1;
/// CTRL: transmitter enabled.
const TX_ENABLE: u32 = 1;

/// A transmitter, owned once (each is taken once, by `main`).
pub struct Uart {
    base: usize,
}

impl Uart {
    /// UART0, transmitter enabled.
    pub fn take_uart0() -> Uart {
        Uart::take(UART0)
    }

    /// UART1, transmitter enabled.
    pub fn take_uart1() -> Uart {
        Uart::take(UART1)
    }

    /// Enables the transmitter at `base` (the divider must be at least 16).
    fn take(base: usize) -> Uart {
        // SAFETY: the CMSDK UART registers of mps2-an385/an386, written from this one owner.
        unsafe {
            core::ptr::write_volatile((base + BAUDDIV) as *mut u32, 16);
            core::ptr::write_volatile((base + CTRL) as *mut u32, TX_ENABLE);
        }
        Uart { base }
    }

    fn send(&mut self, byte: u8) {
        // SAFETY: as in `take`; STATE and DATA are read and written as the CMSDK manual says.
        unsafe {
            while core::ptr::read_volatile((self.base + STATE) as *const u32) & TX_FULL != 0 {}
            core::ptr::write_volatile((self.base + DATA) as *mut u32, u32::from(byte));
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
