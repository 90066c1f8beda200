//! Where a writer's handle and tables go in the caller's memory: one plan, computed with
//! checked arithmetic from the options, used both to say how many bytes are needed and to
//! carve them up. The memory may have any alignment: the plan asks for enough slack to
//! align the start.

use core::alloc::Layout;
use core::mem::align_of;

use tachyon_core::records::{max_record_len, CPYTHON_RLE_BUDGET, MAX_RLE_ENTRY_LEN, MAX_STACK_DEPTH};
use tachyon_core::storage::{Span, WriterThread};
use tachyon_core::tables::FrameEntry;

use crate::writer::{tachyon_writer, tachyon_writer_options};
use crate::{guard, TACHYON_COMPRESSION_NONE, TACHYON_COMPRESSION_ZSTD, TACHYON_E_ARGUMENT, TACHYON_E_NULL};
use crate::{TACHYON_E_UNSUPPORTED, TACHYON_OK};

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

/// Alignment of the start: the strictest of the handle and the tables.
pub(crate) const ALIGN: usize = {
    let mut a = align_of::<tachyon_writer>();
    if align_of::<u64>() > a {
        a = align_of::<u64>();
    }
    a
};

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

/// The plan for `o`, or the status of what is wrong with the options.
pub(crate) fn plan(o: &tachyon_writer_options) -> Result<Plan, i32> {
    if o.strings == 0 || o.frames == 0 || o.threads == 0 {
        return Err(TACHYON_E_ARGUMENT);
    }
    let rle_budget = if o.rle_budget == 0 { CPYTHON_RLE_BUDGET } else { o.rle_budget };
    if rle_budget < MAX_RLE_ENTRY_LEN || rle_budget > u32::MAX as usize {
        return Err(TACHYON_E_ARGUMENT);
    }
    let zstd = match o.compression {
        TACHYON_COMPRESSION_NONE => false,
        TACHYON_COMPRESSION_ZSTD if cfg!(feature = "zstd") => true,
        TACHYON_COMPRESSION_ZSTD => return Err(TACHYON_E_UNSUPPORTED),
        _ => return Err(TACHYON_E_ARGUMENT),
    };
    let mut b = Builder { layout: Layout::new::<tachyon_writer>() };
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

/// Bytes of memory a writer with these options needs: the handle, every table, the zstd
/// workspace when compressing, and slack to align any start address.
///
/// # Safety
/// `options` and `bytes` must be NULL or valid pointers.
#[no_mangle]
pub unsafe extern "C" fn tachyon_writer_memory_size(options: *const tachyon_writer_options, bytes: *mut usize) -> i32 {
    guard(|| {
        if options.is_null() || bytes.is_null() {
            return TACHYON_E_NULL;
        }
        // SAFETY: checked non-null; the caller promises a valid struct.
        let o = unsafe { &*options };
        match plan(o).and_then(|p| p.end.checked_add(ALIGN - 1).ok_or(TACHYON_E_ARGUMENT)) {
            Ok(n) => {
                // SAFETY: checked non-null.
                unsafe { bytes.write(n) };
                TACHYON_OK
            }
            Err(status) => status,
        }
    })
}
