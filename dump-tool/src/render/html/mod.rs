//! The interactive flamegraph viewer: one self-contained HTML page (viewer
//! script, style and data inline) drawing the [`model::Model`] of a view.
//!
//! The same page is written by `--format html` and served by `heapdiff
//! serve`; it never fetches anything (users open it from disk, offline).
//! The model is built from the pipeline's view like every other format's
//! output, so the view options (`--focus`, `--hide`, `--by-thread`, …)
//! shape it too; the viewer's own transforms, search, zoom and functions
//! table run in the browser on top. The script is split into modules
//! (`assets/viewer/*.js`, see [`VIEWER_SCRIPTS`]) joined into the page.

pub mod ages;
pub mod model;

pub use model::{Link, Model, model};

use super::xml::escape_html;

/// The viewer's scripts in load order (each defines one `hd…` module the
/// later ones use; `main.js` wires them to the page), compiled in.
pub const VIEWER_SCRIPTS: [(&str, &str); 7] = [
    (
        "format.js",
        include_str!("../../../assets/viewer/format.js"),
    ),
    ("state.js", include_str!("../../../assets/viewer/state.js")),
    ("tree.js", include_str!("../../../assets/viewer/tree.js")),
    ("flame.js", include_str!("../../../assets/viewer/flame.js")),
    ("table.js", include_str!("../../../assets/viewer/table.js")),
    ("ages.js", AGES_JS),
    (
        "sandwich.js",
        include_str!("../../../assets/viewer/sandwich.js"),
    ),
];
/// The age bars of live memory (`assets/viewer/ages.js`): the viewer's, and
/// the growing panel's of `heapdiff serve`.
pub const AGES_JS: &str = include_str!("../../../assets/viewer/ages.js");
const VIEWER_MAIN: &str = include_str!("../../../assets/viewer/main.js");
/// The estimator's rule for a change, for the browser.
pub const STATS_JS: &str = include_str!("../../../assets/stats.js");
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
        .replace("{{JS}}", &script_safe(&viewer_script()))
        .replace("{{DATA}}", &script_safe(&json))
}

/// The viewer's modules and its wiring, as one script.
fn viewer_script() -> String {
    let mut script = String::new();
    for (_, text) in VIEWER_SCRIPTS {
        script.push_str(text);
        script.push('\n');
    }
    script.push_str(VIEWER_MAIN);
    script
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
