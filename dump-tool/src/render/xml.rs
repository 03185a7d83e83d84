//! Escaping text for XML (SVG) and HTML documents.

/// Text → XML text (element content).
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Text → HTML text that is also safe inside a double-quoted attribute.
pub fn escape_html(text: &str) -> String {
    escape(text).replace('"', "&quot;")
}

/// XML text → text (the entities inferno writes).
pub fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        assert_eq!(escape_html("<a&\">"), "&lt;a&amp;&quot;&gt;");
        assert_eq!(unescape(&escape("f<&>")), "f<&>");
    }
}
