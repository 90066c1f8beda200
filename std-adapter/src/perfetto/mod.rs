//! Perfetto traces, as an output (`--to perfetto`): a `Trace` of `TracePacket`s on one
//! sequence, each sample a `TracePacket.stack_sample` whose call stack, frames, function
//! names, source paths and mappings are interned, as Perfetto's UI shows them (a call-stack
//! track per thread, flame graphs of any selection).
//!
//! What the trace holds (the layout of python/cpython#154541, CPython's Perfetto output as a
//! Perfetto maintainer proposed it):
//! - the first packet clears the sequence's incremental state and gives the samples'
//!   defaults: the source (`tachyon`) and the primary counter, `<mode> time` in nanoseconds;
//! - a packet per sample, in the input's order: its time (the input's microseconds, in
//!   nanoseconds), the thread as the task context's `tid` (its low 32 bits: Perfetto's field
//!   is 32-bit), the call stack's interned id, and the sampling interval as its weight; the
//!   interned data it is the first to use rides in the same packet, so every id is defined
//!   before it is used;
//! - frames: function name, source path, line and kind (interpreted for Python frames,
//!   native for frames with an address and CPython's `<native>`, GC for `<GC>`), a native
//!   frame also its mapping and its offset in it; call stacks outermost frame first.
//!
//! - thread states as slices, where the input has them: per thread, a track for each state
//!   it is ever in (`TrackDescriptor` with the thread's `tid`, written before its first
//!   event) — holding the GIL, on CPU, waiting for the GIL, handling an exception (CPython's
//!   status bits; MOJO's on-CPU samples), collecting garbage (a `<GC>` frame) — and a slice
//!   from the first sample in the state to the first sample of that thread out of it (or its
//!   last sample and one interval, at the end): `TrackEvent` begin and end packets.
//!
//! Samples with an empty stack are left out, as every conversion leaves them; MOJO samples
//! are on their threads' timelines (as for the Firefox profiler); an input without sample
//! times (gperftools, pprof) has no timeline and is refused. No pid is written: the files do
//! not record it. CPython's PR also draws opcode and code-type slices; these are not written.
//!
//! The trace streams out as the samples are read: memory follows the distinct frames and
//! stacks, not the samples.

pub mod proto;
pub mod write;
