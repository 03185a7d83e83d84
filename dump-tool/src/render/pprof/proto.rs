//! The messages of pprof's `profile.proto` that heapdiff writes, as
//! `prost` structs written by hand (field numbers from the upstream schema),
//! so no protoc and no build script are needed. Plain data.

use prost::Message;

/// pprof `Profile` (subset: everything heapdiff writes).
#[derive(Clone, PartialEq, Message)]
pub struct PbProfile {
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<PbValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<PbSample>,
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<PbMapping>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<PbLocation>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<PbFunction>,
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<PbValueType>,
    #[prost(int64, tag = "12")]
    pub period: i64,
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// pprof `ValueType`: indexes into the string table.
#[derive(Clone, PartialEq, Message)]
pub struct PbValueType {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// pprof `Sample`: locations leaf first.
#[derive(Clone, PartialEq, Message)]
pub struct PbSample {
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<PbLabel>,
}

/// pprof `Label`.
#[derive(Clone, PartialEq, Message)]
pub struct PbLabel {
    #[prost(int64, tag = "1")]
    pub key: i64,
    #[prost(int64, tag = "2")]
    pub str: i64,
    #[prost(int64, tag = "3")]
    pub num: i64,
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

/// pprof `Mapping`.
#[derive(Clone, PartialEq, Message)]
pub struct PbMapping {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    #[prost(int64, tag = "5")]
    pub filename: i64,
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

/// pprof `Location`: lines innermost (inlined) first.
#[derive(Clone, PartialEq, Message)]
pub struct PbLocation {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    #[prost(uint64, tag = "3")]
    pub address: u64,
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<PbLine>,
}

/// pprof `Line`.
#[derive(Clone, PartialEq, Message)]
pub struct PbLine {
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    #[prost(int64, tag = "2")]
    pub line: i64,
}

/// pprof `Function`.
#[derive(Clone, PartialEq, Message)]
pub struct PbFunction {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(int64, tag = "2")]
    pub name: i64,
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    #[prost(int64, tag = "4")]
    pub filename: i64,
}
