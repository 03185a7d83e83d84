//! Strings decoded without trusting their claimed length.

use serde::Deserialize;

/// Decode a string by borrowing it from the input first: the decoder then
/// checks its length against the bytes actually there, instead of
/// allocating whatever length the data claims.
pub(crate) fn owned_from_borrowed<'de, D: serde::Deserializer<'de>>(
    decoder: D,
) -> Result<String, D::Error> {
    let borrowed: &'de str = Deserialize::deserialize(decoder)?;
    Ok(borrowed.to_owned())
}

/// [`owned_from_borrowed`] for a list of strings.
pub(crate) fn owned_list_from_borrowed<'de, D: serde::Deserializer<'de>>(
    decoder: D,
) -> Result<Vec<String>, D::Error> {
    let borrowed: Vec<&'de str> = Deserialize::deserialize(decoder)?;
    Ok(borrowed.into_iter().map(str::to_owned).collect())
}
