//! pprof's `profile.proto` on std: the messages and their schema ([`proto`]), a file as an
//! input of the hub ([`source`]), and the hub written as one ([`write`](mod@write)).

pub mod proto;
mod samples;
pub mod source;
mod tables;
pub mod write;
