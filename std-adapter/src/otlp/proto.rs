//! The messages of OpenTelemetry's profiles signal this crate writes, as prost encodes them:
//! `opentelemetry/proto/collector/profiles/v1development/profiles_service.proto` and the
//! files it imports, at opentelemetry-proto release **v1.10.0** ([`super::PROTO_VERSION`]).
//! Field numbers and types are that release's; fields this crate never sets (links, profile
//! ids, original payloads, entity references) are left out, which protobuf readers take as
//! unset.

use prost::Message;

/// `collector.profiles.v1development.ExportProfilesServiceRequest`: what an OTLP/HTTP
/// `POST …/v1development/profiles` carries.
#[derive(Clone, PartialEq, Message)]
pub struct ExportProfilesServiceRequest {
    /// One per resource.
    #[prost(message, repeated, tag = "1")]
    pub resource_profiles: Vec<ResourceProfiles>,
    /// The tables every profile of the request indexes into.
    #[prost(message, optional, tag = "2")]
    pub dictionary: Option<ProfilesDictionary>,
}

/// `profiles.v1development.ProfilesDictionary`: tables shared by the request's profiles;
/// entry 0 of each is the zero value, so that index 0 means "none".
#[derive(Clone, PartialEq, Message)]
pub struct ProfilesDictionary {
    /// Mapped binaries.
    #[prost(message, repeated, tag = "1")]
    pub mapping_table: Vec<Mapping>,
    /// Locations.
    #[prost(message, repeated, tag = "2")]
    pub location_table: Vec<Location>,
    /// Functions.
    #[prost(message, repeated, tag = "3")]
    pub function_table: Vec<Function>,
    /// Strings; entry 0 is "".
    #[prost(string, repeated, tag = "5")]
    pub string_table: Vec<String>,
    /// Attributes (key, value, unit).
    #[prost(message, repeated, tag = "6")]
    pub attribute_table: Vec<KeyValueAndUnit>,
    /// Stacks.
    #[prost(message, repeated, tag = "7")]
    pub stack_table: Vec<Stack>,
}

/// `ResourceProfiles`: the profiles of one resource (a service, a process).
#[derive(Clone, PartialEq, Message)]
pub struct ResourceProfiles {
    /// The resource.
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    /// Per instrumentation scope.
    #[prost(message, repeated, tag = "2")]
    pub scope_profiles: Vec<ScopeProfiles>,
}

/// `resource.v1.Resource`.
#[derive(Clone, PartialEq, Message)]
pub struct Resource {
    /// Attributes (`service.name` …).
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
}

/// `ScopeProfiles`: the profiles one instrumentation scope (here: the converter) made.
#[derive(Clone, PartialEq, Message)]
pub struct ScopeProfiles {
    /// The scope.
    #[prost(message, optional, tag = "1")]
    pub scope: Option<InstrumentationScope>,
    /// The profiles, one per sample type.
    #[prost(message, repeated, tag = "2")]
    pub profiles: Vec<Profile>,
}

/// `common.v1.InstrumentationScope`.
#[derive(Clone, PartialEq, Message)]
pub struct InstrumentationScope {
    /// Name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Version.
    #[prost(string, tag = "2")]
    pub version: String,
    /// Attributes.
    #[prost(message, repeated, tag = "3")]
    pub attributes: Vec<KeyValue>,
}

/// `common.v1.KeyValue`.
#[derive(Clone, PartialEq, Message)]
pub struct KeyValue {
    /// Key.
    #[prost(string, tag = "1")]
    pub key: String,
    /// Value.
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

/// `common.v1.AnyValue`, the kinds this crate writes.
#[derive(Clone, PartialEq, Message)]
pub struct AnyValue {
    /// The value.
    #[prost(oneof = "Value", tags = "1, 3")]
    pub value: Option<Value>,
}

/// `AnyValue.value`.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Value {
    /// A string.
    #[prost(string, tag = "1")]
    StringValue(String),
    /// An integer.
    #[prost(int64, tag = "3")]
    IntValue(i64),
}

/// `Profile`: the samples of one sample type.
#[derive(Clone, PartialEq, Message)]
pub struct Profile {
    /// What every value of the samples measures.
    #[prost(message, optional, tag = "1")]
    pub sample_type: Option<ValueType>,
    /// The samples.
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
    /// Start, ns since the epoch.
    #[prost(fixed64, tag = "3")]
    pub time_unix_nano: u64,
    /// Length, ns.
    #[prost(uint64, tag = "4")]
    pub duration_nano: u64,
    /// What the sampling period counts.
    #[prost(message, optional, tag = "5")]
    pub period_type: Option<ValueType>,
    /// The sampling period.
    #[prost(int64, tag = "6")]
    pub period: i64,
    /// Indices into the attribute table.
    #[prost(int32, repeated, tag = "11")]
    pub attribute_indices: Vec<i32>,
}

/// `ValueType`: type and unit as string indices.
#[derive(Clone, PartialEq, Message)]
pub struct ValueType {
    /// Type (string index).
    #[prost(int32, tag = "1")]
    pub type_strindex: i32,
    /// Unit (string index).
    #[prost(int32, tag = "2")]
    pub unit_strindex: i32,
}

/// `Sample`: a stack with its attributes, and its values, one per observation when it has
/// timestamps.
#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    /// Index into the stack table.
    #[prost(int32, tag = "1")]
    pub stack_index: i32,
    /// Indices into the attribute table (`thread.id`).
    #[prost(int32, repeated, tag = "2")]
    pub attribute_indices: Vec<i32>,
    /// Values: one, the total, without timestamps; one per timestamp with them.
    #[prost(int64, repeated, tag = "4")]
    pub values: Vec<i64>,
    /// When each observation was made, ns since the epoch.
    #[prost(fixed64, repeated, tag = "5")]
    pub timestamps_unix_nano: Vec<u64>,
}

/// `Mapping`: a mapped binary.
#[derive(Clone, PartialEq, Message)]
pub struct Mapping {
    /// First address.
    #[prost(uint64, tag = "1")]
    pub memory_start: u64,
    /// One past the last address.
    #[prost(uint64, tag = "2")]
    pub memory_limit: u64,
    /// Offset in the file of `memory_start`.
    #[prost(uint64, tag = "3")]
    pub file_offset: u64,
    /// File name (string index).
    #[prost(int32, tag = "4")]
    pub filename_strindex: i32,
    /// Indices into the attribute table (the build id).
    #[prost(int32, repeated, tag = "5")]
    pub attribute_indices: Vec<i32>,
}

/// `Stack`: location indices, leaf first.
#[derive(Clone, PartialEq, Message)]
pub struct Stack {
    /// Indices into the location table.
    #[prost(int32, repeated, tag = "1")]
    pub location_indices: Vec<i32>,
}

/// `Location`: an address in a mapping, source lines, or both.
#[derive(Clone, PartialEq, Message)]
pub struct Location {
    /// Index into the mapping table (0 = none).
    #[prost(int32, tag = "1")]
    pub mapping_index: i32,
    /// Address (0 = none).
    #[prost(uint64, tag = "2")]
    pub address: u64,
    /// Lines, the functions inlined here first, the caller last.
    #[prost(message, repeated, tag = "3")]
    pub lines: Vec<Line>,
    /// Indices into the attribute table (`profile.frame.type`).
    #[prost(int32, repeated, tag = "4")]
    pub attribute_indices: Vec<i32>,
}

/// `Line`: a function and a position in its file.
#[derive(Clone, PartialEq, Message)]
pub struct Line {
    /// Index into the function table.
    #[prost(int32, tag = "1")]
    pub function_index: i32,
    /// Line (0 = unknown).
    #[prost(int64, tag = "2")]
    pub line: i64,
    /// Column (0 = unknown).
    #[prost(int64, tag = "3")]
    pub column: i64,
}

/// `Function`.
#[derive(Clone, PartialEq, Message)]
pub struct Function {
    /// Name (string index).
    #[prost(int32, tag = "1")]
    pub name_strindex: i32,
    /// Name as the system knows it (string index).
    #[prost(int32, tag = "2")]
    pub system_name_strindex: i32,
    /// Source file (string index).
    #[prost(int32, tag = "3")]
    pub filename_strindex: i32,
    /// First line (0 = unknown).
    #[prost(int64, tag = "4")]
    pub start_line: i64,
}

/// `KeyValueAndUnit`: an attribute of the dictionary.
#[derive(Clone, PartialEq, Message)]
pub struct KeyValueAndUnit {
    /// Key (string index).
    #[prost(int32, tag = "1")]
    pub key_strindex: i32,
    /// Value.
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
    /// Unit (string index; 0 = none).
    #[prost(int32, tag = "3")]
    pub unit_strindex: i32,
}
