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
//! N's layout in a new module `vN.rs` beside `v4.rs` (the types that change,
//! deserialized and converted into the model; the unchanged ones, such as
//! `Module`, reused), add its arm to [`decode_body`], its number to
//! [`READABLE_VERSIONS`](crate::READABLE_VERSIONS) (in `file_layout`), bump
//! [`VERSION`], and add a golden dump of N+1
//! to `format/tests/golden/`. `current.rs` and the rest of the crate stay
//! as they are. The golden dumps, one per version, fail until that is
//! done.

pub mod current;
pub mod v2;
pub mod v3;
pub mod v4;

use crate::error::DecodeError;
use crate::file_layout::{LEGACY_VERSION, PREVIOUS_VERSION, VERSION, VERSION_3};
use crate::model::Dump;

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
