//! Waiting forever, and a panic handler that does: what the size builds end in (they only
//! exist to be measured, never to run).

pub fn halt() -> ! {
    loop {
        cortex_m::asm::wfi();
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    halt()
}
