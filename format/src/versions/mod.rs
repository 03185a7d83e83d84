//! Every format version this crate reads, one module each, and the one
//! place that picks the module for a file's version.
//!
//! - [`current`]: [`VERSION`], the layout [`encode`](crate::encode()) writes:
//!   the model types' own serde layout.
//! - [`v4`]: [`PREVIOUS_VERSION`], a frozen layout (no process context,
//!   runtime names, profiler cost or removed dumps) converted into the
//!   model.
//! - [`v3`]: a frozen layout (no process identity, clocks, live samples,
//!   lifetimes or peak) converted into the model.
//! - [`v2`]: [`LEGACY_VERSION`], a frozen layout (raw counts only)
//!   converted through version 3's.
//!
//! Each frozen layout converts into the next version's, and version 4's
//! into the model.
//!
//! Adding version N+1 (when the model changes its layout): freeze version
//! N's layout in a new module `vN.rs` beside `v3.rs` (the types that change,
//! deserialized and converted into the model; the unchanged ones, such as
//! `Module`, reused), add its arm to [`decode_body`] and its number to
//! [`READABLE_VERSIONS`], bump [`VERSION`], and add a golden dump of N+1
//! to `format/tests/golden/`. `current.rs` and the rest of the crate stay
//! as they are. The golden dumps, one per version, fail until that is
//! done.

pub mod current;
pub mod v2;
pub mod v3;
pub mod v4;

use crate::error::DecodeError;
use crate::model::Dump;

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

/// Decode a checked body of `version` into the model.
pub(crate) fn decode_body(version: u32, body: &[u8]) -> Result<Dump, DecodeError> {
    match version {
        VERSION => current::decode_body(body),
        PREVIOUS_VERSION => v4::decode_body(body),
        VERSION_3 => v3::decode_body(body),
        LEGACY_VERSION => v2::decode_body(body),
        found => Err(DecodeError::UnsupportedVersion { found }),
    }
}
