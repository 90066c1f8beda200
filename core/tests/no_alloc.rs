//! Proof that core needs no allocator: a global allocator that counts allocations on the
//! test's thread while a full write + read round trip runs through core, with all storage
//! allocated before the count starts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use tachyon_core::io::Cursor;
use tachyon_core::storage::{StaticReaderStorage, StaticWriterStorage};
use tachyon_core::{BigEndian, Frame, Location, Reader, Stats, Writer, WriterConfig};

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

struct Counting;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCATIONS.with(|a| a.set(a.get() + 1));
        }
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

type WStore = StaticWriterStorage<4096, 64, 64, 4>;
type RStore = StaticReaderStorage<4096, 64, 64, 4, 256>;

#[test]
fn write_and_read_round_trip_without_allocating() {
    // Storage and buffers up front (boxed: they are large for a test thread's stack).
    let mut wstore: Box<WStore> = Box::default();
    let mut rstore: Box<RStore> = Box::default();
    let mut file = vec![0u8; 1 << 16];

    COUNTING.with(|c| c.set(true));
    let mut cfg = WriterConfig::new(1_000_000, 1000);
    cfg.python_version = [3, 15, 2];
    let mut w = Writer::with_endian(Cursor::new(&mut file[..]), wstore.storage(), cfg, BigEndian).unwrap();
    let loc = Location { lineno: 3, end_lineno: 4, col: 1, end_col: 9 };
    let frames = [Frame::new(b"inner.py", b"inner").at(loc), Frame::new(b"main.py", b"main")];
    let mut written = 0u64;
    for i in 0..2000u64 {
        let depth = 1 + (i % 2) as usize;
        w.write_thread_sample(1_000_000 + i * 10, 0, i % 3, (i % 5) as u8, frames[2 - depth..].iter().copied())
            .unwrap();
        written += 1;
    }
    w.set_stats(Stats { duration_sec: 1.0, sample_rate: 1000.0, error_rate: None, missed_samples: Some(0.5) }).unwrap();
    let size = w.finish().unwrap() as usize;
    let _ = w.into_inner();

    let mut r = Reader::open(Cursor::new(&file[..size]), rstore.storage()).unwrap();
    let mut read = 0u64;
    let mut frames_seen = 0usize;
    while let Some(s) = r.next_sample().unwrap() {
        read += 1;
        frames_seen += s.frames().count();
    }
    COUNTING.with(|c| c.set(false));

    assert_eq!(read, written);
    assert_eq!(frames_seen, 3000);
    assert_eq!(ALLOCATIONS.with(Cell::get), 0, "core allocated during the round trip");
}

/// The streaming encoder, and the reading of its frames, with storage and the link's buffer
/// taken first.
#[cfg(feature = "stream")]
#[test]
fn a_stream_is_written_and_read_without_allocating() {
    use tachyon_core::capture::Taken;
    use tachyon_core::stream::{self, Body, Item, StreamWriter};

    let mut link = vec![0u8; 1 << 16];
    let (mut buffer, mut sent) = ([0u8; 128], [0u32; 2]);
    let frames = [Frame::new(b"inner.py", b"inner"), Frame::new(b"main.py", b"main")];
    COUNTING.with(|c| c.set(true));
    let mut w =
        StreamWriter::new(Cursor::new(&mut link[..]), &mut buffer, &mut sent, WriterConfig::new(0, 10)).unwrap();
    for i in 0..2000u64 {
        let ids = [(i % 2) as u32, 1];
        let taken = Taken { timestamp_us: i * 10, interpreter_id: 0, thread_id: i % 3, status: 0 };
        w.write_sample(taken, &ids[(i % 2) as usize..], |id| frames[id as usize]).unwrap();
    }
    w.finish().unwrap();
    let len = w.into_inner().position() as usize;
    let mut samples = 0u64;
    for piece in link[..len].split_mut(|&b| b == 0) {
        if let Ok(stream::StreamFrame { body: Body::Items(items), .. }) = stream::decode(piece) {
            samples += items.filter(|item| matches!(item, Ok(Item::Sample { .. }))).count() as u64;
        }
    }
    COUNTING.with(|c| c.set(false));
    assert_eq!(samples, 2000);
    assert_eq!(ALLOCATIONS.with(Cell::get), 0, "core allocated writing or reading a stream");
}

#[test]
fn the_counter_does_count() {
    // Guards the guard: an allocation inside the window is seen.
    COUNTING.with(|c| c.set(true));
    let v: Vec<u8> = Vec::with_capacity(16);
    COUNTING.with(|c| c.set(false));
    drop(v);
    assert!(ALLOCATIONS.with(Cell::get) >= 1);
}
