//! Tachyon, CPython 3.15's binary sampling profile, on std: a file as an input of the hub
//! ([`source`]), written again or from the hub ([`write`](mod@write)), the JSON views CPython's own reader
//! gives of it ([`view`]), CPython's writer-input documents ([`input`]), storage sized from a
//! file's validated metadata ([`storage`]), the zstd region compressed or decompressed in a
//! second thread ([`compress`], [`region`]), and a profile streamed over a link put back
//! together ([`receive`]). The format itself is [`tachyon_core`]'s.

pub mod compress;
pub mod input;
pub mod receive;
pub mod region;
pub mod rotate;
pub mod source;
pub mod storage;
pub mod view;
pub mod write;

/// Whether the process may run on two cores or more (asked of the system once: it reads
/// the cgroup's quota), which a second thread reading or compressing a sample region needs
/// to be worth its start.
pub(crate) fn has_second_core() -> bool {
    static SECOND: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SECOND.get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
}
