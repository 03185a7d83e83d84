//! Every format version this crate reads, one module each, and the one
//! place that picks the module for a file's version.
//!
//! - [`current`]: [`VERSION`], the layout [`encode`](crate::encode()) writes:
//!   the model types' own serde layout.
//! - [`v2`]: [`LEGACY_VERSION`], a frozen layout converted into the model.
//!
//! Adding a version (when the model changes its layout): freeze the layout
//! being replaced in a new module `v<N>.rs` beside `v2.rs` (the types that
//! change, deserialized and converted into the model; the unchanged ones,
//! such as `Module`, reused), add its arm to [`decode_body`] and its number
//! to [`READABLE_VERSIONS`], and bump [`VERSION`]. `current.rs` and the rest of the
//! crate stay as they are. The golden dumps of `format/tests/versions.rs`,
//! one per version, fail until that is done.

pub mod current;
pub mod v2;

use crate::error::DecodeError;
use crate::model::Dump;

/// The version written by this crate.
pub const VERSION: u32 = 3;
/// The previous version, still read: its stacks carry raw counts only, and
/// [`decode`](crate::decode()) fills their weights with the old average-size
/// correction ([`legacy_weights`](crate::legacy_weights)).
pub const LEGACY_VERSION: u32 = 2;
/// Every version [`decode`](crate::decode()) reads, oldest first.
pub const READABLE_VERSIONS: &[u32] = &[LEGACY_VERSION, VERSION];

/// Decode a checked body of `version` into the model.
pub(crate) fn decode_body(version: u32, body: &[u8]) -> Result<Dump, DecodeError> {
    match version {
        VERSION => current::decode_body(body),
        LEGACY_VERSION => v2::decode_body(body),
        found => Err(DecodeError::UnsupportedVersion { found }),
    }
}
