//! What a writer works in: the caller's slices ([`WriterBuffers`]), checked into
//! [`WriterStorage`]; fixed arrays for a `static` ([`StaticWriterStorage`]).

use super::index::*;
use super::*;

/// The slices a writer works in. Capacities follow from the lengths: strings =
/// `min(string_spans, string_slots − 1)`, frames = `min(frames, frame_slots − 1)`, threads =
/// `min(threads, thread_slots − 1, stacks / 256, rle / rle_budget)`. Give each slot table
/// about twice its entry count for short probes.
pub struct WriterBuffers<'a> {
    /// Arena for string bytes.
    pub string_bytes: &'a mut [u8],
    /// One span per string.
    pub string_spans: &'a mut [Span],
    /// Hash slots for strings.
    pub string_slots: &'a mut [u32],
    /// Frame table.
    pub frames: &'a mut [FrameEntry],
    /// Hash slots for frames.
    pub frame_slots: &'a mut [u32],
    /// Recent-frame cache for the string API (any length; one per frame is a good size,
    /// empty disables it). It only saves hashing; output does not depend on it.
    pub frame_cache: &'a mut [u32],
    /// Thread table.
    pub threads: &'a mut [WriterThread],
    /// Hash slots for threads.
    pub thread_slots: &'a mut [u32],
    /// Previous stacks, 256 ids per thread.
    pub stacks: &'a mut [u32],
    /// REPEAT buffers, `rle_budget` bytes per thread.
    pub rle: &'a mut [u8],
    /// Bytes per thread REPEAT run; [`CPYTHON_RLE_BUDGET`] for CPython-identical files, smaller
    /// to save RAM (files stay valid, REPEAT records are just split earlier).
    pub rle_budget: usize,
    /// Staging for the sample region; at least `records::max_record_len(rle_budget)`.
    pub staging: &'a mut [u8],
}

/// Validated writer storage, ready for [`crate::writer::Writer::new`].
pub struct WriterStorage<'a> {
    pub(crate) strings: StringInterner<'a>,
    pub(crate) frames: FrameInterner<'a>,
    pub(crate) threads: WriterThreads<'a>,
    pub(crate) recent: RecentFrames<'a>,
    pub(crate) staging: &'a mut [u8],
    /// The zstd compressor, used only when the configuration says `Compression::Zstd`.
    #[cfg(feature = "zstd")]
    pub(crate) zstd: Option<crate::compression::ZstdOut<'a>>,
}

impl<'a> WriterStorage<'a> {
    /// Keys the hashes of the string, frame and thread tables with `seed`. The writer's input
    /// is usually the runtime's own, but a converter writes names and thread ids from a file
    /// that may be hostile: without a secret seed (the default is 0) they can be chosen to
    /// collide, and writing takes time quadratic in their count. The file written is the
    /// same whatever the seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.strings.index.seed = seed;
        self.frames.index.seed = seed;
        self.threads.seed = seed;
        self
    }

    /// Adds a zstd compressor: a [`crate::compression::Compressor`] over the caller's
    /// workspace, or a caller's [`crate::compression::RegionCompressor`] (one on another
    /// thread, say). It is memory like the rest of the storage; whether the sample region is
    /// compressed is said once, by [`crate::writer::WriterConfig::compression`], and a
    /// configuration without zstd leaves the compressor unused.
    #[cfg(feature = "zstd")]
    pub fn with_zstd(self, compressor: impl Into<crate::compression::ZstdOut<'a>>) -> Self {
        WriterStorage { zstd: Some(compressor.into()), ..self }
    }

    /// Checks that the slices fit together.
    pub fn new(b: WriterBuffers<'a>) -> Result<Self, StorageError> {
        Self::build(b, None)
    }

    /// [`Self::new`], or with `growable` threads in place of the buffers' (then empty) ones.
    pub(super) fn build(b: WriterBuffers<'a>, growable: Option<WriterThreads<'a>>) -> Result<Self, StorageError> {
        if b.string_slots.len() <= 1 {
            return Err(StorageError::TooFewSlots(Resource::Strings));
        }
        if b.frame_slots.len() <= 1 {
            return Err(StorageError::TooFewSlots(Resource::Frames));
        }
        if b.rle_budget < MAX_RLE_ENTRY_LEN || b.rle_budget > u32::MAX as usize {
            return Err(StorageError::RleBudgetTooSmall);
        }
        if b.staging.len() < max_record_len(b.rle_budget) {
            return Err(StorageError::StagingTooSmall);
        }
        let threads = match growable {
            Some(threads) => threads,
            None if b.thread_slots.len() <= 1 => return Err(StorageError::TooFewSlots(Resource::Threads)),
            None => WriterThreads::fixed(b.threads, b.thread_slots, b.stacks, b.rle, b.rle_budget),
        };
        let strings = StringInterner {
            table: StringTable::new(b.string_bytes, b.string_spans),
            index: SlotIndex::new(b.string_slots),
        };
        let frames = FrameInterner { entries: Table::Fixed(b.frames), count: 0, index: SlotIndex::new(b.frame_slots) };
        Ok(Self::from_parts(strings, frames, threads, b.frame_cache, b.staging))
    }

    /// Storage from its checked parts, fixed or growable; the recent-frame cache emptied.
    pub(super) fn from_parts(
        strings: StringInterner<'a>,
        frames: FrameInterner<'a>,
        threads: WriterThreads<'a>,
        frame_cache: &'a mut [u32],
        staging: &'a mut [u8],
    ) -> Self {
        frame_cache.fill(0);
        WriterStorage {
            strings,
            frames,
            threads,
            recent: RecentFrames { slots: frame_cache },
            staging,
            #[cfg(feature = "zstd")]
            zstd: None,
        }
    }
}

/// Writer storage in fixed arrays, for a `static` on firmware. Hash slots are twice each
/// capacity. Compile-time checks: `STAGING >= records::max_record_len(RLE)`, `RLE >= 11`.
///
/// RAM: `STRING_BYTES + 16·STRINGS + 40·FRAMES + (1088 + RLE)·THREADS + STAGING` bytes
/// rounded up to 8 (on 64-bit targets; a test checks the formula against the compiler's
/// layout).
pub struct StaticWriterStorage<
    const STRING_BYTES: usize,
    const STRINGS: usize,
    const FRAMES: usize,
    const THREADS: usize,
    const RLE: usize = CPYTHON_RLE_BUDGET,
    const STAGING: usize = { max_record_len(CPYTHON_RLE_BUDGET) },
> {
    pub(super) string_bytes: [u8; STRING_BYTES],
    pub(super) string_spans: [Span; STRINGS],
    pub(super) string_slots: [[u32; 2]; STRINGS],
    pub(super) frames: [FrameEntry; FRAMES],
    pub(super) frame_slots: [[u32; 2]; FRAMES],
    pub(super) frame_cache: [u32; FRAMES],
    pub(super) threads: [WriterThread; THREADS],
    pub(super) thread_slots: [[u32; 2]; THREADS],
    pub(super) stacks: [[u32; MAX_STACK_DEPTH]; THREADS],
    pub(super) rle: [[u8; RLE]; THREADS],
    pub(super) staging: [u8; STAGING],
}

impl<
        const STRING_BYTES: usize,
        const STRINGS: usize,
        const FRAMES: usize,
        const THREADS: usize,
        const RLE: usize,
        const STAGING: usize,
    > StaticWriterStorage<STRING_BYTES, STRINGS, FRAMES, THREADS, RLE, STAGING>
{
    /// Zeroed storage; usable in a `static`.
    pub const fn new() -> Self {
        const {
            assert!(RLE >= MAX_RLE_ENTRY_LEN, "RLE budget must hold one 11-byte REPEAT entry");
            assert!(STAGING >= max_record_len(RLE), "STAGING must hold the largest record");
            assert!(STRINGS >= 1 && FRAMES >= 1 && THREADS >= 1, "capacities must be at least 1");
        }
        StaticWriterStorage {
            string_bytes: [0; STRING_BYTES],
            string_spans: [Span::EMPTY; STRINGS],
            string_slots: [[0; 2]; STRINGS],
            frames: [FrameEntry::EMPTY; FRAMES],
            frame_slots: [[0; 2]; FRAMES],
            frame_cache: [0; FRAMES],
            threads: [WriterThread::EMPTY; THREADS],
            thread_slots: [[0; 2]; THREADS],
            stacks: [[0; MAX_STACK_DEPTH]; THREADS],
            rle: [[0; RLE]; THREADS],
            staging: [0; STAGING],
        }
    }

    /// Lends the arrays to a writer (clearing what a previous writer left).
    pub fn storage(&mut self) -> WriterStorage<'_> {
        let buffers = WriterBuffers {
            string_bytes: &mut self.string_bytes,
            string_spans: &mut self.string_spans,
            string_slots: self.string_slots.as_flattened_mut(),
            frames: &mut self.frames,
            frame_slots: self.frame_slots.as_flattened_mut(),
            frame_cache: &mut self.frame_cache,
            threads: &mut self.threads,
            thread_slots: self.thread_slots.as_flattened_mut(),
            stacks: self.stacks.as_flattened_mut(),
            rle: self.rle.as_flattened_mut(),
            rle_budget: RLE,
            staging: &mut self.staging,
        };
        match WriterStorage::new(buffers) {
            Ok(s) => s,
            // The const assertions in `new` rule every error out.
            Err(_) => unreachable!("static storage validated at compile time"),
        }
    }
}

impl<
        const STRING_BYTES: usize,
        const STRINGS: usize,
        const FRAMES: usize,
        const THREADS: usize,
        const RLE: usize,
        const STAGING: usize,
    > Default for StaticWriterStorage<STRING_BYTES, STRINGS, FRAMES, THREADS, RLE, STAGING>
{
    fn default() -> Self {
        Self::new()
    }
}
