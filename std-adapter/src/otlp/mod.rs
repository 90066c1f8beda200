//! OpenTelemetry's profiles signal (OTLP), as an output: the request an OTLP/HTTP exporter
//! sends, `ExportProfilesServiceRequest` with its shared `ProfilesDictionary`, in protobuf
//! (`--to otlp`) or OTLP/JSON (`--to otlp-json`).
//!
//! The signal is still in development and its messages change between releases of
//! opentelemetry-proto, so everything that knows them is this module: the messages
//! ([`proto`]) and the request made of the hub ([`write`](mod@write)). Implemented:
//! [`PROTO_VERSION`].
//!
//! What the request holds:
//! - one resource, `service.name` as asked (`unknown_service` otherwise, as OpenTelemetry's
//!   SDKs name a service nobody named);
//! - one scope, this converter (`tachyon`, its version), with the input's format
//!   ([`attribute::INPUT_FORMAT`]) and what the samples measure ([`attribute::MODE`]);
//! - two profiles, one per sample type, as pprof's two values: `samples`/`count` and
//!   `<mode>`/`nanoseconds` (samples × interval), with the period;
//! - a sample per distinct (stack, thread), with a `thread.id` attribute where the input has
//!   threads; where every sample has a time (Tachyon), a timestamp per observation and a
//!   value per timestamp (1, and the interval in ns), otherwise one value, the total;
//! - stacks, locations, functions and mappings as pprof's ([`crate::model::stacks`]): a
//!   Python frame is a location of one line (function, line, column); a native frame an
//!   address in its mapping, with a line per inlined function when symbolised; each location
//!   says its `profile.frame.type` (`cpython` or `native`); a mapping's GNU build id is its
//!   `process.executable.build_id.gnu` attribute.

pub mod proto;
pub mod write;

/// The opentelemetry-proto release whose `profiles/v1development` messages are implemented.
pub const PROTO_VERSION: &str = "opentelemetry-proto v1.10.0 (opentelemetry.proto.profiles.v1development)";

/// The instrumentation scope's name.
pub const SCOPE_NAME: &str = "tachyon";

/// `service.name` when none is given (OpenTelemetry's name for an unnamed service).
pub const DEFAULT_SERVICE_NAME: &str = "unknown_service";

/// Attribute keys: OpenTelemetry's semantic conventions where they have one, this
/// converter's own (`tachyon.*`) where they do not.
pub mod attribute {
    /// Resource: the service.
    pub const SERVICE_NAME: &str = "service.name";
    /// Sample: the thread.
    pub const THREAD_ID: &str = "thread.id";
    /// Location: `cpython` or `native`.
    pub const FRAME_TYPE: &str = "profile.frame.type";
    /// Mapping: a GNU build id, in hexadecimal.
    pub const BUILD_ID_GNU: &str = "process.executable.build_id.gnu";
    /// Scope: the format the profile was read from (`tachyon info`'s name for it).
    pub const INPUT_FORMAT: &str = "tachyon.input.format";
    /// Scope: what the samples measure (`wall`, `cpu`, `gil` …, pprof's sample type).
    pub const MODE: &str = "tachyon.profiling.mode";
}
