//! The interactive flamegraph viewer: one self-contained HTML page (viewer
//! script, style and data inline) drawing the [`model::Model`] of a view.
//!
//! The same page is written by `--format html` and served by `heapdiff
//! serve`; it never fetches anything (users open it from disk, offline).
//! The model is built from the pipeline's view like every other format's
//! output, so the view options (`--focus`, `--hide`, `--by-thread`, …)
//! shape it too; the viewer's own transforms, search, zoom and functions
//! table run in the browser on top.

pub mod model;

pub use model::{Link, Model, model};

use super::xml::escape_html;

/// The viewer script, the estimator's rule for it, style and page
/// skeleton, compiled in.
const VIEWER_JS: &str = include_str!("../../../assets/viewer.js");
const STATS_JS: &str = include_str!("../../../assets/stats.js");
const VIEWER_HTML: &str = include_str!("../../../assets/viewer.html");
/// The style of the viewer (the dump list of `heapdiff serve` uses it too).
pub const VIEWER_CSS: &str = include_str!("../../../assets/viewer.css");

/// The whole page: skeleton, style, script and the model as JSON.
pub fn page(model: &Model) -> String {
    let json = serde_json::to_string(model).unwrap_or_else(|_| "null".to_string());
    VIEWER_HTML
        .replace("{{TITLE}}", &escape_html(&model.title))
        .replace("{{CSS}}", VIEWER_CSS)
        .replace("{{STATS_JS}}", &script_safe(STATS_JS))
        .replace("{{JS}}", &script_safe(VIEWER_JS))
        .replace("{{DATA}}", &script_safe(&json))
}

/// Inline script text that cannot close its `<script>` element early.
fn script_safe(text: &str) -> String {
    text.replace("</", "<\\/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_cannot_be_closed_by_data() {
        let text = script_safe(r#"{"name":"</script><b>"}"#);
        assert!(!text.contains("</script"));
    }
}
