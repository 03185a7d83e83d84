//! The current version ([`VERSION`](super::VERSION)): the body is the
//! model's own serde layout, decoded as it is.

use crate::codec::decode_exactly;
use crate::error::DecodeError;
use crate::model::Dump;

/// Decode a body of the current version.
pub(crate) fn decode_body(body: &[u8]) -> Result<Dump, DecodeError> {
    decode_exactly(body)
}
