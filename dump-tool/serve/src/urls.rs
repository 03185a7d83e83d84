//! Ids in URLs: percent-encoding for the links the server writes.

/// Percent-encode everything but unreserved characters and `/`.
pub fn url_path(text: &str) -> String {
    text.split('/')
        .map(url_component)
        .collect::<Vec<_>>()
        .join("/")
}

/// Percent-encode everything but unreserved characters.
pub fn url_component(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
