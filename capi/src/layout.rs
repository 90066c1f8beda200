//! Where a writer's handle and tables go in the caller's memory: one plan, computed with
//! checked arithmetic from the options, used both to say how many bytes are needed and to
//! carve them up. The memory may have any alignment: the plan asks for enough slack to
//! align the start.

use core::alloc::Layout;
use core::mem::align_of;

use tachyon_core::header::{CaptureFeatures, ProfilingConfig, ProfilingMode};
use tachyon_core::records::{max_record_len, CPYTHON_RLE_BUDGET, MAX_RLE_ENTRY_LEN, MAX_STACK_DEPTH};
use tachyon_core::storage::{Span, WriterThread};
use tachyon_core::tables::FrameEntry;

use crate::TACHYON_E_UNSUPPORTED;
use crate::{TACHYON_COMPRESSION_NONE, TACHYON_COMPRESSION_ZSTD, TACHYON_E_ARGUMENT};

/// How a writer is made: the `BinaryWriter` arguments, the byte order, the compression and
/// the capacities of its tables (which fix its memory). `tachyon_writer_options_init` fills
/// in defaults.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tachyon_writer_options {
    /// Start of profiling, µs; each thread's first timestamp is a delta from it.
    pub start_time_us: u64,
    /// Sampling interval, µs (stored in the header).
    pub sample_interval_us: u64,
    /// `TACHYON_BYTE_ORDER_NATIVE`, `_LITTLE` or `_BIG`.
    pub byte_order: u32,
    /// `TACHYON_COMPRESSION_NONE` or `_ZSTD`.
    pub compression: u32,
    /// Bytes of all distinct file and function names.
    pub string_bytes: usize,
    /// Distinct names (at least 1).
    pub strings: usize,
    /// Distinct frames (at least 1).
    pub frames: usize,
    /// Distinct (interpreter, thread) pairs (at least 1).
    pub threads: usize,
    /// Bytes of buffered REPEAT entries per thread: 0 for CPython's 16384, which makes files
    /// byte-identical to CPython's; smaller (at least 11) saves RAM at the cost of more,
    /// shorter REPEAT records.
    pub rle_budget: usize,
    /// What the samples measure, as CPython's `BinaryWriter` `mode` (in the header; readers
    /// show it as `get_info()["mode"]`): `TACHYON_MODE_WALL`, `_CPU`, `_GIL`, `_ALL`,
    /// `_EXCEPTION`, or `TACHYON_MODE_UNKNOWN` (the default). ABI version 2.
    pub mode: i32,
    /// What the sampler captured, a mask of `TACHYON_CAPTURE_FEATURE_*` (0 to 31), or
    /// `TACHYON_CAPTURE_FEATURES_UNKNOWN` (the default). ABI version 2.
    pub capture_features: i32,
}

/// Bytes of the compressor's output buffer (as the std layer's).
#[cfg(feature = "zstd")]
pub(crate) const ZSTD_OUT_BYTES: usize = 128 << 10;

/// One table: its offset from the aligned start and its element count.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Part {
    pub offset: usize,
    pub count: usize,
}

/// Every part of a writer's memory.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Plan {
    pub string_bytes: Part,
    pub string_spans: Part,
    pub string_slots: Part,
    pub frames: Part,
    pub frame_slots: Part,
    pub frame_cache: Part,
    pub threads: Part,
    pub thread_slots: Part,
    pub stacks: Part,
    pub rle: Part,
    pub staging: Part,
    #[cfg(feature = "zstd")]
    pub zstd_workspace: Part,
    #[cfg(feature = "zstd")]
    pub zstd_out: Part,
    pub rle_budget: usize,
    /// Bytes from the aligned start to the end of the last part.
    pub end: usize,
}

/// Alignment of the start for a handle `H`: the strictest of the handle's and the tables'.
pub(crate) const fn align<H>() -> usize {
    let mut a = align_of::<H>();
    if align_of::<u64>() > a {
        a = align_of::<u64>();
    }
    a
}

struct Builder {
    layout: Layout,
}

impl Builder {
    fn part<T>(&mut self, count: usize) -> Result<Part, i32> {
        let array = Layout::array::<T>(count).map_err(|_| TACHYON_E_ARGUMENT)?;
        let (layout, offset) = self.layout.extend(array).map_err(|_| TACHYON_E_ARGUMENT)?;
        self.layout = layout;
        Ok(Part { offset, count })
    }
}

/// Hash slots for `n` entries: twice as many, plus the one that always stays empty.
fn slots(n: usize) -> Result<usize, i32> {
    n.checked_mul(2).and_then(|s| s.checked_add(1)).ok_or(TACHYON_E_ARGUMENT)
}

/// The header's profiling configuration for `o`: CPython's ranges (mode −1 to 4, capture
/// features −1 to 31; −1 unknown), anything else `TACHYON_E_ARGUMENT` as CPython's
/// constructor raises `ValueError`.
pub(crate) fn profiling_of(o: &tachyon_writer_options) -> Result<ProfilingConfig, i32> {
    let mode = match o.mode {
        -1 => None,
        m => Some(ProfilingMode::from_value(i64::from(m)).ok_or(TACHYON_E_ARGUMENT)?),
    };
    let capture_features = match o.capture_features {
        -1 => None,
        f => Some(u8::try_from(f).ok().and_then(CaptureFeatures::new).ok_or(TACHYON_E_ARGUMENT)?),
    };
    Ok(ProfilingConfig { mode, capture_features })
}

/// The plan for `o`, or the status of what is wrong with the options.
pub(crate) fn plan<H>(o: &tachyon_writer_options) -> Result<Plan, i32> {
    if o.strings == 0 || o.frames == 0 || o.threads == 0 {
        return Err(TACHYON_E_ARGUMENT);
    }
    let rle_budget = if o.rle_budget == 0 { CPYTHON_RLE_BUDGET } else { o.rle_budget };
    if rle_budget < MAX_RLE_ENTRY_LEN || rle_budget > u32::MAX as usize {
        return Err(TACHYON_E_ARGUMENT);
    }
    profiling_of(o)?;
    let zstd = match o.compression {
        TACHYON_COMPRESSION_NONE => false,
        TACHYON_COMPRESSION_ZSTD if cfg!(feature = "zstd") => true,
        TACHYON_COMPRESSION_ZSTD => return Err(TACHYON_E_UNSUPPORTED),
        _ => return Err(TACHYON_E_ARGUMENT),
    };
    let mut b = Builder { layout: Layout::new::<H>() };
    let mut p = Plan { rle_budget, ..Plan::default() };
    p.string_bytes = b.part::<u8>(o.string_bytes)?;
    p.string_spans = b.part::<Span>(o.strings)?;
    p.string_slots = b.part::<u32>(slots(o.strings)?)?;
    p.frames = b.part::<FrameEntry>(o.frames)?;
    p.frame_slots = b.part::<u32>(slots(o.frames)?)?;
    p.frame_cache = b.part::<u32>(o.frames)?;
    p.threads = b.part::<WriterThread>(o.threads)?;
    p.thread_slots = b.part::<u32>(slots(o.threads)?)?;
    p.stacks = b.part::<u32>(o.threads.checked_mul(MAX_STACK_DEPTH).ok_or(TACHYON_E_ARGUMENT)?)?;
    p.rle = b.part::<u8>(o.threads.checked_mul(rle_budget).ok_or(TACHYON_E_ARGUMENT)?)?;
    p.staging = b.part::<u8>(max_record_len(rle_budget))?;
    if zstd {
        #[cfg(feature = "zstd")]
        {
            use tachyon_core::compression::{compressor_workspace_bytes, workspace_words};
            p.zstd_workspace = b.part::<u64>(workspace_words(compressor_workspace_bytes()))?;
            p.zstd_out = b.part::<u8>(ZSTD_OUT_BYTES)?;
        }
    }
    p.end = b.layout.size();
    Ok(p)
}

/// Bytes of memory a writer with handle `H` and these options needs: the handle, every
/// table, the zstd workspace when compressing, and slack to align any start address.
pub(crate) fn memory_size<H>(o: &tachyon_writer_options) -> Result<usize, i32> {
    plan::<H>(o).and_then(|p| p.end.checked_add(align::<H>() - 1).ok_or(TACHYON_E_ARGUMENT))
}
