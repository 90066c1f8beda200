//! Profiles a small interpreter ([`vm`]) on a Cortex-M with tachyon-core, no heap, every
//! buffer static: SysTick interrupts push the interpreter's call stack into the library's
//! capture ring (`tachyon_core::capture`, wait-free, no critical section) as (function,
//! line) pairs, the main loop drains it into two Tachyon writers through the frame-id API,
//! one over a RAM buffer (sent to the host by semihosting at the end), one over the UART as
//! a journaled stream (`tachyon_core::transport::JournalWriter`: the tables go out as they
//! grow, so the host can read the capture while it grows, and a cut capture keeps every
//! sample before the cut), which `tachyon receive` puts back together. defmt logs what happened (read on the host by defmt-log, with defmt-decoder).

#![no_std]
#![no_main]

mod host;
mod uart;
mod vm;

use core::sync::atomic::{AtomicU32, Ordering};

use cortex_m::peripheral::syst::SystClkSource;
use cortex_m::peripheral::SYST;
use cortex_m_rt::{entry, exception};
use cortex_m_semihosting::debug;
use defmt_semihosting as _;
use tachyon_core::capture::{entry_words, Capture, Stack, Taken};
use tachyon_core::io::Cursor;
use tachyon_core::storage::StaticWriterStorage;
use tachyon_core::transport::{FlushPolicy, JournalWriter};
use tachyon_core::{Frame, FrameId, Location, Writer, WriterConfig};

/// SysTick reload: QEMU's MPS2 clocks SysTick at 25 MHz, so 2,500 cycles are 100 µs.
const RELOAD: u32 = 2_500;
const INTERVAL_US: u64 = 100;

/// Room for 64 samples of the interpreter's deepest stack, as (function, line) pairs.
const RING_WORDS: usize = 64 * entry_words(vm::MAX_DEPTH, true);
static WORDS: [AtomicU32; RING_WORDS] = [const { AtomicU32::new(0) }; RING_WORDS];
static RING: Capture<'static> = Capture::new(&WORDS);
static TICKS: AtomicU32 = AtomicU32::new(0);
static TAKEN: AtomicU32 = AtomicU32::new(0);

/// Writer storage: 3 functions × a few lines, one thread.
type Storage = StaticWriterStorage<256, 8, 32, 1>;

#[exception]
fn SysTick() {
    // Only this handler writes the counters, and it does not preempt itself: a load and a
    // store (thumbv6m has no atomic read-modify-write).
    let tick = TICKS.load(Ordering::Relaxed) + 1;
    TICKS.store(tick, Ordering::Relaxed);
    let depth = (vm::DEPTH.load(Ordering::Acquire) as usize).min(vm::MAX_DEPTH);
    // Before `main` is entered and after it returns, nothing of the interpreter runs.
    if depth == 0 {
        return;
    }
    TAKEN.store(TAKEN.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    // The interpreter's frames are root first: pushed innermost first, straight from its
    // atomics (the ring counts a sample it has no room for).
    let frames = vm::FRAMES.iter().take(depth).rev().map(|frame| {
        let (function, line) = vm::unpack(frame.load(Ordering::Relaxed));
        (u64::from(function), u32::from(line))
    });
    let _ = RING.push_code_from(Taken { timestamp_us: u64::from(tick) * INTERVAL_US, ..Taken::default() }, frames);
}

/// Frame ids per (function, line), interned on first use, the same in both writers.
struct Frames {
    ids: [[Option<FrameId>; 32]; 3],
}

fn frame_of(function: u8, line: u16) -> Frame<'static> {
    let name = vm::PROGRAM[usize::from(function)].name;
    let line = i32::from(line);
    Frame::new(vm::SOURCE, name).at(Location { lineno: line, end_lineno: line, col: -1, end_col: -1 })
}

#[entry]
fn main() -> ! {
    defmt::info!("profiling the interpreter on {=str}", env!("FIRMWARE_TARGET"));
    let ram: &'static mut [u8; 1024 * 1024] = cortex_m::singleton!(: [u8; 1024 * 1024] = [0; 1024 * 1024]).unwrap();
    let ram_storage: &'static mut Storage = cortex_m::singleton!(: Storage = Storage::new()).unwrap();
    let uart_storage: &'static mut Storage = cortex_m::singleton!(: Storage = Storage::new()).unwrap();
    let scratch: &'static mut [u8; 256] = cortex_m::singleton!(: [u8; 256] = [0; 256]).unwrap();

    let config = WriterConfig::new(0, INTERVAL_US);
    let Ok(mut ram_writer) = Writer::new(Cursor::new(&mut ram[..]), ram_storage.storage(), config) else {
        fail("the RAM writer could not start")
    };
    // Never flushed but by its staging filling, as the RAM writer: the same bytes, CPython's.
    let policy = FlushPolicy::default();
    let Ok(mut uart_writer) =
        JournalWriter::new(uart::Uart::take(), &mut scratch[..], uart_storage.storage(), config, policy)
    else {
        fail("the UART writer could not start")
    };

    let mut frames = Frames { ids: [[None; 32]; 3] };
    let mut written = 0u32;
    let mut refused = 0u32;
    let mut costs = [Cost::default(), Cost::default()];
    let mut machine = vm::Machine::new();
    machine.start();

    let mut p = cortex_m::Peripherals::take().unwrap();
    p.SYST.set_clock_source(SystClkSource::Core);
    p.SYST.set_reload(RELOAD - 1);
    p.SYST.clear_current();
    p.SYST.enable_interrupt();
    p.SYST.enable_counter();

    loop {
        let running = match machine.step() {
            Ok(running) => running,
            Err(fault) => {
                defmt::error!("the interpreter stopped: {}", fault);
                false
            }
        };
        if !running || machine.steps.is_multiple_of(256) {
            drain(&mut frames, &mut ram_writer, &mut uart_writer, &mut written, &mut refused, &mut costs);
        }
        if !running {
            break;
        }
    }
    p.SYST.disable_interrupt();
    p.SYST.disable_counter();
    drain(&mut frames, &mut ram_writer, &mut uart_writer, &mut written, &mut refused, &mut costs);

    let ticks = TICKS.load(Ordering::Relaxed);
    let taken = TAKEN.load(Ordering::Relaxed);
    let dropped = RING.dropped();
    defmt::info!(
        "interpreter: {=u64} steps, result {=i32}; {=u32} ticks; samples: {=u32} taken, {=u64} dropped (ring full), {=u32} written, {=u32} refused",
        machine.steps,
        machine.result.unwrap_or(-1),
        ticks,
        taken,
        dropped,
        written,
        refused
    );
    defmt::info!(
        "cost per sample: RAM writer {=u64} instructions, UART writer {=u64} instructions (means of {=u32} and {=u32} samples no interrupt cut into)",
        costs[0].instructions_per_sample(),
        costs[1].instructions_per_sample(),
        costs[0].samples,
        costs[1].samples
    );
    defmt::info!(
        "writer: {=u64} samples, {=usize} threads, {=usize} strings, {=usize} frames",
        ram_writer.sample_count(),
        ram_writer.thread_count(),
        ram_writer.string_count(),
        ram_writer.frame_count()
    );
    let ram_len = match ram_writer.finish() {
        Ok(_) => ram_writer.into_inner().written_len(),
        Err(e) => fail_with("finishing the RAM file", e),
    };
    let stream_len = match uart_writer.finish() {
        Ok(len) => len,
        Err(e) => fail_with("finishing the UART stream", e),
    };
    defmt::info!(
        "files: RAM {=usize} bytes; UART stream {=u64} bytes in {=u32} frames",
        ram_len,
        stream_len,
        uart_writer.writer().get_ref().frames()
    );

    let name = concat!(env!("FIRMWARE_TARGET"), ".ram.pyb\0");
    if host::write_file(name, &ram[..ram_len]).is_err() {
        fail("writing the RAM file to the host");
    }
    defmt::info!("done");
    exit(debug::EXIT_SUCCESS)
}

/// What writing samples cost, in SysTick ticks: QEMU's MPS2 SysTick counts at 25 MHz of
/// virtual time, which `-icount shift=3` (run-qemu.sh) advances 8 ns per instruction, so a
/// tick is 5 instructions.
#[derive(Default)]
struct Cost {
    ticks: u64,
    samples: u32,
}

/// Instructions per SysTick tick under run-qemu.sh's `-icount shift=3`.
const INSTRUCTIONS_PER_TICK: u64 = 5;

impl Cost {
    /// Runs `write`, counting its ticks unless a SysTick interrupt came in between (then the
    /// handler's would count too).
    fn measure(&mut self, write: impl FnOnce() -> bool) -> bool {
        let (tick, before) = (TICKS.load(Ordering::Relaxed), SYST::get_current());
        let done = write();
        let after = SYST::get_current();
        if TICKS.load(Ordering::Relaxed) == tick && before >= after {
            self.ticks += u64::from(before - after);
            self.samples += 1;
        }
        done
    }

    fn instructions_per_sample(&self) -> u64 {
        self.ticks * INSTRUCTIONS_PER_TICK / u64::from(self.samples.max(1))
    }
}

/// A sample taken out of the ring: its tick and its (function, line) pairs, innermost first.
struct Sample {
    tick: u32,
    depth: usize,
    frames: [(u8, u16); vm::MAX_DEPTH],
}

/// The oldest sample in the ring.
fn take() -> Option<Sample> {
    RING.pop(|entry| {
        let mut sample = Sample {
            tick: (entry.taken().timestamp_us / INTERVAL_US) as u32,
            depth: 0,
            frames: [(0, 0); vm::MAX_DEPTH],
        };
        if let Stack::Code(pairs) = entry.stack() {
            for (slot, (function, line)) in sample.frames.iter_mut().zip(pairs) {
                *slot = (function as u8, line as u16);
                sample.depth += 1;
            }
        }
        sample
    })
}

/// Moves the ring's samples into both writers (innermost frame first).
fn drain<A, B>(
    frames: &mut Frames,
    ram: &mut Writer<'_, A>,
    uart: &mut JournalWriter<'_, '_, B>,
    written: &mut u32,
    refused: &mut u32,
    costs: &mut [Cost; 2],
) where
    A: embedded_io::Write + embedded_io::Seek,
    B: embedded_io::Write,
{
    while let Some(sample) = take() {
        let mut ids = [FrameId(0); vm::MAX_DEPTH];
        let depth = sample.depth;
        let mut ok = true;
        for (slot, &(function, line)) in ids[..depth].iter_mut().zip(&sample.frames[..depth]) {
            let cell = frames.ids.get_mut(usize::from(function)).and_then(|f| f.get_mut(usize::from(line) % 32));
            *slot = match cell {
                Some(Some(id)) => *id,
                Some(cell) => {
                    let frame = frame_of(function, line);
                    match (ram.intern_frame(frame), uart.intern_frame(frame)) {
                        (Ok(a), Ok(b)) if a == b => {
                            *cell = Some(a);
                            a
                        }
                        _ => {
                            ok = false;
                            break;
                        }
                    }
                }
                None => {
                    ok = false;
                    break;
                }
            };
        }
        let ts = u64::from(sample.tick) * INTERVAL_US;
        let done = ok
            && costs[0].measure(|| ram.write_thread_sample_ids(ts, 0, 1, 0, &ids[..depth]).is_ok())
            && costs[1].measure(|| {
                let taken = Taken { timestamp_us: ts, interpreter_id: 0, thread_id: 1, status: 0 };
                uart.write_thread_sample_ids(taken, &ids[..depth]).is_ok()
            });
        if done {
            *written += 1;
        } else {
            *refused += 1;
            defmt::warn!("sample at tick {=u32} refused", sample.tick);
        }
    }
}

fn fail(what: &str) -> ! {
    defmt::error!("{=str}", what);
    exit(debug::EXIT_FAILURE)
}

fn fail_with<E: defmt::Format>(what: &str, e: E) -> ! {
    defmt::error!("{=str}: {}", what, e);
    exit(debug::EXIT_FAILURE)
}

/// Ends QEMU with `status` (semihosting), which becomes its exit status.
fn exit(status: debug::ExitStatus) -> ! {
    debug::exit(status);
    loop {
        cortex_m::asm::wfi();
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    fail("panicked")
}
