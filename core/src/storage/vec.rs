//! Storage in `Vec`s (feature `alloc`): tables of the given capacities allocated once, thread
//! tables grown by use.

use super::index::SlotIndex;
use super::*;

use alloc::vec;
use alloc::vec::Vec;

/// Capacities of a `Vec`-backed writer storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterCapacity {
    /// Bytes of all distinct strings.
    pub string_bytes: usize,
    /// Distinct strings.
    pub strings: usize,
    /// Distinct frames.
    pub frames: usize,
    /// Most distinct `(thread, interpreter)` pairs. The thread table starts empty and
    /// grows as threads appear, so this costs nothing until samples use it.
    pub threads: usize,
    /// REPEAT budget per thread ([`CPYTHON_RLE_BUDGET`] for CPython-identical output).
    pub rle_budget: usize,
}

impl WriterCapacity {
    /// A desktop configuration: 16 MiB of strings, 256 Ki strings and frames, 1024 threads.
    pub const DESKTOP: WriterCapacity = WriterCapacity {
        string_bytes: 16 << 20,
        strings: 256 << 10,
        frames: 256 << 10,
        threads: 1024,
        rle_budget: CPYTHON_RLE_BUDGET,
    };

    /// Bytes allocated up front (`docs/memory.md`'s formula; threads come on top as they
    /// appear); `None` if that exceeds `usize`.
    pub fn ram_bytes(&self) -> Option<usize> {
        let slots = |n: usize| n.checked_mul(2)?.checked_add(1)?.checked_mul(4);
        let parts = [
            Some(self.string_bytes),
            self.strings.checked_mul(core::mem::size_of::<Span>()),
            slots(self.strings),
            self.frames.checked_mul(core::mem::size_of::<FrameEntry>() + 4),
            slots(self.frames),
            Some(max_record_len(self.rle_budget)),
        ];
        parts.into_iter().try_fold(0usize, |sum, part| sum.checked_add(part?))
    }
}

/// The thread table of a [`VecWriterStorage`], grown by use (see [`WriterThreads`]).
#[derive(Default)]
pub(crate) struct GrowableThreads {
    pub(crate) entries: Vec<WriterThread>,
    pub(crate) slots: Vec<u32>,
    pub(crate) stacks: Vec<u32>,
    pub(crate) rle: Vec<u8>,
}

/// Writer storage in `Vec`s: string and frame tables of the given capacities, allocated
/// once ([`VecWriterStorage::new`]), or grown as they fill ([`VecWriterStorage::growing`]);
/// a thread table that grows with the threads written.
pub struct VecWriterStorage {
    pub(super) cap: WriterCapacity,
    /// String and frame tables grow by use (the capacities are the format's).
    pub(super) growing: bool,
    pub(super) string_bytes: Vec<u8>,
    pub(super) string_spans: Vec<Span>,
    pub(super) string_slots: Vec<u32>,
    pub(super) frames: Vec<FrameEntry>,
    pub(super) frame_slots: Vec<u32>,
    pub(super) frame_cache: Vec<u32>,
    pub(super) threads: GrowableThreads,
    pub(super) staging: Vec<u8>,
}

impl VecWriterStorage {
    /// Allocates the string and frame tables and the staging buffer once, up front. Sizes
    /// are computed with checked arithmetic, so capacities beyond the address space (easy
    /// on 32-bit targets) are an error, not a wrapped size.
    pub fn new(cap: WriterCapacity) -> Result<Self, StorageError> {
        let rle_budget = cap.rle_budget.max(MAX_RLE_ENTRY_LEN);
        let cap = WriterCapacity { rle_budget, threads: cap.threads.max(1), ..cap };
        cap.ram_bytes().ok_or(StorageError::CapacityOverflow)?;
        Ok(VecWriterStorage {
            cap,
            growing: false,
            string_bytes: vec![0; cap.string_bytes],
            string_spans: vec![Span::EMPTY; cap.strings],
            string_slots: vec![0; 2 * cap.strings + 1],
            frames: vec![FrameEntry::EMPTY; cap.frames],
            frame_slots: vec![0; 2 * cap.frames + 1],
            frame_cache: vec![0; cap.frames],
            threads: GrowableThreads::default(),
            staging: vec![0; max_record_len(rle_budget)],
        })
    }

    /// Storage whose string and frame tables start empty and grow as a writer fills them
    /// (doubling, so a string or frame costs amortised constant time), up to the format's
    /// own limits (u32 indices, 4 GiB of string bytes), or until memory runs out, which the
    /// writer reports as a capacity limit: for a writer that cannot know what it will be
    /// given (a runtime's profiler, CPython's `BinaryWriter` API). `threads` and `rle_budget`
    /// are as in [`WriterCapacity`].
    pub fn growing(threads: usize, rle_budget: usize) -> Self {
        let rle_budget = rle_budget.max(MAX_RLE_ENTRY_LEN);
        let most = u32::MAX as usize - 1;
        VecWriterStorage {
            cap: WriterCapacity {
                string_bytes: u32::MAX as usize,
                strings: most,
                frames: most,
                threads: threads.max(1),
                rle_budget,
            },
            growing: true,
            string_bytes: Vec::new(),
            string_spans: Vec::new(),
            string_slots: Vec::new(),
            frames: Vec::new(),
            frame_slots: Vec::new(),
            frame_cache: vec![0; GROWING_FRAME_CACHE],
            threads: GrowableThreads::default(),
            staging: vec![0; max_record_len(rle_budget)],
        }
    }

    /// The capacities this storage was made with.
    pub fn capacity(&self) -> WriterCapacity {
        self.cap
    }

    /// Lends the tables to a writer.
    pub fn storage(&mut self) -> WriterStorage<'_> {
        let threads = WriterThreads::growable(&mut self.threads, self.cap.rle_budget, self.cap.threads);
        if self.growing {
            let strings = StringInterner {
                table: StringTable::growable(&mut self.string_bytes, &mut self.string_spans),
                index: SlotIndex::growable(&mut self.string_slots),
            };
            let frames = FrameInterner {
                entries: Table::Growable(&mut self.frames),
                count: 0,
                index: SlotIndex::growable(&mut self.frame_slots),
            };
            return WriterStorage::from_parts(strings, frames, threads, &mut self.frame_cache, &mut self.staging);
        }
        let buffers = WriterBuffers {
            string_bytes: &mut self.string_bytes,
            string_spans: &mut self.string_spans,
            string_slots: &mut self.string_slots,
            frames: &mut self.frames,
            frame_slots: &mut self.frame_slots,
            frame_cache: &mut self.frame_cache,
            threads: &mut [],
            thread_slots: &mut [],
            stacks: &mut [],
            rle: &mut [],
            rle_budget: self.cap.rle_budget,
            staging: &mut self.staging,
        };
        match WriterStorage::build(buffers, Some(threads)) {
            Ok(s) => s,
            Err(_) => unreachable!("sizes derived from one capacity set"),
        }
    }

    /// Bytes the string and frame tables hold now (all of them for fixed capacities).
    pub fn table_bytes(&self) -> usize {
        self.string_bytes.capacity()
            + self.string_spans.capacity() * core::mem::size_of::<Span>()
            + (self.string_slots.capacity() + self.frame_slots.capacity() + self.frame_cache.capacity()) * 4
            + self.frames.capacity() * core::mem::size_of::<FrameEntry>()
    }

    /// Bytes the thread table holds now (entries, index, stacks and REPEAT buffers),
    /// which grows with the threads written.
    pub fn thread_bytes(&self) -> usize {
        let t = &self.threads;
        t.entries.capacity() * core::mem::size_of::<WriterThread>()
            + (t.slots.capacity() + t.stacks.capacity()) * 4
            + t.rle.capacity()
    }
}

/// Recent-frame cache slots of growing storage (64 KiB): the cache only saves hashing, so
/// it need not grow with the table.
const GROWING_FRAME_CACHE: usize = 16 << 10;

/// Capacities of a `Vec`-backed reader storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaderCapacity {
    /// Bytes of all strings.
    pub string_bytes: usize,
    /// Strings.
    pub strings: usize,
    /// Frames.
    pub frames: usize,
    /// Most threads. The thread table starts empty and grows as threads appear in the
    /// samples, so this costs nothing until the file uses it.
    pub threads: usize,
    /// Window over the sample stream.
    pub read_buffer: usize,
}

impl ReaderCapacity {
    /// A desktop configuration: 64 MiB of strings, 1 Mi strings and frames, threads
    /// without limit, a 256 KiB window.
    pub const DESKTOP: ReaderCapacity = ReaderCapacity {
        string_bytes: 64 << 20,
        strings: 1 << 20,
        frames: 1 << 20,
        threads: usize::MAX,
        read_buffer: 256 << 10,
    };

    /// Bytes allocated up front (`docs/memory.md`'s formula; threads come on top as they
    /// appear); `None` if that exceeds `usize`.
    pub fn ram_bytes(&self) -> Option<usize> {
        let parts = [
            Some(self.string_bytes),
            self.strings.checked_mul(core::mem::size_of::<Span>()),
            self.frames.checked_mul(core::mem::size_of::<FrameEntry>()),
            Some(self.read_buffer.max(MIN_READ_BUFFER)),
        ];
        parts.into_iter().try_fold(0usize, |sum, part| sum.checked_add(part?))
    }
}

/// Reader storage in `Vec`s of the given capacities; the thread table grows with use.
pub struct VecReaderStorage {
    pub(super) string_bytes: Vec<u8>,
    pub(super) string_spans: Vec<Span>,
    pub(super) frames: Vec<FrameEntry>,
    pub(super) threads: Vec<ReaderThread>,
    pub(super) thread_slots: Vec<u32>,
    pub(super) stacks: Vec<u32>,
    pub(super) read_buffer: Vec<u8>,
    pub(super) max_threads: usize,
    /// String and frame tables grow by use.
    pub(super) growing: bool,
}

impl VecReaderStorage {
    /// Allocates the string and frame tables and the window once, up front; capacities
    /// beyond the address space are an error (see [`VecWriterStorage::new`]).
    pub fn new(cap: ReaderCapacity) -> Result<Self, StorageError> {
        cap.ram_bytes().ok_or(StorageError::CapacityOverflow)?;
        Ok(VecReaderStorage {
            string_bytes: vec![0; cap.string_bytes],
            string_spans: vec![Span::EMPTY; cap.strings],
            frames: vec![FrameEntry::EMPTY; cap.frames],
            threads: Vec::new(),
            thread_slots: Vec::new(),
            stacks: Vec::new(),
            read_buffer: vec![0; cap.read_buffer.max(MIN_READ_BUFFER)],
            max_threads: cap.threads.max(1),
            growing: false,
        })
    }

    /// Storage whose string and frame tables start empty and grow as the tables loaded
    /// ask (bounded by the bytes of the tables read, which the reader checks first): for a
    /// file whose tables are not known in advance, one still being written say
    /// ([`crate::reader::Reader::open_growing`]). The window is `read_buffer` bytes (at
    /// least [`MIN_READ_BUFFER`]), the thread table holds at most `max_threads`.
    pub fn growing(read_buffer: usize, max_threads: usize) -> Self {
        VecReaderStorage {
            string_bytes: Vec::new(),
            string_spans: Vec::new(),
            frames: Vec::new(),
            threads: Vec::new(),
            thread_slots: Vec::new(),
            stacks: Vec::new(),
            read_buffer: vec![0; read_buffer.max(MIN_READ_BUFFER)],
            max_threads: max_threads.max(1),
            growing: true,
        }
    }

    /// Lends the tables to a reader.
    pub fn storage(&mut self) -> ReaderStorage<'_> {
        let (strings, frames) = if self.growing {
            (StringTable::growable(&mut self.string_bytes, &mut self.string_spans), Table::Growable(&mut self.frames))
        } else {
            (StringTable::new(&mut self.string_bytes, &mut self.string_spans), Table::Fixed(&mut self.frames[..]))
        };
        ReaderStorage {
            strings,
            frames,
            threads: ReaderThreads::growable(
                &mut self.threads,
                &mut self.thread_slots,
                &mut self.stacks,
                self.max_threads,
            ),
            read_buffer: &mut self.read_buffer,
        }
    }

    /// Bytes the thread table holds now (entries, index and stacks), which grows with
    /// the threads a file uses.
    pub fn thread_bytes(&self) -> usize {
        self.threads.capacity() * core::mem::size_of::<ReaderThread>()
            + (self.thread_slots.capacity() + self.stacks.capacity()) * 4
    }
}
