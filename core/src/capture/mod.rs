//! Taking samples where nothing may allocate, lock or do I/O — a signal handler, an
//! interrupt — and writing them elsewhere.
//!
//! A runtime keeps one [`Capture`] ring per producer (per thread whose handler samples it,
//! or per interrupt). The producer pushes a sample: [`Capture::push_ids`] with frame ids
//! interned beforehand from ordinary context ([`crate::Writer::intern_frame`]), or
//! [`Capture::push_code`] with the runtime's own `(code id, offset)` pairs. A consumer — a
//! writer thread, the main loop — moves entries into a [`crate::Writer`] with a [`Drain`],
//! which turns code pairs into frames through the caller's [`Resolver`], and at the end puts
//! what the rings dropped into CPython's stats trailer ([`Drain::set_stats`]).
//!
//! ```
//! use core::sync::atomic::AtomicU32;
//! use tachyon_core::capture::{Capture, Drain, IdsOnly, Taken};
//! use tachyon_core::{io::Cursor, storage::StaticWriterStorage, Frame, Writer, WriterConfig};
//!
//! static WORDS: [AtomicU32; 256] = [const { AtomicU32::new(0) }; 256];
//! static RING: Capture<'static> = Capture::new(&WORDS);
//!
//! let mut storage = Box::new(StaticWriterStorage::<4096, 64, 64, 4>::new());
//! let mut file = [0u8; 4096];
//! let mut writer = Writer::new(Cursor::new(&mut file[..]), storage.storage(), WriterConfig::new(0, 1000))?;
//! // Ordinary context: intern what the handler will name.
//! let main = writer.intern_frame(Frame::new(b"main.lua", b"main"))?;
//! let work = writer.intern_frame(Frame::new(b"main.lua", b"work"))?;
//! // The signal handler: wait-free, no allocation, no lock.
//! let taken = Taken { timestamp_us: 1000, thread_id: 7, ..Taken::default() };
//! RING.push_ids(taken, &[work, main]).ok();
//! // The writer thread.
//! let mut drain = Drain::new();
//! drain.drain(&RING, &mut writer, &IdsOnly, usize::MAX)?;
//! drain.set_stats(&mut writer, 0, [&RING])?;
//! writer.finish()?;
//! assert_eq!((drain.written(), RING.dropped()), (1, 0));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Entry layout
//!
//! The ring is the caller's `[AtomicU32]` (every access atomic, so nothing here is
//! `unsafe` and a misused ring is never undefined behaviour). An entry is contiguous:
//!
//! | word | holds |
//! |---|---|
//! | 0 | kind (bits 24–31: 1 frame ids, 2 code pairs), status (16–23), length in words (0–15) |
//! | 1, 2 | timestamp µs, low then high half |
//! | 3, 4 | thread id, low then high half |
//! | 5 | interpreter id |
//! | 6 | depth (≤ 256) |
//! | 7… | frame ids (one word each) or `(code low, code high, offset)` triples, innermost first |
//!
//! A word `0xFFFF_FFFF` where an entry would start means the entry went back to the ring's
//! start. The producer publishes an entry by a release store of its position after writing
//! the words; the consumer gives words back by a release store after reading them. The
//! orderings are checked under loom (`core/tests/capture_loom.rs`).
//!
//! # Why not heapless's `spsc` or bbqueue
//!
//! heapless's queue holds items of one fixed type: a stack of up to 256 frames would make
//! every slot as large as the deepest stack and copy it twice a push. bbqueue grants
//! variable-sized byte slices but keeps its storage in a const-generic array (a C caller
//! cannot size it at run time) and its grants need compare-and-swap (not on Cortex-M0). A
//! ring of atomic words needs neither, and stays free of `unsafe`.

mod count;
mod drain;
mod entry;
mod ring;

/// The atomics the ring uses: loom's when the crate is built for loom's model checker.
mod atomic {
    #[cfg(loom)]
    pub use loom::sync::atomic::{AtomicU32, Ordering};

    #[cfg(not(loom))]
    pub use core::sync::atomic::{AtomicU32, Ordering};
}

pub use atomic::AtomicU32;
pub use count::MAX_COUNT;
pub use drain::{Drain, IdsOnly, Resolver, Target};
pub use entry::{CodePairs, Entry, Ids, Stack, Taken};
pub use ring::{entry_words, Capture, Dropped, MAX_WORDS};
