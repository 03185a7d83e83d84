//! The numbers the writer and every reader agree on before anything is
//! decoded: the header's magic, length and body limit, and the format
//! versions. A leaf, so the header, the errors and the versions all read
//! them from here.

/// The first eight bytes of every dump.
pub const MAGIC: [u8; 8] = *b"HEAPSMPL";
/// Size of the fixed header in front of the body.
pub const HEADER_LEN: usize = 24;
/// The largest body a reader accepts (1 GiB): anything larger is not a dump
/// this project wrote.
pub const MAX_BODY_LEN: u64 = 1 << 30;

/// The version written by this crate.
pub const VERSION: u32 = 5;
/// The previous version, still read: no process context (architecture,
/// namespaces), runtime names, profiler cost or removed dumps.
pub const PREVIOUS_VERSION: u32 = 4;
/// The version before it, still read: no process identity, clocks, live
/// samples, lifetimes or peak (heapdiff's time views need version 4).
pub const VERSION_3: u32 = 3;
/// The first version whose dumps carry the process's clocks, births,
/// lifetimes and peak: what heapdiff's time views need.
pub const TIMED_VERSION: u32 = 4;
/// The oldest version still read: its stacks carry raw counts only, and
/// [`decode`](crate::decode()) fills their weights with the old average-size
/// correction ([`legacy_weights`](crate::legacy_weights)).
pub const LEGACY_VERSION: u32 = 2;
/// Every version [`decode`](crate::decode()) reads, oldest first.
pub const READABLE_VERSIONS: &[u32] = &[LEGACY_VERSION, VERSION_3, PREVIOUS_VERSION, VERSION];
