//! Inputs: one module per format, each a [`crate::model::Source`] that replays its samples
//! into the hub.

pub mod chain;
pub mod gperftools;
pub mod mojo;
pub mod pprof;
pub mod pstats;
pub mod tachyon;
