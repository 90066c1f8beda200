//! speedscope JSON from a MOJO file as Austin's own pipeline makes it: `mojo2austin` (1.7.1)
//! turns the file into Austin's text, and `austin2speedscope` (austin-python 1.7.1, exporter
//! 0.2.1) turns the text into one sampled profile per process, thread and metric. This runs
//! the same two steps: [`Profiles`] reads Austin's text line by line as `austin2speedscope`
//! does, quirks included, so the JSON is byte for byte the tool's; and [`from_mojo`] feeds it
//! MOJO events, the text made by [`super::austin::AustinText`] except for the lines whose
//! reading the events already tell (nearly all: see `MojoProfiles`).
//!
//! - The metadata header is the leading `# key: value` lines; the line that ends it is read
//!   and dropped, so a file's first sample never counts. `mode` picks the metrics: `wall`
//!   and `cpu` one time profile, `memory` one allocation profile (negative deltas included:
//!   the text has one value), `full` CPU time (time where not idle), wall time, allocations
//!   and deallocations. A blank line ends the samples.
//! - A line is `P<pid>;T<thread>;<frame>;… <metric>`: the metric after the last space, the
//!   thread up to the first `;`, frames split on `;` and each split at its last two `:`
//!   (`file:function:line`), after `;L<digits>` is replaced by `:<digits>` (unless the
//!   frames begin with `;L`). A line that does not parse (a `:GC:` or `:INVALID:` frame, a
//!   name holding `;`, a metric missing) is skipped; numbers parse as Python's `int`.
//! - Per metric, a sample without frames or of weight 0 is skipped; profiles are named
//!   `<Wall time|CPU time|Memory allocation|Memory deallocation> profile for <pid>:<thread>`,
//!   in microseconds or bytes, made in order of first use and listed by the name's last word,
//!   stably; frames are `{name, file, line}` in order of first use.
//! - JSON as Python's `json.dump`: `", "` and `": "` separators, non-ASCII as `\uXXXX`.
//!
//! Where `austin2speedscope` fails (no `mode`, an unknown one, a one-value metric in full
//! mode, a sample line without a thread), this returns an error saying so. Memory: each
//! distinct stack once, and a stack id and a weight per sample and metric (speedscope lists
//! every sample).
//!
//! Modules: `profiles` (what is built, and the errors), `text` (reading the text), `json`
//! (writing), `events` ([`from_mojo`]: MOJO events read as the text they stand for).

mod events;
mod json;
mod profiles;
mod text;

pub use events::{from_mojo, MojoSpeedscopeError};
pub use profiles::{FinishError, Profiles, SpeedscopeError};
