//! Profiles a small interpreter ([`vm`]) on a Cortex-M with tachyon-core, no heap, every
//! buffer static: SysTick interrupts push the interpreter's call stack into the library's
//! capture ring (`tachyon_core::capture`, wait-free, no critical section) as (function,
//! line) pairs, the main loop drains it into three outputs: two Tachyon writers through the
//! frame-id API, one over a RAM buffer (sent to the host by semihosting at the end), one over
//! UART0 as a journaled stream (`tachyon_core::transport::JournalWriter`: the tables go out as
//! they grow, so the host can read the capture while it grows, and a cut capture keeps every
//! sample before the cut); and the streaming encoder over UART1
//! (`tachyon_core::stream::StreamWriter`: definitions once, samples by id, no tables on the
//! device), the profiler a small part needs, its RAM capped below. `tachyon receive` writes
//! both captures as files. defmt logs what happened (read on the host by defmt-log, with
//! defmt-decoder).

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
use tachyon_core::stream::{ids_words, StreamWriter};
use tachyon_core::transport::{FlushPolicy, JournalWriter};
use tachyon_core::{Frame, FrameId, Location, Stats, Writer, WriterConfig};

/// SysTick reload: QEMU's MPS2 clocks SysTick at 25 MHz, so 2,500 cycles are 100 µs.
const RELOAD: u32 = 2_500;
const INTERVAL_US: u64 = 100;

/// Room for 8 samples of the interpreter's deepest stack (32 frames), as (function, line)
/// pairs: for more of the stacks it runs (up to 16 deep). A drain comes every 256 steps.
const RING_WORDS: usize = 8 * entry_words(vm::MAX_DEPTH, true);
static WORDS: [AtomicU32; RING_WORDS] = [const { AtomicU32::new(0) }; RING_WORDS];
static RING: Capture<'static> = Capture::new(&WORDS);
static TICKS: AtomicU32 = AtomicU32::new(0);
static TAKEN: AtomicU32 = AtomicU32::new(0);
/// SysTick ticks spent in the handler so far, between its first and last reading of the
/// counter: what a measured call an interrupt cut into did not spend itself.
static IN_HANDLER: AtomicU32 = AtomicU32::new(0);

/// Writer storage: 3 functions × a few lines, one thread.
type Storage = StaticWriterStorage<256, 8, 32, 1>;

/// The ids of (function, line): a function's 32 lines each. The stream sends frames by them
/// and the writers' frame cache is indexed by them.
const STREAM_IDS: usize = 3 * 32;
/// The stream's transmit buffer: one frame of items.
const STREAM_BUFFER: usize = 256;

/// The RAM the profiler takes when it writes through the stream alone: the capture ring, the
/// stream's state, its bitmap of ids sent and its transmit buffer; capped by construction at
/// half of what a part with 8 KiB of RAM has. The two writers beside it are witnesses, not
/// part of it.
const PROFILER_RAM: usize = core::mem::size_of::<[AtomicU32; RING_WORDS]>()
    + core::mem::size_of::<StreamWriter<'static, uart::Uart>>()
    + ids_words(STREAM_IDS) * 4
    + STREAM_BUFFER;
const PROFILER_RAM_CAP: usize = 4 * 1024;
const _: () = assert!(PROFILER_RAM <= PROFILER_RAM_CAP, "the profiler takes more RAM than its cap");

/// The id of (function, line).
fn stream_id(function: u8, line: u16) -> u32 {
    u32::from(function) * 32 + u32::from(line % 32)
}

#[exception]
fn SysTick() {
    let entered = SYST::get_current();
    sample();
    let left = SYST::get_current();
    // Only this handler writes the counters, and it does not preempt itself: a load and a
    // store (thumbv6m has no atomic read-modify-write).
    IN_HANDLER.store(IN_HANDLER.load(Ordering::Relaxed) + entered.saturating_sub(left), Ordering::Relaxed);
}

/// The handler's work: the tick counted, the interpreter's stack pushed into the ring.
fn sample() {
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

/// Frame ids by `stream_id` of (function, line), interned on first use, the same in both writers.
struct Frames {
    ids: [Option<FrameId>; STREAM_IDS],
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
    let stream_buffer: &'static mut [u8; STREAM_BUFFER] =
        cortex_m::singleton!(: [u8; STREAM_BUFFER] = [0; STREAM_BUFFER]).unwrap();
    let sent: &'static mut [u32; ids_words(STREAM_IDS)] =
        cortex_m::singleton!(: [u32; ids_words(STREAM_IDS)] = [0; ids_words(STREAM_IDS)]).unwrap();

    let config = WriterConfig::new(0, INTERVAL_US);
    let Ok(mut ram_writer) = Writer::new(Cursor::new(&mut ram[..]), ram_storage.storage(), config) else {
        fail("the RAM writer could not start")
    };
    // Never flushed but by its staging filling, as the RAM writer: the same bytes, CPython's.
    let policy = FlushPolicy::default();
    let Ok(mut uart_writer) =
        JournalWriter::new(uart::Uart::take_uart0(), &mut scratch[..], uart_storage.storage(), config, policy)
    else {
        fail("the UART writer could not start")
    };
    let Ok(mut stream) = StreamWriter::new(uart::Uart::take_uart1(), &mut stream_buffer[..], &mut sent[..], config)
    else {
        fail("the stream could not start")
    };
    defmt::info!(
        "profiler through the stream: {=usize} bytes of RAM (ring {=usize}, stream {=usize}, bitmap {=usize}, transmit buffer {=usize}; cap {=usize})",
        PROFILER_RAM,
        RING_WORDS * 4,
        core::mem::size_of::<StreamWriter<'static, uart::Uart>>(),
        ids_words(STREAM_IDS) * 4,
        STREAM_BUFFER,
        PROFILER_RAM_CAP
    );

    let mut frames = Frames { ids: [None; STREAM_IDS] };
    let mut tally = Tally::default();
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
            drain(&mut frames, &mut ram_writer, &mut uart_writer, &mut stream, &mut tally);
        }
        if !running {
            break;
        }
    }
    p.SYST.disable_interrupt();
    p.SYST.disable_counter();
    drain(&mut frames, &mut ram_writer, &mut uart_writer, &mut stream, &mut tally);

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
        tally.written,
        tally.refused
    );
    defmt::info!(
        "cost per sample: RAM writer {=u64} instructions, UART writer {=u64} instructions, stream {=u64} instructions (means of {=u32}, {=u32} and {=u32} samples, the interrupts' handler left out)",
        tally.costs[0].instructions_per_sample(),
        tally.costs[1].instructions_per_sample(),
        tally.costs[2].instructions_per_sample(),
        tally.costs[0].samples,
        tally.costs[1].samples,
        tally.costs[2].samples
    );
    // The stats a capture drain gives (`Drain::stats`): the same in all three files.
    let lost = dropped.wrapping_add(RING.garbled());
    let stats = Stats::of_counts(0, tally.last_us, u64::from(tally.written), u64::from(tally.refused), lost);
    stream.set_dropped_upstream(lost);
    if ram_writer.set_stats(stats).is_err() || uart_writer.set_stats(stats).is_err() {
        fail("setting the stats");
    }
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
    let streamed = match stream.finish() {
        Ok(samples) => samples,
        Err(e) => fail_with("finishing the sample stream", e),
    };
    defmt::info!(
        "files: RAM {=usize} bytes; UART stream {=u64} bytes in {=u32} frames; sample stream {=u64} samples in {=u32} frames, {=u64} lost, {=u64} refused",
        ram_len,
        stream_len,
        uart_writer.writer().get_ref().frames(),
        streamed,
        stream.frames(),
        stream.dropped(),
        stream.refused()
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
    /// Runs `write`, counting its ticks: the counter's, across the interrupts that came in
    /// between (it counts down from `RELOAD - 1` and reloads at each), less the ticks their
    /// handler spent.
    fn measure(&mut self, write: impl FnOnce() -> bool) -> bool {
        let (tick, handled, before) = now();
        let done = write();
        let (tick_after, handled_after, after) = now();
        let wraps = u64::from(tick_after.wrapping_sub(tick));
        let elapsed = (u64::from(before) + wraps * u64::from(RELOAD)).saturating_sub(u64::from(after));
        self.ticks += elapsed.saturating_sub(u64::from(handled_after.wrapping_sub(handled)));
        self.samples += 1;
        done
    }

    fn instructions_per_sample(&self) -> u64 {
        self.ticks * INSTRUCTIONS_PER_TICK / u64::from(self.samples.max(1))
    }
}

/// The ticks counted, the handler's ticks and the counter, read together (again if a tick
/// came in between).
fn now() -> (u32, u32, u32) {
    loop {
        let (tick, handled) = (TICKS.load(Ordering::Relaxed), IN_HANDLER.load(Ordering::Relaxed));
        let current = SYST::get_current();
        if TICKS.load(Ordering::Relaxed) == tick {
            return (tick, handled, current);
        }
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

/// What the drains did: samples written to all three outputs and refused, the last one's
/// time, and each output's cost.
#[derive(Default)]
struct Tally {
    written: u32,
    refused: u32,
    last_us: Option<u64>,
    costs: [Cost; 3],
}

/// Moves the ring's samples into the three outputs (innermost frame first).
fn drain<A, B, C>(
    frames: &mut Frames,
    ram: &mut Writer<'_, A>,
    uart: &mut JournalWriter<'_, '_, B>,
    stream: &mut StreamWriter<'_, C>,
    tally: &mut Tally,
) where
    A: embedded_io::Write + embedded_io::Seek,
    B: embedded_io::Write,
    C: embedded_io::Write,
{
    while let Some(sample) = take() {
        let mut ids = [FrameId(0); vm::MAX_DEPTH];
        let mut stream_ids = [0u32; vm::MAX_DEPTH];
        let depth = sample.depth;
        let mut ok = true;
        for ((slot, stream_slot), &(function, line)) in
            ids[..depth].iter_mut().zip(&mut stream_ids[..depth]).zip(&sample.frames[..depth])
        {
            *stream_slot = stream_id(function, line);
            *slot = match frames.ids.get_mut(*stream_slot as usize) {
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
        let taken = Taken { timestamp_us: ts, interpreter_id: 0, thread_id: 1, status: 0 };
        // The frame of an id whose definition has not gone out: one of this sample's.
        let define = |id| {
            let found = sample.frames[..depth].iter().find(|&&(function, line)| stream_id(function, line) == id);
            let &(function, line) = found.unwrap_or(&(0, 0));
            frame_of(function, line)
        };
        let costs = &mut tally.costs;
        let done = ok
            && costs[0].measure(|| ram.write_thread_sample_ids(ts, 0, 1, 0, &ids[..depth]).is_ok())
            && costs[1].measure(|| uart.write_thread_sample_ids(taken, &ids[..depth]).is_ok())
            && costs[2].measure(|| stream.write_sample(taken, &stream_ids[..depth], define).is_ok());
        if done {
            tally.written += 1;
            tally.last_us = Some(ts);
        } else {
            tally.refused += 1;
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
