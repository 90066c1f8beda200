//! Callgrind's profile format, as KCachegrind and valgrind's `callgrind_annotate` read it.
//! The file's text — its header and its compressed names — is [`text`]'s, used by both
//! writers: [`write`](mod@write) (sampled profiles, from the hub) and
//! [`crate::pstats::callgrind`] (a pstats file's call graph, with its times). A sampled profile has
//! one event, `Samples`; a function is a function name in a file, its costs at source lines
//! (`positions: line`).
//!
//! ```text
//! # callgrind format
//! version: 1
//! creator: tachyon 0.1.0
//! positions: line
//! events: Samples
//! summary: 12
//!
//! fl=(1) app.py           a file, named once, then by its number
//! fn=(1) main             a function of that file
//! 20 3                    3 samples with `main` innermost, at line 20
//! cfn=(2) work            `main` calls `work` (of the same file; `cfl=` names another)
//! calls=9 31              9 samples through that call; `work`'s first line seen: 31
//! 21 9                    ... made at line 21, and their 9 samples
//! ```
//!
//! Self costs are the samples with the function innermost, at the innermost frame's line, as
//! pstats' direct samples. A call's cost is the samples in which the callee runs below that
//! call — once a sample, charged to the call of the callee's outermost frame, as pstats counts
//! a function's cumulative samples once a sample: so a function's incoming calls add up to
//! its cumulative samples however it recurses, which is what `callgrind_annotate
//! --inclusive=yes` prints for a called function. Every stack's outermost function is called
//! by a function `(root)` (file `???`, as valgrind names what it cannot place), so that this
//! holds for the outermost functions too (a thread's entry, a stack cut short) and `(root)`'s
//! inclusive cost is the profile's samples. A call's count is its samples. An empty file or
//! function name is written `???` too.

pub mod text;
pub mod write;
